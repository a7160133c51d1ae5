"""clbound for Python: bounded tensors whose actual sizes live on an OpenCL device.

A thin ctypes layer over libclbound with numpy arrays in and out::

    import numpy as np, clbound
    ctx = clbound.Context()
    x = ctx.tensor(np.float32, bounds=(1000, 4), dynamic=(True, False))
    x.write(np.ones((3, 4), np.float32))      # 3 of up to 1000 rows
    y = ctx.relu(x)
    print(ctx.reduce_all("mean", y).numpy())  # one host sync, counted

The library is found through CLBOUND_LIBRARY (a path), then next to this package
in a build tree, then the system's loader.
"""

import ctypes
import ctypes.util
import os
import weakref

import numpy as np

__all__ = ["Context", "Tensor", "Graph", "ClboundError", "library_path"]

_DTYPES = {
    np.dtype(np.float32): 0,
    np.dtype(np.float64): 1,
    np.dtype(np.int32): 2,
    np.dtype(np.int64): 3,
    np.dtype(np.uint8): 4,
    np.dtype(np.bool_): 5,
}
_NUMPY = {v: k for k, v in _DTYPES.items()}
_UNARY = {"neg": 0, "relu": 1, "sigmoid": 2, "tanh": 3, "exp": 4, "log": 5, "copy": 6}
_BINARY = {"add": 0, "sub": 1, "mul": 2, "div": 3, "remainder": 4, "maximum": 5, "minimum": 6}
_REDUCE = {"sum": 0, "mean": 1, "max": 2}
_LOSS = {"mse": 0, "bce": 1, "bce_with_logits": 2, "cross_entropy": 3}
_GEMM = {"auto": 0, "clblast_bound": 1, "sync_exact": 2, "device": 3, "host_blas": 4}
_MAX_RANK = 8


class ClboundError(RuntimeError):
    """A clbound call failed: `status` is the clb_status name, the message the detail."""

    def __init__(self, status, message):
        super().__init__(f"{status}: {message}")
        self.status = status


def library_path():
    """Where libclbound is loaded from."""
    env = os.environ.get("CLBOUND_LIBRARY")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.path.join(here, "..", "..", "build", "lib", "libclbound.so"),):
        if os.path.exists(cand):
            return os.path.normpath(cand)
    found = ctypes.util.find_library("clbound")
    if not found:
        raise OSError("libclbound not found: set CLBOUND_LIBRARY to its path")
    return found


_lib = ctypes.CDLL(library_path())
_p = ctypes.c_void_p
_i64p = ctypes.POINTER(ctypes.c_int64)


def _fn(name, restype, *argtypes):
    f = getattr(_lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_status_name = _fn("clb_status_name", ctypes.c_char_p, ctypes.c_int)
_last_errmsg = _fn("clb_last_errmsg", ctypes.c_char_p)
_ctx_errmsg = _fn("clb_context_errmsg", ctypes.c_char_p, _p)
_ctx_new = _fn("clb_context_new", ctypes.c_int, _p, ctypes.POINTER(_p))
_ctx_free = _fn("clb_context_free", None, _p)
_ctx_sync = _fn("clb_context_sync", ctypes.c_int, _p)
_ctx_metrics = _fn("clb_context_metrics_json", ctypes.c_int, _p, ctypes.c_char_p, ctypes.c_size_t,
                   ctypes.POINTER(ctypes.c_size_t))
_t_new = _fn("clb_tensor_new", ctypes.c_int, _p, ctypes.c_int, ctypes.c_int, _i64p,
             ctypes.POINTER(ctypes.c_uint8), ctypes.POINTER(_p))
_t_free = _fn("clb_tensor_free", None, _p)
_t_dtype = _fn("clb_tensor_dtype", ctypes.c_int, _p)
_t_rank = _fn("clb_tensor_rank", ctypes.c_int, _p)
_t_bounds = _fn("clb_tensor_bounds", None, _p, _i64p)
_t_is_dyn = _fn("clb_tensor_is_dynamic", ctypes.c_int, _p, ctypes.c_int)
_t_write = _fn("clb_tensor_write", ctypes.c_int, _p, _p, _i64p, _p, ctypes.c_size_t)
_t_read = _fn("clb_tensor_read", ctypes.c_int, _p, _p, _i64p, _p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t))
_t_sizes = _fn("clb_tensor_sizes", ctypes.c_int, _p, _p, _i64p)
_binary = _fn("clb_binary", ctypes.c_int, _p, ctypes.c_int, _p, _p, ctypes.POINTER(_p))
_unary = _fn("clb_unary", ctypes.c_int, _p, ctypes.c_int, _p, ctypes.POINTER(_p))
_cast = _fn("clb_cast", ctypes.c_int, _p, _p, ctypes.c_int, ctypes.POINTER(_p))
_fill = _fn("clb_fill", ctypes.c_int, _p, _p, ctypes.c_double)
_reduce_all = _fn("clb_reduce_all", ctypes.c_int, _p, ctypes.c_int, _p, ctypes.POINTER(_p))
_reduce_dim = _fn("clb_reduce_dim", ctypes.c_int, _p, ctypes.c_int, _p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(_p))
_reshape = _fn("clb_reshape", ctypes.c_int, _p, _p, ctypes.c_int, _i64p, ctypes.POINTER(_p))
_nonzero = _fn("clb_nonzero", ctypes.c_int, _p, _p, ctypes.POINTER(_p))
_nonzero_static = _fn("clb_nonzero_static", ctypes.c_int, _p, _p, ctypes.c_int64, ctypes.c_int64,
                      ctypes.POINTER(_p), ctypes.POINTER(_p))
_masked_select = _fn("clb_masked_select", ctypes.c_int, _p, _p, _p, ctypes.POINTER(_p))
_masked_scatter = _fn("clb_masked_scatter", ctypes.c_int, _p, _p, _p, _p, ctypes.POINTER(_p))
_matmul = _fn("clb_matmul", ctypes.c_int, _p, _p, ctypes.c_int, _p, ctypes.c_int, ctypes.POINTER(_p))
_linear = _fn("clb_linear", ctypes.c_int, _p, _p, _p, _p, ctypes.POINTER(_p))
_linear_bw = _fn("clb_linear_backward", ctypes.c_int, _p, _p, _p, _p, ctypes.POINTER(_p), ctypes.POINTER(_p),
                 ctypes.POINTER(_p))
_set_gemm = _fn("clb_context_set_gemm_strategy", ctypes.c_int, _p, ctypes.c_int)
_softmax = _fn("clb_softmax", ctypes.c_int, _p, _p, ctypes.c_int, ctypes.POINTER(_p))
_softmax_bw = _fn("clb_softmax_backward", ctypes.c_int, _p, _p, _p, ctypes.c_int, ctypes.POINTER(_p))
_unary_bw = _fn("clb_unary_backward", ctypes.c_int, _p, ctypes.c_int, _p, _p, _p, ctypes.POINTER(_p))
_sgd_step = _fn("clb_sgd_step", ctypes.c_int, _p, _p, _p, _p, ctypes.c_double, ctypes.c_double)
_loss = _fn("clb_loss", ctypes.c_int, _p, ctypes.c_int, _p, _p, ctypes.POINTER(_p), ctypes.POINTER(_p))
_op_supported = _fn("clb_op_supported", ctypes.c_int, _p, ctypes.c_char_p, ctypes.c_int)
_to_dlpack_legacy = _fn("clb_tensor_to_dlpack_legacy", ctypes.c_int, _p, _p, ctypes.POINTER(_p))
_from_dlpack_legacy = _fn("clb_tensor_from_dlpack_legacy", ctypes.c_int, _p, _p, _i64p,
                          ctypes.POINTER(ctypes.c_uint8), ctypes.POINTER(_p))


def _dims(values):
    arr = (ctypes.c_int64 * max(len(values), 1))(*[int(v) for v in values])
    return arr


class Context:
    """An OpenCL context with its queue, program cache and memory pool.

    `device` is an index or a name substring (default: CLBOUND_DEVICE, else the first).
    """

    def __init__(self, device=None):
        self._h = _p()
        opts = None
        if device is not None:
            # clb_context_options: struct_size, platform, device, kernel_style, limit, cache_dir
            class _Opts(ctypes.Structure):
                _fields_ = [("struct_size", ctypes.c_size_t), ("platform", ctypes.c_char_p),
                            ("device", ctypes.c_char_p), ("kernel_style", ctypes.c_int),
                            ("device_memory_limit", ctypes.c_uint64), ("cache_dir", ctypes.c_char_p)]
            o = _Opts()
            o.struct_size = ctypes.sizeof(_Opts)
            o.device = str(device).encode()
            opts = ctypes.byref(o)
        st = _ctx_new(opts, ctypes.byref(self._h))
        if st != 0:
            raise ClboundError(_status_name(st).decode(), _last_errmsg().decode())
        # the tensors this context created, weakly: a Tensor the caller drops frees
        # its device buffers at once (back to the pool), not at close()
        self._tensors = weakref.WeakSet()

    def close(self):
        """Frees the context, its graphs and every tensor on it."""
        if self._h:
            for g in list(getattr(self, "_graphs", [])):
                g.close()
            for t in list(self._tensors):
                t._h = None  # freed with the context below
            _ctx_free(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def _check(self, st):
        if st != 0:
            raise ClboundError(_status_name(st).decode(), _ctx_errmsg(self._h).decode())

    def _wrap(self, handle):
        t = Tensor(self, handle, owned=True)
        self._tensors.add(t)
        return t

    def tensor(self, dtype, bounds, dynamic=None):
        """A new tensor of `dtype` with `bounds`; `dynamic` flags the dims that may vary."""
        dt = _DTYPES.get(np.dtype(dtype))
        if dt is None:
            raise TypeError(f"clbound has no dtype for {np.dtype(dtype)}")
        rank = len(bounds)
        dyn = (ctypes.c_uint8 * max(rank, 1))(*[1 if d else 0 for d in (dynamic or [False] * rank)])
        h = _p()
        self._check(_t_new(self._h, dt, rank, _dims(bounds), dyn, ctypes.byref(h)))
        return self._wrap(h)

    def from_numpy(self, array, bounds=None, dynamic=None):
        """A tensor holding `array`, with bounds (default: its shape) and dynamic flags."""
        array = np.asarray(array, order="C")
        t = self.tensor(array.dtype, bounds if bounds is not None else array.shape, dynamic)
        t.write(array)
        return t

    def sync(self):
        """Waits for the device; raises the error a kernel raised since the last sync."""
        self._check(_ctx_sync(self._h))

    def metrics(self):
        """The context's counters as a dict (the CLBOUND_METRICS_FILE keys)."""
        import json
        n = ctypes.c_size_t()
        _ctx_metrics(self._h, None, 0, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value + 1)
        self._check(_ctx_metrics(self._h, buf, n.value + 1, None))
        return json.loads(buf.value.decode())

    # ---- ops: each returns a new tensor (the op creates its output) ----

    def _out(self, call):
        h = _p()
        self._check(call(ctypes.byref(h)))
        return self._wrap(h)

    def binary(self, op, a, b):
        return self._out(lambda o: _binary(self._h, _BINARY[op], a._h, b._h, o))

    def unary(self, op, a):
        return self._out(lambda o: _unary(self._h, _UNARY[op], a._h, o))

    def cast(self, a, dtype):
        return self._out(lambda o: _cast(self._h, a._h, _DTYPES[np.dtype(dtype)], o))

    def fill(self, t, value):
        self._check(_fill(self._h, t._h, float(value)))

    def reduce_all(self, op, a):
        return self._out(lambda o: _reduce_all(self._h, _REDUCE[op], a._h, o))

    def reduce_dim(self, op, a, dim, keepdim=False):
        return self._out(lambda o: _reduce_dim(self._h, _REDUCE[op], a._h, int(dim), int(bool(keepdim)), o))

    def reshape(self, a, spec):
        return self._out(lambda o: _reshape(self._h, a._h, len(spec), _dims(spec), o))

    def relu(self, a):
        return self.unary("relu", a)

    # ---- data-dependent ops: the count stays on the device ----

    def nonzero(self, a):
        """int64 [count, rank] indices of a's nonzero elements, like torch.nonzero."""
        return self._out(lambda o: _nonzero(self._h, a._h, o))

    def nonzero_static(self, a, size, fill_value=-1):
        """(indices [size, rank] padded with fill_value, the true count as a 0-d int64
        tensor), like torch.nonzero_static."""
        out, count = _p(), _p()
        self._check(_nonzero_static(self._h, a._h, int(size), int(fill_value), ctypes.byref(out),
                                    ctypes.byref(count)))
        return self._wrap(out), self._wrap(count)

    def masked_select(self, x, mask):
        """1-D: the elements of x where the bool mask (broadcast with x) is true."""
        return self._out(lambda o: _masked_select(self._h, x._h, mask._h, o))

    def masked_scatter(self, x, mask, source):
        """A copy of x whose positions under mask take consecutive elements of source."""
        return self._out(lambda o: _masked_scatter(self._h, x._h, mask._h, source._h, o))

    # ---- MLP ops ----

    def matmul(self, a, b, trans_a=False, trans_b=False):
        return self._out(lambda o: _matmul(self._h, a._h, int(bool(trans_a)), b._h, int(bool(trans_b)), o))

    def linear(self, x, w, bias=None):
        """x @ w.T + bias."""
        return self._out(lambda o: _linear(self._h, x._h, w._h, bias._h if bias is not None else None, o))

    def linear_backward(self, x, w, dy, need=("dx", "dw", "dbias")):
        """(dx, dw, dbias) of linear(x, w, bias) given dy: dx = dy @ w, dw = dy.T @ x,
        dbias = dy summed over its actual rows. A gradient not named in `need` is None."""
        hs = {k: _p() for k in ("dx", "dw", "dbias")}
        for k in need:
            if k not in hs:
                raise ValueError(f"{k!r} is not one of dx, dw, dbias")
        ptr = {k: (ctypes.byref(hs[k]) if k in need else None) for k in hs}
        self._check(_linear_bw(self._h, x._h, w._h, dy._h, ptr["dx"], ptr["dw"], ptr["dbias"]))
        return tuple(self._wrap(hs[k]) if k in need else None for k in ("dx", "dw", "dbias"))

    def set_gemm_strategy(self, strategy):
        """How matmuls run: auto, host_blas, clblast_bound, sync_exact, device (docs/gemm.md)."""
        if strategy not in _GEMM:
            raise ValueError(f"gemm strategy {strategy!r} is not one of {sorted(_GEMM)}")
        self._check(_set_gemm(self._h, _GEMM[strategy]))

    def softmax(self, x):
        """Softmax over the last dim, at the actual sizes."""
        return self._out(lambda o: _softmax(self._h, x._h, 0, o))

    def log_softmax(self, x):
        return self._out(lambda o: _softmax(self._h, x._h, 1, o))

    def softmax_backward(self, y, dy, log=False):
        """dx of softmax (log_softmax when `log`) from its output y and dy."""
        return self._out(lambda o: _softmax_bw(self._h, y._h, dy._h, int(bool(log)), o))

    def unary_backward(self, op, dy, x=None, y=None):
        """dx = dy * op'(...): relu and log read the input x, sigmoid, tanh and exp the
        output y; neg and copy read neither."""
        return self._out(lambda o: _unary_bw(self._h, _UNARY[op], x._h if x is not None else None,
                                             y._h if y is not None else None, dy._h, o))

    def sgd_step(self, param, grad, lr, momentum=0.0, velocity=None):
        """In place: velocity = momentum * velocity + grad (when given; zero it once),
        param -= lr * (velocity if given else grad)."""
        self._check(_sgd_step(self._h, param._h, grad._h, velocity._h if velocity is not None else None,
                              float(lr), float(momentum)))

    def loss(self, kind, pred, target):
        """(the mean loss over the actual elements as a 0-d tensor, d loss / d pred).
        kind: mse, bce, bce_with_logits, cross_entropy."""
        loss, grad = _p(), _p()
        self._check(_loss(self._h, _LOSS[kind], pred._h, target._h, ctypes.byref(loss), ctypes.byref(grad)))
        return self._wrap(loss), self._wrap(grad)

    def from_dlpack(self, obj, bounds=None, dynamic=None):
        """A tensor holding a copy of any host object that speaks DLPack (numpy
        arrays, or torch / jax CPU tensors), with bounds (default: its shape)."""
        from . import _dlpack
        ptr = _dlpack.consume(obj)
        rank = _dlpack.ndim(ptr)
        for what, v in (("bounds", bounds), ("dynamic", dynamic)):
            if v is not None and len(v) != rank:
                _dlpack.release(ptr)
                raise ValueError(f"{what} has {len(v)} dims; the DLPack tensor has {rank}")
        b = _dims(bounds) if bounds is not None else None
        dyn = (ctypes.c_uint8 * max(rank, 1))(*[1 if d else 0 for d in dynamic]) if dynamic is not None else None
        h = _p()
        self._check(_from_dlpack_legacy(self._h, ptr, b, dyn, ctypes.byref(h)))  # consumes ptr
        return self._wrap(h)

    def supports(self, op, dtype):
        """Whether this device runs `op` on `dtype` (clb_op_supported); no device work."""
        dt = _DTYPES.get(np.dtype(dtype))
        return dt is not None and _op_supported(self._h, op.encode(), dt) == 0


for _name in _BINARY:
    setattr(Context, _name, (lambda op: lambda self, a, b: self.binary(op, a, b))(_name))
for _name in _UNARY:
    if not hasattr(Context, _name):
        setattr(Context, _name, (lambda op: lambda self, a: self.unary(op, a))(_name))


class Tensor:
    """A bounded tensor on the device. Its actual sizes live on the device; reading
    them (`sizes`, `numpy`) is a host sync. A tensor an op or `Context.tensor` made
    is freed when the last Python reference to it goes (or by `free()`); one from
    `Graph.tensor` is the graph's, borrowed until its next run."""

    def __init__(self, ctx, handle, owned=False):
        self.ctx = ctx
        self._h = handle
        self._owned = owned

    def free(self):
        """Returns the device buffers now; the Tensor is unusable afterwards."""
        if self._owned and self._h and self.ctx._h:
            _t_free(self._h)
        self._h = None

    def __del__(self):
        try:
            self.free()
        except Exception:  # interpreter shutdown: the library may be gone
            pass

    def _live(self):
        """The handle; a tensor whose context was closed was freed with it."""
        if not self._h:
            raise ClboundError("ERR_NULL", "the tensor was freed (Tensor.free, or Context.close for its context)")
        return self._h

    @property
    def dtype(self):
        return _NUMPY[_t_dtype(self._live())]

    @property
    def rank(self):
        return _t_rank(self._live())

    @property
    def bounds(self):
        r = self.rank
        arr = (ctypes.c_int64 * max(r, 1))()
        _t_bounds(self._live(), arr)
        return tuple(arr[:r])

    @property
    def dynamic(self):
        return tuple(bool(_t_is_dyn(self._live(), d)) for d in range(self.rank))

    def write(self, array):
        """Copies `array` in; its shape becomes the actual sizes (within the bounds)."""
        array = np.asarray(array, dtype=self.dtype, order="C")  # keeps 0-d arrays 0-d
        if array.ndim != self.rank:
            raise ValueError(f"array of rank {array.ndim} for a tensor of rank {self.rank}")
        self.ctx._check(_t_write(self.ctx._h, self._h, _dims(array.shape), array.ctypes.data_as(_p), array.nbytes))

    def sizes(self):
        """The actual sizes (a host sync)."""
        r = self.rank
        arr = (ctypes.c_int64 * max(r, 1))()
        self.ctx._check(_t_sizes(self.ctx._h, self._h, arr))
        return tuple(arr[:r])

    def __dlpack__(self, stream=None, **kwargs):
        """A DLPack capsule of a host copy at the actual sizes (a host sync), so
        numpy.from_dlpack(t) and other DLPack consumers take clbound tensors."""
        from . import _dlpack
        ptr = _p()
        self.ctx._check(_to_dlpack_legacy(self.ctx._h, self._h, ctypes.byref(ptr)))
        return _dlpack.capsule_from_managed(ptr)

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU: __dlpack__ hands out a host copy

    def numpy(self):
        """The live part as a numpy array (a host sync)."""
        bound_n = int(np.prod(self.bounds)) if self.rank else 1
        buf = np.empty(max(bound_n, 1), dtype=self.dtype)
        dims = (ctypes.c_int64 * max(self.rank, 1))()
        got = ctypes.c_size_t()
        self.ctx._check(_t_read(self.ctx._h, self._h, dims, buf.ctypes.data_as(_p), buf.nbytes, ctypes.byref(got)))
        shape = tuple(dims[: self.rank])
        return buf[: int(np.prod(shape)) if self.rank else 1].reshape(shape).copy()


from .graph import Graph  # noqa: E402  (graph.py imports this module's names)
