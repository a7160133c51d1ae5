#!/usr/bin/env python3
"""bench/read-sync.py: what reading tensors back costs, with the reads copied
from the buffers after one wait (where the device's buffers are host memory, as
on PoCL's CPU device) against the reads enqueued and waited for
(CLBOUND_HOST_PTRS=off), in the same run.

Each case runs in a fresh process per setting, the settings interleaved over
--rounds rounds; a case is timed --reps times (median):

  sync          Context.sync() on an idle queue: one round trip to the device
  small         relu of a [<=10, 2] tensor (7 rows) and numpy_all of it
  three         relu of it, then numpy_all of three small tensors at once
  batch         relu of a [<=4096, 256] tensor (900 rows) and numpy_all of it
  numpy         relu of the small tensor and Tensor.numpy()

Every value read is checked against numpy's relu of the same data.

Run from the repository root after `make build`:
  CLBOUND_LIBRARY=$PWD/build/lib/libclbound.so PYTHONPATH=$PWD/python python3 bench/read-sync.py
Options: --rounds N (3) --reps N (300) --json. Exit status 0; 1 when a value
read differs.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Dict, List

CASES = ("sync", "small", "three", "batch", "numpy")
SETTINGS = (("after one wait", "on"), ("enqueued", "off"))


def worker(reps: int) -> Dict[str, float]:
    import numpy as np

    import clbound
    ctx = clbound.Context()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((7, 2)).astype(np.float32)
    b = rng.standard_normal((900, 256)).astype(np.float32)
    ta = ctx.from_numpy(a, bounds=(10, 2), dynamic=(True, False))
    tb = ctx.from_numpy(b, bounds=(4096, 256), dynamic=(True, False))
    want_a, want_b = np.maximum(a, 0), np.maximum(b, 0)

    def check(got: np.ndarray, want: np.ndarray) -> None:
        if got.shape != want.shape or not np.array_equal(got, want):
            raise SystemExit(f"read-sync: a value read differs (shape {got.shape}, want {want.shape})")

    def small() -> None:
        check(ctx.numpy_all([ctx.unary("relu", ta)])[0], want_a)

    def three() -> None:
        r = ctx.unary("relu", ta)
        for got in ctx.numpy_all([r, r, r]):
            check(got, want_a)

    def batch() -> None:
        check(ctx.numpy_all([ctx.unary("relu", tb)])[0], want_b)

    def numpy() -> None:
        check(ctx.unary("relu", ta).numpy(), want_a)

    fns = {"sync": ctx.sync, "small": small, "three": three, "batch": batch, "numpy": numpy}
    out = {}
    for name in CASES:
        f = fns[name]
        for _ in range(10):  # warm: builds, pool, host pointers learnt
            f()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
        out[name] = statistics.median(ts) * 1e6
    c0 = ctx.counters()["host_syncs"]
    small()
    out["host_syncs_per_small"] = float(ctx.counters()["host_syncs"] - c0)
    ctx.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rounds < 1 or args.reps < 1:
        ap.error("--rounds and --reps must be at least 1")
    if args.worker:
        print(json.dumps(worker(args.reps)))
        return 0
    runs: Dict[str, List[Dict[str, float]]] = {label: [] for label, _ in SETTINGS}
    for r in range(args.rounds):
        order = SETTINGS if r % 2 == 0 else tuple(reversed(SETTINGS))
        for label, value in order:
            env = dict(os.environ, CLBOUND_HOST_PTRS=value)
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", "--reps", str(args.reps)],
                               env=env, capture_output=True, text=True)
            if p.returncode != 0:
                sys.stderr.write(p.stderr)
                print(f"read-sync: the {label} worker failed (exit {p.returncode})", file=sys.stderr)
                return 1
            runs[label].append(json.loads(p.stdout.strip().splitlines()[-1]))
    one, two = (label for label, _ in SETTINGS)
    rows = []
    for name in CASES:
        a = statistics.median(x[name] for x in runs[one])
        b = statistics.median(x[name] for x in runs[two])
        ratios = [y[name] / x[name] for x, y in zip(runs[one], runs[two])]
        rows.append({"case": name, one: a, two: b, "enqueued / after one wait": statistics.median(ratios)})
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    load = os.getloadavg()
    print(f"read-sync.py: {args.rounds} round(s), {args.reps} reps per case, medians in us; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("| case | reads after one wait (us) | reads enqueued, CLBOUND_HOST_PTRS=off (us) | enqueued / after one wait |")
    print("|---|---|---|---|")
    for row in rows:
        r = row["enqueued / after one wait"]
        print(f"| {row['case']} | {row[one]:.1f} | {row[two]:.1f} | {r:.2f}x |")
    syncs = {label: runs[label][0]["host_syncs_per_small"] for label in runs}
    print(f"host syncs counted per small read: {syncs[one]:.0f} after one wait, {syncs[two]:.0f} enqueued")
    return 0


if __name__ == "__main__":
    sys.exit(main())
