"""clbound.Tensor: a bounded tensor on the device, with the habits of numpy
arrays and PyTorch tensors (shape, ndim, dtype, len, item, operators,
comparisons, boolean-mask indexing, DLPack 1.x).

Every operator calls the C library through the tensor's Context (no numpy
computes a result) and adds no host sync: a Python scalar becomes a 0-d tensor
filled on the device, a dtype promotion is a cast on the device. What reads from
the device is said in each docstring: shape, len(), item(), float(), bool(),
repr(), numpy() and DLPack exports (each a counted host sync).
"""
from __future__ import annotations

import ctypes
import math
from typing import TYPE_CHECKING, Any, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _lib as L

if TYPE_CHECKING:  # pragma: no cover
    from . import Context

DTypeLike = Any
Shape = Union[int, Sequence[int]]
Scalar = Union[bool, int, float, np.generic]
Operand = Union["Tensor", Scalar]

# DLPack device types (dlpack.h DLDeviceType)
DL_CPU = 1
DL_OPENCL = 4


class Tensor:
    """A bounded tensor on the device: a dtype, per dim a bound (its capacity) and
    whether it is dynamic, and actual sizes that live on the device.

    ``t.bounds`` and ``t.dynamic`` are host facts (no device work); ``t.shape``
    is the actual sizes, read from the device when asked (a counted host sync)::

        x = ctx.from_numpy(np.ones((3, 4), np.float32), bounds=(1000, 4), dynamic=(True, False))
        x.bounds, x.shape          # (1000, 4), (3, 4)
        y = 2.0 * x + 1.0          # two ops on the device, no host sync
        m = y > 2.5                # a bool mask, on the device
        y[m].shape                 # masked_select: (12,), read when asked

    Operators follow numpy's type promotion (NEP 50, numpy 2): ``int32 tensor +
    1.5`` is float64, ``float32 tensor * 2.0`` stays float32; python/README.md
    lists the exceptions.

    A tensor an op or Context.tensor made is freed when the last Python reference
    goes, by free(), or at the end of a ``with`` block; one from Graph.tensor is the
    graph's, borrowed until its next run. A freed tensor raises FreedError."""

    __array_priority__ = 1000  # numpy scalars defer to Tensor's reflected operators

    def __init__(self, ctx: "Context", handle: ctypes.c_void_p, owned: bool = False) -> None:
        self.ctx = ctx
        self._h = handle
        self._owned = owned
        self._last_numel = 0
        self._facts: Optional[Tuple[int, int, Tuple[int, ...], int]] = None  # dtype code, rank, bounds, numel

    def _fixed(self) -> Tuple[int, int, Tuple[int, ...], int]:
        """(dtype code, rank, bounds, bound numel): fixed for a handle's life, asked
        of the library once (the backend reads them per op)."""
        h = self._live()
        f = self._facts
        if f is None:
            r = L.t_rank(h)
            arr = (ctypes.c_int64 * max(r, 1))()
            L.t_bounds(h, arr)
            f = self._facts = (L.t_dtype(h), r, tuple(arr[:r]), L.t_bound_numel(h))
        return f

    def free(self) -> None:
        """Returns the device buffers now; the Tensor is unusable afterwards."""
        if self._owned and self._h and self.ctx._h:
            L.t_free(self._h)
        self._h = None

    def __enter__(self) -> "Tensor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.free()

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:  # interpreter shutdown: the library may be gone
            pass

    def _live(self) -> ctypes.c_void_p:
        """The handle; a tensor whose context was closed was freed with it."""
        if not self._h:
            raise L.error("ERR_NULL", "the tensor was freed (Tensor.free, its graph's next run or close, "
                          "or Context.close for its context)")
        return self._h

    def __repr__(self) -> str:
        """dtype, actual shape (a host sync) and bounds, <=B marking a dynamic dim:
        ``<clbound.Tensor float32 shape=(3, 4) bounds=(<=1000, 4)>``."""
        if not self._h:
            return "<clbound.Tensor freed>"
        dims = ", ".join(f"<={b}" if d else str(b) for b, d in zip(self.bounds, self.dynamic))
        if len(self.bounds) == 1:
            dims += ","
        return f"<clbound.Tensor {self.dtype} shape={self.shape} bounds=({dims})>"

    def __str__(self) -> str:
        """The live elements as numpy prints them (print(t): one host sync, the
        read); repr() gives the dtype, shape and bounds."""
        if not self._h:
            return repr(self)
        return str(self.numpy())

    # ---- facts ------------------------------------------------------------------

    @property
    def dtype(self) -> np.dtype:
        """The element type, as a numpy dtype. No device work."""
        return L.NUMPY[self._fixed()[0]]

    @property
    def rank(self) -> int:
        """The number of dims (0..8). No device work."""
        return self._fixed()[1]

    @property
    def ndim(self) -> int:
        """The number of dims, as numpy's ndarray.ndim. No device work."""
        return self.rank

    def dim(self) -> int:
        """The number of dims, as torch.Tensor.dim(). No device work."""
        return self.rank

    @property
    def bounds(self) -> Tuple[int, ...]:
        """Each dim's bound: the largest size it may take. No device work."""
        return self._fixed()[2]

    @property
    def dynamic(self) -> Tuple[bool, ...]:
        """Whether each dim's actual size may vary. No device work."""
        return tuple(bool(L.t_is_dyn(self._live(), d)) for d in range(self.rank))

    @property
    def bound_numel(self) -> int:
        """The number of elements at the bounds (the buffer's capacity)."""
        return self._fixed()[3]

    @property
    def data_mem(self) -> int:
        """The borrowed cl_mem of the data, as an integer; the data starts
        data_offset bytes into it (a graph's tensors share its arena)."""
        return L.t_data_mem(self._live()) or 0

    @property
    def data_offset(self) -> int:
        """The byte offset of the data in data_mem (0 outside a graph's arena)."""
        return L.t_data_offset(self._live())

    @property
    def shape_mem(self) -> int:
        """The borrowed cl_mem of the shape record (8 int64), as an integer."""
        return L.t_shape_mem(self._live()) or 0

    def sizes(self) -> Tuple[int, ...]:
        """The actual sizes (a host sync; raises a pending device error)."""
        r = self.rank
        arr = (ctypes.c_int64 * max(r, 1))()
        self.ctx._check(L.t_sizes(self.ctx._live(), self._live(), arr))
        return tuple(arr[:r])

    @property
    def shape(self) -> Tuple[int, ...]:
        """The actual sizes, as numpy's ndarray.shape: read from the device each
        time (a counted host sync, which raises a pending device error). The
        bounds are ``t.bounds``."""
        return self.sizes()

    def numel(self) -> int:
        """The actual number of elements (a host sync), as torch.Tensor.numel()."""
        return int(np.prod(self.sizes(), dtype=np.int64))

    def __len__(self) -> int:
        """The actual size of dim 0 (a host sync); TypeError for a 0-d tensor."""
        if self.rank == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.sizes()[0]

    def set_sizes(self, sizes: Shape) -> None:
        """Sets the actual sizes without touching the data (clb_tensor_set_sizes):
        each within its bound, a static dim equal to it. Elements that become live
        hold whatever the buffer held."""
        dims, _ = L.shape(sizes, "sizes", rank=self.rank)
        self.ctx._check(L.t_set_sizes(self.ctx._live(), self._live(), dims))

    # ---- host data in and out --------------------------------------------------------

    def write(self, array: Any, casting: str = "same_kind") -> None:
        """Copies `array` in; its shape becomes the actual sizes (within the bounds).

        Values are converted to the tensor's dtype under numpy's casting rule
        `casting` ("no", "equiv", "safe", "same_kind" (the default, as numpy.copyto)
        or "unsafe"): float data into an integer tensor is a TypeError unless
        casting="unsafe", and Python ints (a list or a scalar) outside an integer
        dtype's range are an OverflowError."""
        self._live()
        arr = convert(array, self.dtype, casting)
        if arr.ndim != self.rank:
            raise L.error("ERR_SHAPE", f"write: array of rank {arr.ndim} for a tensor of rank {self.rank}")
        dims, _ = L.shape(arr.shape, "array shape")
        self.ctx._check(L.t_write(self.ctx._live(), self._h, dims, arr.ctypes.data_as(L.p), arr.nbytes))

    def _write_borrowed(self, address: int, nbytes: int, shape: Tuple[int, ...]) -> None:
        """clb_tensor_write_borrowed with no release: the device reads `nbytes`
        of dense data of this dtype at `address` when the write runs. The caller
        keeps that memory valid and unchanged until the context's next host sync
        (a read or sync()); for callers that sync before they let go of it, as
        the torch.compile backend does within one call."""
        self._live()
        dims, _ = L.shape(shape, "shape")
        self.ctx._check(L.t_write_borrowed(self.ctx._live(), self._h, dims, address, nbytes, None, None))

    def numpy(self) -> np.ndarray:
        """The live part as a new numpy array (a host sync). The host buffer has the
        actual size, not the bound: a tensor with dynamic dims is read into a
        buffer of at most 64 KiB (or the size last read), then, when its live part
        is larger, once more into one of exactly its size."""
        r, dt = self.rank, self.dtype
        bounds, dyn = self.bounds, self.dynamic
        bound_n = math.prod(bounds)
        guess = bound_n if not any(dyn) else min(bound_n, max(self._last_numel, 65536 // dt.itemsize))
        dims = (ctypes.c_int64 * max(r, 1))()
        got = ctypes.c_size_t()
        buf = np.empty(max(guess, 1), dtype=dt)
        st = L.t_read(self.ctx._live(), self._h, dims, buf.ctypes.data_as(L.p), guess * dt.itemsize,
                      ctypes.byref(got))
        if st == -22:  # CLB_ERR_BUFFER_SMALL: dims and the live byte count are filled in
            buf = np.empty(got.value // dt.itemsize, dtype=dt)
            st = L.t_read(self.ctx._h, self._h, dims, buf.ctypes.data_as(L.p), buf.nbytes, ctypes.byref(got))
        self.ctx._check(st)
        shape = tuple(dims[:r])
        n = math.prod(shape)
        self._last_numel = n
        return buf[:n].reshape(shape)

    def tolist(self) -> Any:
        """The live part as nested Python lists (a host sync), as ndarray.tolist()."""
        return self.numpy().tolist()

    def item(self) -> Union[bool, int, float]:
        """The one element of a tensor whose live part has exactly one, as a
        Python scalar (a host sync); ValueError otherwise, as numpy and PyTorch."""
        a = self.numpy()
        if a.size != 1:
            raise ValueError(f"item(): the tensor has {a.size} elements (shape {a.shape}), not 1")
        return a.reshape(()).item()

    def __float__(self) -> float:
        """float(t) of a one-element tensor (a host sync), as numpy."""
        return float(self._one("float"))

    def __int__(self) -> int:
        """int(t) of a one-element tensor (a host sync), as numpy."""
        return int(self._one("int"))

    def __bool__(self) -> bool:
        """The truth of a one-element tensor (a host sync); ValueError for more
        or fewer elements, as numpy ("ambiguous")."""
        a = self.numpy()
        if a.size != 1:
            raise ValueError(f"the truth value of a tensor with {a.size} elements is ambiguous "
                             "(use ctx.max or read it with numpy())")
        return bool(a.reshape(()).item())

    def _one(self, what: str) -> Union[bool, int, float]:
        a = self.numpy()
        if a.size != 1:
            raise TypeError(f"only a tensor of one element converts to a Python {what}; this one has "
                            f"{a.size} (shape {a.shape})")
        return a.reshape(()).item()

    def __array__(self, dtype: Optional[DTypeLike] = None, copy: Optional[bool] = None) -> np.ndarray:
        if copy is False:
            raise ValueError("a clbound tensor lives on the device: reading it always copies")
        a = self.numpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    # ---- DLPack ----------------------------------------------------------------------

    def __dlpack__(self, *, stream: Any = None, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None) -> Any:
        """A DLPack capsule of this tensor at its actual sizes (a host sync).

        The data lives on an OpenCL device, so what is exported depends on
        `dl_device`:

        - None or (kDLCPU=1, 0): a host copy (``flags`` IS_COPIED); copy=False
          raises BufferError, since that needs a copy.
        - (kDLOpenCL=4, 0): the tensor's own cl_mem, no copy (copy=True first
          copies it on the device); needs max_version >= (1, 0).

        max_version None or below (1, 0) gives a legacy "dltensor" capsule (a host
        copy), otherwise a "dltensor_versioned" one (DLPack 1.x). stream must be
        None: the export waits for the device itself."""
        from . import _dlpack
        if stream is not None and stream != -1:
            raise BufferError(f"clbound exports with stream=None only, not {stream!r}")
        versioned = max_version is not None and int(max_version[0]) >= 1
        device = DL_CPU if dl_device is None else int(dl_device[0])
        if device == DL_OPENCL:
            if int(dl_device[1]) != 0:
                raise BufferError(f"dl_device {tuple(dl_device)}: a clbound tensor is on OpenCL device 0 of its context")
            if not versioned:
                raise BufferError("a kDLOpenCL export needs DLPack 1.x: pass max_version=(1, 0) or later")
            # a tensor sharing host memory (from_dlpack(copy=False)) exports a copy: the
            # export may outlive the tensor and the memory it was given
            shared = getattr(self, "_shared", None) is not None
            if shared and copy is False:
                raise BufferError("copy=False: this tensor is host memory shared by from_dlpack(copy=False), "
                                  "which an export could outlive; copy=None exports a copy on the device")
            src = self.ctx.unary("copy", self) if copy or shared else self
            return _dlpack.export(self.ctx, src, L.to_dlpack_device, versioned=True, guarded=True)
        if device != DL_CPU or (dl_device is not None and int(dl_device[1]) != 0):
            raise BufferError(f"dl_device {tuple(dl_device)}: clbound exports to kDLCPU (1, 0), as a host copy, "
                              "or to kDLOpenCL (4, 0), its own buffer")
        if copy is False:
            raise BufferError("copy=False: the tensor lives on an OpenCL device, so a kDLCPU export is a copy "
                              "(dl_device=(4, 0) exports the cl_mem without one)")
        return _dlpack.export(self.ctx, self, L.to_dlpack if versioned else L.to_dlpack_legacy, versioned)

    def __dlpack_device__(self) -> Tuple[int, int]:
        """(kDLCPU, 0): where __dlpack__ puts the data unless asked otherwise (a host
        copy). The tensor's own memory is on OpenCL device 0, exported without a
        copy by __dlpack__(dl_device=(4, 0), max_version=(1, 0))."""
        return (DL_CPU, 0)

    # ---- methods like numpy's and PyTorch's ----------------------------------------------

    def astype(self, dtype: DTypeLike) -> "Tensor":
        """A copy converted to dtype on the device (numpy's astype; clb_cast)."""
        return self.ctx.cast(self, dtype)

    def to(self, dtype: DTypeLike) -> "Tensor":
        """A copy converted to dtype on the device (torch.Tensor.to(dtype))."""
        return self.ctx.cast(self, dtype)

    def copy(self) -> "Tensor":
        """numpy's a.copy(), torch's t.clone(): a new tensor with the same
        bounds, dynamic dims, actual sizes and values, copied on the device."""
        return self.ctx.unary("copy", self)

    clone = copy

    def reshape(self, *shape: Any) -> "Tensor":
        """A view with another shape (Context.reshape): t.reshape(-1, 3) or
        t.reshape((-1, 3))."""
        spec = shape[0] if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)) else shape
        return self.ctx.reshape(self, spec)

    @property
    def T(self) -> "Tensor":
        """The dims reversed, a copy on the device (numpy's a.T; for 2-D, torch's
        t.T): Context.permute(self)."""
        return self.ctx.permute(self)

    def transpose(self, *dims: Any) -> "Tensor":
        """A copy with its dims reordered (Context.permute / Context.transpose):
        no dims reverses them (numpy's a.transpose()); two ints swap those two
        dims, as torch's t.transpose(0, 1) (numpy's a.transpose(0, 1) of a 2-D
        array would leave it as it is; a.transpose(1, 0) swaps in both); a
        sequence, or more ints, is the new order of all dims, as numpy's
        a.transpose((2, 0, 1)) or a.transpose(2, 0, 1)."""
        if len(dims) == 1 and not isinstance(dims[0], (int, np.integer)):
            return self.ctx.permute(self, tuple(dims[0]))
        if len(dims) == 0:
            return self.ctx.permute(self)
        if len(dims) == 2:
            return self.ctx.transpose(self, dims[0], dims[1])
        return self.ctx.permute(self, dims)

    def permute(self, *dims: Any) -> "Tensor":
        """torch's t.permute(2, 0, 1) or t.permute((2, 0, 1)): Context.permute."""
        if len(dims) == 1 and not isinstance(dims[0], (int, np.integer)):
            dims = tuple(dims[0])
        return self.ctx.permute(self, dims)

    def t(self) -> "Tensor":
        """torch's t.t(): a 2-D tensor transposed (a copy), a 0-d or 1-d one
        itself; ValueError for more dims."""
        if self.rank > 2:
            raise ValueError(f"t() takes a tensor of at most 2 dims, not {self.rank} (use transpose or permute)")
        return self.ctx.transpose(self, 0, 1) if self.rank == 2 else self

    def sum(self, axis: Optional[int] = None, keepdims: Optional[bool] = None, *, dim: Optional[int] = None,
            keepdim: Optional[bool] = None) -> "Tensor":
        """Context.sum: over every element, or over axis (alias dim)."""
        return self.ctx.sum(self, dim, keepdim, axis=axis, keepdims=keepdims)

    def mean(self, axis: Optional[int] = None, keepdims: Optional[bool] = None, *, dim: Optional[int] = None,
             keepdim: Optional[bool] = None) -> "Tensor":
        """Context.mean: over every element, or over axis (alias dim)."""
        return self.ctx.mean(self, dim, keepdim, axis=axis, keepdims=keepdims)

    def max(self, axis: Optional[int] = None, keepdims: Optional[bool] = None, *, dim: Optional[int] = None,
            keepdim: Optional[bool] = None) -> "Tensor":
        """Context.max: over every element, or over axis (alias dim)."""
        return self.ctx.max(self, dim, keepdim, axis=axis, keepdims=keepdims)

    def nonzero(self, *, as_tuple: bool = False) -> Union["Tensor", Tuple["Tensor", ...]]:
        """Context.nonzero (torch.Tensor.nonzero)."""
        return self.ctx.nonzero(self, as_tuple=as_tuple)

    def masked_select(self, mask: "Tensor") -> "Tensor":
        """Context.masked_select (torch.Tensor.masked_select)."""
        return self.ctx.masked_select(self, mask)

    def masked_scatter(self, mask: "Tensor", source: "Tensor") -> "Tensor":
        """Context.masked_scatter (torch.Tensor.masked_scatter)."""
        return self.ctx.masked_scatter(self, mask, source)

    def relu(self) -> "Tensor":
        """Context.relu(self), on the device."""
        return self.ctx.unary("relu", self)

    def exp(self) -> "Tensor":
        """Context.exp(self), on the device."""
        return self.ctx.unary("exp", self)

    def log(self) -> "Tensor":
        """Context.log(self), on the device."""
        return self.ctx.unary("log", self)

    def erf(self) -> "Tensor":
        """Context.erf(self), on the device (torch.erf, scipy.special.erf)."""
        return self.ctx.unary("erf", self)

    def sqrt(self) -> "Tensor":
        """Context.sqrt(self), on the device."""
        return self.ctx.unary("sqrt", self)

    def rsqrt(self) -> "Tensor":
        """Context.rsqrt(self): 1 / sqrt(self), on the device (torch.rsqrt)."""
        return self.ctx.unary("rsqrt", self)

    def log1p(self) -> "Tensor":
        """Context.log1p(self): log(1 + self), exact for small values."""
        return self.ctx.unary("log1p", self)

    def cumsum(self, dim: Optional[int] = None, *, axis: Optional[int] = None) -> "Tensor":
        """Context.cumsum(self, dim): the running sum along dim, on the device."""
        return self.ctx.cumsum(self, dim, axis=axis)

    def expm1(self) -> "Tensor":
        """Context.expm1(self): exp(self) - 1, exact for small values."""
        return self.ctx.unary("expm1", self)

    def floor(self) -> "Tensor":
        """Context.floor(self): rounded toward -inf, on the device."""
        return self.ctx.unary("floor", self)

    def ceil(self) -> "Tensor":
        """Context.ceil(self): rounded toward +inf, on the device."""
        return self.ctx.unary("ceil", self)

    def round(self) -> "Tensor":
        """Context.round(self): to the nearest integer, ties to even (numpy.round, torch.round)."""
        return self.ctx.unary("round", self)

    def trunc(self) -> "Tensor":
        """Context.trunc(self): rounded toward zero, on the device."""
        return self.ctx.unary("trunc", self)

    def sin(self) -> "Tensor":
        """Context.sin(self), radians, on the device."""
        return self.ctx.unary("sin", self)

    def cos(self) -> "Tensor":
        """Context.cos(self), radians, on the device."""
        return self.ctx.unary("cos", self)

    def log2(self) -> "Tensor":
        """Context.log2(self), on the device."""
        return self.ctx.unary("log2", self)

    def log10(self) -> "Tensor":
        """Context.log10(self), on the device."""
        return self.ctx.unary("log10", self)

    def exp2(self) -> "Tensor":
        """Context.exp2(self): 2 ** self, on the device."""
        return self.ctx.unary("exp2", self)

    def tanh(self) -> "Tensor":
        """Context.tanh(self), on the device."""
        return self.ctx.unary("tanh", self)

    def sigmoid(self) -> "Tensor":
        """Context.sigmoid(self), on the device."""
        return self.ctx.unary("sigmoid", self)

    def __getitem__(self, key: Any) -> "Tensor":
        """numpy's indexing, on the device with no host sync: integers, slices
        (``t[2]``, ``t[1:-1]``, ``t[::-2]``, ``t[:, 0]``), ``...`` and None are
        Context.getitem, a copy whose actual sizes the device computes from t's
        (negative values count from the end of the ACTUAL size; a dynamic dim
        stays dynamic, bounded by the longest the slice can be); ``t[...]`` and
        ``t[:]`` are t itself; a bool Tensor selects like numpy's ``x[mask]``
        (masked_select: a 1-D tensor whose size the device computes; the mask
        broadcasts against x). An integer past the actual size raises
        IndexOutOfRangeError (an IndexError): at once for a static dim, at the
        next host sync for a dynamic one."""
        if isinstance(key, Tensor):
            if key.dtype != np.bool_:
                raise IndexError(f"a tensor index must be a bool mask, not {key.dtype} (integer-array "
                                 "indexing is not supported)")
            return self.ctx.masked_select(self, key)
        if L.index_keys(key, self.rank) is None:
            return self
        return self.ctx.getitem(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        """``t[key] = value`` in place on the device, no host sync
        (Context.setitem): numpy's basic indexing with a Tensor of the
        selection's shape or a scalar, or a bool mask with a scalar."""
        self.ctx.setitem(self, key, value)

    def __iter__(self) -> Iterator["Tensor"]:
        """The sub-tensors along dim 0, as numpy: len(t) (one host sync), then
        t[i] for each i, each a copy on the device; TypeError for a 0-d tensor."""
        for i in range(len(self)):
            yield self[i]

    # ---- operators: Context.binary / compare, no host sync ---------------------------------

    def __add__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("add", self, other)

    def __radd__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("add", other, self)

    def __sub__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("sub", self, other)

    def __rsub__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("sub", other, self)

    def __mul__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("mul", self, other)

    def __rmul__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("mul", other, self)

    def __truediv__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("div", self, other)

    def __rtruediv__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("div", other, self)

    def __pow__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("pow", self, other)

    def __rpow__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("pow", other, self)

    def __floordiv__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("floor_divide", self, other)

    def __rfloordiv__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("floor_divide", other, self)

    def __mod__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("remainder", self, other)

    def __rmod__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("remainder", other, self)

    def __and__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("logical_and", self, other)

    def __rand__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("logical_and", other, self)

    def __or__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("logical_or", self, other)

    def __ror__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("logical_or", other, self)

    def __xor__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("logical_xor", self, other)

    def __rxor__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("logical_xor", other, self)

    def __matmul__(self, other: "Tensor") -> "Tensor":
        if not isinstance(other, Tensor):
            return NotImplemented
        return self.ctx.matmul(*self.ctx._promoted(self, other, "matmul"))

    def __rmatmul__(self, other: "Tensor") -> "Tensor":
        if not isinstance(other, Tensor):
            return NotImplemented
        return self.ctx.matmul(*self.ctx._promoted(other, self, "matmul"))

    def __neg__(self) -> "Tensor":
        return self.ctx.unary("neg", self)

    def __pos__(self) -> "Tensor":
        return self.ctx.unary("copy", self)

    def __abs__(self) -> "Tensor":
        return self.ctx.abs(self)

    def __invert__(self) -> "Tensor":
        """~mask: logical not of a bool tensor (on the device)."""
        if self.dtype != np.bool_:
            raise L.error("ERR_DTYPE", f"~ of a {self.dtype} tensor: clbound has no bitwise ops; ~ takes bool masks")
        return self.ctx.compare("eq", self, False)

    def __iadd__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("add", self, other, inplace=True)

    def __isub__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("sub", self, other, inplace=True)

    def __imul__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("mul", self, other, inplace=True)

    def __itruediv__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("div", self, other, inplace=True)

    def __ifloordiv__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("floor_divide", self, other, inplace=True)

    def __ipow__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("pow", self, other, inplace=True)

    def __lt__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("lt", self, other)

    def __le__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("le", self, other)

    def __gt__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("gt", self, other)

    def __ge__(self, other: Operand) -> "Tensor":
        return self.ctx._operator("ge", self, other)

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return self.ctx._operator("eq", self, other)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return self.ctx._operator("ne", self, other)

    __hash__ = object.__hash__  # by identity, as torch.Tensor (== is elementwise)

    # ---- PyTorch's dtype shorthands: last in the class, since their names shadow
    # the builtins for whatever the class body defines after them (a type checker
    # reading `-> int` there would take the method) ----

    def float(self) -> "Tensor":
        """torch's t.float(): a float32 copy on the device (clb_cast)."""
        return self.ctx.cast(self, np.float32)

    def double(self) -> "Tensor":
        """torch's t.double(): a float64 copy on the device (clb_cast)."""
        return self.ctx.cast(self, np.float64)

    def long(self) -> "Tensor":
        """torch's t.long(): an int64 copy on the device (clb_cast)."""
        return self.ctx.cast(self, np.int64)

    def int(self) -> "Tensor":
        """torch's t.int(): an int32 copy on the device (clb_cast)."""
        return self.ctx.cast(self, np.int32)

    def bool(self) -> "Tensor":
        """torch's t.bool(): a bool copy on the device, nonzero as True (clb_cast)."""
        return self.ctx.cast(self, np.bool_)


def convert(array: Any, dtype: np.dtype, casting: str) -> np.ndarray:
    """array as a C-contiguous ndarray of dtype, converted under numpy's rule."""
    if casting not in ("no", "equiv", "safe", "same_kind", "unsafe"):
        raise ValueError(f"casting {casting!r} is not one of no, equiv, safe, same_kind, unsafe")
    src = array if isinstance(array, np.ndarray) else np.asarray(array)
    if src.dtype == dtype:
        return np.asarray(src, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    if (not isinstance(array, np.ndarray) and casting != "unsafe" and src.dtype.kind in "iuO"
            and dtype.kind in "iu" and src.size):
        # Python ints: out of the dtype's range is an OverflowError, as numpy 2 does
        # for a Python int (NEP 50), not a silent wrap
        info = np.iinfo(dtype)
        flat = [int(v) for v in src.reshape(-1).tolist()] if src.dtype.kind == "O" else None
        lo, hi = (min(flat), max(flat)) if flat is not None else (int(src.min()), int(src.max()))
        if lo < info.min or hi > info.max:
            bad = lo if lo < info.min else hi
            raise OverflowError(f"Python integer {bad} out of bounds for {dtype}")
        if flat is not None:
            src = np.asarray(flat, dtype=np.int64).reshape(src.shape)
    out = np.empty(src.shape, dtype)
    np.copyto(out, src, casting=casting)
    return out


def dims_text(values: List[Any]) -> str:
    """A tuple as Python prints it: (3,) for one element."""
    return "(" + ", ".join(str(v) for v in values) + ("," if len(values) == 1 else "") + ")"
