"""Policies that compile data-dependent counts in (static, bucketed) against
those that keep them on the device (dynamic, automatic): when an input's size
and a nonzero count change between runs, every policy gives numpy's result; a
count that leaves the value a plan compiled in is a new plan with its reason,
never an error (issue 16, class 7)."""
import numpy as np
import pytest

import clbound
from clbound.graph import Graph


@pytest.fixture(scope="module")
def ctx():
    c = clbound.Context()
    yield c
    c.close()


@pytest.mark.parametrize("policy", ["static", "bucketed", "dynamic", "automatic"])
def test_nonzero_count_grows_with_the_input(ctx, policy):
    g = Graph(ctx, policy=policy, name="counts-" + policy)
    x = g.input("x", np.float32, (64,), (True,))
    nz = g.nonzero(x)
    sel = g.masked_select(x, g.cast(x, np.bool_))
    # 3 ones, then 40 (the report's repro), then fewer again, then a larger
    # input with few nonzeros
    feeds = [np.ones(3, np.float32), np.ones(40, np.float32), np.ones(7, np.float32),
             np.array([0, 2, 0, 0, 5] + [0] * 55, np.float32)]
    for xs in feeds:
        g.feed(x, xs)
        g.run()
        got = np.asarray(g.value(nz))
        want = np.stack(np.nonzero(xs), axis=1).astype(np.int64)
        assert got.shape == want.shape, (policy, xs.size)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.asarray(g.value(sel)), xs[xs != 0])
    if policy in ("static", "bucketed"):
        assert "plan" in g.last_reason
    g.close()
