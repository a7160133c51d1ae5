"""The binding's Python conventions and its reach into the C API (issue 20 items 4
and 5, issue 16 item 6): arguments checked before C, numpy's casting rules,
out= on ops, set_sizes, reads at the actual size, nonzero(as_tuple=True),
kernel_style, help() docs. Integer results are compared with numpy exactly."""
import gc
import inspect
import os
import tracemalloc
import warnings
import weakref

import numpy as np
import pytest

import clbound
from clbound.graph import Graph

def sparse(rng, shape, dtype=np.float32, p=0.4):
    a = (rng.integers(1, 9, size=shape) * (rng.random(shape) < p)).astype(dtype)
    return a


def bounded(ctx, a, slack=2):
    if a.ndim == 0:
        return ctx.from_numpy(a)
    return ctx.from_numpy(a, bounds=tuple(s + slack for s in a.shape), dynamic=True)


# ------------------------------------------------- arguments checked before C (16.6)

@pytest.mark.parametrize("bound", [2**64 + 4, 2**63, -(2**63) - 1])
def test_bounds_outside_int64_raise_overflow(ctx, bound):
    # before: ctypes wrapped 2**64 + 4 to 4 and made a 4-element tensor
    with pytest.raises(OverflowError, match=r"bounds\[0\] = .* is outside"):
        ctx.tensor(np.float32, [bound])


@pytest.mark.parametrize("make, exc, match", [
    (lambda c: c.tensor(np.float32, [-1]), ValueError, r"bounds\[0\] = -1 is negative"),
    (lambda c: c.tensor(np.float32, [1] * 9), ValueError, "at most 8"),
    (lambda c: c.tensor(np.float32, [2.0]), TypeError, "must be an integer, not float"),
    (lambda c: c.tensor(np.float16, [2]), TypeError, "no dtype for float16"),
    (lambda c: c.tensor(np.float32, [2, 3], dynamic=[True]), ValueError, "1 flags; the tensor has rank 2"),
    (lambda c: c.tensor(np.float32, "23"), TypeError, "sequence of integers"),
    (lambda c: c.reduce_dim("sum", c.from_numpy(np.ones((2, 3), np.float32)), 2**32), OverflowError, "dim"),
    (lambda c: c.reduce_dim("avg", c.from_numpy(np.ones((2, 3), np.float32)), 0), ValueError, "reduce op 'avg'"),
    (lambda c: c.nonzero_static(c.from_numpy(np.ones(3, np.float32)), 2**64 + 2), OverflowError, "size"),
    (lambda c: c.nonzero_static(c.from_numpy(np.ones(3, np.float32)), 4, fill_value=2**63), OverflowError,
     "fill_value"),
    (lambda c: c.reshape(c.from_numpy(np.ones(6, np.float32)), [2**64 + 2, -1]), OverflowError, r"spec\[0\]"),
    (lambda c: c.reshape(c.from_numpy(np.ones(6, np.float32)), [-2, 3]), ValueError, "below -1"),
    (lambda c: c.tensor(np.float32, [4], dynamic=True).set_sizes([2**64 + 1]), OverflowError, r"sizes\[0\]"),
    (lambda c: c.tensor(np.float32, [4, 2], dynamic=True).set_sizes([1]), ValueError, "1 dims; the tensor has rank 2"),
    (lambda c: c.sgd_step(*[c.from_numpy(np.ones(2, np.float32))] * 2, lr=float("nan")), ValueError, "lr"),
    (lambda c: c.binary("atan2", *[c.from_numpy(np.ones(2, np.float32))] * 2), ValueError, "binary op 'atan2'"),
    (lambda c: c.set_gemm_strategy("fastest"), ValueError, "gemm strategy"),
])
def test_arguments_the_library_would_misread_or_reject_raise_first(ctx, make, exc, match):
    with pytest.raises(exc, match=match):
        make(ctx)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(kernel_style="fast"), ValueError, "kernel_style 'fast' is not one of auto, cpu, gpu"),
    (dict(device=-1), ValueError, "device = -1 is negative"),
    (dict(device=2**64), OverflowError, "device"),
    (dict(device_memory_limit=2**64), OverflowError, "device_memory_limit"),
    (dict(device_memory_limit=-1), OverflowError, "device_memory_limit"),
    (dict(device=""), ValueError, "empty"),
    (dict(device="pthread\0gpu"), ValueError, "NUL"),  # C would read "pthread"
    (dict(cache_dir="/tmp\0x"), ValueError, "NUL"),
])
def test_context_options_are_checked(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        clbound.Context(**kwargs)


def test_graph_arguments_are_checked(ctx):
    with Graph(ctx, policy="dynamic") as g:
        x = g.input("x", np.int32, (4,), dynamic=True)
        with pytest.raises(OverflowError):
            g.input("y", np.float32, (2**64 + 4,))
        with pytest.raises(OverflowError, match="x = 4294967296"):
            g.unary("neg", 2**32)  # before: wrapped to node 0
        with pytest.raises(TypeError, match="graph node"):
            g.unary("neg", ctx.from_numpy(np.ones(2, np.float32)))
        with pytest.raises(ValueError, match="policy 'eager'"):
            Graph(ctx, policy="eager")
        with pytest.raises(TypeError, match="Cannot cast"):
            g.feed(x, [1.5, 2.5])  # float into an int32 input: numpy's same_kind refuses
        g.feed(x, [1.5, 2.5], casting="unsafe")
        y = g.unary("neg", x)
        g.run()
        np.testing.assert_array_equal(g.value(y), np.array([1.5, 2.5]).astype(np.int32) * -1)


# ---------------------------------------------------------------- numpy's casting rules

def test_write_follows_numpy_casting_rules(ctx):
    t = ctx.tensor(np.int32, [3], dynamic=True)
    data = [1.7, np.nan, 3e10]
    # before: stored [1, -2**31, -2**31] silently
    with pytest.raises(TypeError, match="from dtype\\('float64'\\) to dtype\\('int32'\\) according to the rule 'same_kind'"):
        t.write(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy warns about the NaN
        want = np.array(data).astype(np.int32)
        t.write(data, casting="unsafe")
    np.testing.assert_array_equal(t.numpy(), want)
    with pytest.raises(OverflowError, match="Python integer 1099511627776 out of bounds for int32"):
        t.write([1, 2**40, 3])
    with pytest.raises(OverflowError, match="out of bounds for uint8"):
        ctx.tensor(np.uint8, [2]).write([255, 256])
    with pytest.raises(TypeError, match="rule 'safe'"):
        t.write(np.array([1, 2, 3], np.int64), casting="safe")
    big = np.array([2**40 + 5, -7, 9], np.int64)
    t.write(big)  # an int64 array under same_kind: numpy's copyto wraps, and so does write
    np.testing.assert_array_equal(t.numpy(), big.astype(np.int32))
    with pytest.raises(ValueError, match="casting 'loose'"):
        t.write([1, 2, 3], casting="loose")
    f = ctx.tensor(np.float32, [2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy warns about the overflow
        f.write([0.1, 1e39])  # float64 into float32 is same_kind: numpy gives inf, so does write
        np.testing.assert_array_equal(f.numpy(), np.array([0.1, 1e39]).astype(np.float32))


def test_from_numpy_with_a_dtype_converts_under_the_rule(ctx):
    np.testing.assert_array_equal(ctx.from_numpy([1, 2, 3], dtype=np.int32).numpy(), [1, 2, 3])
    with pytest.raises(TypeError):
        ctx.from_numpy([0.5], dtype=np.int64)
    with pytest.raises(TypeError):
        ctx.from_numpy([0, 1], dtype=np.bool_)  # int to bool is not same_kind in numpy


@pytest.mark.parametrize("dtype, value, want", [
    (np.int32, 1.7, 1), (np.int32, -1.7, -1), (np.int64, 2**53, 2**53), (np.uint8, 255, 255),
    (np.float32, 0.1, np.float32(0.1)), (np.bool_, 3, True), (np.float64, float("nan"), np.nan)])
def test_fill_matches_ndarray_fill(ctx, dtype, value, want):
    t = ctx.tensor(dtype, [3])
    ctx.fill(t, value)
    ref = np.empty(3, dtype)
    ref.fill(want)
    np.testing.assert_array_equal(t.numpy(), ref)


@pytest.mark.parametrize("dtype, value, exc", [
    (np.int32, float("nan"), ValueError), (np.int32, float("inf"), ValueError), (np.int32, 2**31, OverflowError),
    (np.uint8, -1, OverflowError), (np.int64, 2**53 + 1, ValueError), (np.int64, 2**63, OverflowError),
    (np.float32, "1", TypeError)])
def test_fill_refuses_what_it_cannot_store(ctx, dtype, value, exc):
    with pytest.raises(exc):
        ctx.fill(ctx.tensor(dtype, [2]), value)


# ------------------------------------------------------------ Tensor arguments

def test_a_numpy_array_for_a_tensor_is_a_type_error_naming_the_argument(ctx):
    x = ctx.from_numpy(np.arange(4, dtype=np.float32))
    m = ctx.from_numpy(np.array([True, False, True, True]))
    # before: AttributeError: _h
    with pytest.raises(TypeError, match="argument 'x' must be a clbound.Tensor, not numpy.ndarray"):
        ctx.masked_select(np.arange(4, dtype=np.float32), m)
    with pytest.raises(TypeError, match="argument 'mask' must be a clbound.Tensor, not list"):
        ctx.masked_select(x, [True, False, True, True])
    with pytest.raises(TypeError, match="argument 'out' must be a clbound.Tensor, not numpy.ndarray"):
        ctx.relu(x, out=np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="argument 'bias'"):
        ctx.linear(ctx.from_numpy(np.ones((2, 3), np.float32)), ctx.from_numpy(np.ones((4, 3), np.float32)), bias=3)


def test_a_freed_tensor_raises_a_clear_error(ctx):
    x = ctx.from_numpy(np.ones(4, np.float32))
    y = ctx.relu(x)
    y.free()
    with pytest.raises(clbound.FreedError, match="argument 'out' was freed") as e:
        ctx.relu(x, out=y)  # before, with raw handles: "belongs to another context"
    assert e.value.status == "ERR_NULL"
    x.free()
    with pytest.raises(clbound.FreedError, match="argument 'a' was freed"):
        ctx.relu(x)
    with clbound.Context() as other:
        z = other.from_numpy(np.ones(4, np.float32))
        with pytest.raises(ValueError, match="argument 'b' belongs to another Context"):
            ctx.add(ctx.from_numpy(np.ones(4, np.float32)), z)


def test_tensor_with_frees_it(ctx):
    with ctx.from_numpy(np.ones(3, np.float32)) as t:
        assert t.numpy().tolist() == [1, 1, 1]
    with pytest.raises(clbound.FreedError, match="freed"):
        t.numpy()


# ---------------------------------------------------------------------------- out=

def test_out_reuses_an_output_across_sizes(ctx, rng):
    y = ctx.tensor(np.float32, [16], dynamic=True)
    for n in (5, 16, 0, 9):
        a = rng.standard_normal(n).astype(np.float32)
        x = ctx.from_numpy(a, bounds=(16,), dynamic=True)
        assert ctx.relu(x, out=y) is y
        np.testing.assert_array_equal(y.numpy(), np.maximum(a, 0))
    b = ctx.from_numpy(np.full(9, 2, np.float32), bounds=(16,), dynamic=True)
    assert ctx.mul(x, b, out=x) is x  # in place
    np.testing.assert_array_equal(x.numpy(), a * 2)
    s = ctx.tensor(np.float32, [])
    assert ctx.sum(x, out=s) is s
    np.testing.assert_allclose(s.numpy(), (a * 2).astype(np.float64).sum(), rtol=1e-6)


def test_masked_scatter_in_place(ctx, rng):
    for shape in [(7,), (3, 5), (2, 3, 4)]:
        base = rng.integers(-50, 50, size=shape).astype(np.int32)
        mask = rng.random(shape) < 0.5
        src = rng.integers(100, 200, size=int(mask.sum()) + 2).astype(np.int32)
        x = bounded(ctx, base)
        out = ctx.masked_scatter(x, bounded(ctx, mask), ctx.from_numpy(src), out=x)
        assert out is x
        want = base.copy()
        want[mask] = src[: mask.sum()]
        np.testing.assert_array_equal(x.numpy(), want)


def test_a_deliberately_small_output_bound(ctx):
    a = np.array([0, 3, 0, 4, 5, 0, 6], np.float32)
    x = ctx.from_numpy(a)
    small = ctx.tensor(np.int64, [2, 1], dynamic=[True, False])
    assert ctx.nonzero(x, out=small) is small
    with pytest.raises(clbound.BoundExceededError, match="exceeds its bound 2") as e:
        ctx.sync()
    assert e.value.status == "ERR_BOUND_EXCEEDED"
    enough = ctx.tensor(np.int64, [4, 1], dynamic=[True, False])
    ctx.nonzero(ctx.from_numpy(np.array([0, 1, 0, 2, 0, 0, 0], np.float32)), out=enough)
    np.testing.assert_array_equal(enough.numpy(), [[1], [3]])
    sel = ctx.tensor(np.float32, [3], dynamic=True)
    ctx.masked_select(x, ctx.from_numpy(a > 3.5), out=sel)
    np.testing.assert_array_equal(sel.numpy(), [4, 5, 6])
    with pytest.raises(clbound.ShapeError, match="dynamic"):
        ctx.masked_select(x, ctx.from_numpy(a > 0), out=ctx.tensor(np.float32, [7]))  # static out


def test_out_on_nonzero_static_loss_and_linear_backward(ctx, rng):
    a = sparse(rng, (4, 5))
    want = np.argwhere(a)
    idx = ctx.tensor(np.int64, [6, 2])
    cnt = ctx.tensor(np.int64, [])
    got_idx, got_cnt = ctx.nonzero_static(ctx.from_numpy(a), 6, fill_value=-3, out=idx, count=cnt, return_count=True)
    assert got_idx is idx and got_cnt is cnt and int(cnt.numpy()) == len(want)
    k = min(6, len(want))
    np.testing.assert_array_equal(idx.numpy()[:k], want[:k])
    assert (idx.numpy()[k:] == -3).all()
    only = ctx.nonzero_static(ctx.from_numpy(a), 2)
    assert isinstance(only, clbound.Tensor) and only.bounds == (2, 2)

    p = rng.standard_normal((3, 2)).astype(np.float32)
    t = rng.standard_normal((3, 2)).astype(np.float32)
    loss_t, grad = ctx.loss("mse", ctx.from_numpy(p), ctx.from_numpy(t), need_grad=False)
    assert grad is None
    np.testing.assert_allclose(loss_t.numpy(), ((p.astype(np.float64) - t) ** 2).mean(), rtol=1e-5)
    g = ctx.tensor(np.float32, [3, 2])
    _, g2 = ctx.loss("mse", ctx.from_numpy(p), ctx.from_numpy(t), out=loss_t, grad=g)
    assert g2 is g
    np.testing.assert_allclose(g.numpy(), 2 * (p.astype(np.float64) - t) / p.size, rtol=1e-5, atol=1e-7)

    x, w, dy = (rng.standard_normal(s).astype(np.float32) for s in ((4, 3), (2, 3), (4, 2)))
    dw = ctx.tensor(np.float32, [2, 3])
    gx, gw, gb = ctx.linear_backward(ctx.from_numpy(x), ctx.from_numpy(w), ctx.from_numpy(dy), need=(), dw=dw)
    assert gx is None and gb is None and gw is dw
    np.testing.assert_allclose(dw.numpy(), dy.astype(np.float64).T @ x, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------- sizes and reads

def test_tensor_starts_at_its_bounds_and_set_sizes_changes_them(ctx):
    t = ctx.tensor(np.int32, [6, 2], dynamic=[True, False])
    assert t.sizes() == (6, 2)  # like numpy.empty: live at the bounds, contents unspecified
    t.write(np.arange(12, dtype=np.int32).reshape(6, 2))
    t.set_sizes([3, 2])
    np.testing.assert_array_equal(t.numpy(), np.arange(6).reshape(3, 2))
    with pytest.raises(clbound.BoundExceededError, match="static"):
        t.set_sizes([3, 1])
    with pytest.raises(clbound.BoundExceededError, match="7 > bound 6"):
        t.set_sizes([7, 2])
    e = ctx.tensor(np.float32, [5, 4], dynamic=[True, False], sizes=(0, 4))
    assert e.numpy().shape == (0, 4)
    z = ctx.zeros([4], np.int64, dynamic=True, sizes=[3])
    np.testing.assert_array_equal(z.numpy(), [0, 0, 0])
    np.testing.assert_array_equal(ctx.full([2, 2], 1.5, np.float32).numpy(), np.full((2, 2), 1.5, np.float32))


def test_numpy_reads_at_the_actual_size_not_the_bound(ctx):
    n = 4_000_000
    a = np.zeros(n, np.float32)
    a[[5, 1_000_003, n - 1]] = 1
    nz = ctx.nonzero(ctx.from_numpy(a))
    assert nz.bounds == (n, 1) and nz.bound_numel == n  # 32 MB at the bound
    before = ctx.counters()["host_syncs"]
    tracemalloc.start()
    got = nz.numpy()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # before: a host buffer at the bound on every read (32 MB here)
    assert peak < 1 << 20, f"numpy() allocated {peak} bytes for 3 rows"
    np.testing.assert_array_equal(got, np.argwhere(a))
    assert ctx.counters()["host_syncs"] - before == 1
    # a live part over the first buffer: read again at exactly its size
    b = np.ones(50_000, np.float32)
    big = ctx.nonzero(ctx.from_numpy(b, bounds=(60_000,), dynamic=True))
    np.testing.assert_array_equal(big.numpy(), np.argwhere(b))
    np.testing.assert_array_equal(np.asarray(big), np.argwhere(b))


# ------------------------------------------------------------ nonzero(as_tuple=True)

@pytest.mark.parametrize("shape", [(), (0,), (1,), (9,), (3, 4), (2, 3, 4), (4, 0, 2), (2, 1, 3, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_nonzero_as_tuple_matches_numpy(ctx, rng, shape, dtype):
    a = sparse(rng, shape, dtype)
    got = ctx.nonzero(bounded(ctx, np.asarray(a)), as_tuple=True)
    want = np.nonzero(np.atleast_1d(a))  # torch treats a 0-d input as 1-D here
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == np.int64 and g.rank == 1
        np.testing.assert_array_equal(g.numpy(), w)


# ------------------------------------------------------------------ kernel_style

@pytest.mark.parametrize("style", ["cpu", "gpu"])
def test_kernel_style_is_chosen_and_both_agree_with_numpy(rng, style):
    with clbound.Context(kernel_style=style) as c:
        assert c.kernel_style == style
        a = sparse(rng, (37, 5), np.int32)
        np.testing.assert_array_equal(c.nonzero(bounded(c, a)).numpy(), np.argwhere(a))
        m = rng.random((37, 5)) < 0.3
        np.testing.assert_array_equal(c.masked_select(bounded(c, a), bounded(c, m)).numpy(), a[m])
    with clbound.Context() as c:
        assert c.kernel_style in ("cpu", "gpu")


# --------------------------------------------------- the rest of the C API

def test_numpy_all_reads_many_tensors_with_one_sync(ctx):
    a = ctx.from_numpy(np.arange(12, dtype=np.float32).reshape(4, 3), bounds=(9, 3), dynamic=(True, False))
    b = ctx.from_numpy(np.array([-7, 0, 2**40], dtype=np.int64))
    e = ctx.from_numpy(np.zeros((0, 2), dtype=np.float64 if ctx.supports("add", np.float64) else np.float32),
                       bounds=(5, 2), dynamic=(True, False))
    m = ctx.compare("gt", a, 4.0)
    before = ctx.counters()["host_syncs"]
    got = ctx.numpy_all([a, b, e, m, a])
    assert ctx.counters()["host_syncs"] == before + 1
    want = [x.numpy() for x in (a, b, e, m, a)]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
    assert ctx.numpy_all([]) == []
    with pytest.raises(TypeError):
        ctx.numpy_all([a, np.zeros(3)])


def test_numpy_all_copy_false_views_the_device_memory(ctx):
    """copy=False: arrays over the tensors' own buffers (one sync, no copy) where
    the device's buffers are host memory, BufferError elsewhere. An array keeps
    its buffer out of the pool past the tensor and the context."""
    a = ctx.from_numpy(np.arange(12, dtype=np.float32).reshape(4, 3), bounds=(9, 3), dynamic=(True, False))
    m = ctx.compare("gt", a, 4.0)
    e = ctx.from_numpy(np.zeros((0, 2), dtype=np.int64), bounds=(5, 2), dynamic=(True, False))
    try:
        before = ctx.counters()["host_syncs"]
        got = ctx.numpy_all([a, m, e], copy=False)
    except BufferError as err:
        assert "not host memory" in str(err), err
        assert ctx.kernel_style != "cpu" or os.environ.get("CLBOUND_HOST_PTRS") == "off"
        return
    assert ctx.counters()["host_syncs"] == before + 1
    for g, w in zip(got, (np.arange(12, dtype=np.float32).reshape(4, 3), np.arange(12).reshape(4, 3) > 4,
                          np.zeros((0, 2), dtype=np.int64))):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
    ctx.neg(a, out=a)  # the same memory: an op writing the tensor shows in the array after a sync
    ctx.sync()
    np.testing.assert_array_equal(got[0], -np.arange(12, dtype=np.float32).reshape(4, 3))
    del a, m
    gc.collect()
    fill = ctx.from_numpy(np.full((9, 3), 5, dtype=np.float32))  # a buffer of the freed tensor's size
    ctx.sync()
    np.testing.assert_array_equal(got[0], -np.arange(12, dtype=np.float32).reshape(4, 3))
    del fill


def test_numpy_all_sync_false_views_before_the_wait(ctx):
    """sync=False: views of static tensors made with no host sync while their
    ops are queued; after a sync they hold the ops' results. A dynamic dim is
    a ShapeError, a copy without the sync a ValueError."""
    x = ctx.from_numpy(np.linspace(-3, 3, 300 * 40, dtype=np.float32).reshape(300, 40))
    ctx.sync()
    y = ctx.relu(ctx.neg(x))
    before = ctx.counters()["host_syncs"]
    try:
        (got,) = ctx.numpy_all([y], copy=False, sync=False)
    except BufferError as err:
        assert "not host memory" in str(err), err
        assert ctx.kernel_style != "cpu" or os.environ.get("CLBOUND_HOST_PTRS") == "off"
        return
    assert ctx.counters()["host_syncs"] == before  # no wait
    assert got.shape == (300, 40) and got.dtype == np.float32
    ctx.sync()
    np.testing.assert_array_equal(got, np.maximum(-np.linspace(-3, 3, 300 * 40, dtype=np.float32), 0).reshape(300, 40))
    d = ctx.from_numpy(np.ones((3, 2), dtype=np.float32), bounds=(8, 2), dynamic=(True, False))
    with pytest.raises(clbound.ShapeError, match="dynamic dim 0"):
        ctx.numpy_all([y, d], copy=False, sync=False)
    with pytest.raises(ValueError, match="sync=False"):
        ctx.numpy_all([y], sync=False)


def test_from_dlpack_borrow_skips_the_host_copy(ctx):
    """borrow=True: the device copies from the object when its write runs; the
    object is held until then (a sync at the latest) and let go after."""
    a = np.arange(20, dtype=np.float32).reshape(5, 4)
    want = a.copy()
    ref = weakref.ref(a)
    t = ctx.from_dlpack(a, bounds=(8, 4), dynamic=(True, False), borrow=True)
    del a
    gc.collect()
    assert ref() is not None  # the queued write still reads it
    ctx.sync()
    gc.collect()
    assert ref() is None  # let go once the write is done
    assert t.shape == (5, 4) and t.bounds == (8, 4)
    np.testing.assert_array_equal(t.numpy(), want)
    # what is copied anyway: a strided array, bool; and the sharing mode is another thing
    s = ctx.from_dlpack(want[:, ::2], borrow=True)
    np.testing.assert_array_equal(s.numpy(), want[:, ::2])
    b = ctx.from_dlpack(want > 7, borrow=True)
    np.testing.assert_array_equal(b.numpy(), want > 7)
    with pytest.raises(ValueError, match="borrow=True"):
        ctx.from_dlpack(want, copy=False, borrow=True)
    with pytest.raises(clbound.ClboundError, match="bound"):
        ctx.from_dlpack(want, bounds=(2, 4), dynamic=(True, False), borrow=True)


def test_host_blas_names_its_kernels(ctx):
    """One line naming OpenBLAS's kernels in force (or why there is none); the
    matmul that runs on them (host BLAS on a CPU device) matches a double reference."""
    line = clbound.host_blas()
    assert line == clbound.host_blas()
    if line.startswith("none: "):  # a build or machine without OpenBLAS: the reason
        assert len(line) > len("none: ")
        return
    assert line.startswith("OpenBLAS ") and "; core " in line, line
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((67, 45)).astype(np.float32), rng.standard_normal((45, 29)).astype(np.float32)
    got = ctx.matmul(ctx.from_numpy(a), ctx.from_numpy(b)).numpy()
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=0, atol=1e-4)


def test_devices_op_names_counters_and_log(ctx, tmp_path):
    devs = clbound.devices()
    assert devs and devs[0].name and devs[0].compute_units >= 1
    assert "masked_scatter" in clbound.op_names()
    lines = []
    with clbound.Context(cache_dir=tmp_path) as c:
        assert c.cache_dir == str(tmp_path)
        c.set_log(["syncs", "builds"], lambda cat, line: lines.append((cat, line)))
        x = c.from_numpy(np.arange(5, dtype=np.float32))
        c.relu(x)
        before = c.counters()["host_syncs"]
        c.sync()
        assert c.counters()["host_syncs"] == before + 1
        # the counters dict has the metrics file's counters, equal to them
        counts, metrics = c.counters(), c.metrics()
        for key in ("kernel_launches", "kernels_compiled", "first_launches", "build_ms", "store_local",
                    "store_handoffs", "programs_upgraded", "context_free_ms", "host_sync_blocks"):
            assert counts[key] == metrics[key], key
        assert counts["first_launches"] == 1  # relu, once, at one local size
        c.set_log("none")
        c.sync()
    cats = {cat for cat, _ in lines}
    assert cats == {"syncs", "builds"}, lines
    assert sum(cat == "syncs" for cat, _ in lines) == 1
    with clbound.Context(cache_dir="off") as c:
        assert c.cache_dir is None
    # the relu program built in the first context is written by the background
    # store; cache_wait returns once it is on disk
    clbound.cache_wait()
    assert clbound.cache_pending() == 0
    entries, size = clbound.cache_info(tmp_path)
    assert entries >= 1 and size > 0
    clbound.cache_clear(tmp_path)
    assert clbound.cache_info(tmp_path) == (0, 0)


def test_wrap_a_context_over_existing_opencl_handles(ctx):
    with clbound.Context.wrap(ctx.cl_context, ctx.cl_queue) as w:
        assert w.cl_context == ctx.cl_context and w.cl_device == ctx.cl_device
        a = np.array([[0, 2], [3, 0]], np.int64)
        np.testing.assert_array_equal(w.nonzero(w.from_numpy(a)).numpy(), np.argwhere(a))
    np.testing.assert_array_equal(ctx.neg(ctx.from_numpy(np.ones(2, np.float32))).numpy(), [-1, -1])


def test_graph_param_zeros_and_buckets(ctx):
    with Graph(ctx, policy="bucketed") as g:
        x = g.input("x", np.float32, (64,), dynamic=True)
        b = g.param("b", dtype=np.float32, shape=(), trainable=False)
        y = g.binary("add", x, b)
        g.set_buckets([8, 64], input=x, dim=0)
        for n in (3, 5, 40):
            g.feed(x, np.arange(n, dtype=np.float32))
            g.run()
            np.testing.assert_array_equal(g.value(y), np.arange(n))
        assert g.stats()["plans_compiled"] == 2  # buckets 8 and 64
        with pytest.raises(ValueError, match="both input and dim"):
            g.set_buckets([64], input=x)


# ------------------------------------------------------------------ conventions

def test_version_and_help():
    assert clbound.__version__.count(".") == 2
    public = [clbound.Context, clbound.Tensor, clbound.Graph]
    for cls in public:
        assert cls.__doc__
        for name, member in inspect.getmembers(cls):
            if name.startswith("_") or not (inspect.isfunction(member) or isinstance(member, property)):
                continue
            assert (member.__doc__ or "").strip(), f"{cls.__name__}.{name} has no docstring"
    sig = inspect.signature(clbound.Context.masked_scatter)
    assert "out" in sig.parameters and sig.return_annotation in ("Tensor", "'Tensor'", clbound.Tensor)
    assert "masked_scatter_" in clbound.Context.masked_scatter.__doc__
    assert "numpy.empty" in clbound.Context.tensor.__doc__
    assert inspect.signature(clbound.Context.add).parameters.keys() == {"self", "a", "b", "out"}
