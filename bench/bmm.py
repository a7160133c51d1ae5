#!/usr/bin/env python3
"""clb_bmm (batched matmul, a dynamic batch) against one matmul of the same
FLOPs in the same run, and against torch.bmm where torch imports.

Each shape [B, M, K] @ [B, K, N] (and with b transposed, as attention's
q @ k^T) is timed as the op plus its host sync, the median of --reps, under
AUTO (host BLAS's native kernel on a CPU device) and DEVICE (clbound's kernel
built with BATCHED), beside clb_matmul of [B*M, K] @ [K, N] (the same FLOPs in
one product) and torch.bmm on the same arrays (PyTorch's own CPU kernels; no
queue and no sync, so the ratio to it includes clbound's per-op overhead).
Rounds take turns; the table gives medians over rounds, and every result is
checked against a float64 reference first.

  CLBOUND_LIBRARY=$PWD/build/lib/libclbound.so PYTHONPATH=$PWD/python python3 bench/bmm.py
"""
import argparse
import statistics
import sys
import time

import numpy as np

SHAPES = ((64, 128, 64, 128), (256, 32, 32, 32), (16, 256, 64, 256))


def compare(a: float, b: float, what: str) -> str:
    """Time a against time b in words that read right."""
    r = a / b
    return f"{r:.2f}x slower than {what}" if r >= 1 else f"{1 / r:.2f}x faster than {what}"


def timed(fn, reps, sync=None):
    fn()
    if sync:
        sync()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    import clbound
    try:
        import torch
    except ImportError:
        torch = None
    ctx = clbound.Context()
    rng = np.random.default_rng(0)
    cases = []
    for B, M, K, N in SHAPES:
        a = rng.standard_normal((B, M, K)).astype(np.float32)
        b = rng.standard_normal((B, K, N)).astype(np.float32)
        bt = np.ascontiguousarray(b.transpose(0, 2, 1))
        dyn3 = (True, False, False)
        ta = ctx.from_numpy(a, bounds=(2 * B, M, K), dynamic=dyn3)  # a batch below its bound
        tb = ctx.from_numpy(b, bounds=(2 * B, K, N), dynamic=dyn3)
        tbt = ctx.from_numpy(bt, bounds=(2 * B, N, K), dynamic=dyn3)
        flat = ctx.from_numpy(a.reshape(B * M, K), bounds=(2 * B * M, K), dynamic=(True, False))
        w = ctx.from_numpy(b[0])
        want = a.astype(np.float64) @ b.astype(np.float64)
        for strategy in ("auto", "device"):
            ctx.set_gemm_strategy(strategy)
            for trans, other in ((False, tb), (True, tbt)):
                got = ctx.bmm(ta, other, trans_b=trans).numpy()
                err = np.abs(got - want).max() / np.abs(want).max()
                if not err < 1e-5:
                    print(f"bmm.py: [{B},{M},{K}]@[{B},{K},{N}] {strategy} trans_b={trans}: relative error {err:.2e}",
                          file=sys.stderr)
                    return 1
        ctx.set_gemm_strategy("auto")
        cases.append(((B, M, K, N), ta, tb, tbt, flat, w, a, b))
    rows = {}
    for rd in range(args.rounds):
        for (B, M, K, N), ta, tb, tbt, flat, w, a, b in cases[rd % len(cases):] + cases[:rd % len(cases)]:
            r = rows.setdefault((B, M, K, N), {})
            for strategy in ("auto", "device"):
                ctx.set_gemm_strategy(strategy)
                r.setdefault(f"bmm {strategy}", []).append(timed(lambda: ctx.bmm(ta, tb), args.reps, ctx.sync))
                r.setdefault(f"bmm b^T {strategy}", []).append(
                    timed(lambda: ctx.bmm(ta, tbt, trans_b=True), args.reps, ctx.sync))
            ctx.set_gemm_strategy("auto")
            r.setdefault("matmul", []).append(timed(lambda: ctx.matmul(flat, w), args.reps, ctx.sync))
            if torch is not None:
                A, Bm = torch.from_numpy(a), torch.from_numpy(b)
                r.setdefault("torch.bmm", []).append(timed(lambda: torch.bmm(A, Bm), args.reps))
    dev = ctx.metrics()["device"]
    print(f"bench/bmm.py: f32, medians of {args.rounds} rounds of {args.reps} reps (op + host sync), device {dev}")
    head = "| [B, M, K] @ [B, K, N] | bmm auto (ms) | b^T auto | bmm device | b^T device | matmul, same FLOPs | torch.bmm |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for (B, M, K, N), r in rows.items():
        med = {k: statistics.median(v) for k, v in r.items()}
        tt = f"{med['torch.bmm']:.3f}" if "torch.bmm" in med else "-"
        print(f"| [{B}, {M}, {K}] @ [{B}, {K}, {N}] | {med['bmm auto']:.3f} | {med['bmm b^T auto']:.3f} | "
              f"{med['bmm device']:.3f} | {med['bmm b^T device']:.3f} | {med['matmul']:.3f} | {tt} |")
    print("bmm under auto against the matmul of the same FLOPs and torch.bmm; the kernel (device) against auto:")
    for (B, M, K, N), r in rows.items():
        med = {k: statistics.median(v) for k, v in r.items()}
        parts = [compare(med["bmm auto"], med["matmul"], "the matmul"),
                 "the kernel " + compare(med["bmm device"], med["bmm auto"], "auto")]
        if "torch.bmm" in med:
            parts.append(compare(med["bmm auto"], med["torch.bmm"], "torch.bmm"))
        print(f"  [{B}, {M}, {K}] @ [{B}, {K}, {N}]: bmm " + ", ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
