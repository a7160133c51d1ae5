"""DLPack through the binding: numpy.from_dlpack on clbound tensors (host copies
at the actual sizes) and Context.from_dlpack on numpy arrays (any strides)."""
import numpy as np
import pytest

import clbound
from dlpack_util import Holder, Recorder, capsule_name

RNG = np.random.default_rng(11)


class Capsule:
    """Speaks DLPack by handing out a clbound tensor's capsule."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__()

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


def numpy_speaks_dlpack_bool():
    try:
        np.zeros(1, np.bool_).__dlpack__()
        return True
    except (BufferError, TypeError):
        return False


@pytest.fixture(scope="module")
def ctx():
    with clbound.Context() as c:
        yield c


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_])
def test_round_trip_every_dtype(ctx, dtype):
    if dtype == np.float64 and not ctx.supports("copy", np.float64):
        pytest.skip("the device has no fp64")
    if dtype == np.bool_ and not numpy_speaks_dlpack_bool():
        # numpy before 2 has no DLPack bool: go through clbound's own capsules
        # (kDLBool both ways) and compare through numpy arrays
        a = RNG.integers(0, 2, (5, 3)).astype(np.bool_)
        t = ctx.from_numpy(a, bounds=(9, 3), dynamic=(True, False))
        u = ctx.from_dlpack(Capsule(t), bounds=(9, 3), dynamic=(True, False))
        assert u.dtype == np.bool_ and u.sizes() == (5, 3)
        np.testing.assert_array_equal(u.numpy(), a)
        return
    a = (RNG.integers(0, 2, (5, 3)) if dtype == np.bool_ else RNG.integers(-9, 99, (5, 3))).astype(dtype)
    t = ctx.from_dlpack(a, bounds=(9, 3), dynamic=(True, False))
    assert t.bounds == (9, 3) and t.dynamic == (True, False) and t.sizes() == (5, 3)
    back = np.from_dlpack(t)
    assert back.dtype == a.dtype
    np.testing.assert_array_equal(back, a)


def test_strided_and_offset_views(ctx):
    a = np.arange(60, dtype=np.float32).reshape(6, 10)
    for view in (a.T, a[::2, 1::3], a[::-1], a[:, 4], np.lib.stride_tricks.as_strided(a[0], (3, 10), (0, 4), writeable=True)):
        np.testing.assert_array_equal(np.from_dlpack(ctx.from_dlpack(view)), view)


def test_export_is_at_the_actual_sizes(ctx):
    t = ctx.nonzero(ctx.from_numpy(np.array([[0, 1, 0], [1, 1, 0]], np.int32), bounds=(8, 3), dynamic=(True, False)))
    got = np.from_dlpack(t)
    np.testing.assert_array_equal(got, [[0, 1], [1, 0], [1, 1]])
    assert t.__dlpack_device__() == (1, 0)


def test_errors(ctx):
    with pytest.raises(TypeError, match="does not speak DLPack"):
        ctx.from_dlpack([1, 2, 3])
    with pytest.raises(clbound.BoundExceededError, match="dim 0: 5 > bound 4"):
        ctx.from_dlpack(np.zeros((5, 2), np.float32), bounds=(4, 2))
    with pytest.raises(ValueError, match="bounds has 1 dims; the DLPack tensor has 2"):
        ctx.from_dlpack(np.zeros((5, 2), np.float32), bounds=(8,))
    with pytest.raises(clbound.DTypeError, match="has no clbound dtype"):
        ctx.from_dlpack(np.zeros(3, np.float16))


NUMPY_VERSION = tuple(int(v) for v in np.__version__.split(".")[:2])
needs_numpy_dlpack_1 = pytest.mark.skipif(
    NUMPY_VERSION < (2, 1), reason=f"numpy {np.__version__} speaks no DLPack 1.x (max_version, copy=); "
    "python/ops runs these in its venv's numpy")


def dl_struct(cap):
    import ctypes
    from clbound import _dlpack
    ptr = _dlpack._api.PyCapsule_GetPointer(cap, _dlpack.VERSIONED)
    return ctypes.cast(ptr, ctypes.POINTER(_dlpack._DLManagedTensorVersioned)).contents


@needs_numpy_dlpack_1
def test_numpy_round_trips_through_dlpack_1(ctx):
    a = RNG.integers(-9, 99, (5, 3)).astype(np.int64)
    t = ctx.from_numpy(a, bounds=(9, 3), dynamic=(True, False))
    rec = Recorder(t)
    np.testing.assert_array_equal(np.from_dlpack(rec), a)
    assert rec.kwargs[0]["max_version"] >= (1, 0) and rec.names == [b"dltensor_versioned"]
    np.testing.assert_array_equal(np.from_dlpack(t, copy=True), a)
    with pytest.raises(BufferError, match="copy=False"):  # before: a silent copy
        np.from_dlpack(t, copy=False)
    with pytest.raises(ValueError, match="always copies"):
        np.asarray(t, copy=False)
    rec = Recorder(a)
    u = ctx.from_dlpack(rec, bounds=(9, 3), dynamic=(True, False))
    assert rec.names == [b"dltensor_versioned"] and u.shape == (5, 3)
    np.testing.assert_array_equal(u.numpy(), a)
    np.testing.assert_array_equal(ctx.from_dlpack(a[::2, ::-1]).numpy(), a[::2, ::-1])


def test_capsules_legacy_versioned_and_device(ctx):
    import ctypes
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    t = ctx.from_numpy(a, bounds=(8, 2), dynamic=(True, False))
    assert t.__dlpack_device__() == (1, 0)
    legacy = t.__dlpack__()  # an old consumer: no max_version
    assert capsule_name(legacy) == b"dltensor"
    v = t.__dlpack__(max_version=(1, 1))
    assert capsule_name(v) == b"dltensor_versioned"
    m = dl_struct(v)
    assert (m.version.major, m.dl_tensor.device_type, m.dl_tensor.ndim) == (1, 1, 2)
    assert m.flags & 2  # DLPACK_FLAG_BITMASK_IS_COPIED
    for cap in (legacy, v):  # clbound imports both kinds
        np.testing.assert_array_equal(ctx.from_dlpack(Holder(cap)).numpy(), a)
    dev = t.__dlpack__(max_version=(1, 0), dl_device=(4, 0), copy=False)  # the cl_mem itself
    m = dl_struct(dev)
    assert m.dl_tensor.device_type == 4 and m.dl_tensor.data == t.data_mem and not m.flags & 2
    assert ctypes.cast(m.dl_tensor.shape, ctypes.POINTER(ctypes.c_int64))[:2] == [3, 2]
    dev2 = t.__dlpack__(max_version=(1, 0), dl_device=(4, 0), copy=True)  # a copy on the device
    assert dl_struct(dev2).dl_tensor.data != t.data_mem
    del dev, dev2, legacy, v  # unconsumed capsules call their deleters
    with pytest.raises(BufferError, match="copy=False"):
        t.__dlpack__(max_version=(1, 0), copy=False)
    with pytest.raises(BufferError, match="DLPack 1.x"):
        t.__dlpack__(dl_device=(4, 0))
    with pytest.raises(BufferError, match="kDLCPU"):
        t.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
    with pytest.raises(BufferError, match="static at the object's shape"):  # sharing: no bounds
        ctx.from_dlpack(a, bounds=(a.shape[0] + 2,) + a.shape[1:], copy=False)


def _shares(ctx):
    """Whether this device's buffers are host memory (copy=False can share)."""
    try:
        ctx.from_dlpack(np.zeros(1, dtype=np.float32), copy=False)
        return True
    except BufferError as e:
        assert "not host memory" in str(e) or "keeps a copy" in str(e), e
        return False


def test_from_dlpack_copy_false_shares_host_memory(ctx):
    """copy=False on a device whose buffers are host memory: the tensor is the
    array; the device sees the host's writes, ops write into it; refused (with
    BufferError) for a strided or read-only array, bounds, and on other devices."""
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    if not _shares(ctx):
        with pytest.raises(BufferError, match="copy with clb_tensor_write"):
            ctx.from_dlpack(a, copy=False)
        return
    t = ctx.from_dlpack(a, copy=False)
    assert t.shape == (4, 3) and t.bounds == (4, 3) and not any(t.dynamic)
    np.testing.assert_array_equal(t.numpy(), a)
    a *= 3  # the host writes between ops: no copy to refresh
    np.testing.assert_array_equal(ctx.neg(t).numpy(), -a)
    out = np.zeros((4, 3), dtype=np.float32)
    ctx.neg(t, out=ctx.from_dlpack(out, copy=False))
    ctx.sync()
    np.testing.assert_array_equal(out, -a)  # the op wrote the array itself
    before = ctx.counters()["bytes_to_device"]
    ctx.from_dlpack(np.ones((256, 256), dtype=np.float32), copy=False)
    assert ctx.counters()["bytes_to_device"] - before < 1024  # the shape record, not the data
    for bad, why in ((a.T, "C-contiguous"), (a[::2], "C-contiguous")):
        with pytest.raises(BufferError, match=why):
            ctx.from_dlpack(bad, copy=False)
    ro = np.arange(3.0)
    ro.flags.writeable = False
    with pytest.raises(BufferError, match="writable"):
        ctx.from_dlpack(ro, copy=False)
    with pytest.raises(BufferError, match="static at the object's shape"):
        ctx.from_dlpack(a, dynamic=(True, False), copy=False)
    # its kDLOpenCL export is a copy on the device: the export may outlive the array
    cap = t.__dlpack__(max_version=(1, 0), dl_device=(4, 0))
    assert dl_struct(cap).dl_tensor.data != t.data_mem
    del cap
    with pytest.raises(BufferError, match="shared by from_dlpack"):
        t.__dlpack__(max_version=(1, 0), dl_device=(4, 0), copy=False)
    # the tensor keeps the array alive
    t2 = ctx.from_dlpack(np.full(5, 7, dtype=np.int64), copy=False)
    import gc
    gc.collect()
    assert t2.tolist() == [7] * 5


def test_torch_round_trips(torch):  # more in test_torch.py
    with clbound.Context() as c:
        src = torch.arange(12, dtype=torch.float32).reshape(4, 3)
        t = c.from_dlpack(src, bounds=(10, 3), dynamic=(True, False))
        assert t.shape == (4, 3)
        back = torch.from_dlpack(t)
        assert torch.equal(back, src)
        assert torch.equal(torch.from_dlpack(c.from_dlpack(src[::2])), src[::2])
        assert torch.equal(torch.from_dlpack(t * 2), src * 2)


def test_dropped_tensors_return_their_memory():
    """An eager loop does not grow: a Tensor the caller drops frees its buffers."""
    with clbound.Context() as c:
        x = c.from_numpy(np.ones((512, 512), np.float32))  # 1 MiB
        for _ in range(3):
            y = c.relu(c.mul(x, x))
        held = c.metrics()["peak_device_bytes"]
        for _ in range(200):
            y = c.relu(c.mul(x, x))  # the previous y and every temporary go back to the pool
        assert c.metrics()["peak_device_bytes"] == held
        y.free()
        with pytest.raises(clbound.FreedError, match="freed"):
            y.numpy()


def test_host_export_is_one_host_sync(ctx):
    # the sizes are read once (a counted sync); the data follows from the idle queue
    t = ctx.from_numpy(np.arange(6, dtype=np.float32).reshape(3, 2), bounds=(10, 2), dynamic=(True, False))
    for export in (lambda: np.from_dlpack(t), lambda: t.__dlpack__(), lambda: t.__dlpack__(max_version=(1, 0))):
        before = ctx.counters()["host_syncs"]
        out = export()
        assert ctx.counters()["host_syncs"] - before == 1
        del out
    assert np.from_dlpack(t).tolist() == [[0, 1], [2, 3], [4, 5]]
