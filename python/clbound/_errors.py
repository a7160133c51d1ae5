"""The binding's exceptions: ClboundError and one subclass per family of
clb_status, each also a subclass of the built-in exception a numpy or PyTorch
user would catch for the same problem (ValueError for sizes and shapes,
TypeError for dtypes, MemoryError for memory, ...). python/README.md has the
table from status to class."""
from __future__ import annotations

from typing import Dict, Optional, Type


class ClboundError(Exception):
    """A clbound call failed. `status` is the clb_status name ("ERR_OOM"), `code`
    its value, `detail` the library's own message (clb_context_errmsg: the op,
    the sizes, the OpenCL error). Every error the binding raises for a status is
    a subclass of this class and of a built-in exception (see STATUS_CLASSES)."""

    def __init__(self, status: str, message: str, code: Optional[int] = None):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.code = code
        self.detail = message


class InvalidArgumentError(ClboundError, ValueError):
    """ERR_INVALID_ARG, ERR_BUFFER_SMALL: an argument the library refuses."""


class FreedError(ClboundError, ValueError):
    """ERR_NULL: a freed tensor, a closed context or graph (like a closed file)."""


class BoundExceededError(ClboundError, ValueError):
    """ERR_OUT_OF_BOUNDS, ERR_BOUND_EXCEEDED: a size over its bound, known on the
    host (a write, set_sizes) or computed on the device (a nonzero count over its
    output's bound, raised at the next host sync)."""


class ShapeError(ClboundError, ValueError):
    """ERR_SHAPE, ERR_RANK, ERR_CONTRADICTION: shapes that do not match or
    broadcast, a rank outside 0..8, dims that cannot be equal."""


class DeviceCheckError(ClboundError, ValueError, RuntimeError):
    """ERR_DEVICE_CHECK: a check only the device could make failed (two actual
    sizes that must be equal, a reshape that does not divide, an assert_async
    condition); raised at the next host sync. Also a RuntimeError, the class
    PyTorch raises for the same failures (a size mismatch, a failed
    torch._assert_async), so code written for PyTorch catches it."""


class ShortSourceError(ClboundError, ValueError):
    """ERR_SHORT_SOURCE: masked_scatter's source has fewer elements than the mask
    has true bits (PyTorch raises for the same); raised at the next host sync."""


class EmptyReductionError(ClboundError, ValueError):
    """ERR_EMPTY_REDUCE: max over an empty extent (numpy raises ValueError)."""


class GuardError(ClboundError, ValueError):
    """ERR_GUARD: a graph's input is outside what its plan allows."""


class ParseError(ClboundError, ValueError):
    """ERR_PARSE: text the library cannot parse."""


class IndexOutOfRangeError(ClboundError, IndexError):
    """ERR_INDEX: an integer index outside its dim (numpy and PyTorch raise
    IndexError): at once for a static dim or past a dynamic dim's bound, at the
    next host sync for one past a dynamic dim's actual size; also too many
    indices."""


class DTypeError(ClboundError, TypeError):
    """ERR_DTYPE: a dtype clbound lacks, or one the op does not take."""


class OutOfMemoryError(ClboundError, MemoryError):
    """ERR_OOM (device memory, or the context's device_memory_limit) and
    ERR_HOST_OOM."""


class DivisionByZeroError(ClboundError, ZeroDivisionError):
    """ERR_DIV_ZERO: an integer remainder or floor division by zero; raised at the next host sync."""


class UnsupportedError(ClboundError, NotImplementedError):
    """ERR_UNSUPPORTED: the device lacks what the op needs (f64 without
    cl_khr_fp64)."""


class DeviceError(ClboundError, RuntimeError):
    """ERR_CL, ERR_BUILD, ERR_NO_DEVICE, ERR_INTERNAL: the OpenCL driver, a kernel
    build, no device, or a bug in clbound."""


class ClboundIOError(ClboundError, OSError):
    """ERR_IO: a file (the program cache, a metrics file) could not be read or
    written."""


#: clb_status name -> the class raised for it.
STATUS_CLASSES: Dict[str, Type[ClboundError]] = {
    "ERR_INVALID_ARG": InvalidArgumentError,
    "ERR_BUFFER_SMALL": InvalidArgumentError,
    "ERR_NULL": FreedError,
    "ERR_OUT_OF_BOUNDS": BoundExceededError,
    "ERR_BOUND_EXCEEDED": BoundExceededError,
    "ERR_SHAPE": ShapeError,
    "ERR_RANK": ShapeError,
    "ERR_CONTRADICTION": ShapeError,
    "ERR_DEVICE_CHECK": DeviceCheckError,
    "ERR_SHORT_SOURCE": ShortSourceError,
    "ERR_EMPTY_REDUCE": EmptyReductionError,
    "ERR_GUARD": GuardError,
    "ERR_PARSE": ParseError,
    "ERR_DTYPE": DTypeError,
    "ERR_OOM": OutOfMemoryError,
    "ERR_HOST_OOM": OutOfMemoryError,
    "ERR_DIV_ZERO": DivisionByZeroError,
    "ERR_UNSUPPORTED": UnsupportedError,
    "ERR_CL": DeviceError,
    "ERR_BUILD": DeviceError,
    "ERR_NO_DEVICE": DeviceError,
    "ERR_INTERNAL": DeviceError,
    "ERR_IO": ClboundIOError,
    "ERR_INDEX": IndexOutOfRangeError,
}

#: clb_status values of the names (clbound/status.h), for errors the binding
#: raises itself with a status.
STATUS_CODES: Dict[str, int] = {
    "ERR_INVALID_ARG": -1, "ERR_NULL": -2, "ERR_OUT_OF_BOUNDS": -3, "ERR_SHAPE": -4, "ERR_DTYPE": -5,
    "ERR_RANK": -6, "ERR_OOM": -7, "ERR_HOST_OOM": -8, "ERR_CL": -9, "ERR_BUILD": -10,
    "ERR_NO_DEVICE": -11, "ERR_BOUND_EXCEEDED": -12, "ERR_SHORT_SOURCE": -13, "ERR_DEVICE_CHECK": -14,
    "ERR_UNSUPPORTED": -15, "ERR_PARSE": -16, "ERR_CONTRADICTION": -17, "ERR_GUARD": -18, "ERR_IO": -19,
    "ERR_EMPTY_REDUCE": -20, "ERR_DIV_ZERO": -21, "ERR_BUFFER_SMALL": -22, "ERR_INTERNAL": -23,
    "ERR_INDEX": -24,
}


def error(status: str, message: str, code: Optional[int] = None) -> ClboundError:
    """The exception for a status: its class from STATUS_CLASSES (ClboundError
    for a status this table lacks)."""
    cls = STATUS_CLASSES.get(status, ClboundError)
    return cls(status, message, STATUS_CODES.get(status) if code is None else code)
