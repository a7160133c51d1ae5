"""DLPack capsules for the binding: Tensor.__dlpack__ (a host copy at the actual
sizes, so numpy.from_dlpack(t) works) and Context.from_dlpack(obj) (any object
with __dlpack__, numpy arrays included, copied into a bounded tensor).

Capsules follow the Python DLPack protocol: a legacy capsule is named "dltensor"
and holds a DLManagedTensor*; a consumer renames it "used_dltensor" and becomes
responsible for calling the deleter. A capsule destroyed while still named
"dltensor" calls the deleter itself.
"""
import ctypes

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
# the same function on a capsule known only by its address (in the destructor)
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))

_LEGACY = b"dltensor"
_USED = b"used_dltensor"
_DL_CPU = 1


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule_addr):
    # Still named "dltensor": nobody consumed it, so its deleter is ours to call.
    if _api.PyCapsule_IsValid(capsule_addr, _LEGACY):
        ptr = _raw_get_pointer(capsule_addr, _LEGACY)
        if ptr:
            release(ptr)


def capsule_from_managed(ptr):
    """A "dltensor" capsule owning the DLManagedTensor at ptr."""
    return _api.PyCapsule_New(ptr, _LEGACY, ctypes.cast(_capsule_destructor, ctypes.c_void_p))


def consume(obj):
    """The DLManagedTensor* of obj.__dlpack__(), with the capsule marked used: the
    caller must hand the pointer to a consumer that calls its deleter."""
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"{type(obj).__name__} does not speak DLPack (no __dlpack__)")
    if hasattr(obj, "__dlpack_device__"):
        dev = obj.__dlpack_device__()
        if int(dev[0]) not in (_DL_CPU, 3):  # kDLCPU, kDLCUDAHost
            raise ValueError(f"clbound imports host memory; {type(obj).__name__} is on DLPack device {tuple(dev)}")
    capsule = obj.__dlpack__()
    ptr = _api.PyCapsule_GetPointer(capsule, _LEGACY)
    _api.PyCapsule_SetName(capsule, _USED)
    return ptr


def ndim(ptr):
    """The rank of the DLManagedTensor at ptr."""
    return int(ctypes.cast(ptr, ctypes.POINTER(_DLManagedTensor)).contents.dl_tensor.ndim)


def release(ptr):
    """Calls the deleter of a consumed DLManagedTensor that will not be used."""
    m = ctypes.cast(ptr, ctypes.POINTER(_DLManagedTensor))
    if m.contents.deleter:
        m.contents.deleter(m)
