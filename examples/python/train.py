"""train.py: PyTorch/XLA's dynamic-shape MLP trained with a clbound graph.

Each batch is nonzero() of a pattern, so its size (1 to 10 rows) is a count only
the device knows; the labels come from a second nonzero. One plan serves every
batch size, and the loop never waits for the device except to print a loss.
Run: PYTHONPATH=python python3 examples/python/train.py
"""
import numpy as np

import clbound
from clbound.graph import Graph

ctx = clbound.Context()
g = Graph(ctx, policy="dynamic", name="xla-mlp")
x = g.input("x", np.float32, (5, 2))
y = g.input("y", np.float32, (10,))
X = g.cast(g.nonzero(x), np.float32)                                  # [<=10, 2]
labels = g.binary("remainder", g.cast(g.reshape(g.nonzero(y), (-1,)), np.float32), g.scalar(np.float32, 2))
w1 = g.param("w1", np.full((10, 2), 0.01, np.float32))
b1 = g.param("b1", np.full((10,), 0.01, np.float32))
w2 = g.param("w2", np.full((1, 10), 0.01, np.float32))
b2 = g.param("b2", np.full((1,), 0.01, np.float32))
p = g.unary("sigmoid", g.linear(g.unary("relu", g.linear(X, w1, b1)), w2, b2))
loss = g.loss("bce", p, labels)
g.train(loss, lr=1e-3)

for i in range(100):
    k = 1 + (7 * i) % 10
    xs = np.zeros((5, 2), np.float32)
    xs.flat[:k] = 1
    ys = np.zeros(10, np.float32)
    ys[:k] = 1
    g.feed(x, xs)
    g.feed(y, ys)
    g.run()
    if i in (0, 99):
        print(f"iteration {i:3d}: batch of {k} rows, loss {float(g.value(loss)):.6f}")

s = g.stats()
m = ctx.metrics()
print(f"plans compiled {s['plans_compiled']}, host syncs by the graph {s['host_syncs']}, "
      f"program builds {m['program_builds']}")
assert s["plans_compiled"] == 1 and s["host_syncs"] == 0
g.close()
ctx.close()
