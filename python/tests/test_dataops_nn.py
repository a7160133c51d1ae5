"""The binding's data-dependent and MLP ops against numpy (float64 references),
on random shapes inside random bounds, including empty and broadcast cases."""
import numpy as np
import pytest

import clbound

RNG = np.random.default_rng(7)
# f32 results against float64 numpy: relative 1e-5 plus absolute 1e-6 per element
F32_TOL = dict(rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def ctx():
    with clbound.Context() as c:
        yield c


def bounded(ctx, a, extra=3):
    """a as a tensor whose dims are dynamic with a bound above their size, except
    dims of size 1, which stay static so that they broadcast (broadcasting is
    decided on the bounds)."""
    bounds = tuple(s if s == 1 else s + extra for s in a.shape)
    return ctx.from_numpy(a, bounds=bounds, dynamic=tuple(s != 1 for s in a.shape))


def values(dtype, shape, density):
    nz = RNG.random(shape) < density
    if dtype == np.bool_:
        return nz
    v = RNG.integers(1, 50, size=shape).astype(dtype)
    return np.where(nz, v, 0).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_])
@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (5, 4), (3, 0, 2), (2, 3, 4, 5), ()])
@pytest.mark.parametrize("density", [0.0, 0.3, 1.0])
def test_nonzero(ctx, dtype, shape, density):
    if dtype == np.float64 and not ctx.supports("nonzero", np.float64):
        pytest.skip("the device has no fp64")
    a = values(dtype, shape, density)
    t = bounded(ctx, a) if a.ndim else ctx.from_numpy(a)
    got = ctx.nonzero(t).numpy()
    want = np.argwhere(a).astype(np.int64)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def test_nonzero_static(ctx):
    a = values(np.float32, (6, 5), 0.4)
    want = np.argwhere(a)
    for size in (0, 3, len(want), len(want) + 4):
        idx, count = ctx.nonzero_static(bounded(ctx, a), size, fill_value=-7, return_count=True)
        got = idx.numpy()
        assert got.shape == (size, 2)
        k = min(size, len(want))
        np.testing.assert_array_equal(got[:k], want[:k])
        assert (got[k:] == -7).all()
        assert int(count.numpy()) == len(want)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("xshape,mshape", [((6, 5), (6, 5)), ((6, 5), (5,)), ((5,), (4, 5)), ((3, 1, 4), (1, 2, 4)),
                                           ((0, 4), (4,)), ((), (3,))])
def test_masked_select_broadcasts(ctx, dtype, xshape, mshape):
    x = values(dtype, xshape, 0.9)
    m = RNG.random(mshape) < 0.5
    tx = bounded(ctx, x) if x.ndim else ctx.from_numpy(x)
    got = ctx.masked_select(tx, bounded(ctx, m)).numpy()
    xb, mb = np.broadcast_arrays(x, m)
    np.testing.assert_array_equal(got, xb[mb])


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8])
@pytest.mark.parametrize("xshape,mshape", [((6, 5), (6, 5)), ((6, 5), (5,)), ((2, 3, 4), (3, 1)), ((0, 3), (3,))])
def test_masked_scatter(ctx, dtype, xshape, mshape):
    x = values(dtype, xshape, 0.9)
    m = RNG.random(mshape) < 0.5
    mb = np.broadcast_to(m, xshape)
    src = (100 + np.arange(mb.sum() + 2)).astype(dtype).reshape(-1, 1)
    got = ctx.masked_scatter(bounded(ctx, x), bounded(ctx, m), ctx.from_numpy(src)).numpy()
    want = x.copy()
    want[mb] = src.ravel()[: mb.sum()]
    np.testing.assert_array_equal(got, want)


def test_masked_scatter_short_source_is_an_error_at_sync(ctx):
    x = np.zeros((4, 4), np.float32)
    m = np.ones((4, 4), bool)
    out = ctx.masked_scatter(bounded(ctx, x), bounded(ctx, m), ctx.from_numpy(np.ones(5, np.float32)))
    with pytest.raises(clbound.ShortSourceError) as e:
        out.numpy()
    assert e.value.status == "ERR_SHORT_SOURCE"
    assert "16" in str(e.value) and "5" in str(e.value)
    ctx.sync()  # the error was reported once and cleared


def test_mask_must_be_bool(ctx):
    x = ctx.from_numpy(np.ones((3,), np.float32))
    with pytest.raises(clbound.DTypeError, match="must be bool"):
        ctx.masked_select(x, ctx.from_numpy(np.ones((3,), np.float32)))


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 5, 3), (33, 17, 9), (0, 4, 3)])
def test_matmul_and_linear(ctx, m, k, n):
    a = RNG.uniform(-1, 1, (m, k)).astype(np.float32)
    w = RNG.uniform(-1, 1, (n, k)).astype(np.float32)
    b = RNG.uniform(-1, 1, (n,)).astype(np.float32)
    ta = ctx.from_numpy(a, bounds=(m + 5, k), dynamic=(True, False))
    tw, tb = ctx.from_numpy(w), ctx.from_numpy(b)
    ref = a.astype(np.float64) @ w.astype(np.float64).T
    tol = dict(rtol=1e-5, atol=1e-5 * k)
    np.testing.assert_allclose(ctx.matmul(ta, tw, trans_b=True).numpy(), ref, **tol)
    np.testing.assert_allclose(ctx.linear(ta, tw, tb).numpy(), ref + b, **tol)
    np.testing.assert_allclose(ctx.linear(ta, tw).numpy(), ref, **tol)


def test_softmax_and_log_softmax(ctx):
    x = RNG.uniform(-5, 5, (6, 9)).astype(np.float32)
    t = ctx.from_numpy(x, bounds=(10, 9), dynamic=(True, False))
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    sm = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(ctx.softmax(t).numpy(), sm, **F32_TOL)
    np.testing.assert_allclose(ctx.log_softmax(t).numpy(), np.log(sm), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 5, 12])
def test_losses_average_over_the_actual_rows(ctx, rows):
    p = RNG.uniform(0.05, 0.95, (rows,)).astype(np.float32)
    y = (RNG.random(rows) < 0.5).astype(np.float32)
    tp = ctx.from_numpy(p, bounds=(16,), dynamic=(True,))
    ty = ctx.from_numpy(y, bounds=(16,), dynamic=(True,))
    p64, y64 = p.astype(np.float64), y.astype(np.float64)
    loss, grad = ctx.loss("mse", tp, ty)
    np.testing.assert_allclose(loss.numpy(), np.mean((p64 - y64) ** 2), **F32_TOL)
    np.testing.assert_allclose(grad.numpy(), 2 * (p64 - y64) / rows, **F32_TOL)
    loss, grad = ctx.loss("bce", tp, ty)
    bce = -(y64 * np.log(p64) + (1 - y64) * np.log(1 - p64))
    np.testing.assert_allclose(loss.numpy(), bce.mean(), **F32_TOL)
    loss, _ = ctx.loss("bce_with_logits", tp, ty)
    s = 1 / (1 + np.exp(-p64))
    np.testing.assert_allclose(loss.numpy(), (-(y64 * np.log(s) + (1 - y64) * np.log(1 - s))).mean(), **F32_TOL)
    logits = RNG.uniform(-3, 3, (rows, 4)).astype(np.float32)
    cls = RNG.integers(0, 4, rows).astype(np.int64)
    tl = ctx.from_numpy(logits, bounds=(16, 4), dynamic=(True, False))
    tc = ctx.from_numpy(cls, bounds=(16,), dynamic=(True,))
    loss, _ = ctx.loss("cross_entropy", tl, tc)
    l64 = logits.astype(np.float64)
    lse = np.log(np.exp(l64).sum(axis=1))
    np.testing.assert_allclose(loss.numpy(), (lse - l64[np.arange(rows), cls]).mean(), **F32_TOL)


def test_supports_matches_the_library(ctx):
    assert ctx.supports("masked_select", np.int32)
    assert ctx.supports("matmul", np.float32)
    assert not ctx.supports("matmul", np.int32)
    assert not ctx.supports("add", np.bool_)
    assert not ctx.supports("add", np.float16)  # no clbound dtype
    with pytest.raises(ValueError, match="'no such op' is not one of add, sub"):
        ctx.supports("no such op", np.float32)


def test_context_close_closes_its_graphs():
    c = clbound.Context()
    g = clbound.Graph(c, policy="dynamic")
    g.input("x", np.float32, (4,))
    c.close()
    assert g._h is None and not c._graphs
