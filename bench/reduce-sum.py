#!/usr/bin/env python3
"""Float32 sums on the device: clb_reduce_all, clb_reduce_dim over each dim and
clb_cumsum of a [ROWS, COLS] tensor, each the median of --reps (op plus its
host sync), every result first checked against numpy's float64 sum within
1e-5 relative. For the cost of a change to the sums' kernels, run it at both
commits (docs/benchmarks.md, "Sums that keep an inf").

  CLBOUND_LIBRARY=$PWD/build/lib/libclbound.so PYTHONPATH=$PWD/python python3 bench/reduce-sum.py
"""
import argparse
import statistics
import sys
import time

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    import clbound
    ctx = clbound.Context()
    host = np.random.default_rng(0).random((args.rows, args.cols), dtype=np.float32)
    x = ctx.from_numpy(host)
    want = {"sum": host.sum(dtype=np.float64), "sum over dim 1": host.sum(1, dtype=np.float64),
            "sum over dim 0": host.sum(0, dtype=np.float64), "cumsum over dim 1": np.cumsum(host, 1, dtype=np.float64)}
    ops = {"sum": lambda: ctx.reduce_all("sum", x), "sum over dim 1": lambda: ctx.reduce_dim("sum", x, 1, False),
           "sum over dim 0": lambda: ctx.reduce_dim("sum", x, 0, False), "cumsum over dim 1": lambda: ctx.cumsum(x, 1)}
    print(f"[{args.rows}, {args.cols}] float32, {ctx.kernel_style} kernel style, medians of {args.reps}")
    for name, fn in ops.items():
        got = fn().numpy().astype(np.float64)
        np.testing.assert_allclose(got, want[name], rtol=1e-5)
        ts = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            fn()
            ctx.sync()
            ts.append((time.perf_counter() - t0) * 1e3)
        print(f"{name:18s} {statistics.median(ts):8.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
