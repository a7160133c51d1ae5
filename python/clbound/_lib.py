"""The C library through ctypes: loading it, the signatures of its functions, its
errors, and the checks every argument passes before it reaches C.

ctypes converts a Python int to a C integer by truncating it silently (2**64 + 4
becomes 4), so every integer goes through `index()` with the range of its C type,
and every name of an enum through `choice()`; what C would reject for its shape
(a rank over 8, a negative bound, a list of the wrong length) is refused here
too, with TypeError, ValueError or OverflowError naming the argument.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import math
import operator
import os
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from ._errors import ClboundError, DTypeError, error  # noqa: F401  (re-exported)

I64 = (-(2**63), 2**63 - 1)
INT = (-(2**31), 2**31 - 1)
U64 = (0, 2**64 - 1)
MAX_RANK = 8


def library_path() -> str:
    """Where libclbound is loaded from: the library installed inside this package
    (``pip install``), else CLBOUND_LIBRARY (a path), else a build tree next to the
    sources (build/lib), else the system's loader."""
    here = os.path.dirname(os.path.abspath(__file__))
    from . import __path__ as package_path  # the installed half of `pip install -e` too

    for folder in [here] + [os.path.abspath(p) for p in package_path]:
        packaged = os.path.join(folder, "libclbound.so")
        if os.path.exists(packaged):
            return packaged
    env = os.environ.get("CLBOUND_LIBRARY")
    if env:
        return env
    build = os.path.normpath(os.path.join(here, "..", "..", "build", "lib", "libclbound.so"))
    if os.path.exists(build):
        return build
    found = ctypes.util.find_library("clbound")
    if not found:
        raise OSError("libclbound not found: install the package (pip install ./python), "
                      "or set CLBOUND_LIBRARY to the library's path")
    return found


lib = ctypes.CDLL(library_path())
p = ctypes.c_void_p
pp = ctypes.POINTER(ctypes.c_void_p)
i64p = ctypes.POINTER(ctypes.c_int64)
u8p = ctypes.POINTER(ctypes.c_uint8)
u64p = ctypes.POINTER(ctypes.c_uint64)
sizep = ctypes.POINTER(ctypes.c_size_t)
c_int = ctypes.c_int
c_str = ctypes.c_char_p


def fn(name: str, restype: Any, *argtypes: Any) -> Any:
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


# ---- arguments ----------------------------------------------------------------

def index(value: Any, what: str, lo: Optional[int] = None, hi: Optional[int] = None,
          ctype: Tuple[int, int] = I64) -> int:
    """value as a Python int: TypeError for what is not an integer (floats
    included), OverflowError outside the range of its C type `ctype` (which ctypes
    would silently wrap), ValueError outside [lo, hi] (what the library refuses)."""
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, not {type(value).__name__}") from None
    if v < ctype[0] or v > ctype[1]:
        raise OverflowError(f"{what} = {v} is outside [{ctype[0]}, {ctype[1]}], the range of its C type")
    if lo is not None and v < lo:
        raise ValueError(f"{what} = {v} is negative" if lo == 0 else f"{what} = {v} is below {lo}")
    if hi is not None and v > hi:
        raise ValueError(f"{what} = {v} is above {hi}")
    return v


def real(value: Any, what: str, finite: bool = False) -> float:
    """value as a C double; finite=True refuses NaN and infinities."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be a real number, not {type(value).__name__}") from None
    if finite and not math.isfinite(v):
        raise ValueError(f"{what} must be finite, not {v}")
    return v


def cstr(value: Any, what: str) -> bytes:
    """A str or path as a C string: ValueError for an embedded NUL, which C would
    read as the end of the string."""
    b = os.fsencode(value)
    if b"\0" in b:
        raise ValueError(f"{what} contains a NUL character")
    return b


def choice(table: Mapping[str, int], value: Any, what: str) -> int:
    """The enum value of a name: ValueError listing the names for any other."""
    if isinstance(value, str) and value in table:
        return table[value]
    raise ValueError(f"{what} {value!r} is not one of {', '.join(table)}")


def shape(values: Any, what: str, rank: Optional[int] = None, lo: int = 0) -> Any:
    """(a C int64 array, its length) of dims: a sequence of at most 8 integers,
    each >= lo, of length `rank` when given."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        if rank is None and isinstance(values, (int, np.integer)):
            values = (values,)  # like numpy: a bare int is a 1-D shape
        else:
            raise TypeError(f"{what} must be a sequence of integers, not {type(values).__name__}")
    vals = [index(v, f"{what}[{i}]", lo=lo) for i, v in enumerate(values)]
    if rank is not None and len(vals) != rank:
        raise ValueError(f"{what} has {len(vals)} dims; the tensor has rank {rank}")
    if len(vals) > MAX_RANK:
        raise ValueError(f"{what} has {len(vals)} dims; clbound tensors have at most {MAX_RANK}")
    return (ctypes.c_int64 * max(len(vals), 1))(*vals), len(vals)


def flags(values: Any, rank: int, what: str = "dynamic") -> Any:
    """A C uint8 array of per-dim flags, or None for all false."""
    if values is None:
        return None
    if isinstance(values, (bool, np.bool_)):
        values = [bool(values)] * rank
    vals = list(values)
    if len(vals) != rank:
        raise ValueError(f"{what} has {len(vals)} flags; the tensor has rank {rank}")
    return (ctypes.c_uint8 * max(rank, 1))(*[1 if v else 0 for v in vals])


class IndexKey(ctypes.Structure):
    """clb_index_key: one entry of an index expression (clb_basic_index)."""
    _fields_ = [("kind", ctypes.c_int32), ("start", ctypes.c_int64), ("stop", ctypes.c_int64),
                ("step", ctypes.c_int64)]


KEY_SLICE, KEY_INDEX, KEY_NEWAXIS = 0, 1, 2


def _is_integer(k: Any) -> bool:
    if isinstance(k, (bool, np.bool_)):
        return False
    try:
        operator.index(k)
        return True
    except TypeError:
        return False


def _clamped(v: Any, what: str) -> int:
    """A slice's start, stop or step as an int64: Python clamps a slice's ends,
    so any value past int64 acts as the int64 limit on its side."""
    try:
        i = operator.index(v)
    except TypeError:
        raise TypeError(f"slice indices must be integers or None, not {type(v).__name__} ({what})") from None
    return max(I64[0], min(I64[1], i))


def slice_key(k: slice) -> Tuple[int, int, int, int]:
    """A Python slice as a clb_index_key's fields (KEY_SLICE, start, stop, step):
    an omitted start or stop is the int64 limit that clamps to it (ops.h). A step
    of 0 is passed on: the library refuses it (InvalidArgumentError, a
    ValueError, as Python's)."""
    step = 1 if k.step is None else _clamped(k.step, "step")
    lo, hi = (I64[0], I64[1]) if step >= 0 else (I64[1], I64[0])
    start = lo if k.start is None else _clamped(k.start, "start")
    stop = hi if k.stop is None else _clamped(k.stop, "stop")
    return (KEY_SLICE, start, stop, step)


def index_keys(key: Any, rank: int) -> Optional[Any]:
    """numpy's basic index `key` (integers, slices, ``...``, None, or a tuple of
    them) over a tensor of rank `rank` as (a C clb_index_key array, its length);
    None when the key takes the whole tensor as it is (``...``, ``:``, or only
    those). IndexError for anything else, as numpy: too many indices, two
    ellipses, a bool, a float, a list or array, a Tensor inside a tuple."""
    keys = key if isinstance(key, tuple) else (key,)
    taken, ellipses = 0, 0
    for k in keys:
        if k is Ellipsis:
            ellipses += 1
        elif isinstance(k, slice) or _is_integer(k):
            taken += 1
        elif k is not None:
            raise IndexError(f"clbound tensors take integers, slices (`:`), ellipsis (`...`), None and a bool "
                             f"mask Tensor as indices, not {type(k).__name__} {k!r}")
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if taken > rank:
        raise IndexError(f"too many indices for tensor: tensor is {rank}-dimensional, but {taken} were indexed")
    if all(k is Ellipsis or (isinstance(k, slice) and k == slice(None)) for k in keys):
        return None
    out = []
    for k in keys:
        if k is Ellipsis:
            out += [(KEY_SLICE, I64[0], I64[1], 1)] * (rank - taken)
        elif k is None:
            out.append((KEY_NEWAXIS, 0, 0, 0))
        elif isinstance(k, slice):
            out.append(slice_key(k))
        else:
            i = operator.index(k)
            if not I64[0] <= i <= I64[1]:
                raise IndexError(f"index {i} is out of bounds: it does not fit in int64")
            out.append((KEY_INDEX, i, 0, 1))
    return (IndexKey * max(len(out), 1))(*out), len(out)


# ---- dtypes and enums -------------------------------------------------------------

DTYPES: Dict[np.dtype, int] = {
    np.dtype(np.float32): 0,
    np.dtype(np.float64): 1,
    np.dtype(np.int32): 2,
    np.dtype(np.int64): 3,
    np.dtype(np.uint8): 4,
    np.dtype(np.bool_): 5,
}
NUMPY = {v: k for k, v in DTYPES.items()}
UNARY = {"neg": 0, "relu": 1, "sigmoid": 2, "tanh": 3, "exp": 4, "log": 5, "copy": 6, "erf": 7, "abs": 8, "sqrt": 9,
         "rsqrt": 10, "log1p": 11, "expm1": 12, "floor": 13, "ceil": 14, "round": 15, "trunc": 16, "sin": 17,
         "cos": 18, "log2": 19, "log10": 20, "exp2": 21}
BINARY = {"add": 0, "sub": 1, "mul": 2, "div": 3, "remainder": 4, "maximum": 5, "minimum": 6, "pow": 7,
          "floor_divide": 8}
COMPARE = {"eq": 0, "ne": 1, "lt": 2, "le": 3, "gt": 4, "ge": 5}
REDUCE = {"sum": 0, "mean": 1, "max": 2}
LOSS = {"mse": 0, "bce": 1, "bce_with_logits": 2, "cross_entropy": 3}
GEMM = {"auto": 0, "clblast_bound": 1, "sync_exact": 2, "device": 3, "host_blas": 4}
KERNEL_STYLES = {"auto": 0, "cpu": 1, "gpu": 2}
LOG = {"recompiles": 1, "syncs": 2, "builds": 4, "cache": 8, "gemm": 16}


TORCH_DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64,
                "uint8": np.uint8, "bool": np.bool_}


def as_dtype(dtype: Any, what: str = "dtype") -> np.dtype:
    """dtype as a numpy dtype: anything numpy.dtype takes, or a torch dtype
    (torch.float32, ...; recognised without importing torch). DTypeError (a
    TypeError) for anything else."""
    if type(dtype).__module__ == "torch" and type(dtype).__name__ == "dtype":
        name = str(dtype).split(".", 1)[-1]
        if name in TORCH_DTYPES:
            return np.dtype(TORCH_DTYPES[name])
        raise error("ERR_DTYPE", f"clbound has no dtype for {dtype} ({what}); it has "
                    f"{', '.join(str(d) for d in DTYPES)}")
    try:
        return np.dtype(dtype)
    except TypeError:
        raise error("ERR_DTYPE", f"{what} {dtype!r} is not a numpy or torch dtype") from None


def dtype_code(dtype: Any, what: str = "dtype") -> int:
    """The clb_dtype of a numpy or torch dtype; DTypeError (a TypeError) when
    clbound lacks it."""
    dt = as_dtype(dtype, what)
    code = DTYPES.get(dt)
    if code is None:
        raise error("ERR_DTYPE", f"clbound has no dtype for {dt} ({what}); it has {', '.join(str(d) for d in DTYPES)}")
    return code


# ---- structs ----------------------------------------------------------------------

class ContextOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("platform", c_str), ("device", c_str),
                ("kernel_style", c_int), ("device_memory_limit", ctypes.c_uint64), ("cache_dir", c_str)]


DEVICE_STRING_MAX = 256  # CLB_DEVICE_STRING_MAX (clbound/runtime.h)


class DeviceInfoStruct(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("platform_index", c_int), ("device_index", c_int),
                ("platform_name", ctypes.c_char * DEVICE_STRING_MAX), ("name", ctypes.c_char * DEVICE_STRING_MAX),
                ("vendor", ctypes.c_char * DEVICE_STRING_MAX), ("driver_version", ctypes.c_char * DEVICE_STRING_MAX),
                ("device_version", ctypes.c_char * DEVICE_STRING_MAX),
                ("opencl_c_version", ctypes.c_char * DEVICE_STRING_MAX),
                ("is_cpu", c_int), ("is_gpu", c_int), ("compute_units", ctypes.c_uint32),
                ("max_work_group_size", ctypes.c_size_t), ("local_mem_bytes", ctypes.c_uint64),
                ("local_mem_emulated", c_int), ("global_mem_bytes", ctypes.c_uint64),
                ("max_alloc_bytes", ctypes.c_uint64), ("has_fp64", c_int), ("has_int64_atomics", c_int),
                ("mem_base_addr_align_bits", ctypes.c_uint32)]


class CountersStruct(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t)] + [(n, ctypes.c_uint64) for n in (
        "program_builds", "program_cache_hits_memory", "program_cache_hits_disk", "kernel_launches",
        "host_syncs", "bytes_to_device", "bytes_to_host", "plans_compiled", "recompiles",
        "device_bytes_live", "device_bytes_held", "peak_device_bytes", "buffers_fresh", "buffers_reused",
        "arena_bytes", "live_lower_bound_bytes", "pool_peak_bytes", "arena_allocations", "arena_max_bytes",
        "kernels_compiled", "build_ms", "store_ms", "plan_programs", "kernels_fused", "steps_replayed",
        "first_launches", "first_launch_ms", "steps_recorded", "host_writes", "context_new_ms",
        "context_free_ms", "store_local", "store_handoffs", "programs_upgraded", "host_sync_blocks")]


LogFn = ctypes.CFUNCTYPE(None, p, c_str, c_str)

# ---- functions ----------------------------------------------------------------------

version = fn("clb_version", c_str)
status_name = fn("clb_status_name", c_str, c_int)
last_errmsg = fn("clb_last_errmsg", c_str)
device_count = fn("clb_device_count", c_int, ctypes.POINTER(c_int))
device_info_get = fn("clb_device_info_get", c_int, c_int, ctypes.POINTER(DeviceInfoStruct))
ctx_errmsg = fn("clb_context_errmsg", c_str, p)
ctx_new = fn("clb_context_new", c_int, ctypes.POINTER(ContextOptions), pp)
ctx_wrap = fn("clb_context_wrap", c_int, p, p, ctypes.POINTER(ContextOptions), pp)
ctx_free = fn("clb_context_free", None, p)
ctx_sync = fn("clb_context_sync", c_int, p)
ctx_cl_context = fn("clb_context_cl_context", p, p)
ctx_cl_queue = fn("clb_context_cl_queue", p, p)
ctx_cl_device = fn("clb_context_cl_device", p, p)
ctx_kernel_style = fn("clb_context_kernel_style", c_int, p)
ctx_set_log = fn("clb_context_set_log", None, p, ctypes.c_uint, LogFn, p)
ctx_metrics = fn("clb_context_metrics_json", c_int, p, c_str, ctypes.c_size_t, sizep)
ctx_counters = fn("clb_context_counters", c_int, p, ctypes.POINTER(CountersStruct))
ctx_cache_dir = fn("clb_context_cache_dir", c_str, p)
cache_info = fn("clb_cache_info", c_int, c_str, u64p, u64p)
cache_clear = fn("clb_cache_clear", c_int, c_str)
cache_pending = fn("clb_cache_pending", ctypes.c_uint64)
cache_wait = fn("clb_cache_wait", c_int)
cache_default_dir = fn("clb_cache_default_dir", c_int, c_str, ctypes.c_size_t)
host_blas_describe = fn("clb_host_blas_describe", c_int, c_str, ctypes.c_size_t, sizep)
t_new = fn("clb_tensor_new", c_int, p, c_int, c_int, i64p, u8p, pp)
t_free = fn("clb_tensor_free", None, p)
t_dtype = fn("clb_tensor_dtype", c_int, p)
t_rank = fn("clb_tensor_rank", c_int, p)
t_bounds = fn("clb_tensor_bounds", None, p, i64p)
t_is_dyn = fn("clb_tensor_is_dynamic", c_int, p, c_int)
t_bound_numel = fn("clb_tensor_bound_numel", ctypes.c_int64, p)
t_data_mem = fn("clb_tensor_data_mem", p, p)
t_data_offset = fn("clb_tensor_data_offset", ctypes.c_size_t, p)
t_shape_mem = fn("clb_tensor_shape_mem", p, p)
t_write = fn("clb_tensor_write", c_int, p, p, i64p, p, ctypes.c_size_t)
t_write_borrowed = fn("clb_tensor_write_borrowed", c_int, p, p, i64p, p, ctypes.c_size_t, p, p)
t_new_write_borrowed = fn("clb_tensor_new_write_borrowed", c_int, p, c_int, c_int, i64p, u8p, i64p, p, ctypes.c_size_t,
                          p, p, pp)
t_set_sizes = fn("clb_tensor_set_sizes", c_int, p, p, i64p)
t_read = fn("clb_tensor_read", c_int, p, p, i64p, p, ctypes.c_size_t, sizep)
t_from_host = fn("clb_tensor_from_host", c_int, p, c_int, c_int, i64p, p, ctypes.c_size_t, pp)
ts_read = fn("clb_tensors_read", c_int, p, c_int, ctypes.POINTER(p), i64p, ctypes.POINTER(p), sizep, sizep)
t_sizes = fn("clb_tensor_sizes", c_int, p, p, i64p)
binary = fn("clb_binary", c_int, p, c_int, p, p, pp)
unary = fn("clb_unary", c_int, p, c_int, p, pp)
compare = fn("clb_compare", c_int, p, c_int, p, p, pp)
cast = fn("clb_cast", c_int, p, p, c_int, pp)
fill = fn("clb_fill", c_int, p, p, ctypes.c_double)
assert_ = fn("clb_assert", c_int, p, p, ctypes.c_char_p)
rand_uniform = fn("clb_rand_uniform", c_int, p, p, c_int, ctypes.c_uint64, pp)
gather = fn("clb_gather", c_int, p, p, c_int, p, pp)
cat = fn("clb_cat", c_int, p, p, p, c_int, pp)
reduce_all = fn("clb_reduce_all", c_int, p, c_int, p, pp)
reduce_dim = fn("clb_reduce_dim", c_int, p, c_int, p, c_int, c_int, pp)
cumsum = fn("clb_cumsum", c_int, p, p, c_int, pp)
reshape = fn("clb_reshape", c_int, p, p, c_int, i64p, pp)
reshape_bounded = fn("clb_reshape_bounded", c_int, p, p, c_int, i64p, u8p, i64p, pp)
basic_index = fn("clb_basic_index", c_int, p, p, c_int, ctypes.POINTER(IndexKey), pp)
basic_index_put = fn("clb_basic_index_put", c_int, p, p, c_int, ctypes.POINTER(IndexKey), p)
slice_ = fn("clb_slice", c_int, p, p, c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, pp)
index_ = fn("clb_index", c_int, p, p, c_int, ctypes.c_int64, pp)
permute = fn("clb_permute", c_int, p, p, c_int, ctypes.POINTER(c_int), pp)
transpose = fn("clb_transpose", c_int, p, p, c_int, c_int, pp)
where = fn("clb_where", c_int, p, p, p, p, pp)
nonzero = fn("clb_nonzero", c_int, p, p, pp)
nonzero_static = fn("clb_nonzero_static", c_int, p, p, ctypes.c_int64, ctypes.c_int64, pp, pp)
masked_select = fn("clb_masked_select", c_int, p, p, p, pp)
masked_scatter = fn("clb_masked_scatter", c_int, p, p, p, p, pp)
matmul = fn("clb_matmul", c_int, p, p, c_int, p, c_int, pp)
bmm = fn("clb_bmm", c_int, p, p, c_int, p, c_int, pp)
linear = fn("clb_linear", c_int, p, p, p, p, pp)
linear_bw = fn("clb_linear_backward", c_int, p, p, p, p, pp, pp, pp)
linear_act = fn("clb_linear_act", c_int, p, p, p, p, c_int, pp)
linear_bw_relu = fn("clb_linear_backward_relu", c_int, p, p, p, p, pp, pp, pp)
set_gemm = fn("clb_context_set_gemm_strategy", c_int, p, c_int)
softmax = fn("clb_softmax", c_int, p, p, c_int, pp)
softmax_bw = fn("clb_softmax_backward", c_int, p, p, p, c_int, pp)
unary_bw = fn("clb_unary_backward", c_int, p, c_int, p, p, p, pp)
sgd_step = fn("clb_sgd_step", c_int, p, p, p, p, ctypes.c_double, ctypes.c_double)
loss = fn("clb_loss", c_int, p, c_int, p, p, pp, pp)
op_supported = fn("clb_op_supported", c_int, p, c_str, c_int)
op_names = fn("clb_op_names", ctypes.POINTER(c_str), sizep)
to_dlpack_legacy = fn("clb_tensor_to_dlpack_legacy", c_int, p, p, pp)
from_dlpack_legacy = fn("clb_tensor_from_dlpack_legacy", c_int, p, p, i64p, u8p, pp)
from_dlpack_borrowed = fn("clb_tensor_from_dlpack_borrowed", c_int, p, p, i64p, u8p, pp)
ts_to_dlpack_host = fn("clb_tensors_to_dlpack_host", c_int, p, c_int, pp, pp)
ts_to_dlpack_host_unsynced = fn("clb_tensors_to_dlpack_host_unsynced", c_int, p, c_int, pp, pp)
to_dlpack = fn("clb_tensor_to_dlpack", c_int, p, p, pp)
to_dlpack_device = fn("clb_tensor_to_dlpack_device", c_int, p, p, pp)
from_dlpack = fn("clb_tensor_from_dlpack", c_int, p, p, i64p, u8p, pp)


def raise_status(st: int, message: str) -> None:
    """Raises the exception class of status st (STATUS_CLASSES) with message."""
    raise error(status_name(st).decode(), message, st)


def check_global(st: int) -> None:
    """Raises for a failed call that has no context (its message is thread-local)."""
    if st != 0:
        raise_status(st, last_errmsg().decode())
