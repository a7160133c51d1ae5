"""Every op of the Python binding against numpy, on random shapes inside random bounds."""
import math
import numpy as np
import pytest

import clbound

RNG = np.random.default_rng(20261122)
FLOAT_TOL = dict(rtol=5e-3, atol=1e-3)


@pytest.fixture(scope="module")
def ctx():
    with clbound.Context() as c:
        yield c


def random_case(dtype, rank):
    """Bounds, dynamic flags and an array at actual sizes within them."""
    bounds = tuple(int(b) for b in RNG.integers(1, 9, size=rank))
    dynamic = tuple(bool(d) for d in RNG.integers(0, 2, size=rank))
    shape = tuple(int(RNG.integers(0, b + 1)) if d else b for b, d in zip(bounds, dynamic))
    if np.dtype(dtype).kind == "f":
        a = RNG.uniform(-2, 2, size=shape).astype(dtype)
    elif dtype == np.bool_:
        a = RNG.integers(0, 2, size=shape).astype(dtype)
    elif dtype == np.uint8:
        a = RNG.integers(0, 40, size=shape).astype(dtype)
    else:
        a = RNG.integers(-20, 21, size=shape).astype(dtype)
    return bounds, dynamic, a


def check(got, want):
    assert got.shape == want.shape
    if np.dtype(want.dtype).kind == "f":
        np.testing.assert_allclose(got, want, **FLOAT_TOL)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "maximum", "minimum"])
def test_binary_same_shape(ctx, dtype, op):
    for _ in range(5):
        bounds, dynamic, a = random_case(dtype, int(RNG.integers(0, 4)))
        b = np.flip(a).copy()
        ta = ctx.from_numpy(a, bounds, dynamic)
        tb = ctx.from_numpy(b, bounds, dynamic)
        want = getattr(np, {"add": "add", "sub": "subtract", "mul": "multiply"}.get(op, op))(a, b)
        check(ctx.binary(op, ta, tb).numpy(), want.astype(dtype))


def test_broadcast_rows_and_columns(ctx):
    a = RNG.uniform(-1, 1, size=(5, 3)).astype(np.float32)
    row = RNG.uniform(-1, 1, size=(3,)).astype(np.float32)
    col = RNG.uniform(-1, 1, size=(5, 1)).astype(np.float32)
    ta = ctx.from_numpy(a, (9, 3), (True, False))
    check(ctx.add(ta, ctx.from_numpy(row)).numpy(), a + row)
    check(ctx.mul(ta, ctx.from_numpy(col, (9, 1), (True, False))).numpy(), a * col)


def test_div_and_remainder(ctx):
    a = RNG.uniform(-3, 3, size=(4, 6)).astype(np.float32)
    b = (RNG.uniform(0.5, 2, size=(4, 6)) * RNG.choice([-1, 1], size=(4, 6))).astype(np.float32)
    ta, tb = ctx.from_numpy(a), ctx.from_numpy(b)
    check(ctx.div(ta, tb).numpy(), a / b)
    check(ctx.remainder(ta, tb).numpy(), np.remainder(a, b))
    ia = RNG.integers(-20, 21, size=(7,)).astype(np.int32)
    ib = RNG.integers(1, 6, size=(7,)).astype(np.int32) * RNG.choice([-1, 1], size=(7,)).astype(np.int32)
    check(ctx.remainder(ctx.from_numpy(ia), ctx.from_numpy(ib)).numpy(), np.remainder(ia, ib))


@pytest.mark.parametrize("op,fn", [("neg", np.negative), ("relu", lambda x: np.maximum(x, 0)),
                                   ("sigmoid", lambda x: 1 / (1 + np.exp(-x))), ("tanh", np.tanh), ("exp", np.exp),
                                   ("abs", np.abs), ("expm1", np.expm1)])
def test_unary(ctx, op, fn):
    for _ in range(5):
        bounds, dynamic, a = random_case(np.float32, int(RNG.integers(0, 4)))
        check(ctx.unary(op, ctx.from_numpy(a, bounds, dynamic)).numpy(), fn(a.astype(np.float64)).astype(np.float32))


def test_rounding_trig_and_base_2_and_10(ctx):
    """floor, ceil, round (ties to even, as numpy), trunc: exact; sin, cos, log2,
    log10, exp2 against numpy in float64, at a few float32 ulp; also as Tensor
    methods. Floating only, as the library's other math."""
    a = np.concatenate([RNG.uniform(-6, 6, 40), [-2.5, -1.5, -0.5, -0.0, 0.5, 1.5, 2.5, 7.0]]).astype(np.float32)
    t = ctx.from_numpy(a, (64,), (True,))
    for op, fn in (("floor", np.floor), ("ceil", np.ceil), ("round", np.round), ("trunc", np.trunc)):
        got = getattr(t, op)().numpy()
        np.testing.assert_array_equal(got, fn(a))
        np.testing.assert_array_equal(np.signbit(got), np.signbit(fn(a)))  # -0.0 stays -0.0
    a64 = a.astype(np.float64)
    pos = np.abs(a64) + 0.25
    tp = ctx.from_numpy(pos.astype(np.float32))
    for got, want in ((ctx.sin(t), np.sin(a64)), (t.cos(), np.cos(a64)), (tp.log2(), np.log2(pos.astype(np.float32))),
                      (ctx.log10(tp), np.log10(pos.astype(np.float32))), (t.exp2(), np.exp2(a64))):
        np.testing.assert_allclose(got.numpy(), want, rtol=5e-7, atol=5e-7)
    with pytest.raises(clbound.DTypeError, match="floor: i32 is not floating"):
        ctx.floor(ctx.from_numpy(np.arange(3, dtype=np.int32)))


def test_cumsum_matches_numpy(ctx):
    """ctx.cumsum / Tensor.cumsum along each dim at the actual sizes: float32
    against numpy in float64, integers and bools exactly in int64 (numpy
    gives int64 for them on this platform too); axis= as numpy names it."""
    a = RNG.uniform(-2, 2, (5, 3)).astype(np.float32)
    t = ctx.from_numpy(a, (9, 3), (True, False))
    for d in (0, 1, -1):
        np.testing.assert_allclose(t.cumsum(d).numpy(), np.cumsum(a.astype(np.float64), axis=d), rtol=1e-6, atol=1e-6)
    i = RNG.integers(-50, 50, (4, 6)).astype(np.int32)
    got = ctx.cumsum(ctx.from_numpy(i), axis=1).numpy()
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.cumsum(i, axis=1, dtype=np.int64))
    m = RNG.random((7,)) > 0.5
    np.testing.assert_array_equal(ctx.from_numpy(m).cumsum(0).numpy(), np.cumsum(m))
    with pytest.raises(TypeError, match="cumsum needs dim"):
        ctx.cumsum(t)


def test_assert_async_fails_the_next_sync(ctx):
    """ctx.assert_async: a zero element fails the next host sync (DeviceCheckError,
    also a RuntimeError as PyTorch's), naming the message, the element and the
    count; NaN is true; the error is reported once."""
    ok = ctx.from_numpy(np.array([1.0, np.nan, -2.0], np.float32))
    ctx.assert_async(ok, "fine")
    ctx.sync()
    bad = ctx.from_numpy(np.array([True, True, False, True]), (8,), (True,))
    ctx.assert_async(bad, "labels in range")
    with pytest.raises(RuntimeError, match='"labels in range" on .*element 2 of 4 is false') as e:
        ctx.sync()
    assert isinstance(e.value, clbound.DeviceCheckError)
    ctx.sync()
    with pytest.raises(TypeError, match="msg must be a str"):
        ctx.assert_async(ok, 3)


def test_log(ctx):
    a = RNG.uniform(0.1, 5, size=(3, 4)).astype(np.float32)
    check(ctx.log(ctx.from_numpy(a)).numpy(), np.log(a))


def test_sqrt_rsqrt_log1p_and_abs_of_integers(ctx):
    a = np.concatenate([RNG.uniform(0, 5, 10), [0.0, 1e-9, 3e-30]]).astype(np.float32)
    t = ctx.from_numpy(a, (16,), (True,))
    a64 = a.astype(np.float64)
    for got, want in ((ctx.sqrt(t), np.sqrt(a64)), (t.sqrt(), np.sqrt(a64)), (t.log1p(), np.log1p(a64)),
                      (ctx.rsqrt(ctx.add(t, 0.5)), 1 / np.sqrt(a64 + 0.5)), (t.expm1(), np.expm1(a64))):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=0)  # log1p and expm1 keep 1e-9 and 3e-30
    z = ctx.from_numpy(np.array([-0.0, -2.5, np.nan], np.float32))
    got = abs(z).numpy()
    assert not np.signbit(got[0]) and got[1] == 2.5 and np.isnan(got[2])
    i = np.array([-7, 0, 5, np.iinfo(np.int32).min], np.int32)
    np.testing.assert_array_equal(abs(ctx.from_numpy(i)).numpy(), np.abs(i))
    with pytest.raises(clbound.DTypeError, match="sqrt: i32 is not floating"):
        ctx.sqrt(ctx.from_numpy(i))


def test_cat(ctx):
    # torch.cat / numpy.concatenate: along the dynamic dim the sizes add on the device
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    b = RNG.standard_normal((5, 4)).astype(np.float32)
    c = RNG.standard_normal((2, 4)).astype(np.float32)
    ta, tb, tc = (ctx.from_numpy(v, (8, 4), (True, False)) for v in (a, b, c))
    got = ctx.cat([ta, tb, tc])
    assert got.bounds == (24, 4)
    np.testing.assert_array_equal(got.numpy(), np.concatenate([a, b, c]))
    np.testing.assert_array_equal(ctx.cat([ta, ta], dim=-1).numpy(), np.concatenate([a, a], axis=1))
    np.testing.assert_array_equal(ctx.cat([tb]).numpy(), b)
    ctx.cat([ta, tb], dim=1)
    with pytest.raises(clbound.DeviceCheckError, match="sizes 3 and 5 must be equal"):
        ctx.sync()
    with pytest.raises(clbound.DTypeError, match="the dtypes differ"):
        ctx.cat([ta, ctx.from_numpy(np.zeros((3, 4), np.int32), (8, 4), (True, False))])
    with pytest.raises(ValueError, match="no tensors"):
        ctx.cat([])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(ctx, dim):
    # torch.gather / numpy.take_along_axis at actual sizes under the bounds
    x = RNG.standard_normal((6, 5)).astype(np.float32)
    shape = (9, 5) if dim == 0 else (6, 3)
    idx = RNG.integers(0, x.shape[dim], size=shape).astype(np.int64)
    tx = ctx.from_numpy(x, (8, 5), (True, False))
    ti = ctx.from_numpy(idx, (12, 5) if dim == 0 else (8, 3), (True, False))
    got = ctx.gather(tx, dim, ti).numpy()
    np.testing.assert_array_equal(got, np.take_along_axis(x, idx, axis=dim))
    bad = idx.copy()
    bad[1, 1] = x.shape[dim]
    ctx.gather(tx, dim, ctx.from_numpy(bad))
    with pytest.raises(clbound.IndexOutOfRangeError, match=f"index {x.shape[dim]} is out of range for dim {dim % 2}"):
        ctx.sync()
    with pytest.raises(clbound.DTypeError, match="it must be i64 or i32"):
        ctx.gather(tx, dim, ctx.from_numpy(idx.astype(np.float32)))


def test_rand_uniform(ctx):
    # Philox4x32-10 keyed by the seed: [0, 1), like's actual sizes, the same
    # numbers for the same seed, others for the next; the first float32 value of
    # seed 0 is Random123's known answer 0x6627e8d5 >> 8 over 2^24
    like = ctx.from_numpy(np.zeros((5, 3), np.int32), (9, 3), (True, False))
    a = ctx.rand_uniform(like, 0).numpy()
    assert a.dtype == np.float32 and a.shape == (5, 3)
    assert a[0, 0] == np.float32((0x6627E8D5 >> 8) / 2.0 ** 24)
    assert ((a >= 0) & (a < 1)).all()
    np.testing.assert_array_equal(ctx.rand_uniform(like, 0).numpy(), a)
    assert not np.any(ctx.rand_uniform(like, 1).numpy() == a)
    b = ctx.rand_uniform(like, 2**64 - 1, np.float64).numpy()
    assert b.dtype == np.float64 and ((b >= 0) & (b < 1)).all()
    with pytest.raises(clbound.DTypeError, match="uniform numbers are f32 or f64"):
        ctx.rand_uniform(like, 0, np.int32)
    with pytest.raises(OverflowError):
        ctx.rand_uniform(like, -1)
    with pytest.raises(TypeError):
        ctx.rand_uniform(like, 0.5)


def test_erf(ctx):
    # against math.erf in double: f32 within 2e-6 (OpenCL allows erf 16 ulp), over both tails
    a = np.concatenate([RNG.uniform(-5, 5, 40), [0.0, -0.0, 1e-30, -4e-8, 6.5, -9.0]]).astype(np.float32)
    want = np.array([math.erf(float(v)) for v in a])
    t = ctx.from_numpy(a, (64,), (True,))
    for got in (ctx.erf(t).numpy(), ctx.unary("erf", t).numpy(), t.erf().numpy()):
        assert got.dtype == np.float32 and got.shape == a.shape
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    with pytest.raises(clbound.DTypeError, match="erf: i32 is not floating"):
        ctx.erf(ctx.from_numpy(np.arange(3, dtype=np.int32)))


@pytest.mark.parametrize("src", [np.float32, np.int32, np.int64, np.uint8, np.bool_])
@pytest.mark.parametrize("dst", [np.float32, np.int32, np.int64, np.uint8, np.bool_])
def test_cast(ctx, src, dst):
    a = np.array([0, 1, 2, 7, 100, 3, 0, 42, 9, 0, 255, 1]).astype(src)
    want = a.astype(np.float64).astype(dst) if dst != np.bool_ else a != 0
    check(ctx.cast(ctx.from_numpy(a, (20,), (True,)), dst).numpy(), np.asarray(want).astype(dst))


@pytest.mark.parametrize("op", ["sum", "mean", "max"])
def test_reductions(ctx, op):
    for _ in range(6):
        bounds, dynamic, a = random_case(np.float32, int(RNG.integers(1, 4)))
        if a.size == 0 and op != "sum":
            continue
        t = ctx.from_numpy(a, bounds, dynamic)
        ref = getattr(np, op)(a.astype(np.float64))
        check(ctx.reduce_all(op, t).numpy(), np.asarray(ref, dtype=np.float32))
        dim = int(RNG.integers(0, a.ndim))
        if a.shape[dim] == 0 and op != "sum":
            continue
        ref = getattr(np, op)(a.astype(np.float64), axis=dim, keepdims=True)
        check(ctx.reduce_dim(op, t, dim, keepdim=True).numpy(), ref.astype(np.float32))


def test_integer_sum_is_int64(ctx):
    a = RNG.integers(-1000, 1000, size=(30, 7)).astype(np.int32)
    got = ctx.reduce_dim("sum", ctx.from_numpy(a, (40, 7), (True, False)), 1).numpy()
    assert got.dtype == np.int64
    check(got, a.sum(axis=1).astype(np.int64))


def test_reshape_view(ctx):
    a = np.arange(24, dtype=np.int64).reshape(4, 6)
    t = ctx.from_numpy(a, (10, 6), (True, False))
    v = ctx.reshape(t, (-1, 3))
    assert v.dynamic == (True, False)
    check(v.numpy(), a.reshape(-1, 3))


def test_fill_and_sizes(ctx):
    t = ctx.tensor(np.int32, (50, 2), (True, False))
    t.write(np.zeros((13, 2), np.int32))
    ctx.fill(t, 7)
    assert t.sizes() == (13, 2)
    check(t.numpy(), np.full((13, 2), 7, np.int32))


def test_errors_name_the_problem(ctx):
    t = ctx.tensor(np.float32, (4,), (True,))
    with pytest.raises(clbound.BoundExceededError) as e:
        t.write(np.zeros(5, np.float32))
    assert e.value.status == "ERR_OUT_OF_BOUNDS" and "5 > bound 4" in str(e.value)
    with pytest.raises(clbound.DTypeError) as e:  # the library has no integer matmul
        ctx.matmul(ctx.from_numpy(np.zeros((2, 3), np.int32)), ctx.from_numpy(np.zeros((3, 2), np.int32)))
    assert e.value.status == "ERR_DTYPE"
    # mixed dtypes promote as numpy does (before: ERR_DTYPE "dtypes differ")
    got = ctx.add(ctx.from_numpy(np.zeros(3, np.float32)), ctx.from_numpy(np.ones(3, np.int32)))
    assert got.dtype == np.float64 and got.numpy().tolist() == [1.0, 1.0, 1.0]


def test_deferred_check_reported_at_sync(ctx):
    a = ctx.from_numpy(np.ones(5, np.float32), (8,), (True,))
    b = ctx.from_numpy(np.ones(7, np.float32), (8,), (True,))
    ctx.add(a, b)
    with pytest.raises(clbound.DeviceCheckError) as e:
        ctx.sync()
    assert e.value.status == "ERR_DEVICE_CHECK" and "5 and 7" in str(e.value)


def test_metrics(ctx):
    m = ctx.metrics()
    for key in ("program_builds", "kernel_launches", "host_syncs", "peak_device_bytes"):
        assert key in m
    assert m["host_syncs"] > 0
