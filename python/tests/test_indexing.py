"""Issue 31: numpy's basic indexing on the device (integers, slices with
negative starts, stops and steps, ``...``, None) against numpy on the same
data, with dynamic sizes that change per call: exact values and shapes, the
bounds the host computes, no host sync from ``t[key]``, and the error classes
(an index past a static dim at once, past a dynamic dim's actual size at the
next sync, both IndexError)."""
import numpy as np
import pytest

import clbound


def syncs(ctx):
    return ctx.counters()["host_syncs"]


def same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


KEYS = [
    2, -1, np.int64(0), slice(1, None), slice(None, -1), slice(None, None, -2), slice(-3, None),
    slice(8, 1, -3), slice(-100, 100), slice(None, None, 4), (slice(None), 0), (slice(1, -1), slice(None, None, 2)),
    (Ellipsis, -1), (None, slice(2)), (1, None, slice(None, None, -1)), (Ellipsis, None), (-2, -3),
    (slice(None, None, -1), slice(-2, None)), (slice(5, None, -1), Ellipsis, 1),
]
SIZES = [(4, 3), (0, 5), (1, 1), (9, 5), (7, 0), (6, 2)]


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.uint8])
def test_basic_indexing_matches_numpy_as_sizes_change(ctx, rng, dtype):
    x = ctx.tensor(dtype, (9, 5), dynamic=(True, True))
    outs = {}
    for shape in SIZES:  # the actual sizes change per call; the same outputs are reused
        a = (rng.standard_normal(shape) * 50).astype(dtype)
        x.write(a)
        ctx.sync()
        for i, key in enumerate(KEYS):
            try:
                want = a[key]
            except IndexError:
                want = None
            before = syncs(ctx)
            t = x[key]
            assert syncs(ctx) == before, key  # t[key] never waits for the device
            if want is None:  # an integer past the actual size: at the next sync
                with pytest.raises(clbound.IndexOutOfRangeError, match=r"index -?\d+ is out of range for dim \d of "
                                   r"actual size \d"):
                    ctx.sync()
                continue
            same(t.numpy(), want)
            outs[i] = ctx.getitem(x, key, out=outs.get(i))  # out= reuses the output
            same(outs[i].numpy(), want)


def test_bounds_come_from_the_bounds_and_static_dims_stay_static(ctx):
    x = ctx.tensor(np.int32, (10, 4), dynamic=(True, False))
    x.write(np.arange(12, dtype=np.int32).reshape(3, 4))
    t = x[2:5, 1:]
    assert t.bounds == (3, 3) and t.dynamic == (True, False)
    assert t.shape == (1, 3)  # 3 actual rows: only row 2
    assert x[-2:5].bounds == (2, 4)  # longest at 2 rows (both), not at the bound (none)
    assert x[::-3].bounds == (4, 4) and x[None].bounds == (1, 10, 4) and x[..., 0].bounds == (10,)
    assert x[1].bounds == (4,) and x[1].dynamic == (False,)
    assert x[...] is x and x[:] is x and x[:, :] is x  # numpy gives a view; clbound the tensor itself
    same(x[::-1].numpy(), np.arange(12, dtype=np.int32).reshape(3, 4)[::-1])
    same(x[-1, -1].numpy(), np.int32(11).reshape(()))
    assert int(x[-1, -1]) == 11


def test_slices_add_no_host_sync_and_build_nothing_new(ctx, rng):
    x = ctx.tensor(np.float32, (64, 8), dynamic=(True, False))
    x.write(rng.standard_normal((10, 8)).astype(np.float32))
    x[2:-2, ::2], x[-1]  # the program is built once
    c0 = ctx.counters()
    for n in (0, 5, 64, 33):
        x.write(rng.standard_normal((n, 8)).astype(np.float32))
        ys = [x[1:-1], x[::-2, 3], x[None, -5:], ctx.slice(x, 1, None, None, -1)]
    c1 = ctx.counters()
    assert c1["host_syncs"] == c0["host_syncs"]
    assert c1["program_builds"] == c0["program_builds"]
    assert c1["kernel_launches"] >= c0["kernel_launches"] + 16  # every index ran on the device
    a = x.numpy()
    same(ys[0].numpy(), a[1:-1])
    same(ys[1].numpy(), a[::-2, 3])
    same(ys[2].numpy(), a[None, -5:])
    same(ys[3].numpy(), a[:, ::-1])


def test_slice_and_index_methods(ctx):
    a = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    x = ctx.from_numpy(a, bounds=(5, 3, 4), dynamic=(True, False, False))
    same(ctx.slice(x, -1, 1, None, 2).numpy(), a[..., 1::2])
    same(ctx.slice(x, 0, step=-1).numpy(), a[::-1])
    same(ctx.index(x, 1, -1).numpy(), a[:, -1])
    same(ctx.getitem(x, (1, None, slice(None, None, -1))).numpy(), a[1, None, ::-1])
    same(ctx.getitem(x, ...).numpy(), a)  # getitem always copies
    with pytest.raises(clbound.InvalidArgumentError, match="dim 3 is outside"):
        ctx.index(x, 3, 0)


def test_iteration_yields_rows(ctx):
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    x = ctx.from_numpy(a, bounds=(8, 2), dynamic=(True, False))
    rows = list(x)  # len(x) (one host sync), then x[i] each
    assert len(rows) == 3
    for r, w in zip(rows, a):
        same(r.numpy(), w)
    with pytest.raises(TypeError, match="0-d"):
        list(ctx.from_numpy(np.array(1.0, np.float32)))


def test_errors_have_numpy_classes(ctx):
    s = ctx.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))  # static
    with pytest.raises(clbound.IndexOutOfRangeError, match="index 3 is out of range for dim 0 of size 3") as e:
        s[3]
    assert isinstance(e.value, IndexError) and e.value.status == "ERR_INDEX"
    with pytest.raises(IndexError, match="index -5 is out of range for dim 1 of size 4"):
        s[0, -5]
    with pytest.raises(IndexError, match="too many indices for tensor: tensor is 2-dimensional, but 3"):
        s[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        s[..., ...]
    for bad in (1.5, [0, 1], True, "a", np.array([0, 1])):
        with pytest.raises(IndexError, match="integers, slices"):
            s[bad]
    with pytest.raises(IndexError, match="bool mask"):
        s[0, ctx.from_numpy(np.array([True, False, True]))]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        s[::0]
    with pytest.raises(TypeError, match="slice indices must be integers"):
        s[1.5:]
    with pytest.raises(clbound.ShapeError, match="more than 8 dims"):
        s[(None,) * 7]

    # a dynamic dim: past its bound at once, past its actual size at the next sync
    x = ctx.tensor(np.int32, (8,), dynamic=True)
    x.write(np.array([5, 6, 7], np.int32))
    with pytest.raises(clbound.IndexOutOfRangeError, match="at every size"):
        x[8]
    before = syncs(ctx)
    t = x[5]
    assert syncs(ctx) == before
    with pytest.raises(clbound.IndexOutOfRangeError, match=r"index x \[<=8\] i32, key \[5\]: index 5 is out of "
                       r"range for dim 0 of actual size 3") as e:
        ctx.sync()
    assert isinstance(e.value, IndexError)
    with pytest.raises(clbound.IndexOutOfRangeError, match="index 5"):
        t.numpy()  # the output stays failed: never a silent value
    assert int(x[-3]) == 5 and int(x[2]) == 7
    assert x[2**70:].shape == (0,) and x[-2**70:].shape == (3,)  # Python clamps slice ends of any size
    with pytest.raises(IndexError):
        x[2**70]


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_transposes_match_numpy_and_torch_habits_as_sizes_change(ctx, rng, dtype):
    x = ctx.tensor(dtype, (9, 5, 3), dynamic=(True, True, False))
    y = ctx.tensor(dtype, (9, 5), dynamic=(True, False))
    for shape in [(4, 3, 3), (0, 5, 3), (9, 1, 3), (7, 5, 3)]:
        a = (rng.standard_normal(shape) * 50).astype(dtype)
        b = a[:, 0, 0].reshape(-1, 1).repeat(5, axis=1)
        x.write(a)
        y.write(b)
        before = syncs(ctx)
        got = {
            "T": x.T, "transpose()": x.transpose(), "transpose(2, 0, 1)": x.transpose(2, 0, 1),
            "transpose((1, 2, 0))": x.transpose((1, 2, 0)), "transpose(0, 2)": x.transpose(0, 2),
            "permute(-1, 0, 1)": x.permute(-1, 0, 1), "permute([1, 0, 2])": x.permute([1, 0, 2]),
            "ctx.transpose(x, -1, -2)": ctx.transpose(x, -1, -2), "y.T": y.T, "y.t()": y.t(),
            "y.transpose(0, 1)": y.transpose(0, 1),
        }
        assert syncs(ctx) == before  # reordering dims never waits for the device
        want = {
            "T": a.T, "transpose()": a.transpose(), "transpose(2, 0, 1)": a.transpose(2, 0, 1),
            "transpose((1, 2, 0))": a.transpose((1, 2, 0)), "transpose(0, 2)": np.swapaxes(a, 0, 2),
            "permute(-1, 0, 1)": a.transpose(2, 0, 1), "permute([1, 0, 2])": a.transpose(1, 0, 2),
            "ctx.transpose(x, -1, -2)": np.swapaxes(a, -1, -2), "y.T": b.T, "y.t()": b.T,
            "y.transpose(0, 1)": b.T,  # torch's swap (numpy's a.transpose(0, 1) would be a itself)
        }
        for k, t in got.items():
            same(t.numpy(), want[k])
    # each output dim keeps its input dim's bound and flag
    t = x.permute(2, 0, 1)
    assert t.bounds == (3, 9, 5) and t.dynamic == (False, True, True)
    v = ctx.from_numpy(np.arange(3, dtype=np.float32))
    assert v.t() is v  # torch: a 1-d tensor's t() is itself
    same(v.T.numpy(), np.arange(3, dtype=np.float32))


def test_transpose_errors(ctx):
    x = ctx.from_numpy(np.zeros((2, 3, 4), np.float32))
    with pytest.raises(clbound.InvalidArgumentError, match="dim 0 appears twice"):
        x.permute(0, 0, 1)
    with pytest.raises(clbound.InvalidArgumentError, match="2 dims given for x of rank 3"):
        ctx.permute(x, [1, 0])
    with pytest.raises(clbound.InvalidArgumentError, match="dim1 = 3 is outside x's rank 3"):
        x.transpose(0, 3)
    with pytest.raises(ValueError, match="at most 2 dims"):
        x.t()
    with pytest.raises(TypeError, match="dims must be a sequence"):
        ctx.permute(x, 1)
    with pytest.raises(TypeError, match="must be an integer"):
        x.permute(0, 1.5, 2)


def test_assignment_matches_numpy_as_sizes_change(ctx, rng):
    x = ctx.tensor(np.float32, (9, 5), dynamic=(True, False))
    for n in (4, 9, 1, 6):
        a = rng.standard_normal((n, 5)).astype(np.float32)
        x.write(a)
        want = a.copy()
        before = syncs(ctx)
        x[0] = 2.5                                   # a scalar into a row
        want[0] = 2.5
        x[:, -1] = ctx.from_numpy(np.arange(n, dtype=np.int64), bounds=(9,), dynamic=(True,))  # cast, as numpy's
        want[:, -1] = np.arange(n)
        x[1::2, 1:3] = -1                            # a strided block
        want[1::2, 1:3] = -1
        x[x > 1] = 0.0                               # a bool mask and a scalar
        want[want > 1] = 0.0
        assert syncs(ctx) == before  # assignment never waits for the device
        same(x.numpy(), want)


def test_assignment_errors(ctx):
    x = ctx.from_numpy(np.zeros((4, 3), np.float32), bounds=(8, 3), dynamic=(True, False))
    with pytest.raises(clbound.ShapeError, match="src has 2 dims, the selection 1"):
        x[0] = ctx.from_numpy(np.ones((1, 3), np.float32))
    with pytest.raises(TypeError, match="masked_scatter"):
        x[x > 0] = ctx.from_numpy(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="must be a clbound.Tensor or a scalar"):
        x[0] = [1, 2, 3]
    x[:2] = ctx.from_numpy(np.ones((3, 3), np.float32), bounds=(8, 3), dynamic=(True, False))  # 3 rows for 2
    with pytest.raises(clbound.DeviceCheckError, match="sizes 2 and 3 must be equal"):
        ctx.sync()
