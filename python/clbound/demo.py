"""python -m clbound.demo: the xla-mlp workload of `clbound demo` from Python.

PyTorch/XLA's dynamic-shape test model (Linear(2,10), ReLU, Linear(10,1),
Sigmoid, BCE, SGD lr 1e-3, every weight and bias 0.01) trained for N iterations
on batches of 1 to 10 rows that only the device knows: the rows are nonzero() of a
pattern, the labels a second nonzero(). It runs under each policy on a fresh
context and prints, per policy, the seconds, program builds, plans compiled, the
graph's own host syncs, the final loss and the largest loss difference from a
float64 numpy reference of the same training. Exit status 1 when a loss differs
by more than 1e-4.

usage: python -m clbound.demo [--iterations N] [--policy dynamic|automatic|static|bucketed|all]
"""
import argparse
import sys
import time

import numpy as np

from . import Context
from .graph import Graph

POLICIES = ("dynamic", "automatic", "bucketed", "static")


def batch(i):
    """Iteration i's inputs: x [5, 2] and y [10] with their first k entries set."""
    k = 1 + (7 * i) % 10
    x = np.zeros((5, 2), np.float32)
    x.flat[:k] = 1
    y = np.zeros(10, np.float32)
    y[:k] = 1
    return k, x, y


def reference(iterations, lr=1e-3):
    """The same training in float64 numpy; the loss of every iteration."""
    w1, b1 = np.full((10, 2), 0.01), np.full(10, 0.01)
    w2, b2 = np.full((1, 10), 0.01), np.full(1, 0.01)
    losses = []
    for i in range(iterations):
        _, x, y = batch(i)
        X = np.argwhere(x).astype(np.float64)                  # [k, 2]
        t = (np.argwhere(y)[:, 0] % 2).astype(np.float64)      # [k]
        k = len(t)
        z1 = X @ w1.T + b1
        h = np.maximum(z1, 0)
        p = 1 / (1 + np.exp(-(h @ w2.T + b2)))[:, 0]
        losses.append(float(np.mean(-(t * np.log(p) + (1 - t) * np.log(1 - p)))))
        dz2 = ((p - t) / k)[:, None]                           # through sigmoid and BCE
        dw2, db2 = dz2.T @ h, dz2.sum(axis=0)
        dz1 = (dz2 @ w2) * (z1 > 0)
        dw1, db1 = dz1.T @ X, dz1.sum(axis=0)
        w1, b1, w2, b2 = w1 - lr * dw1, b1 - lr * db1, w2 - lr * dw2, b2 - lr * db2
    return losses


def train(policy, iterations, lr=1e-3):
    """Trains on a fresh context; returns a dict of the figures and the losses."""
    t0 = time.perf_counter()
    with Context() as ctx:
        g = Graph(ctx, policy=policy, name="xla-mlp")
        x = g.input("x", np.float32, (5, 2))
        y = g.input("y", np.float32, (10,))
        X = g.cast(g.nonzero(x), np.float32)
        labels = g.binary("remainder", g.cast(g.reshape(g.nonzero(y), (-1,)), np.float32), g.scalar(np.float32, 2))
        w1 = g.param("w1", np.full((10, 2), 0.01, np.float32))
        b1 = g.param("b1", np.full((10,), 0.01, np.float32))
        w2 = g.param("w2", np.full((1, 10), 0.01, np.float32))
        b2 = g.param("b2", np.full((1,), 0.01, np.float32))
        p = g.unary("sigmoid", g.linear(g.unary("relu", g.linear(X, w1, b1)), w2, b2))
        loss = g.loss("bce", p, labels)
        g.train(loss, lr=lr)
        losses = []
        for i in range(iterations):
            _, xs, ys = batch(i)
            g.feed(x, xs)
            g.feed(y, ys)
            g.run()
            losses.append(float(g.value(loss)))  # a host sync of this script's own
        stats, metrics = g.stats(), ctx.metrics()
        g.close()
    return dict(policy=policy, seconds=time.perf_counter() - t0, program_builds=metrics["program_builds"],
                cache_hits=metrics["program_cache_hits_memory"] + metrics["program_cache_hits_disk"],
                plans_compiled=stats["plans_compiled"], host_syncs=stats["host_syncs"], losses=losses)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m clbound.demo", description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--policy", default="all", choices=POLICIES + ("all",))
    a = ap.parse_args(argv)
    if a.iterations < 1:
        ap.error("--iterations must be at least 1")
    ref = reference(a.iterations)
    print(f"xla-mlp, {a.iterations} iterations, batches of 1 to 10 rows known only on the device")
    print(f"{'policy':<10} {'seconds':>8} {'builds':>7} {'hits':>6} {'plans':>6} {'syncs':>6} {'final loss':>11} {'max |err|':>10}")
    ok = True
    for policy in POLICIES if a.policy == "all" else (a.policy,):
        r = train(policy, a.iterations)
        err = max(abs(x - y) for x, y in zip(r["losses"], ref))
        ok &= err <= 1e-4
        print(f"{policy:<10} {r['seconds']:8.2f} {r['program_builds']:7d} {r['cache_hits']:6d} {r['plans_compiled']:6d} "
              f"{r['host_syncs']:6d} {r['losses'][-1]:11.6f} {err:10.2e}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
