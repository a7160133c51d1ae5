"""Views of a graph's tensors keep their data (docs/graph.md, "Views of a
graph's tensors"): issue 30's reproducer under every policy, with the memory
plan on and off. Before the fix the view read the next run's data."""
import numpy as np
import pytest

from clbound.graph import Graph


@pytest.mark.parametrize("memory_plan", [True, False])
@pytest.mark.parametrize("policy", ["dynamic", "automatic", "static", "bucketed"])
def test_view_keeps_its_run(ctx, policy, memory_plan):
    g = Graph(ctx, policy=policy, memory_plan=memory_plan)
    x = g.input("x", np.float32, (8,), (True,))
    y = g.unary("relu", x)
    g.feed(x, np.ones(4, np.float32))
    g.run()
    v = ctx.reshape(g.tensor(y), [-1])
    g.feed(x, np.full(6, 2, np.float32))
    g.run()
    np.testing.assert_array_equal(v.numpy(), np.ones(4, np.float32))
    np.testing.assert_array_equal(g.value(y), np.full(6, 2, np.float32))
    g.feed(x, np.full(4, 3, np.float32))  # the first run's shape: its plan again
    g.run()
    np.testing.assert_array_equal(v.numpy(), np.ones(4, np.float32))
    w = ctx.reshape(g.tensor(y), [2, -1])
    g.close()
    np.testing.assert_array_equal(w.numpy(), np.full((2, 2), 3, np.float32))
    np.testing.assert_array_equal(v.numpy(), np.ones(4, np.float32))
