"""DLPack capsules for the binding: Tensor.__dlpack__ (DLPack 1.x versioned
capsules, or legacy ones for old consumers) and Context.from_dlpack(obj) (any
object with __dlpack__, numpy arrays and torch tensors included, copied into a
bounded tensor).

Capsules follow the Python DLPack protocol: a versioned capsule is named
"dltensor_versioned" and holds a DLManagedTensorVersioned*, a legacy one is named
"dltensor" and holds a DLManagedTensor*; a consumer renames it "used_..." and
becomes responsible for calling the deleter. A capsule destroyed while still
unused calls the deleter itself.
"""
from __future__ import annotations

import ctypes
import itertools
import struct
from typing import Any, Callable, Dict, Tuple

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_SetContext.restype = ctypes.c_int
_api.PyCapsule_SetContext.argtypes = [ctypes.py_object, ctypes.c_void_p]
# the same functions on a capsule known only by its address (in the destructor)
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))
_raw_get_context = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(("PyCapsule_GetContext", _api))

LEGACY = b"dltensor"
VERSIONED = b"dltensor_versioned"
_USED = {LEGACY: b"used_dltensor", VERSIONED: b"used_dltensor_versioned"}
DL_CPU, DL_CUDA_HOST = 1, 3
#: The DLPack version clbound speaks (its pinned header, clbound/third_party/dlpack.h).
MAX_VERSION = (1, 1)
FLAG_READ_ONLY, FLAG_IS_COPIED = 1, 2


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]
_DeleterV = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensorVersioned))
_DLManagedTensorVersioned._fields_ = [("version", _DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                      ("deleter", _DeleterV), ("flags", ctypes.c_uint64),
                                      ("dl_tensor", _DLTensor)]


# Field offsets in a DLManagedTensorVersioned, from the structures above: the
# hot paths (HostView, release) read the fields at them, with no ctypes object
# per structure
_V_TENSOR = _DLManagedTensorVersioned.dl_tensor.offset
_V_DATA = _V_TENSOR + _DLTensor.data.offset
_V_NDIM = _V_TENSOR + _DLTensor.ndim.offset
_V_SHAPE = _V_TENSOR + _DLTensor.shape.offset
_V_BYTE_OFFSET = _V_TENSOR + _DLTensor.byte_offset.offset
_V_DELETER = _DLManagedTensorVersioned.deleter.offset
_V_SIZE = ctypes.sizeof(_DLManagedTensorVersioned)
_RawDeleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_raw_deleters: Dict[int, Any] = {}  # a deleter's address -> a callable for it


def _versioned_deleter(ptr: int) -> Any:
    """The deleter of the DLManagedTensorVersioned at ptr as a callable, or None when NULL."""
    addr = ctypes.c_void_p.from_address(ptr + _V_DELETER).value
    if not addr:
        return None
    fn = _raw_deleters.get(addr)
    if fn is None:
        fn = _raw_deleters[addr] = _RawDeleter(addr)
    return fn


def _versioned_fields(ptr: int) -> Tuple[int, Tuple[int, ...], int]:
    """(data, shape, byte_offset) of the DLManagedTensorVersioned at ptr."""
    raw = ctypes.string_at(ptr, _V_SIZE)
    data, = struct.unpack_from("P", raw, _V_DATA)
    ndim, = struct.unpack_from("i", raw, _V_NDIM)
    shape_at, = struct.unpack_from("P", raw, _V_SHAPE)
    byte_offset, = struct.unpack_from("Q", raw, _V_BYTE_OFFSET)
    dims = struct.unpack(f"{ndim}q", ctypes.string_at(shape_at, 8 * ndim)) if ndim > 0 else ()
    return data or 0, dims, byte_offset


# Guarded exports (the kDLOpenCL ones) whose deleter has not run yet: struct
# address -> (serial, the library's deleter), and serial -> struct address. The
# serial is the capsule's context. A consumer may call the deleter of a capsule it
# then refuses, leaving the capsule's name unchanged: torch.from_dlpack does so
# for a kDLOpenCL tensor (torch 2.15), and the capsule's destructor calling the
# deleter again would free the struct twice. The struct's deleter is therefore
# a trampoline that runs the library's deleter once, whoever calls it first.
_guarded: Dict[int, Tuple[int, Any]] = {}
_serial_of: Dict[int, int] = {}
_serials = itertools.count(1)


def _run_guarded(addr: int) -> None:
    entry = _guarded.pop(addr, None)
    if entry is None:
        return  # already deleted
    serial, deleter = entry
    _serial_of.pop(serial, None)
    deleter(ctypes.cast(addr, ctypes.POINTER(_DLManagedTensorVersioned)))


@_DeleterV
def _guarded_deleter(m: Any) -> None:
    _run_guarded(ctypes.cast(m, ctypes.c_void_p).value or 0)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule_addr: int) -> None:
    # Still named "dltensor" / "dltensor_versioned": nobody consumed it, so its
    # deleter is ours to call (a guarded one: unless a consumer already did).
    for name in (LEGACY, VERSIONED):
        if _api.PyCapsule_IsValid(capsule_addr, name):
            serial = _raw_get_context(capsule_addr)
            if serial:
                addr = _serial_of.get(serial)
                if addr is not None:
                    _run_guarded(addr)
                return
            ptr = _raw_get_pointer(capsule_addr, name)
            if ptr:
                release(ptr, name == VERSIONED)


def export(ctx: Any, t: Any, cfn: Callable[..., int], versioned: bool, guarded: bool = False) -> Any:
    """A capsule owning the DLPack struct cfn(ctx, t) makes: clb_tensor_to_dlpack,
    its legacy or its device form. guarded (a versioned export only): its deleter
    runs once even where a consumer calls it and leaves the capsule unconsumed."""
    ptr = ctypes.c_void_p()
    ctx._check(cfn(ctx._live(), t._live(), ctypes.byref(ptr)))
    capsule = _api.PyCapsule_New(ptr, VERSIONED if versioned else LEGACY,
                                 ctypes.cast(_capsule_destructor, ctypes.c_void_p))
    if guarded:
        m = ctypes.cast(ptr, ctypes.POINTER(_DLManagedTensorVersioned)).contents
        serial = next(_serials)
        # a function object of its own (a field's object would read the field again)
        _guarded[ptr.value] = (serial, _DeleterV(ctypes.cast(m.deleter, ctypes.c_void_p).value))
        _serial_of[serial] = ptr.value
        m.deleter = _guarded_deleter
        _api.PyCapsule_SetContext(capsule, serial)
    return capsule


def consume(obj: Any) -> Tuple[int, bool]:
    """(the DLManagedTensor(Versioned)* of obj's DLPack capsule, whether it is
    versioned), with the capsule marked used: the caller must hand the pointer to
    a consumer that calls its deleter. Asks for DLPack 1.x (max_version) and falls
    back to a legacy capsule for producers without it."""
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"{type(obj).__name__} does not speak DLPack (no __dlpack__)")
    if getattr(obj, "requires_grad", False) is True and callable(getattr(obj, "detach", None)):
        # torch refuses to export a tensor that requires grad (a consumer could
        # write to it behind autograd's back); clbound only reads it, into a copy
        obj = obj.detach()
    if hasattr(obj, "__dlpack_device__"):
        dev = obj.__dlpack_device__()
        if int(dev[0]) not in (DL_CPU, DL_CUDA_HOST):
            raise BufferError(f"clbound imports host memory; {type(obj).__name__} is on DLPack device {tuple(dev)}")
    try:
        capsule = obj.__dlpack__(max_version=MAX_VERSION)
    except TypeError:  # a producer before DLPack 1.0 (numpy < 2.1, torch < 2.3)
        capsule = obj.__dlpack__()
    name = _api.PyCapsule_GetName(capsule)
    if name not in _USED:
        raise BufferError(f"{type(obj).__name__}.__dlpack__ gave a capsule named {name!r}, not a DLPack tensor")
    ptr = _api.PyCapsule_GetPointer(capsule, name)
    _api.PyCapsule_SetName(capsule, _USED[name])
    return ptr, name == VERSIONED


def ndim(ptr: int, versioned: bool) -> int:
    """The rank of the DLManagedTensor(Versioned) at ptr."""
    cls = _DLManagedTensorVersioned if versioned else _DLManagedTensor
    return int(ctypes.cast(ptr, ctypes.POINTER(cls)).contents.dl_tensor.ndim)


def shape(ptr: int, versioned: bool) -> Tuple[int, ...]:
    """The shape of the DLManagedTensor(Versioned) at ptr."""
    if versioned:
        return _versioned_fields(ptr)[1]
    t = ctypes.cast(ptr, ctypes.POINTER(_DLManagedTensor)).contents.dl_tensor
    dims = ctypes.cast(t.shape, ctypes.POINTER(ctypes.c_int64))
    return tuple(int(dims[i]) for i in range(t.ndim))


def release(ptr: int, versioned: bool) -> None:
    """Calls the deleter of a consumed DLManagedTensor(Versioned) that will not be used."""
    if versioned:
        fn = _versioned_deleter(ptr)
        if fn is not None:
            fn(ptr)
        return
    m = ctypes.cast(ptr, ctypes.POINTER(_DLManagedTensor))
    if m.contents.deleter:
        m.contents.deleter(m)


def flags(capsule: Any) -> int:
    """The flags of an unconsumed versioned capsule (for tests and callers that
    want to see IS_COPIED)."""
    ptr = _api.PyCapsule_GetPointer(capsule, VERSIONED)
    return int(ctypes.cast(ptr, ctypes.POINTER(_DLManagedTensorVersioned)).contents.flags)


class HostView:
    """The owner of one kDLCPU export without a copy (clb_tensors_to_dlpack_host):
    its __array_interface__ hands numpy the memory, and the export's deleter runs
    when the last array over it is gone (numpy keeps the owner as the arrays'
    base). Any numpy version reads it, DLPack 1.x consumer or not."""

    def __init__(self, ptr: int, typestr: str) -> None:
        data, shape, byte_offset = _versioned_fields(ptr)
        self._ptr = ptr
        self.__array_interface__ = {"shape": shape, "typestr": typestr, "data": (data + byte_offset, False),
                                    "version": 3}

    def __del__(self) -> None:
        ptr, self._ptr = self._ptr, 0
        if ptr:
            release(ptr, True)
