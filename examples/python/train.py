"""train.py: PyTorch/XLA's dynamic-shape MLP trained with a clbound graph.

Each batch is nonzero() of a pattern, so its size (1 to 10 rows) is a count only
the device knows; the labels come from a second nonzero. One plan serves every
batch size, and the loop never waits for the device except to print a loss.
The losses it prints are checked against a float64 numpy training of the same
model (clbound.demo.reference); the exit status is 1 when a check fails.
Run: PYTHONPATH=python python3 examples/python/train.py
"""
import sys

import numpy as np

import clbound
from clbound.demo import reference
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

ITERATIONS = 100
ref = reference(ITERATIONS)
failures = []
for i in range(ITERATIONS):
    k = 1 + (7 * i) % 10
    xs = np.zeros((5, 2), np.float32)
    xs.flat[:k] = 1
    ys = np.zeros(10, np.float32)
    ys[:k] = 1
    g.feed(x, xs)
    g.feed(y, ys)
    g.run()
    if i in (0, ITERATIONS - 1):
        value = float(g.value(loss))  # the loop's only host syncs
        print(f"iteration {i:3d}: batch of {k} rows, loss {value:.6f} (float64 numpy: {ref[i]:.6f})")
        if not abs(value - ref[i]) <= 1e-4:  # NaN fails too
            failures.append(f"iteration {i}: loss {value} differs from the reference {ref[i]} by more than 1e-4")

s = g.stats()
m = ctx.metrics()
print(f"plans compiled {s['plans_compiled']}, host syncs by the graph {s['host_syncs']}, "
      f"program builds {m['program_builds']}")
if s["plans_compiled"] != 1:
    failures.append(f"{s['plans_compiled']} plans compiled; one plan should serve every batch size")
if s["host_syncs"] != 0:
    failures.append(f"the graph made {s['host_syncs']} host syncs; it should make none")
g.close()
ctx.close()
for f in failures:
    print("FAILED:", f, file=sys.stderr)
sys.exit(1 if failures else 0)
