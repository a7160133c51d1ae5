"""Graphs from Python: training against a numpy double reference, plans per
policy, and the deferred device check."""
import numpy as np
import pytest

import clbound
from clbound.graph import Graph


@pytest.fixture(scope="module")
def ctx():
    c = clbound.Context()
    yield c
    c.close()


def reference_steps(w0, b0, batches, lr):
    """Linear regression with MSE and plain SGD, in float64."""
    w, b, losses = w0.astype(np.float64), b0.astype(np.float64), []
    for x, t in batches:
        x, t = x.astype(np.float64), t.astype(np.float64)
        d = x @ w.T + b - t
        losses.append(float(np.mean(d * d)))
        g = 2 * d / d.size
        w, b = w - lr * (g.T @ x), b - lr * g.sum(axis=0)
    return losses, w, b


# plans for the sizes 5, 5, 17, 64, 3, 17: dynamic one; automatic static at 5,
# then bounded; static one per distinct size; bucketed one per power of two hit
# (8, 32, 64, 4)
@pytest.mark.parametrize("policy,plans", [("dynamic", 1), ("automatic", 2), ("static", 4), ("bucketed", 4)])
def test_training_matches_reference(ctx, policy, plans):
    rng = np.random.default_rng(3)
    g = Graph(ctx, policy=policy, name="reg-" + policy)
    x = g.input("x", np.float32, (64, 3), (True, False))
    t = g.input("t", np.float32, (64, 1), (True, False))
    w0 = rng.standard_normal((1, 3)).astype(np.float32)
    b0 = np.array([0.25], np.float32)
    w = g.param("w", w0)
    b = g.param("b", b0)
    loss = g.loss("mse", g.linear(x, w, b), t)
    g.train(loss, lr=0.05)
    sizes = [5, 5, 17, 64, 3, 17]
    batches, losses = [], []
    for n in sizes:
        xs = rng.standard_normal((n, 3)).astype(np.float32)
        ts = (xs @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.3).astype(np.float32)
        batches.append((xs, ts))
        g.feed(x, xs)
        g.feed(t, ts)
        g.run()
        losses.append(float(g.value(loss)))
    ref, wr, br = reference_steps(w0, b0, batches, 0.05)
    np.testing.assert_allclose(losses, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.value(w), wr, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.value(b), br, rtol=1e-5, atol=1e-6)
    s = g.stats()
    assert s["plans_compiled"] == plans
    assert s["runs"] == len(sizes)
    assert (g.last_reason == "") == (plans == 1)
    g.close()


def test_borrowed_feeds_train_as_copied_ones(ctx):
    """feed(borrow=True): the same losses as copied feeds; the array is held
    until its run's write is done (the value()'s sync), and only that run reads
    it: a second run without a new feed is refused; a float64 array is converted
    (a copy then) and still trains the same."""
    import gc
    import weakref
    from clbound import graph as G
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal((1, 3)).astype(np.float32)
    batches = []
    for n in (5, 17, 64, 3):
        xs = rng.standard_normal((n, 3)).astype(np.float32)
        batches.append((xs, (xs @ np.array([[1.0], [-2.0], [0.5]], np.float32)).astype(np.float32)))
    runs = {}
    for borrow in (False, True):
        g = Graph(ctx, policy="dynamic", name="borrow-%s" % borrow)
        x = g.input("x", np.float32, (64, 3), (True, False))
        t = g.input("t", np.float32, (64, 1), (True, False))
        loss = g.loss("mse", g.linear(x, g.param("w", w0)), t)
        g.train(loss, lr=0.05)
        losses = []
        for i, (xs, ts) in enumerate(batches):
            xa = xs.astype(np.float64) if borrow and i == 1 else xs.copy()
            ref = weakref.ref(xa)
            held = len(G._fed)
            g.feed(x, xa, borrow=borrow)
            g.feed(t, ts, borrow=borrow)
            del xa
            gc.collect()
            if borrow:
                assert len(G._fed) == held + 2 and (i == 1 or ref() is not None)  # held for the run
            g.run()
            losses.append(float(g.value(loss)))
            if borrow:
                assert len(G._fed) == held and ref() is None  # released after the write
        if borrow:
            with pytest.raises(clbound.ClboundError, match="fed borrowed"):
                g.run()
        runs[borrow] = losses
        g.close()
    assert runs[True] == runs[False]


def test_deferred_check(ctx):
    g = Graph(ctx, policy="dynamic")
    a = g.input("a", np.float32, (6,))
    b = g.input("b", np.float32, (6,))
    fa = g.cast(g.reshape(g.nonzero(a), (-1,)), np.float32)
    fb = g.cast(g.reshape(g.nonzero(b), (-1,)), np.float32)
    loss = g.loss("mse", fa, fb)
    assert "deferred check on the device" in g.describe()
    g.feed(a, np.array([0, 1, 0, 2, 3, 0], np.float32))
    g.feed(b, np.array([0, 5, 0, 1, 1, 0], np.float32))
    g.run()
    assert float(g.value(loss)) == 0.0
    g.feed(b, np.array([1, 1, 0, 1, 1, 0], np.float32))
    g.run()
    with pytest.raises(clbound.DeviceCheckError) as e:
        ctx.sync()
    assert e.value.status == "ERR_DEVICE_CHECK"
    g.close()


def test_pow_and_floor_divide_nodes_match_numpy(ctx):
    g = Graph(ctx, policy="dynamic")
    x = g.input("x", np.float32, (8, 3), (True, False))
    e = g.param("e", np.array([2, 0.5, -1], np.float32), trainable=False)
    p = g.binary("pow", g.unary("relu", x), e)
    q = g.binary("floor_divide", x, g.scalar(np.float32, 0.7))
    i = g.input("i", np.int32, (8,), (True,))
    iq = g.binary("floor_divide", i, g.scalar(np.int32, -3))
    with pytest.raises(clbound.DTypeError, match="not floating"):
        g.binary("pow", i, i)
    for n in (5, 8, 1):
        a = np.linspace(-2, 3, n * 3, dtype=np.float32).reshape(n, 3)
        k = np.arange(-n, n, 2, dtype=np.int32)
        g.feed(x, a)
        g.feed(i, k)
        g.run()
        with np.errstate(divide="ignore"):
            want = np.maximum(a, 0) ** np.array([2, 0.5, -1], np.float32)
        np.testing.assert_allclose(g.value(p), want, rtol=1e-6)
        np.testing.assert_array_equal(g.value(q), a // np.float32(0.7))
        np.testing.assert_array_equal(g.value(iq), k // -3)
    g.close()


@pytest.mark.parametrize("op", ["erf", "sin", "exp2"])
@pytest.mark.parametrize("fused_loss", [True, False])
def test_training_through_erf_matches_float64(ctx, fused_loss, op):
    """A training step through erf (sin, exp2): as the loss's activation (the
    graph's fused loss kernel) or inside an elementwise group (erf(z) + z),
    whose backward is clb_unary_backward's; the losses and the weights after
    each SGD step against numpy in float64 (erf from math)."""
    import math
    fn, dfn = {"erf": (np.vectorize(math.erf), lambda z: 2 / math.sqrt(math.pi) * np.exp(-z * z)),
               "sin": (np.sin, np.cos), "exp2": (np.exp2, lambda z: np.exp2(z) * math.log(2))}[op]
    rng = np.random.default_rng(7)
    w0 = rng.standard_normal((1, 3)).astype(np.float32)
    g = Graph(ctx, policy="dynamic")
    x = g.input("x", np.float32, (32, 3), (True, False))
    t = g.input("t", np.float32, (32, 1), (True, False))
    w = g.param("w", w0)
    z_ = g.linear(x, w)
    e = g.unary(op, z_)
    pred = e if fused_loss else g.binary("add", e, z_)
    loss = g.loss("mse", pred, t)
    g.train(loss, lr=0.1)
    wr = w0.astype(np.float64)
    for n in (7, 32, 3):
        xs = rng.standard_normal((n, 3)).astype(np.float32)
        ts = rng.uniform(-0.5, 1, (n, 1)).astype(np.float32)
        g.feed(x, xs)
        g.feed(t, ts)
        g.run()
        z = xs.astype(np.float64) @ wr.T
        p = fn(z) + (0.0 if fused_loss else z)
        dz = 2 * (p - ts) / n * (dfn(z) + (0.0 if fused_loss else 1.0))
        np.testing.assert_allclose(float(g.value(loss)), np.mean((p - ts) ** 2), rtol=1e-5)
        wr = wr - 0.1 * (dz.T @ xs)
        np.testing.assert_allclose(g.value(w), wr, rtol=1e-5, atol=1e-6)
    g.close()


def test_bad_feed(ctx):
    g = Graph(ctx, policy="dynamic")
    x = g.input("x", np.float32, (4, 2), (True, False))
    with pytest.raises(clbound.BoundExceededError) as e:
        g.feed(x, np.zeros((5, 2), np.float32))
    assert e.value.status == "ERR_OUT_OF_BOUNDS"
    g.close()


def test_demo_matches_its_float64_reference(capsys):
    """python -m clbound.demo under the dynamic policy: one plan, no graph host
    sync, every loss within 1e-4 of the float64 numpy training (its exit status)."""
    from clbound import demo
    assert demo.main(["--iterations", "20", "--policy", "dynamic"]) == 0
    r = demo.train("dynamic", 20)
    assert r["plans_compiled"] == 1 and r["host_syncs"] == 0
    ref = demo.reference(20)
    assert max(abs(a - b) for a, b in zip(r["losses"], ref)) <= 1e-4
    assert "dynamic" in capsys.readouterr().out


def test_free_intermediates_keeps_results_and_kept_nodes():
    with clbound.Context() as c:
        g = clbound.Graph(c, policy="dynamic", free_intermediates=True)
        x = g.input("x", np.float32, (64, 8), dynamic=(True, False))
        r = g.unary("relu", x)
        e = g.unary("exp", r)
        s = g.reduce("sum", g.unary("neg", e))
        g.keep(e)
        a = np.linspace(-2, 2, 40 * 8, dtype=np.float32).reshape(40, 8)
        g.feed(x, a)
        g.run()
        ref = np.exp(np.maximum(a.astype(np.float64), 0))
        np.testing.assert_allclose(g.value(e), ref, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(g.value(s), -ref.sum(), rtol=1e-5)
        with pytest.raises(clbound.InvalidArgumentError):
            g.tensor(r)  # released after exp read it
