#!/usr/bin/env python3
"""peers.py: clbound's benchmarks next to PyTorch's same work on the same device.

Runs `clbound bench ops --json` (and `clbound bench whole-step --json`), then the
PyTorch equivalents on CUDA when PyTorch sees a GPU, else on the CPU, and prints
one table of ratios (clbound's time over PyTorch's: below 1 means clbound is
faster), as text and as one JSON object. PyTorch is optional: without it the
script says so and exits 0. Usage and fields: bench/README.md.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

SKIP = "peers.py: skipping: PyTorch is not installed (pip install torch); nothing was measured"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clbound", default=None, help="the clbound command (default: build/bin/clbound, then PATH)")
    p.add_argument("--n", type=int, default=16777216, help="elements of the mask ops (default 16777216)")
    p.add_argument("--density", type=float, default=0.5, help="fraction of true mask bits (default 0.5)")
    p.add_argument("--reps", type=int, default=11, help="timed runs per op, median reported (default 11)")
    p.add_argument("--no-whole-step", action="store_true", help="skip the training-step comparison")
    p.add_argument("--json-only", action="store_true", help="print only the JSON object")
    p.add_argument("--ops-json", default=None, metavar="FILE",
                   help="clbound's side of the mask ops from FILE, the output of an earlier "
                        "`clbound bench ops --json` at the same --n, instead of running it again")
    return p.parse_args()


def find_clbound(arg):
    if arg:
        return arg
    here = os.path.dirname(os.path.abspath(__file__))
    local = os.path.join(here, "..", "build", "bin", "clbound")
    return local if os.path.exists(local) else shutil.which("clbound")


def run_json(cmd):
    """Runs a clbound command that prints JSON lines; returns the parsed lines."""
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def timed(torch, dev, fn, reps):
    """Median ms of fn() over reps runs after 2 warm-ups, each followed by a sync."""
    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()
    for _ in range(2):
        fn()
        sync()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def torch_ops(torch, dev, n, density, reps):
    """PyTorch's nonzero (bool and f32 input), masked_select, masked_scatter and a
    clone of the f32 input, on clbound's shapes ([n / 4096, 4096] when 4096
    divides n, else [n]) and density."""
    shape = (n // 4096, 4096) if n % 4096 == 0 and n != 4096 else (n,)
    g = torch.Generator(device="cpu").manual_seed(12345)
    mask = (torch.rand(shape, generator=g) < density).to(dev)
    x = (torch.randint(0, 2001, shape, generator=g).float() * 0.25 - 250.0).to(dev)
    xnz = torch.where(mask, torch.ones_like(x), torch.zeros_like(x))
    src = torch.arange(n, dtype=torch.float32, device=dev).remainder(4096).add(1000.0)
    return {
        ("nonzero", "bool"): timed(torch, dev, lambda: torch.nonzero(mask), reps),
        ("nonzero", "f32"): timed(torch, dev, lambda: torch.nonzero(xnz), reps),
        ("masked_select", "f32"): timed(torch, dev, lambda: torch.masked_select(x, mask), reps),
        ("masked_scatter", "f32"): timed(torch, dev, lambda: x.masked_scatter(mask, src), reps),
        ("copy", "f32"): timed(torch, dev, lambda: x.clone(), reps),
    }


def torch_steps(torch, dev, reps):
    """Eager training steps shaped as clbound's workloads (bench/workloads.c):
    xla-mlp (Linear(2,10), ReLU, Linear(10,1), Sigmoid, BCE, SGD; its batch is
    the rows nonzero() picks from a 10-row pattern) and wide-mlp (256-512-256-1
    with ReLU, Sigmoid, BCE, SGD; 256 rows of a 4096x256 table by masked_select).
    Each step reads the count on the host, as eager PyTorch must."""
    nn = torch.nn
    g = torch.Generator(device="cpu").manual_seed(7)
    res = {}
    pattern = torch.tensor([1, 0, 1, 1, 0, 1, 0, 1, 1, 1], dtype=torch.bool, device=dev)
    xtab = torch.rand((10, 2), generator=g).to(dev)
    ytab = (torch.rand((10, 1), generator=g) < 0.5).float().to(dev)
    xla = nn.Sequential(nn.Linear(2, 10), nn.ReLU(), nn.Linear(10, 1), nn.Sigmoid()).to(dev)
    opt = torch.optim.SGD(xla.parameters(), lr=1.0)
    loss_fn = nn.BCELoss()

    def xla_step():
        idx = torch.nonzero(pattern)[:, 0]
        opt.zero_grad()
        loss = loss_fn(xla(xtab[idx]), ytab[idx])
        loss.backward()
        opt.step()
    res["xla-mlp"] = timed(torch, dev, xla_step, reps)
    table = torch.rand((4096, 256), generator=g).to(dev)
    labels = (torch.rand((4096, 1), generator=g) < 0.5).float().to(dev)
    rows = torch.zeros(4096, dtype=torch.bool)
    rows[torch.randperm(4096, generator=g)[:256]] = True
    rows = rows.to(dev)
    wide = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 1),
                         nn.Sigmoid()).to(dev)
    wopt = torch.optim.SGD(wide.parameters(), lr=0.05)

    def wide_step():
        xb = table[rows]
        yb = labels[rows]
        wopt.zero_grad()
        loss = loss_fn(wide(xb), yb)
        loss.backward()
        wopt.step()
    res["wide-mlp"] = timed(torch, dev, wide_step, reps)
    return res


def main():
    args = parse_args()
    try:
        import torch
    except ImportError:
        print(SKIP)
        return 0
    tool = find_clbound(args.clbound)
    if not tool:
        print("peers.py: no clbound command: build it (make tool) or pass --clbound PATH", file=sys.stderr)
        return 1
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev_name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "CPU"
    if args.ops_json:
        with open(args.ops_json) as f:
            ops = [json.loads(line) for line in f if line.startswith("{")]
    else:
        ops = run_json([tool, "bench", "ops", "--json", "--quiet", "--n", str(args.n), "--density",
                        str(args.density), "--reps", str(args.reps)])
    # (a saved --ops-json file may hold every density: PyTorch ran at --density)
    ops = [r for r in ops if r.get("n") == args.n and abs(r.get("density", args.density) - args.density) < 1e-9]
    peer = torch_ops(torch, dev, args.n, args.density, args.reps)
    rows = []
    for r in ops:
        pt = peer.get((r["op"], r["dtype"]))
        rows.append({"what": r["op"], "input": r["dtype"], "n": r["n"], "density": r["density"],
                     "path": r.get("path", "auto"), "clbound_ms": r["ms"], "clbound_copy_ms": r["copy_ms"],
                     "of_copy": r["fraction_of_copy"], "torch_ms": pt, "torch_copy_ms": peer[("copy", "f32")],
                     "clbound_over_torch": r["ms"] / pt if pt else None, "ok": r["ok"]})
    if not args.no_whole_step:
        steps = run_json([tool, "bench", "whole-step", "--json"])
        peer_steps = torch_steps(torch, dev, args.reps)
        for r in steps:
            pt = peer_steps.get(r["workload"])
            ms = r.get("replay_step_ms") or r["step_ms"]
            rows.append({"what": "training step", "input": r["workload"], "n": None, "density": None, "path": None,
                         "clbound_ms": ms, "clbound_copy_ms": None, "of_copy": None, "torch_ms": pt,
                         "torch_copy_ms": None, "clbound_over_torch": ms / pt if pt else None, "ok": True})
    report = {"bench": "peers", "torch": torch.__version__, "torch_device": dev_name,
              "clbound_device_env": os.environ.get("CLBOUND_DEVICE"), "rows": rows}
    if not args.json_only:
        print(f"clbound against PyTorch {torch.__version__} on {dev_name}; ratio = clbound ms / PyTorch ms "
              f"(below 1: clbound is faster); medians of {args.reps}")
        print(f"{'what':<14} {'input':<9} {'path':<8} {'clbound ms':>11} {'of copy':>8} {'torch ms':>10} "
              f"{'ratio':>7}")
        for r in rows:
            oc = f"{r['of_copy']:.2f}" if r["of_copy"] is not None else "-"
            ratio = f"{r['clbound_over_torch']:.2f}" if r["clbound_over_torch"] is not None else "-"
            tms = f"{r['torch_ms']:.4f}" if r["torch_ms"] is not None else "-"
            print(f"{r['what']:<14} {r['input']:<9} {r['path'] or '-':<8} {r['clbound_ms']:>11.4f} {oc:>8} "
                  f"{tms:>10} {ratio:>7}")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
