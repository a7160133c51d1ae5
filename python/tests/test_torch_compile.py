"""torch.compile(model, backend="clbound") (issue 33): PyTorch programs run on
clbound unchanged but for backend= (and a mark_dynamic bound), checked against
eager PyTorch on the same inputs, with Dynamo's and clbound's counters.

Skipped where torch is missing (CLBOUND_TEST_TORCH=1 make test installs it into
the test venv; CI does, and there a missing torch fails, as conftest.py's
`torch` fixture does)."""
import logging
import math
import os
import types

import numpy as np
import pytest

from conftest import torch_wanted

try:
    import torch
except ImportError as e:
    if torch_wanted():
        raise ImportError(f"CLBOUND_TEST_TORCH (or CI) asks for the PyTorch tests, but torch does not import: {e}")
    pytest.skip("PyTorch is not installed here; `CLBOUND_TEST_TORCH=1 make test` installs it into the test venv "
                "(about 5 GB from PyPI) and runs these tests", allow_module_level=True)
import torch._dynamo  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

import clbound  # noqa: E402
import clbound.dynamo as cd  # noqa: E402

# Losses are float32 on both sides; clbound's kernels sum in another order than
# PyTorch's CPU kernels, so they agree to rounding, not bit for bit.
LOSS_TOL = 1e-5


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    counters.clear()
    cd.reset_stats()
    yield
    torch._dynamo.reset()


# ---- PyTorch/XLA's dynamic-shape MLP test (test/ds/test_dynamic_shape_models.py) ----

class Feedforward(torch.nn.Module):
    # PT/XLA's model, unchanged
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.fc1 = torch.nn.Linear(self.input_size, self.hidden_size)
        self.fc1.weight.data.fill_(0.01)
        self.fc1.bias.data.fill_(0.01)
        self.relu = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(self.hidden_size, 1)
        self.fc2.weight.data.fill_(0.01)
        self.fc2.bias.data.fill_(0.01)
        self.sigmoid = torch.nn.Sigmoid()

    def forward(self, x):
        hidden = self.fc1(x)
        relu = self.relu(hidden)
        output = self.fc2(relu)
        output = self.sigmoid(output)
        return output


def create_dynamic_test_data(num_test_samples, num_features, num_non_zeros):
    # PT/XLA's generator; the labels are nonzero(y) mod 2 (BCELoss on the CPU
    # checks that targets lie in [0, 1]; PT/XLA's test only runs one nonzero)
    x_test = torch.zeros(num_test_samples, num_features)
    x_test.view(-1)[:num_non_zeros] = 1
    y_test = torch.zeros(num_test_samples * 2)
    y_test[:num_non_zeros] = 1
    x = torch.nonzero(x_test.int()).float()
    y = torch.remainder(torch.nonzero(y_test.int()).float().squeeze(), 2)
    return x, y


def dynamic_batches(steps, lo, hi, features):
    """(n, x): a random [n, features] batch per step, n from batch_sizes, dim 0
    marked dynamic in [lo, 16]."""
    for n in batch_sizes(steps, lo, hi):
        x = torch.randn(n, features)
        torch._dynamo.mark_dynamic(x, 0, min=lo, max=16)
        yield n, x


def batch_sizes(steps, lo, hi):
    """A size per step, changing every step, in [lo, hi]."""
    out, span = [], hi - lo + 1
    for i in range(steps):
        n = lo + (i * 7 + 3) % span
        if out and n == out[-1]:
            n = lo + (n - lo + 1) % span
        out.append(n)
    return out


def train_xla_mlp(backend, sizes, lr=1.0):  # the demo's rate for xla-mlp
    torch.manual_seed(0)
    model = Feedforward(2, hidden_size=10)
    if backend is not None:
        model = torch.compile(model, backend=backend)
    criterion = torch.nn.BCELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses, kernels = [], []
    model.train()
    for n in sizes:
        x_training, y_training = create_dynamic_test_data(5, 2, n)
        torch._dynamo.mark_dynamic(x_training, 0, min=2, max=10)  # the bound: [<=10, 2]
        optimizer.zero_grad()
        y_pred = model(x_training)
        loss = criterion(y_pred.squeeze(), y_training)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if backend is not None:
            kernels.append(cd.stats()["kernels_compiled"])
    return np.array(losses), kernels, model


def test_xla_mlp_trains_like_eager_with_one_compile():
    sizes = batch_sizes(30, 2, 10)
    assert len(set(sizes)) == 9 and all(a != b for a, b in zip(sizes, sizes[1:]))
    eager, _, _ = train_xla_mlp(None, sizes)
    counters.clear()
    got, kernels, _ = train_xla_mlp("clbound", sizes)
    np.testing.assert_allclose(got, eager, rtol=0, atol=LOSS_TOL)
    assert eager[-1] < 0.5 * eager[0]  # it learns: the comparison is not of constants
    s = cd.stats()
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])  # one Dynamo compile
    assert s["frames"] == 1 and s["graphs_lowered"] == 2, s  # one forward, one backward
    assert s["graph_breaks"] == 0 and s["calls"] == 2 * len(sizes), s
    # no OpenCL compile after the first step, whatever the size
    assert kernels[1:] == [kernels[0]] * (len(sizes) - 1), kernels


def test_xla_mlp_inference_no_grad():
    torch.manual_seed(0)
    model = Feedforward(2, hidden_size=10)
    compiled = torch.compile(model, backend="clbound")
    model.eval()
    for n in batch_sizes(12, 2, 10):
        x, y = create_dynamic_test_data(5, 2, n)
        torch._dynamo.mark_dynamic(x, 0, min=2, max=10)
        with torch.no_grad():
            got = compiled(x)
            want = model(x)
        assert got.shape == want.shape == (n, 1)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=1e-6)
    s = cd.stats()
    assert counters["stats"]["unique_graphs"] == 1 and s["graphs_lowered"] == 1, (dict(counters["stats"]), s)


def test_unbounded_size_is_a_clear_error():
    model = torch.compile(Feedforward(2, hidden_size=10), backend="clbound", dynamic=True)
    x = torch.ones(4, 2)
    with pytest.raises(Exception) as e:
        model(x)
    msg = str(e.value)
    assert "no upper bound" in msg and "mark_dynamic" in msg and "dim 0" in msg, msg
    # the input as the user wrote it, in Dynamo's words, not the aten graph's placeholder
    assert "L['x'].size()[0]" in msg, msg


class _NonzeroLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(2, 1)

    def forward(self, x):
        return self.l(torch.nonzero(x).float())


def test_unbounded_size_after_a_graph_break_names_the_fix():
    # nonzero without capture_dynamic_output_shape_ops: a graph break, and the
    # graph after it gets nonzero's output from eager PyTorch; once its size
    # changes Dynamo makes it dynamic with no bound, which no mark_dynamic can give
    torch._dynamo.reset()
    model = torch.compile(_NonzeroLinear(), backend="clbound")
    msg = None
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=False):
        for k in (3, 7, 11):
            x = torch.zeros(5, 5)
            x.view(-1)[:k] = 1
            try:
                model(x)
            except Exception as e:
                msg = str(e)
                break
    assert msg is not None, "the graph after the break ran with an unbounded size"
    assert "no upper bound" in msg and "graph break" in msg and "capture_dynamic_output_shape_ops" in msg, msg
    assert "___stack" in msg, msg
    # with the setting on, nonzero and its bound stay in the graph:
    # test_nonzero_inside_the_graph_bounds_the_batch


# ---- wide-mlp (clbound demo's second workload) as an nn.Module ----

class WideMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256),
                                       torch.nn.ReLU(), torch.nn.Linear(256, 1), torch.nn.Sigmoid())

    def forward(self, x):
        return self.net(x)


def train_wide(backend, steps=30, lr=0.05):
    g = torch.Generator().manual_seed(1)
    table = torch.randn(4096, 256, generator=g)
    labels = (table[:, :8].sum(1) > 0).float()
    torch.manual_seed(0)
    model = WideMLP()
    if backend is not None:
        model = torch.compile(model, backend=backend)
    criterion = torch.nn.BCELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for i in range(steps):
        mask = torch.rand(4096, generator=g) < (0.02 + 0.1 * (i % 5))  # batch = masked rows
        x = table[mask]
        torch._dynamo.mark_dynamic(x, 0, min=2, max=4096)
        optimizer.zero_grad()
        loss = criterion(model(x).squeeze(1), labels[mask])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return np.array(losses)


def test_wide_mlp_module_trains_like_eager():
    eager = train_wide(None)
    counters.clear()
    got = train_wide("clbound")
    np.testing.assert_allclose(got, eager, rtol=0, atol=LOSS_TOL)
    s = cd.stats()
    assert counters["stats"]["unique_graphs"] == 1 and s["graphs_lowered"] == 2, (dict(counters["stats"]), s)
    assert s["graph_breaks"] == 0, s
    # every step: 3 Linear + activation forwards and 3 Linear backwards (the two
    # lower ones with their ReLU's backward) as one clbound op each
    assert s["fused_linear"] == 6 * 30 and s["fused_op_by_op"] == 0, s
    if s["shared"]:  # the device's buffers are host memory: the 6 parameters are shared once,
        # and SGD's in-place steps need no upload; a step uploads the batch and the loss's gradient
        assert s["shared"] == 6 and s["uploads"] == 2 * 30, s
    else:  # a device that copies: every step uploads the 6 changed parameters too
        assert s["uploads"] == 8 * 30, s


class TransposedInput(torch.nn.Module):
    """A Linear fed a transposed batch: the fused linear ops do not take it."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 5)
        self.fc2 = torch.nn.Linear(5, 1)

    def forward(self, xt):
        return torch.sigmoid(self.fc2(torch.relu(self.fc1(xt.t()))))


def train_small(model_cls, backend, sizes, shape, dim, seed):
    """A small model trained with SGD and BCE on random batches whose dim `dim`
    (of `shape`, None there) takes each of `sizes`: the losses."""
    torch.manual_seed(0)
    model = model_cls()
    run = torch.compile(model, backend=backend) if backend else model
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    g = torch.Generator().manual_seed(seed)
    losses = []
    for n in sizes:
        x = torch.randn(*[n if s is None else s for s in shape], generator=g)
        y = (torch.rand(n, generator=g) > 0.5).float()
        torch._dynamo.mark_dynamic(x, dim, min=2, max=max(sizes))
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy(run(x).squeeze(1), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses)


def test_linear_patterns_that_do_not_fit_run_op_by_op():
    args = ((7, 3, 9, 5, 8, 2, 6), (6, None), 1, 4)
    eager = train_small(TransposedInput, None, *args)
    got = train_small(TransposedInput, "clbound", *args)
    np.testing.assert_allclose(got, eager, rtol=0, atol=LOSS_TOL)
    s = cd.stats()
    assert s["fused_op_by_op"] > 0 and s["graph_breaks"] == 0, s


class SharedGradient(torch.nn.Module):
    """Two Linears on slices of the input (3 and 5 features), summed: one
    gradient feeds both layers' products."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(3, 4)
        self.fc2 = torch.nn.Linear(5, 4)
        self.out = torch.nn.Linear(4, 1)

    def forward(self, x):
        a, b = x[:, :3], x[:, 3:]
        return torch.sigmoid(self.out(torch.relu(self.fc1(a) + self.fc2(b))))


def test_one_gradient_feeding_two_layers_matches_eager():
    args = ((6, 3, 9, 4, 8), (None, 8), 0, 5)
    eager = train_small(SharedGradient, None, *args)
    got = train_small(SharedGradient, "clbound", *args)
    np.testing.assert_allclose(got, eager, rtol=0, atol=LOSS_TOL)
    # the slices run on clbound too (clb_slice): one graph each way, and since x
    # needs no gradient each layer's backward is one linear_backward, every step
    # (when slices broke the graph, one pattern a step ran op by op: the
    # fallback test_linear_patterns_that_do_not_fit_run_op_by_op covers)
    s = cd.stats()
    assert s["graph_breaks"] == 0 and s["fused_linear"] == 3 * 5 and s["fused_op_by_op"] == 0, s


# ---- graph breaks: an op clbound does not run is eager, logged once ----

class WithUnsupported(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 1)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = torch.cumprod(h, dim=1)  # not a clbound op
        return torch.sigmoid(self.fc2(h))


def test_unsupported_op_is_a_logged_graph_break(caplog):
    torch.manual_seed(0)
    model = WithUnsupported()
    compiled = torch.compile(model, backend="clbound")
    caplog.set_level(logging.WARNING, logger="clbound.dynamo")
    for n in (5, 9, 3):
        x = torch.randn(n, 4)
        torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
        got = compiled(x)
        want = model(x)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=0, atol=1e-5)
        got.sum().backward()  # the backward graph splits too
    breaks = [r.getMessage() for r in caplog.records if "cumprod" in r.getMessage()]
    assert len(breaks) == 1, breaks  # logged once, whatever the number of calls
    s = cd.stats()
    assert "aten.cumprod.default" in s["graph_break_ops"], s
    assert s["calls"] > 0, s  # the parts around cumprod ran on clbound


class TransposedMath(torch.nn.Module):
    """Elementwise ops and a reshape on transposed matrices."""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 3)

    def forward(self, x):
        h = self.l(x).t()                    # [3, n]: a lazy transpose
        z = torch.relu(h * 2.0 + 1.0) - h    # elementwise on it: a copy on the device
        return z, (x.t() * 0.5).reshape(-1)  # a reshape of a transposed input


def test_transposed_matrices_stay_in_the_graph():
    torch.manual_seed(0)
    model = TransposedMath()
    compiled = torch.compile(model, backend="clbound")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for n, x in dynamic_batches(6, 2, 12, 4):
        got, got_r = compiled(x)
        want, want_r = model(x)
        assert got.shape == want.shape == (3, n) and got_r.shape == want_r.shape == (4 * n,)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-5)
        np.testing.assert_allclose(got_r.numpy(), want_r.numpy(), rtol=0, atol=0)
        opt.zero_grad()
        (got * torch.arange(3.0).unsqueeze(1)).sum().backward()
        g_clb = [p.grad.clone() for p in model.parameters()]
        opt.zero_grad()
        (want * torch.arange(3.0).unsqueeze(1)).sum().backward()
        for a, w in zip(g_clb, (p.grad for p in model.parameters())):
            np.testing.assert_allclose(a.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # before clb_transpose: "a transposed matrix as an elementwise operand"
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


class Reductions(torch.nn.Module):
    """Sums and means inside the compiled model (their backwards expand and
    divide by a size) and expand in the model itself."""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 3)
        self.scale = torch.nn.Parameter(torch.tensor([[0.5, -1.0, 2.0]]))

    def forward(self, x):
        h = self.l(x)                                       # [n, 3]
        s = h.sum(1, keepdim=True).expand(-1, 3) * h        # -1: x's own, dynamic size
        g = self.scale.expand(x.shape[0], 3)                # a size Dynamo passes
        return s.mean(0) + h.mean() + (h * g).sum(1).sum() + h.mean(0).sum()


def test_reductions_and_expand_stay_in_the_graph():
    torch.manual_seed(0)
    model = Reductions()
    compiled = torch.compile(model, backend="clbound")
    for n, x in dynamic_batches(6, 2, 12, 4):
        got = compiled(x)
        want = model(x)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
        for p in model.parameters():
            p.grad = None
        (got * torch.tensor([1.0, -2.0, 3.0])).sum().backward()
        g_clb = [p.grad.clone() for p in model.parameters()]
        for p in model.parameters():
            p.grad = None
        (want * torch.tensor([1.0, -2.0, 3.0])).sum().backward()
        for a, w in zip(g_clb, (p.grad for p in model.parameters())):
            np.testing.assert_allclose(a.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)
    s = cd.stats()
    # before: aten.expand.default and aten.div.Scalar by a size were graph breaks
    assert s["graph_breaks"] == 0, s
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


# ---- a data-dependent op inside the compiled graph gives its own bound ----

@torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)
def test_nonzero_inside_the_graph_bounds_the_batch():
    torch.manual_seed(0)
    model = Feedforward(2, hidden_size=10)
    model.fc1.weight.data.normal_()  # not PT/XLA's constant weights: rows must differ

    def predict(x_test):
        x = torch.nonzero(x_test.int()).float()  # [<= 10, 2]: nonzero of a 5x2 input
        return model(x)

    compiled = torch.compile(predict, backend="clbound")
    for n in batch_sizes(10, 0, 10):
        x_test = torch.zeros(5, 2)
        x_test.view(-1)[:n] = 1
        with torch.no_grad():
            got, want = compiled(x_test), predict(x_test)
        assert got.shape == want.shape == (n, 1)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=1e-6)
    s = cd.stats()
    assert counters["stats"]["unique_graphs"] == 1 and s["graphs_lowered"] == 1, (dict(counters["stats"]), s)
    assert s["graph_breaks"] == 0, s


@torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)
def test_boolean_indexing_is_masked_select_and_scatter():
    def f(x, y):
        m = x > 0
        z = x.clone()
        z[m] = y[m] * 2.0       # aten.index_put with as many values as m has trues
        return z, x[m] + 1.0    # aten.index: masked_select

    def broadcast(x):
        z = x.clone()
        z[x > 0] = torch.ones(1)  # one value for every true: torch broadcasts it
        return z

    def other_mask(x, y):
        z = x.clone()
        z[x > 0] = y[y > 0]  # counts PyTorch compares at run time (an error where they differ)
        return z

    g = torch.Generator().manual_seed(3)
    data = []
    for n in batch_sizes(5, 2, 12):
        x, y = torch.randn(n, 3, generator=g), torch.randn(n, 3, generator=g)
        torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
        torch._dynamo.mark_dynamic(y, 0, min=2, max=16)
        data.append((x, y))
    compiled = torch.compile(f, backend="clbound")
    for x, y in data:
        with torch.no_grad():
            (gz, gs), (wz, ws) = compiled(x, y), f(x, y)
        assert gz.shape == wz.shape and gs.shape == ws.shape, (gz.shape, gs.shape)
        np.testing.assert_array_equal(gz.numpy(), wz.numpy())
        np.testing.assert_array_equal(gs.numpy(), ws.numpy())
    assert cd.stats()["graph_breaks"] == 0, cd.stats()
    compiled_b = torch.compile(broadcast, backend="clbound")
    for x, _ in data:  # a graph break, and the value torch gives
        with torch.no_grad():
            np.testing.assert_array_equal(compiled_b(x).numpy(), broadcast(x).numpy())
    assert "aten.index_put.default" in cd.stats()["graph_break_ops"], cd.stats()
    cd.reset_stats()
    compiled_o = torch.compile(other_mask, backend="clbound")
    x = torch.tensor([[1.0, -1.0, 2.0], [-3.0, 4.0, -5.0]])
    y = torch.tensor([[-1.0, 7.0, 8.0], [9.0, -2.0, -6.0]])  # 3 trues each: PyTorch's check passes
    with torch.no_grad():
        np.testing.assert_array_equal(compiled_o(x, y).numpy(), other_mask(x, y).numpy())
    assert "aten.index_put.default" in cd.stats()["graph_break_ops"], cd.stats()


class Slices(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 6)

    def forward(self, x):
        h = self.l(x)
        return h[:, 1:4] * 2.0 + h[:, -1:], h[2:], h[-1], x[:, 2], h[:, ::2]


def test_slices_and_selects_stay_in_the_graph():
    torch.manual_seed(0)
    model = Slices()
    compiled = torch.compile(model, backend="clbound")
    for n, x in dynamic_batches(6, 4, 12, 4):
        with torch.no_grad():
            got, want = compiled(x), model(x)
        for g, w in zip(got, want):
            assert g.shape == w.shape, (g.shape, w.shape)
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-6)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    # training through them: the backward's slice_backward and select_backward
    # are zeros with the gradient put into the slice (clb_basic_index_put)
    for n, x in dynamic_batches(4, 4, 12, 4):
        w = [torch.randn(t.shape) for t in model(x)]
        model.zero_grad()
        sum((t * v).sum() for t, v in zip(compiled(x), w)).backward()
        g_clb = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        sum((t * v).sum() for t, v in zip(model(x), w)).backward()
        for a, g in zip(g_clb, (p.grad for p in model.parameters())):
            np.testing.assert_allclose(a.numpy(), g.numpy(), rtol=1e-5, atol=1e-5)
    assert cd.stats()["graph_breaks"] == 0, cd.stats()


def test_slice_assignment_is_a_put():
    def f(x, y):
        z = x.clone()
        z[:, 1:3] = y[:, :2] * 2.0  # slice_scatter
        z[0] = -1.0                 # select_scatter of a fill
        return z

    compiled = torch.compile(f, backend="clbound")
    for n, x in dynamic_batches(5, 2, 12, 4):
        y = torch.randn(n, 4)
        torch._dynamo.mark_dynamic(y, 0, min=2, max=16)
        with torch.no_grad():
            got, want = compiled(x, y), f(x, y)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert cd.stats()["graph_breaks"] == 0, cd.stats()


def weighted_grads_match(clb_model, eager_model, got, want, ws):
    """The parameters' gradients of sum(t * w) over the outputs, the compiled
    model's against eager PyTorch's, within 1e-4 relative (1e-5 absolute)."""
    clb_model.zero_grad()
    eager_model.zero_grad()
    sum((t * w).sum() for t, w in zip(got, ws)).backward()
    sum((t * w).sum() for t, w in zip(want, ws)).backward()
    for a, b in zip(clb_model.parameters(), eager_model.parameters()):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-5)


def twins(model_cls):
    """(a model for eager PyTorch, a copy of it, that copy compiled with the
    clbound backend): the two train side by side from the same weights."""
    torch.manual_seed(0)
    eager_model, clb_model = model_cls(), model_cls()
    clb_model.load_state_dict(eager_model.state_dict())
    return eager_model, clb_model, torch.compile(clb_model, backend="clbound")


class Classifier(torch.nn.Module):
    """log_softmax over classes, NLL outside the compiled model (PyTorch's
    classifier idiom), and a softmax output."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 16)
        self.fc2 = torch.nn.Linear(16, 5)

    def forward(self, x):
        h = self.fc2(torch.relu(self.fc1(x)))
        return torch.log_softmax(h, dim=1), torch.softmax(h, dim=-1)


def test_softmax_and_log_softmax_train_in_the_graph():
    eager_model, clb_model, compiled = twins(Classifier)
    opts = [torch.optim.SGD(m.parameters(), lr=0.2) for m in (eager_model, clb_model)]
    g = torch.Generator().manual_seed(5)
    losses = {"eager": [], "clbound": []}
    for n in batch_sizes(12, 2, 16):
        x = torch.randn(n, 6, generator=g)
        y = torch.randint(0, 5, (n,), generator=g)
        torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
        for key, run, opt in (("eager", eager_model, opts[0]), ("clbound", compiled, opts[1])):
            logp, p = run(x)
            assert logp.shape == p.shape == (n, 5)
            loss = torch.nn.functional.nll_loss(logp, y) + 0.1 * (p * p).sum() / n
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[key].append(loss.item())
    np.testing.assert_allclose(losses["clbound"], losses["eager"], rtol=0, atol=LOSS_TOL)
    assert losses["eager"][-1] < losses["eager"][0]  # it learns
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # softmax, log_softmax and both backwards on clbound
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


class Selects(torch.nn.Module):
    """torch.where and masked_fill in the model; maximum and minimum, whose
    backwards select with where and masked_fill."""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 5)

    def forward(self, x):
        h = self.l(x)
        g = torch.where(h > 0, h, 0.1 * h)                  # a leaky ReLU
        g = g.masked_fill(x[:, :1] < -1.0, 0.0)             # a row mask, broadcast
        return torch.maximum(g, torch.minimum(h, g * 0.5 + 0.25))


def test_where_and_masked_fill_stay_in_the_graph():
    eager_model, clb_model, compiled = twins(Selects)
    g = torch.Generator().manual_seed(7)
    for n in batch_sizes(8, 2, 16):
        x = torch.randn(n, 4, generator=g)
        w = torch.randn(n, 5, generator=g)
        torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
        got, want = compiled(x), eager_model(x)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6)
        clb_model.zero_grad()
        eager_model.zero_grad()
        (got * w).sum().backward()
        (want * w).sum().backward()
        for a, b in zip(clb_model.parameters(), eager_model.parameters()):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-5)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # before clb_where: where, masked_fill (and the slice) broke it
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


class Activations(torch.nn.Module):
    """torch.nn's activations without a clbound op of their own."""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 6)

    def forward(self, x):
        F = torch.nn.functional
        h = self.l(x) * 2.0
        return (F.leaky_relu(h, 0.1), F.silu(h), F.hardtanh(h), torch.clamp(h, -0.5, 0.7), F.relu6(h),
                F.elu(h, alpha=0.8), torch.clamp(h, min=0.1), torch.logical_and(h > 0, h < 1).float())


def test_activations_train_in_the_graph():
    eager_model, clb_model, compiled = twins(Activations)
    g = torch.Generator().manual_seed(11)
    for n, x in dynamic_batches(6, 2, 12, 4):
        got, want = compiled(x), eager_model(x)
        ws = [torch.randn(t.shape, generator=g) for t in want]
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-5)
        weighted_grads_match(clb_model, eager_model, got, want, ws)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


def f64_twin(model_cls):
    """(the model in float32, the same weights in float64, the float32 one
    compiled with the clbound backend): float results are checked against
    double precision."""
    torch.manual_seed(0)
    model = model_cls()
    ref = model_cls().double()
    ref.load_state_dict(model.state_dict())
    return model, ref, torch.compile(model, backend="clbound")


def check_against_f64(model, ref, compiled, batches, rtol, atol, grad_rtol, grad_atol, after_step=None):
    """Outputs and parameter gradients of the compiled float32 model against
    the float64 reference, batch by batch (sizes changing every step). A batch
    is (n, x) or (n, (x, t, ...)): floating inputs reach the reference in
    float64, integer ones as they are; integer outputs compare exactly and take
    no gradient. after_step(step), when given, checks more after each step."""
    g = torch.Generator().manual_seed(11)
    for step, (n, xs) in enumerate(batches):
        xs = xs if isinstance(xs, tuple) else (xs,)
        got, want = compiled(*xs), ref(*(v.double() if v.is_floating_point() else v for v in xs))
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert a.shape == b.shape and a.is_floating_point() == b.is_floating_point(), (a, b)
            if b.is_floating_point():
                assert a.dtype == torch.float32
                np.testing.assert_allclose(a.detach().double().numpy(), b.detach().numpy(), rtol=rtol, atol=atol)
            else:  # indices: exactly (random values, no ties)
                np.testing.assert_array_equal(a.numpy(), b.numpy())
        floats = [(a, b) for a, b in zip(got, want) if b.is_floating_point()]
        ws = [torch.randn(b.shape, generator=g, dtype=torch.float64) for _, b in floats]
        model.zero_grad()
        ref.zero_grad()
        sum((a * w.float()).sum() for (a, _), w in zip(floats, ws)).backward()
        sum((b * w).sum() for (_, b), w in zip(floats, ws)).backward()
        for a, b in zip(model.parameters(), ref.parameters()):
            np.testing.assert_allclose(a.grad.double().numpy(), b.grad.numpy(), rtol=grad_rtol, atol=grad_atol)
        if after_step is not None:
            after_step(step)


def compiled_matches_f64(f, shapes, seed, grad_atol=1e-6):
    """f compiled with the clbound backend on float32 inputs of the given
    shapes (dim 0 marked dynamic), against f itself in float64: its value,
    and the gradient of a weighted sum of it, each within 1e-5 relative or
    1e-6 (grad_atol for the gradient) of the largest magnitude (float32 sums
    that cancel)."""
    c = torch.compile(f, backend="clbound")
    torch.manual_seed(seed)
    for shape in shapes:
        x = torch.randn(*shape, requires_grad=True)
        x64 = x.detach().double().requires_grad_()
        torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
        got, want = c(x), f(x64)
        assert got.shape == want.shape
        scale = max(1.0, float(want.detach().abs().max()))
        np.testing.assert_allclose(got.detach().double().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6 * scale)
        g, = torch.autograd.grad((got * torch.arange(got.numel()).view(got.shape)).sum(), x)
        w, = torch.autograd.grad((want * torch.arange(want.numel()).view(want.shape)).sum(), x64)
        scale = max(1.0, float(w.abs().max()))
        np.testing.assert_allclose(g.double().numpy(), w.numpy(), rtol=1e-5, atol=grad_atol * scale)


def batches_with(steps, make, seed):
    """dynamic_batches with more inputs per batch: (n, (x, *make(n, g))), each
    extra input's dim 0 marked dynamic as x's is."""
    g = torch.Generator().manual_seed(seed)
    for n, x in dynamic_batches(steps, 2, 12, 4):
        extra = make(n, g)
        for v in extra:
            torch._dynamo.mark_dynamic(v, 0, min=2, max=16)
        yield n, (x, *extra)


class ModernActivations(torch.nn.Module):
    """GELU (exact and tanh), softplus (PyTorch's threshold and a low one),
    hardswish, mish and erf: clbound's erf and elementwise ops."""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 6)

    def forward(self, x):
        F = torch.nn.functional
        h = self.l(x) * 4.0  # both tails, hardswish's kinks and softplus's threshold are reached
        return (F.gelu(h), F.gelu(h, approximate="tanh"), F.softplus(h), F.softplus(h, beta=2.0, threshold=3.0),
                F.hardswish(h), F.mish(h), torch.erf(h))


def test_gelu_softplus_hardswish_mish_train_in_the_graph():
    model, ref, compiled = f64_twin(ModernActivations)
    # against float64: values within 1e-5 (absolute and relative), gradients within 1e-4 relative, 1e-5 absolute
    check_against_f64(model, ref, compiled, dynamic_batches(6, 2, 12, 4), 1e-5, 1e-5, 1e-4, 1e-5)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # before clb's erf and these lowerings: 6 ops broke it
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


def test_softplus_and_mish_keep_small_values():
    # log1p(exp(x)) at x = -30 is 9.4e-14: log(1 + u) would round it to 0; past
    # the threshold softplus is x, and mish's exp overflowing to inf gives x
    F = torch.nn.functional
    x = torch.tensor([-30.0, -17.0, -1e-3, 0.0, 2.0, 19.5, 25.0, 95.0])
    torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
    got = torch.compile(lambda v: (F.softplus(v), F.mish(v), F.softplus(v, beta=0.5, threshold=100.0)),
                        backend="clbound")(x)
    x64 = x.double()
    want = (F.softplus(x64), F.mish(x64), F.softplus(x64, beta=0.5, threshold=100.0))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.double().numpy(), b.numpy(), rtol=2e-6, atol=0)
    assert cd.stats()["graph_breaks"] == 0, cd.stats()


class Normed(torch.nn.Module):
    """LayerNorm with and without its affine parameters (and without bias),
    over a 2-D batch and a 3-D one (two leading dims to sum weight gradients
    over)."""

    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(4, 16)
        self.n1 = torch.nn.LayerNorm(16)
        self.n2 = torch.nn.LayerNorm(16, elementwise_affine=False)
        self.n3 = torch.nn.LayerNorm(8, bias=False, eps=1e-3)
        self.l2 = torch.nn.Linear(16, 3)
        with torch.no_grad():  # not the ones and zeros they start as
            self.n1.weight.uniform_(0.5, 1.5)
            self.n1.bias.uniform_(-0.5, 0.5)
            self.n3.weight.uniform_(-1.0, 1.0)

    def forward(self, x):
        h = self.l1(x)
        return (self.l2(torch.nn.functional.gelu(self.n1(h))), self.n2(h * 3.0),
                self.n3(h.reshape(h.shape[0], 2, 8)))


def test_layer_norm_trains_in_the_graph():
    model, ref, compiled = f64_twin(Normed)
    check_against_f64(model, ref, compiled, dynamic_batches(6, 2, 12, 4), 1e-5, 1e-5, 1e-4, 1e-5)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # before: native_layer_norm and its backward broke it
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


def test_layer_norm_over_two_dims_breaks_the_graph_and_matches_eager():
    torch.manual_seed(0)
    norm = torch.nn.LayerNorm((2, 8))
    lin = torch.nn.Linear(4, 16)

    def f(x):
        return norm(lin(x).reshape(x.shape[0], 2, 8)).sum(-1)

    compiled = torch.compile(f, backend="clbound")
    for n, x in dynamic_batches(3, 2, 12, 4):
        np.testing.assert_allclose(compiled(x).detach().numpy(), f(x).detach().numpy(), rtol=1e-5, atol=1e-5)
    assert "aten.native_layer_norm.default" in cd.stats()["graph_break_ops"], cd.stats()


class LossMath(torch.nn.Module):
    """The elementwise math of losses and norms: abs (L1), sqrt, rsqrt, log1p,
    expm1, reciprocal, sign, clamp_min / clamp_max (scalar and tensor bounds),
    amax, logsigmoid, BCE with logits (three reductions), the *_like
    constructors, and exp of an integer tensor (computed in float)."""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 6)

    def forward(self, x, t):
        F = torch.nn.functional
        h = self.l(x)
        p = h * h + 0.5
        return (F.l1_loss(h, t), p.sqrt(), p.rsqrt(), p.log1p(), (h * 0.1).expm1(), p.reciprocal(),
                torch.sign(h) * h, h.clamp_min(-0.3), h.clamp_max(t), h.amax(-1), F.logsigmoid(h),
                F.binary_cross_entropy_with_logits(h, t), F.binary_cross_entropy_with_logits(h, t, reduction="sum"),
                F.binary_cross_entropy_with_logits(h, t, reduction="none"), torch.zeros_like(h) + torch.ones_like(h)
                + torch.full_like(h, 2.5), torch.exp((x * 2).long()) * 1e-3, F.elu(h))


def test_loss_math_trains_in_the_graph():
    model, ref, compiled = f64_twin(LossMath)
    batches = batches_with(6, lambda n, g: (torch.rand(n, 6, generator=g),), 8)
    check_against_f64(model, ref, compiled, batches, 1e-5, 1e-6, 1e-4, 1e-5)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # before: abs, sqrt, rsqrt, log1p, expm1, reciprocal, sign, amax, ... broke it
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


class _OneLinear(torch.nn.Module):
    """A model whose first layer is Linear(4, 6) (self.l); forward is each test's."""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 6)


class Statistics(_OneLinear):
    """Losses and statistics that PyTorch's own decompositions (torch._decomp)
    turn into ops clbound runs: smooth L1, Huber, KL divergence (xlogy),
    soft margin, var / std / var_mean / std_mean (the count of a dynamic dim is
    the batch size of the call), cosine similarity, vector norms, logsumexp."""

    def forward(self, x, t):
        F = torch.nn.functional
        h = self.l(x)
        vm = torch.var_mean(h, 0)
        sm = torch.std_mean(h, -1, keepdim=True)
        return (F.smooth_l1_loss(h, t), F.smooth_l1_loss(h, t, beta=0.3, reduction="sum"),
                F.huber_loss(h, t, delta=0.5), F.huber_loss(h, t, reduction="none"),
                F.kl_div(F.log_softmax(h, -1), F.softmax(t, -1), reduction="batchmean"), torch.xlogy(t, h * h + 0.1),
                F.soft_margin_loss(h, t * 2 - 1), h.var(0), h.std(-1), h.var(-1, correction=0), h.var(), h.std(),
                vm[0] + vm[1], sm[0] * sm[1], F.cosine_similarity(h, t), F.normalize(h, dim=-1),
                torch.linalg.vector_norm(h), torch.linalg.vector_norm(h, 3, -1), torch.logsumexp(h, -1))


def test_decomposed_losses_and_statistics_train_in_the_graph():
    model, ref, compiled = f64_twin(Statistics)

    def targets(n, g):
        t = torch.rand(n, 6, generator=g)
        t[0, :2] = 0  # xlogy(0, y) is 0
        return (t,)
    # float32 sums of up to 72 terms against float64
    check_against_f64(model, ref, compiled, batches_with(6, targets, 9), 1e-5, 1e-5, 1e-4, 1e-4)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # before: smooth_l1, huber, xlogy, var, std, vector_norm, logsumexp broke it
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


@pytest.mark.filterwarnings("ignore:(var|std)\\(\\):UserWarning")  # "degrees of freedom is <= 0": eager, small n
@torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)
def test_variance_of_a_data_dependent_batch_counts_on_the_device():
    def f(x_test):
        rows = torch.nonzero(x_test.int()).float() + 0.5  # [<= 10, 2]: its count is known only on the device
        return rows.var(0), rows.std(0, correction=0), rows.var(), rows.var(0, correction=3)

    compiled = torch.compile(f, backend="clbound")
    for n in (3, 7, 1, 10, 0, 2):  # n <= correction: a divisor of max(n - correction, 0), inf or NaN
        x_test = torch.zeros(5, 2)
        x_test.view(-1)[torch.randperm(10)[:n]] = 1
        before = cd.context().counters()["host_syncs"] if n != 3 else None
        with torch.no_grad():
            got, want = compiled(x_test), f(x_test.double())
        if before is not None:  # the outputs' one read: no sync for the count
            assert cd.context().counters()["host_syncs"] == before + 1
        for a, b in zip(got, want):  # n = 1: var with correction 1 is NaN, as in PyTorch
            np.testing.assert_allclose(a.double().numpy(), b.numpy(), rtol=1e-6, atol=1e-6, equal_nan=True)
        assert bool(torch.isnan(got[0]).all()) == (n <= 1)
        assert np.isfinite(got[3].numpy()).all() == (n > 3)  # inf or NaN where n <= 3, as the reference
    assert cd.stats()["graph_breaks"] == 0, cd.stats()


class Extremes(_OneLinear):
    """max / min over a static dim with their indices, argmax / argmin (also
    over all of a static tensor), amin: the predicted class and the hardest
    example of a batch."""

    def forward(self, x):
        h = self.l(x)
        top, where = h.max(-1)
        low, at = torch.min(h, 1, keepdim=True)
        return (top, where, low * 2, at, h.argmax(-1), h.argmin(1, keepdim=True), h.amin(-1),
                self.l.weight.argmax(), self.l.weight.argmin(), self.l.weight.argmax(keepdim=True))


def test_max_min_and_their_indices_train_in_the_graph():
    model, ref, compiled = f64_twin(Extremes)
    check_against_f64(model, ref, compiled, dynamic_batches(6, 2, 12, 4), 1e-5, 1e-6, 1e-5, 1e-6)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # before: max.dim, min.dim, argmax, argmin, amin, their backward broke it
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


@torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)
def test_any_all_and_arange_match_eager():
    def f(x, k):
        m = x > 0.5
        none = x[x > 2.0]  # rand < 1: no element, on the device
        return (m.any(-1), m.all(0), (x * 0).any(), torch.isnan(x).any(1, keepdim=True), k.all(-1), k.any(),
                x.any(dim=(0, 1)), none.any(), none.all(), x + torch.arange(5),
                x * torch.arange(1.0, 2.0, 0.25).reshape(1, 4)[:, :1])

    compiled = torch.compile(f, backend="clbound")
    for n in (6, 2, 5):
        x = torch.rand(n, 5)
        x[0, 1] = float("nan")
        k = torch.randint(0, 2, (n, 5), dtype=torch.uint8)
        torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
        torch._dynamo.mark_dynamic(k, 0, min=2, max=16)
        with torch.no_grad():
            got, want = compiled(x, k), f(x, k)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.shape == b.shape, (a, b)
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert cd.stats()["graph_breaks"] == 0, cd.stats()


def test_one_hot_targets_train_and_check_their_range_on_the_device():
    F = torch.nn.functional
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 5)

    def loss_of(x, y):  # one_hot's range check is torch._assert_async: on the device, no host sync
        return F.binary_cross_entropy_with_logits(model(x), F.one_hot(y, 5).float())

    compiled = torch.compile(loss_of, backend="clbound")
    g = torch.Generator().manual_seed(16)
    for n, x in dynamic_batches(4, 2, 12, 4):
        y = torch.randint(0, 5, (n,), generator=g)
        torch._dynamo.mark_dynamic(y, 0, min=2, max=16)
        got, want = compiled(x, y), loss_of(x, y)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        gw, = torch.autograd.grad(got, model.weight)
        ww, = torch.autograd.grad(want, model.weight)
        np.testing.assert_allclose(gw.numpy(), ww.numpy(), rtol=1e-4, atol=1e-6)
    assert cd.stats()["graph_breaks"] == 0, cd.stats()
    x = torch.randn(3, 4)
    y = torch.tensor([0, 5, 1])  # class 5 of 5: eager raises a RuntimeError, and so does the call
    torch._dynamo.mark_dynamic(y, 0, min=2, max=16)
    torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
    with pytest.raises(RuntimeError, match="assertion failed on the device"):
        compiled(x, y)
    with pytest.raises(RuntimeError):
        loss_of(x, y)
    y = torch.tensor([0, 4, 1])  # and the next call runs
    np.testing.assert_allclose(compiled(x, y).item(), loss_of(x, y).item(), rtol=1e-5)


def test_indices_of_ties_nan_and_integers_match_eager():
    def f(x, k):
        return x.argmax(-1), x.argmin(-1), x.max(1), x.min(-1, keepdim=True), k.argmax(-1), k.amax(-1)

    compiled = torch.compile(f, backend="clbound")
    nan, inf = float("nan"), float("inf")
    rows = [[1.0, 3.0, 3.0, -2.0, -2.0], [nan, 0.0, nan, 5.0, -inf], [-inf, -inf, -inf, -inf, -inf],
            [0.0, -0.0, 0.0, -0.0, 1.0], [2.0, 1.0, 0.0, nan, -1.0], [inf, 7.0, inf, -inf, -inf]]
    for n in (6, 3, 5):
        x = torch.tensor(rows[:n])
        k = torch.tensor([[3, 9, 9, -4, 0], [-7, -7, -8, 2**40, 2**40]] * 3)[:n]  # int64: ties, large values
        torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
        torch._dynamo.mark_dynamic(k, 0, min=2, max=16)
        got, want = compiled(x, k), f(x, k)
        for a, b in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a.numpy(), b.numpy())  # the first index of a tie or a NaN
    assert cd.stats()["graph_breaks"] == 0, cd.stats()
    # over the dynamic batch dim (max-pooling over a sequence): the positions of each call's own size; ties
    # give the first row, a NaN its own
    g = lambda x: (x.argmax(0), x.argmin(0), x.max(0), x.amin(0))  # noqa: E731
    over_batch = torch.compile(g, backend="clbound")
    for n in (7, 3, 11):
        x = torch.randn(n, 3, generator=torch.Generator().manual_seed(n))
        x[2] = x[1]  # a tie in every column
        x[n - 1, 2] = nan
        torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
        for a, b in zip(torch.utils._pytree.tree_leaves(over_batch(x)), torch.utils._pytree.tree_leaves(g(x))):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert cd.stats()["graph_breaks"] == 0, cd.stats()  # before: any of them over the dynamic dim broke it
    # a scatter of the user's own runs in eager PyTorch, which checks its indices
    scatter = torch.compile(lambda x, i, s: x.scatter(1, i, s), backend="clbound")
    with pytest.raises(RuntimeError, match="out of bounds"):
        scatter(torch.zeros(4, 5), torch.full((4, 1), 7), torch.ones(4, 1))


class Normalized(torch.nn.Module):
    """BatchNorm1d (batch statistics and running ones in training, running ones
    in eval), PReLU, SELU, CELU, hardsigmoid, GLU, lerp, addcmul, stack, masks
    combined with & and |, ones / new_full of the batch's size, and the losses in
    their other forms: mse and BCE with reduction sum / none, BCE with a weight,
    BCE with logits with pos_weight; all through PyTorch's decompositions."""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 6)
        self.bn = torch.nn.BatchNorm1d(6)
        self.act = torch.nn.PReLU()

    def forward(self, x, t):
        F = torch.nn.functional
        h = self.act(self.bn(self.l(x)))
        p = torch.sigmoid(h)
        m = ((h > 0) & (t > 0.3)) | (t > 0.9)
        w = torch.ones(h.shape[0], 1) * 0.5
        return (h, F.selu(h), F.celu(h, 0.7), F.hardsigmoid(h), F.glu(torch.cat([h, t], -1)), torch.lerp(h, t, 0.3),
                torch.addcmul(h, h, t, value=0.5), torch.stack([h, t], 1).sum(1), torch.where(m, h, 0.0),
                h.new_full((h.shape[0], 2), 1.5) * h[:, :2], F.mse_loss(h, t, reduction="sum"),
                F.mse_loss(h, t, reduction="none"), F.binary_cross_entropy(p, t, reduction="sum"),
                F.binary_cross_entropy(p, t, reduction="none"), F.binary_cross_entropy(p, t, weight=w),
                F.binary_cross_entropy_with_logits(h, t, pos_weight=torch.full((6,), 2.0)))


def test_batch_norm_and_other_loss_forms_train_in_the_graph():
    model, ref, compiled = f64_twin(Normalized)
    g = torch.Generator().manual_seed(13)

    def running_statistics(step):  # updated in place as eager PyTorch updates them
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            np.testing.assert_allclose(getattr(model.bn, name).double().numpy(), getattr(ref.bn, name).numpy(),
                                       rtol=1e-5, atol=1e-6, err_msg=f"{name} at step {step}")
    batches = batches_with(6, lambda n, g: (torch.rand(n, 6, generator=g),), 13)
    check_against_f64(model, ref, compiled, batches, 1e-5, 1e-5, 1e-4, 1e-4, after_step=running_statistics)
    assert int(model.bn.num_batches_tracked) == 6
    model.eval()
    ref.eval()
    for n, x in dynamic_batches(3, 2, 12, 4):  # eval: the running statistics; a second compile, by Dynamo's guard
        t = torch.rand(n, 6, generator=g)
        with torch.no_grad():
            got, want = compiled(x, t), ref(x.double(), t.double())
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.double().numpy(), b.numpy(), rtol=1e-5, atol=1e-5)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # before: batch norm, prelu, selu, celu, hardsigmoid, glu, ... broke it


class Periodic(_OneLinear):
    """sin / cos features (as a positional encoding's), the rounding ops (their
    gradient is 0; of an integer tensor, the tensor), frac, and base 2 and 10
    logarithms and powers."""

    def forward(self, x):
        h = self.l(x)
        q = h * 3
        k = (x * 4).long()
        return (q, q.floor(), q.ceil(), q.round(), q.trunc(), torch.sin(h) * torch.cos(2 * h), q.frac() * h,
                (h * h + 0.5).log2(), (h * h + 0.5).log10(), h.exp2(), k.floor() + k.round())


def test_trig_rounding_and_base_2_train_in_the_graph():
    model, ref, compiled = f64_twin(Periodic)
    g = torch.Generator().manual_seed(15)
    for n, x in dynamic_batches(6, 2, 12, 4):
        got, want = compiled(x), ref(x.double())
        q = got[0].detach().numpy()  # the rounding ops exactly, on the compiled model's own float32 q
        for a, fn in zip(got[1:5], (np.floor, np.ceil, np.round, np.trunc)):  # np.round: ties to even, as torch
            np.testing.assert_array_equal(a.detach().numpy(), fn(q))
        np.testing.assert_array_equal(got[-1].numpy(), want[-1].numpy())  # of an integer tensor
        for k, (a, b) in enumerate(zip(got, want)):
            assert a.shape == b.shape
            if k in (0, 5, 7, 8, 9):
                np.testing.assert_allclose(a.detach().double().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got[6].detach().numpy(), (q - np.trunc(q)) * got[0].detach().numpy() / 3,
                                   rtol=1e-5, atol=1e-6)
        ws = [torch.randn(b.shape, generator=g, dtype=torch.float64) for b in want if b.is_floating_point()]
        model.zero_grad()
        ref.zero_grad()
        sum((a * w.float()).sum() for a, w in zip(got, ws)).backward()
        sum((b * w).sum() for b, w in zip(want, ws)).backward()
        for a, b in zip(model.parameters(), ref.parameters()):
            np.testing.assert_allclose(a.grad.double().numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-4)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # before: sin, cos, floor, ceil, round, trunc, frac, log2, log10, exp2 broke it
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


class Shuffled(_OneLinear):
    """flip over static dims, repeat (along the features and along the dynamic
    batch), softmax and log_softmax over dim 0 (over the batch: a transpose),
    ~ of a mask, cross-entropy with label smoothing (which uses it), and
    cumsum along the features (its backward flips) and along the batch, and of
    integers (int64)."""

    def forward(self, x, y):
        F = torch.nn.functional
        h = self.l(x)
        keep = ~(h > 0.2)
        return (h.flip(-1), h.unsqueeze(1).flip(1, 2).sum(1), h.repeat(1, 2), h[:, :3].repeat(2, 1), h.repeat(2, 1, 1),
                F.softmax(h, 0), F.log_softmax(h, 0), torch.where(keep, h, 0.0),
                F.cross_entropy(h, y, label_smoothing=0.1), h.cumsum(-1), torch.cumsum(h.detach(), 0),
                y.cumsum(0))


def test_flip_repeat_and_softmax_over_the_batch_train_in_the_graph():
    model, ref, compiled = f64_twin(Shuffled)
    batches = batches_with(6, lambda n, g: (torch.randint(0, 6, (n,), generator=g),), 17)
    check_against_f64(model, ref, compiled, batches, 1e-5, 1e-6, 1e-4, 1e-5)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # before: flip, repeat, softmax over dim 0 and bitwise_not broke it
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


class Dropped(torch.nn.Module):
    """A linear layer under dropout, returned with its input to the dropout, so
    that the test sees the mask (out != 0) and checks each value and gradient."""

    def __init__(self, p):
        super().__init__()
        self.l = torch.nn.Linear(4, 32)
        self.drop = torch.nn.Dropout(p)

    def forward(self, x):
        h = self.l(x)
        return self.drop(h), h


def test_dropout_trains_in_the_graph():
    # dropout's numbers are clbound's own stream, not eager PyTorch's: each value is
    # checked against its own mask (out != 0): out = h * (1 / (1 - p)) where kept,
    # exactly as aten computes it, and the weight gradient against float64 with
    # that mask; the kept fraction over all steps within 5 sigma of 1 - p
    p = 0.3
    torch.manual_seed(0)
    model = Dropped(p)
    compiled = torch.compile(model, backend="clbound")
    g = torch.Generator().manual_seed(3)
    kept = total = 0
    for n, x in dynamic_batches(8, 2, 16, 4):
        out, h = compiled(x)
        mask = out != 0
        np.testing.assert_array_equal(out.detach().numpy(), (h * mask * (1 / (1 - p))).detach().numpy())
        kept += int(mask.sum())
        total += mask.numel()
        w = torch.randn(out.shape, generator=g)
        model.zero_grad()
        (out * w).sum().backward()
        dh = (w * mask).double() / (1 - p)  # d loss / d h through the mask
        np.testing.assert_allclose(model.l.weight.grad.double().numpy(), (dh.T @ x.double()).numpy(),
                                   rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(model.l.bias.grad.double().numpy(), dh.sum(0).numpy(), rtol=1e-5, atol=1e-5)
    sigma = (p * (1 - p) / total) ** 0.5
    assert abs(kept / total - (1 - p)) < 5 * sigma, (kept, total)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # before clb_rand_uniform: native_dropout, its items and its backward broke it
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


def test_dropout_repeats_under_manual_seed_and_its_edge_rates():
    F = torch.nn.functional
    x = torch.randn(300) + 5.0  # no zeros: a zero out is a dropped value
    torch._dynamo.mark_dynamic(x, 0, min=2, max=512)
    drop = torch.compile(lambda v, p: F.dropout(v, p, True), backend="clbound")
    torch.manual_seed(7)
    a, b = drop(x, 0.5), drop(x, 0.5)
    torch.manual_seed(7)
    np.testing.assert_array_equal(drop(x, 0.5).numpy(), a.numpy())  # the seed comes from PyTorch's generator
    assert not torch.equal(a != 0, b != 0)  # each call draws a new mask
    np.testing.assert_array_equal(drop(x, 0.0).numpy(), x.numpy())
    np.testing.assert_array_equal(drop(x, 1.0).numpy(), np.zeros(300, np.float32))
    assert cd.stats()["graph_breaks"] == 0, cd.stats()


def test_dropout_is_off_in_eval_mode():
    torch.manual_seed(0)
    model = Dropped(0.5)
    compiled = torch.compile(model, backend="clbound")
    model.eval()
    for n, x in dynamic_batches(3, 2, 12, 4):
        with torch.no_grad():
            out, h = compiled(x)
            np.testing.assert_allclose(out.numpy(), model.l(x).numpy(), rtol=1e-6, atol=1e-6)
            np.testing.assert_array_equal(out.numpy(), h.numpy())


def test_rand_like_is_uniform_and_seeded():
    x = torch.zeros(20000)
    torch._dynamo.mark_dynamic(x, 0, min=2, max=32768)
    rand = torch.compile(lambda v: torch.rand_like(v) + v, backend="clbound")
    torch.manual_seed(1)
    r = rand(x)
    assert r.dtype == torch.float32 and r.shape == x.shape
    assert float(r.min()) >= 0 and float(r.max()) < 1
    assert abs(float(r.mean()) - 0.5) < 5 * (1 / 12 / 20000) ** 0.5
    torch.manual_seed(1)
    np.testing.assert_array_equal(rand(x).numpy(), r.numpy())
    assert cd.stats()["graph_breaks"] == 0, cd.stats()


class WithLoss(torch.nn.Module):
    """A classifier whose forward computes its losses (the Hugging Face idiom):
    cross-entropy with mean and sum reductions, and per row with an
    ignore_index that some targets hit."""

    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(4, 16)
        self.l2 = torch.nn.Linear(16, 5)

    def forward(self, x, t):
        F = torch.nn.functional
        z = self.l2(torch.relu(self.l1(x)))
        return (F.cross_entropy(z, t), F.cross_entropy(z, t, reduction="sum"),
                F.nll_loss(F.log_softmax(z, -1), t.clamp(min=0), reduction="none", ignore_index=2))


def test_cross_entropy_inside_the_model_trains_in_the_graph():
    torch.manual_seed(0)
    model, ref = WithLoss(), WithLoss().double()
    ref.load_state_dict(model.state_dict())
    compiled = torch.compile(model, backend="clbound")
    g = torch.Generator().manual_seed(4)
    for n, x in dynamic_batches(6, 2, 12, 4):
        t = torch.randint(0, 5, (n,), generator=g)
        t[0] = -100  # ignored by the first two losses (and clamped to class 0 for the third)
        torch._dynamo.mark_dynamic(t, 0, min=2, max=16)
        got, want = compiled(x, t), ref(x.double(), t)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.detach().double().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
        model.zero_grad()
        ref.zero_grad()
        (got[0] + 0.5 * got[1] + got[2].sum()).backward()
        (want[0] + 0.5 * want[1] + want[2].sum()).backward()
        for a, b in zip(model.parameters(), ref.parameters()):
            np.testing.assert_allclose(a.grad.double().numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-5)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # before clb_gather: nll_loss_forward, its items and its backward broke it
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


def test_cross_entropy_edges_match_eager():
    # a class outside [0, C) raises (PyTorch's IndexError); every row ignored gives NaN, as eager
    F = torch.nn.functional
    ce = torch.compile(lambda z, t: F.cross_entropy(z, t), backend="clbound")
    z = torch.randn(6, 5)
    torch._dynamo.mark_dynamic(z, 0, min=2, max=16)
    t = torch.tensor([0, 1, 5, 2, 3, 4])
    torch._dynamo.mark_dynamic(t, 0, min=2, max=16)
    with pytest.raises(IndexError, match="index 5 is out of range for dim 1 of actual size 5"):
        ce(z, t)
    ignored = torch.full((6,), -100)
    torch._dynamo.mark_dynamic(ignored, 0, min=2, max=16)
    assert torch.isnan(ce(z, ignored)) and torch.isnan(F.cross_entropy(z, ignored))
    gather = torch.compile(lambda x, i: torch.gather(x, 1, i) * 2, backend="clbound")
    i = torch.randint(0, 5, (6, 3))
    torch._dynamo.mark_dynamic(i, 0, min=2, max=16)
    np.testing.assert_array_equal(gather(z, i).numpy(), (torch.gather(z, 1, i) * 2).numpy())
    assert cd.stats()["graph_breaks"] == 0, cd.stats()


class Categorical(torch.nn.Module):
    """An MLP on categorical and dense features: three categories per row,
    embedded (one table with a padding row, one without) and summed, beside
    the dense ones."""

    def __init__(self):
        super().__init__()
        self.cats = torch.nn.Embedding(10, 3, padding_idx=0)
        self.kind = torch.nn.Embedding(4, 2)
        self.l = torch.nn.Linear(3 + 2 + 4, 1)

    def forward(self, x, c, k):
        return torch.sigmoid(self.l(torch.cat([self.cats(c).sum(1), self.kind(k), x], -1)))


def test_embeddings_train_in_the_graph():
    model, ref, compiled = f64_twin(Categorical)

    def categories(n, g):
        c = torch.randint(0, 10, (n, 3), generator=g)
        c[0, 0] = 0  # the padding row: embedded, but no gradient reaches it
        return c, torch.randint(0, 4, (n,), generator=g, dtype=torch.int32)

    def padding_row_untouched(step):
        assert not model.cats.weight.grad[0].any()
    check_against_f64(model, ref, compiled, batches_with(6, categories, 14), 1e-5, 1e-6, 1e-5, 1e-6,
                      after_step=padding_row_untouched)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # before: embedding and embedding_dense_backward broke it
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    bad = torch.tensor([[1, 2, 10]] * 3)  # an index outside [0, 10): PyTorch's IndexError, not a wrong row
    torch._dynamo.mark_dynamic(bad, 0, min=2, max=16)
    with pytest.raises(IndexError, match="out of range"):
        compiled(torch.randn(3, 4), bad, torch.zeros(3, dtype=torch.int32))
    x, c, k = torch.randn(3, 4), bad.clamp_max(9), torch.zeros(3, dtype=torch.int32)  # and the next call runs
    np.testing.assert_allclose(compiled(x, c, k).detach().double().numpy(),
                               ref(x.double(), c, k).detach().numpy(), rtol=1e-5, atol=1e-6)


class SelfAttention(torch.nn.Module):
    """One attention head over a sequence of 5: Linear layers on a 3-D input,
    the scores as a batched matmul with a transposed operand, softmax over the
    last dim, the weighted sum as another, and an einsum over the batch."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
        self.out = torch.nn.Linear(4, 1)

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        h = (q @ k.transpose(-1, -2) / 2.0).softmax(-1) @ v
        s = torch.einsum("bsd,bd->bs", h, x.mean(1))
        return torch.sigmoid(self.out(h.mean(1))).squeeze(1), s, h.permute(2, 0, 1)


@pytest.mark.parametrize("dynamic_sequence", [False, True])
def test_attention_trains_in_the_graph(dynamic_sequence):
    """The batch dynamic, and the sequence too: a Linear on [batch, sequence,
    4] then views its [batch * sequence, 4] product as [batch, sequence, 4],
    two symbolic sizes (clb_reshape_bounded)."""
    model, ref, compiled = f64_twin(SelfAttention)

    def sequences():
        for i, n in enumerate(batch_sizes(6, 2, 12)):
            x = torch.randn(n, 2 + (i * 3) % 7 if dynamic_sequence else 5, 4)
            torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
            if dynamic_sequence:
                torch._dynamo.mark_dynamic(x, 1, min=2, max=8)
            yield n, x
    # against float64: values within 1e-5 relative (1e-6 absolute), gradients within 1e-5 relative (1e-6 absolute)
    check_against_f64(model, ref, compiled, sequences(), 1e-5, 1e-6, 1e-5, 1e-6)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # before: bmm, the 3-D transposes and permutes, and the views broke it
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


class Transformer(torch.nn.Module):
    """A TransformerEncoderLayer (its attention through
    scaled_dot_product_attention inside multi_head_attention_forward), then
    F.scaled_dot_product_attention itself with a causal mask, a boolean mask and
    a float mask, and a head."""

    def __init__(self):
        super().__init__()
        self.enc = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
        self.head = torch.nn.Linear(8, 1)
        self.register_buffer("keep", torch.rand(5, 5, generator=torch.Generator().manual_seed(3)) > 0.3)
        self.keep[2] = False  # a row with every position masked: zeros, as eager's, and no NaN in a gradient
        self.register_buffer("bias", torch.randn(5, 5, generator=torch.Generator().manual_seed(4)))

    def forward(self, x):
        F = torch.nn.functional
        h = self.enc(x)
        q = h.view(h.shape[0], 5, 2, 4).transpose(1, 2)  # [batch, heads, sequence, head size]
        a = (F.scaled_dot_product_attention(q, q, q, is_causal=True)
             + F.scaled_dot_product_attention(q, q, q, attn_mask=self.keep)
             + F.scaled_dot_product_attention(q, q, q, attn_mask=self.bias, scale=0.3))
        return torch.sigmoid(self.head(a.transpose(1, 2).reshape(h.shape[0], 5, 8).mean(1))).squeeze(1)


def test_transformer_layers_train_in_the_graph():
    """scaled_dot_product_attention reaches AOTAutograd as the ops of
    PyTorch's math path (bmm, softmax, masks), not as the CPU flash kernel,
    which clbound does not run."""
    model, ref, compiled = f64_twin(Transformer)

    def sequences():
        for n in batch_sizes(6, 2, 12):
            x = torch.randn(n, 5, 8)
            torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
            yield n, x
    # against float64: values within 1e-5 relative (1e-6 absolute), gradients within 1e-4 relative (1e-6 absolute)
    check_against_f64(model, ref, compiled, sequences(), 1e-5, 1e-6, 1e-4, 1e-6)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # before: _scaled_dot_product_flash_attention_for_cpu and its backward
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    torch.nn.MultiheadAttention(8, 2)  # torch's own functions are as they were: the math path is the backend's copy
    assert torch.nn.functional.multi_head_attention_forward.__globals__["scaled_dot_product_attention"] is \
        torch._C._nn.scaled_dot_product_attention
    # inference: PyTorch's fast path (one fused native op per layer) is off, so the layer stays in the graph
    fast = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        model.eval()
        ref.eval()
        with torch.no_grad():
            for n in (3, 9):
                x = torch.randn(n, 5, 8)
                torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
                np.testing.assert_allclose(compiled(x).double().numpy(), ref(x.double()).numpy(), rtol=1e-5, atol=1e-6)
    finally:
        torch.backends.mha.set_fastpath_enabled(fast)
    assert cd.stats()["graph_breaks"] == 0, cd.stats()


def train_lm_against_f64(model, ref, compiled):
    """Ten SGD steps of a language model (forward(ids, targets) -> (loss,
    logits)) compiled with the clbound backend, on token_batches, against
    its float64 twin: the logits within 1e-5 relative (1e-6 absolute), the
    loss within 1e-5 relative, the gradients within 1e-4 relative or 1e-6 of
    their largest magnitude (float32 sums over every token); and the loss
    falls."""
    opt, opt_ref = torch.optim.SGD(model.parameters(), lr=0.3), torch.optim.SGD(ref.parameters(), lr=0.3)
    losses = []
    for b, (ids, targets) in token_batches(10, 5):
        (loss, logits), (want_loss, want) = compiled(ids, targets), ref(ids, targets)
        assert logits.shape == want.shape == (b, ids.shape[1], TinyGPT.V)
        np.testing.assert_allclose(logits.detach().double().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(float(loss.detach()), float(want_loss.detach()), rtol=1e-5)
        opt.zero_grad()
        opt_ref.zero_grad()
        loss.backward()
        want_loss.backward()
        for p, r in zip(model.parameters(), ref.parameters()):
            scale = max(1.0, float(r.grad.abs().max()))
            np.testing.assert_allclose(p.grad.double().numpy(), r.grad.numpy(), rtol=1e-4, atol=1e-6 * scale)
        opt.step()
        opt_ref.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0] - 0.3, losses  # it learns (ln 11 = 2.40 at the start)


class TinyGPT(torch.nn.Module):
    """A decoder in nanoGPT's style over [batch, sequence] token ids, both
    dims dynamic: token and position embeddings, LayerNorm, causal attention
    from one projection split into q, k and v, a GELU MLP, and cross-entropy
    over the flattened logits with ignored targets. `mask` is how attention
    is causal: a registered lower-triangular buffer sliced to the sequence
    (nanoGPT's), torch.triu of ones of the sequence's size, or
    scaled_dot_product_attention(is_causal=True) with q, k and v from unbind;
    `positions`: wpe(arange(T)) or wpe.weight[:T]."""
    V, C, HEADS, MAXT = 11, 16, 2, 12

    def __init__(self, mask="buffer", positions="arange"):
        super().__init__()
        self.mask, self.positions = mask, positions
        V, C, T = self.V, self.C, self.MAXT
        self.wte, self.wpe = torch.nn.Embedding(V, C), torch.nn.Embedding(T, C)
        self.ln1, self.ln2, self.lnf = torch.nn.LayerNorm(C), torch.nn.LayerNorm(C), torch.nn.LayerNorm(C)
        self.qkv, self.proj = torch.nn.Linear(C, 3 * C), torch.nn.Linear(C, C)
        self.fc, self.fc_out = torch.nn.Linear(C, 4 * C), torch.nn.Linear(4 * C, C)
        self.head = torch.nn.Linear(C, V, bias=False)
        self.register_buffer("causal", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def attention(self, x):
        F = torch.nn.functional
        B, T, C = x.size()
        hs = C // self.HEADS
        if self.mask == "sdpa":
            q, k, v = (t.transpose(1, 2) for t in self.qkv(x).view(B, T, 3, self.HEADS, hs).unbind(2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            q, k, v = (t.view(B, T, self.HEADS, hs).transpose(1, 2) for t in self.qkv(x).split(C, dim=2))
            att = (q @ k.transpose(-2, -1)) * (1.0 / hs ** 0.5)
            if self.mask == "buffer":
                att = att.masked_fill(self.causal[:, :, :T, :T] == 0, float("-inf"))
            else:
                att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, idx, targets):
        F = torch.nn.functional
        T = idx.size(1)
        pos = self.wpe(torch.arange(T)) if self.positions == "arange" else self.wpe.weight[:T]
        x = self.wte(idx) + pos
        x = x + self.attention(self.ln1(x))
        x = x + self.fc_out(F.gelu(self.fc(self.ln2(x))))
        logits = self.head(self.lnf(x))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return loss, logits


def token_batches(steps, seed):
    """(B, (ids, targets)) per step, batch 2-8 and sequence 2-11 both changing
    every step and both marked dynamic; each target a function of its token,
    one per row ignored (-1). The
    sequence's max stays below the causal buffer's 12: at 12, slicing the
    buffer to T would be the whole buffer, and Dynamo guards T != 12 (with any
    backend), which contradicts the mark."""
    g = torch.Generator().manual_seed(seed)
    for i, (b, t) in enumerate(zip(batch_sizes(steps, 2, 8), batch_sizes(steps + 3, 2, 11)[3:])):
        ids = torch.randint(0, TinyGPT.V, (b, t), generator=g)
        targets = (ids * 3 + 1) % TinyGPT.V  # learnable: a function of the token
        targets[:, i % t] = -1
        for v in (ids, targets):
            torch._dynamo.mark_dynamic(v, 0, min=2, max=8)
            torch._dynamo.mark_dynamic(v, 1, min=2, max=TinyGPT.MAXT - 1)
        yield b, (ids, targets)


@pytest.mark.parametrize("mask,positions", [("buffer", "arange"), ("triu", "slice"), ("sdpa", "arange")])
def test_gpt_trains_with_dynamic_batch_and_sequence(mask, positions):
    """A nanoGPT-style decoder trains with the batch and the sequence length
    changing every step: one Dynamo graph and no graph break. arange and the
    slice of a weight to the sequence length, triu's mask of its size, the
    split of q, k and v and their unbind, and the embedding of [batch,
    sequence] ids all run on clbound; each step's loss and logits against the
    float64 model, then an SGD step on both."""
    model, ref, compiled = f64_twin(lambda: TinyGPT(mask, positions))
    train_lm_against_f64(model, ref, compiled)
    s = cd.stats()
    # before: the embedding of [batch, sequence] ids, split, arange to T, triu, the
    # backward of weight[:T] (slice_backward of a size) and unbind broke it
    assert s["graph_breaks"] == 0, s
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    model.eval()
    ref.eval()
    with torch.no_grad():  # inference, the sizes changing
        for b, (ids, targets) in token_batches(3, 9):
            loss, logits = compiled(ids, targets)
            want_loss, want = ref(ids, targets)
            np.testing.assert_allclose(logits.double().numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(float(loss), float(want_loss), rtol=1e-5)
    assert cd.stats()["graph_breaks"] == 0, cd.stats()


def test_attention_runs_three_launches_with_no_copies():
    """q @ k^T, softmax, @ v: three launches. k's transpose is bmm's own flag
    (no clb_transpose copy) and AOTAutograd's expands and views of a tensor to
    its own shape are free (no multiply by ones, no reshape)."""
    f = lambda q, k, v: (q @ k.transpose(-1, -2)).softmax(-1) @ v  # noqa: E731
    c = torch.compile(f, backend="clbound")

    def qkv(n):
        xs = [torch.randn(n, 6, 8) for _ in range(3)]
        for x in xs:
            torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
        return xs
    with torch.no_grad():
        c(*qkv(3))
        ctx = cd.context()
        before = ctx.counters()["kernel_launches"]
        xs = qkv(5)
        got = c(*xs)
        assert ctx.counters()["kernel_launches"] - before == 3  # 14 at 20d2ba7
        want = f(*(x.double() for x in xs))
        np.testing.assert_allclose(got.double().numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    assert cd.stats()["graph_breaks"] == 0, cd.stats()


@pytest.mark.parametrize("name", ["transpose_same", "transpose_0_2", "permute", "permute_4d", "transpose_negative",
                                  "permute_identity", "transpose_last_two", "permute_last_two", "transpose_twice",
                                  "bmm_of_transposes"])
def test_transposes_and_permutes_of_higher_rank_match_eager(name):
    """A swap of the last two dims is lazy (copied where an op reads it, bmm's
    flag where bmm does); any other is a copy."""
    f = {"transpose_same": lambda x: x.transpose(1, 1) * 2, "transpose_0_2": lambda x: x.transpose(0, 2) + 1,
         "permute": lambda x: x.permute(2, 0, 1) * 3, "permute_4d": lambda x: x.unsqueeze(1).permute(3, 1, 0, 2).sum(1),
         "transpose_negative": lambda x: x.transpose(-1, -3).exp(),
         "permute_identity": lambda x: x.permute(0, -2, 2) - 1,
         "transpose_last_two": lambda x: x.transpose(1, 2).exp(), "permute_last_two": lambda x: x.permute(0, 2, 1) * 2,
         "transpose_twice": lambda x: x.transpose(-1, -2).transpose(1, 2) + 1,
         "bmm_of_transposes": lambda x: torch.bmm(x.transpose(1, 2), x) + torch.bmm(x, x.transpose(1, 2)).sum()}[name]
    compiled_matches_f64(f, [(n, 3, 4) for n in (5, 2, 7)], seed=5)
    assert cd.stats()["graph_breaks"] == 0, cd.stats()


class WeightedClassifier(torch.nn.Module):
    """Cross-entropy with class weights and an ignored class, per sample and
    as the mean: PyTorch's decomposition of a weighted nll_loss (gather,
    where, sums; a one-hot scatter in the backward)."""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 5)
        self.register_buffer("w", torch.tensor([0.5, 2.0, 1.0, 3.0, 0.25]))

    def forward(self, x, y):
        F = torch.nn.functional
        z = self.l(x)
        return (F.cross_entropy(z, y, weight=self.w, reduction="none", ignore_index=2),
                F.cross_entropy(z, y, weight=self.w, ignore_index=2), F.nll_loss(z.log_softmax(1), y, weight=self.w,
                                                                                  reduction="sum"))


def test_weighted_cross_entropy_trains_in_the_graph():
    model, ref, compiled = f64_twin(WeightedClassifier)

    def labels(n, g):
        y = torch.randint(0, 5, (n,), generator=g)
        y[0] = 2  # an ignored row every batch
        return (y,)
    # against float64: values within 1e-5 relative (1e-6 absolute), gradients within 1e-5 relative (1e-6 absolute)
    check_against_f64(model, ref, compiled, batches_with(6, labels, 21), 1e-5, 1e-6, 1e-5, 1e-6)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # before: nll_loss with weight= broke it
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


def test_one_hot_scatter_matches_eager_and_checks_its_range():
    """zeros_like(x).scatter(1, index, 1.0), an index from the batch itself:
    one-hot rows as eager's; an index outside the row fails the call, as
    eager's scatter raises, and the next call runs."""
    f = lambda x: torch.zeros_like(x).scatter(1, (x[:, :1] * 3).long().clamp(min=0), 1.0) * x  # noqa: E731
    c = torch.compile(f, backend="clbound")
    x = torch.tensor([[0.5, 1.0, 2.0, 3.0], [1.2, 0.0, -1.0, 4.0], [0.0, 7.0, 8.0, 9.0]])
    torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
    np.testing.assert_array_equal(c(x).numpy(), f(x).numpy())
    assert cd.stats()["graph_breaks"] == 0, cd.stats()
    bad = x.clone()
    bad[1, 0] = 1.5  # index 4 of 4 columns
    torch._dynamo.mark_dynamic(bad, 0, min=2, max=16)
    with pytest.raises(RuntimeError, match="out of bounds"):
        f(bad)
    with pytest.raises(RuntimeError, match="outside"):
        c(bad)
    np.testing.assert_array_equal(c(x).numpy(), f(x).numpy())


@pytest.mark.parametrize("name", ["flip_batch", "flip_both", "cumsum_batch", "triplet"])
def test_flip_over_the_batch_matches_float64(name):
    """flip over the dynamic batch dim (each call writes the reversed
    positions for its own size), so cumsum's backward along the batch and a
    batch against its own reverse (triplet margin) stay in the graph."""
    F = torch.nn.functional
    f = {"flip_batch": lambda x: x.flip(0) * torch.arange(4.0, dtype=x.dtype), "flip_both": lambda x: x.flip(0, 1) + x,
         "cumsum_batch": lambda x: x.cumsum(0).exp(),
         "triplet": lambda x: F.triplet_margin_loss(x, x * 0.5, x.flip(0))}[name]
    compiled_matches_f64(f, [(n, 4) for n in (5, 2, 9, 3)], seed=6)
    assert cd.stats()["graph_breaks"] == 0, cd.stats()  # before: flip over a dynamic dim broke it


class TinyLlama(torch.nn.Module):
    """A decoder in LLaMA's style over [batch, sequence] ids: RMSNorm, rotary
    position embeddings (the angles from arange(T) by torch.outer or by
    broadcasting, their cos and sin, the halves of q and k rotated by slices
    and cat), causal scaled_dot_product_attention, a SiLU-gated MLP."""
    HEADS = 2

    def __init__(self, rope="outer"):
        super().__init__()
        V, C = TinyGPT.V, TinyGPT.C
        self.rope = rope
        self.emb, self.head = torch.nn.Embedding(V, C), torch.nn.Linear(C, V, bias=False)
        self.norms = torch.nn.ParameterList([torch.nn.Parameter(1.0 + 0.1 * torch.randn(C)) for _ in range(3)])
        self.q, self.k, self.v, self.o = (torch.nn.Linear(C, C, bias=False) for _ in range(4))
        self.gate, self.up, self.down = (torch.nn.Linear(C, 32, bias=False), torch.nn.Linear(C, 32, bias=False),
                                         torch.nn.Linear(32, C, bias=False))
        hs = C // self.HEADS
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, hs, 2).float() / hs)))

    def norm(self, x, k):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norms[k]

    def forward(self, idx, targets):
        F = torch.nn.functional
        B, T = idx.shape
        C, hs = TinyGPT.C, TinyGPT.C // self.HEADS
        x = self.emb(idx)
        h = self.norm(x, 0)
        q, k, v = (p(h).view(B, T, self.HEADS, hs).transpose(1, 2) for p in (self.q, self.k, self.v))
        t = torch.arange(T, dtype=self.inv_freq.dtype)
        freqs = torch.outer(t, self.inv_freq) if self.rope == "outer" else t[:, None] * self.inv_freq[None, :]
        angles = torch.cat((freqs, freqs), dim=-1)
        cos, sin = angles.cos()[None, None], angles.sin()[None, None]

        def rotate(z):
            return z * cos + torch.cat((-z[..., hs // 2:], z[..., :hs // 2]), dim=-1) * sin
        y = F.scaled_dot_product_attention(rotate(q), rotate(k), v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(B, T, C))
        h = self.norm(x, 1)
        x = x + self.down(F.silu(self.gate(h)) * self.up(h))
        logits = self.head(self.norm(x, 2))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1), logits


@pytest.mark.parametrize("rope", ["outer", "broadcast"])
def test_llama_style_decoder_trains_with_dynamic_batch_and_sequence(rope):
    """RMSNorm, rotary embeddings over a dynamic sequence, causal attention and
    a SiLU-gated MLP: one Dynamo graph, no graph break, trained against its
    float64 twin."""
    model, ref, compiled = f64_twin(lambda: TinyLlama(rope))
    train_lm_against_f64(model, ref, compiled)
    # before: arange of T and the embedding of [batch, sequence] ids broke it
    assert cd.stats()["graph_breaks"] == 0, cd.stats()
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


@pytest.mark.parametrize("name", ["arange", "arange_from_1", "arange_step_2", "tril", "triu_1", "split",
                                  "split_sizes", "unbind"])
def test_arange_triu_and_split_over_a_dynamic_batch_match_float64(name):
    """arange to the batch size (its end a size: the values at the bound once,
    each call taking its own count), triu/tril of a dynamic tensor
    (PyTorch's decomposition, positions compared), and split, split_with_sizes
    and unbind along a static dim, beside the dynamic batch."""
    f = {"arange": lambda x: x * torch.arange(x.shape[0], dtype=x.dtype)[:, None],
         "arange_from_1": lambda x: x / torch.arange(1, x.shape[0] + 1, dtype=x.dtype)[:, None],
         "arange_step_2": lambda x: x * torch.arange(3, 2 * x.shape[0] + 3, 2)[:, None],
         "tril": lambda x: torch.tril(x).exp(), "triu_1": lambda x: torch.triu(x, 1) * x,
         "split": lambda x: sum(t.sum(1) * (k + 1) for k, t in enumerate(x.split(3, dim=1))),
         "split_sizes": lambda x: torch.cat([t.exp() for t in reversed(x.split([2, 5], dim=1))], 1),
         "unbind": lambda x: sum(t * (k + 1) for k, t in enumerate(x[:, :3].unbind(1)))}[name]
    compiled_matches_f64(f, [(n, 7) for n in (5, 2, 9, 3)], seed=8)
    assert cd.stats()["graph_breaks"] == 0, cd.stats()  # before: arange of a size, triu/tril, split and unbind


@pytest.mark.parametrize("name", ["gather_rows", "gather_batch_repeats", "gather_the_dynamic_dim", "scatter_add",
                                  "max_over_batch"])
def test_gather_backward_and_scatter_add_match_float64(name):
    """gather's backward (scatter_add into new_zeros: a comparison with the
    positions along the dim and a sum, so repeated indices add up), along a
    static dim and along the dynamic batch, a scatter_add into the batch
    itself, and max/amin over the dynamic batch with their backward (a
    scatter of one value per column along it)."""
    f = {"gather_rows": lambda x: x.gather(1, x.argmax(1, keepdim=True)) * x.gather(1, x.argmin(1, keepdim=True)),
         # rows 0, 1, 0 of the dynamic batch: row 0's gradients add up
         "gather_batch_repeats": lambda x: x.gather(0, (torch.arange(3)[:, None] == 1).long().expand(3, 7)).exp(),
         # along the dynamic dim: the batch's last row three times, its position a size (n - 1)
         "gather_the_dynamic_dim": lambda x: x.t().gather(1, torch.zeros(7, 3, dtype=torch.int64) + (x.shape[0] - 1))
         * x.sum(0)[:, None],
         # into the batch itself, at columns 2, 4, 6
         "scatter_add": lambda x: x.scatter_add(1, torch.ones(x.shape[0], 3, dtype=torch.int64).cumsum(1) * 2,
                                                x[:, 2:5] * 3),
         "max_over_batch": lambda x: x.max(0).values.exp() * x.amin(0) + x.argmax(0)}[name]
    compiled_matches_f64(f, [(n, 7) for n in (5, 3, 9, 4)], seed=9)
    assert cd.stats()["graph_breaks"] == 0, cd.stats()  # before: scatter_add, and max over the batch, broke it


@pytest.mark.parametrize("name", ["softmax_dim0", "softmax_dim1", "log_softmax_dim1", "softmax_dim2_of_4d"])
def test_softmax_over_any_dim_matches_float64(name):
    """(log_)softmax and its backward over a dim that is not the last: the dim
    moved last and back (clb_transpose)."""
    f = {"softmax_dim0": lambda x: x.view(x.shape[0], 7, 1).softmax(0) * x[:, :, None],
         "softmax_dim1": lambda x: x.view(x.shape[0], 7, 1).expand(-1, -1, 3).softmax(1),
         "log_softmax_dim1": lambda x: torch.nn.functional.log_softmax(x.view(x.shape[0], 7, 1) * 2.0, 1),
         "softmax_dim2_of_4d": lambda x: x.view(x.shape[0], 1, 7, 1).expand(-1, 2, -1, 3).softmax(2)}[name]
    # gradients within 1e-5 of their largest magnitude: the helper's weights (0, 1, 2, ... up to 188) make
    # softmax's backward, y * (dy - sum(dy * y)), subtract nearly equal sums; eager float32 errs by up to
    # 2e-6 of the largest magnitude there, as clbound does with the same weights per element
    compiled_matches_f64(f, [(n, 7) for n in (5, 2, 9, 3)], seed=9, grad_atol=1e-5)
    assert cd.stats()["graph_breaks"] == 0, cd.stats()  # before: softmax over other than the last dim broke it


def test_q_learning_gather_of_actions_trains_in_the_graph():
    """A DQN's update: Q-values of the batch's states, the taken actions'
    ones picked by gather with actions from another input (its own batch
    symbol), a TD target of rewards and next states' max, mse_loss, SGD. The
    gather's backward puts the sums into zeros of the Q-values' sizes."""
    class QNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = torch.nn.Linear(6, 16), torch.nn.Linear(16, 4)

        def forward(self, s, a, r, s2):
            q = self.l2(torch.relu(self.l1(s)))
            with torch.no_grad():
                target = r + 0.9 * self.l2(torch.relu(self.l1(s2))).max(1).values
            return torch.nn.functional.mse_loss(q.gather(1, a).squeeze(1), target)
    model, ref, compiled = f64_twin(QNet)
    g = torch.Generator().manual_seed(4)

    def transitions():
        for n in batch_sizes(6, 2, 12):
            s, s2 = torch.randn(n, 6, generator=g), torch.randn(n, 6, generator=g)
            a, r = torch.randint(0, 4, (n, 1), generator=g), torch.randn(n, generator=g)
            for v in (s, a, r, s2):
                torch._dynamo.mark_dynamic(v, 0, min=2, max=16)
            yield n, (s, a, r, s2)
    # against float64: the loss within 1e-5 relative (1e-6 absolute), gradients within 1e-5 relative (1e-6 absolute)
    check_against_f64(model, ref, compiled, transitions(), 1e-5, 1e-6, 1e-5, 1e-6)
    assert cd.stats()["graph_breaks"] == 0, cd.stats()  # before: gather's backward (scatter_add) broke it
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


def test_gather_with_indices_of_another_input_matches_float64():
    """gather with indices from another input, marked on their own: fewer
    rows than the source (PyTorch allows index.size(d) <= input.size(d)
    beside the dim), so its backward sums into zeros of the source's sizes at
    the indices' rows."""
    f = lambda x, i: (x.gather(1, i) ** 2).sum(1)  # noqa: E731
    c = torch.compile(f, backend="clbound")
    g = torch.Generator().manual_seed(13)
    for n, m in ((6, 6), (5, 3), (9, 2)):
        x = torch.randn(n, 5, generator=g, requires_grad=True)
        i = torch.randint(0, 5, (m, 3), generator=g)
        x64 = x.detach().double().requires_grad_()
        for v in (x, i):
            torch._dynamo.mark_dynamic(v, 0, min=2, max=16)
        got, want = c(x, i), f(x64, i)
        np.testing.assert_allclose(got.detach().double().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
        w = torch.randn(m, generator=g, dtype=torch.float64)
        gx, = torch.autograd.grad((got * w.float()).sum(), x)
        wx, = torch.autograd.grad((want * w).sum(), x64)
        assert gx.shape == (n, 5)
        # against float64 within 1e-5 relative (1e-6 absolute); rows past m get exactly zero
        np.testing.assert_allclose(gx.double().numpy(), wx.numpy(), rtol=1e-5, atol=1e-6)
        assert not gx[m:].any()
    assert cd.stats()["graph_breaks"] == 0, cd.stats()  # before: gather's backward (scatter_add) broke it


@pytest.mark.parametrize("name", ["rows", "negative_rows", "row_and_column", "index_select", "index_add", "pad",
                                  "pad_the_batch"])
def test_integer_indexing_and_pad_match_float64(name):
    """Advanced indexing with integer tensors of the leading dims (x[idx],
    logits[arange(n), targets], negative indices from the end) and its
    backward (index_put with accumulate: one one-hot GEMM, repeated rows add
    up), index_select and index_add along dim 0 and F.pad through PyTorch's
    decompositions, the batch dynamic."""
    F = torch.nn.functional
    f = {"rows": lambda x: x[(x[:, 0] > 0).long()] * x,  # rows 0 and 1, each many times
         "negative_rows": lambda x: x[-1 - (x[:, 1] > 0).long()].exp(),  # the last two rows
         "row_and_column": lambda x: x[torch.arange(x.shape[0]), x.argmax(1)] * x[:, 0],
         "index_select": lambda x: x.index_select(0, (x[:, 2] > 0).long() + 1) * 2,
         "index_add": lambda x: x.index_add(0, (x[:, 3] > 0).long(), x * 3),
         "pad": lambda x: F.pad(x, (1, 2), value=0.5).exp(),
         "pad_the_batch": lambda x: F.pad(x, (0, 0, 2, 1)).cumsum(0)}[name]
    compiled_matches_f64(f, [(n, 7) for n in (5, 3, 9, 4)], seed=10)
    assert cd.stats()["graph_breaks"] == 0, cd.stats()  # before: each of them broke it


@pytest.mark.parametrize("name", ["logaddexp", "clamp_tensors", "baddbmm", "addmm_scaled", "bucketize", "logit",
                                  "xlog1py", "count_nonzero", "mv_dot", "addr", "deg2rad", "eye", "nan_to_num",
                                  "logical_not", "group_norm"])
def test_more_decomposed_ops_match_float64(name):
    """Ops that PyTorch's decompositions turn into ops clbound runs: values
    and gradients against float64, the batch dynamic."""
    F = torch.nn.functional
    f = {"logaddexp": lambda x: torch.logaddexp(x, x * 2 - 1),
         "clamp_tensors": lambda x: torch.clamp(x, min=x[:, :1] - 0.5, max=x[:, 1:2] + 0.5),
         "baddbmm": lambda x: torch.baddbmm(x[:, :, None], x[:, :, None], x[:, None, 3:4], beta=0.5, alpha=2.0),
         "addmm_scaled": lambda x: torch.addmm(x[:, :3], x, torch.ones(7, 3, dtype=x.dtype), beta=0.5, alpha=-2.0),
         "bucketize": lambda x: torch.bucketize(x, torch.tensor([-1.0, 0.0, 0.5])) * x,
         "logit": lambda x: torch.logit(x.sigmoid() * 0.9 + 0.05),
         "xlog1py": lambda x: torch.special.xlog1py(x, x.abs()),
         "count_nonzero": lambda x: torch.count_nonzero((x > 0).float(), 1) * x[:, 0],
         "mv_dot": lambda x: torch.mv(x, torch.linspace(0, 1, 7, dtype=x.dtype)) + torch.dot(x[0], x[1]),
         "addr": lambda x: torch.addr(x.t() @ x, x[0], x[-1]),
         "deg2rad": lambda x: torch.deg2rad(x),
         "eye": lambda x: x @ (torch.eye(7, dtype=x.dtype) * 3 + 1),
         "nan_to_num": lambda x: torch.nan_to_num(x.log(), nan=2.0, neginf=-9.0)
         + torch.isposinf(1 / x.clamp(min=0)) * 1.0,
         "logical_not": lambda x: torch.logical_not(x > 0) * x,
         "group_norm": lambda x: F.group_norm(x.view(x.shape[0], 7, 1), 7).squeeze(2) + F.group_norm(x, 1)}[name]
    compiled_matches_f64(f, [(n, 7) for n in (5, 3, 9, 4)], seed=11)
    assert cd.stats()["graph_breaks"] == 0, cd.stats()  # before: each of them broke it


def test_two_indices_check_their_dims():
    """x[i, j]: each index checked against its own dim on the device (one row
    number could hide an index past its dim); an index outside fails the
    call's sync as eager's raises, and the next call runs."""
    f = lambda x, i, j: x[i, j]  # noqa: E731
    c = torch.compile(f, backend="clbound")
    x = torch.randn(4, 3, 2)
    i, j = torch.tensor([0, 3, -1, 2]), torch.tensor([2, 0, 1, -3])
    for v in (x, i, j):
        torch._dynamo.mark_dynamic(v, 0, min=2, max=16)
    np.testing.assert_array_equal(c(x, i, j).numpy(), f(x, i, j).numpy())
    assert cd.stats()["graph_breaks"] == 0, cd.stats()
    bad = j.clone()
    bad[1] = 3  # row 0 of the next i, were the two folded into one row number unchecked
    torch._dynamo.mark_dynamic(bad, 0, min=2, max=16)
    with pytest.raises(IndexError):
        f(x, i, bad)
    with pytest.raises(RuntimeError, match="outside"):
        c(x, i, bad)
    np.testing.assert_array_equal(c(x, i, j).numpy(), f(x, i, j).numpy())


@pytest.mark.parametrize("name", ["index_put", "index_add", "index_select_negative", "index_add_negative",
                                  "new_zeros_scatter_add", "new_zeros_scatter"])
def test_index_writes_and_selects_check_their_indices_as_eager(name):
    """Where PyTorch raises for an index, the compiled call fails too (at its
    sync), and the next call with good indices runs: index_put with one index
    and index_add (no gather checks them), index_select and index_add with a
    negative index (which PyTorch refuses there, unlike x[idx]), and a scatter
    or scatter_add into a user's new_zeros (which look like max's and
    gather's backwards)."""
    z = lambda x: x.new_zeros(3, 5)  # noqa: E731
    f = {"index_put": lambda x, i: torch.index_put(x, (i,), x[:3] * 2, accumulate=True),
         "index_add": lambda x, i: x.index_add(0, i, x[:3] * 2),
         "index_select_negative": lambda x, i: x.index_select(0, i) * 2,
         "index_add_negative": lambda x, i: x.index_add(0, i, x[:3] * 2),
         "new_zeros_scatter_add": lambda x, i: z(x).scatter_add(1, i[:, None].expand(-1, 2), x[:3, :2]),
         "new_zeros_scatter": lambda x, i: z(x).scatter(1, i[:, None], x[:3, :1])}[name]
    c = torch.compile(f, backend="clbound")
    x, good = torch.randn(4, 5), torch.tensor([0, 3, 1])
    bad = torch.tensor([0, -1, 2]) if "negative" in name else torch.tensor([0, 5, 2])
    torch._dynamo.mark_dynamic(x, 0, min=3, max=16)
    np.testing.assert_allclose(c(x, good).numpy(), f(x, good).numpy(), rtol=1e-6, atol=1e-6)
    assert cd.stats()["graph_breaks"] == 0, cd.stats()
    with pytest.raises((IndexError, RuntimeError)):
        f(x, bad)
    with pytest.raises((IndexError, RuntimeError), match="outside|out of range"):
        c(x, bad)
    np.testing.assert_allclose(c(x, good).numpy(), f(x, good).numpy(), rtol=1e-6, atol=1e-6)


def test_index_put_forms_clbound_does_not_run_match_eager():
    """index_put with values that broadcast, or without accumulate, and x[idx]
    of a tensor with no elements past the indexed dim: graph breaks, eager's
    results."""
    cases = [(lambda x, i: torch.index_put(x, (i,), torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]), accumulate=True),
              "aten.index_put.default"),
             (lambda x, i: torch.index_put(x, (i,), x[:3] * 2), "aten.index_put.default"),
             (lambda x, i: x[:, :0][i] + 1, "aten.index.Tensor")]
    for f, op in cases:
        torch._dynamo.reset()
        cd.reset_stats()
        c = torch.compile(f, backend="clbound")
        x, i = torch.randn(4, 5), torch.tensor([0, 2, 0])
        torch._dynamo.mark_dynamic(x, 0, min=3, max=16)
        np.testing.assert_allclose(c(x, i).numpy(), f(x, i).numpy(), rtol=1e-6, atol=1e-6)
        assert op in cd.stats()["graph_break_ops"], cd.stats()


@pytest.mark.parametrize("name", ["largest_last", "smallest_over_the_batch", "k_of_all", "smallest_of_all",
                                  "values_only"])
def test_topk_matches_eager_with_nan_inf_and_ties(name):
    """topk as k passes of max: values and indices as eager's, NaN the
    largest (and, for the smallest, after +inf), -inf and +inf in place, over
    the last dim and over the dynamic batch; where values tie, PyTorch's order
    is unspecified, so the indices there are checked to pick those values,
    each once. Gradients (a scatter of k values per position) against eager's."""
    f = {"largest_last": lambda x: x.topk(3, -1), "smallest_over_the_batch": lambda x: x.topk(2, 0, largest=False),
         "k_of_all": lambda x: x.topk(7, 1), "smallest_of_all": lambda x: x.topk(7, 1, largest=False),
         "values_only": lambda x: x.topk(2, 1).values * 2}[name]
    c = torch.compile(f, backend="clbound")
    g = torch.Generator().manual_seed(14)
    for n in (5, 3, 8):
        x = torch.randn(n, 7, generator=g)
        # -inf after a taken position, +inf after a NaN in its row, NaN in the last row
        x[0, 6], x[0, 1], x[1, 2], x[1, 4], x[-1, 5] = -math.inf, math.inf, math.nan, math.inf, math.nan
        x[2, 3] = x[2, 6]  # a tie
        x.requires_grad_()
        torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
        got, want = c(x), f(x)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        for a, b in zip(got, want):
            assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(got[0].detach().numpy(), want[0].detach().numpy())  # values, NaN in place
        if len(got) == 2:
            dim = 0 if name == "smallest_over_the_batch" else 1
            picked = x.detach().gather(dim, got[1])
            np.testing.assert_array_equal(picked.numpy(), got[0].detach().numpy())
            srt = got[1].sort(dim).values
            assert (srt.diff(dim=dim) > 0).all()  # each position once
            ties = (x.detach() == x.detach()[2, 6]).sum() > 1
            if not ties:
                np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
        w = torch.randn(got[0].shape, generator=g)
        gx, = torch.autograd.grad((got[0].nan_to_num(0.0, 0.0, 0.0) * w).sum(), x)
        wx, = torch.autograd.grad((want[0].nan_to_num(0.0, 0.0, 0.0) * w).sum(), x)
        # the tied pair's gradient goes to whichever of the two was picked: compared as their sum
        for t in (gx, wx):
            t[2, 3] += t[2, 6]
            t[2, 6] = 0
        np.testing.assert_allclose(gx.numpy(), wx.numpy(), rtol=1e-6, atol=1e-6)
    assert cd.stats()["graph_breaks"] == 0, cd.stats()  # before: topk and its backward's scatter broke it


class MoE(torch.nn.Module):
    """A mixture-of-experts layer: a router's top-2 experts per row, their
    softmax weights, the experts' outputs picked by gather."""
    EXPERTS = 4

    def __init__(self):
        super().__init__()
        self.router, self.experts = torch.nn.Linear(6, self.EXPERTS), torch.nn.Linear(6, 3 * self.EXPERTS)
        self.head = torch.nn.Linear(3, 1)

    def forward(self, x):
        scores, chosen = self.router(x).topk(2, -1)
        outs = self.experts(x).view(x.shape[0], self.EXPERTS, 3)
        picked = outs.gather(1, chosen[:, :, None].expand(-1, -1, 3))
        h = (scores.softmax(-1)[:, :, None] * picked).sum(1)
        return torch.sigmoid(self.head(torch.relu(h))).squeeze(1), chosen


def test_mixture_of_experts_routing_trains_in_the_graph():
    """Top-2 routing: topk's values and their backward, the experts' outputs
    gathered with its indices and gather's backward, in one graph; indices
    exactly as eager's (random scores, no ties), values and gradients against
    float64."""
    model, ref, compiled = f64_twin(MoE)
    # against float64: values within 1e-5 relative (1e-6 absolute), gradients within 1e-5 relative (1e-6 absolute)
    check_against_f64(model, ref, compiled, dynamic_batches(6, 2, 12, 6), 1e-5, 1e-6, 1e-5, 1e-6)
    assert cd.stats()["graph_breaks"] == 0, cd.stats()  # before: topk, its backward and gather's broke it
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


def test_scatter_of_repeated_indices_fails_the_call():
    """A scatter of several values per position whose indices repeat: PyTorch
    leaves which value lands undefined, so the compiled call fails (at its
    sync), and the next call runs."""
    f = lambda x, i: x.new_zeros(x.shape[0], 5).scatter(1, i.expand(x.shape[0], 2), x[:, :2])  # noqa: E731
    c = torch.compile(f, backend="clbound")
    x, good, bad = torch.randn(3, 5), torch.tensor([[4, 1]]), torch.tensor([[2, 2]])
    torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
    np.testing.assert_array_equal(c(x, good).numpy(), f(x, good).numpy())
    assert cd.stats()["graph_breaks"] == 0, cd.stats()
    with pytest.raises(RuntimeError, match="repeats"):
        c(x, bad)
    np.testing.assert_array_equal(c(x, good).numpy(), f(x, good).numpy())


def test_scatter_add_checks_its_indices():
    """A user's scatter_add into a tensor of their own: an index outside the
    dim fails the call's sync, as eager's raises, and the next call runs."""
    f = lambda x, i: x.scatter_add(1, i, i * 0.5)  # noqa: E731
    c = torch.compile(f, backend="clbound")
    x, i = torch.randn(4, 5), torch.tensor([[0, 4], [1, 1], [3, 2], [4, 0]])
    for v in (x, i):
        torch._dynamo.mark_dynamic(v, 0, min=2, max=16)
    np.testing.assert_allclose(c(x, i).numpy(), f(x, i).numpy(), rtol=1e-6, atol=1e-6)
    assert cd.stats()["graph_breaks"] == 0, cd.stats()
    bad = i.clone()
    bad[2, 1] = 5
    torch._dynamo.mark_dynamic(bad, 0, min=2, max=16)
    with pytest.raises(RuntimeError, match="out of bounds"):
        f(x, bad)
    with pytest.raises(RuntimeError, match="outside"):
        c(x, bad)
    np.testing.assert_allclose(c(x, i).numpy(), f(x, i).numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("spatial", [1, 2])
def test_cross_entropy_over_positions_matches_float64(reduction, spatial):
    """F.cross_entropy of [N, C, T] (a tagger's logits) or [N, C, H, W] (a
    segmenter's) by int64 targets [N, T] or [N, H, W], some ignored:
    nll_loss2d and its backward as nll_loss of the rows [N * T, C], the
    classes moved last and back; with the batch and T (or H) dynamic."""
    F = torch.nn.functional

    def f(x, t):
        return F.cross_entropy(x, t, ignore_index=-1, reduction=reduction)
    c = torch.compile(f, backend="clbound")
    g = torch.Generator().manual_seed(12)
    for n, t_len in ((3, 5), (2, 9), (5, 2)):
        shape = (n, 4, t_len) if spatial == 1 else (n, 4, t_len, 3)
        x = torch.randn(*shape, generator=g, requires_grad=True)
        t = torch.randint(0, 4, (shape[0],) + shape[2:], generator=g)
        t.view(-1)[::5] = -1
        x64 = x.detach().double().requires_grad_()
        for v in (x, t):
            torch._dynamo.mark_dynamic(v, 0, min=2, max=8)
        torch._dynamo.mark_dynamic(x, 2, min=2, max=10)
        torch._dynamo.mark_dynamic(t, 1, min=2, max=10)
        got, want = c(x, t), f(x64, t)
        assert got.shape == want.shape
        # against float64: within 1e-5 relative (1e-6 absolute), values and gradients
        np.testing.assert_allclose(got.detach().double().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
        w = torch.randn(want.shape, generator=g, dtype=torch.float64)
        gx, = torch.autograd.grad((got * w.float()).sum(), x)
        wx, = torch.autograd.grad((want * w).sum(), x64)
        np.testing.assert_allclose(gx.double().numpy(), wx.numpy(), rtol=1e-5, atol=1e-6)
    assert cd.stats()["graph_breaks"] == 0, cd.stats()  # before: nll_loss2d and log_softmax over dim 1 broke it
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


def test_what_clbound_would_run_wrong_or_slow_breaks_the_graph():
    """An embedding backward past 2^22 one-hot elements (a table of many rows),
    a fill value a double cannot hold and an integer matmul run in eager
    PyTorch, correctly."""
    torch.manual_seed(0)
    table = torch.nn.Embedding(70000, 2)  # 64 indices at the bound x 70000 rows > 2^22
    ref = torch.nn.Embedding(70000, 2)
    ref.load_state_dict(table.state_dict())
    f = torch.compile(lambda i: table(i).sum(1), backend="clbound")
    i = torch.randint(0, 70000, (5, 4))
    torch._dynamo.mark_dynamic(i, 0, min=2, max=16)
    got, want = f(i), ref(i).sum(1)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6)  # sum order
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_array_equal(table.weight.grad.numpy(), ref.weight.grad.numpy())  # counts of each row
    assert "aten.embedding_dense_backward.default" in cd.stats()["graph_break_ops"], cd.stats()
    assert "aten.embedding.default" not in cd.stats()["graph_break_ops"], cd.stats()  # the forward stays
    big = 2**53 + 1  # not a double: clb_fill takes one
    g = torch.compile(lambda x: torch.full((x.shape[0], 2), big, dtype=torch.int64) + x.long(), backend="clbound")
    x = torch.ones(3, 2)
    torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
    np.testing.assert_array_equal(g(x).numpy(), np.full((3, 2), big + 1, dtype=np.int64))
    assert "aten.full.default" in cd.stats()["graph_break_ops"], cd.stats()
    # an integer matmul (clbound's is floating only): eager PyTorch's exact int64 product; it raised before
    mm = torch.compile(lambda x: (x > 0).long() @ torch.full((2, 3), 2**40, dtype=torch.int64), backend="clbound")
    x = torch.tensor([[1.0, -1.0], [2.0, 3.0], [-1.0, -2.0]])
    torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
    np.testing.assert_array_equal(mm(x).numpy(), ((x > 0).long() @ torch.full((2, 3), 2**40)).numpy())
    assert "aten.mm.default" in cd.stats()["graph_break_ops"], cd.stats()


class Concatenated(torch.nn.Module):
    """torch.cat of two layers' features (a static dim, then trained through),
    of two batches (the dynamic dim: the sizes add), and of a float with a cast
    int (PyTorch's promotion)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 3)
        self.b = torch.nn.Linear(4, 5)
        self.c = torch.nn.Linear(8, 2)

    def forward(self, x, y):
        h = torch.cat([self.a(x), torch.relu(self.b(x))], dim=1)
        rows = torch.cat([self.a(x), self.a(y)], 0)  # [n + m, 3]
        return self.c(h), rows, torch.cat((x, (x * 3).long()), -1)


def test_cat_trains_in_the_graph():
    model, ref, compiled = f64_twin(Concatenated)
    g = torch.Generator().manual_seed(5)
    for n, x in dynamic_batches(6, 2, 12, 4):
        y = torch.randn(n + 3, 4, generator=g)
        torch._dynamo.mark_dynamic(y, 0, min=2, max=32)
        got, want = compiled(x, y), ref(x.double(), y.double())
        assert got[1].shape == (2 * n + 3, 3) and got[2].dtype == torch.float32
        np.testing.assert_allclose(got[0].detach().double().numpy(), want[0].detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[1].detach().double().numpy(), want[1].detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got[2].numpy(), torch.cat((x, (x * 3).long()), -1).numpy())
        model.zero_grad()
        ref.zero_grad()
        w = torch.randn(want[1].shape, generator=g, dtype=torch.float64)
        (got[0].sum() + (got[1] * w.float()).sum()).backward()
        (want[0].sum() + (want[1] * w).sum()).backward()
        for a, b in zip(model.parameters(), ref.parameters()):
            np.testing.assert_allclose(a.grad.double().numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-5)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # before clb_cat: cat broke it
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


class Powers(torch.nn.Module):
    """x ** 2, a tensor to a tensor power, a scalar base, and floor division
    (PyTorch's floor_divide, div(rounding_mode="floor") and //)."""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 5)

    def forward(self, x):
        h = self.l(x)
        s = torch.sigmoid(h) + 0.5
        d = h.detach()  # floor division has no gradient to train through
        return (h ** 2, s ** h, 2.0 ** h, s ** 0.5, torch.floor_divide(d, 0.3), d // s.detach(),
                torch.div(d, 0.7, rounding_mode="floor"), (x * 10).long() // 3)


def test_powers_and_floor_division_stay_in_the_graph():
    eager_model, clb_model, compiled = twins(Powers)
    g = torch.Generator().manual_seed(5)
    for n, x in dynamic_batches(6, 2, 12, 4):
        got, want = compiled(x), eager_model(x)
        for a, b in zip(got[:4], want[:4]):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
        for a, b in zip(got[4:], want[4:]):  # floor division: exactly eager's
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        ws = [torch.randn(t.shape, generator=g) for t in want[:4]]
        weighted_grads_match(clb_model, eager_model, got[:4], want[:4], ws)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # before clb_pow and clb_floor_divide: pow, floor_divide and div broke it
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


class Remainders(torch.nn.Module):
    """Python's % (torch.remainder: the result takes the divisor's sign) of a
    floating tensor by scalars and by tensors of both signs, one of them a
    parameter, in the graph the model trains through, and of an integer
    tensor with negative values. Returns the divisors too, for the test."""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 5)
        self.d = torch.nn.Parameter(torch.tensor([-1.0, -0.5, 0.25, 0.5, 1.0]))

    def forward(self, x):
        h = self.l(x) * 3
        b = torch.where(x[:, :1] > 0, 0.75, -1.25)  # [n, 1]: divisors of both signs, broadcast
        learned = self.d * 2 + torch.sign(self.d) * 0.5  # [5], both signs; its gradient is -g floor(h / d)
        divisors = (0.7, b, -0.9, learned)
        rems = tuple(torch.remainder(h, v) for v in divisors)
        return rems, divisors[1:2] + divisors[3:], ((x * 10).long() % 3, torch.remainder((x * 10).long(), -4))


def test_remainder_stays_in_the_graph_and_matches_eager():
    eager_model, clb_model, compiled = twins(Remainders)
    g = torch.Generator().manual_seed(6)
    for n, x in dynamic_batches(6, 2, 12, 4):
        (got, got_div, got_int), (want, want_div, want_int) = compiled(x), eager_model(x)
        for a, b in zip(got_int, want_int):  # integers: exactly eager's
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        divs = (0.7, want_div[0], -0.9, want_div[1])
        for a, b, dv in zip(got, want, divs):
            # h differs from eager's by float32 rounding (the products), so a
            # remainder near a multiple of the divisor may wrap: equal modulo
            # the divisor within the tolerance, with the divisor's sign, below it
            a, b, dv = a.detach().double(), b.detach().double(), torch.as_tensor(dv).detach().double().expand_as(a)
            diff = (a - b).abs()
            assert (torch.minimum(diff, dv.abs() - diff) <= 2e-6).all(), (a, b)
            assert ((a == 0) | ((a < 0) == (dv < 0))).all() and (a.abs() < dv.abs()).all()
        assert any((t < 0).any() for t in want) and any((t > 0).any() for t in want)
        ws = [torch.randn(t.shape, generator=g) for t in want]
        weighted_grads_match(clb_model, eager_model, got, want, ws)
    s = cd.stats()
    assert s["graph_breaks"] == 0, s  # before this lowering: remainder broke it
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


def test_integer_powers_break_the_graph_and_match_eager():
    def f(x):
        return (x * 10).long() ** 2 + 1

    compiled = torch.compile(f, backend="clbound")
    for n, x in dynamic_batches(3, 2, 12, 4):
        np.testing.assert_array_equal(compiled(x).numpy(), f(x).numpy())
    assert "aten.pow.Tensor_Scalar" in cd.stats()["graph_break_ops"], cd.stats()


def test_unchanged_parameters_are_not_uploaded_again():
    torch.manual_seed(0)
    model = WideMLP()
    compiled = torch.compile(model, backend="clbound")
    n_params = len(list(model.parameters()))
    for i, n in enumerate((40, 300, 7)):
        x = torch.randn(n, 256)
        torch._dynamo.mark_dynamic(x, 0, min=2, max=4096)
        before = cd.stats()
        with torch.no_grad():
            got = compiled(x)
            np.testing.assert_allclose(got.numpy(), model(x).numpy(), rtol=0, atol=1e-5)
        after = cd.stats()
        uploads = after["uploads"] - before["uploads"]
        shared = after["shared"] - before["shared"]
        # the first call shares (a device whose buffers are host memory) or uploads
        # the 6 parameters, and uploads x; later ones upload x only
        assert uploads + shared == (n_params + 1 if i == 0 else 1), (i, uploads, shared)
        assert shared in (0, n_params if i == 0 else 0), (i, shared)
        assert after["host_syncs"] - before["host_syncs"] == 1  # the one output


def test_two_forwards_before_their_backwards():
    # gradient accumulation: the first forward's saved tensors must survive the second forward
    torch.manual_seed(0)
    model = Feedforward(2, hidden_size=10)
    model.fc1.weight.data.normal_()
    compiled = torch.compile(model, backend="clbound")
    xs = [create_dynamic_test_data(5, 2, n)[0] for n in (4, 9)]
    grads = []
    for m in (model, compiled):
        m.zero_grad()
        outs = []
        for x in xs:
            x = x.clone()
            torch._dynamo.mark_dynamic(x, 0, min=2, max=10)
            outs.append(m(x).sum())
        (outs[0] * 2 + outs[1]).backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for want, got in zip(*grads):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=1e-5)


def _host_memory_device():
    return cd.context().kernel_style == "cpu" and os.environ.get("CLBOUND_HOST_PTRS") != "off"


def test_gradients_reach_pytorch_without_a_copy():
    # where the device's buffers are host memory, a backward's gradients go to
    # PyTorch over the device's memory: clipping them in place, and accumulating
    # into kept gradients (zero_grad(set_to_none=False)), train as eager does
    def run(backend, set_to_none):
        torch.manual_seed(0)
        model = WideMLP()
        m = torch.compile(model, backend=backend) if backend else model
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        g = torch.Generator().manual_seed(5)
        losses = []
        for n in (64, 300, 17, 150, 90):
            x, y = torch.randn(n, 256, generator=g), (torch.rand(n, generator=g) > 0.5).float()
            torch._dynamo.mark_dynamic(x, 0, min=2, max=4096)
            opt.zero_grad(set_to_none=set_to_none)
            loss = torch.nn.functional.binary_cross_entropy(m(x).squeeze(1), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05)  # in place, on every gradient
            opt.step()
            losses.append(loss.item())
        return np.array(losses), [p.grad.clone() for p in model.parameters()]

    for set_to_none in (True, False):
        want, want_grads = run(None, set_to_none)
        before = cd.stats()["outputs_shared"]
        got, got_grads = run("clbound", set_to_none)
        np.testing.assert_allclose(got, want, rtol=0, atol=LOSS_TOL)
        for a, b in zip(got_grads, want_grads):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-6)
        shared = cd.stats()["outputs_shared"] - before
        assert shared == (6 * 5 if _host_memory_device() else 0), shared


def test_small_outputs_are_copied_not_kept_at_their_bound():
    # an inference output over the device's memory would keep a buffer sized at
    # the bound [<=4096, 1]; one using less than half of it is copied instead,
    # straight into a tensor of the batch's size that the call's wait fills
    torch.manual_seed(0)
    model = WideMLP()
    compiled = torch.compile(model, backend="clbound")
    for n, shared in ((64, 0), (3000, 1)):
        x = torch.randn(n, 256)
        torch._dynamo.mark_dynamic(x, 0, min=2, max=4096)
        before = cd.stats()
        with torch.no_grad():
            got = compiled(x)
            want = model(x)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=1e-5)
        assert got.shape == (n, 1)
        now = cd.stats()
        shared = shared if _host_memory_device() else 0
        assert now["outputs_shared"] - before["outputs_shared"] == shared, n
        assert now["outputs_read"] - before["outputs_read"] == 1 - shared, n
        if not shared:
            assert got.untyped_storage().nbytes() == n * 4, n


def test_an_output_read_into_a_tensor_takes_the_devices_sizes():
    # _read_into's contract where the sizes the inputs give and the device's
    # differ (an internal error, never a wrong value): a tensor larger than the
    # device's sizes holds them and is cut to them; a smaller one reads nothing
    ctx = cd.context()
    vals = np.arange(12, dtype=np.float32).reshape(6, 2)
    t = ctx.from_numpy(vals, bounds=(10, 2), dynamic=(True, False))
    low = types.SimpleNamespace(ctx=ctx)
    out = [None, None]
    cd._Lowered._read_into(low, [t, t], [(0, torch.full((6, 2), -1.0)), (1, torch.full((8, 2), -1.0))], out)
    for got in out:
        assert got.shape == (6, 2)
        np.testing.assert_array_equal(got.numpy(), vals)
    out = [None, None]
    cd._Lowered._read_into(low, [t, t], [(0, torch.empty(6, 2)), (1, torch.empty(5, 2))], out)
    assert out == [None, None]


def test_an_output_written_in_place_leaves_its_backward_alone():
    # the model's output is also what its backward reads (the sigmoid's output):
    # it reaches PyTorch as a copy, so writing it changes no gradient
    def grads(scribble):
        torch.manual_seed(0)
        model = Feedforward(2, hidden_size=10)
        compiled = torch.compile(model, backend="clbound")
        x = create_dynamic_test_data(5, 2, 7)[0].clone()
        torch._dynamo.mark_dynamic(x, 0, min=2, max=10)
        out = compiled(x)
        if scribble:
            out.detach().fill_(0.5)
        out.backward(torch.ones_like(out))
        return [p.grad.clone() for p in model.parameters()]

    for a, b in zip(grads(True), grads(False)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_a_failing_call_waits_for_its_borrowed_writes(monkeypatch):
    # the batch is written from its own memory after the upload returns: a call
    # that fails before its closing sync waits for that write before it lets go
    torch.manual_seed(0)
    model = WideMLP()
    compiled = torch.compile(model, backend="clbound")
    x = torch.randn(50, 256)
    torch._dynamo.mark_dynamic(x, 0, min=2, max=4096)
    with torch.no_grad():
        compiled(x)

    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(clbound.Context, "linear", boom)
    x2 = torch.randn(60, 256)
    torch._dynamo.mark_dynamic(x2, 0, min=2, max=4096)
    before = cd.context().counters()["host_syncs"]
    with pytest.raises(Exception, match="boom"):
        with torch.no_grad():
            compiled(x2)
    assert cd.context().counters()["host_syncs"] == before + 1
    monkeypatch.undo()
    with torch.no_grad():
        np.testing.assert_allclose(compiled(x2).numpy(), model(x2).numpy(), rtol=0, atol=1e-5)


def test_batches_held_in_memory_do_not_pin_device_memory():
    # a dataset kept as a list of batch tensors: each batch's device copy goes
    # once its backward has used it, so device memory stays flat over the epoch
    # (it grew by one batch buffer, [<=4096, 256] floats, every step before)
    g = torch.Generator().manual_seed(3)
    table = torch.randn(4096, 256, generator=g)
    labels = (table[:, :8].sum(1) > 0).float()
    batches = []
    for i in range(24):
        mask = torch.rand(4096, generator=g) < (0.05 + 0.1 * (i % 3))
        batches.append((table[mask], labels[mask]))  # all kept alive, as in a dataset
    torch.manual_seed(0)
    model = WideMLP()
    compiled = torch.compile(model, backend="clbound")
    criterion = torch.nn.BCELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    live = []
    for x, y in batches:
        torch._dynamo.mark_dynamic(x, 0, min=2, max=4096)
        optimizer.zero_grad()
        loss = criterion(compiled(x).squeeze(1), y)
        loss.backward()
        optimizer.step()
        live.append(cd.context().counters()["device_bytes_live"])
    # after the first batch sizes have been seen, no step leaves more live than the one before it
    assert live[-1] == live[6], live
    s = cd.stats()
    assert s["graph_breaks"] == 0, s


# ---- PyTorch's idle OpenMP threads would spin on the device's cores: paused ----

def _threads():
    return len(os.listdir("/proc/self/task"))


def _settle(want, timeout=2.0):
    """The process's thread count once it is `want` (ended threads take a moment to go)."""
    import time
    end = time.monotonic() + timeout
    n = _threads()
    while n != want and time.monotonic() < end:
        time.sleep(0.01)
        n = _threads()
    return n


def test_openmp_threads_are_paused_where_they_would_spin(caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger="clbound.dynamo")
    for v in cd._OMP_WAIT_VARS:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setitem(cd._omp, "logged", False)
    torch.manual_seed(0)
    model = WideMLP()
    compiled = torch.compile(model, backend="clbound")
    x = torch.randn(64, 256)
    torch._dynamo.mark_dynamic(x, 0, min=2, max=4096)
    big = torch.ones(1 << 20)

    def call():
        with torch.no_grad():
            return compiled(x)

    call()
    cpu = cd.context().kernel_style == "cpu"
    openmp = "OpenMP" in torch.__config__.parallel_info() and os.path.isdir("/proc/self/task")
    threads = torch.get_num_threads()
    # auto: a CPU device, PyTorch on more than one thread, no waiting set: each call pauses
    before = cd.stats()["openmp_pauses"]
    big.add_(1)  # a parallel op: PyTorch's OpenMP workers run, then wait
    n_before = _threads()
    with torch.no_grad():
        want = model(x)
    np.testing.assert_allclose(call().numpy(), want.numpy(), rtol=0, atol=1e-5)
    paused = cd.stats()["openmp_pauses"] - before
    assert paused == (1 if cpu and threads > 1 else 0), (paused, cpu, threads)
    if paused and openmp and cd._omp_pausers():
        # GNU OpenMP ends its idle workers: the process has threads - 1 fewer
        assert _settle(n_before - (threads - 1)) == n_before - (threads - 1)
        msgs = [r.getMessage() for r in caplog.records if "pauses PyTorch's idle OpenMP threads" in r.getMessage()]
        assert len(msgs) == 1 and "config.pause_openmp = False" in msgs[0], msgs
        call()  # logged once
        assert len([r for r in caplog.records if "pauses PyTorch's idle" in r.getMessage()]) == 1
        big.add_(1)  # PyTorch's next parallel op starts them again
        assert _threads() == n_before
    # the environment says how PyTorch's threads wait: auto leaves them; True pauses anyway; False never
    for env, mode, want in (({"GOMP_SPINCOUNT": "10000"}, "auto", 0), ({"OMP_WAIT_POLICY": "passive"}, "auto", 0),
                            ({"GOMP_SPINCOUNT": "10000"}, True, 1 if cpu else 0), ({}, False, 0)):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        monkeypatch.setattr(cd.config, "pause_openmp", mode)
        before = cd.stats()["openmp_pauses"]
        call()
        assert cd.stats()["openmp_pauses"] - before == want, (env, mode)
        for k in env:
            monkeypatch.delenv(k)
    monkeypatch.setattr(cd.config, "pause_openmp", "sometimes")
    with pytest.raises(Exception, match="pause_openmp is 'sometimes'"):
        call()
