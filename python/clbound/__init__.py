"""clbound for Python: bounded tensors whose actual sizes live on an OpenCL device.

A thin ctypes layer over libclbound with numpy arrays and DLPack objects in and out::

    import numpy as np, clbound
    with clbound.Context() as ctx:
        x = ctx.tensor(np.float32, bounds=(1000, 4), dynamic=(True, False))
        x.write(np.ones((3, 4), np.float32))      # 3 of up to 1000 rows
        y = ctx.relu(x)
        print(ctx.reduce_all("mean", y).numpy())  # one host sync, counted

Every op takes its inputs as Tensors (elementwise ops also Python and numpy
scalars, promoted as numpy 2 does) and returns its output, a new Tensor unless
``out=`` names one to reuse (an in-place masked_scatter, a deliberately small
bound for a data-dependent op). Tensors have numpy's and PyTorch's habits:
``x.shape`` (the actual sizes, read from the device when asked) next to
``x.bounds``, operators (``2.0 * x + y``, ``x @ w``), comparisons giving bool
masks (``x[x > 0]``), all computed on the device with no host sync. Failures
raise a subclass of ClboundError and of a built-in (BoundExceededError is a
ValueError, DTypeError a TypeError; STATUS_CLASSES); arguments the library
would reject (a size outside int64, a rank over 8, an unknown op name, an unsafe
cast) raise TypeError, ValueError or OverflowError before reaching it. Graphs:
clbound.Graph (clbound.graph).

The library is the one installed inside this package (``pip install ./python``),
else CLBOUND_LIBRARY (a path), else build/lib next to the sources, else the
system's loader; library_path() says which.
"""
from __future__ import annotations

import collections
import ctypes
import json
import math
import os
import sys
import warnings
import weakref
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _lib as L
from ._errors import (STATUS_CLASSES, BoundExceededError, ClboundError, ClboundIOError, DeviceCheckError,
                      DeviceError, DivisionByZeroError, DTypeError, EmptyReductionError, FreedError, GuardError,
                      IndexOutOfRangeError, InvalidArgumentError, OutOfMemoryError, ParseError, ShapeError,
                      ShortSourceError, UnsupportedError)
from ._lib import library_path
from ._tensor import Tensor
from ._tensor import convert as _convert

__all__ = ["Context", "Tensor", "Graph", "ClboundError", "DeviceInfo", "library_path", "devices",
           "op_names", "host_blas", "cache_info", "cache_clear", "cache_wait", "cache_pending", "default_cache_dir",
           "__version__", "STATUS_CLASSES", "BoundExceededError", "ClboundIOError", "DeviceCheckError",
           "DeviceError", "DivisionByZeroError", "DTypeError", "EmptyReductionError", "FreedError", "GuardError",
           "IndexOutOfRangeError", "InvalidArgumentError", "OutOfMemoryError", "ParseError", "ShapeError",
           "ShortSourceError", "UnsupportedError"]

#: The version of the C library loaded (clb_version()), which is the package's version.
__version__: str = L.version().decode()

DTypeLike = Any
Shape = Union[int, Tuple[int, ...], List[int]]
Operand = Union[Tensor, bool, int, float, np.generic]

#: What clb_device_info_get says of a device (the C struct's fields).
DeviceInfo = collections.namedtuple(
    "DeviceInfo", [n for n, _ in L.DeviceInfoStruct._fields_ if n != "struct_size"])


def devices() -> List[DeviceInfo]:
    """Every OpenCL device of every platform, in the flat order Context(device=i)
    uses (clb_device_count, clb_device_info_get). Raises ClboundError when there
    is none."""
    n = ctypes.c_int()
    L.check_global(L.device_count(ctypes.byref(n)))
    out = []
    for i in range(n.value):
        s = L.DeviceInfoStruct()
        s.struct_size = ctypes.sizeof(s)
        L.check_global(L.device_info_get(i, ctypes.byref(s)))
        out.append(DeviceInfo(*[v.decode() if isinstance(v, bytes) else v
                                for v in (getattr(s, f) for f in DeviceInfo._fields)]))
    return out


def op_names() -> List[str]:
    """The op names Context.supports() knows (clb_op_names)."""
    arr = L.op_names(None)
    names = []
    while arr[len(names)]:
        names.append(arr[len(names)].decode())
    return names


def host_blas() -> str:
    """Host BLAS, the matmuls of CPU devices with native kernels, in one line:
    OpenBLAS's build, "core NAME" (the kernels in force) and how they were
    chosen, or "none: " and why there is none (docs/gemm.md, "Which OpenBLAS
    kernels")."""
    n = ctypes.c_size_t()
    L.check_global(L.host_blas_describe(None, 0, ctypes.byref(n)))
    buf = ctypes.create_string_buffer(n.value + 1)
    L.check_global(L.host_blas_describe(buf, n.value + 1, None))
    return buf.value.decode()


def _cache_arg(folder: Any) -> Optional[bytes]:
    return None if folder is None else L.cstr(folder, "folder")


def cache_info(folder: Optional[Union[str, os.PathLike]] = None) -> Tuple[int, int]:
    """(entries, bytes) of a persistent program cache folder (None: the default
    one). A missing folder counts as empty."""
    entries, size = ctypes.c_uint64(), ctypes.c_uint64()
    L.check_global(L.cache_info(_cache_arg(folder), ctypes.byref(entries), ctypes.byref(size)))
    return entries.value, size.value


def cache_clear(folder: Optional[Union[str, os.PathLike]] = None) -> None:
    """Removes every entry of a persistent program cache folder (None: the default)."""
    L.check_global(L.cache_clear(_cache_arg(folder)))


def cache_wait() -> None:
    """Waits until the programs of freed contexts are written to the persistent
    cache (a background thread writes them; freeing the last context also waits)."""
    L.check_global(L.cache_wait())


def cache_pending() -> int:
    """Programs of freed contexts still queued for, or being written to, the
    persistent cache."""
    return int(L.cache_pending())


def default_cache_dir() -> Optional[str]:
    """The default persistent cache folder (CLBOUND_CACHE_DIR, then
    $XDG_CACHE_HOME/clbound, then ~/.cache/clbound); None when it is off."""
    buf = ctypes.create_string_buffer(4096)
    L.check_global(L.cache_default_dir(buf, len(buf)))
    return os.fsdecode(buf.value) if buf.value else None


def _describe(obj: Any) -> str:
    t = type(obj)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def _is_dtype(value: Any) -> bool:
    """Whether value names a dtype (a type, numpy dtype, string or torch dtype)
    rather than a shape (an int or a sequence of ints)."""
    return isinstance(value, (type, np.dtype, str)) or (
        type(value).__module__ == "torch" and type(value).__name__ == "dtype")


def _shape_first(op: str, shape: Any, dtype: Any) -> Tuple[Any, Any]:
    """(shape, dtype) of a numpy-order call; the old order (dtype, bounds), which
    no shape can be mistaken for, is swapped with a DeprecationWarning."""
    if _is_dtype(shape) and not _is_dtype(dtype):
        warnings.warn(f"{op}(dtype, bounds) is the old order; use {op}(shape, dtype) as numpy does",
                      DeprecationWarning, stacklevel=3)
        return dtype, shape
    return shape, dtype


def _check_static_bounds(op: str, data_shape: Sequence[int], bounds: Any, dynamic: Any) -> None:
    """ShapeError when a bound is above the data's size in a dim that is not
    dynamic (the library would say "dim 0 is static: 3 != 10"): such a dim needs
    dynamic=."""
    if bounds is None or isinstance(bounds, (int, np.integer)) or not hasattr(bounds, "__len__"):
        return
    if len(bounds) != len(data_shape):
        return  # the rank check that follows names it
    flags = [bool(dynamic)] * len(bounds) if dynamic is None or isinstance(dynamic, (bool, np.bool_)) \
        else [bool(f) for f in dynamic]
    if len(flags) != len(bounds):
        return
    wide = [d for d, (b, n, f) in enumerate(zip(bounds, data_shape, flags))
            if not f and isinstance(b, (int, np.integer)) and b > n]
    if wide:
        want = tuple(True if d in wide else f for d, f in enumerate(flags))
        d = wide[0]
        raise L.error("ERR_SHAPE", f"{op}: bounds {tuple(bounds)} are larger than the data's shape "
                      f"{tuple(data_shape)} in dim {d} ({bounds[d]} > {data_shape[d]}), which is static: pass "
                      f"dynamic={want} to let it vary up to its bound")


def _is_scalar(v: Any) -> bool:
    """A Python or numpy number (a 0-d ndarray too), as an operand."""
    if isinstance(v, (bool, int, float, np.generic)):
        return not isinstance(v, (np.complexfloating, np.str_, np.bytes_, np.void, np.datetime64, np.timedelta64))
    return isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "biuf"


def _scalar_promotion(tdt: np.dtype, v: Any) -> np.dtype:
    """The dtype of `tensor of tdt <op> v` under numpy 2's rules (NEP 50): a
    Python bool, int or float is weak (it takes the tensor's dtype when of the
    same kind or lower: int32 + 1 is int32, float32 + 1.5 float32; a bool
    tensor with an int gives int64, an integer tensor with a float float64); a
    Python int outside an integer dtype's range is an OverflowError, as numpy's;
    a numpy scalar or 0-d array is strong (numpy.result_type)."""
    if isinstance(v, (np.generic, np.ndarray)):
        return np.result_type(tdt, v.dtype)
    if isinstance(v, bool):
        return tdt
    if isinstance(v, int):
        dt = np.dtype(np.int64) if tdt.kind == "b" else tdt
        if dt.kind in "iu":
            info = np.iinfo(dt)
            if not info.min <= v <= info.max:
                raise OverflowError(f"Python integer {v} out of bounds for {dt}")
        return dt
    return tdt if tdt.kind == "f" else np.dtype(np.float64)


def _axis(op: str, dim: Any, keepdim: Any, axis: Any, keepdims: Any) -> Tuple[Any, bool]:
    """(dim, keepdim) from PyTorch's names or numpy's (axis, keepdims)."""
    if axis is not None:
        if dim is not None and dim != axis:
            raise TypeError(f"{op}: dim={dim} and axis={axis} disagree (axis is numpy's name for dim)")
        dim = axis
    if keepdims is not None:
        keepdim = keepdims
    return dim, bool(keepdim)


class Context:
    """An OpenCL context with its queue, program cache and memory pool.

    device: a flat index (see devices()) or a case-insensitive name substring;
        None means CLBOUND_DEVICE, then the first device.
    platform: the same for the platform (CLBOUND_PLATFORM); a device index is then
        within that platform.
    kernel_style: "auto" (CPU-style kernels on CPU devices, GPU-style elsewhere),
        "cpu" (each work-item compacts a contiguous chunk) or "gpu" (work-group
        scans in local memory); the data-dependent ops give identical results.
    device_memory_limit: caps the bytes the context's pool may hold (0: the
        device's memory); asking for more raises ClboundError ERR_OOM.
    cache_dir: the persistent program cache folder; None means CLBOUND_CACHE_DIR
        then the default, "off" (or False) turns it off.

    A context is a context manager: ``with clbound.Context() as ctx:`` closes it,
    its graphs and its tensors at the end. Contexts are not thread-safe: use one
    per thread.
    """

    def __init__(self, device: Optional[Union[int, str]] = None, *, platform: Optional[Union[int, str]] = None,
                 kernel_style: str = "auto", device_memory_limit: int = 0,
                 cache_dir: Optional[Union[str, os.PathLike, bool]] = None) -> None:
        self._h: Optional[ctypes.c_void_p] = None
        self._graphs: list = []
        # id -> weak reference: a WeakSet would compare tensors with ==, which is elementwise
        self._tensors: Dict[int, weakref.ref] = {}
        self._log_cb = None
        opts = self._options(device, platform, kernel_style, device_memory_limit, cache_dir)
        h = ctypes.c_void_p()
        st = L.ctx_new(ctypes.byref(opts), ctypes.byref(h))
        if st != 0:
            L.raise_status(st, L.last_errmsg().decode())
        self._h = h

    @staticmethod
    def _options(device: Any, platform: Any, kernel_style: str, device_memory_limit: int,
                 cache_dir: Any) -> L.ContextOptions:
        o = L.ContextOptions()
        o.struct_size = ctypes.sizeof(o)
        keep = []  # the option strings, alive until the call returns

        def selector(value: Any, what: str) -> Optional[bytes]:
            if value is None:
                return None
            if isinstance(value, str):
                if not value:
                    raise ValueError(f"{what} is an empty string")
                b = L.cstr(value, what)
            else:
                b = str(L.index(value, what, lo=0, ctype=L.INT)).encode()
            keep.append(b)
            return b

        o.device = selector(device, "device")
        o.platform = selector(platform, "platform")
        o.kernel_style = L.choice(L.KERNEL_STYLES, kernel_style, "kernel_style")
        o.device_memory_limit = L.index(device_memory_limit, "device_memory_limit", ctype=L.U64)
        if cache_dir is False:
            cache_dir = "off"
        if cache_dir is not None:
            o.cache_dir = L.cstr(cache_dir, "cache_dir")
        o._keep = keep
        return o

    @classmethod
    def wrap(cls, cl_context: int, cl_queue: int, *, kernel_style: str = "auto", device_memory_limit: int = 0,
             cache_dir: Optional[Union[str, os.PathLike, bool]] = None) -> Context:
        """A context over a caller's cl_context and in-order cl_command_queue, given
        as integer handles (pyopencl's ``.int_ptr``, or another Context's
        cl_context and cl_queue); both are retained (clb_context_wrap)."""
        self = cls.__new__(cls)
        self._h, self._graphs, self._tensors, self._log_cb = None, [], {}, None
        opts = cls._options(None, None, kernel_style, device_memory_limit, cache_dir)
        h = ctypes.c_void_p()
        st = L.ctx_wrap(L.index(cl_context, "cl_context", lo=1, ctype=L.U64), L.index(cl_queue, "cl_queue", lo=1, ctype=L.U64),
                        ctypes.byref(opts), ctypes.byref(h))
        if st != 0:
            L.raise_status(st, L.last_errmsg().decode())
        self._h = h
        return self

    def close(self) -> None:
        """Frees the context, its graphs and every tensor on it. Idempotent."""
        if self._h:
            for g in list(self._graphs):
                g.close()
            for ref in list(self._tensors.values()):
                t = ref()
                if t is not None:
                    t._h = None  # freed with the context below
            self._tensors.clear()
            L.ctx_free(self._h)
            self._h = None

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass

    def __repr__(self) -> str:
        return f"<clbound.Context {'closed' if not self._h else 'kernel_style=' + self.kernel_style}>"

    # ---- plumbing ----

    def _live(self) -> ctypes.c_void_p:
        if not self._h:
            raise L.error("ERR_NULL", "the context was closed (Context.close)")
        return self._h

    def _check(self, st: int) -> None:
        if st != 0:
            L.raise_status(st, L.ctx_errmsg(self._h).decode() if self._h else L.last_errmsg().decode())

    def _wrap(self, handle: ctypes.c_void_p) -> Tensor:
        t = Tensor(self, handle, owned=True)
        key = id(t)
        self._tensors[key] = weakref.ref(t, lambda _r, k=key, d=self._tensors: d.pop(k, None))
        return t

    def _arg(self, t: Any, what: str, optional: bool = False) -> Optional[ctypes.c_void_p]:
        """The handle of a Tensor argument of this context; TypeError naming the
        argument for anything else, ClboundError for a freed tensor."""
        self._live()
        if t is None and optional:
            return None
        if not isinstance(t, Tensor):
            hint = " (make one with ctx.from_numpy)" if isinstance(t, (np.ndarray, list, tuple, int, float)) else ""
            raise TypeError(f"argument '{what}' must be a clbound.Tensor, not {_describe(t)}{hint}")
        if not t._h:
            raise L.error("ERR_NULL", f"argument '{what}' was freed (Tensor.free, its graph's next run or "
                          "close, or Context.close) and cannot be used")
        if t.ctx is not self:
            raise ValueError(f"argument '{what}' belongs to another Context")
        return t._h

    def _out(self, out: Optional[Tensor], call: Callable[[Any], int], what: str = "out") -> Tensor:
        """Runs call(pointer to the output handle): a new output when out is None,
        else out itself, which the library checks and rewrites."""
        h = ctypes.c_void_p(self._arg(out, what, optional=True).value if out is not None else None)
        self._check(call(ctypes.byref(h)))
        return out if out is not None else self._wrap(h)

    # ---- facts ----

    @property
    def kernel_style(self) -> str:
        """The kernel family in use, "cpu" or "gpu" ("auto" resolved)."""
        code = L.ctx_kernel_style(self._live())
        return {v: k for k, v in L.KERNEL_STYLES.items()}[code]

    @property
    def cl_context(self) -> int:
        """The borrowed cl_context, as an integer handle."""
        return L.ctx_cl_context(self._live()) or 0

    @property
    def cl_queue(self) -> int:
        """The borrowed in-order cl_command_queue, as an integer handle."""
        return L.ctx_cl_queue(self._live()) or 0

    @property
    def cl_device(self) -> int:
        """The borrowed cl_device_id, as an integer handle."""
        return L.ctx_cl_device(self._live()) or 0

    @property
    def cache_dir(self) -> Optional[str]:
        """The persistent cache folder in use; None when the cache is off."""
        d = L.ctx_cache_dir(self._live())
        return os.fsdecode(d) if d else None

    def supports(self, op: str, dtype: DTypeLike) -> bool:
        """Whether this device runs `op` (a name from op_names()) on `dtype`
        (clb_op_supported); False for a dtype clbound lacks. No device work."""
        if not isinstance(op, str) or op not in op_names():
            raise ValueError(f"op {op!r} is not one of {', '.join(op_names())}")
        try:
            dt = L.dtype_code(dtype)
        except TypeError:
            return False
        return L.op_supported(self._live(), op.encode(), dt) == 0

    def sync(self) -> None:
        """Waits for the device; raises the error a kernel raised since the last
        sync (a size over its bound, a failed device check, a short source)."""
        self._check(L.ctx_sync(self._live()))

    def numpy_all(self, tensors: Sequence[Tensor], *, copy: bool = True, sync: bool = True) -> List[np.ndarray]:
        """The live parts of several tensors of this context as new numpy arrays,
        with one host sync (Tensor.numpy() makes one per tensor): the sizes of
        all in one wait, then the data of all in one more (both after the one
        wait where the device's buffers are host memory, as on PoCL).

        copy=False gives arrays over the tensors' own memory instead, with no
        copy (clb_tensors_to_dlpack_host): only where the device's buffers are
        host memory (PoCL's CPU device), else BufferError. Each buffer stays
        out of clbound's pool while an array over it lives, even past the
        tensor and the context; while the tensor lives, the array and the
        tensor are one memory, so write either only after a host sync.

        sync=False (with copy=False, for tensors whose dims are all static:
        their sizes are their bounds) makes the arrays at once, with no host
        sync, while queued ops may still be writing them
        (clb_tensors_to_dlpack_host_unsynced): read them only after a later
        sync() or read of this context succeeds. A dynamic dim is ShapeError."""
        ts = list(tensors)
        n = len(ts)
        if not sync and copy is not False:
            raise ValueError("numpy_all: sync=False makes views (copy=False); a copy needs the data, so a sync")
        if n == 0:
            return []
        if copy is False:
            return self._views_all(ts, sync)
        for i, t in enumerate(ts):  # a bad argument named before anything is made
            self._arg(t, f"tensors[{i}]")
        # at the bounds: untouched pages cost nothing, and the live part always fits
        bufs = [np.empty(max(math.prod(t.bounds), 1), dtype=t.dtype) for t in ts]
        shapes = self._read_to(ts, [b.ctypes.data for b in bufs], [b.nbytes for b in bufs])
        return [b[:math.prod(s)].reshape(s) for b, s in zip(bufs, shapes or ())]

    def _read_to(self, ts: List[Tensor], hosts: List[int], caps: List[int],
                 small_ok: bool = False) -> Optional[List[Tuple[int, ...]]]:
        """Each tensor's live part into the host memory at hosts[i] (caps[i]
        bytes) with one host sync (clb_tensors_read); their actual shapes.
        A live part that does not fit its capacity reads nothing: None with
        small_ok, else the library's ClboundError."""
        n = len(ts)
        hs = (L.p * n)(*[self._arg(t, f"tensors[{i}]").value for i, t in enumerate(ts)])
        dims = (ctypes.c_int64 * (n * L.MAX_RANK))()
        st = L.ts_read(self._live(), n, hs, dims, (L.p * n)(*hosts), (ctypes.c_size_t * n)(*caps), None)
        if small_ok and st != 0 and L.status_name(st).decode() == "ERR_BUFFER_SMALL":
            return None
        self._check(st)
        return [tuple(dims[i * L.MAX_RANK:i * L.MAX_RANK + t.rank]) for i, t in enumerate(ts)]

    def _views_all(self, ts: List[Tensor], sync: bool = True) -> List[np.ndarray]:
        from . import _dlpack
        n = len(ts)
        hs = (L.p * n)(*[self._arg(t, f"tensors[{i}]").value for i, t in enumerate(ts)])
        outs = (L.p * n)()
        st = (L.ts_to_dlpack_host if sync else L.ts_to_dlpack_host_unsynced)(self._live(), n, hs, outs)
        if st != 0:
            if L.status_name(st).decode() == "ERR_UNSUPPORTED":
                raise BufferError(f"numpy_all(copy=False): {L.ctx_errmsg(self._h).decode()}")
            self._check(st)
        return [np.asarray(_dlpack.HostView(outs[i], t.dtype.str)) for i, t in enumerate(ts)]

    def metrics(self) -> Dict[str, Any]:
        """The context's counters as a dict (the CLBOUND_METRICS_FILE keys)."""
        n = ctypes.c_size_t()
        L.ctx_metrics(self._live(), None, 0, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value + 1)
        self._check(L.ctx_metrics(self._h, buf, n.value + 1, None))
        return json.loads(buf.value.decode())

    def counters(self) -> Dict[str, int]:
        """clb_context_counters as a dict: program builds, cache hits, kernel
        launches, host syncs, bytes each way, plans, recompiles, pool bytes,
        kernels compiled, build and store ms, first launches and their ms."""
        s = L.CountersStruct()
        s.struct_size = ctypes.sizeof(s)
        self._check(L.ctx_counters(self._live(), ctypes.byref(s)))
        return {f: getattr(s, f) for f, _ in s._fields_ if f != "struct_size"}

    def set_log(self, categories: Union[str, Iterable[str]] = "all",
                callback: Optional[Callable[[str, str], None]] = None) -> None:
        """Logs events of `categories` ("recompiles", "syncs", "builds", "cache", "gemm",
        a list of them, "all", or "none"/[] to stop): each as one call
        callback(category, line), or on stderr when callback is None
        (clb_context_set_log; CLBOUND_LOG sets the same for new contexts)."""
        if isinstance(categories, str):
            names = list(L.LOG) if categories == "all" else [] if categories == "none" else [categories]
        else:
            names = list(categories)
        mask = 0
        for n in names:
            mask |= L.choice(L.LOG, n, "log category")
        if callback is None:
            self._log_cb = None
            L.ctx_set_log(self._live(), mask, L.LogFn(), None)
            return
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {_describe(callback)}")

        def trampoline(_user: Any, category: bytes, line: bytes) -> None:
            try:
                callback(category.decode(), line.decode())
            except Exception:  # an exception cannot cross C: report it like Python does
                sys.excepthook(*sys.exc_info())

        self._log_cb = L.LogFn(trampoline)  # kept alive as long as the context logs with it
        L.ctx_set_log(self._live(), mask, self._log_cb, None)

    def set_gemm_strategy(self, strategy: str) -> None:
        """How matmuls run: "auto", "host_blas" (CPU devices: OpenBLAS inside the queue),
        "clblast_bound", "sync_exact" (one counted host sync per matmul) or "device"
        (docs/gemm.md)."""
        self._check(L.set_gemm(self._live(), L.choice(L.GEMM, strategy, "gemm strategy")))

    # ---- tensors ----

    def tensor(self, dtype: DTypeLike, bounds: Shape, dynamic: Optional[Iterable[bool]] = None,
               sizes: Optional[Shape] = None) -> Tensor:
        """A new tensor of `dtype` with `bounds`; `dynamic` flags the dims whose
        actual size may vary (a bool for all dims, or one per dim; default none).

        Like numpy.empty: its live sizes start equal to its bounds, and its contents
        are unspecified (whatever the memory pool held) until written. `sizes`
        starts the live sizes lower (dynamic dims only, e.g. (0, 4) for an empty
        batch); zeros() gives zero-filled contents."""
        dt = L.dtype_code(dtype)
        dims, rank = L.shape(bounds, "bounds")
        dyn = L.flags(dynamic, rank)
        h = ctypes.c_void_p()
        self._check(L.t_new(self._live(), dt, rank, dims, dyn, ctypes.byref(h)))
        t = self._wrap(h)
        if sizes is not None:
            t.set_sizes(sizes)
        return t

    def empty(self, shape: Shape, dtype: DTypeLike = np.float32, *, dynamic: Optional[Iterable[bool]] = None,
              sizes: Optional[Shape] = None) -> Tensor:
        """tensor() in numpy's argument order (numpy.empty(shape, dtype)): `shape`
        is the bounds; the contents are unspecified until written."""
        shape, dtype = _shape_first("empty", shape, dtype)
        return self.tensor(dtype, shape, dynamic, sizes)

    def zeros(self, shape: Shape, dtype: DTypeLike = np.float32, *, dynamic: Optional[Iterable[bool]] = None,
              sizes: Optional[Shape] = None) -> Tensor:
        """A tensor of bounds `shape` with every live element 0, in numpy's order
        (numpy.zeros(shape, dtype)); dtype defaults to float32 (PyTorch's default;
        numpy's is float64)::

            z = ctx.zeros((1000, 4), np.float32, dynamic=(True, False), sizes=(3, 4))
            z.shape, z.bounds      # (3, 4), (1000, 4)

        The old order zeros(dtype, bounds) still works (a DeprecationWarning)."""
        shape, dtype = _shape_first("zeros", shape, dtype)
        t = self.tensor(dtype, shape, dynamic, sizes)
        self._check(L.fill(self._h, t._h, 0.0))
        return t

    def full(self, shape: Shape, fill_value: Union[int, float, bool], dtype: Optional[DTypeLike] = None, *,
             dynamic: Optional[Iterable[bool]] = None, sizes: Optional[Shape] = None) -> Tensor:
        """A tensor of bounds `shape` with every live element `fill_value` (see
        fill()), in numpy's order (numpy.full(shape, fill_value, dtype)); dtype
        None takes numpy's for the value (bool, int64 or float64).

        The old order full(dtype, bounds, value) still works (a DeprecationWarning)."""
        if _is_dtype(shape) and not _is_dtype(fill_value) and dtype is not None and not _is_dtype(dtype):
            warnings.warn("full(dtype, bounds, value) is the old order; use full(shape, fill_value, dtype)",
                          DeprecationWarning, stacklevel=2)
            shape, fill_value, dtype = fill_value, dtype, shape
        elif _is_dtype(shape):
            raise TypeError(f"full(shape, fill_value, dtype): shape {shape!r} is a dtype; the old order "
                            "full(dtype, bounds, value) needs all three")
        if dtype is None:
            dtype = np.asarray(fill_value).dtype
        t = self.tensor(dtype, shape, dynamic, sizes)
        self.fill(t, fill_value)
        return t

    def from_numpy(self, array: Any, bounds: Optional[Shape] = None, dynamic: Optional[Iterable[bool]] = None,
                   dtype: Optional[DTypeLike] = None, casting: str = "same_kind") -> Tensor:
        """A tensor holding `array` (anything numpy.asarray takes), of its dtype or
        `dtype` (converted under numpy's `casting` rule, see Tensor.write), with
        `bounds` (default: its shape) and `dynamic` flags. A bound above the
        array's size needs that dim dynamic::

            x = ctx.from_numpy(np.ones((3, 2)), bounds=(10, 2), dynamic=(True, False))
            x.shape, x.bounds      # (3, 2), (10, 2): later writes may hold up to 10 rows
        """
        if dtype is None:
            array = np.asarray(array)
            dtype = array.dtype
        _check_static_bounds("from_numpy", np.shape(array), bounds, dynamic)
        t = self.tensor(dtype, bounds if bounds is not None else np.shape(array), dynamic)
        t.write(array, casting=casting)
        return t

    def from_dlpack(self, obj: Any, bounds: Optional[Shape] = None,
                    dynamic: Optional[Iterable[bool]] = None, *, copy: Optional[bool] = None,
                    borrow: bool = False) -> Tensor:
        """A tensor holding a copy of any host object that speaks DLPack (numpy
        arrays, torch / jax CPU tensors; DLPack 1.x capsules, or legacy ones from
        older producers), with bounds (default: its shape) and dynamic flags as
        from_numpy.

        copy=False shares the object's memory instead (clb_tensor_from_host):
        the device reads the host's latest values and ops writing the tensor
        write the object, with no copy either way. It needs a device whose
        buffers are host memory (PoCL's CPU device) and a C-contiguous, writable
        CPU object, and gives a static tensor of exactly its shape (no bounds or
        dynamic dims); anything else raises BufferError. The tensor keeps the
        object alive; write the object only between ops (after a host sync).

        borrow=True (with copy=None) skips the host copy instead: the device
        copies from the object's memory when the write runs, after this
        returns, and the object is held until that write is done (the next
        host sync of this context at the latest: sync(), any read). Change the
        object only after that sync. A framework's input to one call, read back
        in the same call, is the use: one copy fewer on the calling thread
        (clb_tensor_from_dlpack_borrowed). Legacy capsules, strided and bool
        objects are copied as with borrow=False."""
        from . import _dlpack
        self._live()
        if copy is False:
            if borrow:
                raise ValueError("from_dlpack: borrow=True is a deferred copy; copy=False shares the memory instead")
            return self._share_host(obj, bounds, dynamic)
        b = None
        if bounds is not None:
            b, nb = L.shape(bounds, "bounds")
        ptr, versioned = _dlpack.consume(obj)
        try:
            rank = _dlpack.ndim(ptr, versioned)
            if bounds is not None and nb != rank:
                raise L.error("ERR_SHAPE", f"from_dlpack: bounds has {nb} dims; the DLPack tensor has {rank}")
            _check_static_bounds("from_dlpack", _dlpack.shape(ptr, versioned), bounds, dynamic)
            dyn = L.flags(dynamic, rank)
        except Exception:
            _dlpack.release(ptr, versioned)
            raise
        h = ctypes.c_void_p()
        cfn = (L.from_dlpack_borrowed if borrow else L.from_dlpack) if versioned else L.from_dlpack_legacy
        self._check(cfn(self._h, ptr, b, dyn, ctypes.byref(h)))  # consumes ptr
        return self._wrap(h)

    def _share_host(self, obj: Any, bounds: Any, dynamic: Any) -> Tensor:
        if getattr(obj, "requires_grad", False) is True and callable(getattr(obj, "detach", None)):
            obj = obj.detach()  # the same memory, without autograd
        try:
            arr = obj if isinstance(obj, np.ndarray) else np.from_dlpack(obj)
        except Exception as e:  # not a CPU object, or one numpy cannot view
            raise BufferError(f"from_dlpack(copy=False): {_describe(obj)} has no host memory to share ({e})") from e
        if not arr.flags.c_contiguous or not arr.flags.writeable:
            raise BufferError("from_dlpack(copy=False): the memory to share must be C-contiguous and writable "
                              "(copy=None copies it instead)")
        if (bounds is not None and tuple(int(b) for b in bounds) != arr.shape) or (
                dynamic is not None and any(L.flags(dynamic, arr.ndim))):
            raise BufferError(f"from_dlpack(copy=False): a shared tensor is static at the object's shape "
                              f"{arr.shape}; bounds or dynamic dims need a copy (copy=None)")
        code = L.dtype_code(arr.dtype, "from_dlpack(copy=False)")
        dims, rank = L.shape(arr.shape, "shape")
        h = ctypes.c_void_p()
        st = L.t_from_host(self._h, code, rank, dims, arr.ctypes.data, arr.nbytes, ctypes.byref(h))
        if st != 0:
            msg = L.ctx_errmsg(self._h).decode()
            if L.status_name(st).decode() == "ERR_UNSUPPORTED":
                raise BufferError(f"from_dlpack(copy=False): {msg}")
            self._check(st)
        t = self._wrap(h)
        t._shared = arr  # the memory the tensor is, kept alive with it
        return t

    def fill(self, t: Tensor, value: Union[int, float, bool]) -> None:
        """Sets every live element of t to `value`, as numpy's ndarray.fill does:
        a float into an integer tensor truncates toward zero; NaN or infinity into
        an integer tensor is a ValueError, a value outside the dtype's range an
        OverflowError, and an int64 value a double cannot hold exactly (the C
        call takes a double) a ValueError."""
        h = self._arg(t, "t")
        dt = t.dtype
        v = value
        if isinstance(v, (np.generic, np.ndarray)):
            if np.ndim(v) != 0:
                raise TypeError("fill takes a scalar value")
            v = v.item()
        if not isinstance(v, (bool, int, float)):
            raise TypeError(f"fill value must be a number, not {_describe(value)}")
        if dt.kind in "iu":
            if isinstance(v, float):
                if not math.isfinite(v):
                    raise ValueError(f"cannot fill an {dt} tensor with {v}")
                iv = math.trunc(v)
            else:
                iv = int(v)
            info = np.iinfo(dt)
            if not info.min <= iv <= info.max:
                raise OverflowError(f"fill value {value!r} is out of bounds for {dt}")
            if float(iv) != iv:
                raise ValueError(f"fill value {value!r} is not exactly representable as a double (clb_fill)")
            v = float(iv)
        self._check(L.fill(self._h, h, float(v)))

    def assert_async(self, cond: Tensor, msg: Optional[str] = None) -> None:
        """A check that stays on the device, as torch._assert_async: where a
        live element of cond is zero (false; NaN counts as true), the next host
        sync raises DeviceCheckError naming msg (its first 120 bytes), the
        element and the count (clb_assert). An empty cond passes. No host sync."""
        h = self._arg(cond, "cond")
        if msg is not None and not isinstance(msg, str):
            raise TypeError(f"msg must be a str or None, not {_describe(msg)}")
        self._check(L.assert_(self._h, h, None if msg is None else msg.encode("utf-8", "replace")))

    # ---- elementwise ----

    def binary(self, op: str, a: Operand, b: Operand, *, out: Optional[Tensor] = None) -> Tensor:
        """out = a <op> b, broadcast like numpy and PyTorch from the bounds. op: add,
        sub, mul, div (true division: integers give float64, as numpy's /),
        remainder (Python's sign), maximum, minimum, pow (floating: integer
        powers are a DTypeError; cast first), floor_divide (Python's //: the
        quotient rounded toward -inf; an integer division by zero raises
        DivisionByZeroError at the next host sync, a floating one gives inf or
        nan, as numpy's).

        Either operand may be a Python or numpy scalar (one of them a Tensor), and
        the dtypes promote as numpy 2 does (NEP 50): ``int32 + 1.5`` is float64,
        ``float32 * 2.0`` float32, ``int32 + int64 tensor`` int64. A scalar is a
        0-d tensor filled on the device and a promotion a cast on the device: no
        host sync. Two bool tensors: add and maximum are a logical or, mul and
        minimum a logical and (numpy's results); sub is a DTypeError, as numpy's."""
        code = L.choice(L.BINARY, op, "binary op")
        x, y = self._promoted(a, b, op, out)
        if op == "pow" and x.dtype.kind in "biu":
            raise L.error("ERR_DTYPE", f"pow: {x.dtype} ** {y.dtype}: clbound's pow is floating only (integer powers "
                          "are not supported); cast first, e.g. x.float() ** 2")
        if x.dtype == np.bool_ and op in ("add", "maximum", "mul", "minimum"):
            return self._logical("logical_or" if op in ("add", "maximum") else "logical_and", x, y, out)
        hx, hy = self._arg(x, "a"), self._arg(y, "b")
        return self._out(out, lambda o: L.binary(self._h, code, hx, hy, o))

    def where(self, cond: Tensor, a: Operand, b: Operand, *, out: Optional[Tensor] = None) -> Tensor:
        """numpy.where(cond, a, b), torch.where (clb_where): a where cond is true,
        else b, the three broadcast like numpy and PyTorch from the bounds. cond
        is a bool Tensor; a and b Tensors or scalars (one may be a scalar, or
        both where cond gives the shape), promoted as binary() promotes them.
        No host sync."""
        hc = self._arg(cond, "cond")
        if cond.dtype != np.bool_:
            raise L.error("ERR_DTYPE", f"where: cond is {cond.dtype}, not bool (compare first: ctx.ne(x, 0))")
        if not isinstance(a, Tensor) and not isinstance(b, Tensor):
            for v, what in ((a, "a"), (b, "b")):
                if not _is_scalar(v):
                    raise TypeError(f"argument '{what}' of where must be a clbound.Tensor or a scalar, not "
                                    f"{_describe(v)}")
            dt = np.result_type(np.asarray(a), np.asarray(b))  # numpy.where's for two scalars
            x, y = self._as(a, dt, "a"), self._as(b, dt, "b")
        else:
            x, y = self._promoted(a, b, "where", out)
        hx, hy = self._arg(x, "a"), self._arg(y, "b")
        return self._out(out, lambda o: L.where(self._h, hc, hx, hy, o))

    def unary(self, op: str, a: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
        """out = op(a), same dtype and shape. op: neg, relu, copy, and (floating
        only) sigmoid, tanh, exp, log, erf, abs, sqrt, rsqrt, log1p, expm1,
        floor, ceil, round (ties to even, as numpy.round and torch.round),
        trunc, sin, cos, log2, log10, exp2. out may be a (in place)."""
        code = L.choice(L.UNARY, op, "unary op")
        ha = self._arg(a, "a")
        return self._out(out, lambda o: L.unary(self._h, code, ha, o))

    def compare(self, op: str, a: Operand, b: Operand, *, out: Optional[Tensor] = None) -> Tensor:
        """A bool tensor of a <op> b (clb_compare), broadcast and promoted as in
        binary(). op: eq, ne, lt, le, gt, ge (also the methods ctx.eq, ...). NaN
        compares false except by ne. The mask feeds masked_select, masked_scatter,
        nonzero or ``x[mask]`` on the device, with no host sync::

            kept = ctx.masked_select(x, ctx.gt(x, 0))   # or x[x > 0]
        """
        code = L.choice(L.COMPARE, op, "comparison")
        x, y = self._promoted(a, b, op)
        hx, hy = self._arg(x, "a"), self._arg(y, "b")
        return self._out(out, lambda o: L.compare(self._h, code, hx, hy, o))

    def logical_and(self, a: Operand, b: Operand, *, out: Optional[Tensor] = None) -> Tensor:
        """a & b of bool masks (numpy.logical_and of bools), on the device."""
        return self._logical("logical_and", a, b, out)

    def logical_or(self, a: Operand, b: Operand, *, out: Optional[Tensor] = None) -> Tensor:
        """a | b of bool masks (numpy.logical_or of bools), on the device."""
        return self._logical("logical_or", a, b, out)

    def logical_xor(self, a: Operand, b: Operand, *, out: Optional[Tensor] = None) -> Tensor:
        """a ^ b of bool masks (numpy.logical_xor of bools), on the device."""
        return self._logical("logical_xor", a, b, out)

    def logical_not(self, a: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
        """~a of a bool mask, on the device."""
        return self.compare("eq", a, False, out=out)

    def abs(self, a: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
        """|a|: floats by clb_unary's abs (fabs: -0 gives +0, NaN stays NaN),
        integers as maximum(a, -a) (two launches; the most negative wraps, as
        numpy's)."""
        if isinstance(a, Tensor) and np.dtype(a.dtype).kind == "f":
            return self.unary("abs", a, out=out)
        return self.binary("maximum", a, self.unary("neg", a), out=out)

    def _logical(self, op: str, a: Operand, b: Operand, out: Optional[Tensor]) -> Tensor:
        """&, |, ^ of bool tensors: clbound has no bitwise ops, so integers are a
        DTypeError; the bools go through u8 (or: a + b != 0, and: a * b != 0, xor:
        a != b)."""
        x, y = self._promoted(a, b, op)
        if x.dtype != np.bool_:
            raise L.error("ERR_DTYPE", f"{op}: {x.dtype} operands; clbound's &, | and ^ take bool masks "
                          "(it has no bitwise integer ops)")
        if op == "logical_xor":
            return self.compare("ne", x, y, out=out)
        code = L.BINARY["add" if op == "logical_or" else "mul"]
        xu, yu = self.cast(x, np.uint8), self.cast(y, np.uint8)
        return self.cast(self._out(None, lambda o: L.binary(self._h, code, xu._h, yu._h, o)), np.bool_, out=out)

    def _promoted(self, a: Operand, b: Operand, op: str, out: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        """a and b as tensors of one dtype: numpy 2's promotion (NEP 50) with
        Python scalars weak and numpy scalars strong; div of integers is float64.
        Casts and scalar tensors are made on the device."""
        dt = self._result_dtype(a, b, op)
        return self._as(a, dt, "a"), self._as(b, dt, "b")

    def _result_dtype(self, a: Operand, b: Operand, op: str) -> np.dtype:
        for v, what in ((a, "a"), (b, "b")):
            if not isinstance(v, Tensor) and not _is_scalar(v):
                hint = " (make one with ctx.from_numpy)" if isinstance(v, (np.ndarray, list, tuple)) else ""
                raise TypeError(f"argument '{what}' of {op} must be a clbound.Tensor or a scalar, "
                                f"not {_describe(v)}{hint}")
        if not isinstance(a, Tensor) and not isinstance(b, Tensor):
            raise TypeError(f"{op}: one operand must be a clbound.Tensor, not {_describe(a)} and {_describe(b)}")
        da = a.dtype if isinstance(a, Tensor) else None
        db = b.dtype if isinstance(b, Tensor) else None
        if da is not None and db is not None:
            dt = np.result_type(da, db)
        else:
            tdt, scalar = (da, b) if da is not None else (db, a)
            dt = _scalar_promotion(tdt, scalar)
        if op == "div" and dt.kind in "biu":
            dt = np.dtype(np.float64)
        return dt

    def _as(self, v: Operand, dt: np.dtype, what: str) -> Tensor:
        """v (argument `what`) as a tensor of dtype dt: a cast on the device, or a
        0-d tensor filled with a scalar."""
        if isinstance(v, Tensor):
            self._arg(v, what)
            return v if v.dtype == dt else self.cast(v, dt)
        return self.full((), v.item() if isinstance(v, (np.generic, np.ndarray)) else v, dt)

    def _operator(self, op: str, a: Any, b: Any, inplace: bool = False) -> Any:
        """What Tensor's operators call: NotImplemented for an operand that is
        neither a Tensor nor a scalar, so that Python tries the other side. In
        place (x += y): into x when the result's dtype casts to x's under numpy's
        same_kind rule, else a DTypeError as numpy's."""
        for v in (a, b):
            if not isinstance(v, Tensor) and not _is_scalar(v):
                return NotImplemented
        fn = getattr(self, op) if op.startswith("logical") else None
        if not inplace:
            if fn is not None:
                return fn(a, b)
            return self.compare(op, a, b) if op in L.COMPARE else self.binary(op, a, b)
        x_dt = a.dtype
        dt = self._result_dtype(a, b, op)
        if dt == x_dt:
            return self.binary(op, a, b, out=a)
        if not np.can_cast(dt, x_dt, casting="same_kind"):
            raise L.error("ERR_DTYPE", f"cannot cast the {op} result from {dt} to {x_dt} with casting rule "
                          "'same_kind' (numpy's rule for in-place operators)")
        return self.cast(self.binary(op, a, b), x_dt, out=a)

    def cast(self, a: Tensor, dtype: DTypeLike, *, out: Optional[Tensor] = None) -> Tensor:
        """a converted to `dtype` (to bool: x != 0; float to integer truncates
        toward zero, as a C cast)."""
        dt = L.dtype_code(dtype)
        ha = self._arg(a, "a")
        return self._out(out, lambda o: L.cast(self._h, ha, dt, o))

    def cat(self, tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
        """torch.cat(tensors, dim), numpy.concatenate(tensors, axis=dim): one
        dtype and rank, the same bounds beside dim; the result's size at dim is
        the sum of the actual sizes, read on the device (clb_cat, two at a time:
        n tensors are n - 1 launches). Sizes that disagree beside dim raise
        DeviceCheckError at the next host sync. No host sync."""
        ts = list(tensors)
        if not ts:
            raise ValueError("cat: no tensors")
        d = L.index(dim, "dim", ctype=L.INT)
        if len(ts) == 1:
            return self.unary("copy", ts[0])
        out = ts[0]
        for i, t in enumerate(ts[1:], 1):
            ha, hb = self._arg(out, "tensors[0]" if i == 1 else "the part so far"), self._arg(t, f"tensors[{i}]")
            out = self._out(None, lambda o, ha=ha, hb=hb: L.cat(self._h, ha, hb, d, o))
        return out

    def gather(self, x: Tensor, dim: int, index: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
        """torch.gather(x, dim, index), numpy.take_along_axis(x, index, dim):
        index's shape, x's dtype; out[p] = x[p with dim replaced by index[p]]
        (clb_gather). index is int64 or int32 of x's rank. An index outside
        [0, x's size at dim) raises IndexOutOfRangeError at the next host sync.
        No host sync."""
        d = L.index(dim, "dim", ctype=L.INT)
        hx, hi = self._arg(x, "x"), self._arg(index, "index")
        return self._out(out, lambda o: L.gather(self._h, hx, d, hi, o))

    def rand_uniform(self, like: Tensor, seed: int, dtype: DTypeLike = np.float32, *,
                     out: Optional[Tensor] = None) -> Tensor:
        """Uniform numbers in [0, 1) of `dtype` (float32 or float64) shaped like
        `like` (its bounds and actual sizes; its data is not read), from
        Philox4x32-10 keyed by `seed` (an integer in [0, 2^64)): element i is a
        function of (i, seed) alone, the same on every device
        (clb_rand_uniform). A new seed per call gives new numbers; numpy's
        ``rng.random(like.shape)``, PyTorch's ``torch.rand_like``. No host sync."""
        dt = L.dtype_code(dtype)
        s = L.index(seed, "seed", ctype=L.U64)
        hl = self._arg(like, "like")
        return self._out(out, lambda o: L.rand_uniform(self._h, hl, dt, s, o))

    def reshape(self, a: Tensor, spec: Shape, *, out: Optional[Tensor] = None) -> Tensor:
        """A view of a's data with another shape: each entry a static size, or -1
        (at most one) for the dim taking the remaining elements, dynamic when a
        has a dynamic dim. No copy; either may be freed first."""
        dims, rank = L.shape(spec, "spec", lo=-1)
        ha = self._arg(a, "a")
        return self._out(out, lambda o: L.reshape(self._h, ha, rank, dims, o))

    def reshape_bounded(self, a: Tensor, sizes: Shape, bounds: Shape, dynamic: Optional[Iterable[bool]] = None, *,
                        out: Optional[Tensor] = None) -> Tensor:
        """A view of a's data with the given bounds and dynamic flags and the
        actual sizes `sizes` (clb_reshape_bounded): a shape with more than one
        dynamic dim, whose sizes the caller knows. A static dim's size is its
        bound; the bounds' element count must fit a's; sizes that do not hold
        a's actual element count fail the next sync (DeviceCheckError)."""
        cb, rank = L.shape(bounds, "bounds")
        cs, _ = L.shape(sizes, "sizes", rank=rank)
        ha = self._arg(a, "a")
        return self._out(out, lambda o: L.reshape_bounded(self._h, ha, rank, cb, L.flags(dynamic, rank), cs, o))

    # ---- indexing ----

    def getitem(self, a: Tensor, key: Any, *, out: Optional[Tensor] = None) -> Tensor:
        """``a[key]`` for numpy's basic indexing (clb_basic_index), always a copy on
        the device: integers (which drop their dim), slices with Python's
        semantics (negative values count from the end of the ACTUAL size, read on
        the device), ``...`` and None, with no host sync::

            x.write(np.arange(5.0, dtype=np.float32))   # 5 of up to 1000
            ctx.getitem(x, slice(-2, None)).numpy()     # [3., 4.]: the last 2 of 5
            x.write(np.arange(3.0, dtype=np.float32))   # now 3
            ctx.getitem(x, -1).numpy()                  # 2.0

        A dynamic dim gives a dynamic dim whose bound is the longest the slice can
        be; a static dim a static one. An integer past a static dim (or past a
        dynamic dim's bound) raises IndexOutOfRangeError (an IndexError) at once;
        one past a dynamic dim's actual size raises it at the next host sync.
        ``a[key]`` is this call, except that ``a[...]`` and ``a[:]`` give a
        itself and a bool mask Tensor gives masked_select."""
        ha = self._arg(a, "a")
        parsed = L.index_keys(key, a.rank)
        keys, n = parsed if parsed is not None else ((L.IndexKey * 1)(), 0)
        return self._out(out, lambda o: L.basic_index(self._h, ha, n, keys, o))

    def setitem(self, a: Tensor, key: Any, value: Any) -> None:
        """``a[key] = value``, in place on the device, no host sync. For numpy's
        basic indexing (clb_basic_index_put), value is a Tensor of the
        selection's shape (its actual sizes are checked on the device:
        DeviceCheckError at the next sync) or a scalar / 0-d Tensor for every
        selected element; a value of another dtype is cast to a's (as numpy
        assigns: a float into an integer tensor truncates). A bool mask Tensor
        as key takes a scalar (numpy's ``a[a < 0] = 0``: clb_where into a); for
        a mask and a Tensor of values use masked_scatter."""
        ha = self._arg(a, "a")
        if not isinstance(value, Tensor) and not _is_scalar(value):
            hint = " (make one with ctx.from_numpy)" if isinstance(value, (np.ndarray, list, tuple)) else ""
            raise TypeError(f"a[key] = value: value must be a clbound.Tensor or a scalar, not {_describe(value)}{hint}")
        mask = isinstance(key, Tensor) and key.dtype == np.bool_
        if mask and isinstance(value, Tensor) and value.rank > 0:
            raise TypeError("a[mask] = values: use ctx.masked_scatter(a, mask, values) (a bool mask takes a "
                            "scalar here)")
        v = self._as(value, a.dtype, "value")  # cast, or a 0-d tensor of the scalar
        if mask:
            self.where(key, v, a, out=a)
            return
        parsed = L.index_keys(key, a.rank)
        keys, n = parsed if parsed is not None else ((L.IndexKey * 1)(), 0)
        self._check(L.basic_index_put(self._h, ha, n, keys, v._h))

    def slice(self, a: Tensor, dim: int, start: Optional[int] = None, stop: Optional[int] = None,
              step: Optional[int] = None, *, out: Optional[Tensor] = None) -> Tensor:
        """``a[..., start:stop:step, ...]`` at dim `dim` (clb_slice; negative dims
        count from the end), the other dims whole: getitem with one slice."""
        ha = self._arg(a, "a")
        d = L.index(dim, "dim", ctype=L.INT)
        _, first, end, stride = L.slice_key(slice(start, stop, step))
        return self._out(out, lambda o: L.slice_(self._h, ha, d, first, end, stride, o))

    def index(self, a: Tensor, dim: int, index: int, *, out: Optional[Tensor] = None) -> Tensor:
        """``a[..., index, ...]`` at dim `dim` (clb_index, torch.select), which the
        result drops: getitem with one integer."""
        ha = self._arg(a, "a")
        d = L.index(dim, "dim", ctype=L.INT)
        i = L.index(index, "index")
        return self._out(out, lambda o: L.index_(self._h, ha, d, i, o))

    def permute(self, a: Tensor, dims: Optional[Sequence[int]] = None, *, out: Optional[Tensor] = None) -> Tensor:
        """numpy.transpose(a, dims), torch.permute(a, dims) (clb_permute): a dense
        copy of a with its dims in the order dims gives (negative dims count from
        the end; None reverses them, as numpy's a.T). Output dim j keeps the
        bound, the dynamic flag and, on the device, the actual size of a's dim
        dims[j]: no host sync."""
        ha = self._arg(a, "a")
        if dims is None:
            order = list(range(a.rank))[::-1]
        else:
            if isinstance(dims, (int, np.integer)):
                raise TypeError("dims must be a sequence of ints (a permutation of the tensor's dims)")
            order = [L.index(d, f"dims[{i}]", ctype=L.INT) for i, d in enumerate(dims)]
        arr = (ctypes.c_int * max(len(order), 1))(*order)
        return self._out(out, lambda o: L.permute(self._h, ha, len(order), arr, o))

    def transpose(self, a: Tensor, dim0: int, dim1: int, *, out: Optional[Tensor] = None) -> Tensor:
        """torch.transpose(a, dim0, dim1) (clb_transpose): a dense copy of a with
        dims dim0 and dim1 swapped (negative counts from the end); permute's
        copy, no host sync."""
        ha = self._arg(a, "a")
        d0, d1 = L.index(dim0, "dim0", ctype=L.INT), L.index(dim1, "dim1", ctype=L.INT)
        return self._out(out, lambda o: L.transpose(self._h, ha, d0, d1, o))

    # ---- reductions ----

    def reduce_all(self, op: str, a: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
        """op ("sum", "mean", "max") over every live element: a 0-d tensor. sum of
        integers or bools gives int64; mean is floating only (NaN when empty); max
        of nothing raises ERR_EMPTY_REDUCE at the next sync."""
        code = L.choice(L.REDUCE, op, "reduce op")
        ha = self._arg(a, "a")
        return self._out(out, lambda o: L.reduce_all(self._h, code, ha, o))

    def reduce_dim(self, op: str, a: Tensor, dim: Optional[int] = None, keepdim: bool = False, *,
                   axis: Optional[int] = None, keepdims: Optional[bool] = None,
                   out: Optional[Tensor] = None) -> Tensor:
        """op over dim `dim` (numpy's name: axis=; negative counts from the end);
        keepdim (keepdims=) keeps it as 1. The reduced size is the actual one,
        read on the device."""
        code = L.choice(L.REDUCE, op, "reduce op")
        dim, keepdim = _axis(op, dim, keepdim, axis, keepdims)
        if dim is None:
            raise TypeError(f"reduce_dim({op!r}) needs dim= (or axis=)")
        d = L.index(dim, "dim", ctype=L.INT)
        ha = self._arg(a, "a")
        return self._out(out, lambda o: L.reduce_dim(self._h, code, ha, d, int(bool(keepdim)), o))

    def cumsum(self, a: Tensor, dim: Optional[int] = None, *, axis: Optional[int] = None,
               out: Optional[Tensor] = None) -> Tensor:
        """The running sum along dim (torch.cumsum; numpy's name: axis=, which
        must be given: clbound does not flatten): a's sizes; integers and bools
        give int64, floats keep their dtype (compensated sums). clb_cumsum: one
        work-item walks each line. No host sync."""
        if dim is not None and axis is not None:
            raise TypeError("cumsum: give dim or axis, not both")
        d = dim if dim is not None else axis
        if d is None:
            raise TypeError("cumsum needs dim= (or axis=)")
        di = L.index(d, "dim", ctype=L.INT)
        ha = self._arg(a, "a")
        return self._out(out, lambda o: L.cumsum(self._h, ha, di, o))

    def sum(self, a: Tensor, dim: Optional[int] = None, keepdim: Optional[bool] = False, *,
            axis: Optional[int] = None, keepdims: Optional[bool] = None, out: Optional[Tensor] = None) -> Tensor:
        """The sum over every live element (a 0-d tensor), or over dim (alias axis,
        as numpy); keepdim (alias keepdims). Integers and bools sum to int64."""
        return self._reduce("sum", a, dim, keepdim, axis, keepdims, out)

    def mean(self, a: Tensor, dim: Optional[int] = None, keepdim: Optional[bool] = False, *,
             axis: Optional[int] = None, keepdims: Optional[bool] = None, out: Optional[Tensor] = None) -> Tensor:
        """The mean over every live element, or over dim (alias axis), dividing by
        the actual count read on the device; floating dtypes only."""
        return self._reduce("mean", a, dim, keepdim, axis, keepdims, out)

    def max(self, a: Tensor, dim: Optional[int] = None, keepdim: Optional[bool] = False, *,
            axis: Optional[int] = None, keepdims: Optional[bool] = None, out: Optional[Tensor] = None) -> Tensor:
        """The maximum over every live element, or over dim (alias axis); an empty
        extent raises EmptyReductionError at the next sync."""
        return self._reduce("max", a, dim, keepdim, axis, keepdims, out)

    def _reduce(self, op: str, a: Tensor, dim: Optional[int], keepdim: Optional[bool], axis: Optional[int],
                keepdims: Optional[bool], out: Optional[Tensor]) -> Tensor:
        dim, keepdim = _axis(op, dim, keepdim, axis, keepdims)
        if dim is None:
            return self.reduce_all(op, a, out=out)
        return self.reduce_dim(op, a, dim, keepdim, out=out)

    # ---- data-dependent ops: the count stays on the device ----

    def nonzero(self, a: Tensor, *, out: Optional[Tensor] = None,
                as_tuple: bool = False) -> Union[Tensor, Tuple[Tensor, ...]]:
        """The indices of a's nonzero elements, like torch.nonzero: int64
        [count, rank] in row-major order (-0.0 is zero, NaN nonzero). out: an int64
        [<=B, rank] tensor with a dynamic dim 0 to reuse; a bound B below the count
        keeps the first B rows and raises ERR_BOUND_EXCEEDED at the next sync.

        as_tuple=True gives, like torch.nonzero(as_tuple=True) and numpy.nonzero,
        one 1-D int64 tensor per dim of a (a 0-d a counts as 1-D), computed on the
        device with no host sync."""
        ha = self._arg(a, "a")
        if not as_tuple:
            return self._out(out, lambda o: L.nonzero(self._h, ha, o))
        if out is not None:
            raise ValueError("nonzero: out= is for the [count, rank] form; as_tuple=True makes its own outputs")
        x = a if a.rank > 0 else self.reshape(a, [1])
        idx = self.nonzero(x)
        if x.rank == 1:
            return (self.reshape(idx, [-1]),)
        # Column d of idx as its own tensor: idx @ e_d, with e_d the d-th unit column.
        # Exact: every index is an integer below 2**53 (f64) or 2**24 (f32).
        exact_f64 = self.supports("matmul", np.float64)
        if not exact_f64 and max(x.bounds) >= 2**24:
            raise L.error("ERR_UNSUPPORTED", "nonzero(as_tuple=True) of dims over 2**24 needs a device with "
                          "fp64; use nonzero() and slice its columns on the host")
        ft = np.float64 if exact_f64 else np.float32
        idx_f = self.cast(idx, ft)
        cols = []
        for d in range(x.rank):
            col = self.matmul(idx_f, self.from_numpy(np.eye(x.rank, 1, -d, dtype=ft)))
            cols.append(self.cast(self.reshape(col, [-1]), np.int64))
        return tuple(cols)

    def nonzero_static(self, a: Tensor, size: int, fill_value: int = -1, *, out: Optional[Tensor] = None,
                       count: Optional[Tensor] = None,
                       return_count: bool = False) -> Union[Tensor, Tuple[Tensor, Tensor]]:
        """nonzero with `size` rows, like torch.nonzero_static: int64 [size, rank],
        the first min(count, size) rows the indices, the rest fill_value (a count
        over size truncates, no error). Returns the indices, as PyTorch; with
        return_count=True, (indices, the true count as a 0-d int64 tensor computed
        on the device). out and count: tensors to reuse (int64 [size, rank]
        static, and 0-d int64, which receives the count either way)::

            idx, n = ctx.nonzero_static(x, 16, return_count=True)   # no host sync
        """
        n = L.index(size, "size", lo=0)
        fv = L.index(fill_value, "fill_value")
        ha = self._arg(a, "a")
        ho = ctypes.c_void_p(self._arg(out, "out", optional=True).value if out is not None else None)
        hc = ctypes.c_void_p(self._arg(count, "count", optional=True).value if count is not None else None)
        cptr = ctypes.byref(hc) if return_count or count is not None else None
        self._check(L.nonzero_static(self._h, ha, n, fv, ctypes.byref(ho), cptr))
        idx = out if out is not None else self._wrap(ho)
        if not return_count:
            return idx
        return idx, count if count is not None else self._wrap(hc)

    def masked_select(self, x: Tensor, mask: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
        """1-D: the elements of x where the bool mask (broadcast with x) is true, in
        row-major order. out: a 1-D dynamic tensor of x's dtype to reuse; a bound
        below the count keeps the first elements and raises ERR_BOUND_EXCEEDED at
        the next sync."""
        hx, hm = self._arg(x, "x"), self._arg(mask, "mask")
        return self._out(out, lambda o: L.masked_select(self._h, hx, hm, o))

    def masked_scatter(self, x: Tensor, mask: Tensor, source: Tensor, *,
                       out: Optional[Tensor] = None) -> Tensor:
        """x with its positions under the bool mask (broadcast to x) taking
        consecutive elements of source, like torch.masked_scatter. out=x works in
        place (torch's masked_scatter_). A source shorter than the mask's count
        raises ERR_SHORT_SOURCE at the next sync."""
        hx, hm, hs = self._arg(x, "x"), self._arg(mask, "mask"), self._arg(source, "source")
        return self._out(out, lambda o: L.masked_scatter(self._h, hx, hm, hs, o))

    # ---- nn ops ----

    def matmul(self, a: Tensor, b: Tensor, trans_a: bool = False, trans_b: bool = False, *,
               out: Optional[Tensor] = None) -> Tensor:
        """op(a) @ op(b), op(x) = x.T when trans_x; float32 or float64. Any of M,
        K, N may be dynamic (see set_gemm_strategy)."""
        ha, hb = self._arg(a, "a"), self._arg(b, "b")
        return self._out(out, lambda o: L.matmul(self._h, ha, int(bool(trans_a)), hb, int(bool(trans_b)), o))

    def bmm(self, a: Tensor, b: Tensor, trans_a: bool = False, trans_b: bool = False, *,
            out: Optional[Tensor] = None) -> Tensor:
        """torch.bmm: op(a[i]) @ op(b[i]) for each matrix of a batch, a and b of
        rank 3 with the same batch bound, op transposing the last two dims;
        float32 or float64. The batch and every matrix dim may be dynamic."""
        ha, hb = self._arg(a, "a"), self._arg(b, "b")
        return self._out(out, lambda o: L.bmm(self._h, ha, int(bool(trans_a)), hb, int(bool(trans_b)), o))

    def linear(self, x: Tensor, w: Tensor, bias: Optional[Tensor] = None, *,
               activation: Optional[str] = None, out: Optional[Tensor] = None) -> Tensor:
        """x @ w.T + bias: x [M, in], w [features, in], bias [features] or None.
        activation ("relu", "sigmoid", "tanh" or "exp") is applied in the same op
        (host BLAS's epilogue for relu, clbound's GEMM kernel's for all four)."""
        hx, hw, hb = self._arg(x, "x"), self._arg(w, "w"), self._arg(bias, "bias", optional=True)
        if activation is None:
            return self._out(out, lambda o: L.linear(self._h, hx, hw, hb, o))
        if activation not in ("relu", "sigmoid", "tanh", "exp"):
            raise ValueError(f"linear: activation {activation!r} is not one of relu, sigmoid, tanh, exp")
        act = L.UNARY[activation]
        return self._out(out, lambda o: L.linear_act(self._h, hx, hw, hb, act, o))

    def linear_backward(self, x: Tensor, w: Optional[Tensor], dy: Tensor,
                        need: Iterable[str] = ("dx", "dw", "dbias"), *, relu_x: bool = False,
                        dx: Optional[Tensor] = None, dw: Optional[Tensor] = None,
                        dbias: Optional[Tensor] = None) -> Tuple[Optional[Tensor], ...]:
        """(dx, dw, dbias) of linear(x, w, bias) given dy: dx = dy @ w, dw = dy.T @ x,
        dbias = dy summed over its actual rows. A gradient not in `need` (and not
        given as a tensor to reuse) is None; w may be None when dx is not
        needed (a first layer's backward). relu_x: x is also the output of a
        ReLU (the layer below's), and dx gets its backward too: dx = dy @ w where
        x > 0, else 0 (one native kernel with dw and dbias under host BLAS)."""
        want = set()
        for k in need:
            L.choice({"dx": 0, "dw": 1, "dbias": 2}, k, "gradient")
            want.add(k)
        given = {"dx": dx, "dw": dw, "dbias": dbias}
        hx, hw, hdy = self._arg(x, "x"), self._arg(w, "w", optional=True), self._arg(dy, "dy")
        hs = {}
        for k, t in given.items():
            if t is not None:
                hs[k] = ctypes.c_void_p(self._arg(t, k).value)
            elif k in want:
                hs[k] = ctypes.c_void_p()
        ptr = {k: ctypes.byref(hs[k]) if k in hs else None for k in given}
        call = L.linear_bw_relu if relu_x else L.linear_bw
        self._check(call(self._h, hx, hw, hdy, ptr["dx"], ptr["dw"], ptr["dbias"]))
        return tuple(given[k] if given[k] is not None else self._wrap(hs[k]) if k in hs else None
                     for k in ("dx", "dw", "dbias"))

    def softmax(self, x: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
        """Softmax over the last dim, at the actual sizes."""
        hx = self._arg(x, "x")
        return self._out(out, lambda o: L.softmax(self._h, hx, 0, o))

    def log_softmax(self, x: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
        """log(softmax(x)) over the last dim, computed stably."""
        hx = self._arg(x, "x")
        return self._out(out, lambda o: L.softmax(self._h, hx, 1, o))

    def softmax_backward(self, y: Tensor, dy: Tensor, log: bool = False, *,
                         out: Optional[Tensor] = None) -> Tensor:
        """dx of softmax (log_softmax when `log`) from its output y and dy."""
        hy, hdy = self._arg(y, "y"), self._arg(dy, "dy")
        return self._out(out, lambda o: L.softmax_bw(self._h, hy, hdy, int(bool(log)), o))

    def unary_backward(self, op: str, dy: Tensor, x: Optional[Tensor] = None, y: Optional[Tensor] = None, *,
                       out: Optional[Tensor] = None) -> Tensor:
        """dx = dy * op'(...): relu, log, erf, abs, log1p, sin, cos, log2 and
        log10 read the input x, sigmoid, tanh, exp, sqrt, rsqrt, expm1 and exp2
        the output y; neg, copy and the rounding ops (whose gradient is 0) read
        neither."""
        code = L.choice(L.UNARY, op, "unary op")
        hdy, hx, hy = self._arg(dy, "dy"), self._arg(x, "x", optional=True), self._arg(y, "y", optional=True)
        return self._out(out, lambda o: L.unary_bw(self._h, code, hx, hy, hdy, o))

    def sgd_step(self, param: Tensor, grad: Tensor, lr: float, momentum: float = 0.0,
                 velocity: Optional[Tensor] = None) -> None:
        """In place: velocity = momentum * velocity + grad (when given; zero it
        once), param -= lr * (velocity if given else grad). lr and momentum must
        be finite."""
        lr_, mom = L.real(lr, "lr", finite=True), L.real(momentum, "momentum", finite=True)
        hp, hg = self._arg(param, "param"), self._arg(grad, "grad")
        hv = self._arg(velocity, "velocity", optional=True)
        self._check(L.sgd_step(self._h, hp, hg, hv, lr_, mom))

    def loss(self, kind: str, pred: Tensor, target: Tensor, *, out: Optional[Tensor] = None,
             grad: Optional[Tensor] = None, need_grad: bool = True) -> Tuple[Tensor, Optional[Tensor]]:
        """(the mean loss over the actual elements as a 0-d tensor, d loss / d pred
        or None when need_grad is False). kind: mse, bce, bce_with_logits,
        cross_entropy (pred [M, C] logits, target [M] int64 classes). out and grad:
        tensors to reuse."""
        code = L.choice(L.LOSS, kind, "loss kind")
        hp, ht = self._arg(pred, "pred"), self._arg(target, "target")
        hl = ctypes.c_void_p(self._arg(out, "out", optional=True).value if out is not None else None)
        hg = ctypes.c_void_p(self._arg(grad, "grad", optional=True).value if grad is not None else None)
        gptr = ctypes.byref(hg) if need_grad or grad is not None else None
        self._check(L.loss(self._h, code, hp, ht, ctypes.byref(hl), gptr))
        lt = out if out is not None else self._wrap(hl)
        if gptr is None:
            return lt, None
        return lt, grad if grad is not None else self._wrap(hg)


def _binary_method(name: str) -> Callable[..., Tensor]:
    def method(self: Context, a: Operand, b: Operand, *, out: Optional[Tensor] = None) -> Tensor:
        return self.binary(name, a, b, out=out)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = (f'binary("{name}", a, b, out=out): elementwise, broadcast like numpy and PyTorch; a '
                      'scalar operand and numpy\'s dtype promotion work.')
    return method


def _compare_method(name: str) -> Callable[..., Tensor]:
    def method(self: Context, a: Operand, b: Operand, *, out: Optional[Tensor] = None) -> Tensor:
        return self.compare(name, a, b, out=out)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f'compare("{name}", a, b, out=out): a bool mask, broadcast and promoted like binary().'
    return method


def _unary_method(name: str) -> Callable[..., Tensor]:
    def method(self: Context, a: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
        return self.unary(name, a, out=out)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f'unary("{name}", a, out=out): elementwise; out may be a (in place).'
    return method


for _name in L.BINARY:
    setattr(Context, _name, _binary_method(_name))
for _name in L.UNARY:
    if _name not in Context.__dict__:  # abs: its own, which takes integers too
        setattr(Context, _name, _unary_method(_name))
for _name in L.COMPARE:
    setattr(Context, _name, _compare_method(_name))


from .graph import Graph  # noqa: E402  (graph.py imports this module's names)
