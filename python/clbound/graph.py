"""Graphs for Python: build once, run on any actual size inside the bounds.

    import numpy as np, clbound
    ctx = clbound.Context()
    g = clbound.Graph(ctx, policy="dynamic")
    x = g.input("x", np.float32, bounds=(256, 3), dynamic=(True, False))
    t = g.input("t", np.float32, bounds=(256, 1), dynamic=(True, False))
    w = g.param("w", np.zeros((1, 3), np.float32))
    y = g.linear(x, w)
    loss = g.loss("mse", y, t)
    g.train(loss, lr=0.1)
    g.feed(x, xs); g.feed(t, ts); g.run()   # one training step, no host sync
    print(g.value(loss))                      # a host sync, counted

Nodes are ints. See include/clbound/graph.h and docs/graph.md.
"""

from __future__ import annotations

import ctypes
import itertools
from typing import Any, Dict, Iterable, Optional, Sequence

import numpy as np

from . import Context, Tensor, _convert
from . import _lib as L
from ._lib import BINARY as _BINARY, LOSS as LOSSES, REDUCE as _REDUCE, UNARY as _UNARY, fn as _fn

__all__ = ["Graph", "POLICIES", "LOSSES"]

POLICIES = {"static": 0, "automatic": 1, "dynamic": 2, "bucketed": 3}


class _Options(ctypes.Structure):
    # clb_graph_options in full: clb_graph_options_init writes all of it
    _fields_ = [("struct_size", ctypes.c_size_t), ("policy", ctypes.c_int), ("name", ctypes.c_char_p),
                ("free_intermediates", ctypes.c_int), ("memory_plan", ctypes.c_int)]


class _Stats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("runs", ctypes.c_uint64), ("plans_compiled", ctypes.c_uint64),
                ("plan_switches", ctypes.c_uint64), ("host_syncs", ctypes.c_uint64), ("nodes", ctypes.c_uint64),
                ("deferred_checks", ctypes.c_uint64), ("current_plan", ctypes.c_int64),
                ("memory_plan", ctypes.c_uint64), ("arena_bytes", ctypes.c_uint64),
                ("live_lower_bound_bytes", ctypes.c_uint64), ("pool_peak_bytes", ctypes.c_uint64),
                ("arena_buffers", ctypes.c_uint64), ("arena_bytes_all_plans", ctypes.c_uint64),
                ("arena_held_bytes", ctypes.c_uint64), ("arena_align_bytes", ctypes.c_uint64),
                ("arena_fallbacks", ctypes.c_uint64)]


_i = ctypes.c_int
_np = ctypes.POINTER(ctypes.c_int)
_u8p = L.u8p
_i64p = L.i64p
_p = L.p
_g_opts_init = _fn("clb_graph_options_init", None, ctypes.POINTER(_Options))
_g_new = _fn("clb_graph_new", _i, _p, ctypes.POINTER(_Options), ctypes.POINTER(_p))
_g_free = _fn("clb_graph_free", None, _p)
_g_input = _fn("clb_graph_input", _i, _p, ctypes.c_char_p, _i, _i, _i64p, _u8p, _np)
_g_param = _fn("clb_graph_param", _i, _p, ctypes.c_char_p, _i, _i, _i64p, _p, ctypes.c_size_t, _i, _np)
_g_scalar = _fn("clb_graph_scalar", _i, _p, _i, ctypes.c_double, _np)
_g_unary = _fn("clb_graph_unary", _i, _p, _i, _i, _np)
_g_binary = _fn("clb_graph_binary", _i, _p, _i, _i, _i, _np)
_g_cast = _fn("clb_graph_cast", _i, _p, _i, _i, _np)
_g_reshape = _fn("clb_graph_reshape", _i, _p, _i, _i, _i64p, _np)
_g_reduce = _fn("clb_graph_reduce", _i, _p, _i, _i, _np)
_g_softmax = _fn("clb_graph_softmax", _i, _p, _i, _i, _np)
_g_nonzero = _fn("clb_graph_nonzero", _i, _p, _i, _np)
_g_masked_select = _fn("clb_graph_masked_select", _i, _p, _i, _i, _np)
_g_linear = _fn("clb_graph_linear", _i, _p, _i, _i, _i, _np)
_g_loss = _fn("clb_graph_loss", _i, _p, _i, _i, _i, _np)
_g_train = _fn("clb_graph_train", _i, _p, _i, ctypes.c_double, ctypes.c_double)
_g_set_lr = _fn("clb_graph_set_lr", _i, _p, ctypes.c_double)
_g_set_buckets = _fn("clb_graph_set_buckets", _i, _p, _i, _i, _i64p, ctypes.c_size_t)
_g_feed = _fn("clb_graph_feed", _i, _p, _i, _i64p, _p, ctypes.c_size_t)
_g_feed_borrowed = _fn("clb_graph_feed_borrowed", _i, _p, _i, _i64p, _p, ctypes.c_size_t, _p, _p)
_g_run = _fn("clb_graph_run", _i, _p)
_g_tensor = _fn("clb_graph_tensor", _p, _p, _i)
_g_keep = _fn("clb_graph_keep", ctypes.c_int, _p, _i)
_g_stats = _fn("clb_graph_stats_get", _i, _p, ctypes.POINTER(_Stats))
_g_reason = _fn("clb_graph_last_reason", ctypes.c_char_p, _p)
_g_describe = _fn("clb_graph_describe", _i, _p, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t))

# Arrays fed with borrow=True, held until the C library's release says their
# write is done (or the feed was dropped): serial -> array.
_fed: Dict[int, Any] = {}
_fed_serials = itertools.count(1)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _fed_released(arg: Optional[int]) -> None:
    fed = _fed  # None once the interpreter is tearing the module down
    if fed is not None:
        fed.pop(arg or 0, None)


Node = int


def _name(name: Any) -> bytes:
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, not {type(name).__name__}")
    return L.cstr(name, "name")


class Graph:
    """A graph on `ctx` under a policy: "dynamic" (one plan, ever), "automatic"
    (default: a dim is compiled in until it first changes), "static" (a plan per
    distinct size) or "bucketed" (a plan per bucket of sizes). `name` appears in
    messages and recompile reasons; `free_intermediates` returns a node's buffer to
    the pool once its last consumer ran (graphs that do not train); `memory_plan`
    (default True) puts each plan's tensors in one arena laid out from their
    liveness (docs/graph.md, "Memory plan"; training then also releases forward
    outputs once backward has read them).

    Nodes are ints. A graph is a context manager (``with Graph(ctx) as g:``);
    closing the context closes its graphs."""

    def __init__(self, ctx: Context, policy: str = "automatic", name: str = "graph",
                 free_intermediates: bool = False, memory_plan: bool = True):
        if not isinstance(ctx, Context):
            raise TypeError(f"argument 'ctx' must be a clbound.Context, not {type(ctx).__name__}")
        self.ctx = ctx
        self._h: Optional[ctypes.c_void_p] = None
        self._inputs: Dict[int, np.dtype] = {}
        self._borrowed: list = []  # Tensors from tensor(): valid until the next run or close
        o = _Options()
        _g_opts_init(ctypes.byref(o))
        o.policy = L.choice(POLICIES, policy, "policy")
        o.free_intermediates = int(bool(free_intermediates))
        o.memory_plan = int(bool(memory_plan))
        self._name = _name(name)
        o.name = self._name
        h = ctypes.c_void_p()
        self.ctx._check(_g_new(ctx._live(), ctypes.byref(o), ctypes.byref(h)))
        self._h = h
        ctx._graphs.append(self)

    def close(self) -> None:
        """Frees the graph (its plans and tensors); the context stays."""
        self._drop_borrowed()
        if self._h:
            _g_free(self._h)
            self._h = None
        if self in self.ctx._graphs:
            self.ctx._graphs.remove(self)

    def _drop_borrowed(self) -> None:
        for t in self._borrowed:
            t._h = None  # Tensor raises ClboundError rather than reading a stale handle
        self._borrowed = []

    def __enter__(self) -> Graph:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _live(self) -> ctypes.c_void_p:
        if not self._h:
            raise L.error("ERR_NULL", "the graph was closed (Graph.close, or Context.close)")
        return self._h

    def _node(self, call: Any) -> Node:
        n = ctypes.c_int(-1)
        self.ctx._check(call(ctypes.byref(n)))
        return n.value

    @staticmethod
    def _n(node: Any, what: str, optional: bool = False) -> int:
        """A node argument: an int >= 0 (or None for an optional one, passed as -1)."""
        if node is None and optional:
            return -1
        if isinstance(node, Tensor):
            raise TypeError(f"argument '{what}' must be a graph node (an int), not a clbound.Tensor")
        return L.index(node, what, lo=0, ctype=L.INT)

    # ---- building ----

    def input(self, name: str, dtype: Any, bounds: Sequence[int], dynamic: Optional[Iterable[bool]] = None) -> Node:
        """An input fed before each run: `bounds` per dim, `dynamic` flags (a bool
        for every dim, or one per dim; default none)."""
        dt = L.dtype_code(dtype)
        dims, rank = L.shape(bounds, "bounds")
        dyn = L.flags(dynamic, rank)
        nm = _name(name)
        node = self._node(lambda o: _g_input(self._live(), nm, dt, rank, dims, dyn, o))
        self._inputs[node] = L.as_dtype(dtype)
        return node

    def param(self, name: str, array: Any = None, trainable: bool = True, *, dtype: Any = None,
              shape: Optional[Sequence[int]] = None) -> Node:
        """A parameter owned by the graph, initialised from `array` (or zeros of
        `dtype` and `shape` when array is None). Trainable ones get gradients and
        SGD updates after train()."""
        if array is None:
            if dtype is None or shape is None:
                raise TypeError("param: give an array, or dtype and shape for zeros")
            dt = L.dtype_code(dtype)
            dims, rank = L.shape(shape, "shape")
            nm = _name(name)
            return self._node(lambda o: _g_param(self._live(), nm, dt, rank, dims, None, 0,
                                                 int(bool(trainable)), o))
        arr = np.asarray(array, order="C") if dtype is None else _convert(array, L.as_dtype(dtype), "same_kind")
        dt = L.dtype_code(arr.dtype)
        dims, rank = L.shape(arr.shape, "array shape")
        nm = _name(name)
        return self._node(lambda o: _g_param(self._live(), nm, dt, rank, dims,
                                             arr.ctypes.data_as(_p), arr.nbytes, int(bool(trainable)), o))

    def scalar(self, dtype: Any, value: float) -> Node:
        """A 0-d constant of `dtype`."""
        dt = L.dtype_code(dtype)
        v = L.real(value, "value")
        return self._node(lambda o: _g_scalar(self._live(), dt, v, o))

    def unary(self, op: str, x: Node) -> Node:
        """op(x): neg, relu, sigmoid, tanh, exp, log, copy, erf, abs, sqrt, rsqrt,
        log1p, expm1, floor, ceil, round, trunc, sin, cos, log2, log10, exp2."""
        code, xn = L.choice(_UNARY, op, "unary op"), self._n(x, "x")
        return self._node(lambda o: _g_unary(self._live(), code, xn, o))

    def binary(self, op: str, a: Node, b: Node) -> Node:
        """a <op> b, broadcast: add, sub, mul, div, remainder, maximum, minimum,
        pow (floating), floor_divide (Python's //)."""
        code, an, bn = L.choice(_BINARY, op, "binary op"), self._n(a, "a"), self._n(b, "b")
        return self._node(lambda o: _g_binary(self._live(), code, an, bn, o))

    def cast(self, x: Node, dtype: Any) -> Node:
        """x converted to dtype."""
        xn, dt = self._n(x, "x"), L.dtype_code(dtype)
        return self._node(lambda o: _g_cast(self._live(), xn, dt, o))

    def reshape(self, x: Node, spec: Sequence[int]) -> Node:
        """A view with another shape (one -1 at most), as Context.reshape."""
        xn = self._n(x, "x")
        dims, rank = L.shape(spec, "spec", lo=-1)
        return self._node(lambda o: _g_reshape(self._live(), xn, rank, dims, o))

    def reduce(self, op: str, x: Node) -> Node:
        """op ("sum", "mean", "max") over every element: a 0-d node."""
        code, xn = L.choice(_REDUCE, op, "reduce op"), self._n(x, "x")
        return self._node(lambda o: _g_reduce(self._live(), code, xn, o))

    def softmax(self, x: Node, log: bool = False) -> Node:
        """Softmax (log_softmax when `log`) over the last dim."""
        xn = self._n(x, "x")
        return self._node(lambda o: _g_softmax(self._live(), xn, int(bool(log)), o))

    def nonzero(self, x: Node) -> Node:
        """int64 [count, rank] indices of x's nonzero elements; count stays on the device."""
        xn = self._n(x, "x")
        return self._node(lambda o: _g_nonzero(self._live(), xn, o))

    def masked_select(self, x: Node, mask: Node) -> Node:
        """1-D: x's elements where the bool mask is true."""
        xn, mn = self._n(x, "x"), self._n(mask, "mask")
        return self._node(lambda o: _g_masked_select(self._live(), xn, mn, o))

    def linear(self, x: Node, w: Node, bias: Optional[Node] = None) -> Node:
        """x @ w.T + bias (bias None for none)."""
        xn, wn, bn = self._n(x, "x"), self._n(w, "w"), self._n(bias, "bias", optional=True)
        return self._node(lambda o: _g_linear(self._live(), xn, wn, bn, o))

    def loss(self, kind: str, pred: Node, target: Node) -> Node:
        """A 0-d loss averaged over the actual count: mse, bce, bce_with_logits,
        cross_entropy."""
        code, pn, tn = L.choice(LOSSES, kind, "loss kind"), self._n(pred, "pred"), self._n(target, "target")
        return self._node(lambda o: _g_loss(self._live(), code, pn, tn, o))

    def train(self, loss: Node, lr: float, momentum: float = 0.0) -> None:
        """Makes every run a training step minimising `loss` (a 0-d node): backward,
        then SGD (with momentum when not 0). lr and momentum must be finite."""
        ln = self._n(loss, "loss")
        lr_, mom = L.real(lr, "lr", finite=True), L.real(momentum, "momentum", finite=True)
        self.ctx._check(_g_train(self._live(), ln, lr_, mom))

    def set_lr(self, lr: float) -> None:
        """A new learning rate; builds nothing."""
        self.ctx._check(_g_set_lr(self._live(), L.real(lr, "lr", finite=True)))

    def set_buckets(self, ladder: Sequence[int], input: Optional[Node] = None, dim: Optional[int] = None) -> None:
        """The bucketed policy's ladder (ascending, the last at least the bound):
        of an input's dynamic dim, or, with input and dim None, of every
        data-dependent count. Without it, powers of two up to the bound."""
        if (input is None) != (dim is None):
            raise ValueError("set_buckets: give both input and dim, or neither (the data-dependent counts)")
        inp = -1 if input is None else self._n(input, "input")
        d = -1 if dim is None else L.index(dim, "dim", lo=0, ctype=L.INT)
        vals = [L.index(v, f"ladder[{i}]", lo=0) for i, v in enumerate(ladder)]
        if not vals:
            raise ValueError("set_buckets: the ladder is empty")
        arr = (ctypes.c_int64 * len(vals))(*vals)
        self.ctx._check(_g_set_buckets(self._live(), inp, d, arr, len(vals)))

    # ---- running ----

    def feed(self, node: Node, array: Any, casting: str = "same_kind", *, borrow: bool = False) -> None:
        """Gives an input its data for the next run (copied now); its shape is the
        actual sizes. Converted to the input's dtype under numpy's `casting` rule,
        as Tensor.write.

        borrow=True skips the copy (clb_graph_feed_borrowed): the next run writes
        the input straight from the array's memory (a converted copy's, where
        the dtype or layout differs), and the array is held until that write is
        done. Change it only after the host sync that follows the run (value(),
        any read, sync()). Only that run reads it: feed again before the next."""
        n = self._n(node, "node")
        if n not in self._inputs:
            raise ValueError(f"node {n} is not an input of this graph")
        arr = _convert(array, self._inputs[n], casting)
        dims, _ = L.shape(arr.shape, "array shape")
        if not borrow:
            self.ctx._check(_g_feed(self._live(), n, dims, arr.ctypes.data_as(_p), arr.nbytes))
            return
        h = self._live()
        key = next(_fed_serials)
        _fed[key] = arr
        self.ctx._check(_g_feed_borrowed(h, n, dims, arr.ctypes.data_as(_p), arr.nbytes, _fed_released, key))

    def run(self) -> None:
        """Runs the graph (a training step after train()) on the inputs last fed;
        tensors borrowed from the previous run become unusable."""
        self._drop_borrowed()
        self.ctx._check(_g_run(self._live()))

    def keep(self, node: Node) -> None:
        """Keeps node's output readable after runs of a free_intermediates graph (or a
        training graph under the memory plan)."""
        self.ctx._check(_g_keep(self._live(), self._n(node, "node")))

    def tensor(self, node: Node) -> Tensor:
        """The node's output after the last run (borrowed: valid until the next run or
        close, after which the Tensor raises ClboundError; copy it out with numpy()).
        A view of it (Context.reshape) keeps this run's data: the next run gives the
        view a copy of its own."""
        h = _g_tensor(self._live(), self._n(node, "node"))
        if not h:
            raise L.error("ERR_INVALID_ARG", f"node {node} has no tensor (not run yet?)")
        t = Tensor(self.ctx, ctypes.c_void_p(h))
        self._borrowed.append(t)
        return t

    def value(self, node: Node) -> np.ndarray:
        """The node's output as a numpy array (a host sync)."""
        return self.tensor(node).numpy()

    def stats(self) -> Dict[str, int]:
        """Runs, plans compiled, plan switches, host syncs, nodes, deferred checks,
        the current plan (clb_graph_stats_get)."""
        s = _Stats()
        s.struct_size = ctypes.sizeof(_Stats)
        self.ctx._check(_g_stats(self._live(), ctypes.byref(s)))
        return {f: getattr(s, f) for f, _ in _Stats._fields_ if f != "struct_size"}

    @property
    def last_reason(self) -> str:
        """Why the last plan was compiled ("" before any recompile)."""
        return _g_reason(self._live()).decode()

    def describe(self) -> str:
        """Every node with its symbolic shape and bounds, the data-dependent ops and
        the deferred checks."""
        n = ctypes.c_size_t()
        _g_describe(self._live(), None, 0, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value + 1)
        self.ctx._check(_g_describe(self._h, buf, n.value + 1, None))
        return buf.value.decode()
