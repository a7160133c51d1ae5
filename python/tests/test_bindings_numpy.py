"""Every op the binding adds over ops.h, against numpy on seeded random shapes:
data-dependent ops (exact), the eager nn.h ops forward and backward (float32
against a float64 numpy reference, tolerances stated per assert), and the
errors they report (at the call, or at the next sync for device-side checks).

Bounded dims are used below their bounds throughout (bounds = size + slack), so a
result that read the slack would differ from numpy."""
import numpy as np
import pytest

import clbound

# float32 results against float64 numpy: 1e-5 relative plus 1e-6 absolute per element
F32 = dict(rtol=1e-5, atol=1e-6)
# where a float32 sum over k terms enters (matmul, linear backward): atol grows with k
def f32_sum(k):
    return dict(rtol=1e-5, atol=2e-6 * max(k, 1))


def bounded(ctx, a, slack=3):
    """a as a tensor whose dims are dynamic with bound size + slack, except dims of
    size 1, kept static so they broadcast (broadcasting is decided on the bounds)."""
    if a.ndim == 0:
        return ctx.from_numpy(a)
    return ctx.from_numpy(a, bounds=tuple(s if s == 1 else s + slack for s in a.shape),
                          dynamic=tuple(s != 1 for s in a.shape))


def rows(ctx, a, slack=4):
    """a with only dim 0 dynamic (a batch of rows below its bound)."""
    return ctx.from_numpy(a, bounds=(a.shape[0] + slack,) + a.shape[1:],
                          dynamic=(True,) + (False,) * (a.ndim - 1))


def sparse(rng, dtype, shape, density):
    nz = rng.random(shape) < density
    if dtype == np.bool_:
        return nz
    v = rng.integers(1, 100, size=shape).astype(dtype)
    if np.dtype(dtype).kind == "f":
        v = v * np.where(rng.random(shape) < 0.5, -1, 1).astype(dtype)
    return np.where(nz, v, 0).astype(dtype)


def random_shape(rng, rank, hi=6, lo=0):
    return tuple(int(s) for s in rng.integers(lo, hi + 1, size=rank))


def skip_f64(ctx, op, dtype):
    if dtype == np.float64 and not ctx.supports(op, np.float64):
        pytest.skip("the device has no fp64")


# ---------------------------------------------------------------- nonzero

@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8, np.bool_])
def test_nonzero_random_bounded_shapes(ctx, rng, dtype):
    for _ in range(6):
        shape = random_shape(rng, int(rng.integers(1, 5)))
        a = sparse(rng, dtype, shape, rng.random())
        got = ctx.nonzero(bounded(ctx, a, slack=int(rng.integers(1, 4)))).numpy()
        assert got.dtype == np.int64 and got.shape == (np.count_nonzero(a), a.ndim)
        np.testing.assert_array_equal(got, np.argwhere(a))


def test_nonzero_negative_zero_and_nan(ctx):
    a = np.array([0.0, -0.0, np.nan, 1.0, -1.0], np.float32)
    np.testing.assert_array_equal(ctx.nonzero(bounded(ctx, a)).numpy(), [[2], [3], [4]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8, np.bool_])
@pytest.mark.parametrize("shape", [(), (0,), (9,), (4, 0, 3), (5, 6), (2, 3, 4)])
def test_nonzero_static(ctx, rng, dtype, shape):
    skip_f64(ctx, "nonzero", dtype)
    a = sparse(rng, dtype, shape, 0.5)
    want = np.argwhere(a)
    n = len(want)
    for size in sorted({0, max(n - 1, 0), n, n + 3}):
        fill = int(rng.integers(-9, -1))
        idx, count = ctx.nonzero_static(bounded(ctx, a), size, fill_value=fill, return_count=True)
        got = idx.numpy()
        assert got.dtype == np.int64 and got.shape == (size, a.ndim)
        assert idx.dynamic == (False, False) and idx.bounds == (size, a.ndim)
        k = min(size, n)
        np.testing.assert_array_equal(got[:k], want[:k])
        assert (got[k:] == fill).all()
        c = count.numpy()
        assert c.shape == () and c.dtype == np.int64 and int(c) == n  # untruncated


def test_nonzero_static_negative_size_raises(ctx):
    # refused before the call, as the library would refuse it
    with pytest.raises(ValueError, match="size = -1 is negative"):
        ctx.nonzero_static(ctx.from_numpy(np.ones(3, np.float32)), -1)


# ---------------------------------------------------------------- masked_select

def broadcast_pair(rng):
    """Random shapes of x and mask that broadcast (dims of 1 or missing leading dims)."""
    full = random_shape(rng, int(rng.integers(1, 4)), hi=5)
    def side():
        s = [d if rng.random() < 0.6 else 1 for d in full]
        return tuple(s[int(rng.integers(0, len(s))) if rng.random() < 0.3 else 0:])
    return side(), side()


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.uint8, np.bool_])
def test_masked_select_random_broadcasts(ctx, rng, dtype):
    for _ in range(8):
        xs, ms = broadcast_pair(rng)
        x = sparse(rng, dtype, xs, 0.9)
        m = rng.random(ms) < rng.random()
        got = ctx.masked_select(bounded(ctx, x), bounded(ctx, m)).numpy()
        xb, mb = np.broadcast_arrays(x, m)
        assert got.dtype == np.dtype(dtype) and got.ndim == 1
        np.testing.assert_array_equal(got, xb[mb], err_msg=f"x {xs} mask {ms}")


@pytest.mark.parametrize("fill", [False, True])
def test_masked_select_all_or_nothing(ctx, rng, fill):
    x = rng.integers(-5, 5, (4, 7)).astype(np.int32)
    m = np.full((4, 7), fill)
    got = ctx.masked_select(bounded(ctx, x), bounded(ctx, m)).numpy()
    np.testing.assert_array_equal(got, x[m])
    assert got.shape == ((28,) if fill else (0,))


def test_masked_select_static_shape_mismatch_raises(ctx):
    x = ctx.from_numpy(np.ones((3,), np.float32))
    with pytest.raises(clbound.ShapeError) as e:
        ctx.masked_select(x, ctx.from_numpy(np.ones((4,), bool)))
    assert e.value.status == "ERR_SHAPE"


def test_masked_select_dynamic_size_mismatch_raises_at_sync(ctx):
    x = ctx.from_numpy(np.ones(5, np.float32), bounds=(8,), dynamic=(True,))
    m = ctx.from_numpy(np.ones(6, bool), bounds=(8,), dynamic=(True,))
    out = ctx.masked_select(x, m)  # the sizes are only compared on the device
    with pytest.raises(clbound.DeviceCheckError) as e:
        out.numpy()
    assert e.value.status == "ERR_DEVICE_CHECK"
    ctx.sync()  # reported once, then cleared


# ---------------------------------------------------------------- masked_scatter

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.uint8, np.bool_])
def test_masked_scatter_random(ctx, rng, dtype):
    for _ in range(6):
        xs = random_shape(rng, int(rng.integers(1, 4)), hi=5)
        ms = tuple(d if rng.random() < 0.6 else 1 for d in xs)[int(rng.integers(0, len(xs))):]
        x = sparse(rng, dtype, xs, 0.8)
        m = rng.random(ms) < rng.random()
        mb = np.broadcast_to(m, xs)
        k = int(mb.sum())
        # a 2-D source below its bounds, with more elements than needed; read flat
        cols = int(rng.integers(1, 4))
        src = sparse(rng, dtype, (-(-(k + 2) // cols), cols), 1.0)
        got = ctx.masked_scatter(bounded(ctx, x), bounded(ctx, m), bounded(ctx, src, slack=2)).numpy()
        want = x.copy()
        want[mb] = src.ravel()[:k]
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want, err_msg=f"x {xs} mask {ms}")


def test_masked_scatter_keeps_x_bounds_and_sizes(ctx):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    tx = ctx.from_numpy(x, bounds=(5, 3), dynamic=(True, False))
    out = ctx.masked_scatter(tx, ctx.from_numpy(np.array([True, False, True])),
                             ctx.from_numpy(np.array([-1, -2, -3, -4], np.float32)))
    assert out.bounds == (5, 3) and out.dynamic == (True, False) and out.sizes() == (2, 3)
    np.testing.assert_array_equal(out.numpy(), [[-1, 1, -2], [-3, 4, -4]])


def test_masked_scatter_short_source_names_both_counts(ctx):
    x = np.zeros((3, 4), np.int32)
    m = np.zeros((3, 4), bool)
    m.flat[[0, 2, 5, 7, 8, 11]] = True
    src = np.array([10, 20, 30, 40], np.int32)
    # the source is short only at its actual size (4 of a bound of 9)
    out = ctx.masked_scatter(bounded(ctx, x), bounded(ctx, m), ctx.from_numpy(src, bounds=(9,), dynamic=(True,)))
    with pytest.raises(clbound.ShortSourceError) as e:
        ctx.sync()
    assert e.value.status == "ERR_SHORT_SOURCE"
    assert "masked_scatter" in str(e.value) and "6" in str(e.value) and "4" in str(e.value)
    # the failed op's output stays marked: reading it raises the same error
    # (docs/failure-behaviour.md), never the half-scattered values
    with pytest.raises(clbound.ShortSourceError) as e:
        out.numpy()
    assert e.value.status == "ERR_SHORT_SOURCE"
    assert "holds the output of an op that failed" in str(e.value)


@pytest.mark.parametrize("mask_dtype", [np.float32, np.uint8, np.int64])
def test_masked_scatter_mask_of_wrong_dtype_raises(ctx, mask_dtype):
    x = ctx.from_numpy(np.zeros(4, np.float32))
    with pytest.raises(clbound.DTypeError, match="bool") as e:
        ctx.masked_scatter(x, ctx.from_numpy(np.ones(4, mask_dtype)), ctx.from_numpy(np.ones(4, np.float32)))
    assert e.value.status == "ERR_DTYPE"


def test_masked_scatter_source_of_wrong_dtype_raises(ctx):
    x = ctx.from_numpy(np.zeros(4, np.float32))
    with pytest.raises(clbound.DTypeError) as e:
        ctx.masked_scatter(x, ctx.from_numpy(np.ones(4, bool)), ctx.from_numpy(np.ones(4, np.int32)))
    assert e.value.status == "ERR_DTYPE"


def test_masked_scatter_mask_larger_than_x_raises(ctx):
    x = ctx.from_numpy(np.zeros(4, np.float32))
    with pytest.raises(clbound.ShapeError) as e:
        ctx.masked_scatter(x, ctx.from_numpy(np.ones((2, 4), bool)), ctx.from_numpy(np.ones(8, np.float32)))
    assert e.value.status == "ERR_SHAPE"


# ---------------------------------------------------------------- matmul / linear

@pytest.mark.parametrize("strategy", ["auto", "clblast_bound", "sync_exact", "device", "host_blas"])
def test_matmul_transposes_dynamic_dims(ctx, rng, strategy):
    ctx.set_gemm_strategy(strategy)
    try:
        for trans_a, trans_b in ((False, False), (True, False), (False, True), (True, True)):
            m, k, n = (int(v) for v in rng.integers(1, 20, size=3))
            a = rng.uniform(-1, 1, (k, m) if trans_a else (m, k)).astype(np.float32)
            b = rng.uniform(-1, 1, (n, k) if trans_b else (k, n)).astype(np.float32)
            # every dim dynamic below its bound; K's bounds equal on both sides
            ta = ctx.from_numpy(a, bounds=tuple(s + 3 for s in a.shape), dynamic=(True, True))
            tb = ctx.from_numpy(b, bounds=tuple(s + 3 for s in b.shape), dynamic=(True, True))
            got = ctx.matmul(ta, tb, trans_a=trans_a, trans_b=trans_b).numpy()
            a64 = a.astype(np.float64).T if trans_a else a.astype(np.float64)
            b64 = b.astype(np.float64).T if trans_b else b.astype(np.float64)
            np.testing.assert_allclose(got, a64 @ b64, **f32_sum(k),
                                       err_msg=f"{strategy} trans {trans_a},{trans_b} m{m} k{k} n{n}")
    finally:
        ctx.set_gemm_strategy("auto")


@pytest.mark.parametrize("m,k,n", [(0, 3, 4), (3, 0, 4), (3, 4, 0)])
def test_matmul_empty(ctx, m, k, n):
    a = ctx.from_numpy(np.ones((m, k), np.float32), bounds=(5, 5), dynamic=(True, True))
    b = ctx.from_numpy(np.ones((k, n), np.float32), bounds=(5, 5), dynamic=(True, True))
    got = ctx.matmul(a, b).numpy()
    np.testing.assert_array_equal(got, np.zeros((m, n), np.float32))  # K = 0 gives zeros


def test_matmul_float64(ctx, rng):
    skip_f64(ctx, "matmul", np.float64)
    a, b = rng.standard_normal((9, 7)), rng.standard_normal((7, 5))
    got = ctx.matmul(rows(ctx, a), ctx.from_numpy(b)).numpy()
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, a @ b, rtol=1e-12, atol=1e-12)


def test_matmul_errors(ctx):
    a = ctx.from_numpy(np.ones((3, 4), np.float32))
    with pytest.raises(clbound.ShapeError) as e:
        ctx.matmul(a, ctx.from_numpy(np.ones((5, 2), np.float32)))
    assert e.value.status == "ERR_SHAPE"
    with pytest.raises(clbound.DTypeError) as e:
        ctx.matmul(ctx.from_numpy(np.ones((3, 4), np.int32)), ctx.from_numpy(np.ones((4, 2), np.int32)))
    assert e.value.status in ("ERR_DTYPE", "ERR_UNSUPPORTED")
    with pytest.raises(ValueError):
        ctx.set_gemm_strategy("fastest")


def test_matmul_dynamic_k_mismatch_raises_at_sync(ctx):
    a = ctx.from_numpy(np.ones((2, 3), np.float32), bounds=(2, 6), dynamic=(False, True))
    b = ctx.from_numpy(np.ones((4, 2), np.float32), bounds=(6, 2), dynamic=(True, False))
    ctx.matmul(a, b)
    with pytest.raises(clbound.DeviceCheckError) as e:
        ctx.sync()
    assert e.value.status == "ERR_DEVICE_CHECK"


def test_bmm_transposes_dynamic_batch_and_dims(ctx, rng):
    for trans_a, trans_b in ((False, False), (True, False), (False, True), (True, True)):
        for batch in (0, 1, 4):
            m, k, n = (int(v) for v in rng.integers(1, 12, size=3))
            a = rng.uniform(-1, 1, (batch,) + ((k, m) if trans_a else (m, k))).astype(np.float32)
            b = rng.uniform(-1, 1, (batch,) + ((n, k) if trans_b else (k, n))).astype(np.float32)
            # the batch and every matrix dim dynamic below their bounds
            ta = ctx.from_numpy(a, bounds=(6,) + tuple(s + 2 for s in a.shape[1:]), dynamic=(True, True, True))
            tb = ctx.from_numpy(b, bounds=(6,) + tuple(s + 2 for s in b.shape[1:]), dynamic=(True, True, True))
            got = ctx.bmm(ta, tb, trans_a=trans_a, trans_b=trans_b).numpy()
            a64 = a.astype(np.float64).transpose(0, 2, 1) if trans_a else a.astype(np.float64)
            b64 = b.astype(np.float64).transpose(0, 2, 1) if trans_b else b.astype(np.float64)
            assert got.shape == (batch, m, n)
            np.testing.assert_allclose(got, a64 @ b64, **f32_sum(k),
                                       err_msg=f"trans {trans_a},{trans_b} batch{batch} m{m} k{k} n{n}")


def test_bmm_errors_and_batch_mismatch(ctx):
    a = ctx.from_numpy(np.ones((2, 3, 4), np.float32))
    with pytest.raises(clbound.ShapeError, match="the batch dims differ"):
        ctx.bmm(a, ctx.from_numpy(np.ones((3, 4, 2), np.float32)))
    with pytest.raises(clbound.ShapeError, match="rank 2"):
        ctx.bmm(ctx.from_numpy(np.ones((3, 4), np.float32)), a)
    a = ctx.from_numpy(np.ones((2, 3, 4), np.float32), bounds=(5, 3, 4), dynamic=(True, False, False))
    b = ctx.from_numpy(np.ones((3, 4, 2), np.float32), bounds=(5, 4, 2), dynamic=(True, False, False))
    ctx.bmm(a, b)
    with pytest.raises(clbound.DeviceCheckError, match="sizes 2 and 3 must be equal"):
        ctx.sync()


def test_reshape_bounded_two_dynamic_dims(ctx, rng):
    x = ctx.from_numpy(rng.standard_normal((6, 3)).astype(np.float32), bounds=(24, 3), dynamic=(True, False))
    v = ctx.reshape_bounded(x, (2, 3, 3), bounds=(4, 6, 3), dynamic=(True, True, False))
    assert v.bounds == (4, 6, 3) and v.dynamic == (True, True, False) and v.shape == (2, 3, 3)
    np.testing.assert_array_equal(v.numpy(), x.numpy().reshape(2, 3, 3))
    ctx.reshape_bounded(x, (2, 2, 3), bounds=(4, 6, 3), dynamic=(True, True, False))  # 12 of x's 18 elements
    with pytest.raises(clbound.DeviceCheckError, match="sizes 18 and 12 must be equal"):
        ctx.sync()
    with pytest.raises(clbound.ShapeError, match="do not fit"):
        ctx.reshape_bounded(x, (2, 3, 3), bounds=(5, 6, 3), dynamic=(True, True, False))


def test_linear_dynamic_rows_and_features(ctx, rng):
    for _ in range(4):
        m, fin, feat = int(rng.integers(0, 12)), int(rng.integers(1, 9)), int(rng.integers(1, 9))
        x = rng.uniform(-1, 1, (m, fin)).astype(np.float32)
        w = rng.uniform(-1, 1, (feat, fin)).astype(np.float32)
        b = rng.uniform(-1, 1, (feat,)).astype(np.float32)
        # the features dim of w and the bias are dynamic together (nn.h)
        tw = ctx.from_numpy(w, bounds=(feat + 2, fin), dynamic=(True, False))
        tb = ctx.from_numpy(b, bounds=(feat + 2,), dynamic=(True,))
        ref = x.astype(np.float64) @ w.astype(np.float64).T
        got = ctx.linear(rows(ctx, x), tw, tb).numpy()
        np.testing.assert_allclose(got, ref + b, **f32_sum(fin))
        assert got.shape == (m, feat)


def test_bias_add_is_a_broadcast_add(ctx, rng):
    # nn.h has no separate bias add: linear takes the bias, and add broadcasts [F] over [M, F]
    y = rng.standard_normal((6, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    got = ctx.add(rows(ctx, y), ctx.from_numpy(b)).numpy()
    np.testing.assert_allclose(got, y.astype(np.float64) + b, **F32)


def test_linear_backward(ctx, rng):
    for m in (0, 1, 7, 20):
        fin, feat = 5, 3
        x = rng.uniform(-1, 1, (m, fin)).astype(np.float32)
        w = rng.uniform(-1, 1, (feat, fin)).astype(np.float32)
        dy = rng.uniform(-1, 1, (m, feat)).astype(np.float32)
        dx, dw, db = ctx.linear_backward(rows(ctx, x), ctx.from_numpy(w), rows(ctx, dy))
        x64, w64, dy64 = x.astype(np.float64), w.astype(np.float64), dy.astype(np.float64)
        np.testing.assert_allclose(dx.numpy(), dy64 @ w64, **f32_sum(feat))
        np.testing.assert_allclose(dw.numpy(), dy64.T @ x64, **f32_sum(m))  # the actual rows only
        np.testing.assert_allclose(db.numpy(), dy64.sum(axis=0), **f32_sum(m))
    only_dw = ctx.linear_backward(rows(ctx, x), ctx.from_numpy(w), rows(ctx, dy), need=("dw",))
    assert only_dw[0] is None and only_dw[2] is None
    np.testing.assert_allclose(only_dw[1].numpy(), dy64.T @ x64, **f32_sum(m))
    no_w = ctx.linear_backward(rows(ctx, x), None, rows(ctx, dy), need=("dw", "dbias"))  # a first layer's
    assert no_w[0] is None
    np.testing.assert_allclose(no_w[1].numpy(), dy64.T @ x64, **f32_sum(m))
    np.testing.assert_allclose(no_w[2].numpy(), dy64.sum(axis=0), **f32_sum(m))
    with pytest.raises(clbound.ClboundError, match="w is NULL"):
        ctx.linear_backward(rows(ctx, x), None, rows(ctx, dy))


def test_linear_activation_and_relu_masked_backward(ctx, rng):
    for m in (0, 1, 7, 20):
        fin, feat = 5, 3
        x = rng.uniform(-1, 1, (m, fin)).astype(np.float32)
        w = rng.uniform(-1, 1, (feat, fin)).astype(np.float32)
        b = rng.uniform(-1, 1, (feat,)).astype(np.float32)
        dy = rng.uniform(-1, 1, (m, feat)).astype(np.float32)
        x64, w64, b64, dy64 = (a.astype(np.float64) for a in (x, w, b, dy))
        z = x64 @ w64.T + b64
        for act, ref in (("relu", np.maximum(z, 0)), ("sigmoid", 1 / (1 + np.exp(-z))), ("tanh", np.tanh(z)),
                         ("exp", np.exp(z))):
            y = ctx.linear(rows(ctx, x), ctx.from_numpy(w), ctx.from_numpy(b), activation=act)
            np.testing.assert_allclose(y.numpy(), ref, **f32_sum(fin))
        dx, dw, db = ctx.linear_backward(rows(ctx, x), ctx.from_numpy(w), rows(ctx, dy), relu_x=True)
        np.testing.assert_allclose(dx.numpy(), np.where(x64 > 0, dy64 @ w64, 0), **f32_sum(feat))
        np.testing.assert_allclose(dw.numpy(), dy64.T @ x64, **f32_sum(m))
        np.testing.assert_allclose(db.numpy(), dy64.sum(axis=0), **f32_sum(m))
    with pytest.raises(ValueError, match="activation 'log' is not one of"):
        ctx.linear(rows(ctx, x), ctx.from_numpy(w), activation="log")


# ---------------------------------------------------------------- softmax and activations

def np_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("shape", [(1,), (7,), (6, 9), (0, 5), (2, 3, 5), (4, 1)])
def test_softmax_and_log_softmax_dynamic_last_dim(ctx, rng, shape):
    x = rng.uniform(-8, 8, shape).astype(np.float32)
    t = bounded(ctx, x, slack=4)  # the last dim too: the slack must not enter a row's sum
    x64 = x.astype(np.float64)
    sm = np_softmax(x64) if x.size else x64
    np.testing.assert_allclose(ctx.softmax(t).numpy(), sm, **F32)
    np.testing.assert_allclose(ctx.log_softmax(t).numpy(), np.log(sm) if x.size else x64, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("log", [False, True])
def test_softmax_backward(ctx, rng, log):
    x = rng.uniform(-3, 3, (5, 6)).astype(np.float32)
    dy = rng.uniform(-1, 1, (5, 6)).astype(np.float32)
    tx, tdy = bounded(ctx, x), bounded(ctx, dy)
    y = ctx.log_softmax(tx) if log else ctx.softmax(tx)
    got = ctx.softmax_backward(y, tdy, log=log).numpy()
    s, d = np_softmax(x.astype(np.float64)), dy.astype(np.float64)
    want = d - s * d.sum(-1, keepdims=True) if log else s * (d - (d * s).sum(-1, keepdims=True))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["neg", "relu", "sigmoid", "tanh", "exp", "log", "copy", "erf", "abs", "sqrt", "rsqrt",
                                "log1p", "expm1", "floor", "ceil", "round", "trunc", "sin", "cos", "log2", "log10",
                                "exp2"])
def test_unary_backward(ctx, rng, op):
    shape = random_shape(rng, 2, lo=1)
    x = rng.uniform(0.1, 2, shape) if op in ("log", "sqrt", "rsqrt", "log1p", "log2", "log10") else rng.uniform(
        -2, 2, shape)
    x = x.astype(np.float32)
    dy = rng.uniform(-1, 1, shape).astype(np.float32)
    tx, tdy = bounded(ctx, x), bounded(ctx, dy)
    x64, d = x.astype(np.float64), dy.astype(np.float64)
    y64 = {"sigmoid": 1 / (1 + np.exp(-x64)), "tanh": np.tanh(x64), "exp": np.exp(x64), "sqrt": np.sqrt(x64),
           "rsqrt": 1 / np.sqrt(x64), "expm1": np.expm1(x64), "exp2": np.exp2(x64)}.get(op)
    want = {"neg": lambda: -d, "relu": lambda: d * (x64 > 0), "sigmoid": lambda: d * y64 * (1 - y64),
            "tanh": lambda: d * (1 - y64 ** 2), "exp": lambda: d * y64, "log": lambda: d / x64,
            "copy": lambda: d, "erf": lambda: d * 2 / np.sqrt(np.pi) * np.exp(-x64 * x64),
            "abs": lambda: d * np.sign(x64), "sqrt": lambda: d / (2 * y64), "rsqrt": lambda: -0.5 * d * y64 ** 3,
            "log1p": lambda: d / (1 + x64), "expm1": lambda: d * (y64 + 1), "floor": lambda: 0 * d,
            "ceil": lambda: 0 * d, "round": lambda: 0 * d, "trunc": lambda: 0 * d, "sin": lambda: d * np.cos(x64),
            "cos": lambda: -d * np.sin(x64), "log2": lambda: d / (x64 * np.log(2)),
            "log10": lambda: d / (x64 * np.log(10)), "exp2": lambda: d * y64 * np.log(2)}[op]()
    kw = {"relu": dict(x=tx), "log": dict(x=tx), "erf": dict(x=tx), "abs": dict(x=tx), "log1p": dict(x=tx),
          "sin": dict(x=tx), "cos": dict(x=tx), "log2": dict(x=tx), "log10": dict(x=tx),
          "exp2": dict(y=ctx.unary(op, tx)),
          "sqrt": dict(y=ctx.unary(op, tx)), "rsqrt": dict(y=ctx.unary(op, tx)), "expm1": dict(y=ctx.unary(op, tx)),
          "sigmoid": dict(y=ctx.unary(op, tx)),
          "tanh": dict(y=ctx.unary(op, tx)), "exp": dict(y=ctx.unary(op, tx))}.get(op, {})
    got = ctx.unary_backward(op, tdy, **kw).numpy()
    assert got.shape == shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- losses

def np_losses(kind, p, t):
    """(mean loss, d mean / d p) in float64, PyTorch's definitions."""
    n = p.shape[0] if kind == "cross_entropy" else p.size
    with np.errstate(all="ignore"):
        if kind == "mse":
            per, g = (p - t) ** 2, 2 * (p - t)
        elif kind == "bce":
            per = -(t * np.maximum(np.log(p), -100) + (1 - t) * np.maximum(np.log(1 - p), -100))
            g = (p - t) / np.maximum(p * (1 - p), 1e-12)
        elif kind == "bce_with_logits":
            per = np.maximum(p, 0) - p * t + np.log1p(np.exp(-np.abs(p)))
            g = 1 / (1 + np.exp(-p)) - t
        else:
            lse = np.log(np.exp(p - p.max(1, keepdims=True)).sum(1)) + p.max(1) if n else np.zeros(0)
            per = lse - p[np.arange(n), t]
            g = np_softmax(p) if n else p.copy()
            g[np.arange(n), t] -= 1
        return (per.sum() / n if n else np.nan), g / max(n, 1)


@pytest.mark.parametrize("kind", ["mse", "bce", "bce_with_logits", "cross_entropy"])
@pytest.mark.parametrize("n", [0, 1, 6, 13])
def test_loss_and_grad_over_the_actual_rows(ctx, rng, kind, n):
    if kind == "cross_entropy":
        c = int(rng.integers(2, 7))
        p = rng.uniform(-4, 4, (n, c)).astype(np.float32)
        t = rng.integers(0, c, n).astype(np.int64)
    else:
        p = (rng.uniform(0.02, 0.98, n) if kind == "bce" else rng.uniform(-3, 3, n)).astype(np.float32)
        t = (rng.random(n) < 0.5).astype(np.float32) if kind != "mse" else rng.uniform(-1, 1, n).astype(np.float32)
    loss, grad = ctx.loss(kind, rows(ctx, p), rows(ctx, t))
    want_loss, want_grad = np_losses(kind, p.astype(np.float64), t.astype(np.float64) if t.dtype != np.int64 else t)
    got = loss.numpy()
    assert got.shape == () and got.dtype == np.float32
    if n == 0:
        assert np.isnan(got)  # PyTorch's mean of nothing
    else:
        np.testing.assert_allclose(got, want_loss, **F32)
    # BCE's grad divides by p(1 - p): its float32 rounding is amplified where p is near 0 or 1
    np.testing.assert_allclose(grad.numpy(), want_grad, rtol=1e-4 if kind == "bce" else 1e-5, atol=1e-6)


def test_bce_clamps_its_logs_at_minus_100(ctx):
    p = np.array([0.0, 1.0, 0.0, 1.0, 0.5], np.float32)
    t = np.array([1.0, 0.0, 0.0, 1.0, 1.0], np.float32)
    loss, _ = ctx.loss("bce", ctx.from_numpy(p), ctx.from_numpy(t))
    np.testing.assert_allclose(loss.numpy(), (100 + 100 + 0 + 0 + np.log(2)) / 5, **F32)


def test_loss_column_prediction_against_flat_labels(ctx, rng):
    # a [<=B, 1] prediction against [<=B] labels: matched in row-major order
    p = rng.uniform(-2, 2, (7, 1)).astype(np.float32)
    t = rng.uniform(-2, 2, 7).astype(np.float32)
    loss, grad = ctx.loss("mse", rows(ctx, p), rows(ctx, t))
    d = p.astype(np.float64).ravel() - t
    np.testing.assert_allclose(loss.numpy(), np.mean(d ** 2), **F32)
    np.testing.assert_allclose(grad.numpy(), (2 * d / 7).reshape(7, 1), **F32)


def test_cross_entropy_class_out_of_range_raises_at_sync(ctx):
    logits = ctx.from_numpy(np.zeros((3, 4), np.float32))
    loss, _ = ctx.loss("cross_entropy", logits, ctx.from_numpy(np.array([0, 4, 1], np.int64)))
    with pytest.raises(clbound.BoundExceededError) as e:
        loss.numpy()
    assert e.value.status == "ERR_BOUND_EXCEEDED"
    assert "index 4 is outside [0, 4)" in str(e.value)
    ctx.sync()


def test_loss_count_mismatch_raises_at_sync(ctx):
    p = ctx.from_numpy(np.zeros(5, np.float32), bounds=(8,), dynamic=(True,))
    t = ctx.from_numpy(np.zeros(6, np.float32), bounds=(8,), dynamic=(True,))
    ctx.loss("mse", p, t)
    with pytest.raises(clbound.DeviceCheckError) as e:
        ctx.sync()
    assert e.value.status == "ERR_DEVICE_CHECK"


def test_loss_unknown_kind_and_wrong_target_dtype(ctx):
    p = ctx.from_numpy(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="loss kind 'hinge' is not one of mse, bce"):
        ctx.loss("hinge", p, p)
    with pytest.raises(clbound.DTypeError) as e:
        ctx.loss("cross_entropy", p, ctx.from_numpy(np.zeros(2, np.float32)))
    assert e.value.status == "ERR_DTYPE"


# ---------------------------------------------------------------- SGD

@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_step(ctx, rng, momentum):
    w = rng.standard_normal((4, 3)).astype(np.float32)
    tw = ctx.from_numpy(w)
    tv = ctx.from_numpy(np.zeros_like(w)) if momentum else None
    w64, v64 = w.astype(np.float64), np.zeros((4, 3))
    for _ in range(3):
        g = rng.standard_normal((4, 3)).astype(np.float32)
        ctx.sgd_step(tw, ctx.from_numpy(g), lr=0.1, momentum=momentum, velocity=tv)
        v64 = momentum * v64 + g
        w64 -= 0.1 * (v64 if momentum else g)
    np.testing.assert_allclose(tw.numpy(), w64, **F32)
    if momentum:
        np.testing.assert_allclose(tv.numpy(), v64, **F32)


# ---------------------------------------------------------------- lifetime

def test_graphs_close_before_their_context_and_graph_is_exported():
    assert clbound.Graph is clbound.graph.Graph
    c = clbound.Context()
    graphs = [clbound.Graph(c, policy="dynamic") for _ in range(2)]
    for g in graphs:
        g.input("x", np.float32, (4,))
    graphs[0].close()  # closed early: the context does not close it twice
    assert c._graphs == [graphs[1]]
    c.close()
    assert all(g._h is None for g in graphs) and not c._graphs and c._h is None
    c.close()  # idempotent


def test_tensors_of_a_closed_context_raise_instead_of_dangling():
    c = clbound.Context()
    t = c.from_numpy(np.ones((2, 3), np.float32))
    c.close()
    for use in (lambda: t.numpy(), lambda: t.sizes(), lambda: t.dtype, lambda: t.bounds,
                lambda: t.write(np.ones((2, 3))), lambda: c.relu(t), lambda: c.sync()):
        with pytest.raises(clbound.FreedError) as e:
            use()
        assert e.value.status == "ERR_NULL"


def test_graph_tensors_are_borrowed_until_the_next_run_or_close():
    with clbound.Context() as c:
        g = clbound.Graph(c, policy="dynamic")
        x = g.input("x", np.float32, (4,), dynamic=(True,))
        y = g.unary("neg", x)
        g.feed(x, np.arange(3, dtype=np.float32))
        g.run()
        t = g.tensor(y)
        np.testing.assert_array_equal(t.numpy(), [0, -1, -2])
        g.feed(x, np.arange(2, dtype=np.float32))
        g.run()
        with pytest.raises(clbound.FreedError, match="freed"):
            t.numpy()
        t = g.tensor(y)
        np.testing.assert_array_equal(t.numpy(), [0, -1])
        g.close()
        with pytest.raises(clbound.FreedError, match="freed"):
            t.numpy()
