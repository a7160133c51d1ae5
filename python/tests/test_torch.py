"""Issue 31, the PyTorch side: DLPack 1.x round trips with torch both ways (with
and without copy, versioned and legacy capsules, actual sizes of dynamic dims,
every dtype both know, non-contiguous inputs, requires_grad), torch dtypes
wherever a dtype is taken, and the operators and methods against torch on the
same inputs. Every test takes the `torch` fixture (conftest.py): without
PyTorch it skips and says how to run it. Integers and bools compare exactly;
floats against torch in float64 within 1e-6 relative (float32) or 1e-12
(float64), reductions and matmul 1e-5 / 1e-12."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import clbound
from dlpack_util import Holder, Recorder

DTYPES = ["float32", "float64", "int32", "int64", "uint8", "bool"]


def close(got, want, tol=None):
    """got (a clbound Tensor) equals want (a torch tensor): shape, dtype, values."""
    import torch
    back = torch.from_dlpack(got)
    assert tuple(back.shape) == tuple(want.shape), (tuple(back.shape), tuple(want.shape))
    assert back.dtype == want.dtype, (back.dtype, want.dtype)
    if want.dtype.is_floating_point:
        if tol is None:
            tol = 1e-6 if want.dtype == torch.float32 else 1e-12
        torch.testing.assert_close(back.double(), want.double(), rtol=tol, atol=tol, equal_nan=True)
    else:
        assert torch.equal(back, want), (back, want)


def values(torch, gen, shape, dtype):
    """Values without zeros (no division by zero), with ties (for ==)."""
    if dtype.is_floating_point:
        v = torch.randint(-4, 5, shape, generator=gen).to(dtype) / 2
        return torch.where(v == 0, torch.full_like(v, 1.5), v)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype == torch.uint8:
        return torch.randint(1, 9, shape, generator=gen).to(dtype)
    v = torch.randint(-6, 7, shape, generator=gen).to(dtype)
    return torch.where(v == 0, torch.full_like(v, 3), v)


@pytest.fixture
def gen(torch, request):
    return torch.Generator().manual_seed(sum(map(ord, request.node.name)))


# ---------------------------------------------------------------- DLPack: clbound -> torch

@pytest.mark.parametrize("name", DTYPES)
def test_to_torch_at_the_actual_sizes_every_dtype(ctx, torch, gen, name):
    dt = getattr(torch, name)
    x = ctx.tensor(dt, (12, 3), dynamic=(True, False))
    for n in (7, 0, 12, 1):  # the actual size changes per call
        src = values(torch, gen, (n, 3), dt)
        x.write(src.numpy())
        rec = Recorder(x)
        got = torch.from_dlpack(rec)
        assert got.shape == (n, 3) and got.dtype == dt and torch.equal(got, src)
        assert rec.kwargs[0]["max_version"] >= (1, 0) and rec.names == [b"dltensor_versioned"]
        legacy = torch.utils.dlpack.from_dlpack(x.__dlpack__())  # an old consumer's capsule
        assert legacy.dtype == dt and torch.equal(legacy, src)


def test_to_torch_copy_semantics_and_ownership(torch):
    with clbound.Context() as c:
        x = c.from_numpy(np.arange(6, dtype=np.float32).reshape(3, 2), bounds=(8, 2), dynamic=(True, False))
        want = torch.arange(6, dtype=torch.float32).reshape(3, 2)
        rec = Recorder(x)
        assert torch.equal(torch.from_dlpack(rec, copy=True), want)
        assert rec.kwargs[0]["copy"] is True and rec.names == [b"dltensor_versioned"]
        assert torch.equal(torch.from_dlpack(x, copy=None), want)
        with pytest.raises(BufferError, match="copy=False"):  # a host export is a copy: never a silent one
            torch.from_dlpack(x, copy=False)
        assert torch.equal(torch.from_dlpack(x, device="cpu"), want)
        a = torch.from_dlpack(x)
        a += 1  # the host copy is torch's own: the device tensor does not change
        assert x.numpy().tolist() == want.tolist()
        s = torch.from_dlpack(c.from_numpy(np.array(2.5)))
        assert s.shape == () and s.item() == 2.5 and s.dtype == torch.float64
        x.free()
    assert torch.equal(a, want + 1)  # outlives its tensor and its context
    del a


def test_opencl_export_refused_by_torch_does_not_crash(torch):
    """torch.from_dlpack calls the deleter of a kDLOpenCL capsule it refuses and
    leaves the capsule's name unchanged; the capsule's destructor then ran the
    deleter again (a double free: a segmentation fault). In a child process,
    so that the old behaviour fails this test instead of ending the run."""
    code = textwrap.dedent("""
        import gc, numpy as np, torch, clbound
        with clbound.Context() as c:
            x = c.from_numpy(np.arange(4, dtype=np.float32), bounds=(8,), dynamic=True)
            for copy in (None, True):
                cap = x.__dlpack__(max_version=(1, 0), dl_device=(4, 0), copy=copy)
                try:
                    torch.from_dlpack(cap)
                    raise SystemExit("torch took a kDLOpenCL tensor")
                except RuntimeError:
                    pass  # torch has no OpenCL device
                del cap
                gc.collect()
            held = c.metrics()["device_bytes_held"]
            cap = x.__dlpack__(max_version=(1, 0), dl_device=(4, 0), copy=True)  # unconsumed: its destructor frees
            del cap
            assert c.metrics()["device_bytes_held"] <= held, c.metrics()
            assert x.numpy().tolist() == [0, 1, 2, 3]
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (r.returncode, r.stdout, r.stderr[-2000:])


# ---------------------------------------------------------------- DLPack: torch -> clbound

@pytest.mark.parametrize("name", DTYPES)
def test_from_torch_every_dtype_versioned_and_legacy(ctx, torch, gen, name):
    dt = getattr(torch, name)
    for n in (5, 0, 9):
        src = values(torch, gen, (n, 3), dt)
        rec = Recorder(src)
        t = ctx.from_dlpack(rec, bounds=(9, 3), dynamic=(True, False))
        assert rec.kwargs[0]["max_version"] >= (1, 0) and rec.names == [b"dltensor_versioned"]
        assert t.shape == (n, 3) and t.bounds == (9, 3) and t.dtype == np.dtype(name)
        close(t, src)
        u = ctx.from_dlpack(Holder(torch.utils.dlpack.to_dlpack(src)), bounds=(9, 3), dynamic=(True, False))
        close(u, src)


def test_from_torch_copies(ctx, torch):
    src = torch.arange(6, dtype=torch.int64)
    t = ctx.from_dlpack(src, bounds=(8,), dynamic=True, copy=True)
    src[0] = 100  # the clbound tensor holds a copy
    assert t.tolist() == [0, 1, 2, 3, 4, 5]
    try:  # copy=False shares instead (a device whose buffers are host memory)
        shared = ctx.from_dlpack(src, copy=False)
    except BufferError as e:
        assert "not host memory" in str(e), e
        return
    src[1] = 200  # the shared tensor is src's memory
    assert shared.tolist() == [100, 200, 2, 3, 4, 5]


def test_shared_parameter_follows_the_optimizer(ctx, torch):
    """A torch parameter shared with copy=False: torch's in-place optimizer step
    is what the device reads next, with no upload."""
    p = torch.nn.Parameter(torch.ones(3, 2))
    try:
        tp = ctx.from_dlpack(p, copy=False)
    except BufferError:
        pytest.skip("this device's buffers are not host memory")
    opt = torch.optim.SGD([p], lr=0.5)
    p.grad = torch.full((3, 2), 2.0)
    opt.step()
    np.testing.assert_array_equal(tp.numpy(), np.zeros((3, 2), dtype=np.float32))


def test_from_torch_non_contiguous(ctx, torch):
    """Strided torch tensors (transposed, stepped, offset, broadcast with stride 0)
    import as the dense values they show, as from a numpy view."""
    base = torch.arange(60, dtype=torch.float32).reshape(6, 10)
    views = [base.t(), base[::2, 1::3], base[:, 4], base[2:5], base.flip(0), torch.arange(3.0).expand(4, 3),
             base.reshape(6, 2, 5).permute(2, 0, 1), base.to(memory_format=torch.contiguous_format)[1:, :0]]
    for v in views:
        close(ctx.from_dlpack(v), v.contiguous())
        close(ctx.from_dlpack(v, bounds=(len(v) + 3,) + tuple(v.shape[1:]), dynamic=(True,) + (False,) * (v.dim() - 1)),
              v.contiguous())


def test_from_torch_requires_grad_and_errors(ctx, torch):
    w = torch.linspace(-1, 1, 6, requires_grad=True)
    y = w * 2  # a non-leaf with a grad_fn
    t = ctx.from_dlpack(y)  # torch's own __dlpack__ refuses these; clbound copies the values
    close(t, y.detach())
    assert y.requires_grad and w.grad is None
    (y.sum()).backward()  # autograd is untouched
    assert torch.equal(w.grad, torch.full((6,), 2.0))
    with pytest.raises(clbound.DTypeError, match="no clbound dtype"):
        ctx.from_dlpack(torch.zeros(3, dtype=torch.float16))
    with pytest.raises(clbound.BoundExceededError, match="dim 0: 5 > bound 4"):
        ctx.from_dlpack(torch.zeros(5, 2), bounds=(4, 2))
    with pytest.raises(ValueError, match="bounds has 1 dims; the DLPack tensor has 2"):
        ctx.from_dlpack(torch.zeros(5, 2), bounds=(8,))


# ---------------------------------------------------------------- torch dtypes

@pytest.mark.parametrize("name", DTYPES)
def test_torch_dtypes_wherever_a_dtype_is_taken(ctx, torch, name):
    dt, want = getattr(torch, name), np.dtype(name)
    assert ctx.supports("copy", dt) == ctx.supports("copy", want)
    assert ctx.tensor(dt, (2,)).dtype == want
    assert ctx.empty((2,), dt).dtype == want
    assert ctx.zeros((2,), dt).dtype == want
    assert ctx.full((2,), 1, dt).dtype == want
    assert ctx.from_numpy(np.ones(2), dtype=dt, casting="unsafe").dtype == want
    x = ctx.from_numpy(np.array([0.0, 1.0, 2.0], np.float32))
    assert ctx.cast(x, dt).dtype == want and x.astype(dt).dtype == want and x.to(dt).dtype == want
    close(x.to(dt), torch.tensor([0.0, 1.0, 2.0]).to(dt))
    with pytest.warns(DeprecationWarning, match="old order"):
        assert ctx.zeros(dt, (2,)).dtype == want
    with clbound.Graph(ctx, policy="dynamic") as g:  # before: Graph.input and param took numpy dtypes only
        xi = g.input("x", dt, (4,), dynamic=True)
        p = g.param("p", torch.tensor([1, 0]).to(dt), trainable=False, dtype=dt)  # a torch tensor as the array
        z = g.param("z", trainable=False, dtype=dt, shape=(2,))
        s = g.scalar(dt, 1)
        c = g.cast(xi, torch.float32)
        for node in (xi, p, z, s, c):
            g.keep(node)
        g.feed(xi, np.array([1, 0, 1], np.uint8), casting="unsafe")
        g.run()
        assert g.tensor(p).dtype == want and g.tensor(z).dtype == want and g.tensor(s).dtype == want
        close(g.tensor(c), torch.tensor([1, 0, 1]).to(dt).float())


def test_torch_dtypes_clbound_lacks(ctx, torch):
    for dt in (torch.float16, torch.bfloat16, torch.int8, torch.complex64):
        with pytest.raises(clbound.DTypeError, match=f"no dtype for {dt}"):
            ctx.zeros((2,), dt)
        with pytest.raises(clbound.DTypeError, match=str(dt)):
            with clbound.Graph(ctx) as g:
                g.input("x", dt, (2,))


# ---------------------------------------------------------------- operators and methods against torch

OPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
    "%": lambda a, b: a % b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}


@pytest.mark.parametrize("name", ["float32", "float64", "int32", "int64"])
def test_operators_match_torch_with_dynamic_sizes(ctx, torch, gen, name):
    """Same-dtype operands (torch and numpy promote those alike, except integer
    true division: see test_where_torch_promotes_otherwise)."""
    dt = getattr(torch, name)
    x = ctx.tensor(dt, (12, 3), dynamic=(True, False))
    b = values(torch, gen, (3,), dt)
    y = ctx.from_dlpack(b)
    for n in (5, 12, 0, 1):
        a = values(torch, gen, (n, 3), dt)
        x.write(a.numpy())
        for op, f in OPS.items():
            if op == "/" and not dt.is_floating_point:
                continue
            close(f(x, y), f(a, b))
            close(f(y, x), f(b, a))
        if dt.is_floating_point:
            w = values(torch, gen, (3, 2), dt)
            close(x @ ctx.from_dlpack(w), a @ w, 1e-5 if dt == torch.float32 else 1e-12)
            close(-x, -a)
            close(abs(x - 0.25), (a - 0.25).abs())


@pytest.mark.parametrize("name", ["float32", "float64", "int32", "int64", "uint8"])
def test_python_scalars_are_weak_as_in_torch(ctx, torch, gen, name):
    dt = getattr(torch, name)
    a = values(torch, gen, (6, 2), dt)
    x = ctx.from_dlpack(a, bounds=(16, 2), dynamic=(True, False))
    scalars = (2, 1.5) if dt.is_floating_point else (2,)
    for s in scalars:
        for op in ("+", "*", "-", "<", "==", "!="):
            close(OPS[op](x, s), OPS[op](a, s))
            close(OPS[op](s, x), OPS[op](s, a))


def test_where_torch_promotes_otherwise(ctx, torch):
    """clbound promotes as numpy 2 (documented in python/README.md). torch differs
    on mixed int/float: the values agree, the dtype is numpy's."""
    i = torch.tensor([1, -2, 3], dtype=torch.int32)
    f = torch.tensor([0.5, 0.25, 2.0], dtype=torch.float32)
    ti, tf = ctx.from_dlpack(i), ctx.from_dlpack(f)
    for got, want, np_dtype in ((ti + tf, i + f, np.float64),  # torch: float32
                                (ti / 2, i / 2, np.float64),     # torch: float32 (its default dtype)
                                (ti + 1.5, i + 1.5, np.float64)):
        assert want.dtype == torch.float32 and got.dtype == np_dtype
        close(got, want.double())


def test_masks_select_scatter_and_nonzero_match_torch(ctx, torch, gen):
    x = ctx.tensor(torch.float32, (64, 3), dynamic=(True, False))
    src = ctx.tensor(torch.float32, (192,), dynamic=True)
    for n in (10, 64, 0, 33):
        a = torch.randn(n, 3, generator=gen)
        a[::5, 1] = float("nan")
        x.write(a.numpy())
        m = x > 0
        close(m, a > 0)
        close(x[m], a[a > 0])
        close(ctx.masked_select(x, x > 0.5), torch.masked_select(a, a > 0.5))
        close(x.masked_select(ctx.from_dlpack(torch.tensor([True, False, True]))),
              a.masked_select(torch.tensor([True, False, True])))  # the mask broadcasts
        close(x.nonzero(), a.nonzero())
        close(ctx.nonzero(x > 0.5), torch.nonzero(a > 0.5))
        for got, want in zip(ctx.nonzero(x > 0, as_tuple=True), torch.nonzero(a > 0, as_tuple=True)):
            close(got, want)
        close(ctx.nonzero_static(x > 0, 7), torch.nonzero_static(a > 0, size=7))
        close(ctx.nonzero_static(x > 0, 200, fill_value=-5), torch.nonzero_static(a > 0, size=200, fill_value=-5))
        s = torch.arange(3 * n, dtype=torch.float32)
        src.write(s.numpy())
        close(x.masked_scatter(x > 0, src), a.masked_scatter(a > 0, s))
        close(((x > -0.5) & (x < 0.5)), (a > -0.5) & (a < 0.5))
        close(((x < -1) | (x > 1)), (a < -1) | (a > 1))
        close(((x > 0) ^ (x > 1)), (a > 0) ^ (a > 1))
        close(~m, ~(a > 0))
        close(x != x, a != a)  # NaN


def test_unary_reductions_and_nn_match_torch(ctx, torch, gen):
    F = torch.nn.functional
    x = ctx.tensor(torch.float64, (16, 5), dynamic=(True, False))
    for n in (6, 16, 1):
        a = torch.randn(n, 5, generator=gen, dtype=torch.float64)
        x.write(a.numpy())
        close(x.relu(), a.relu())
        close(x.sigmoid(), a.sigmoid())
        close(x.tanh(), a.tanh())
        close(x.exp(), a.exp())
        close(abs(x).log(), a.abs().log())
        close(ctx.maximum(x, 0.25), torch.maximum(a, torch.tensor(0.25, dtype=torch.float64)))
        close(ctx.minimum(x, x * 2), torch.minimum(a, a * 2))
        close(x.sum(), a.sum())
        close(x.mean(), a.mean())
        close(x.max(), a.max())
        for d in (0, 1, -1):
            close(x.sum(dim=d), a.sum(dim=d))
            close(x.mean(dim=d, keepdim=True), a.mean(dim=d, keepdim=True))
            close(x.max(dim=d), a.amax(dim=d))
        close(x.reshape(-1), a.reshape(-1))
        close(x[1:-1, ::2], a[1:-1, ::2])
        close(x[-1], a[-1])
        close(x[..., 2], a[..., 2])
        close(x[None, :, 1:3], a[None, :, 1:3])
        close(ctx.softmax(x), a.softmax(-1))
        close(ctx.log_softmax(x), a.log_softmax(-1))
        w = torch.randn(3, 5, generator=gen, dtype=torch.float64)
        bias = torch.randn(3, generator=gen, dtype=torch.float64)
        close(ctx.linear(x, ctx.from_dlpack(w), ctx.from_dlpack(bias)), F.linear(a, w, bias))
        close(ctx.matmul(x, ctx.from_dlpack(w), trans_b=True), a @ w.t())
        target = torch.rand(n, 5, generator=gen, dtype=torch.float64)
        tt = ctx.from_dlpack(target, bounds=x.bounds, dynamic=x.dynamic)
        close(ctx.loss("mse", x, tt)[0], F.mse_loss(a, target))
        close(ctx.loss("bce_with_logits", x, tt)[0], F.binary_cross_entropy_with_logits(a, target))
        close(ctx.loss("bce", x.sigmoid(), tt)[0], F.binary_cross_entropy(a.sigmoid(), target))
        cls = torch.randint(0, 5, (n,), generator=gen)
        close(ctx.loss("cross_entropy", x, ctx.from_dlpack(cls, bounds=(16,), dynamic=True))[0], F.cross_entropy(a, cls))


def test_loss_gradients_match_torch_autograd(ctx, torch, gen):
    F = torch.nn.functional
    for n in (4, 9):
        a = torch.randn(n, 3, generator=gen, dtype=torch.float64, requires_grad=True)
        target = torch.rand(n, 3, generator=gen, dtype=torch.float64)
        x = ctx.from_dlpack(a, bounds=(9, 3), dynamic=(True, False))  # requires_grad: read through detach()
        for kind, f in (("mse", F.mse_loss), ("bce_with_logits", F.binary_cross_entropy_with_logits)):
            a.grad = None
            loss = f(a, target)
            loss.backward()
            got, grad = ctx.loss(kind, x, ctx.from_dlpack(target, bounds=(9, 3), dynamic=(True, False)))
            close(got, loss.detach())
            close(grad, a.grad)


def test_backward_ops_and_sgd_match_torch(ctx, torch, gen):
    """linear_backward, unary_backward, softmax_backward against torch.autograd,
    sgd_step (with momentum) against torch.optim.SGD, at changing batch sizes."""
    F = torch.nn.functional
    w = torch.randn(3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(3, generator=gen, dtype=torch.float64, requires_grad=True)
    cw, cb = ctx.from_dlpack(w), ctx.from_dlpack(bias)
    vw = ctx.zeros((3, 4), torch.float64)
    opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
    for n in (5, 1, 8):
        a = torch.randn(n, 4, generator=gen, dtype=torch.float64, requires_grad=True)
        dy = torch.randn(n, 3, generator=gen, dtype=torch.float64)
        x, cdy = ctx.from_dlpack(a, bounds=(8, 4), dynamic=(True, False)), ctx.from_dlpack(dy, bounds=(8, 3),
                                                                                            dynamic=(True, False))
        a.grad = w.grad = bias.grad = None
        F.linear(a, w, bias).backward(dy)
        dx, dw, db = ctx.linear_backward(x, cw, cdy)
        close(dx, a.grad)
        close(dw, w.grad)
        close(db, bias.grad)
        for op, f, reads in (("relu", torch.relu, "x"), ("sigmoid", torch.sigmoid, "y"), ("tanh", torch.tanh, "y"),
                             ("exp", torch.exp, "y")):
            a.grad = None
            y = f(a)
            g = torch.randn(y.shape, generator=gen, dtype=torch.float64)
            y.backward(g)
            cy = ctx.unary(op, x)
            cg = ctx.from_dlpack(g, bounds=(8, 4), dynamic=(True, False))
            got = ctx.unary_backward(op, cg, x=x) if reads == "x" else ctx.unary_backward(op, cg, y=cy)
            close(got, a.grad)
        for log, f in ((False, F.softmax), (True, F.log_softmax)):
            a.grad = None
            y = f(a, -1)
            y.backward(torch.ones_like(y) * torch.arange(4.0, dtype=torch.float64))
            cy = ctx.log_softmax(x) if log else ctx.softmax(x)
            cg = ctx.from_dlpack(torch.ones(n, 4, dtype=torch.float64) * torch.arange(4.0, dtype=torch.float64),
                                 bounds=(8, 4), dynamic=(True, False))
            close(ctx.softmax_backward(cy, cg, log=log), a.grad)
        ctx.sgd_step(cw, dw, 0.1, 0.9, vw)  # the same update as the optimizer's
        opt.step()
        close(cw, w.detach())


def test_broadcasting_inplace_and_reads_match_torch(ctx, torch, gen):
    a = values(torch, gen, (4, 1), torch.float32)
    b = values(torch, gen, (1, 5), torch.float32)
    x, y = ctx.from_dlpack(a, bounds=(8, 1), dynamic=(True, False)), ctx.from_dlpack(b)
    close(x * y - 1.0, a * b - 1.0)
    close(x + y * 2, a + b * 2)
    x += 1.0
    a += 1.0
    close(x, a)
    x *= x
    a *= a
    close(x, a)
    assert x.shape == tuple(a.shape) and len(x) == len(a) and x.numel() == a.numel() and x.ndim == a.dim()
    assert x.tolist() == a.tolist()
    assert x[2, 0].item() == a[2, 0].item() and float(x.sum()) == pytest.approx(float(a.sum()), rel=1e-6)
    m = ctx.from_dlpack(torch.tensor([True, False, True]))
    n = ctx.from_dlpack(torch.tensor([True, True, False]))
    close(m + n, torch.tensor([True, False, True]) + torch.tensor([True, True, False]))  # logical or, as torch
    close(m * n, torch.tensor([True, False, True]) * torch.tensor([True, True, False]))  # logical and
