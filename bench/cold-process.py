#!/usr/bin/env python3
"""cold-process.py: the xla-mlp demo's training as whole processes, cold and warm,
beside JAX (jit, the batch padded to its bound) and eager PyTorch (issue 32).

Each run is a whole process timed from its start to its exit. clbound runs
`clbound demo --workload xla-mlp --policy dynamic --iterations N --cache user
--json` cold (an empty program cache and an empty PoCL kernel cache of the
round's own) and then warm (the same folders, after the store helper of the cold
run has finished: `clbound cache info` waits for it, untimed), then the driver
alone (`clbound bench build-floor`: a one-line kernel built and launched from an
empty PoCL cache, no clbound op: the floor under any cold process), and the
driver alone again on the PoCL cache that run left (the floor under any warm
process: OpenCL start-up, a cached binary, a cached work-group function). Where `jax` /
`torch` import in the given interpreters, the same model and data run there as
whole processes too (JAX: one jit step over the batch padded to its bound of 10
with a mask; PyTorch: eager steps at the actual batch size); each prints its final
loss, checked with clbound's against a float64 reference computed here (within
2e-6). Rounds are interleaved (clbound cold, clbound warm, JAX, PyTorch, then
again); medians and ratios (clbound / JAX, clbound / PyTorch) come from the same
run. The script itself needs only Python's standard library. Usage and fields:
bench/README.md.
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import find_clbound  # noqa: E402  (build/bin/clbound, then PATH)

BOUND = 10          # the xla-mlp batch's bound (bench/workloads.c, XLA_BOUND)
SIZES = (1, 8, 5)   # the demo's batch sizes, cycled (DEMO_SHORT_SIZES = 3 of its schedule)
LR = 1.0            # the demo's rate for xla-mlp with --iterations (demo_default_lr)
TOLERANCE = 2e-6    # final loss against the float64 reference

# The model of every peer: Linear(2,10), ReLU, Linear(10,1), Sigmoid, BCE (log
# clamped at -100, as PyTorch's BCELoss), SGD at LR; every weight and bias 0.01;
# batch of size n: rows (j // 2, j % 2) and targets j % 2 for j < n.
JAX_PROGRAM = r"""
import sys
import jax, jax.numpy as jnp
BOUND, SIZES, LR, iters = %d, %r, %r, int(sys.argv[1])
X = jnp.array([[j // 2, j %% 2] for j in range(BOUND)], jnp.float32)
t = jnp.array([j %% 2 for j in range(BOUND)], jnp.float32)
masks = [jnp.array([1.0 if j < n else 0.0 for j in range(BOUND)], jnp.float32) for n in SIZES]
p = {"w1": jnp.full((10, 2), 0.01, jnp.float32), "b1": jnp.full((10,), 0.01, jnp.float32),
     "w2": jnp.full((1, 10), 0.01, jnp.float32), "b2": jnp.full((1,), 0.01, jnp.float32)}
def loss_fn(p, m):
    h = jnp.maximum(X @ p["w1"].T + p["b1"], 0.0)
    q = jax.nn.sigmoid(h @ p["w2"].T + p["b2"])[:, 0]
    l = -(t * jnp.maximum(jnp.log(q), -100.0) + (1 - t) * jnp.maximum(jnp.log(1 - q), -100.0))
    return jnp.sum(l * m) / jnp.sum(m)
@jax.jit
def step(p, m):
    loss, g = jax.value_and_grad(loss_fn)(p, m)
    return jax.tree_util.tree_map(lambda a, b: a - LR * b, p, g), loss
for i in range(iters):
    p, loss = step(p, masks[i %% len(SIZES)])
print("final_loss %%.9g" %% float(loss))
""" % (BOUND, SIZES, LR)

TORCH_PROGRAM = r"""
import sys
import torch
from torch import nn
BOUND, SIZES, LR, iters = %d, %r, %r, int(sys.argv[1])
dev = torch.device(sys.argv[2] if len(sys.argv) > 2 else "cpu")
torch.set_num_threads(max(1, torch.get_num_threads()))
X = torch.tensor([[j // 2, j %% 2] for j in range(BOUND)], dtype=torch.float32)
t = torch.tensor([[j %% 2] for j in range(BOUND)], dtype=torch.float32)
X, t = X.to(dev), t.to(dev)
model = nn.Sequential(nn.Linear(2, 10), nn.ReLU(), nn.Linear(10, 1), nn.Sigmoid()).to(dev)
with torch.no_grad():
    for q in model.parameters():
        q.fill_(0.01)
opt = torch.optim.SGD(model.parameters(), lr=LR)
loss_fn = nn.BCELoss()
for i in range(iters):
    n = SIZES[i %% len(SIZES)]
    opt.zero_grad()
    loss = loss_fn(model(X[:n]), t[:n])
    loss.backward()
    opt.step()
print("final_loss %%.9g" %% loss.item())
""" % (BOUND, SIZES, LR)


def reference_final_loss(iters):
    """The float64 training of bench/workloads.c's reference; the last step's loss
    (before its update)."""
    w1 = [[0.01, 0.01] for _ in range(10)]
    b1 = [0.01] * 10
    w2 = [0.01] * 10
    b2 = 0.01
    loss = math.nan
    for i in range(iters):
        n = SIZES[i % len(SIZES)]
        rows = [(float(j // 2), float(j % 2)) for j in range(n)]
        tg = [float(j % 2) for j in range(n)]
        hs, ps = [], []
        for x in rows:
            h = [max(0.0, b1[k] + w1[k][0] * x[0] + w1[k][1] * x[1]) for k in range(10)]
            z = b2 + sum(w2[k] * h[k] for k in range(10))
            hs.append(h)
            ps.append(1.0 / (1.0 + math.exp(-z)))
        loss = 0.0
        dz = []
        for p, y in zip(ps, tg):
            lp = max(math.log(p), -100.0) if p > 0 else -100.0
            l1p = max(math.log(1 - p), -100.0) if p < 1 else -100.0
            loss += -(y * lp + (1 - y) * l1p)
            d = max(p * (1 - p), 1e-12)
            dz.append((p - y) / d / n * p * (1 - p))
        loss /= n
        gw2 = [sum(dz[r] * hs[r][k] for r in range(n)) for k in range(10)]
        gb2 = sum(dz)
        dh = [[dz[r] * w2[k] if hs[r][k] > 0 else 0.0 for k in range(10)] for r in range(n)]
        gw1 = [[sum(dh[r][k] * rows[r][c] for r in range(n)) for c in range(2)] for k in range(10)]
        gb1 = [sum(dh[r][k] for r in range(n)) for k in range(10)]
        for k in range(10):
            w2[k] -= LR * gw2[k]
            b1[k] -= LR * gb1[k]
            w1[k][0] -= LR * gw1[k][0]
            w1[k][1] -= LR * gw1[k][1]
        b2 -= LR * gb2
    return loss


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clbound", default=None, help="the clbound command (default: build/bin/clbound, then PATH)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds, medians reported (default 3)")
    p.add_argument("--iterations", type=int, default=100, help="training steps per process (default 100)")
    p.add_argument("--jax-python", default=sys.executable, help="the interpreter that runs the JAX program")
    p.add_argument("--torch-python", default=sys.executable, help="the interpreter that runs the PyTorch program")
    p.add_argument("--load", type=int, default=0, help="busy-loop processes kept running meanwhile (default 0)")
    p.add_argument("--json", action="store_true", help="also print one JSON object with every run")
    p.add_argument("--gpu", action="store_true",
                   help="the peers on the GPU (PyTorch on cuda, JAX on its GPU); every cold process with "
                        "CUDA_CACHE_DISABLE=1 (NVIDIA's compute cache off), every warm one with a compute "
                        "cache of the round's own, filled by an untimed run first")
    return p.parse_args()


def importable(python, module):
    try:
        return subprocess.run([python, "-c", "import " + module], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=300).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def timed(cmd, env):
    """Runs cmd as a whole process; (seconds from start to exit, its stdout)."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit("cold-process.py: %s failed (exit %d):\n%s" % (" ".join(cmd[:3]), r.returncode, r.stderr[-2000:]))
    return dt, r.stdout


def gpu_cache_env(rd, state):
    """NVIDIA's compute cache (its JIT of PTX binaries) for a cold process (off) or a
    warm one (a folder of the round's own, filled by an untimed run before)."""
    if state == "cold":
        return {"CUDA_CACHE_DISABLE": "1"}
    return {"CUDA_CACHE_DISABLE": "0", "CUDA_CACHE_PATH": os.path.join(rd, "cuda-cache")}


def peer_loss(out):
    for line in out.splitlines():
        if line.startswith("final_loss "):
            return float(line.split()[1])
    sys.exit("cold-process.py: a peer printed no final loss:\n" + out[-2000:])


def main():
    a = parse_args()
    tool = find_clbound(a.clbound)
    if not tool or not os.path.exists(tool):
        sys.exit("cold-process.py: no clbound command: build it (make tool) or pass --clbound PATH")
    ref = reference_final_loss(a.iterations)
    peers = {}
    for name, module, python, program in (("jax", "jax", a.jax_python, JAX_PROGRAM),
                                          ("torch", "torch", a.torch_python, TORCH_PROGRAM)):
        if importable(python, module):
            peers[name] = (python, program)
        else:
            print("%s: skipped: %s not installed (pip install %s)" % (name, module, module))
    work = tempfile.mkdtemp(prefix="cold-process-")
    programs = {}
    for name, (python, program) in peers.items():
        programs[name] = os.path.join(work, name + "-xla-mlp.py")
        with open(programs[name], "w") as f:
            f.write(program)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.load)]
    runs = {k: [] for k in ("clbound_cold", "clbound_warm", "driver_floor", "driver_floor_warm", "jax", "torch")}
    floor = {k: [] for k in ("startup_ms", "build_ms", "first_launch_ms")}
    phases = {k: [] for k in ("context_new_ms", "build_ms", "first_launch_ms", "context_free_ms", "store_local",
                              "store_handoffs")}
    losses = {}
    demo = [tool, "demo", "--workload", "xla-mlp", "--policy", "dynamic", "--iterations", str(a.iterations),
            "--cache", "user", "--quiet", "--json", "--no-check"]
    loads = []
    try:
        for r in range(a.rounds):
            loads.append(os.getloadavg()[0])
            rd = os.path.join(work, "round%d" % r)
            env = dict(os.environ, CLBOUND_CACHE_DIR=os.path.join(rd, "clbound"), POCL_CACHE_DIR=os.path.join(rd, "pocl"))
            os.makedirs(env["POCL_CACHE_DIR"])
            metrics = os.path.join(rd, "metrics.json")
            for state in ("cold", "warm"):
                senv = dict(env, CLBOUND_METRICS_FILE=metrics)
                if a.gpu:
                    senv.update(gpu_cache_env(rd, state))
                    if state == "warm":  # fills the round's compute cache, untimed
                        timed(demo, senv)
                dt, out = timed(demo, senv)
                js = json.loads([l for l in out.splitlines() if l.startswith("{")][0])
                runs["clbound_" + state].append(dt)
                losses["clbound"] = float(js["final_loss"])
                if state == "cold":
                    with open(metrics) as f:
                        m = json.load(f)
                    for k in phases:
                        phases[k].append(m.get(k, 0))
                    # the store helper's entries, before the warm run (untimed)
                    subprocess.run([tool, "cache", "info", env["CLBOUND_CACHE_DIR"]], env=env,
                                   stdout=subprocess.DEVNULL, check=True)
            # the driver alone: a one-line kernel built and launched from an empty
            # PoCL cache of its own, no clbound op (`clbound bench build-floor`)
            fenv = dict(os.environ, POCL_CACHE_DIR=os.path.join(rd, "pocl-floor"))
            if a.gpu:
                fenv.update(gpu_cache_env(rd, "cold"))
            os.makedirs(fenv["POCL_CACHE_DIR"])
            dt, out = timed([tool, "bench", "build-floor", "--json"], fenv)
            runs["driver_floor"].append(dt)
            fj = json.loads([l for l in out.splitlines() if l.startswith("{")][0])
            for k in floor:
                floor[k].append(fj[k])
            # the same again on the cache it left: the floor under a warm process
            dt, out = timed([tool, "bench", "build-floor", "--json"], fenv)
            runs["driver_floor_warm"].append(dt)
            for name, (python, _) in peers.items():
                penv = dict(os.environ, JAX_PLATFORMS="cuda" if a.gpu else "cpu")
                if a.gpu:
                    penv.update(gpu_cache_env(rd, "cold"))
                dt, out = timed([python, programs[name], str(a.iterations)] + (["cuda"] if a.gpu else []), penv)
                runs[name].append(dt)
                losses[name] = peer_loss(out)
    finally:
        for b in busy:
            b.kill()
            b.wait()
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in runs.items() if v}
    bad = {k: v for k, v in losses.items() if not abs(v - ref) <= TOLERANCE}
    print("xla-mlp, %d iterations, whole processes, %d interleaved rounds; load average %s at the rounds' starts%s%s"
          % (a.iterations, a.rounds, ", ".join("%.1f" % x for x in loads),
             "; peers on the GPU, cold processes with CUDA_CACHE_DISABLE=1" if a.gpu else "",
             " (with %d busy-loop processes)" % a.load if a.load else ""))
    print("final loss: float64 reference %.9f; %s" % (ref, ", ".join(
        "%s %.9f (%s)" % (k, v, "ok" if k not in bad else "OFF by %.2g" % abs(v - ref)) for k, v in losses.items())))
    print("%-44s %10s   %s" % ("process", "median s", "runs"))
    labels = {"clbound_cold": "clbound, cold (empty clbound and PoCL caches)",
              "clbound_warm": "clbound, warm (the same caches again)",
              "driver_floor": "the driver alone: a one-line kernel, cold",
              "driver_floor_warm": "the driver alone again, warm PoCL cache",
              "jax": "JAX jit, batch padded to 10 (cold: no cache)",
              "torch": "PyTorch eager (cold)"}
    for k, v in runs.items():
        if v:
            print("%-44s %10.3f   %s" % (labels[k], med[k], ", ".join("%.3f" % x for x in v)))
    print("clbound cold, medians (metrics file): OpenCL start-up (context_new_ms) %.0f ms, build from source "
          "(build_ms) %.0f ms, first launches (first_launch_ms: PoCL's per-kernel compile) %.0f ms, context free "
          "(context_free_ms) %.0f ms; programs stored in the process %d, handed to the store helper %d" %
          tuple(statistics.median(phases[k]) for k in phases))
    print("the driver alone, medians (clbound bench build-floor): start-up %.0f ms, a one-line kernel built from source "
          "%.0f ms, its first launch %.0f ms: the floor under a cold process, %.0f%% of clbound's cold process" %
          (tuple(statistics.median(floor[k]) for k in floor) + (100 * med["driver_floor"] / med["clbound_cold"],)))
    for peer in ("jax", "torch"):
        if peer in med:
            print("ratio clbound cold / %s: %.2f; clbound warm / %s: %.3f; the driver alone / %s: %.2f" %
                  (peer, med["clbound_cold"] / med[peer], peer, med["clbound_warm"] / med[peer], peer,
                   med["driver_floor"] / med[peer]))
    over = med["clbound_warm"] - med["driver_floor_warm"]
    print("ratio clbound warm / the driver alone warm: %.2f (%.0f ms %s it)" %
          (med["clbound_warm"] / med["driver_floor_warm"], abs(over) * 1e3, "over" if over >= 0 else "under"))
    if a.json:
        print(json.dumps({"iterations": a.iterations, "rounds": a.rounds, "load": a.load, "loadavg": loads,
                          "reference_loss": ref, "losses": losses, "runs_s": runs, "medians_s": med,
                          "phases_ms": phases, "driver_floor_ms": floor}))
    if bad:
        sys.exit("cold-process.py: final loss off the reference by more than %g: %s" % (TOLERANCE, bad))


if __name__ == "__main__":
    main()
