"""Issue 31: the binding as a numpy or PyTorch user writes it. Shapes read on
demand next to the bounds, operators and comparisons against numpy on the same
inputs (dynamic sizes that change per call, scalars, broadcasting, promotion),
no host sync from any operator, exceptions by class, numpy-order constructors,
axis=, torch dtypes. Integers compare exactly; floats against numpy in float64
within 1e-6 relative (float32) or 1e-12 (float64)."""
import os
import warnings

import numpy as np
import pytest

import clbound


def close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if got.dtype.kind == "f":
        tol = 1e-6 if got.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


def syncs(ctx):
    return ctx.counters()["host_syncs"]


def dyn(ctx, a, bound=16):
    """a as a tensor whose dim 0 is dynamic up to `bound`."""
    return ctx.from_numpy(a, bounds=(bound,) + a.shape[1:], dynamic=(True,) + (False,) * (a.ndim - 1))


# ---------------------------------------------------------------- facts

def test_shape_is_read_on_demand_and_bounds_are_separate(ctx, rng):
    x = ctx.tensor(np.float32, (100, 3), dynamic=(True, False))
    for n in (7, 0, 100, 1):  # the actual size changes per call
        x.write(rng.random((n, 3)).astype(np.float32))
        before = syncs(ctx)
        assert x.shape == (n, 3) and len(x) == n
        assert syncs(ctx) == before + 2  # each read is one counted host sync
        assert x.bounds == (100, 3) and x.dynamic == (True, False)
        assert x.ndim == 2 and x.dim() == 2 and x.dtype == np.dtype(np.float32) and x.numel() == 3 * n
        assert repr(x) == f"<clbound.Tensor float32 shape=({n}, 3) bounds=(<=100, 3)>"
    s = ctx.from_numpy(np.array(2.5, np.float32))
    assert s.shape == () and s.ndim == 0 and repr(s) == "<clbound.Tensor float32 shape=() bounds=()>"
    with pytest.raises(TypeError, match="0-d"):
        len(s)
    assert float(s) == 2.5 and s.item() == 2.5 and int(s) == 2 and bool(s) is True
    one = dyn(ctx, np.array([[7]], np.int64))
    assert int(one) == 7 and one.item() == 7 and isinstance(one.item(), int)
    many = dyn(ctx, np.ones((3, 2), np.float32))
    with pytest.raises(TypeError, match="one element"):
        float(many)
    with pytest.raises(ValueError, match="6 elements"):
        many.item()
    with pytest.raises(ValueError, match="ambiguous"):
        bool(many)
    assert many.tolist() == [[1.0, 1.0]] * 3


# ---------------------------------------------------------------- operators

OPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
    "%": lambda a, b: a % b, "//": lambda a, b: a // b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}


def values(rng, shape, dtype):
    if np.dtype(dtype).kind == "f":
        v = (rng.integers(-4, 5, shape) / 2).astype(dtype)  # ties for ==
        return np.where(v == 0, 1.5, v).astype(dtype)  # no division by zero
    if np.dtype(dtype).kind == "u":
        return rng.integers(1, 9, shape).astype(dtype)
    v = rng.integers(-6, 7, shape).astype(dtype)
    return np.where(v == 0, 3, v).astype(dtype)  # no integer % 0


@pytest.mark.parametrize("da, db", [(np.float32, np.float32), (np.float64, np.float64), (np.int32, np.int32),
                                    (np.int64, np.int64), (np.int32, np.float32), (np.uint8, np.int32),
                                    (np.int32, np.int64), (np.float32, np.float64)])
def test_operators_match_numpy_with_dynamic_sizes(ctx, rng, da, db):
    x = ctx.tensor(da, (12, 3), dynamic=(True, False))
    y = ctx.tensor(db, (3,))
    b = values(rng, (3,), db)
    y.write(b)
    for n in (5, 12, 0, 1):
        a = values(rng, (n, 3), da)
        x.write(a)
        for name, f in OPS.items():
            want = f(a, b)
            close(f(x, y).numpy(), want)
            close(f(y, x).numpy(), f(b, a))
        if np.dtype(da).kind == "f":
            w = values(rng, (3, 2), da)
            close((x @ ctx.from_numpy(w)).numpy(), a @ w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_floor_divide_and_pow_match_numpy_at_their_edges(ctx, dtype):
    """// is Python's floor division (1 // 0.1 is 9, signs, x // 0 inf or nan),
    exactly as numpy's; ** is pow, within float rounding, with numpy's nan for
    a negative base to a fraction; integer ** integer is refused."""
    a = np.array([1, -7, 7, -7.5, 0, 5, 0, -1, 3.5, -0.0], dtype)
    b = np.array([0.1, 2, -2, 2, 3, 0, 0, 3, -0.5, 1], dtype)
    x, y = dyn(ctx, a), dyn(ctx, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = a // b
    got = (x // y).numpy()
    np.testing.assert_array_equal(got, want)
    assert (np.signbit(got) == np.signbit(want)).all()
    np.testing.assert_array_equal((x // 2).numpy(), a // 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal((7 // y).numpy(), 7 // b)
    p = np.array([0, 2, 4, 0.5, 10, 3, 1, 9], dtype)
    e = np.array([0, -1, 0.5, 2, -2, 0, 1e30, 2], dtype)
    xp, xe = dyn(ctx, p), dyn(ctx, e)
    close((xp ** xe).numpy(), p ** e)
    close((xp ** 2).numpy(), p ** 2)
    with np.errstate(over="ignore"):
        close((2 ** xe).numpy(), 2 ** e)
    with np.errstate(invalid="ignore"):
        assert np.isnan((dyn(ctx, np.array([-8], dtype)) ** (1 / 3)).numpy()).all()
    z = dyn(ctx, a.copy())
    z //= 2
    np.testing.assert_array_equal(z.numpy(), a // 2)
    z **= 2
    close(z.numpy(), (a // 2) ** 2)


def test_integer_floor_divide_and_pow(ctx):
    a = np.array([-7, 7, 0, -2**31, 9, -9, 6, -1], np.int32)
    b = np.array([2, -2, -3, -1, 3, 4, -4, 7], np.int32)
    x, y = dyn(ctx, a), dyn(ctx, b)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal((x // y).numpy(), a // b)  # -2**31 // -1 wraps, as numpy's
    np.testing.assert_array_equal((x // 3).numpy(), a // 3)
    np.testing.assert_array_equal((x // 2.5).numpy(), a // 2.5)  # float64, as numpy's
    x // dyn(ctx, np.zeros(8, np.int32))
    with pytest.raises(clbound.DivisionByZeroError, match="floor_divide"):
        ctx.sync()
    with pytest.raises(clbound.DTypeError, match="integer powers"):
        x ** 2
    close((x ** 0.5).numpy()[a >= 0], (a ** 0.5)[a >= 0])  # a float exponent: float64, as numpy's
    close(ctx.pow(x.float(), 2).numpy(), a.astype(np.float32) ** 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_])
@pytest.mark.parametrize("scalar", [2, 1.5, True])
def test_scalars_promote_as_numpy(ctx, rng, dtype, scalar):
    """Python scalars are weak (NEP 50): numpy 1.24 and 2.x agree on these values."""
    a = values(rng, (6, 2), dtype) if dtype != np.bool_ else rng.integers(0, 2, (6, 2)).astype(bool)
    x = dyn(ctx, a)
    for name in ("+", "*", "-", "/", "<", "==", "!="):
        if dtype == np.bool_ and name == "-" and scalar is True:
            continue  # numpy refuses bool - bool too (checked below)
        for f in (lambda t, s: OPS[name](t, s), lambda t, s: OPS[name](s, t)):
            with np.errstate(divide="ignore", invalid="ignore"):  # True / False is inf on both sides
                close(f(x, scalar).numpy(), f(a, scalar))
    with pytest.raises(TypeError):
        np.subtract(np.ones(2, bool), True)
    if dtype == np.bool_:
        with pytest.raises(clbound.DTypeError, match="bool"):
            x - True


def test_numpy_scalars_are_strong_and_out_of_range_ints_overflow(ctx):
    x = ctx.from_numpy(np.array([1.5, 2.5], np.float32))
    assert (x * np.float64(2)).dtype == np.float64  # numpy 2: a numpy scalar keeps its dtype
    assert (x * np.float32(2)).dtype == np.float32
    assert (x + np.array(1, np.int64)).dtype == np.float64
    u = ctx.from_numpy(np.array([1, 2], np.uint8))
    with pytest.raises(OverflowError, match="300 out of bounds for uint8"):
        u + 300  # numpy 2 raises the same
    assert (u + 255).numpy().tolist() == [0, 1]  # wraps, as numpy


def test_broadcasting_unary_and_inplace(ctx, rng):
    a = values(rng, (4, 1), np.float32)
    b = values(rng, (1, 5), np.float32)
    x, y = dyn(ctx, a, 8), ctx.from_numpy(b)
    close((x * y - 1.0).numpy(), a * b - np.float32(1.0))
    close((-x).numpy(), -a)
    close((+x).numpy(), +a)
    close(abs(x - 0.25).numpy(), np.abs(a - np.float32(0.25)))
    close(ctx.maximum(x, 0.0).numpy(), np.maximum(a, 0))
    z = x
    z += 1.0
    assert z is x
    close(x.numpy(), a + 1)
    x *= x
    close(x.numpy(), (a + 1) ** 2)
    i = ctx.from_numpy(np.array([1, 2, 3], np.int32))
    i += np.int64(2)  # int64 -> int32 is same_kind: numpy allows it
    assert i.dtype == np.int32 and i.numpy().tolist() == [3, 4, 5]
    with pytest.raises(clbound.DTypeError, match="same_kind"):
        i += 0.5  # numpy: Cannot cast ufunc 'add' output from float64 to int32
    with pytest.raises(clbound.DTypeError, match="same_kind"):
        i /= 2


def test_comparisons_give_masks_for_select_and_indexing(ctx, rng):
    x = ctx.tensor(np.float32, (64,), dynamic=True)
    for n in (10, 64, 0, 33):
        a = rng.standard_normal(n).astype(np.float32)
        a[::5] = np.nan
        x.write(a)
        m = x > 0
        assert m.dtype == np.bool_ and m.bounds == (64,)
        close(m.numpy(), a > 0)
        close(x[m].numpy(), a[a > 0])
        close(ctx.masked_select(x, ctx.gt(x, 0)).numpy(), a[a > 0])
        close((x != x).numpy(), np.isnan(a))  # NaN: only != is true
        both = (x > -0.5) & (x < 0.5)
        close(both.numpy(), (a > -0.5) & (a < 0.5))
        close(((x < -1) | (x > 1)).numpy(), (a < -1) | (a > 1))
        close(((x > 0) ^ (x > 1)).numpy(), (a > 0) ^ (a > 1))
        close((~m).numpy(), ~(a > 0))
        close(ctx.nonzero(x > 0.5).numpy(), np.argwhere(a > 0.5))
    assert x[...] is x and x[:] is x
    close(x[1:3].numpy(), a[1:3])  # a slice on the device (tests/test_indexing.py); it used to raise IndexError
    with pytest.raises(IndexError, match="bool mask"):
        x[ctx.from_numpy(np.array([1], np.int64))]
    with pytest.raises(clbound.DTypeError, match="bitwise"):
        ctx.from_numpy(np.array([1], np.int32)) & 1
    assert (x == None) is False and (x != "a") is True  # noqa: E711  not an operand: Python's fallback


def test_operators_add_no_host_sync_and_call_the_library(ctx, rng):
    a = values(rng, (9, 4), np.float32)
    x = dyn(ctx, a)
    w = ctx.from_numpy(np.ones((4, 2), np.float32))
    i = dyn(ctx, values(rng, (9, 4), np.int32))
    ctx.sync()
    c0 = ctx.counters()
    y = ((2.0 * x + 1) / 3 - x) % 5
    m = (y >= 0.5) & (x != 1.0)
    s = y[m]
    p = (x @ w) * -1
    q = i + 1.5  # a cast on the device and a 0-d float64 scalar
    x += 1
    c1 = ctx.counters()
    assert c1["host_syncs"] == c0["host_syncs"]
    assert c1["kernel_launches"] > c0["kernel_launches"] + 10  # every op ran on the device
    want = ((np.float32(2) * a + 1) / 3 - a) % 5
    close(y.numpy(), want.astype(np.float32))
    close(s.numpy(), want[(want >= 0.5) & (a != 1)].astype(np.float32))
    close(p.numpy(), -(a @ np.ones((4, 2), np.float32)))
    assert q.dtype == np.float64


def test_reductions_take_axis_and_keepdims(ctx, rng):
    a = values(rng, (5, 3), np.float64)
    x = dyn(ctx, a)
    close(ctx.sum(x, axis=0).numpy(), a.sum(axis=0))
    close(ctx.mean(x, axis=1, keepdims=True).numpy(), a.mean(axis=1, keepdims=True))
    close(x.max(axis=-1).numpy(), a.max(axis=-1))
    close(x.sum(dim=0, keepdim=True).numpy(), a.sum(axis=0, keepdims=True))
    close(ctx.reduce_dim("sum", x, axis=1).numpy(), a.sum(axis=1))
    assert float(x.sum()) == pytest.approx(a.sum())
    with pytest.raises(TypeError, match="disagree"):
        ctx.sum(x, dim=0, axis=1)


def test_constructors_take_numpy_order(ctx):
    z = ctx.zeros((10, 2), np.int32, dynamic=(True, False), sizes=(3, 2))
    assert z.shape == (3, 2) and z.bounds == (10, 2)
    close(z.numpy(), np.zeros((3, 2), np.int32))
    close(ctx.zeros(4).numpy(), np.zeros(4, np.float32))
    close(ctx.full((2, 2), 7).numpy(), np.full((2, 2), 7))  # numpy's int64 for an int
    close(ctx.full((2,), 1.5, np.float32).numpy(), np.full(2, 1.5, np.float32))
    close(ctx.full((), True).numpy(), np.full((), True))
    assert ctx.empty((3, 4), np.uint8).bounds == (3, 4)
    with pytest.warns(DeprecationWarning, match="old order"):
        close(ctx.zeros(np.float64, (2,)).numpy(), np.zeros(2))
    with pytest.warns(DeprecationWarning, match="old order"):
        close(ctx.full(np.int32, (2,), 5).numpy(), np.full(2, 5, np.int32))
    with pytest.raises(TypeError, match="needs all three"):
        ctx.full(np.float32, (2,))


def test_torch_dtypes_are_accepted(torch):  # every entry point: test_torch.py
    with clbound.Context() as c:
        t = c.zeros((2,), torch.float64)
        assert t.dtype == np.float64 and c.cast(t, torch.int32).dtype == np.int32
        with pytest.raises(clbound.DTypeError, match="no dtype for torch.float16"):
            c.zeros((2,), torch.float16)


def test_dtype_like_objects_of_torch_are_recognised_without_torch(ctx):
    class dtype:  # what a torch dtype looks like to the binding
        __module__ = "torch"

        def __init__(self, name):
            self.name = name

        def __str__(self):
            return "torch." + self.name
    dtype.__module__ = "torch"
    t = ctx.zeros((2,), dtype("int64"))
    assert t.dtype == np.int64
    with pytest.raises(clbound.DTypeError, match="torch.complex64"):
        ctx.zeros((2,), dtype("complex64"))


# ---------------------------------------------------------------- errors

def test_every_status_has_a_class_with_a_builtin_base():
    names = {s for s in clbound.STATUS_CLASSES}
    assert len(names) == 24  # every error of clbound/status.h
    for status, cls in clbound.STATUS_CLASSES.items():
        assert issubclass(cls, clbound.ClboundError)
        assert cls.__mro__[2] is not Exception, status  # a built-in besides ClboundError
    assert issubclass(clbound.BoundExceededError, ValueError)
    assert issubclass(clbound.DTypeError, TypeError)
    assert issubclass(clbound.OutOfMemoryError, MemoryError)
    assert issubclass(clbound.DivisionByZeroError, ZeroDivisionError)
    assert issubclass(clbound.UnsupportedError, NotImplementedError)
    assert issubclass(clbound.IndexOutOfRangeError, IndexError)


def test_error_classes_and_messages(ctx):
    with pytest.raises(clbound.ShapeError, match=r"larger than the data's shape \(3, 2\) in dim 0.*"
                       r"dynamic=\(True, False\)") as e:
        ctx.from_numpy(np.ones((3, 2), np.float32), bounds=(10, 2))  # before: "dim 0 ... is static: 3 != 10"
    assert isinstance(e.value, ValueError) and e.value.status == "ERR_SHAPE"
    with pytest.raises(clbound.ShapeError, match=r"static: 5 != 4, the op's size"):
        ctx.relu(ctx.from_numpy(np.ones(4, np.float32)), out=ctx.tensor(np.float32, (5,)))  # before: "must be dynamic"
    # the same dtype problem raises the same class from every entry point
    with pytest.raises(clbound.DTypeError):
        ctx.tensor(np.float16, (2,))
    with pytest.raises(clbound.DTypeError):
        ctx.from_dlpack(np.zeros(2, np.float16))
    with pytest.raises(clbound.BoundExceededError, match="5 > bound 4"):
        ctx.tensor(np.float32, (4,), dynamic=True).write(np.ones(5, np.float32))
    small = ctx.tensor(np.int64, (1, 1), dynamic=(True, False))
    ctx.nonzero(ctx.from_numpy(np.ones(3, np.float32)), out=small)
    with pytest.raises(clbound.BoundExceededError, match="exceeds its bound 1"):
        ctx.sync()
    with pytest.raises(clbound.OutOfMemoryError):
        with clbound.Context(device_memory_limit=1 << 20) as c:
            c.tensor(np.float32, (1 << 20,))
    i = ctx.from_numpy(np.array([1, 2], np.int32))
    i % 0
    with pytest.raises(clbound.DivisionByZeroError):
        ctx.sync()
    with pytest.raises(clbound.EmptyReductionError):
        ctx.max(ctx.zeros((4,), dynamic=True, sizes=(0,))).numpy()


def test_nonzero_static_returns_the_tensor_and_the_count_by_keyword(ctx):
    a = np.array([0, 3, 0, 5, 7], np.float32)
    idx = ctx.nonzero_static(ctx.from_numpy(a), 2)
    assert isinstance(idx, clbound.Tensor)  # as torch.nonzero_static; before: [tensor, count]
    close(idx.numpy(), np.array([[1], [3]], np.int64))
    idx, n = ctx.nonzero_static(ctx.from_numpy(a), 4, return_count=True)
    close(idx.numpy(), np.array([[1], [3], [4], [-1]], np.int64))
    assert int(n) == 3


def test_public_api_is_typed():
    import inspect
    assert os.path.exists(os.path.join(os.path.dirname(clbound.__file__), "py.typed"))
    for cls in (clbound.Context, clbound.Tensor):
        for name, member in inspect.getmembers(cls, inspect.isfunction):
            if name.startswith("_") and name not in ("__init__", "__dlpack__", "__getitem__", "__add__"):
                continue
            sig = inspect.signature(member)
            assert sig.return_annotation is not inspect.Signature.empty, f"{cls.__name__}.{name}"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "shape" in clbound.Tensor.__doc__ and "bounds" in clbound.Tensor.__doc__


def test_print_copies_and_torch_dtype_shorthands(ctx):
    a = np.array([[1.5, -2.0, 0.0], [3.25, 0.5, -0.0]], np.float32)
    x = ctx.from_numpy(a, bounds=(8, 3), dynamic=(True, False))
    before = syncs(ctx)
    assert str(x) == str(a)  # print(t) shows the values, as numpy's
    assert syncs(ctx) == before + 1  # the read
    assert repr(x) == "<clbound.Tensor float32 shape=(2, 3) bounds=(<=8, 3)>"
    for c in (x.copy(), x.clone()):
        assert c is not x and c.bounds == x.bounds and c.dynamic == x.dynamic and c.shape == (2, 3)
        c += 1  # in place into the copy only
        np.testing.assert_array_equal(c.numpy(), a + 1)
    np.testing.assert_array_equal(x.numpy(), a)
    for t, dt, want in ((x.float(), np.float32, a), (x.double(), np.float64, a.astype(np.float64)),
                        (x.long(), np.int64, a.astype(np.int64)), (x.int(), np.int32, a.astype(np.int32)),
                        (x.bool(), np.bool_, a != 0)):
        assert t.dtype == np.dtype(dt) and t.bounds == (8, 3)
        np.testing.assert_array_equal(t.numpy(), want)
    f = x.copy()
    f.free()
    assert str(f) == "<clbound.Tensor freed>"


def test_where_matches_numpy(ctx, rng):
    a = rng.standard_normal((5, 3)).astype(np.float32)
    x = ctx.from_numpy(a, bounds=(9, 3), dynamic=(True, False))
    m = x > 0
    c = a > 0
    before = syncs(ctx)
    got = [ctx.where(m, x, 0.0), ctx.where(m, 1, 2), ctx.where(m, 1.5, x), ctx.where(m, True, False),
           ctx.where(m[:, :1], x, -x), ctx.where(m, x, x.astype(np.float64))]
    assert syncs(ctx) == before  # no host sync
    want = [np.where(c, a, np.float32(0)), np.where(c, 1, 2), np.where(c, np.float32(1.5), a), np.where(c, True, False),
            np.where(c[:, :1], a, -a), np.where(c, a, a.astype(np.float64))]
    for g, w in zip(got, want):
        g = g.numpy()
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_array_equal(g, w)
    with pytest.raises(clbound.DTypeError, match="not bool"):
        ctx.where(x, x, x)
    with pytest.raises(TypeError, match="argument 'a' of where"):
        ctx.where(m, [1, 2], 0)
    y = ctx.from_numpy(np.ones((4, 3), np.float32), bounds=(9, 3), dynamic=(True, False))
    ctx.where(m, x, y)  # 5 rows against 4: the device's deferred check
    with pytest.raises(clbound.DeviceCheckError, match="where"):
        ctx.sync()
