"""DLPack through the binding: numpy.from_dlpack on clbound tensors (host copies
at the actual sizes) and Context.from_dlpack on numpy arrays (any strides)."""
import numpy as np
import pytest

import clbound

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
