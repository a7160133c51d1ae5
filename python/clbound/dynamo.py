"""clbound as a TorchDynamo backend: ``torch.compile(model, backend="clbound")``.

Dynamo hands the backend an FX graph; AOTAutograd turns it into a forward and
(when training) a backward graph of aten ops, with symbolic sizes. Each graph is
lowered once to a program of clbound ops on one Context, whose tensors carry
bounds and keep their actual sizes on the device, so every size inside the
bounds runs the same program: no new lowering, no OpenCL build.

Bounds of a symbolic size come from ``torch._dynamo.mark_dynamic(x, dim,
max=N)`` (Dynamo's value range for the symbol), or, for the output of a
data-dependent op inside the graph (``nonzero``, ``masked_select``), from the op
itself (``nonzero`` of an [n, m] input is [<= n*m, 2]). A symbolic input size
with no upper bound is a BackendCompilerFailed naming the input and the dim.

An aten op outside the supported set (``SUPPORTED``) is a graph break: the graph
is split around it, the op runs in eager PyTorch and the rest on clbound; its
name is logged once (logger "clbound.dynamo"). Nothing runs with a wrong result:
what the lowering cannot express runs in eager PyTorch.

Parameters are shared with the device where its buffers are host memory
(PoCL's CPU device: the device tensor is the parameter's memory, so the
optimizer's in-place steps need no copy); elsewhere, and for other inputs, an
input that keeps its storage and version (PyTorch's in-place counter) across
calls is uploaded once and then stays on the device.
Outputs come back as torch tensors of the actual size, all of a call's with
one host sync.

``stats()`` counts frames, lowered graphs, graph breaks, calls, uploads and the
host syncs of the backend's Context. python/README.md, "Using clbound from
torch.compile", has the details.
"""
from __future__ import annotations

import ctypes
import logging
import math
import operator
import os
import threading
import types
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.fx

from . import Context, Tensor
from . import _lib as L

__all__ = ["backend", "config", "context", "stats", "reset_stats", "SUPPORTED", "UnboundedSizeError"]

log = logging.getLogger("clbound.dynamo")
aten = torch.ops.aten
prims = torch.ops.prims

_lock = threading.Lock()
_ctx: Optional[Context] = None
_logged_breaks: set = set()
_STAT_KEYS = ("frames", "graphs_lowered", "graph_breaks", "calls", "uploads", "uploads_skipped", "shared",
              "outputs_shared", "outputs_read", "fused_linear", "fused_op_by_op", "openmp_pauses")
_stats: Dict[str, int] = {k: 0 for k in _STAT_KEYS}


class UnboundedSizeError(ValueError):
    """A symbolic input size whose upper bound is unknown."""


def context() -> Context:
    """The Context the backend runs on (made on first use; CLBOUND_DEVICE and
    the other environment variables choose it as for any Context)."""
    global _ctx
    with _lock:
        if _ctx is None or _ctx._h is None:
            _ctx = Context()
        return _ctx


def stats() -> Dict[str, Any]:
    """The backend's counters: frames Dynamo compiled with it, graphs lowered to
    clbound (a forward and a backward per training frame), graph breaks (aten ops
    run in eager), calls of lowered graphs, tensor uploads and uploads skipped
    (an input unchanged since the last call), fused_linear (runs of a Linear
    layer's ops as one clbound linear op) and fused_op_by_op (runs of such a
    pattern op by op, its tensors not laid out for the fused op), shared
    (parameters given to the device without a copy, once each, on a device whose
    buffers are host memory: their later calls count as uploads_skipped, also
    after the optimizer changed them), outputs_shared (outputs handed to
    PyTorch over the device's memory, no copy, on such a device), outputs_read
    (outputs copied into a torch tensor of the size the inputs give, made
    before the call's wait, which fills it), openmp_pauses
    (calls that paused PyTorch's idle OpenMP threads: config.pause_openmp),
    plus the Context's host syncs, program builds and kernels compiled."""
    out: Dict[str, Any] = dict(_stats)
    out["graph_break_ops"] = sorted(_logged_breaks)
    if _ctx is not None and _ctx._h is not None:
        c = _ctx.counters()
        out["host_syncs"] = c["host_syncs"]
        out["program_builds"] = c["program_builds"]
        out["kernels_compiled"] = c["kernels_compiled"]
    return out


def reset_stats() -> None:
    """Zeroes stats() (not the Context's counters)."""
    for k in _STAT_KEYS:
        _stats[k] = 0


_TORCH_TO_NP = {
    torch.float32: np.float32, torch.float64: np.float64, torch.int64: np.int64, torch.int32: np.int32,
    torch.int16: np.int16, torch.int8: np.int8, torch.uint8: np.uint8, torch.bool: np.bool_,
}


class Unsupported(Exception):
    """An FX node the lowering cannot express (found before anything runs)."""


# ---- values during a run: a clbound Tensor, maybe a lazy transpose ----

class _V:
    """A lowered value: tensor t, read as t.T when trans (2-D only; aten.t is
    free and matmul takes the transposes)."""
    __slots__ = ("t", "trans")

    def __init__(self, t: Tensor, trans: bool = False) -> None:
        self.t = t
        self.trans = trans


class _LazyT(_V):
    """A value of rank 3 or more with its last two dims swapped, copied
    (clb_transpose) only when an op reads it as a tensor (.t): bmm takes the
    source and a transpose flag instead (attention's k^T, bmm's backward)."""
    __slots__ = ("src", "ctx", "dims", "done")

    def __init__(self, ctx: Context, src: Tensor, dims: Tuple[int, int]) -> None:
        self.src, self.ctx, self.dims, self.done = src, ctx, dims, None
        self.trans = False

    @property
    def t(self) -> Tensor:  # type: ignore[override]
        if self.done is None:
            self.done = self.ctx.transpose(self.src, *self.dims)
        return self.done


class _Sym:
    """A host int (a size, or arithmetic on sizes) computed when first needed."""
    __slots__ = ("fn", "v", "done")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn, self.v, self.done = fn, None, False

    def get(self) -> Any:
        if not self.done:
            self.v, self.done = self.fn(), True
        return self.v


def _force(x: Any) -> Any:
    return x.get() if isinstance(x, _Sym) else x


def _meta(node: Any) -> Any:
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _is_sym(d: Any) -> bool:
    return isinstance(d, torch.SymInt) and not d.node.is_constant()


def _reshape_spec(shape: Sequence[Any], what: str) -> List[int]:
    """A reshape spec for a (symbolic) shape: static sizes as they are, the one
    symbolic size as -1 (clbound infers it from the actual element count)."""
    spec = [-1 if _is_sym(d) else int(d) for d in shape]
    if spec.count(-1) > 1:
        raise Unsupported(f"{what} to {list(shape)}: more than one symbolic size")
    return spec


def _np_dtype(dt: torch.dtype, what: str) -> type:
    if dt not in _TORCH_TO_NP:
        raise Unsupported(f"{what}: dtype {dt}")
    return _TORCH_TO_NP[dt]


class _Lowered:
    """One aten graph as a list of clbound steps, built once; __call__ runs it."""

    def __init__(self, gm: torch.fx.GraphModule, name: str, n_user_outputs: Optional[int] = None) -> None:
        self.gm = gm
        self.name = name
        # outputs past the first n_user_outputs are saved for backward: they stay on
        # the device and go back to PyTorch as uninitialised tensors of their shape
        self.n_user = n_user_outputs
        self.ctx = context()
        self.cpu = self.ctx.kernel_style == "cpu"  # the device computes on the host's cores
        self.steps: List[Tuple[torch.fx.Node, Callable[..., Any]]] = []
        self.placeholders: List[torch.fx.Node] = []
        self.output_node: Optional[torch.fx.Node] = None
        # per placeholder: (bounds, dynamic) for tensors, None for others
        self.in_specs: List[Optional[Tuple[Tuple[int, ...], Tuple[bool, ...], type]]] = []
        self.in_cache: Dict[int, Tuple[Any, int, int, Tensor]] = {}
        self.used_shared = False  # this call read a shared parameter (its memory is PyTorch's)
        self.held: List[torch.Tensor] = []  # inputs a queued write reads, until the call's closing sync
        trans: Dict[torch.fx.Node, bool] = {}
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                self.placeholders.append(node)
                self.in_specs.append(_input_spec(node))
                trans[node] = False
            elif node.op == "output":  # a transposed output is transposed on the host
                self.output_node = node
            elif node.op == "call_function":
                fn, tr = _lower_node(node, trans)
                trans[node] = tr
                self.steps.append((node, fn))
            else:
                raise Unsupported(f"FX {node.op} {node.target}")
        _fuse_linear(self.steps)
        # what a call binds and computes of the symbolic sizes, worked out once:
        # per placeholder, its symbols (a SymInt's, or a tensor's dims'), and per
        # output saved for backward, its shape as ints and symbols
        self.binds = [b for b in (_binder(i, n) for i, n in enumerate(self.placeholders)) if b is not None]
        # clb_tensor_new's arguments for each tensor input: (dtype code, rank, bounds, dynamic flags)
        self.new_args = {i: (L.dtype_code(sp[2]), len(sp[0]), L.shape(sp[0], "bounds")[0], L.flags(sp[1], len(sp[0])))
                         for i, sp in enumerate(self.in_specs) if sp is not None}
        self.out_shapes = {a: _shape_parts(a) for a in _flat(self.output_node.args[0])
                           if isinstance(a, torch.fx.Node) and isinstance(_meta(a), torch.Tensor)}
        _stats["graphs_lowered"] += 1

    def _upload(self, i: int, x: Any) -> Any:
        spec = self.in_specs[i]
        if spec is None or not isinstance(x, torch.Tensor):
            return x
        bounds, dynamic, _ = spec
        res = _resident.get(id(x))
        if res is not None and res[0]() is x and res[1] == x._version:
            _stats["uploads_skipped"] += 1
            if res[3] and self.name == "backward":
                # an input its forward handed back for this backward: this is its
                # last use, so the device copy is not kept for as long as the torch
                # tensor lives (a dataset held in memory would pin one per batch);
                # a later forward on the same tensor finds it in its own in_cache
                _resident.pop(id(x), None)
            return res[2]
        hit = self.in_cache.get(i)
        if hit is not None and hit[0]() is x and hit[1] == x._version and hit[2] == x.data_ptr():
            _stats["uploads_skipped"] += 1
            return _V(hit[3])
        if isinstance(x, torch.nn.Parameter) and not any(dynamic):
            t = _share(self.ctx, x)
            if t is not None:
                self.used_shared = True
                return _V(t)
        _stats["uploads"] += 1
        # a new device tensor each time (from clbound's pool): the last one may still
        # be held by a forward's saved tensors that a backward has yet to read
        xc = x.detach()
        if not xc.is_contiguous():
            xc = xc.contiguous()
        npdt = spec[2]
        if xc.device.type == "cpu" and xc.dtype is not torch.bool and _TORCH_TO_NP.get(xc.dtype) is npdt:
            # borrowed: the device copies from the batch's own memory, which this
            # call holds, unchanged, until its closing sync (no copy on this thread);
            # one C call (a pool tensor, one record write), its arguments built once
            ctx = self.ctx
            code, rank, cbounds, cdyn = self.new_args[i]
            h = ctypes.c_void_p()
            dims = (ctypes.c_int64 * max(rank, 1))(*xc.shape)
            self.held.append(xc)
            ctx._check(L.t_new_write_borrowed(ctx._live(), code, rank, cbounds, cdyn, dims, xc.data_ptr(),
                                              xc.numel() * xc.element_size(), None, None, ctypes.byref(h)))
            t = ctx._wrap(h)
        else:
            t = self.ctx.from_dlpack(xc, bounds=bounds, dynamic=dynamic)
        self.in_cache[i] = (weakref.ref(x), x._version, x.data_ptr(), t)
        return _V(t)

    def _read(self, items: List[Tuple[_V, torch.fx.Node]], keep: set, sizes: Dict[Any, int]) -> List[torch.Tensor]:
        """The outputs items ((value, node) pairs) as torch tensors, with one
        host sync. Where the device's buffers are host memory, an output that
        this call's ops made and that no other output, saved tensor or input
        holds goes to PyTorch over the device's memory (no copy; the buffer
        leaves clbound's pool until PyTorch frees it): a backward's gradients,
        for one. Those of static sizes are wrapped before the sync, while the
        device still computes them, so that the call returns right after its
        wait. The others are copied, so that PyTorch's in-place ops on an
        output never change what clbound still reads, and so is an output
        using less than half its buffer. A copy whose sizes the inputs give
        (sizes: the call's symbols) goes straight into a torch tensor made
        before the wait, which the sync fills (clb_tensors_read): no Python
        between the wait and the return. keep: the data buffers
        (Tensor.data_mem) of the inputs and the saved outputs; a view is its
        base's buffer."""
        ts = [v.t for v, _ in items]
        if not _views["on"]:  # every output a copy: those of sizes the inputs give read into their tensors
            out: List[Any] = [None] * len(items)
            self._read_into(ts, self._into(items, ts, out, sizes, lambda k: True), out)
            rest = [k for k, x in enumerate(out) if x is None]
            for k, arr in zip(rest, self.ctx.numpy_all([ts[k] for k in rest])):
                out[k] = _host_torch(arr, *items[k])
            return out
        mems = [t.data_mem for t in ts]
        counts: Dict[int, int] = {}
        for m in mems:
            counts[m] = counts.get(m, 0) + 1
        own = [counts[m] == 1 and m not in keep and getattr(t, "_shared", None) is None for t, m in zip(ts, mems)]
        out = [None] * len(items)
        # static sizes: no wait needed to know them (dims from the graph's shapes, all ints)
        # and wrapped as they are (a transposed or cast one is a copy, which needs the data)
        early = [k for k, o in enumerate(own) if o and _views["early"] and not items[k][0].trans
                 and all(isinstance(p, int) for p in self.out_shapes[items[k][1]])
                 and _TORCH_TO_NP.get(_meta(items[k][1]).dtype) == ts[k].dtype]
        if early:
            try:
                views = self.ctx.numpy_all([ts[k] for k in early], copy=False, sync=False)
            except BufferError as e:  # this device's buffers are not host memory: copies from now on
                _views["on"] = False
                log.info("clbound: outputs are copied to PyTorch (%s)", e)
                return self._read(items, keep, sizes)
            for k, arr in zip(early, views):
                _stats["outputs_shared"] += 1
                out[k] = _host_torch(arr, *items[k])
                # the export holds the buffer: the tensor goes now, while the
                # device computes, and not after the wait
                items[k] = (None, items[k][1])
                ts[k] = None
        # copies (the others, and the small ones of this call's own) of sizes the
        # inputs give: read into their torch tensors by the wait itself
        into = self._into(items, ts, out, sizes, lambda k: not own[k])
        self._read_into(ts, into, out)
        late = [k for k, o in enumerate(own) if o and out[k] is None]
        if late:
            try:
                views = self.ctx.numpy_all([ts[k] for k in late], copy=False)
            except BufferError as e:
                if early:  # exported without a copy a moment ago: not a device lacking host memory
                    raise
                _views["on"] = False
                log.info("clbound: outputs are copied to PyTorch (%s)", e)
                return self._read(items, keep, sizes)
            # an output using less than half its buffer is copied after all: PyTorch
            # may keep it (predictions collected over an epoch), and a buffer is sized
            # at the bounds, not the batch
            for k, arr in zip(late, views):
                if 2 * arr.size < ts[k].bound_numel:
                    arr = arr.copy()  # the export goes with the view
                else:
                    _stats["outputs_shared"] += 1
                out[k] = _host_torch(arr, *items[k])
        rest = [k for k, o in enumerate(own) if not o and out[k] is None]
        if rest:
            for k, arr in zip(rest, self.ctx.numpy_all([ts[k] for k in rest])):
                out[k] = _host_torch(arr, *items[k])
        elif not late and not into:
            self.ctx.sync()  # the one wait: the early views are read only after it
        return out

    def _into(self, items: List[Tuple[Any, torch.fx.Node]], ts: List[Any], out: List[Any], sizes: Dict[Any, int],
              copied: Callable[[int], bool]) -> List[Tuple[int, torch.Tensor]]:
        """(k, a new torch tensor) for each output k not in out yet that is to
        be copied to PyTorch (copied(k), or a small one: its sizes fill less
        than half its buffer) and whose sizes the inputs give (_eval_shape of
        the call's sizes), as it is (not transposed, its dtype the graph's)."""
        into: List[Tuple[int, torch.Tensor]] = []
        for k, (v, a) in enumerate(items):
            if out[k] is not None or v.trans or not _views["early"]:
                continue
            want = _meta(a).dtype
            if _TORCH_TO_NP.get(want) != ts[k].dtype:
                continue
            shape = _eval_shape(self.out_shapes[a], sizes)
            if shape is not None and (copied(k) or 2 * math.prod(shape) < ts[k].bound_numel):
                into.append((k, torch.empty(shape, dtype=want)))
        return into

    def _read_into(self, ts: List[Tensor], into: List[Tuple[int, torch.Tensor]], out: List[Any]) -> None:
        """Reads ts[k] into each (k, tensor) of into (none: nothing) with one
        host sync (clb_tensors_read) and puts the results in out[k]: the
        tensor, or its first elements at the sizes the device gives where they
        are smaller; where they are larger (the tensor too small: nothing
        read), out[k] stays None for every one, for the other paths."""
        if not into:
            return
        shapes = self.ctx._read_to([ts[k] for k, _ in into], [x.data_ptr() for _, x in into],
                                   [x.numel() * x.element_size() for _, x in into], small_ok=True)
        for (k, x), got in zip(into, shapes or ()):
            out[k] = x if got == tuple(x.shape) else x.view(-1)[:math.prod(got)].view(got)
            _stats["outputs_read"] += 1

    def __call__(self, args: List[Any]) -> List[Any]:
        self.held = []
        done = False
        try:
            outs = self._run(args)
            done = True  # the run ended with a host sync: the borrowed writes are done
            return outs
        finally:
            if self.held and not done:  # a borrowed write may still read a batch: wait for it first
                try:
                    self.ctx.sync()
                except Exception:  # the error that got here is the one to report
                    pass
            self.held = []

    def _run(self, args: List[Any]) -> List[Any]:
        _stats["calls"] += 1
        _pause_openmp(self.cpu)
        self.used_shared = False
        sizes: Dict[Any, int] = {}
        env: Dict[Any, Any] = {"__ctx__": self.ctx, "__sizes__": sizes}
        given: Dict[torch.fx.Node, Any] = {}
        for i, (node, x) in enumerate(zip(self.placeholders, args)):
            env[node] = self._upload(i, x)
            given[node] = x
        for i, expr, dims in self.binds:
            x = args[i]
            if dims is None:
                if isinstance(x, int):
                    sizes[expr] = x
            elif isinstance(x, torch.Tensor):
                shape = x.shape
                for d, e in dims:
                    sizes[e] = int(shape[d])
        args.clear()  # boxed calling convention: the caller's list no longer holds the inputs
        for node, fn in self.steps:
            env[node] = fn(self.ctx, env)
        outs: List[Any] = []
        reads: List[Tuple[int, Any]] = []  # (position, node) of the outputs read from the device
        saved: List[Any] = []  # nodes of the outputs saved for backward (they stay on the device)
        for k, a in enumerate(_flat(self.output_node.args[0])):
            if not isinstance(a, torch.fx.Node):
                outs.append(a)
            elif isinstance(env[a], _Sym):
                outs.append(env[a].get())
            elif a in given:  # an input handed back (saved for backward): the caller's own object
                outs.append(given[a])
                if isinstance(given[a], torch.Tensor) and isinstance(env[a], _V):
                    _remember(given[a], env[a], filled=True)  # the backward reuses the upload
            elif self.n_user is not None and k >= self.n_user and isinstance(env[a], _V):
                outs.append(_saved(env[a], a, _eval_shape(self.out_shapes[a], sizes)))
                saved.append(a)
            elif isinstance(env[a], _V):
                reads.append((len(outs), a))
                outs.append(None)
            else:
                outs.append(_force(env[a]))
        if reads:  # every output read with one host sync
            keep = {v.t.data_mem for v in (env[n] for n in self.placeholders) if isinstance(v, _V)}
            keep.update(env[a].t.data_mem for a in saved)
            items = [(env[a], a) for _, a in reads]
            # the intermediates go back to the pool before the wait, not after
            # it (in queue order: a later owner only writes after the ops that
            # read them); the inputs are held by the caches and self.held
            env.clear()
            given.clear()
            for (i, _), x in zip(reads, self._read(items, keep, sizes)):
                outs[i] = x
        elif self.used_shared or self.held:
            # nothing read: wait anyway, before PyTorch may step a shared parameter or
            # change an input whose memory a queued write still reads
            self.ctx.sync()
        return outs


# parameters shared with the device (no copy: the device's buffers are host
# memory): id -> (weakref, data_ptr, shape, dtype, Tensor). The optimizer's
# in-place steps are what the device reads next; a parameter whose storage was
# replaced is shared again.
_shared: Dict[int, Tuple[Any, int, Tuple[int, ...], Any, Tensor]] = {}
_sharing = {"on": True}
# outputs handed to PyTorch over the device's memory (off once the device refuses);
# early: those of static sizes wrapped before the call's wait
_views = {"on": True, "early": True}


def _share(ctx: Context, x: torch.Tensor) -> Optional[Tensor]:
    """x's device tensor sharing its memory, or None where the device copies."""
    if not _sharing["on"] or not x.is_contiguous() or x.device.type != "cpu":
        return None
    key = id(x)
    sh = _shared.get(key)
    if (sh is not None and sh[0]() is x and sh[1] == x.data_ptr() and sh[2] == tuple(x.shape) and sh[3] == x.dtype
            and sh[4].ctx is ctx):
        _stats["uploads_skipped"] += 1
        return sh[4]
    try:
        t = ctx.from_dlpack(x, copy=False)
    except BufferError as e:  # this device copies: every parameter does
        _sharing["on"] = False
        log.info("clbound: parameters are copied to the device at each change (%s)", e)
        return None
    _shared[key] = (weakref.ref(x, lambda _r, k=key: _shared.pop(k, None)), x.data_ptr(), tuple(x.shape), x.dtype, t)
    _stats["shared"] += 1
    return t


# torch tensors whose data is on the device already, for the graphs they are
# passed to next: id -> (weakref, version, _V, filled); filled: the torch tensor
# holds the data too (an input), else it is an uninitialised placeholder
_resident: Dict[int, Tuple[Any, int, _V, bool]] = {}


def _remember(x: torch.Tensor, v: _V, filled: bool) -> None:
    key = id(x)
    _resident[key] = (weakref.ref(x, lambda _r, k=key: _resident.pop(k, None)), x._version, v, filled)


def _binder(i: int, node: torch.fx.Node) -> Optional[Tuple[int, Any, Optional[List[Tuple[int, Any]]]]]:
    """What placeholder i binds of the symbols: (i, the SymInt's symbol, None)
    for a symbolic int, (i, None, [(dim, symbol)]) for a tensor with symbolic
    dims, None for neither."""
    v = _meta(node)
    if isinstance(v, torch.SymInt) and _is_sym(v):
        return i, v.node.expr, None
    if isinstance(v, torch.Tensor):
        dims = [(d, s.node.expr) for d, s in enumerate(v.shape) if _is_sym(s)]
        if dims:
            return i, None, dims
    return None


def _shape_parts(node: torch.fx.Node) -> List[Any]:
    """A value's shape as ints (static dims) and sympy expressions (symbolic ones)."""
    return [s.node.expr if _is_sym(s) else int(s) for s in _meta(node).shape]


def _eval_shape(parts: List[Any], sizes: Dict[Any, int]) -> Optional[List[int]]:
    """The shape of this call from its parts and the inputs' sizes; None when a
    dim depends on a size the inputs do not give (a data-dependent one)."""
    shape = []
    for p in parts:
        if isinstance(p, int):
            shape.append(p)
            continue
        v = sizes.get(p)  # a dim that is one of the inputs' symbols
        if v is None:
            r = p.xreplace(sizes)
            if getattr(r, "free_symbols", None):
                return None
            v = int(r)
        shape.append(v)
    return shape


def _saved(v: _V, node: torch.fx.Node, shape: Optional[List[int]]) -> torch.Tensor:
    """A tensor saved for backward: it stays on the device; PyTorch holds an
    uninitialised tensor of its shape, which the backward graph maps back (no
    copy either way). The shape comes from the inputs' sizes, or from the device
    (a host sync) for a data-dependent one (shape None)."""
    m = _meta(node)
    if shape is None:
        shape = list(v.t.shape)
        if v.trans:
            shape.reverse()
    out = torch.empty(shape, dtype=m.dtype)
    _remember(out, v, filled=False)
    return out


def _materialize(args: List[Any]) -> None:
    """Fills, in place, the tensors saved for backward that a graph about to run
    in eager PyTorch receives (they hold no data on the host until then)."""
    for x in args:
        res = _resident.get(id(x)) if isinstance(x, torch.Tensor) else None
        if res is not None and res[0]() is x and not res[3]:
            v = res[2]
            with torch.no_grad():
                x.copy_(_to_torch(v, None))
            _resident.pop(id(x), None)


def _flat(x: Any) -> List[Any]:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _vector_like(node: torch.fx.Node) -> bool:
    v = _meta(node)
    return v is not None and v.dim() == 2 and any(not _is_sym(d) and int(d) == 1 for d in v.shape)


def _to_torch(v: Any, node: Any) -> Any:
    if not isinstance(v, _V):
        return _force(v)
    return _host_torch(v.t.numpy(), v, node)  # a host copy at the actual sizes: one host sync


def _host_torch(arr: np.ndarray, v: _V, node: Any) -> torch.Tensor:
    """A value read from the device as the torch tensor the graph gives."""
    out = torch.from_numpy(arr)
    if v.trans:
        out = out.t().contiguous()
    want = _meta(node)
    if want is not None and out.dtype != want.dtype:
        out = out.to(want.dtype)
    return out


def _input_spec(node: torch.fx.Node) -> Optional[Tuple[Tuple[int, ...], Tuple[bool, ...], type]]:
    v = _meta(node)
    if not isinstance(v, torch.Tensor):
        return None
    npdt = _np_dtype(v.dtype, f"input {node.name}")
    bounds, dynamic = _bounds(v, node)
    return tuple(bounds), tuple(dynamic), npdt


def _bounds(v: Any, node: torch.fx.Node) -> Tuple[List[int], List[bool]]:
    """(bounds, dynamic flags) of the tensor v of node: a symbolic size's upper
    bound (UnboundedSizeError without one), a static size itself."""
    bounds, dynamic = [], []
    for d, s in enumerate(v.shape):
        if _is_sym(s):
            bounds.append(_upper_bound(s, node, d))
            dynamic.append(True)
        else:
            bounds.append(int(s))
            dynamic.append(False)
    return bounds, dynamic


def _upper_bound(s: torch.SymInt, node: torch.fx.Node, dim: int) -> int:
    expr = s.node.expr
    upper = None
    try:
        upper = s.node.shape_env.bound_sympy(expr).upper
    except Exception:  # an expression the shape env cannot bound
        upper = None
    try:
        ub = int(upper)  # sympy's and torch's infinities raise (or are huge)
    except Exception:
        ub = None
    if ub is not None and 0 <= ub < 2**62:
        return ub
    where = _size_sources(s)
    named = f" (Dynamo's name for it: {', '.join(where)})" if where else ""
    if any("___stack" in w for w in where):
        # a value on the stack of a frame that Dynamo resumed after a graph break:
        # eager PyTorch made it, and no one can mark it
        hint = ("it is the size of a value that eager PyTorch made before a graph break, which cannot be marked; "
                "keep the op that makes it in the graph (for nonzero and masked_select: "
                "torch._dynamo.config.capture_dynamic_output_shape_ops = True, whose outputs are bounded by "
                "their inputs' sizes)")
    else:
        hint = (f"give one with torch._dynamo.mark_dynamic(x, {dim}, min=2, max=N) on that input before calling "
                "the compiled model")
    raise UnboundedSizeError(
        f"clbound: input '{node.name}' dim {dim} has the symbolic size {expr}{named} with no upper bound; {hint} "
        "(clbound allocates every dynamic dim at its bound)")


def _shape_bounds(shape: Sequence[Any], node: torch.fx.Node, name: str) -> Tuple[List[int], List[bool]]:
    """_bounds of a shape (ints and SymInts) a lowering needs: a size with no
    upper bound breaks the graph (Unsupported)."""
    try:
        return _bounds(_Shape(shape), node)
    except UnboundedSizeError as e:
        raise Unsupported(f"{name}: {e}") from None


def _lowering_bounds(node: torch.fx.Node, name: str) -> Tuple[List[int], List[bool]]:
    """_bounds of an intermediate value, for a lowering that needs them: a
    size with no upper bound breaks the graph (Unsupported) rather than
    failing the compile, as it would for an input."""
    try:
        return _bounds(_meta(node), node)
    except UnboundedSizeError as e:
        raise Unsupported(f"{name}: {e}") from None


def _size_sources(s: torch.SymInt) -> List[str]:
    """Dynamo's names of where a symbolic size comes from (L['x'].size()[0]),
    as its shape env recorded them; empty where it has none."""
    try:
        srcs = s.node.shape_env.var_to_sources.get(s.node.expr, [])
        return [x.name if isinstance(x.name, str) else x.name() for x in srcs]
    except Exception:  # a shape env without sources (an older or newer torch)
        return []


# ---- the aten ops ----

def _arg(env: Dict[Any, Any], a: Any) -> Any:
    if isinstance(a, torch.fx.Node):
        return env[a]
    return a


def _lower_put(node: torch.fx.Node, name: str, val: Callable[..., Any]) -> Callable[..., Any]:
    """slice_backward / select_backward (zeros of the input's sizes, the
    gradient written into the slice or the index) and slice_scatter /
    select_scatter (a copy of x, src written there): clb_basic_index_put in
    place into a new tensor. The input's sizes are the host ints Dynamo passes."""
    tgt, args, kw = node.target, list(node.args), node.kwargs
    backward = tgt in (aten.slice_backward.default, aten.select_backward.default)
    if tgt is aten.slice_backward.default:
        src, base, sizes, dim, start, end, step = args[0], None, args[1], args[2], args[3], args[4], args[5]
    elif tgt is aten.select_backward.default:
        src, base, sizes, dim, start, end, step = args[0], None, args[1], args[2], args[3], None, None
    elif tgt is aten.slice_scatter.default:
        rest = (args[2:] + [None] * 4)[:4]
        dim, start, end, step = (kw.get(k, v) for k, v in zip(("dim", "start", "end", "step"), rest))
        base, src, sizes, dim, step = args[0], args[1], None, 0 if dim is None else dim, 1 if step is None else step
    else:
        base, src, sizes, dim, start, end, step = args[0], args[1], None, args[2], args[3], None, None
    select = tgt in (aten.select_backward.default, aten.select_scatter.default)
    want = _meta(node)
    if not isinstance(dim, int) or want is None or (select and not isinstance(start, int)) or (
            not select and (not isinstance(step, int) or step <= 0)):
        raise Unsupported(f"{name}: dim {dim}, start {start}, step {step}")
    dim %= want.dim()
    npdt = _np_dtype(want.dtype, name)
    bounds, dynamic = _bounds(want, node)

    def put(ctx: Context, env: Dict[Any, Any]) -> _V:
        if backward:
            actual = [int(_force(_arg(env, s))) for s in sizes]
            out = ctx.zeros(tuple(bounds), npdt, dynamic=tuple(dynamic), sizes=tuple(actual))
        else:
            out = ctx.unary("copy", val(env, base))
        if select:
            key: Any = start
        else:
            lo, hi = (None if v is None else int(_force(_arg(env, v))) for v in (start, end))
            key = slice(lo, hi, step)
        ctx.setitem(out, (slice(None),) * dim + (key,), val(env, src))
        return _V(out)
    return put


def _lower_activation(node: torch.fx.Node, name: str, val: Callable[..., Any]) -> Callable[..., Any]:
    """The activations of torch.nn without a clbound op of their own, and their
    backwards, from clbound's elementwise ops: clamp and hardtanh as maximum
    and minimum with scalars (NaN stays NaN, as PyTorch's), leaky_relu and elu
    as where, silu as x * sigmoid(x), gelu from erf (or tanh), softplus and
    mish from exp and log1p, hardswish from maximum and minimum, with
    PyTorch's formulas (aten's CPU kernels) op for op; logical_and / logical_or
    of masks."""
    tgt, args, kw = node.target, list(node.args), node.kwargs

    def arg(i: int, key: str, default: Any) -> Any:
        v = args[i] if len(args) > i else kw.get(key, default)
        if not isinstance(v, torch.fx.Node) and v is not None:
            _scalar(v, name)
        return v
    if tgt in (aten.clamp.default, aten.hardtanh.default):
        lo, hi = (arg(1, "min", None), arg(2, "max", None)) if tgt is aten.clamp.default else (
            arg(1, "min_val", -1.0), arg(2, "max_val", 1.0))
        if isinstance(lo, torch.fx.Node) or isinstance(hi, torch.fx.Node):
            raise Unsupported(f"{name}: tensor bounds")

        def clamp(ctx: Context, env: Dict[Any, Any]) -> _V:
            y = val(env, args[0])
            y = ctx.maximum(y, lo) if lo is not None else ctx.unary("copy", y)
            return _V(_cast_to(ctx, ctx.minimum(y, hi) if hi is not None else y, node))
        return clamp
    if tgt is aten.hardtanh_backward.default:
        lo, hi = arg(2, "min_val", -1.0), arg(3, "max_val", 1.0)

        def hardtanh_bw(ctx: Context, env: Dict[Any, Any]) -> _V:
            x = val(env, args[1])
            inside = ctx.binary("mul", ctx.compare("gt", x, lo), ctx.compare("lt", x, hi))  # and, of bools
            return _V(ctx.where(inside, val(env, args[0]), 0.0))
        return hardtanh_bw
    if tgt in (aten.leaky_relu.default, aten.leaky_relu_backward.default):
        # x > 0 ? v : v * slope, with v = x (forward) or the gradient (backward)
        bw = tgt is aten.leaky_relu_backward.default
        slope = arg(2 if bw else 1, "negative_slope", 0.01)

        def leaky(ctx: Context, env: Dict[Any, Any]) -> _V:
            v = val(env, args[0])  # each operand made once (a transposed one is a copy)
            x = val(env, args[1]) if bw else v
            return _V(ctx.where(ctx.compare("gt", x, 0), v, ctx.mul(v, slope)))
        return leaky
    if tgt is aten.silu.default:

        def silu(ctx: Context, env: Dict[Any, Any]) -> _V:
            x = val(env, args[0])
            return _V(ctx.mul(x, ctx.unary("sigmoid", x)))
        return silu
    if tgt is aten.silu_backward.default:  # dy * s * (1 + x * (1 - s)), s = sigmoid(x)

        def silu_bw(ctx: Context, env: Dict[Any, Any]) -> _V:
            dy, x = val(env, args[0]), val(env, args[1])
            sg = ctx.unary("sigmoid", x)
            return _V(ctx.mul(ctx.mul(dy, sg), ctx.add(ctx.mul(x, ctx.sub(1.0, sg)), 1.0)))
        return silu_bw
    if tgt in (aten.elu.default, aten.elu_backward.default):
        bw = tgt is aten.elu_backward.default
        alpha, scale, in_scale = (arg(1, "alpha", 1.0), arg(2, "scale", 1.0), arg(3, "input_scale", 1.0))
        is_result = arg(4, "is_result", False) if bw else False
        if scale != 1 or in_scale != 1:
            raise Unsupported(f"{name}: scale {scale}, input_scale {in_scale}")
        if not bw:  # x > 0 ? x : alpha * expm1(x)

            def elu(ctx: Context, env: Dict[Any, Any]) -> _V:
                x = val(env, args[0])
                return _V(ctx.where(ctx.compare("gt", x, 0), x, ctx.mul(ctx.unary("expm1", x), alpha)))
            return elu
        z = args[5]  # elu's input, or its output when is_result

        def elu_bw(ctx: Context, env: Dict[Any, Any]) -> _V:
            dy, v = val(env, args[0]), val(env, z)
            slope = ctx.add(v, alpha) if is_result else ctx.mul(ctx.unary("exp", v), alpha)
            return _V(ctx.where(ctx.compare("gt", v, 0), dy, ctx.mul(dy, slope)))
        return elu_bw
    if tgt in (aten.gelu.default, aten.gelu_backward.default):
        bw = tgt is aten.gelu_backward.default
        approx = kw.get("approximate", args[2 if bw else 1] if len(args) > (2 if bw else 1) else "none")
        if approx not in ("none", "tanh"):
            raise Unsupported(f"{name}: approximate={approx!r}")
        xi = 1 if bw else 0

        def gelu(ctx: Context, env: Dict[Any, Any]) -> _V:
            x = val(env, args[xi])
            if approx == "none":  # cdf = (1 + erf(x / sqrt 2)) / 2
                cdf = ctx.mul(ctx.add(ctx.unary("erf", ctx.mul(x, _SQRT1_2)), 1.0), 0.5)
                if not bw:
                    return _V(ctx.mul(x, cdf))
                pdf = ctx.mul(ctx.unary("exp", ctx.mul(ctx.mul(x, x), -0.5)), _INV_SQRT_2PI)
                return _V(ctx.mul(val(env, args[0]), ctx.add(cdf, ctx.mul(x, pdf))))
            # tanh: inner = sqrt(2 / pi) * (x + 0.044715 x^3)
            x2 = ctx.mul(x, x)
            th = ctx.unary("tanh", ctx.mul(ctx.add(x, ctx.mul(ctx.mul(x2, x), _GELU_KAPPA)), _SQRT_2_PI))
            right = ctx.add(th, 1.0)
            if not bw:
                return _V(ctx.mul(ctx.mul(x, 0.5), right))
            # d/dx: right / 2 + x / 2 * (1 - th^2) * sqrt(2 / pi) * (1 + 3 * 0.044715 x^2)
            inner_d = ctx.mul(ctx.add(ctx.mul(x2, 3 * _GELU_KAPPA), 1.0), _SQRT_2_PI)
            right_d = ctx.mul(ctx.mul(ctx.mul(x, 0.5), ctx.sub(1.0, ctx.mul(th, th))), inner_d)
            return _V(ctx.mul(val(env, args[0]), ctx.add(ctx.mul(right, 0.5), right_d)))
        return gelu
    if tgt in (aten.softplus.default, aten.softplus_backward.default):
        bw = tgt is aten.softplus_backward.default
        beta, threshold = arg(2 if bw else 1, "beta", 1.0), arg(3 if bw else 2, "threshold", 20.0)
        xi = 1 if bw else 0

        def softplus(ctx: Context, env: Dict[Any, Any]) -> _V:
            x = val(env, args[xi])
            z = ctx.mul(x, beta)
            big = ctx.compare("gt", z, threshold)
            if bw:  # z > threshold ? dy : dy * sigmoid(z)
                dy = val(env, args[0])
                return _V(ctx.where(big, dy, ctx.mul(dy, ctx.unary("sigmoid", z))))
            return _V(ctx.where(big, x, ctx.div(ctx.unary("log1p", ctx.unary("exp", z)), beta)))
        return softplus
    if tgt in (aten.hardswish.default, aten.hardswish_backward.default):
        bw = tgt is aten.hardswish_backward.default

        def hardswish(ctx: Context, env: Dict[Any, Any]) -> _V:
            x = val(env, args[1 if bw else 0])
            if not bw:  # x * min(max(x + 3, 0), 6) / 6
                return _V(ctx.div(ctx.mul(x, ctx.minimum(ctx.maximum(ctx.add(x, 3.0), 0.0), 6.0)), 6.0))
            dy = val(env, args[0])  # x < -3: 0; x <= 3: dy * (x / 3 + 0.5); else dy
            mid = ctx.where(ctx.compare("le", x, 3.0), ctx.mul(dy, ctx.add(ctx.div(x, 3.0), 0.5)), dy)
            return _V(ctx.where(ctx.compare("lt", x, -3.0), 0.0, mid))
        return hardswish
    if tgt is aten.bitwise_not.default:  # ~ of a bool mask: logical not (of integers: a graph break)
        if not (isinstance(_meta(args[0]), torch.Tensor) and _meta(args[0]).dtype == torch.bool):
            raise Unsupported(f"{name}: of integers")
        return lambda ctx, env: _V(ctx.logical_not(val(env, args[0])))
    if tgt is aten.isnan.default:  # x != x: true for NaN only (IEEE 754); never for integers
        return lambda ctx, env: _V(ctx.compare("ne", val(env, args[0]), val(env, args[0])))
    if tgt in (aten.zeros_like.default, aten.ones_like.default, aten.full_like.default, aten.empty_like.default):
        # x's dtype cast to the result's (its sizes), then every element set (empty_like's: zeros)
        value = (1 if tgt is aten.ones_like.default else _scalar(args[1], name) if tgt is aten.full_like.default
                 else 0)
        if kw.get("memory_format") not in (None, torch.preserve_format, torch.contiguous_format):
            raise Unsupported(f"{name}: memory_format")
        npdt = _np_dtype(_meta(node).dtype, name)

        def like(ctx: Context, env: Dict[Any, Any]) -> _V:
            t = ctx.cast(val(env, args[0]), npdt)
            ctx.fill(t, value)
            return _V(t)
        return like
    if tgt is aten.reciprocal.default:
        def reciprocal(ctx: Context, env: Dict[Any, Any]) -> _V:
            x = val(env, args[0])
            return _V(ctx.div(1.0, _cast_to(ctx, x, node)))
        return reciprocal
    if tgt in (aten.sign.default, aten.sgn.default):  # 1, -1 or 0 (NaN gives 0, as PyTorch's)

        def sign(ctx: Context, env: Dict[Any, Any]) -> _V:
            x = val(env, args[0])
            s = ctx.where(ctx.compare("gt", x, 0), 1, ctx.where(ctx.compare("lt", x, 0), -1, 0))
            return _V(_cast_to(ctx, s, node))
        return sign
    if tgt in (aten.clamp_min.default, aten.clamp_max.default, aten.clamp_min.Tensor, aten.clamp_max.Tensor):
        fn = "maximum" if tgt in (aten.clamp_min.default, aten.clamp_min.Tensor) else "minimum"
        bound = args[1]
        if not isinstance(bound, torch.fx.Node):
            _scalar(bound, name)
        return lambda ctx, env: _V(_cast_to(ctx, ctx.binary(fn, val(env, args[0]), val(env, bound)), node))
    if tgt in (aten.log_sigmoid_forward.default, aten.log_sigmoid_backward.default):
        # aten's CPU kernels: out = min(x, 0) - log1p(z), buffer z = exp(-|x|); the
        # gradient dy * ((x < 0) - (x < 0 ? 1 : -1) * z / (1 + z))
        if tgt is aten.log_sigmoid_forward.default:
            def log_sigmoid(ctx: Context, env: Dict[Any, Any]) -> Tuple[_V, _V]:
                x = val(env, args[0])
                z = ctx.unary("exp", ctx.neg(ctx.abs(x)))
                return _V(ctx.sub(ctx.minimum(x, 0.0), ctx.unary("log1p", z))), _V(z)
            return log_sigmoid

        def log_sigmoid_bw(ctx: Context, env: Dict[Any, Any]) -> _V:
            dy, x, z = (val(env, a) for a in args[:3])
            neg = ctx.compare("lt", x, 0.0)
            frac = ctx.div(z, ctx.add(z, 1.0))
            d = ctx.where(neg, ctx.sub(1.0, frac), frac)
            return _V(ctx.mul(dy, d))
        return log_sigmoid_bw
    if tgt is aten.binary_cross_entropy_with_logits.default:
        # aten's: (1 - t) * x - log_sigmoid(x), then the reduction; weight and
        # pos_weight break the graph (its backward is ops PyTorch decomposes)
        weight, pos_weight = arg(2, "weight", None), arg(3, "pos_weight", None)
        reduction = arg(4, "reduction", 1)
        if weight is not None or pos_weight is not None or reduction not in (0, 1, 2):
            raise Unsupported(f"{name}: weight, pos_weight or reduction {reduction}")

        def bce_logits(ctx: Context, env: Dict[Any, Any]) -> _V:
            x, t = val(env, args[0]), val(env, args[1])
            ls = ctx.sub(ctx.minimum(x, 0.0), ctx.unary("log1p", ctx.unary("exp", ctx.neg(ctx.abs(x)))))
            loss = ctx.sub(ctx.mul(ctx.sub(1.0, t), x), ls)
            return _V(loss if reduction == 0 else ctx.reduce_all("mean" if reduction == 1 else "sum", loss))
        return bce_logits
    if tgt in (aten.mish.default, aten.mish_backward.default):
        bw = tgt is aten.mish_backward.default

        def mish(ctx: Context, env: Dict[Any, Any]) -> _V:
            x = val(env, args[1 if bw else 0])
            # tanh(log1p(exp(x))): past 20 it is 1 in any float, and exp may overflow
            ts = ctx.unary("tanh", ctx.where(ctx.compare("gt", x, 20.0), x, ctx.unary("log1p", ctx.unary("exp", x))))
            if not bw:
                return _V(ctx.mul(x, ts))
            # dy * (ts + x * sigmoid(x) * (1 - ts^2))
            d = ctx.add(ts, ctx.mul(ctx.mul(x, ctx.unary("sigmoid", x)), ctx.sub(1.0, ctx.mul(ts, ts))))
            return _V(ctx.mul(val(env, args[0]), d))
        return mish
    if tgt in (aten.bitwise_and.Tensor, aten.bitwise_or.Tensor) and any(
            not (isinstance(_meta(v), torch.Tensor) and _meta(v).dtype == torch.bool) for v in args[:2]):
        raise Unsupported(f"{name}: of integers")  # of bools (&, | of masks) they are logical_and / _or
    op = "mul" if tgt in (aten.logical_and.default, aten.bitwise_and.Tensor) else "add"  # of bools: and, or

    def logical(ctx: Context, env: Dict[Any, Any]) -> _V:
        a, b = (val(env, v) for v in args[:2])
        a, b = (t if t.dtype == np.bool_ else ctx.compare("ne", t, 0) for t in (a, b))
        return _V(ctx.binary(op, a, b))
    return logical


def _lower_layer_norm(node: torch.fx.Node, name: str, val: Callable[..., Any]) -> Callable[..., Any]:
    """native_layer_norm over the last dim, as (out, mean, rstd) with aten's
    shapes (mean and rstd keep the dim as 1), and its backward as (dx, dweight,
    dbias) where output_mask asks (None elsewhere): from mean over the last dim,
    pow(var + eps, -0.5) and sums over the leading dims, at the actual sizes.
    dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * weight, xhat
    the normalized input."""
    args = list(node.args)
    bw = node.target is aten.native_layer_norm_backward.default
    x_node, shape = (args[1], args[2]) if bw else (args[0], args[1])
    m = _meta(x_node)
    if m is None or m.dim() < 1 or len(shape) != 1 or not m.dtype.is_floating_point:
        raise Unsupported(f"{name}: normalized over {len(shape)} dims of a {getattr(m, 'dtype', None)} input "
                          "(clbound normalizes floats over the last dim)")
    last = m.dim() - 1
    if not bw:
        w, b, eps = args[2], args[3], args[4]
        _scalar(eps, name)

        def layer_norm(ctx: Context, env: Dict[Any, Any]) -> Tuple[_V, _V, _V]:
            x = val(env, x_node)
            mean = ctx.reduce_dim("mean", x, last, True)
            xc = ctx.sub(x, mean)
            rstd = ctx.pow(ctx.add(ctx.reduce_dim("mean", ctx.mul(xc, xc), last, True), eps), -0.5)
            y = ctx.mul(xc, rstd)
            if w is not None:
                y = ctx.mul(y, val(env, w))
            if b is not None:
                y = ctx.add(y, val(env, b))
            return _V(y), _V(mean), _V(rstd)
        return layer_norm
    dy_node, mean_node, rstd_node, w, b, mask = args[0], args[3], args[4], args[5], args[6], args[7]

    def lead_sum(ctx: Context, t: Tensor) -> Tensor:
        for d in reversed(range(last)):
            t = ctx.reduce_dim("sum", t, d, False)
        return t

    def layer_norm_bw(ctx: Context, env: Dict[Any, Any]) -> Tuple[Optional[_V], ...]:
        dy, rstd = val(env, dy_node), val(env, rstd_node)
        xhat = ctx.mul(ctx.sub(val(env, x_node), val(env, mean_node)), rstd)
        dx = dw = db = None
        if mask[0]:
            g = ctx.mul(dy, val(env, w)) if w is not None else dy
            mg, mgx = (ctx.reduce_dim("mean", t, last, True) for t in (g, ctx.mul(g, xhat)))
            dx = _V(ctx.mul(ctx.sub(ctx.sub(g, mg), ctx.mul(xhat, mgx)), rstd))
        if mask[1] and w is not None:
            dw = _V(lead_sum(ctx, ctx.mul(dy, xhat)))
        if mask[2] and b is not None:
            db = _V(lead_sum(ctx, dy))
        return dx, dw, db
    return layer_norm_bw


def _lower_cat(node: torch.fx.Node, name: str, val: Callable[..., Any]) -> Callable[..., Any]:
    """cat as clb_cat two at a time (ctx.cat), each input cast to the result's
    dtype first (PyTorch's promotion), legacy empty 1-D inputs left out; the
    bounds beside dim must agree (else a graph break), and along dim they add,
    a dynamic batch dim included. Its backward is slices of the gradient."""
    args, kw = list(node.args), node.kwargs
    parts = [a for a in args[0] if not (isinstance(_meta(a), torch.Tensor) and _meta(a).shape == (0,))]
    want = _meta(node)
    dim = args[1] if len(args) > 1 else kw.get("dim", 0)
    metas = [_meta(a) for a in parts]
    if not parts or want is None or any(not isinstance(m, torch.Tensor) or m.dim() != want.dim() for m in metas):
        raise Unsupported(f"{name}: inputs of other ranks")
    d0 = dim % want.dim()
    bounds = [_bounds(m, a)[0] for m, a in zip(metas, parts)]
    if any(b[:d0] + b[d0 + 1:] != bounds[0][:d0] + bounds[0][d0 + 1:] for b in bounds):
        raise Unsupported(f"{name}: bounds {bounds} differ beside dim {d0}")

    def cat(ctx: Context, env: Dict[Any, Any]) -> _V:
        return _V(ctx.cat([_cast_to(ctx, val(env, a), node) for a in parts], d0))
    return cat


def _lower_var(node: torch.fx.Node, name: str, val: Callable[..., Any]) -> Callable[..., Any]:
    """prims.var(x, dims, correction), what var, std, var_mean and std_mean
    decompose to: sum((x - mean)^2) over dims / (n - correction), the mean's
    dims kept. n, the count over the reduced dims, comes from the inputs' sizes
    where they give it (a host number, no sync), else it is counted on the
    device (a data-dependent size: still no host sync). The divisor is
    max(n - correction, 0), as in PyTorch (ATen's Welford projection), so
    n <= correction gives inf or NaN."""
    args, kw = node.args, node.kwargs
    src = args[0]
    m = _meta(src)
    dims = args[1] if len(args) > 1 else kw.get("dims")
    corr = args[2] if len(args) > 2 else kw.get("correction", 1.0)
    if not isinstance(m, torch.Tensor) or not m.dtype.is_floating_point:
        raise Unsupported(f"{name}: of {getattr(m, 'dtype', m)}")
    if isinstance(corr, torch.fx.Node) or not isinstance(corr, (int, float)):
        raise Unsupported(f"{name}: correction {corr}")
    rank = m.dim()
    ds = sorted({d % rank for d in dims}, reverse=True) if dims and rank else list(range(rank - 1, -1, -1))
    counted = [_shape_parts(src)[d] for d in ds]

    def var(ctx: Context, env: Dict[Any, Any]) -> _V:
        x = val(env, src)
        mean = x
        for d in ds:
            mean = ctx.reduce_dim("mean", mean, d, True)
        dev = ctx.sub(x, mean)
        sq = ctx.mul(dev, dev)
        for d in ds:
            sq = ctx.reduce_dim("sum", sq, d, False)
        n = _eval_shape(counted, env["__sizes__"])
        if n is not None:
            return _V(_cast_to(ctx, ctx.div(sq, max(float(np.prod(n, dtype=np.int64)) - corr, 0.0)), node))
        count = ctx.cast(x, x.dtype)
        ctx.fill(count, 1)
        for d in ds:
            count = ctx.reduce_dim("sum", count, d, False)
        return _V(_cast_to(ctx, ctx.div(sq, ctx.maximum(ctx.sub(count, float(corr)), 0.0)), node))
    return var


def _first_hit(ctx: Context, hit: Tensor, iota: Tensor, size: int, d: int, keepdim: bool) -> Tensor:
    """The first position along d where hit holds (size, more than any
    position, where none does): min over where(hit, iota, size), as -max(-.)."""
    return ctx.neg(ctx.reduce_dim("max", ctx.neg(ctx.where(hit, iota, size)), d, keepdim))


def _lower_extreme(node: torch.fx.Node, name: str, val: Callable[..., Any]) -> Callable[..., Any]:
    """amin, argmax/argmin and max.dim/min.dim (values and indices) over one
    dim (or, for argmax/argmin, over all of a static tensor), from
    clbound's max reduction: min(x) = -max(-x) (floating dtypes: negating an
    integer's lowest value would wrap); the index is the first position that
    holds the extreme, min over where(x == extreme or x is NaN, iota, size)
    (NaN is the extreme where present, as in PyTorch). About eight launches.
    Over a dynamic dim (max-pooling over a sequence) the positions are those
    of the call's own size (_positions); over a size only the device knows
    the graph breaks."""
    args, kw = node.args, node.kwargs
    tgt = node.target
    kind = _EXTREME[tgt]
    src = args[0]
    m = _meta(src)
    dim = args[1] if len(args) > 1 else kw.get("dim")
    keepdim = bool(args[2] if len(args) > 2 else kw.get("keepdim", False))
    if not isinstance(m, torch.Tensor) or m.dtype == torch.bool or (kind == "min" and not m.dtype.is_floating_point):
        raise Unsupported(f"{name}: of {getattr(m, 'dtype', m)}")
    rank = m.dim()
    flat = dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0 and rank > 0)
    if tgt is aten.amin.default:
        if flat or len(_flat(dim)) != 1:
            raise Unsupported(f"{name}: over dims {dim}")
        dim = _flat(dim)[0]
    if flat and (tgt not in (aten.argmax.default, aten.argmin.default) or any(_is_sym(d) for d in m.shape)):
        raise Unsupported(f"{name}: over all dims of {list(m.shape)}")
    shape = [m.numel()] if flat else list(m.shape)
    d = 0 if flat or rank == 0 else dim % rank
    if rank == 0:
        raise Unsupported(f"{name}: over a 0-d tensor")
    positions = _positions(src, shape[d], len(shape), d, name)
    # more than any position: the dim's bound
    size = _shape_bounds([shape[d]], src, name)[0][0]

    def extreme(ctx: Context, x: Tensor, keep: bool) -> Tensor:
        if kind == "max":
            return ctx.reduce_dim("max", x, d, keep)
        return ctx.unary("neg", ctx.reduce_dim("max", ctx.unary("neg", x), d, keep))

    def where_first(ctx: Context, env: Dict[Any, Any], x: Tensor, top: Tensor) -> Tensor:
        iota = positions(ctx, env)
        hit = ctx.compare("eq", x, top)
        if m.dtype.is_floating_point:
            hit = ctx.logical_or(hit, ctx.compare("ne", x, x))
        return _first_hit(ctx, hit, iota, size, d, keepdim)

    def run(ctx: Context, env: Dict[Any, Any]) -> Any:
        x = val(env, src)
        if flat:
            x = ctx.reshape(x, (size,))
        if tgt is aten.amin.default:
            return _V(extreme(ctx, x, keepdim))
        top = extreme(ctx, x, True)
        idx = where_first(ctx, env, x, top)
        if tgt in (aten.argmax.default, aten.argmin.default):
            return _V(ctx.reshape(idx, [1] * rank) if flat and keepdim else idx)
        values = top if keepdim else dropped(ctx, env, top)
        return (_V(values), _V(idx))
    if tgt in (aten.max.dim, aten.min.dim) and not keepdim:
        kept = _lowering_bounds(src, name)[0]
        kept[d] = 1
        dropped = _reshaper(list(_meta(node)[0].shape), node, kept, name)  # or Unsupported now
    return run


_ONE_HOT_MAX = 1 << 22  # elements of a one-hot matrix or comparison at the bounds (16 MiB in float32)


def _lower_embedding(node: torch.fx.Node, name: str, val: Callable[..., Any]) -> Callable[..., Any]:
    """embedding(weight [V, D], indices) as clb_gather of weight's rows: the
    indices flattened to M, widened to [M, D] (a multiply by ones), gathered
    along dim 0 and reshaped to indices' shape + [D]; an index outside [0, V)
    is an IndexError at the call's sync, as PyTorch raises one. Its backward,
    embedding_dense_backward, is onehot(indices)^T @ grad, [V, M] by [M, D]:
    one GEMM, deterministic (no atomics), padding_idx's row left zero, at the
    cost of an [M, V] one-hot matrix: past _ONE_HOT_MAX elements at M's bound
    (a table of many rows: a language model's), and with scale_grad_by_freq,
    the backward breaks the graph and runs in eager PyTorch."""
    args = node.args
    bw = node.target is aten.embedding_dense_backward.default
    idx = args[1]
    mi, mo = _meta(idx), _meta(node)
    if not isinstance(mi, torch.Tensor) or mi.dtype not in (torch.int64, torch.int32):
        raise Unsupported(f"{name}: indices of {getattr(mi, 'dtype', mi)}")
    if mo.dim() < 1 or _is_sym(mo.shape[-1]):
        raise Unsupported(f"{name}: a dynamic embedding width")
    width = int(mo.shape[-1])
    held: Dict[str, Tensor] = {}  # ones [1, D] (forward), made at the first call

    def flat_indices(ctx: Context, env: Dict[Any, Any]) -> Tensor:
        i = val(env, idx)
        if i.dtype != np.int64:
            i = ctx.cast(i, np.int64)
        return ctx.reshape(i, (-1, 1))  # [M, 1]

    if not bw:
        weight = args[0]
        if not isinstance(_meta(weight), torch.Tensor) or _meta(weight).dim() != 2:
            raise Unsupported(f"{name}: a weight that is not a matrix")
        # [batch, sequence, D] from the [batch * sequence, D] rows
        m_bound = int(np.prod(_lowering_bounds(idx, name)[0], dtype=np.int64))
        shaped = (lambda ctx, env, rows: rows) if mo.dim() == 2 and mi.dim() == 1 else _reshaper(
            list(mo.shape), node, [m_bound, width], name)

        def embed(ctx: Context, env: Dict[Any, Any]) -> _V:
            ones = held.get("ones")
            if ones is None:
                ones = held["ones"] = ctx.full((1, width), 1, dtype=np.int64)
            rows = ctx.gather(val(env, weight), 0, ctx.mul(flat_indices(ctx, env), ones))
            return _V(shaped(ctx, env, rows))
        return embed

    grad, n_rows, pad = args[0], args[2], args[3]
    freq = args[4] if len(args) > 4 else node.kwargs.get("scale_grad_by_freq", False)
    if freq or not isinstance(n_rows, int) or not isinstance(pad, int):
        raise Unsupported(f"{name}: scale_grad_by_freq or a symbolic number of rows")
    m_bound = int(np.prod(_shape_bounds(list(mi.shape), node, name)[0], dtype=np.int64))
    if m_bound * n_rows > _ONE_HOT_MAX:
        raise Unsupported(f"{name}: a one-hot of {m_bound} x {n_rows} elements (more than {_ONE_HOT_MAX})")
    table_rows = _positions(node, n_rows, 2, 1, name)  # [1, V]

    def embed_bw(ctx: Context, env: Dict[Any, Any]) -> _V:
        col = flat_indices(ctx, env)
        hit = ctx.compare("eq", col, table_rows(ctx, env))  # [M, V]
        if pad >= 0:
            hit = ctx.logical_and(hit, ctx.compare("ne", col, pad))
        return _V(_one_hot_sum(ctx, hit, val(env, grad), width))
    return embed_bw


def _one_hot_sum(ctx: Context, hit: Tensor, values: Tensor, width: int) -> Tensor:
    """The rows [N, W] summing values' rows (reshaped to [M, W]) where hit
    [M, N] holds: onehot^T @ values, one GEMM, no atomics, so repeated rows
    add up the same on every run (an inf or NaN among the values makes NaN in
    the other rows of its column, 0 * inf)."""
    return ctx.matmul(ctx.cast(hit, values.dtype), ctx.reshape(values, (-1, width)), trans_a=True)


def _lower_any_all(node: torch.fx.Node, name: str, val: Callable[..., Any]) -> Callable[..., Any]:
    """any / all over every dim or some, as counts: any is sum(x != 0) > 0 and
    all is sum(x == 0) == 0, so an empty extent gives False and True and NaN
    counts as true, as in PyTorch; the result in the graph's dtype (bool, or
    uint8 for a uint8 input)."""
    args, kw = node.args, node.kwargs
    kind = _ANY_ALL[node.target]
    src = args[0]
    m = _meta(src)
    dims = args[1] if len(args) > 1 else kw.get("dim")
    keepdim = bool(args[2] if len(args) > 2 else kw.get("keepdim", False))
    if not isinstance(m, torch.Tensor):
        raise Unsupported(f"{name}: of {m}")
    rank = m.dim()
    if dims is not None and (len(_flat(dims)) == 0 or rank == 0):
        raise Unsupported(f"{name}: over dims {dims} of a {rank}-d tensor")
    ds = None if dims is None else sorted({d % rank for d in _flat(dims)}, reverse=True)

    def any_all(ctx: Context, env: Dict[Any, Any]) -> _V:
        hits = ctx.compare("ne" if kind == "any" else "eq", val(env, src), 0)
        if ds is None:
            count = ctx.reduce_all("sum", hits)
            if keepdim and rank:
                count = ctx.reshape(count, [1] * rank)
        else:
            count = hits
            for d in ds:
                count = ctx.reduce_dim("sum", count, d, keepdim)
        return _V(_cast_to(ctx, ctx.compare("gt" if kind == "any" else "eq", count, 0), node))
    return any_all


def _lower_arange(node: torch.fx.Node, name: str) -> Callable[..., Any]:
    """arange with constant start and step: numpy's values in the graph's
    dtype, uploaded at the first call and then the same tensor (no op writes
    into an input of its own). An end Dynamo passes as a size (arange(n) of a
    sequence length: positions, a causal mask) takes the values at the size's
    bound once and, at each call, the first as many as this call's end gives
    (clb_slice of a host int; the result dynamic at that bound). A symbolic
    start or step breaks the graph."""
    args = list(node.args)
    if node.kwargs.get("layout") not in (None, torch.strided):
        raise Unsupported(f"{name}: layout {node.kwargs.get('layout')}")
    start, end, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
    if isinstance(start, torch.fx.Node) or isinstance(step, torch.fx.Node):
        raise Unsupported(f"{name}: a symbolic start or step")
    if isinstance(end, torch.fx.Node) and not _is_size(end):
        raise Unsupported(f"{name}: an end that is not a size")
    for v in (start, end, step):
        if not isinstance(v, torch.fx.Node):
            _scalar(v, name)
    npdt = _np_dtype(_meta(node).dtype, name)
    held: Dict[str, Tensor] = {}
    if isinstance(end, torch.fx.Node):
        if not step or (step < 0):
            raise Unsupported(f"{name}: step {step} with a symbolic end")
        ub = _lowering_bounds(node, name)[0][0]
        values = (start + step * np.arange(ub, dtype=np.float64 if isinstance(start + step, float) else np.int64))
        values = values.astype(npdt)
        if ub == 0:
            raise Unsupported(f"{name}: no values at the bound")

        def arange_to(ctx: Context, env: Dict[Any, Any]) -> _V:
            t = held.get("t")
            if t is None:
                t = held["t"] = ctx.from_numpy(values)
            e = _force(_arg(env, end))
            return _V(_prefix(ctx, t, min(ub, max(0, math.ceil((e - start) / step)))))
        return arange_to
    values = np.arange(start, end, step).astype(npdt)
    if values.size == 0:
        raise Unsupported(f"{name}: no values")
    if values.shape != tuple(int(d) for d in _meta(node).shape):
        raise Unsupported(f"{name}: numpy gives {values.shape[0]} values, PyTorch {list(_meta(node).shape)}")

    def arange(ctx: Context, env: Dict[Any, Any]) -> _V:
        t = held.get("t")
        if t is None:
            t = held["t"] = ctx.from_numpy(values)
        return _V(t)
    return arange


def _lower_softmax_dim0(node: torch.fx.Node, name: str, val: Callable[..., Any], log: bool) -> Callable[..., Any]:
    """(log_)softmax over dim 0 of a matrix, and its backward: clb_softmax over
    the last dim of the transpose (a copy, clb_transpose, unless the operand is
    a transpose already), the result a lazy transpose (copied only where an op
    needs the matrix itself)."""
    args = node.args
    if node.target in _SOFTMAX and args[2]:
        raise Unsupported(f"{name}: half_to_float")

    def transposed(ctx: Context, env: Dict[Any, Any], a: Any) -> Tensor:
        v = _arg(env, a)
        if isinstance(v, _V) and v.trans:
            return v.t
        return ctx.transpose(val(env, a), 0, 1)

    if node.target in _SOFTMAX:
        def softmax(ctx: Context, env: Dict[Any, Any]) -> _V:
            xt = transposed(ctx, env, args[0])
            return _V(ctx.log_softmax(xt) if log else ctx.softmax(xt), True)
        return softmax

    def softmax_bw(ctx: Context, env: Dict[Any, Any]) -> _V:
        return _V(ctx.softmax_backward(transposed(ctx, env, args[1]), transposed(ctx, env, args[0]), log=log), True)
    return softmax_bw


def _lower_flip(node: torch.fx.Node, name: str, val: Callable[..., Any]) -> Callable[..., Any]:
    """flip: clb_gather along each dim with the reversed positions, size - 1 -
    iota, broadcast to x's actual shape by adding them to a zero int64 tensor
    of x's sizes. Over a static dim the positions are made once; over a
    dynamic one (the batch: cumsum's backward along it, a batch flipped
    against itself) each call writes them for its own size, a host int from
    the inputs' sizes. A size only the device knows breaks the graph."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    src, dims = node.args[0], list(node.args[1])
    m = _meta(src)
    if not isinstance(m, torch.Tensor) or m.dim() == 0:
        raise Unsupported(f"{name}: of a 0-d tensor")
    ds = sorted({d % m.dim() for d in dims})
    if any(_is_sym(m.shape[d]) and free_unbacked_symbols(m.shape[d]) for d in ds):
        raise Unsupported(f"{name}: over a data-dependent dim")
    bounds = _lowering_bounds(src, name)[0]
    parts = _shape_parts(src)
    held: Dict[int, Tensor] = {}  # the reversed positions per static dim, made at the first call

    def positions(ctx: Context, env: Dict[Any, Any], d: int) -> Tensor:
        shape = [-1 if k == d else 1 for k in range(m.dim())]
        if not _is_sym(m.shape[d]):
            if d not in held:
                held[d] = ctx.from_numpy(np.arange(int(m.shape[d]) - 1, -1, -1, dtype=np.int64).reshape(shape))
            return held[d]
        n = _eval_shape([parts[d]], env["__sizes__"])
        if n is None:  # every symbol is an input's (checked above): not reached
            raise RuntimeError(f"clbound: {name}: the size {parts[d]} is not among this call's inputs")
        return ctx.from_numpy(np.arange(n[0] - 1, -1, -1, dtype=np.int64).reshape(shape),
                              bounds=[bounds[d] if k == d else 1 for k in range(m.dim())],
                              dynamic=[k == d for k in range(m.dim())])

    def flip(ctx: Context, env: Dict[Any, Any]) -> _V:
        x = val(env, src)
        for d in ds:
            rev = positions(ctx, env, d)
            zeros = ctx.cast(x, np.int64)
            ctx.fill(zeros, 0)
            x = ctx.gather(x, d, ctx.add(zeros, rev))
        return _V(x)
    return flip


_Reshaper = Callable[[Context, Dict[Any, Any], Tensor], Tensor]


class _Shape:
    """A shape (ints and SymInts) where _bounds takes a tensor."""
    def __init__(self, shape: Sequence[Any]) -> None:
        self.shape = shape


def _bounded_reshaper(node: torch.fx.Node, have: List[int], name: str,
                      shape: Optional[Sequence[Any]] = None) -> _Reshaper:
    """A reshape to node's shape (or `shape`) with more than one symbolic size ([batch,
    sequence, features] from [batch * sequence, features]), which one -1 cannot
    infer, of a tensor of bounds `have`: each call's sizes from the inputs'
    (host ints), the bounds from their value ranges (clb_reshape_bounded; the
    device checks that the sizes hold the input's count). A size the inputs do
    not give (a data-dependent one) breaks the graph."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    shape = list(_meta(node).shape if shape is None else shape)
    if any(free_unbacked_symbols(d) for d in shape if _is_sym(d)):
        raise Unsupported(f"{name}: reshape to {shape}: more than one symbolic size, one data-dependent")
    bounds, dynamic = _shape_bounds(shape, node, name)
    if int(np.prod(bounds, dtype=np.int64)) > int(np.prod(have, dtype=np.int64)):
        raise Unsupported(f"{name}: reshape of bounds {have} to {bounds}: more elements at the bounds")
    parts = [d.node.expr if _is_sym(d) else int(d) for d in shape]

    def reshape(ctx: Context, env: Dict[Any, Any], x: Tensor) -> Tensor:
        dims = _eval_shape(parts, env["__sizes__"])
        if dims is None:  # every symbol is an input's (checked above): not reached
            raise RuntimeError(f"clbound: {name}: the sizes of {parts} are not among this call's inputs")
        return ctx.reshape_bounded(x, dims, bounds, dynamic)
    return reshape


def _reshaper(shape: Sequence[Any], node: torch.fx.Node, have: List[int], name: str) -> _Reshaper:
    """A reshape to `shape` (ints and SymInts) of a tensor of bounds `have`:
    one symbolic size as -1, more by _bounded_reshaper."""
    if sum(_is_sym(d) for d in shape) > 1:
        return _bounded_reshaper(node, have, name, shape)
    spec = _reshape_spec(shape, name)
    return lambda ctx, env, x: ctx.reshape(x, spec)


def _lower_reshape_bounded(node: torch.fx.Node, src: torch.fx.Node, name: str,
                           val: Callable[..., Any]) -> Callable[..., Any]:
    """A reshape to more than one symbolic size: _bounded_reshaper."""
    reshape = _bounded_reshaper(node, _lowering_bounds(src, name)[0], name)
    return lambda ctx, env: _V(reshape(ctx, env, val(env, src)))


def _lower_bmm(node: torch.fx.Node, name: str, val: Callable[..., Any]) -> Callable[..., Any]:
    """torch.bmm, so 3-D matmul and einsum over a batch (AOTAutograd's forms of
    both): clb_bmm. An operand transposed in its last two dims arrives as the
    copy its own transpose node made."""
    a, b = node.args[0], node.args[1]
    dt = _meta(node).dtype
    if not dt.is_floating_point:
        raise Unsupported(f"{name}: bmm of {dt} (clbound's bmm is floating only)")
    # clb_bmm takes equal bounds of the batch and of K; Dynamo's say whether they will be
    (ba, _, ka), (bb, kb, _) = _lowering_bounds(a, name)[0], _lowering_bounds(b, name)[0]
    if ba != bb or ka != kb:
        raise Unsupported(f"{name}: bmm of bounds {[ba, '.', ka]} and {[bb, kb, '.']}: the batch or K bounds differ")

    def operand(env: Dict[Any, Any], x: Any) -> Tuple[Tensor, bool]:
        v = env[x]
        if isinstance(v, _LazyT):  # its source, transposed by the product itself: no copy
            return v.src, True
        return val(env, x), False

    def bmm(ctx: Context, env: Dict[Any, Any]) -> _V:
        (ta, fa), (tb, fb) = operand(env, a), operand(env, b)
        return _V(ctx.bmm(ta, tb, trans_a=fa, trans_b=fb))
    return bmm


def _lower_split(node: torch.fx.Node, name: str, val: Callable[..., Any]) -> Callable[..., Any]:
    """split, split_with_sizes and unbind along a static dim (attention's
    q, k, v from one projection): a tuple of clb_slice (clb_index for unbind)
    copies, which getitem takes apart; the other dims may be dynamic."""
    src = node.args[0]
    m = _meta(src)
    unbind = node.target is aten.unbind.int
    dim = (node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)) if unbind else (
        node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0))
    if not isinstance(m, torch.Tensor) or m.dim() == 0 or not isinstance(dim, int):
        raise Unsupported(f"{name}: of {getattr(m, 'shape', m)} at dim {dim}")
    dim %= m.dim()
    if _is_sym(m.shape[dim]):
        raise Unsupported(f"{name}: along a dynamic dim")
    n = int(m.shape[dim])
    if unbind:
        return lambda ctx, env: tuple(_V(ctx.index(val(env, src), dim, i)) for i in range(n))
    size = node.args[1]
    if node.target is aten.split.Tensor:
        if not isinstance(size, int) or size <= 0:
            raise Unsupported(f"{name}: split size {size}")
        sizes = [min(size, n - lo) for lo in range(0, n, size)] or [0]
    else:
        sizes = list(size)
        if not all(isinstance(k, int) and k >= 0 for k in sizes) or sum(sizes) != n:
            raise Unsupported(f"{name}: sizes {sizes} of a dim of {n}")
    cuts = [(sum(sizes[:k]), sum(sizes[:k + 1])) for k in range(len(sizes))]

    def split(ctx: Context, env: Dict[Any, Any]) -> Tuple[_V, ...]:
        x = val(env, src)
        return tuple(_V(ctx.slice(x, dim, lo, hi)) for lo, hi in cuts)
    return split


_REPEAT_MAX = 64  # copies repeat makes by clb_cat, two at a time


def _lower_repeat(node: torch.fx.Node, name: str, val: Callable[..., Any]) -> Callable[..., Any]:
    """repeat(x, reps) as clb_cat of copies along each dim (a dynamic one
    too: the sizes add on the device), leading dims added as 1s first; up to
    _REPEAT_MAX copies, constant reps of at least 1."""
    src, reps = node.args[0], list(node.args[1])
    m, want = _meta(src), _meta(node)
    if not isinstance(m, torch.Tensor) or any(not isinstance(r, int) or r < 1 for r in reps) or len(reps) < m.dim():
        raise Unsupported(f"{name}: repeats {reps}")
    if int(np.prod(reps)) > _REPEAT_MAX:
        raise Unsupported(f"{name}: {int(np.prod(reps))} copies (more than {_REPEAT_MAX})")
    lead = len(reps) - m.dim()
    spec = _reshape_spec([1] * lead + list(m.shape), name) if lead else None
    _reshape_spec(want.shape, name)  # one symbolic size at most, as clb_cat's bounds allow

    def repeat(ctx: Context, env: Dict[Any, Any]) -> _V:
        x = val(env, src)
        if spec is not None:
            x = ctx.reshape(x, spec)
        for d, r in enumerate(reps):
            if r > 1:
                x = ctx.cat([x] * r, d)
        return _V(x)
    return repeat


def _lower_nll(node: torch.fx.Node, name: str, val: Callable[..., Any]) -> Callable[..., Any]:
    """gather (clb_gather), and nll_loss (F.cross_entropy and F.nll_loss inside
    the compiled model: the NLL of log-probabilities [N, C] at N int64 class
    indices; weight None; reduction none, mean or sum; ignore_index) as
    (loss, total_weight): each row's -x[i, t_i] by clb_gather, the ignored
    rows zero, mean dividing by the rows kept (NaN for none, as PyTorch's). A
    class outside [0, C) raises IndexOutOfRangeError at the call's sync, as
    PyTorch raises. Its backward: -grad (/ total_weight for mean) where t_i ==
    j on kept rows, else 0: a comparison with arange(C), no scatter."""
    args, kw = list(node.args), node.kwargs
    tgt = node.target
    if tgt is aten.gather.default:
        if args[3:4] == [True] or kw.get("sparse_grad"):
            raise Unsupported(f"{name}: sparse_grad")
        dim = args[1]
        return lambda ctx, env: _V(ctx.gather(val(env, args[0]), dim, val(env, args[2])))
    bw = tgt in (aten.nll_loss_backward.default, aten.nll_loss2d_backward.default)
    nd = tgt in (aten.nll_loss2d_forward.default, aten.nll_loss2d_backward.default)
    off = 1 if bw else 0
    x_node, t_node, weight, reduction, ignore = args[off:off + 5]
    xm, tm = _meta(x_node), _meta(t_node)
    if weight is not None:
        raise Unsupported(f"{name}: weight")
    if (xm is None or tm is None or xm.dim() != (4 if nd else 2) or tm.dim() != xm.dim() - 1
            or _is_sym(xm.shape[1]) or not xm.dtype.is_floating_point or tm.dtype != torch.int64
            or reduction not in (0, 1, 2)):
        raise Unsupported(f"{name}: {getattr(xm, 'shape', None)} by {getattr(tm, 'dtype', None)} targets, "
                          f"reduction {reduction} (clbound runs [N, C] or [N, C, H, W] by int64 [N] or [N, H, W])")
    classes = int(xm.shape[1])
    ignore = int(ignore)
    npdt = _np_dtype(xm.dtype, name)
    classes_iota = _positions(x_node, classes, 1, 0, name)  # arange(C)
    # nll_loss2d ([N, C, H, W] by [N, H, W]: F.cross_entropy of [N, C, T] by [N, T]
    # views it so) is nll_loss of the rows [N * H * W, C]: the classes moved
    # last (clb_permute) and back, the per-position losses shaped as the targets
    if nd:
        rows_of_x: Callable[[Context, Tensor], Tensor] = lambda ctx, x: ctx.reshape(ctx.permute(x, [0, 2, 3, 1]),
                                                                                   [-1, classes])
        n_rows = int(np.prod(_lowering_bounds(t_node, name)[0], dtype=np.int64))
        as_targets = _reshaper(list(tm.shape), t_node, [n_rows], name)
        moved = [xm.shape[0], xm.shape[2], xm.shape[3], xm.shape[1]]
        rows_to_x = _reshaper(moved, x_node, [n_rows, classes], name)
    else:
        rows_of_x = lambda ctx, x: x
    flat_t: Callable[[Context, Tensor], Tensor] = (lambda ctx, t: ctx.reshape(t, [-1])) if nd else (
        lambda ctx, t: t)

    if not bw:
        def nll(ctx: Context, env: Dict[Any, Any]) -> Tuple[_V, _V]:
            x, t = rows_of_x(ctx, val(env, x_node)), flat_t(ctx, val(env, t_node))
            kept = ctx.compare("ne", t, ignore)
            rows = ctx.reshape(ctx.where(kept, t, 0), [-1, 1])
            picked = ctx.reshape(ctx.gather(x, 1, rows), [-1])
            losses = ctx.mul(ctx.neg(picked), ctx.cast(kept, npdt))
            total = ctx.reduce_all("sum", ctx.cast(kept, npdt))
            if reduction == 0:
                return _V(as_targets(ctx, env, losses) if nd else losses), _V(total)
            s = ctx.reduce_all("sum", losses)
            return _V(ctx.div(s, total) if reduction == 1 else s), _V(total)
        return nll

    def nll_bw(ctx: Context, env: Dict[Any, Any]) -> _V:
        t = flat_t(ctx, val(env, t_node))
        hot = ctx.binary("mul", ctx.compare("eq", ctx.reshape(t, [-1, 1]), classes_iota(ctx, env)),
                         ctx.reshape(ctx.compare("ne", t, ignore), [-1, 1]))  # and, of bools: [N, C]
        g = ctx.neg(val(env, args[0]))
        if reduction == 1:
            g = ctx.div(g, val(env, args[6]))
        elif reduction == 0:
            g = ctx.reshape(g, [-1, 1])
        rows = ctx.where(hot, g, 0.0)
        return _V(ctx.permute(rows_to_x(ctx, env, rows), [0, 3, 1, 2]) if nd else rows)
    return nll_bw


def _seed() -> int:
    """A 63-bit seed for one random op of one call, from PyTorch's default
    generator: torch.manual_seed makes a run repeat, each call draws anew."""
    return int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64))


def _lower_random(node: torch.fx.Node, name: str, val: Callable[..., Any]) -> Callable[..., Any]:
    """native_dropout as (x * mask * scale, mask), the mask u < 1 - p for
    uniform u from clb_rand_uniform (Philox4x32-10, a seed per call from
    PyTorch's generator), scale 1 / (1 - p) (0 for p = 1), both products in
    aten's order; eval mode (train=False) as (x, ones). Its backward as grad *
    mask * scale, aten's. rand_like as clb_rand_uniform. The numbers are
    clbound's own stream, not eager PyTorch's: the same distribution, other
    draws (as inductor's own dropout)."""
    tgt, args, kw = node.target, list(node.args), node.kwargs
    want = _meta(node)
    if tgt is aten.rand_like.default:
        dt = want.dtype if isinstance(want, torch.Tensor) else None
        if dt not in (torch.float32, torch.float64) or any(kw.get(k) not in (None, False) for k in ("pin_memory",)):
            raise Unsupported(f"{name}: dtype {dt}")
        npdt = np.float32 if dt == torch.float32 else np.float64
        return lambda ctx, env: _V(ctx.rand_uniform(val(env, args[0]), _seed(), npdt))
    if tgt is aten.native_dropout_backward.default:
        scale = _scalar(args[2], name)

        def dropout_bw(ctx: Context, env: Dict[Any, Any]) -> _V:
            g = val(env, args[0])
            return _V(ctx.mul(ctx.mul(g, ctx.cast(val(env, args[1]), g.dtype)), float(scale)))
        return dropout_bw
    p = _scalar(args[1], name)
    train = args[2] if len(args) > 2 else kw.get("train")
    x_meta = _meta(args[0])
    if not (isinstance(x_meta, torch.Tensor) and x_meta.dtype.is_floating_point) or not 0 <= p <= 1:
        raise Unsupported(f"{name}: p {p} on {getattr(x_meta, 'dtype', None)}")
    keep = 1.0 - p
    scale = 0.0 if keep == 0 else 1.0 / keep

    def dropout(ctx: Context, env: Dict[Any, Any]) -> Tuple[_V, _V]:
        x = val(env, args[0])
        if train is False:  # x itself, and a mask of ones at x's sizes
            ones = ctx.cast(x, np.bool_)
            ctx.fill(ones, True)
            return _V(ctx.unary("copy", x)), _V(ones)
        mask = ctx.compare("lt", ctx.rand_uniform(x, _seed(), np.float32), keep)
        return _V(ctx.mul(ctx.mul(x, ctx.cast(mask, x.dtype)), scale)), _V(mask)
    return dropout


_SQRT1_2 = 0.7071067811865476  # 1 / sqrt(2)
_INV_SQRT_2PI = 0.3989422804014327  # 1 / sqrt(2 pi)
_SQRT_2_PI = 0.7978845608028654  # sqrt(2 / pi)
_GELU_KAPPA = 0.044715


def _inserts_ones(have: Sequence[Any], want: Sequence[Any], kept: List[int]) -> bool:
    """Whether prims.broadcast_in_dim from shape `have` to `want`, keeping dims
    `kept`, only inserts dims of size 1 (a reshape, no copy)."""
    if len(kept) != len(have) or kept != sorted(kept):
        return False
    for d, w in enumerate(want):
        if d in kept:
            if str(w) != str(have[kept.index(d)]):
                return False
        elif _is_sym(w) or int(w) != 1:
            return False
    return True


def _is_size(a: Any) -> bool:
    """Whether the FX node a is a size (a SymInt, or an int Dynamo passes) or
    arithmetic on sizes (a SymFloat: var's 1 / (n - 1)): a host number when a
    call runs."""
    return isinstance(_meta(a), (torch.SymInt, torch.SymFloat, int, float)) and not isinstance(_meta(a), bool)


def _lower_expand(node: torch.fx.Node, name: str, val: Callable[..., Any]) -> Callable[..., Any]:
    """aten.expand(x, sizes) as x * ones, broadcast. The ones tensor has the
    target's rank; a dim that x has with a size other than a static 1 is a
    static 1 there (broadcasting keeps x's own size, its actual one on the
    device), and a dim that x lacks or has as a static 1 is the target's,
    whose actual size each call takes from its host int (a constant, a size
    Dynamo passes, or sums and products of them) through a shape-record
    write: no host sync. The ones are filled once. x * 1 is x exactly
    (signed zeros, infinities and NaN included; bools: x and True)."""
    src, sizes = node.args[0], list(node.args[1])
    want, have = _meta(node), _meta(src)
    if want is None or have is None or len(sizes) != want.dim() or have.dim() > want.dim():
        raise Unsupported(f"{name}: sizes {sizes}")
    lead = want.dim() - have.dim()
    kept = [d >= lead and (_is_sym(have.shape[d - lead]) or int(have.shape[d - lead]) != 1)
            for d in range(want.dim())]
    make = _sized_maker(node, sizes, name, 1, kept)
    held: Dict[str, Tensor] = {}  # the ones tensor, made at the first call on the graph's context

    def expand(ctx: Context, env: Dict[Any, Any]) -> _V:
        held["ones"] = ones = make(ctx, env, held.get("ones"))
        return _V(ctx.mul(val(env, src), ones))
    return expand


def _sized_maker(node: torch.fx.Node, sizes: List[Any], name: str, value: Any,
                 kept: Optional[List[bool]] = None) -> Callable[..., Tensor]:
    """For a tensor of node's shape filled with `value` (the ones of expand,
    the zeros of new_zeros): a function (ctx, env, made) that makes it at
    its bounds (or takes `made`, one it made before) and sets its actual sizes
    for this call from `sizes`, host ints (constants, sizes Dynamo passes, or
    arithmetic on them), by a shape-record write: no host sync. A dim where
    kept[d] is a static 1 (expand broadcasts its operand's own size there)."""
    want = _meta(node)
    for sz in sizes:
        if isinstance(sz, torch.fx.Node) and not _is_size(sz):
            raise Unsupported(f"{name}: size {sz.name} is not a size")
    npdt = _np_dtype(want.dtype, name)
    bounds, dynamic, takes = [], [], []  # takes: the dims whose size comes from `sizes`
    for d, s in enumerate(want.shape):
        if kept is not None and kept[d]:
            bounds.append(1)
            dynamic.append(False)
        elif _is_sym(s):
            bounds.append(_upper_bound(s, node, d))
            dynamic.append(True)
            takes.append(d)
        else:
            bounds.append(int(s))
            dynamic.append(False)

    def make(ctx: Context, env: Dict[Any, Any], made: Optional[Tensor]) -> Tensor:
        t = made if made is not None else ctx.full(tuple(bounds), value, dtype=npdt, dynamic=tuple(dynamic))
        if takes:
            actual = list(bounds)
            for d in takes:
                actual[d] = int(_force(_arg(env, sizes[d])))
            t.set_sizes(actual)
        return t
    return make


def _lower_filled(node: torch.fx.Node, name: str) -> Callable[..., Any]:
    """new_zeros / new_ones / new_full(x, sizes[, value]) and zeros / ones /
    full(sizes[, value]): a new tensor of the given sizes, made each call (it
    may be kept as an output), in the graph's dtype."""
    tgt, args = node.target, node.args
    for k in node.kwargs:
        if k not in ("dtype", "layout", "device", "pin_memory"):
            raise Unsupported(f"{name}: {k}=")
    new = tgt in (aten.new_zeros.default, aten.new_ones.default, aten.new_full.default)
    sizes = list(args[1] if new else args[0])
    value = (0 if tgt in (aten.new_zeros.default, aten.zeros.default)
             else 1 if tgt in (aten.new_ones.default, aten.ones.default) else _scalar(args[-1], name))
    if isinstance(value, int) and not isinstance(value, bool) and float(value) != value:
        raise Unsupported(f"{name}: {value} is not exactly a double (the fill's C call takes one)")
    try:
        make = _sized_maker(node, sizes, name, value)
    except UnboundedSizeError as e:  # torch.zeros(n) of an int with no bound: it runs in eager PyTorch
        raise Unsupported(f"{name}: {e}")
    return lambda ctx, env: _V(make(ctx, env, None))


def _lower_scatter(node: torch.fx.Node, name: str, val: Callable[..., Any]) -> Callable[..., Any]:
    """scatter(base, dim, index, src or value) with one index per position of
    the other dims (index, and src, of size 1 at dim and base's sizes
    elsewhere): where(iota == index, src, base), broadcast along dim. That is
    the backward of max.dim / min.dim (base new_zeros, src the gradients),
    the one-hot idiom zeros_like(x).scatter(1, y[:, None], 1.0), and nll_loss's
    backward as PyTorch decomposes it. An index outside [0, size) fails the
    call's sync (a DeviceCheckError, a RuntimeError as eager's), not dropped:
    max's backward looks like a user's new_zeros(...).scatter(...), so both
    are checked. The dim may be
    dynamic (max over a sequence: _positions). Several indices per position
    (topk's backward: k of them, all different) compare along an axis of their
    own, as scatter_add does; an index that repeats within one position's k
    fails the call's sync, since PyTorch leaves which value lands there
    undefined. Other forms break the graph."""
    x, dim, index, src = node.args[:4]
    mx, mi = _meta(x), _meta(index)
    value = node.target is aten.scatter.value
    ms = mi if value else _meta(src)
    if node.kwargs or not all(isinstance(v, torch.Tensor) for v in (mx, mi, ms)) or mx.dim() == 0:
        raise Unsupported(f"{name}: scatter of this form")
    if value:
        _scalar(src, name)
    base = getattr(x, "target", None)
    if base not in (aten.new_zeros.default, aten.zeros_like.default):
        raise Unsupported(f"{name}: a scatter into other than zeros")
    d = dim % mx.dim()
    same = mi.dim() == ms.dim() == mx.dim() and all(
        str(a) == str(b) == str(c) for k, (a, b, c) in enumerate(zip(mx.shape, mi.shape, ms.shape)) if k != d)
    k = mi.shape[d]
    if not same or _is_sym(k) or str(ms.shape[d]) != str(k) or int(k) < 1:
        raise Unsupported(f"{name}: scatter of {list(ms.shape)} at {list(mi.shape)} into {list(mx.shape)}")
    size = mx.shape[d].node.expr if _is_sym(mx.shape[d]) else int(mx.shape[d])
    if int(k) > 1:
        return _scatter_several(node, name, val, x, d, index, src, value)
    positions = _positions(x, mx.shape[d], mx.dim(), d, name)

    def scatter(ctx: Context, env: Dict[Any, Any]) -> _V:
        iota = positions(ctx, env)
        idx = val(env, index)
        _check_range(ctx, idx, _eval_shape([size], env["__sizes__"])[0], "scatter")
        hit = ctx.compare("eq", iota, idx)
        if value:
            return _V(_cast_to(ctx, ctx.where(hit, src, val(env, x)), node))
        return _V(ctx.where(hit, val(env, src), val(env, x)))
    return scatter


_TOPK_MAX = 16  # k of a topk lowered as k passes of max (25 launches each past the first)


def _lower_topk(node: torch.fx.Node, name: str, val: Callable[..., Any]) -> Callable[..., Any]:
    """topk(x, k, dim, largest, sorted) of a floating tensor as k passes of
    max over dim: each pass takes the largest value not taken yet and its
    first position (NaN the largest, as in PyTorch; ties in position order,
    which PyTorch leaves unspecified), marks it taken, and the values and
    positions are joined along dim (clb_cat), so they come sorted. smallest
    (largest=False) is the largest of -x with NaN made -inf, and among equal
    candidates a NaN only where no other is left (+inf comes before NaN, as
    in PyTorch). The dim may be dynamic (positions of
    the call's own size); k up to _TOPK_MAX, else the graph breaks. Its
    backward is a scatter of k values per position (_scatter_several)."""
    args, kw = node.args, node.kwargs
    src = args[0]
    m = _meta(src)
    k = args[1] if len(args) > 1 else kw.get("k")
    dim = args[2] if len(args) > 2 else kw.get("dim", -1)
    largest = args[3] if len(args) > 3 else kw.get("largest", True)
    if not isinstance(m, torch.Tensor) or m.dim() == 0 or not m.dtype.is_floating_point:
        raise Unsupported(f"{name}: of {getattr(m, 'dtype', m)} (clbound's topk is floating only)")
    if not isinstance(k, int) or not 1 <= k <= _TOPK_MAX or not isinstance(dim, int):
        raise Unsupported(f"{name}: k={k} (clbound takes 1 to {_TOPK_MAX} as k passes of max)")
    d = dim % m.dim()
    positions = _positions(src, m.shape[d], m.dim(), d, name)
    size = _shape_bounds([m.shape[d]], src, name)[0][0]  # more than any position

    def any_along(ctx: Context, mask: Tensor) -> Tensor:  # mask's any over d, kept: a bool
        return ctx.compare("gt", ctx.reduce_dim("max", ctx.cast(mask, np.int64), d, True), 0)

    def topk(ctx: Context, env: Dict[Any, Any]) -> Tuple[_V, _V]:
        x = val(env, src)
        nan = None
        if not largest:  # the largest of -x, NaN (PyTorch's largest) made the smallest of all
            nan = ctx.compare("ne", x, x)
            x = ctx.where(nan, -math.inf, ctx.neg(x))
        iota = positions(ctx, env)
        free = None  # the positions not taken yet
        values: List[Tensor] = []
        indices: List[Tensor] = []
        for _ in range(k):
            cur = x if free is None else ctx.where(free, x, -math.inf)
            top = ctx.reduce_dim("max", cur, d, True)
            hit = ctx.compare("eq", cur, top)
            if largest:  # NaN is the largest: max gives it, and it equals nothing
                hit = ctx.logical_or(hit, ctx.compare("ne", cur, cur))
            if free is not None:
                hit = ctx.logical_and(hit, free)
            if nan is not None:  # an inf before a NaN, both -inf here: the NaN only when nothing else is left
                other = ctx.logical_and(hit, ctx.compare("eq", nan, 0))
                hit = ctx.where(any_along(ctx, other), other, hit)
            first = _first_hit(ctx, hit, iota, size, d, True)
            left = ctx.compare("ne", iota, first)
            free = left if free is None else ctx.logical_and(free, left)
            if nan is not None:
                picked_nan = ctx.logical_and(ctx.compare("eq", iota, first), nan)
                top = ctx.where(any_along(ctx, picked_nan), math.nan, ctx.neg(top))
            values.append(top)
            indices.append(first)
        out_v, out_i = (ctx.cat(values, d), ctx.cat(indices, d)) if k > 1 else (values[0], indices[0])
        return _V(out_v), _V(out_i)
    return topk


class _HitsAlong:
    """Indices (k per position along dim d) compared with the positions along
    x's dim d, an axis inserted before the indices' own ([.., 1, k, ..]
    against [.., n, 1, ..]): the comparison that scatter_add and a scatter of
    several values per position sum over, with no atomics. Every index is
    checked to be in [0, n) on the device. Past _ONE_HOT_MAX elements at the
    bounds the graph breaks."""

    def __init__(self, x: torch.fx.Node, index: torch.fx.Node, d: int, name: str) -> None:
        mx, mi = _meta(x), _meta(index)
        ibounds = _lowering_bounds(index, name)[0]
        n_ub = _lowering_bounds(x, name)[0][d]
        if int(np.prod(ibounds, dtype=np.int64)) * n_ub > _ONE_HOT_MAX:
            raise Unsupported(f"{name}: a comparison of {ibounds} indices with {n_ub} positions "
                              f"(more than {_ONE_HOT_MAX} elements)")
        self.widen = _reshaper(list(mi.shape[:d]) + [1] + list(mi.shape[d:]), index, ibounds, name)
        self.positions = _positions(x, mx.shape[d], mx.dim() + 1, d, name)
        self.size = mx.shape[d].node.expr if _is_sym(mx.shape[d]) else int(mx.shape[d])
        self.d = d

    def hits(self, ctx: Context, env: Dict[Any, Any], idx: Tensor, what: str) -> Tensor:
        """[.., n, k, ..]: whether index k is position n."""
        _check_range(ctx, idx, _eval_shape([self.size], env["__sizes__"])[0], what)
        return ctx.compare("eq", self.widen(ctx, env, idx), self.positions(ctx, env))

    def sums(self, ctx: Context, env: Dict[Any, Any], hit: Tensor, src: Tensor) -> Tensor:
        """Each position's sum of the src values whose index is it."""
        return ctx.reduce_dim("sum", ctx.where(hit, self.widen(ctx, env, src), 0), self.d + 1, False)


def _scatter_several(node: torch.fx.Node, name: str, val: Callable[..., Any], x: torch.fx.Node, d: int,
                     index: torch.fx.Node, src: Any, value: bool) -> Callable[..., Any]:
    """_lower_scatter's form with k > 1 indices per position along d: the
    indices widened by an axis before k ([.., 1, k, ..]) compared with the
    positions ([.., n, 1, ..]), each position's hits counted (more than one
    fails the call's sync) and its value summed over k (the one hit's), and
    base kept where none hit."""
    along = _HitsAlong(x, index, d, name)

    def scatter(ctx: Context, env: Dict[Any, Any]) -> _V:
        hit = along.hits(ctx, env, val(env, index), "scatter")
        count = ctx.reduce_dim("sum", hit, d + 1, False)
        ctx.assert_async(ctx.compare("le", count, 1),
                         "scatter: an index repeats among one position's indices (PyTorch's result is undefined)")
        base = val(env, x)
        if value:
            return _V(_cast_to(ctx, ctx.where(ctx.compare("gt", count, 0), src, base), node))
        return _V(ctx.where(ctx.compare("gt", count, 0), along.sums(ctx, env, hit, val(env, src)), base))
    return scatter


def _prefix(ctx: Context, t: Tensor, n: int) -> Tensor:
    """The first n of a 1-d tensor t made at a size's bound, as a tensor
    dynamic at that bound (clb_slice of a host int)."""
    return ctx.slice(t, 0, 0, n, out=ctx.empty(tuple(t.bounds), t.dtype, dynamic=(True,)))


def _positions(node: torch.fx.Node, size: Any, rank: int, at: int, name: str) -> Callable[..., Tensor]:
    """For iota along dim `at` of a rank-`rank` tensor, int64 of shape [1, ...,
    size, ..., 1]: a function (ctx, env) giving it. A static size's positions
    are made once; a symbolic one's at its bound once, and each call takes as
    many as its own size (a host int from the inputs' sizes; clb_slice). A size
    only the device knows breaks the graph."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    held: Dict[str, Tensor] = {}
    spec = [-1 if k == at else 1 for k in range(rank)]
    if not _is_sym(size):
        n = int(size)

        def static(ctx: Context, env: Dict[Any, Any]) -> Tensor:
            if "t" not in held:
                held["t"] = ctx.from_numpy(np.arange(n, dtype=np.int64).reshape(spec))
            return held["t"]
        return static
    if free_unbacked_symbols(size):
        raise Unsupported(f"{name}: positions along a data-dependent dim")
    ub = _shape_bounds([size], node, name)[0][0]
    part = size.node.expr

    def dynamic(ctx: Context, env: Dict[Any, Any]) -> Tensor:
        if "t" not in held:
            held["t"] = ctx.from_numpy(np.arange(ub, dtype=np.int64))
        n = _eval_shape([part], env["__sizes__"])
        if n is None:  # every symbol is an input's (checked above): not reached
            raise RuntimeError(f"clbound: {name}: the size {part} is not among this call's inputs")
        return ctx.reshape(_prefix(ctx, held["t"], n[0]), spec)
    return dynamic


def _lower_scatter_add(node: torch.fx.Node, name: str, val: Callable[..., Any]) -> Callable[..., Any]:
    """scatter_add(base, dim, index, src), gather's backward (base new_zeros of
    the input's sizes, src the gradient): out[.., j, ..] = base[.., j, ..] +
    sum over k of src[.., k, ..] where index[.., k, ..] == j, as a comparison
    of index with the positions along dim (an axis inserted: [.., n, k, ..]),
    a where and a sum over k. No atomics, so the same sums on every run, at the
    cost of n * index's elements at the bounds: past _ONE_HOT_MAX it breaks
    the graph. index and src of one shape, base's sizes beside dim; n may be
    dynamic (the sequence a gather picked from). An index outside [0, n)
    fails the call's sync (a DeviceCheckError, a RuntimeError as eager's):
    gather's backward looks like a user's new_zeros(...).scatter_add(...), so
    both are checked. Where index's sizes beside dim are other symbols than
    base's (a gather's indices from another input: the batch of actions picking
    Q-values), the sums go into zeros of base's sizes at [0, index's size) of
    each dim (clb_basic_index_put; an index larger than base there fails as in
    PyTorch)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    x, dim, index, src = node.args[:4]
    mx, mi, ms = _meta(x), _meta(index), _meta(src)
    if node.kwargs or not all(isinstance(v, torch.Tensor) for v in (mx, mi, ms)) or mx.dim() == 0:
        raise Unsupported(f"{name}: scatter_add of this form")
    r = mx.dim()
    d = dim % r
    if not (mi.dim() == ms.dim() == r and [str(a) for a in mi.shape] == [str(b) for b in ms.shape]) or any(
            _is_sym(v) and free_unbacked_symbols(v) for v in list(mx.shape) + list(mi.shape)) or any(
            not _is_sym(a) and not _is_sym(b) and int(b) > int(a)
            for k, (a, b) in enumerate(zip(mx.shape, mi.shape)) if k != d):
        raise Unsupported(f"{name}: scatter_add of {list(ms.shape)} at {list(mi.shape)} into {list(mx.shape)}")
    same = all(str(a) == str(b) for k, (a, b) in enumerate(zip(mx.shape, mi.shape)) if k != d)
    if mi.dtype != torch.int64:
        raise Unsupported(f"{name}: indices of {mi.dtype}")
    along = _HitsAlong(x, index, d, name)
    zeros = getattr(x, "target", None) is aten.new_zeros.default
    x_parts, i_parts = _shape_parts(x), _shape_parts(index)
    x_bounds, x_dynamic = _lowering_bounds(x, name)
    npdt = _np_dtype(mx.dtype, name)

    def placed(ctx: Context, env: Dict[Any, Any], sums: Tensor) -> Tensor:
        """sums (index's sizes beside dim) in zeros of base's sizes."""
        have, want = _eval_shape(i_parts, env["__sizes__"]), _eval_shape(x_parts, env["__sizes__"])
        out = ctx.zeros(tuple(x_bounds), npdt, dynamic=tuple(x_dynamic), sizes=tuple(want))
        ctx.setitem(out, tuple(slice(None) if k == d else slice(0, have[k]) for k in range(r)), sums)
        return out

    def scatter_add(ctx: Context, env: Dict[Any, Any]) -> _V:
        sums = along.sums(ctx, env, along.hits(ctx, env, val(env, index), "scatter_add"), val(env, src))
        if not same:
            sums = placed(ctx, env, sums)
        return _V(_cast_to(ctx, sums if zeros else ctx.add(val(env, x), sums), node))
    return scatter_add


def _check_range(ctx: Context, idx: Tensor, n: int, what: str) -> None:
    """Every element of idx in [0, n), checked on the device: one outside
    fails the call's sync (a DeviceCheckError, a RuntimeError as PyTorch's
    IndexError and out-of-bounds errors are)."""
    ctx.assert_async(ctx.logical_and(ctx.compare("ge", idx, 0), ctx.compare("lt", idx, n)),
                     f"{what}: an index is outside [0, {n})")


def _lower_int_index(node: torch.fx.Node, name: str, val: Callable[..., Any]) -> Callable[..., Any]:
    """x[i0, i1, ...] with integer index tensors for x's first k dims
    (advanced indexing: x[idx], logits[arange(B), targets]), its backward
    index_put(zeros, indices, values, accumulate=True), and index_select /
    index_add along dim 0. The indices become one row number of x viewed as
    [rows, W] (W the remaining dims' size, static): advanced indexing counts
    negative indices from the end (index_select and index_add refuse them, as
    PyTorch does), each is checked against its dim (one outside fails the
    call's sync, as PyTorch raises; a lone index of a read is clb_gather's to
    check), and the row is i0 * size1 * ... + i1 * ... + ... (the sizes the
    call's own). A read gathers the rows (clb_gather). A write is
    onehot(rows)^T @ values, one GEMM as embedding's backward: repeated rows
    add up, the same on every run, but an inf or NaN among the values makes
    NaN in the other rows of its column (0 * inf); past _ONE_HOT_MAX
    elements at the bounds it breaks the graph, as do index_put without
    accumulate (a write whose duplicates PyTorch leaves undefined), index
    tensors of different shapes there and values that broadcast."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    tgt = node.target
    args = node.args
    op = str(tgt).split(".")[1]  # index, index_put, index_select, index_add: for messages
    if tgt in (aten.index_select.default, aten.index_add.default):
        dim = args[1]
        if dim != 0 and not (isinstance(dim, int) and _meta(args[0]) is not None and dim == -_meta(args[0]).dim()):
            raise Unsupported(f"{name}: along dim {dim} (clbound runs dim 0)")
        x, idxs, wrap = args[0], [args[2]], False
        put = tgt is aten.index_add.default
        values = args[3] if put else None
        alpha = args[4] if len(args) > 4 else node.kwargs.get("alpha", 1)
        if put and alpha != 1:
            raise Unsupported(f"{name}: alpha={alpha}")
    else:
        put = tgt is aten.index_put.default
        x, idxs, wrap = args[0], list(args[1]), True
        values = args[2] if put else None
        if put and not (args[3] if len(args) > 3 else node.kwargs.get("accumulate", False)):
            raise Unsupported(f"{name}: index_put without accumulate")
    mx = _meta(x)
    k = len(idxs)
    if not isinstance(mx, torch.Tensor) or k > mx.dim() or any(
            not isinstance(_meta(i), torch.Tensor) or _meta(i).dtype not in (torch.int64, torch.int32) for i in idxs):
        raise Unsupported(f"{name}: {k} indices of {getattr(mx, 'shape', mx)}")
    rest = list(mx.shape[k:])
    if any(_is_sym(d) for d in rest):
        raise Unsupported(f"{name}: a dynamic dim past the indexed ones")
    width = int(np.prod([int(d) for d in rest], dtype=np.int64))
    if width == 0:
        raise Unsupported(f"{name}: no elements past the indexed dims")
    lead = list(mx.shape[:k])
    if any(_is_sym(d) and free_unbacked_symbols(d) for d in lead):
        raise Unsupported(f"{name}: indices into a data-dependent dim")
    lead_parts = [d.node.expr if _is_sym(d) else int(d) for d in lead]
    if put:
        ishapes = {tuple(str(d) for d in _meta(i).shape) for i in idxs}
        ishape = list(_meta(idxs[0]).shape)
        mv = _meta(values)
        if len(ishapes) != 1 or not isinstance(mv, torch.Tensor) or [str(d) for d in mv.shape] != [
                str(d) for d in ishape + rest]:
            raise Unsupported(f"{name}: values {list(getattr(mv, 'shape', []))} for indices {sorted(ishapes)}")
        if not mx.dtype.is_floating_point or mv.dtype != mx.dtype:
            raise Unsupported(f"{name}: values of {mv.dtype} into {mx.dtype} (the one-hot GEMM is floating only)")
    else:
        out = _meta(node)
        ishape = list(out.shape[:out.dim() - len(rest)])
    m_ub = int(np.prod(_shape_bounds(ishape, node, name)[0], dtype=np.int64))
    held: Dict[str, Tensor] = {}

    def rows(ctx: Context, env: Dict[Any, Any]) -> Tensor:
        """The row of each indexed element, [M, 1] int64."""
        sizes = _eval_shape(lead_parts, env["__sizes__"])
        lin = None
        for j, (i, n) in enumerate(zip(idxs, sizes)):
            t = val(env, i)
            if t.dtype != np.int64:
                t = ctx.cast(t, np.int64)
            if wrap:
                t = ctx.where(ctx.compare("lt", t, 0), ctx.add(t, n), t)  # -1 is the last
            if put or k > 1:  # a lone index of a read is clb_gather's to check
                _check_range(ctx, t, n, f"{op} of dim {j}")
            stride = int(np.prod(sizes[j + 1:], dtype=np.int64))
            t = ctx.mul(t, stride) if stride != 1 else t
            lin = t if lin is None else ctx.add(lin, t)
        return ctx.reshape(lin, [-1, 1])

    if not put:
        shaped = _reshaper(list(out.shape), node, [m_ub, width], name)

        def index(ctx: Context, env: Dict[Any, Any]) -> _V:
            ones = held.get("ones")
            if ones is None:
                ones = held["ones"] = ctx.full((1, width), 1, dtype=np.int64)
            flat = ctx.reshape(val(env, x), [-1, width])
            return _V(shaped(ctx, env, ctx.gather(flat, 0, ctx.mul(rows(ctx, env), ones))))
        return index

    n_sym = lead[0]
    for d in lead[1:]:
        n_sym = n_sym * d
    n_ub = int(np.prod(_lowering_bounds(x, name)[0][:k], dtype=np.int64))
    if m_ub * n_ub > _ONE_HOT_MAX:
        raise Unsupported(f"{name}: a one-hot of {m_ub} x {n_ub} elements (more than {_ONE_HOT_MAX})")
    positions = _positions(x, n_sym, 2, 1, name)  # [1, N]
    shaped_x = _reshaper(list(mx.shape), x, [n_ub, width], name)
    zeros = tgt is aten.index_put.default and getattr(x, "target", None) is aten.new_zeros.default

    def index_put(ctx: Context, env: Dict[Any, Any]) -> _V:
        hit = ctx.compare("eq", rows(ctx, env), positions(ctx, env))  # [M, N]
        sums = shaped_x(ctx, env, _one_hot_sum(ctx, hit, val(env, values), width))  # [N, W]
        return _V(sums if zeros else ctx.add(val(env, x), sums))
    return index_put


def _scalar(a: Any, what: str) -> Any:
    if isinstance(a, (bool, int, float)):
        return a
    raise Unsupported(f"{what}: operand {a!r}")


def _cast_to(ctx: Context, t: Tensor, node: torch.fx.Node) -> Tensor:
    want = _meta(node)
    if want is not None and isinstance(want, torch.Tensor):
        npdt = np.dtype(_TORCH_TO_NP[want.dtype])
        if t.dtype != npdt:
            return ctx.cast(t, npdt)
    return t


_BINARY = {aten.add.Tensor: "add", aten.add.Scalar: "add", aten.sub.Tensor: "sub", aten.sub.Scalar: "sub",
           aten.mul.Tensor: "mul", aten.mul.Scalar: "mul", aten.div.Tensor: "div", aten.div.Scalar: "div",
           aten.maximum.default: "maximum", aten.minimum.default: "minimum", aten.pow.Tensor_Scalar: "pow",
           aten.pow.Tensor_Tensor: "pow", aten.pow.Scalar: "pow", aten.floor_divide.default: "floor_divide",
           aten.div.Tensor_mode: "div", aten.div.Scalar_mode: "div",  # these two: rounding_mode="floor" only
           aten.true_divide.Tensor: "div", aten.true_divide.Scalar: "div", prims.div.default: "div",
           # Python's %: the divisor's sign, as PyTorch's remainder (fmod, then + b where the signs differ)
           aten.remainder.Tensor: "remainder", aten.remainder.Scalar: "remainder"}
_RSUB = {aten.rsub.Scalar: "sub", aten.rsub.Tensor: "sub"}
_UNARY = {aten.relu.default: "relu", aten.sigmoid.default: "sigmoid", aten.tanh.default: "tanh",
          aten.exp.default: "exp", aten.log.default: "log", aten.neg.default: "neg", aten.erf.default: "erf",
          aten.abs.default: "abs", aten.sqrt.default: "sqrt", aten.rsqrt.default: "rsqrt", aten.log1p.default: "log1p",
          aten.expm1.default: "expm1",
          aten.floor.default: "floor", aten.ceil.default: "ceil", aten.round.default: "round",
          aten.trunc.default: "trunc", aten.sin.default: "sin", aten.cos.default: "cos", aten.log2.default: "log2",
          aten.log10.default: "log10", aten.exp2.default: "exp2"}
_ROUNDING = ("floor", "ceil", "round", "trunc")  # of an integer tensor: the tensor itself
_UNARY_BW_OUT = {aten.sigmoid_backward.default: "sigmoid", aten.tanh_backward.default: "tanh"}
_COMPARE = {aten.gt.Scalar: "gt", aten.gt.Tensor: "gt", aten.lt.Scalar: "lt", aten.lt.Tensor: "lt",
            aten.ge.Scalar: "ge", aten.ge.Tensor: "ge", aten.le.Scalar: "le", aten.le.Tensor: "le",
            aten.eq.Scalar: "eq", aten.eq.Tensor: "eq", aten.ne.Scalar: "ne", aten.ne.Tensor: "ne"}
_IDENTITY = {aten.detach.default, aten.clone.default, aten.alias.default, aten.lift_fresh_copy.default}
_RESHAPE = {aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.squeeze.dim,
            aten.squeeze.dims, aten.squeeze.default, aten.unsqueeze.default,
            prims.broadcast_in_dim.default}  # the last: where it only inserts 1s (a kept dim)
_TRANSPOSE = {aten.t.default, aten.transpose.int, aten.permute.default}
_REDUCE = {aten.sum.dim_IntList: "sum", aten.sum.default: "sum", aten.mean.dim: "mean", aten.mean.default: "mean",
           aten.amax.default: "max", prims.sum.default: "sum"}
_LOSS = {aten.binary_cross_entropy.default: "bce", aten.mse_loss.default: "mse"}
_LOSS_BW = {aten.binary_cross_entropy_backward.default: "bce", aten.mse_loss_backward.default: "mse"}
_CAST = {aten._to_copy.default, aten.to.dtype, prims.convert_element_type.default}
_OTHER = {aten.mm.default, aten.addmm.default, aten.threshold_backward.default, aten.nonzero.default,
          aten.masked_select.default, aten.masked_scatter.default, aten.expand.default, aten.index.Tensor,
          aten.index_put.default, aten.slice.Tensor, aten.select.int, aten.slice_backward.default,
          aten.select_backward.default, aten.slice_scatter.default, aten.select_scatter.default,
          aten.copy.default, aten.fill.Scalar}
_ACTIVATION = {aten.clamp.default, aten.hardtanh.default, aten.hardtanh_backward.default, aten.leaky_relu.default,
               aten.leaky_relu_backward.default, aten.silu.default, aten.silu_backward.default, aten.elu.default,
               aten.elu_backward.default, aten.logical_and.default, aten.logical_or.default, aten.gelu.default,
               aten.gelu_backward.default, aten.softplus.default, aten.softplus_backward.default,
               aten.hardswish.default, aten.hardswish_backward.default, aten.mish.default,
               aten.mish_backward.default, aten.reciprocal.default, aten.sign.default, aten.sgn.default,
               aten.clamp_min.default, aten.clamp_max.default, aten.clamp_min.Tensor, aten.clamp_max.Tensor,
               aten.log_sigmoid_forward.default, aten.log_sigmoid_backward.default,
               aten.binary_cross_entropy_with_logits.default, aten.zeros_like.default, aten.ones_like.default,
               aten.full_like.default, aten.isnan.default, aten.empty_like.default, aten.bitwise_and.Tensor,
               aten.bitwise_or.Tensor, aten.bitwise_not.default}
_LAYER_NORM = {aten.native_layer_norm.default, aten.native_layer_norm_backward.default}
_RANDOM = {aten.native_dropout.default, aten.native_dropout_backward.default, aten.rand_like.default}
_NLL = {aten.nll_loss_forward.default, aten.nll_loss_backward.default, aten.gather.default,
        aten.nll_loss2d_forward.default, aten.nll_loss2d_backward.default}
_SPLIT = {aten.split.Tensor, aten.split_with_sizes.default, aten.unbind.int}
_INDEX_DIM0 = {aten.index_select.default, aten.index_add.default}  # along dim 0: as integer indexing
_TOPK = {aten.topk.default}
_TUPLES = _LAYER_NORM | _SPLIT | _TOPK | {aten.native_dropout.default, aten.nll_loss_forward.default,
                                  aten.nll_loss2d_forward.default, aten.max.dim,
                                  aten.min.dim, aten.log_sigmoid_forward.default}  # getitem takes their items
# ops that may take a size Dynamo passes (or arithmetic on sizes) as an argument
_ARANGE = {aten.arange.default, aten.arange.start, aten.arange.start_step}
_SIZED = {aten.slice.Tensor, aten.slice_scatter.default, aten.scalar_tensor.default,
          aten.slice_backward.default} | _ARANGE
_WHERE = {aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar,
          aten.masked_fill.Scalar, aten.masked_fill.Tensor, aten.scalar_tensor.default}
_SOFTMAX = {aten._softmax.default: False, aten._log_softmax.default: True}  # log or not
_SOFTMAX_BW = {aten._softmax_backward_data.default: False, aten._log_softmax_backward_data.default: True}
_SYM = {aten.sym_size.int: None, aten._assert_scalar.default: None, aten.sym_numel.default: None,
        operator.ge: operator.ge, operator.le: operator.le, operator.gt: operator.gt, operator.lt: operator.lt,
        operator.eq: operator.eq, operator.ne: operator.ne, operator.add: operator.add, operator.sub: operator.sub,
        operator.mul: operator.mul, operator.floordiv: operator.floordiv, operator.truediv: operator.truediv,
        operator.neg: operator.neg, torch.sym_float: float}
_SYM_UNARY = {operator.neg, torch.sym_float}
_VAR = {prims.var.default}  # what var/std (and var_mean, std_mean) decompose to
# the largest or smallest values over a dim and where they are (first index)
_EXTREME = {aten.argmax.default: "max", aten.argmin.default: "min", aten.max.dim: "max", aten.min.dim: "min",
            aten.amin.default: "min"}
_EXTREME_BW = {aten.new_zeros.default, aten.scatter.src, aten.scatter.value}  # max.dim's backward; one-hot
_EMBEDDING = {aten.embedding.default, aten.embedding_dense_backward.default}
_ANY_ALL = {aten.any.default: "any", aten.any.dim: "any", aten.any.dims: "any", aten.all.default: "all",
            aten.all.dim: "all", aten.all.dims: "all"}
_ASSERT = {aten._assert_async.msg, aten._assert_async.default}  # checks on the device (clb_assert)
_SHUFFLE = {aten.flip.default, aten.repeat.default}
_SCAN = {aten.cumsum.default}
_BMM = {aten.bmm.default}
_FILLED = {aten.new_zeros.default, aten.new_ones.default, aten.new_full.default, aten.zeros.default,
           aten.ones.default, aten.full.default}

# ops PyTorch's own decompositions (torch._decomp) turn into ops the lowering
# runs: AOTAutograd applies them before the graphs reach the backend, and the
# backward comes from the decomposed forward or from the op's own formula
_DECOMPOSE = (aten.smooth_l1_loss, aten.smooth_l1_loss_backward, aten.huber_loss, aten.huber_loss_backward,
              aten.xlogy, aten.var.correction, aten.std.correction, aten.var_mean.correction,
              aten.std_mean.correction, aten.linalg_vector_norm, aten.soft_margin_loss,
              aten.soft_margin_loss_backward, aten.logsumexp, aten.norm, aten._native_batch_norm_legit_functional,
              aten._native_batch_norm_legit_no_training, aten._native_batch_norm_legit, aten.native_batch_norm,
              aten.native_batch_norm_backward, aten.hardsigmoid, aten.hardsigmoid_backward, aten.addcmul,
              aten.addcdiv, aten.lerp, aten.celu, aten.glu, aten.glu_backward, aten.stack, aten._prelu_kernel,
              aten._prelu_kernel_backward, aten.frac, aten.triu, aten.tril, aten.constant_pad_nd,
              aten.native_group_norm, aten.native_group_norm_backward,
              aten.logit, aten.logit_backward, aten.special_xlog1py, aten.logaddexp, aten.nan_to_num,
              aten.isposinf, aten.isneginf, aten.count_nonzero, aten.clamp.Tensor, aten.eye, aten.baddbmm,
              aten.logical_not, aten.mv, aten.dot, aten.vdot, aten.addmv, aten.addr, aten.deg2rad, aten.bucketize,
              aten.linspace)
# ops the lowering runs in their common form, decomposed only in the others
# (the decomposition says NotImplemented, and the op stays, where the test is
# false): reduction="sum"/"none" or a weight of the losses, elu's scales
_MEAN = 1  # reduction="mean" as aten's int


def _loss_form(weight_at: Optional[int], reduction_at: int, pos_weight_at: Optional[int] = None,
               means_only: bool = True) -> Callable[..., bool]:
    def other(*a: Any, **kw: Any) -> bool:
        def arg(i: Optional[int], name: str, default: Any) -> Any:
            return default if i is None else a[i] if len(a) > i else kw.get(name, default)
        return (arg(weight_at, "weight", None) is not None or arg(pos_weight_at, "pos_weight", None) is not None
                or (means_only and arg(reduction_at, "reduction", _MEAN) != _MEAN))
    return other


_DECOMPOSE_UNLESS_NATIVE = {
    aten.mse_loss.default: _loss_form(None, 2), aten.mse_loss_backward.default: _loss_form(None, 3),
    aten.binary_cross_entropy.default: _loss_form(2, 3),
    aten.binary_cross_entropy_backward.default: _loss_form(3, 4),
    aten.binary_cross_entropy_with_logits.default: _loss_form(2, 4, pos_weight_at=3, means_only=False),
    aten.elu.default: lambda x, alpha=1, scale=1, input_scale=1: scale != 1 or input_scale != 1,
    # nll_loss with class weights (F.cross_entropy(weight=)): gather, where and
    # sums forward, a one-hot scatter backward
    aten.nll_loss_forward.default: lambda *a, **kw: (a[2] if len(a) > 2 else kw.get("weight")) is not None,
    aten.nll_loss_backward.default: lambda *a, **kw: (a[3] if len(a) > 3 else kw.get("weight")) is not None,
    aten.elu_backward.default: lambda g, alpha, scale, input_scale, *rest: scale != 1 or input_scale != 1,
    # addmm's beta and alpha (a scaled bias, a scaled product)
    aten.addmm.default: lambda *a, **kw: kw.get("beta", 1) != 1 or kw.get("alpha", 1) != 1,
}


def _decomposition_table() -> Dict[Any, Callable[..., Any]]:
    from torch._decomp import get_decompositions
    table = get_decompositions(list(_DECOMPOSE))
    some = get_decompositions(list(_DECOMPOSE_UNLESS_NATIVE))
    for op, when in _DECOMPOSE_UNLESS_NATIVE.items():
        fn = some[op]
        table[op] = lambda *a, fn=fn, when=when, **kw: fn(*a, **kw) if when(*a, **kw) else NotImplemented
    return table

SUPPORTED = frozenset(set(_BINARY) | set(_RSUB) | set(_UNARY) | set(_UNARY_BW_OUT) | set(_COMPARE) | _IDENTITY
                      | _RESHAPE | _TRANSPOSE | set(_REDUCE) | set(_LOSS) | set(_LOSS_BW) | _CAST | _OTHER | set(_SYM)
                      | set(_SOFTMAX) | set(_SOFTMAX_BW) | _WHERE | _ACTIVATION | _LAYER_NORM | _RANDOM | _NLL
                      | _VAR | set(_EXTREME) | _EXTREME_BW | _FILLED | _EMBEDDING | set(_ANY_ALL) | _ARANGE
                      | _ASSERT | _SHUFFLE | _SCAN | _BMM | _SPLIT | _INDEX_DIM0 | _TOPK
                      | {aten.cat.default, aten.scatter_add.default})
"""The aten overloads the lowering runs on clbound; any other is a graph break."""


_LOWERERS: List[Tuple[Any, Callable[..., Any]]] = [
    (_ACTIVATION, _lower_activation), (_LAYER_NORM, _lower_layer_norm), (_RANDOM, _lower_random),
    (_NLL, _lower_nll), ({aten.cat.default}, _lower_cat), (_VAR, _lower_var), (_EXTREME, _lower_extreme),
    (_FILLED, lambda node, name, val: _lower_filled(node, name)), (_EMBEDDING, _lower_embedding),
    (_ANY_ALL, _lower_any_all), (_ARANGE, lambda node, name, val: _lower_arange(node, name)),
    ({aten.flip.default}, _lower_flip), ({aten.repeat.default}, _lower_repeat), (_BMM, _lower_bmm),
    (_SPLIT, _lower_split), ({aten.scatter_add.default}, _lower_scatter_add), (_INDEX_DIM0, _lower_int_index),
    (_TOPK, _lower_topk)]
"""(aten ops, their lowering (node, name, val) -> step), tried in order."""


def _lower_node(node: torch.fx.Node, trans: Dict[torch.fx.Node, bool]) -> Tuple[Callable[..., Any], bool]:
    """(step, result is a lazy transpose) for one call_function node, or Unsupported."""
    tgt = node.target
    args, kw = node.args, node.kwargs
    name = f"{node.name} ({tgt})"

    def tr(a: Any) -> bool:
        return bool(trans.get(a, False)) if isinstance(a, torch.fx.Node) else False

    def val(env: Dict[Any, Any], a: Any) -> Any:
        """A tensor argument as a plain Tensor: a transposed vector is a reshape
        (no copy), a transposed matrix a copy on the device (clb_transpose)."""
        v = _arg(env, a)
        if isinstance(v, _V):
            if v.trans:
                ctx = env["__ctx__"]
                if _vector_like(a):
                    return ctx.reshape(v.t, _reshape_spec(_meta(a).shape, name))
                return ctx.transpose(v.t, 0, 1)
            return v.t
        return v

    if tgt is operator.getitem:  # an item of a tuple this lowering made (layer norm's, dropout's results)
        src, idx = args[0], args[1]
        if not (isinstance(src, torch.fx.Node) and src.target in _TUPLES and src in trans and isinstance(idx, int)):
            raise Unsupported(f"{name}: an item of {getattr(src, 'target', src)}")
        return (lambda ctx, env: env[src][idx]), False

    if tgt not in SUPPORTED:
        raise Unsupported(str(tgt))

    if tgt in _IDENTITY:
        src = args[0]
        return (lambda ctx, env: env[src]), tr(src)

    if tgt in _SYM:
        # sizes as host ints: computed only when an output needs one (a host sync
        # for a data-dependent size); Dynamo's range asserts on them are not run,
        # as clbound's ops keep every size within its bound themselves
        if tgt is aten._assert_scalar.default:
            return (lambda ctx, env: None), False
        if tgt is aten.sym_size.int:
            src, d = args[0], args[1]
            if tr(src):  # the dim of the untransposed tensor, no copy
                return (lambda ctx, env: _Sym(lambda: env[src].t.shape[1 - d % 2])), False
            return (lambda ctx, env: _Sym(lambda: val(env, src).shape[d])), False
        if tgt is aten.sym_numel.default:  # from the inputs' sizes; else read (a host sync)
            src, parts = args[0], _shape_parts(args[0])

            def numel(env: Dict[Any, Any]) -> int:
                shape = _eval_shape(parts, env["__sizes__"])
                return val(env, src).numel() if shape is None else int(np.prod(shape, dtype=np.int64))
            return (lambda ctx, env: _Sym(lambda: numel(env))), False
        op = _SYM[tgt]
        n = 1 if tgt in _SYM_UNARY else 2

        def sym(ctx: Context, env: Dict[Any, Any]) -> Any:
            return op(*(_force(_arg(env, x)) for x in args[:n]))
        return (lambda ctx, env: _Sym(lambda: sym(ctx, env))), False

    for a in args:  # a tensor op: no host int among its operands, but a size as a binary op's scalar
        if isinstance(a, torch.fx.Node) and not isinstance(_meta(a), torch.Tensor) and not (
                (tgt in _BINARY or tgt in _RSUB or tgt in _SIZED) and _is_size(a)):
            raise Unsupported(f"{name}: operand {a.name} is not a tensor")

    if ((tgt is aten.expand.default or tgt in _RESHAPE) and isinstance(_meta(node), torch.Tensor)
            and isinstance(_meta(args[0]), torch.Tensor) and _shape_parts(node) == _shape_parts(args[0])):
        src = args[0]  # to the shape it has (bmm's operands, as AOTAutograd writes them): free
        return (lambda ctx, env: env[src]), tr(src)

    if tgt is aten.expand.default:
        return _lower_expand(node, name, val), False

    if tgt in _TRANSPOSE:
        src = args[0]
        m = _meta(src)
        if tgt is aten.permute.default and m is not None and [d % max(m.dim(), 1) for d in args[1]] == list(
                range(m.dim())):
            return (lambda ctx, env: env[src]), tr(src)  # the dims as they are
        if m is not None and m.dim() > 2 and tgt is not aten.t.default:
            # a copy with the dims moved (clb_transpose, clb_permute); rank 2 and
            # below stay lazy (free, and matmul takes the transposes)
            r = m.dim()
            if tgt is aten.transpose.int:
                d0, d1 = args[1], args[2]
                if sorted((d0 % r, d1 % r)) == [r - 2, r - 1]:  # the last two: lazy
                    return (lambda ctx, env: _LazyT(ctx, val(env, src), (d0, d1))), False
                return (lambda ctx, env: _V(ctx.transpose(val(env, src), d0, d1))), False
            dims = list(args[1])
            if [d % r for d in dims] == list(range(r - 2)) + [r - 1, r - 2]:
                return (lambda ctx, env: _LazyT(ctx, val(env, src), (r - 2, r - 1))), False
            return (lambda ctx, env: _V(ctx.permute(val(env, src), dims))), False
        if tgt is aten.transpose.int and m is not None and m.dim() == 2 and sorted(
                d % 2 for d in args[1:3]) != [0, 1]:
            raise Unsupported(f"{name}: transpose of dims {args[1:3]}")
        if tgt is aten.permute.default and list(args[1]) not in ([1, 0], [-1, -2], [1, -2], [-1, 0]):
            raise Unsupported(f"{name}: permute {args[1]}")
        if m is None or m.dim() > 2:
            raise Unsupported(f"{name}: transpose of a {getattr(m, 'dim', lambda: '?')()}-d tensor")
        if m.dim() < 2:
            return (lambda ctx, env: env[src]), False
        return (lambda ctx, env: _V(env[src].t, not env[src].trans)), not tr(src)

    if tgt in _RESHAPE:
        src = args[0]
        if tgt is prims.broadcast_in_dim.default:
            have, want = _meta(src).shape, _meta(node).shape
            if not _inserts_ones(have, want, list(args[2])):
                raise Unsupported(f"{name}: broadcast of {list(have)} to {list(want)}")
        if sum(_is_sym(d) for d in _meta(node).shape) > 1:
            return _lower_reshape_bounded(node, src, name, val), False
        spec = _reshape_spec(_meta(node).shape, name)

        def reshape(ctx: Context, env: Dict[Any, Any]) -> _V:
            return _V(ctx.reshape(val(env, src), spec))
        return reshape, False

    if tgt in (aten.mm.default, aten.addmm.default):
        bias = args[0] if tgt is aten.addmm.default else None
        a, b = (args[1], args[2]) if bias is not None else (args[0], args[1])
        beta, alpha = kw.get("beta", 1), kw.get("alpha", 1)
        if beta != 1 or alpha != 1:
            raise Unsupported(f"{name}: beta={beta}, alpha={alpha}")
        if not _meta(node).dtype.is_floating_point:
            raise Unsupported(f"{name}: of {_meta(node).dtype} (clbound's matmul is floating only)")
        bm = _meta(bias) if bias is not None else None
        use_linear = bias is not None and bm is not None and bm.dim() == 1 and tr(b) and not tr(a)

        def mm(ctx: Context, env: Dict[Any, Any]) -> _V:
            va, vb = env[a], env[b]
            if use_linear:  # x @ w.T + bias, one fused op
                return _V(ctx.linear(va.t, vb.t, env[bias].t))
            y = ctx.matmul(va.t, vb.t, trans_a=va.trans, trans_b=vb.trans)
            if bias is not None:
                y = ctx.add(y, val(env, bias))
            return _V(y)
        return mm, False

    if tgt in _BINARY or tgt in _RSUB:
        op = _BINARY.get(tgt) or _RSUB[tgt]
        x, y = args[0], args[1]
        alpha = kw.get("alpha", 1)
        if alpha != 1 and op not in ("add", "sub"):
            raise Unsupported(f"{name}: alpha")
        if tgt in _RSUB:
            x, y = y, x
        for a in (x, y):
            if not isinstance(a, torch.fx.Node):
                _scalar(a, name)
        rounding = kw.get("rounding_mode")
        if rounding == "floor":
            op = "floor_divide"
        elif rounding is not None:
            raise Unsupported(f"{name}: rounding_mode={rounding}")
        if op == "pow" and not _meta(node).dtype.is_floating_point:
            raise Unsupported(f"{name}: integer powers (clbound's pow is floating only)")
        if tgt is prims.div.default and not _meta(node).dtype.is_floating_point:
            raise Unsupported(f"{name}: integer division (prims.div truncates)")

        def binary(ctx: Context, env: Dict[Any, Any]) -> _V:
            vx, vy = _force(val(env, x)), _force(val(env, y))  # a size operand: its host int
            if alpha != 1:
                vy = ctx.mul(vy, alpha) if isinstance(vy, Tensor) else vy * alpha
            if not isinstance(vx, Tensor) and not isinstance(vy, Tensor):
                raise Unsupported(f"{name}: two scalars")
            return _V(_cast_to(ctx, ctx.binary(op, vx, vy), node))
        return binary, False

    if tgt in _UNARY:
        op = _UNARY[tgt]
        src = args[0]
        sm, om = _meta(src), _meta(node)
        if op == "abs":  # integers too (maximum(x, -x))
            return (lambda ctx, env: _V(ctx.abs(val(env, src)))), False
        if op in _ROUNDING and isinstance(sm, torch.Tensor) and not sm.dtype.is_floating_point:
            return (lambda ctx, env: env[src]), tr(src)
        if op not in ("relu", "neg") and isinstance(sm, torch.Tensor) and not sm.dtype.is_floating_point:
            # PyTorch computes exp, sqrt, ... of an integer tensor in its float result dtype
            if not (isinstance(om, torch.Tensor) and om.dtype.is_floating_point):
                raise Unsupported(f"{name}: of {sm.dtype}")
            npdt = _np_dtype(om.dtype, name)
            return (lambda ctx, env: _V(ctx.unary(op, ctx.cast(val(env, src), npdt)))), False
        return (lambda ctx, env: _V(ctx.unary(op, val(env, src)))), False

    if tgt in _UNARY_BW_OUT:
        op = _UNARY_BW_OUT[tgt]
        dy, y = args[0], args[1]
        return (lambda ctx, env: _V(ctx.unary_backward(op, val(env, dy), y=val(env, y)))), False

    if tgt is aten.threshold_backward.default:
        dy, x, thr = args[0], args[1], args[2]
        if thr != 0:
            raise Unsupported(f"{name}: threshold {thr}")
        # relu's backward: dy where x > 0 (x is relu's input or output: the same sign test)
        return (lambda ctx, env: _V(ctx.unary_backward("relu", val(env, dy), x=val(env, x)))), False

    if tgt in _COMPARE:
        op = _COMPARE[tgt]
        x, y = args[0], args[1]
        if not isinstance(y, torch.fx.Node):
            _scalar(y, name)
        return (lambda ctx, env: _V(ctx.compare(op, val(env, x), val(env, y)))), False

    if tgt in _REDUCE:
        op = _REDUCE[tgt]
        src = args[0]
        m = _meta(src)
        dims = args[1] if len(args) > 1 else kw.get("dim")
        keepdim = bool(args[2] if len(args) > 2 else kw.get("keepdim", False))
        if kw.get("dtype") is not None or kw.get("output_dtype") not in (None, m.dtype):
            raise Unsupported(f"{name}: dtype=")
        if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
            if keepdim:
                spec = [1] * m.dim()
                return (lambda ctx, env: _V(ctx.reshape(ctx.reduce_all(op, val(env, src)), spec))), False
            return (lambda ctx, env: _V(_cast_to(ctx, ctx.reduce_all(op, val(env, src)), node))), False
        ds = sorted({d % m.dim() for d in _flat(dims)}, reverse=True)

        def reduce(ctx: Context, env: Dict[Any, Any]) -> _V:
            t = val(env, src)
            for d in ds:
                t = ctx.reduce_dim(op, t, d, keepdim)
            return _V(_cast_to(ctx, t, node))
        return reduce, False

    if tgt in _LOSS or tgt in _LOSS_BW:
        bw = tgt in _LOSS_BW
        kind = (_LOSS_BW if bw else _LOSS)[tgt]
        if bw:
            dy, pred, target = args[0], args[1], args[2]
            rest = list(args[3:])
        else:
            dy, pred, target = None, args[0], args[1]
            rest = list(args[2:])
        weight = None
        if kind == "bce":
            weight = rest.pop(0) if rest else kw.get("weight")
        reduction = rest[0] if rest else kw.get("reduction", 1)
        if weight is not None:
            raise Unsupported(f"{name}: weight")
        if reduction != 1:
            raise Unsupported(f"{name}: reduction {reduction} (only mean runs on clbound)")
        if not bw:
            return (lambda ctx, env: _V(ctx.loss(kind, val(env, pred), val(env, target), need_grad=False)[0])), False

        def loss_bw(ctx: Context, env: Dict[Any, Any]) -> _V:
            _, g = ctx.loss(kind, val(env, pred), val(env, target))
            return _V(ctx.mul(g, val(env, dy)))
        return loss_bw, False

    if tgt in _CAST:
        src = args[0]
        want = _meta(node)
        for k in kw:
            if k not in ("dtype", "layout", "device", "pin_memory", "memory_format", "non_blocking"):
                raise Unsupported(f"{name}: {k}=")
        npdt = _np_dtype(want.dtype, name)

        def cast(ctx: Context, env: Dict[Any, Any]) -> _V:
            t = val(env, src)
            return _V(t if t.dtype == np.dtype(npdt) else ctx.cast(t, npdt))
        return cast, False

    if tgt is aten.nonzero.default:
        src = args[0]
        return (lambda ctx, env: _V(ctx.nonzero(val(env, src)))), False

    if tgt is aten.masked_select.default:
        x, mask = args[0], args[1]
        return (lambda ctx, env: _V(ctx.masked_select(val(env, x), val(env, mask)))), False

    if tgt is aten.masked_scatter.default:
        x, mask, src = args[0], args[1], args[2]
        return (lambda ctx, env: _V(ctx.masked_scatter(val(env, x), val(env, mask), val(env, src)))), False

    for ops, lower in _LOWERERS:  # the ops with a lowering function of their own
        if tgt in ops:
            return lower(node, name, val), False

    if tgt is aten.cumsum.default:  # clb_cumsum; dtype= casts first, as PyTorch does
        src, dim = args[0], args[1]
        want = _meta(node)
        dt = kw.get("dtype")
        npdt = _np_dtype(dt, name) if dt is not None else None

        def cumsum(ctx: Context, env: Dict[Any, Any]) -> _V:
            x = val(env, src)
            if npdt is not None and x.dtype != np.dtype(npdt):
                x = ctx.cast(x, npdt)
            return _V(_cast_to(ctx, ctx.cumsum(x, dim), node))
        if not isinstance(want, torch.Tensor) or want.dim() == 0:
            raise Unsupported(f"{name}: of a 0-d tensor")
        return cumsum, False

    if tgt in _ASSERT:  # stays on the device: a false cond fails the call's sync (a RuntimeError, as eager's)
        cond, msg = args[0], (args[1] if len(args) > 1 else None)
        if not isinstance(msg, (str, type(None))):
            raise Unsupported(f"{name}: message {msg!r}")

        def check(ctx: Context, env: Dict[Any, Any]) -> None:
            ctx.assert_async(val(env, cond), msg or "torch._assert_async")
        return check, False

    if tgt in (aten.scatter.src, aten.scatter.value):
        return _lower_scatter(node, name, val), False

    if tgt is aten.scalar_tensor.default:  # a 0-d tensor of a scalar (where's backward makes its zeros)
        value = args[0]  # or a size, or arithmetic on sizes (a mean's count): its host number
        if not isinstance(value, torch.fx.Node):
            _scalar(value, name)
        npdt = _np_dtype(_meta(node).dtype, name)
        return (lambda ctx, env: _V(ctx.full((), _force(_arg(env, value)), dtype=npdt))), False

    if tgt in _WHERE:
        # where(cond, a, b) and masked_fill(x, mask, value) = where(mask, value, x):
        # clb_where, the result cast to the graph's dtype where PyTorch's
        # promotion differs
        if tgt in (aten.masked_fill.Scalar, aten.masked_fill.Tensor):
            cond, a, b = args[1], args[2], args[0]
        else:
            cond, a, b = args[0], args[1], args[2]
        for v in (a, b):
            if not isinstance(v, torch.fx.Node):
                _scalar(v, name)

        def where(ctx: Context, env: Dict[Any, Any]) -> _V:
            return _V(_cast_to(ctx, ctx.where(val(env, cond), val(env, a), val(env, b)), node))
        return where, False

    if tgt in _SOFTMAX or tgt in _SOFTMAX_BW:
        # (log_)softmax over a dim and its backward from the output:
        # clb_softmax and clb_softmax_backward over the last dim, another
        # moved last and back
        log = _SOFTMAX[tgt] if tgt in _SOFTMAX else _SOFTMAX_BW[tgt]
        src = args[0]
        m = _meta(src)
        dim = args[1] if tgt in _SOFTMAX else args[2]
        if m is not None and m.dim() == 2 and dim % 2 == 0:
            return _lower_softmax_dim0(node, name, val, log), True
        if m is None or m.dim() == 0:
            raise Unsupported(f"{name}: of a 0-d tensor")
        if tgt in _SOFTMAX and args[2]:
            raise Unsupported(f"{name}: half_to_float")
        last = m.dim() - 1
        d = dim % m.dim()

        def moved(ctx: Context, t: Tensor) -> Tensor:  # dim d swapped with the last: a copy (clb_transpose)
            return t if d == last else ctx.transpose(t, d, last)
        if tgt in _SOFTMAX:
            def softmax(ctx: Context, env: Dict[Any, Any]) -> _V:
                x = moved(ctx, val(env, src))
                return _V(moved(ctx, ctx.log_softmax(x) if log else ctx.softmax(x)))
            return softmax, False
        dy, y = args[0], args[1]
        return (lambda ctx, env: _V(moved(ctx, ctx.softmax_backward(moved(ctx, val(env, y)), moved(ctx, val(env, dy)),
                                                                    log=log)))), False

    if tgt is aten.slice.Tensor:
        # x[..., start:end:step, ...] at dim: clb_slice, whose Python semantics
        # (negative values from the end of the actual size, ends clamped) are
        # PyTorch's; start and end may be sizes Dynamo passes (host ints)
        src = args[0]
        dim, start, end, step = (list(args[1:]) + [None] * 4)[:4]
        dim = kw.get("dim", 0 if dim is None else dim)
        start, end, step = kw.get("start", start), kw.get("end", end), kw.get("step", 1 if step is None else step)
        if not isinstance(dim, int) or not isinstance(step, int) or step <= 0:
            raise Unsupported(f"{name}: dim {dim}, step {step}")
        # a symbolic result size keeps its symbol's bound at every call (clb_slice
        # alone would bound it by this call's start and end, and a matmul with
        # another tensor of that symbol needs the two bounds equal): cat's backward
        want = _meta(node)
        sym_ub = _upper_bound(want.shape[dim], node, dim) if isinstance(want, torch.Tensor) and _is_sym(
            want.shape[dim]) else None
        # a static result of a dynamic dim (x[:3] where Dynamo knows the batch
        # is at least 3): made static, as the graph's shapes say, by a view
        # whose count the device checks (clb_reshape_bounded), so that a static
        # reshape or an output read without a sync takes it
        sm = _meta(src)
        static = (isinstance(want, torch.Tensor) and isinstance(sm, torch.Tensor) and want.dim() > 0
                  and not any(_is_sym(d) for d in want.shape) and any(_is_sym(d) for d in sm.shape))
        static_shape = [int(d) for d in want.shape] if static else []

        def slice_(ctx: Context, env: Dict[Any, Any]) -> _V:
            lo, hi = (None if v is None else int(_force(_arg(env, v))) for v in (start, end))
            x = val(env, src)
            out = None
            if static:
                y = ctx.slice(x, dim, lo, hi, step)
                return _V(ctx.reshape_bounded(y, static_shape, static_shape, [False] * len(static_shape)))
            if sym_ub is not None:
                d = dim % len(x.bounds)
                bounds = list(x.bounds)
                bounds[d] = max(sym_ub, len(range(bounds[d])[lo:hi:step]))  # the longest this slice can be
                dyn = list(x.dynamic)
                dyn[d] = True
                out = ctx.empty(tuple(bounds), x.dtype, dynamic=tuple(dyn))
            return _V(ctx.slice(x, dim, lo, hi, step, out=out))
        return slice_, False

    if tgt in (aten.slice_backward.default, aten.select_backward.default, aten.slice_scatter.default,
               aten.select_scatter.default):
        return _lower_put(node, name, val), False

    if tgt in (aten.copy.default, aten.fill.Scalar):
        # functional forms of x.copy_(src) and x.fill_(value): a new tensor of
        # x's shape and dtype holding src (of x's shape, or 0-d) or value
        x, src = args[0], args[1]
        if tgt is aten.copy.default:
            sm = _meta(src)
            if not (isinstance(sm, torch.Tensor) and (sm.dim() == 0 or _same_shape(sm, _meta(x)))):
                raise Unsupported(f"{name}: a src that broadcasts")
            if sm.dim() > 0:
                return (lambda ctx, env: _V(_cast_to(ctx, ctx.unary("copy", val(env, src)), node))), False
        else:
            _scalar(src, name)

        def fill(ctx: Context, env: Dict[Any, Any]) -> _V:
            out = ctx.unary("copy", val(env, x))
            ctx.setitem(out, (), val(env, src))
            return _V(out)
        return fill, False

    if tgt is aten.select.int:  # x[..., index, ...] at dim, which the result drops: clb_index
        src, dim, index = args[0], args[1], args[2]
        if not isinstance(dim, int) or not isinstance(index, int):
            raise Unsupported(f"{name}: dim {dim}, index {index}")
        return (lambda ctx, env: _V(ctx.index(val(env, src), dim, index))), False

    if tgt in (aten.index.Tensor, aten.index_put.default):
        # integer index tensors (advanced indexing: _lower_int_index), or x[mask]
        # and x[mask] = values with one bool mask of x's own shape: what
        # masked_select and masked_scatter do
        x, idx = args[0], args[1]
        if isinstance(idx, (list, tuple)) and idx and all(
                isinstance(i, torch.fx.Node) and isinstance(_meta(i), torch.Tensor)
                and _meta(i).dtype in (torch.int64, torch.int32) for i in idx):
            return _lower_int_index(node, name, val), False
        mask = idx[0] if isinstance(idx, (list, tuple)) and len(idx) == 1 else None
        if not (isinstance(mask, torch.fx.Node) and _same_shape(_meta(mask), _meta(x))
                and _meta(mask).dtype == torch.bool):
            raise Unsupported(f"{name}: indices other than integer tensors of the leading dims or one bool mask of "
                              "x's shape")
        if tgt is aten.index.Tensor:
            return (lambda ctx, env: _V(ctx.masked_select(val(env, x), val(env, mask)))), False
        values = args[2]
        accumulate = args[3] if len(args) > 3 else kw.get("accumulate", False)
        vm = _meta(values)
        if accumulate:
            raise Unsupported(f"{name}: accumulate=True")
        # only as many values as the mask has true elements, known because the
        # graph selected them with the same mask (x[m] = y[m] * 2): a fixed
        # number may be a broadcast, and another count an error in PyTorch
        if not (isinstance(values, torch.fx.Node) and isinstance(vm, torch.Tensor) and vm.dim() == 1
                and vm.dtype == _meta(x).dtype and _is_sym(vm.shape[0]) and any(
                    _selects_with(n, mask) and _is_sym(_meta(n).shape[0])
                    and _meta(n).shape[0].node.expr == vm.shape[0].node.expr for n in node.graph.nodes)):
            raise Unsupported(f"{name}: values other than a 1-d tensor selected with the same mask")
        return (lambda ctx, env: _V(ctx.masked_scatter(val(env, x), val(env, mask), val(env, values)))), False

    raise Unsupported(str(tgt))


def _selects_with(n: torch.fx.Node, mask: torch.fx.Node) -> bool:
    """Whether n is x[mask] or masked_select(x, mask) with this mask node: a
    1-d result of as many elements as the mask has trues."""
    if n.op != "call_function" or not isinstance(_meta(n), torch.Tensor) or _meta(n).dim() != 1:
        return False
    if n.target is aten.masked_select.default:
        return n.args[1] is mask
    return (n.target is aten.index.Tensor and isinstance(n.args[1], (list, tuple)) and len(n.args[1]) == 1
            and n.args[1][0] is mask)


def _same_shape(a: Any, b: Any) -> bool:
    """Whether two tensors' shapes are the same: equal ints, or the same
    symbolic expression, dim by dim (no guard added)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.dim() != b.dim():
        return False
    for p, q in zip(a.shape, b.shape):
        if _is_sym(p) != _is_sym(q):
            return False
        if (p.node.expr != q.node.expr) if _is_sym(p) else int(p) != int(q):
            return False
    return True


# ---- fusing a Linear layer's ops into clbound's linear ops ----

_ACT = {aten.relu.default: "relu", aten.sigmoid.default: "sigmoid", aten.tanh.default: "tanh",
        aten.exp.default: "exp"}


def _fuse_linear(steps: List[Tuple[torch.fx.Node, Callable[..., Any]]]) -> None:
    """Rewrites, in place, the steps of the patterns AOTAutograd makes of
    nn.Linear into clbound's fused linear ops: fewer launches and passes over
    the data, the same values. Whether the operands are laid out as the fused op
    needs (not transposed, matching bounds) is checked when the steps run, since
    a tensor saved by the forward comes back to the backward as it was then; a
    pattern that does not fit runs op by op as before.

    forward   addmm(b, x, t(W)) read only by relu/sigmoid/tanh/exp
              -> linear(x, W, b, activation=...): the activation in the GEMM
    backward  mm(g, W) [dx], mm(t(g), X) [dW] and sum(g, [0]) [db] of one g
              (dW with dx or db) -> linear_backward(X, W, g): one op (one
              native kernel under host BLAS; a first layer has no dx and no W
              in the graph: W None); when dx is read only by
              threshold_backward(dx, M, 0) and M
              is X's device tensor (the ReLU below's output), that too
              (relu_x=True)
    """
    index = {node: i for i, (node, _) in enumerate(steps)}
    fns = {node: fn for node, fn in steps}

    def node(a: Any) -> bool:
        return isinstance(a, torch.fx.Node)

    def dtype(a: Any) -> Any:
        m = _meta(a)
        return m.dtype if isinstance(m, torch.Tensor) else None

    for act_node, _ in steps:  # forward: addmm + activation
        src = act_node.args[0] if act_node.target in _ACT else None
        if not node(src) or src.target is not aten.addmm.default or len(src.users) != 1 or src not in index:
            continue
        bias, x, wt = src.args[0], src.args[1], src.args[2]
        bm = _meta(bias)
        if (src.kwargs.get("beta", 1) != 1 or src.kwargs.get("alpha", 1) != 1 or not (node(x) and node(wt) and node(bias))
                or bm is None or bm.dim() != 1):
            continue

        def linear_act(ctx: Context, env: Dict[Any, Any], x: Any = x, wt: Any = wt, bias: Any = bias, src: Any = src,
                       act: str = _ACT[act_node.target], mm: Callable[..., Any] = fns[src],
                       alone: Callable[..., Any] = fns[act_node]) -> _V:
            vx, vw, vb = env[x], env[wt], env[bias]
            if vw.trans and not vx.trans and not vb.trans:
                _stats["fused_linear"] += 1
                return _V(ctx.linear(vx.t, vw.t, vb.t, activation=act))
            _stats["fused_op_by_op"] += 1
            env[src] = mm(ctx, env)  # op by op
            return alone(ctx, env)
        fns[src] = lambda ctx, env: None  # the activation is its only reader: it runs there
        fns[act_node] = linear_act

    gs = list(dict.fromkeys([n for n, _ in steps] + [a for n, _ in steps for a in n.args if node(a)]))
    for g in gs:  # backward: the products of one gradient g
        m = _meta(g)
        if not isinstance(m, torch.Tensor) or m.dim() != 2:
            continue
        dx = dw = db = None
        for u in g.users:
            if u not in index:
                continue
            if u.target is aten.mm.default and u.args[0] is g and node(u.args[1]) and dx is None:
                dx = u
            elif u.target is aten.t.default:
                for uu in u.users:
                    if uu in index and uu.target is aten.mm.default and uu.args[0] is u and node(uu.args[1]):
                        dw = dw or uu
            elif (u.target is aten.sum.dim_IntList and u.args[1] is not None
                  and [d % 2 for d in _flat(u.args[1])] == [0]
                  and not u.kwargs.get("dtype") and db is None):
                db = u
        if dw is None or (dx is None and db is None):
            continue
        x, w = dw.args[1], (dx.args[1] if dx is not None else None)  # no dx (a first layer): no W either
        members = [n for n in (dx, dw, db) if n is not None]
        first = min(members, key=lambda n: index[n])
        if (len({dtype(a) for a in (g, x, w) if a is not None}) != 1
                or any(a in index and index[a] >= index[first] for a in (x, w) if a is not None)):
            continue
        thr = next(iter(dx.users)) if dx is not None and len(dx.users) == 1 else None
        if not (thr in index and thr.target is aten.threshold_backward.default and thr.args[0] is dx
                and thr.args[2] == 0 and node(thr.args[1])):
            thr = None
        keepdim = db is not None and bool(db.args[2] if len(db.args) > 2 else db.kwargs.get("keepdim", False))
        # sum(g, [0], keepdim=True) read only by a view back to [N] (nn.Linear's bias
        # gradient): the view is linear_backward's dbias itself, no reshape either way
        dbv = next(iter(db.users)) if keepdim and len(db.users) == 1 else None
        if dbv is not None and not (dbv in index and dbv.target in _RESHAPE and dbv.args[0] is db
                                    and _static_1d(dbv) and _static_1d(db, keepdim=True)
                                    and _meta(dbv).shape[0] == _meta(db).shape[1]):
            dbv = None

        def linear_bw(ctx: Context, env: Dict[Any, Any], g: Any = g, x: Any = x, w: Any = w, dx: Any = dx,
                      dw: Any = dw, db: Any = db, thr: Any = thr, keepdim: bool = keepdim, first: Any = first,
                      dbv: Any = dbv, alone: Callable[..., Any] = fns[first]) -> Any:
            vx, vw, vg = env[x], (env[w] if w is not None else None), env[g]
            bx, bg = vx.t.bounds, vg.t.bounds
            bw = vw.t.bounds if vw is not None else (bg[1], bx[1])
            if (vx.trans or vg.trans or (vw is not None and vw.trans) or bg[0] != bx[0]
                    or bw != (bg[1], bx[1])):  # not linear_backward's shapes and layout: op by op
                _stats["fused_op_by_op"] += 1
                return alone(ctx, env)
            _stats["fused_linear"] += 1
            mask = _root(thr.args[1]) if thr is not None else None
            relu = mask in env and isinstance(env[mask], _V) and env[mask].t is vx.t and not env[mask].trans
            need = [k for k, n in (("dx", dx), ("dw", dw), ("dbias", db)) if n is not None]
            gx, gw, gb = ctx.linear_backward(vx.t, vw.t if vw is not None else None, vg.t, need, relu_x=relu)
            env[dw] = _V(gw)
            if dbv is not None:
                env[dbv], env[db] = _V(gb), None  # the view was db's only reader
            elif db is not None:
                env[db] = _V(ctx.reshape(gb, [1, -1]) if keepdim else gb)
            if relu:
                env[thr], env[dx] = _V(gx), None  # dx's only reader was the ReLU's backward
            elif dx is not None:
                env[dx] = _V(gx)
            return env[first]
        fns[first] = linear_bw
        for n in members + [m for m in (thr, dbv) if m is not None]:
            if n is not first:
                fns[n] = _set_or_run(n, fns[n])
    steps[:] = [(n, fns[n]) for n, _ in steps]


def _static_1d(n: torch.fx.Node, keepdim: bool = False) -> bool:
    """n is [N] with N static ([1, N] when keepdim)."""
    m = _meta(n)
    if not isinstance(m, torch.Tensor) or m.dim() != (2 if keepdim else 1) or any(_is_sym(d) for d in m.shape):
        return False
    return not keepdim or int(m.shape[0]) == 1


def _root(n: torch.fx.Node) -> torch.fx.Node:
    """n through the identity ops (detach, alias, clone: the same device value)."""
    while n.op == "call_function" and n.target in _IDENTITY and isinstance(n.args[0], torch.fx.Node):
        n = n.args[0]
    return n


def _set_or_run(n: torch.fx.Node, fn: Callable[..., Any]) -> Callable[..., Any]:
    """The step of a later member of a fused op: its value is set already, unless
    the fused op ran op by op (then it runs as before)."""
    def step(ctx: Context, env: Dict[Any, Any]) -> Any:
        return env[n] if n in env else fn(ctx, env)
    return step


# ---- compilers for AOTAutograd, with graph breaks around unsupported ops ----

def _log_break(op: str, why: str) -> None:
    _stats["graph_breaks"] += 1
    if op not in _logged_breaks:
        _logged_breaks.add(op)
        log.warning("clbound: %s is not supported (%s): it runs in eager PyTorch (a graph break)", op, why)


def _boxed(fn: Callable[[List[Any]], List[Any]]) -> Callable[[List[Any]], List[Any]]:
    fn._boxed_call = True  # type: ignore[attr-defined]
    return fn


def _compile_graph(gm: torch.fx.GraphModule, example_inputs: Any, what: str) -> Callable[..., Any]:
    n_user = None
    if what == "forward":
        tc = torch._guards.TracingContext.try_get()
        md = getattr(tc, "fw_metadata", None) if tc is not None else None
        n_user = getattr(md, "num_forward", None)
    try:
        lowered = _Lowered(gm, what, n_user)
        return _boxed(lowered)
    except Unsupported as e:
        first = str(e)
    # split: the supported runs of nodes on clbound, the rest in eager PyTorch
    # (all of it when no part would run on clbound)
    split = _partition(gm)
    if split is None:
        _log_break(first.split(" ")[0], first)
    module = gm if split is None else split

    def run(args: List[Any]) -> List[Any]:
        _materialize(args)
        out = module(*args)
        args.clear()
        return list(out) if isinstance(out, (list, tuple)) else [out]
    return _boxed(run)


def _partition(gm: torch.fx.GraphModule) -> Optional[torch.fx.GraphModule]:
    """gm with every maximal run of supported nodes fused into a submodule that
    runs on clbound; None when nothing would run on clbound."""
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupport

    ok: Dict[torch.fx.Node, bool] = {}
    trans: Dict[torch.fx.Node, bool] = {}
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        try:
            _, trans[node] = _lower_node(node, trans)
            ok[node] = True
        except Unsupported as e:
            ok[node] = False
            _log_break(str(node.target), str(e))

    class _Support(OperatorSupport):
        def is_node_supported(self, submodules: Any, node: torch.fx.Node) -> bool:
            return ok.get(node, False)

    parts = CapabilityBasedPartitioner(gm, _Support(), allows_single_node_partition=True).propose_partitions()
    if not parts:
        return None
    from torch.fx.passes.utils.fuser_utils import fuse_by_partitions
    fused = fuse_by_partitions(gm, [{n: None for n in p.nodes} for p in parts], prefix="clbound_")
    for node in list(fused.graph.nodes):
        if node.op == "call_module" and str(node.target).startswith("clbound_"):
            sub = getattr(fused, node.target)
            for ph, a in zip([n for n in sub.graph.nodes if n.op == "placeholder"], node.args):
                if "val" not in ph.meta and isinstance(a, torch.fx.Node) and "val" in a.meta:
                    ph.meta["val"] = a.meta["val"]
            try:
                lowered = _Lowered(sub, str(node.target))
            except Unsupported as e:  # e.g. a transposed output of the part: keep it in eager
                _log_break(str(node.target), str(e))
                continue
            setattr(fused, node.target, _Module(lowered, sub))
    fused.recompile()
    return fused


class _Module(torch.nn.Module):
    """A fused part of a split graph, run on clbound."""

    def __init__(self, lowered: _Lowered, sub: torch.fx.GraphModule) -> None:
        super().__init__()
        self.lowered = lowered
        self.single = not isinstance(next(n for n in sub.graph.nodes if n.op == "output").args[0], (list, tuple))

    def forward(self, *args: Any) -> Any:
        out = self.lowered(list(args))
        return out[0] if self.single else tuple(out)


# ---- PyTorch's idle OpenMP threads and the device's cores ----------------------

_OMP_WAIT_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


class config:
    """The backend's settings, read at each call.

    pause_openmp: on a CPU device, each call of a lowered graph first pauses
    PyTorch's idle OpenMP threads (OpenMP 5.0's omp_pause_resource: GNU
    OpenMP then ends its idle workers, and the next parallel op of PyTorch
    starts them again). Otherwise a worker that has just finished one of
    PyTorch's parallel ops (SGD's updates, say) spins for milliseconds on
    the cores the device's threads compute on (python/README.md, "Threads
    on small machines"). "auto" (the default): where PyTorch runs more than
    one thread and neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT says how its
    threads wait; True: on a CPU device whatever the environment; False:
    never."""

    pause_openmp: Any = "auto"


_omp: Dict[str, Any] = {"pausers": None, "logged": False}


def _omp_pausers() -> List[Callable[[], Any]]:
    """A call pausing the host's threads for each OpenMP runtime loaded in this
    process (GNU libgomp, LLVM libomp, Intel libiomp5), found by path in
    /proc/self/maps (Linux; none elsewhere)."""
    if _omp["pausers"] is None:
        paths: List[str] = []
        try:
            with open("/proc/self/maps") as f:
                for line in f:
                    parts = line.split(None, 5)
                    if len(parts) == 6 and os.path.basename(parts[5].strip()).startswith(("libgomp", "libomp",
                                                                                           "libiomp5")):
                        paths.append(parts[5].strip())
        except OSError:
            pass
        pausers: List[Callable[[], Any]] = []
        for path in sorted(set(paths)):
            try:
                lib = ctypes.CDLL(path)  # loaded already: the same library, not a second copy
                one = lib.omp_pause_resource
            except (OSError, AttributeError):
                continue
            one.argtypes, one.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
            # the host's device number: omp_initial_device (-1) from OpenMP 5.1 on,
            # without setting up offloading; before, what omp_get_initial_device
            # says (GNU OpenMP 9-11: its host fallback, -2)
            host = -1 if hasattr(lib, "omp_get_mapped_ptr") else int(lib.omp_get_initial_device())
            pausers.append(lambda one=one, host=host: one(1, host))  # omp_pause_soft
        _omp["pausers"] = pausers
    return _omp["pausers"]


def _pause_wanted(cpu: bool) -> bool:
    mode = config.pause_openmp
    if not cpu or mode is False:
        return False
    if mode is True:
        return True
    if mode != "auto":
        raise ValueError(f"clbound.dynamo.config.pause_openmp is {mode!r}: \"auto\", True or False")
    return torch.get_num_threads() > 1 and not any(v in os.environ for v in _OMP_WAIT_VARS)


def _pause_openmp(cpu: bool) -> int:
    """Pauses PyTorch's idle OpenMP threads where config.pause_openmp asks for
    it (the first time, one INFO line says so); the runtimes paused."""
    if not _pause_wanted(cpu):
        return 0
    pausers = _omp_pausers()
    if not _omp["logged"]:
        _omp["logged"] = True
        if pausers:
            log.info("clbound: the device is a CPU: each call pauses PyTorch's idle OpenMP threads, which would "
                     "spin on the device's cores (clbound.dynamo.config.pause_openmp = False turns this off)")
        else:
            log.info("clbound: the device is a CPU and no OpenMP runtime to pause was found; PyTorch's idle "
                     "threads may spin on the device's cores (GOMP_SPINCOUNT=10000 before Python starts lets "
                     "GNU OpenMP's sleep sooner)")
    for pause in pausers:
        pause()
    _stats["openmp_pauses"] += 1
    return len(pausers)


_decompositions: Optional[Dict[Any, Callable[..., Any]]] = None  # of _DECOMPOSE, made at the first compile


_SDPA = torch._C._nn.scaled_dot_product_attention  # torch.nn.functional's, as Dynamo's graphs call it


def _sdpa_math(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: Optional[torch.Tensor] = None,
               dropout_p: float = 0.0, is_causal: bool = False, scale: Optional[float] = None,
               enable_gqa: bool = False) -> torch.Tensor:
    """F.scaled_dot_product_attention as the ops of PyTorch's math path, which
    AOTAutograd traces (and differentiates) as bmm, softmax and elementwise ops
    that clbound runs, instead of the CPU flash kernel, which it does not.
    A causal mask is positions compared (arange), of a dynamic sequence
    length too. Grouped-query attention, and a causal mask with
    a mask of its own, run PyTorch's own op (a graph break)."""
    if enable_gqa or (is_causal and attn_mask is not None):
        return _SDPA(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                     enable_gqa=enable_gqa)
    s = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    attn = torch.matmul(query, key.transpose(-2, -1)) * s
    if is_causal:
        rows, cols = query.size(-2), key.size(-2)
        keep = torch.arange(rows, device=query.device)[:, None] >= torch.arange(cols, device=query.device)[None, :]
        attn = attn.masked_fill(~keep, float("-inf"))
    elif attn_mask is not None:
        attn = attn.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else attn + attn_mask
        # a row masked everywhere gives zeros, as PyTorch's (safe) softmax there;
        # its scores are made finite first, so that no NaN reaches a gradient
        dead = (attn == float("-inf")).all(-1, keepdim=True)
        weights = torch.where(dead, 0.0, attn).softmax(-1).masked_fill(dead, 0.0)
    if is_causal or attn_mask is None:
        weights = attn.softmax(-1)
    if dropout_p > 0.0:
        weights = torch.nn.functional.dropout(weights, dropout_p, training=True)
    return torch.matmul(weights, value)


def _with_math_attention(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A copy of the torch.nn.functional function fn whose calls of
    scaled_dot_product_attention are _sdpa_math's: its own globals, torch's
    module left as it is."""
    names = dict(fn.__globals__, scaled_dot_product_attention=_sdpa_math)
    out = types.FunctionType(fn.__code__, names, fn.__name__, fn.__defaults__, fn.__closure__)
    out.__kwdefaults__ = fn.__kwdefaults__
    names[fn.__name__] = out  # its own name too: a __torch_function__ override calls the function back
    return out


_ATTENTION: Dict[Any, Callable[..., Any]] = {}  # Dynamo's call targets -> the math path's, made at the first compile


def _math_attention(gm: torch.fx.GraphModule) -> None:
    """Dynamo's graph with each call of scaled_dot_product_attention, and of
    multi_head_attention_forward (nn.MultiheadAttention's, which Dynamo keeps
    as one call and which calls the former), made the math path's, before
    AOTAutograd traces it."""
    if not _ATTENTION:
        mha = torch.nn.functional.multi_head_attention_forward
        _ATTENTION.update({_SDPA: _sdpa_math, mha: _with_math_attention(mha)})
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in _ATTENTION:
            node.target = _ATTENTION[node.target]
            changed = True
    if changed:
        gm.recompile()


def backend(gm: torch.fx.GraphModule, example_inputs: Any, **kwargs: Any) -> Callable[..., Any]:
    """The TorchDynamo backend ("clbound"): AOTAutograd's forward and backward
    graphs lowered to clbound ops."""
    global _decompositions
    from torch._dynamo.backends.common import aot_autograd

    if kwargs:
        raise TypeError(f"the clbound backend takes no options, not {sorted(kwargs)}")
    _stats["frames"] += 1
    if _decompositions is None:
        _decompositions = _decomposition_table()
    _math_attention(gm)
    aot = aot_autograd(fw_compiler=lambda g, ex: _compile_graph(g, ex, "forward"),
                       bw_compiler=lambda g, ex: _compile_graph(g, ex, "backward"),
                       inference_compiler=lambda g, ex: _compile_graph(g, ex, "inference"),
                       decompositions=_decompositions)
    return aot(gm, example_inputs)
