#!/usr/bin/env python3
"""bench/torch-compile.py: torch.compile(model, backend="clbound") against eager
PyTorch, torch.compile(backend="inductor", dynamic=True) and the same model in
clbound's own graph API (issue 33).

Two models as nn.Modules, trained for --steps steps (forward, BCELoss, backward,
SGD, loss.item()) on a batch whose size changes every step, the batch dim marked
with torch._dynamo.mark_dynamic(x, 0, min=2, max=bound):

  xla   PyTorch/XLA's Feedforward(2, 10), batches [<=10, 2] built by nonzero
  wide  256-512-256-1 (WideMLP), batches [<=4096, 256] picked by a random mask

Variants, each in a fresh process with fresh caches (CLBOUND_CACHE_DIR,
POCL_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR all new temporary folders), so the first
step is a cold start; clbound's builds are optimized at once
(CLBOUND_COLD_BUILD=optimized unless set), so that warm steps time the optimized
kernels:

  eager     eager PyTorch on the CPU
  clbound   torch.compile(model, backend="clbound")
  clbound_nopause  the same with clbound.dynamo.config.pause_openmp = False: PyTorch's
            idle OpenMP threads are not paused at each call (not run unless named)
  clbound_late  the same with the gradients wrapped as torch tensors after the
            call's wait instead of before it (as until 2026-11-28; not run unless named)
  inductor  torch.compile(model, backend="inductor", dynamic=True)
  graph     clbound.graph.Graph(policy="dynamic"): g.linear/unary/loss/train,
            fed the same batches (its first step includes building the graph)
  aot_eager torch.compile(model, backend="aot_eager"): PyTorch's front end
            (Dynamo, AOTAutograd) running eager kernels, the floor of any
            backend behind that front end; its warm step over the graph API's
            is printed too
  torch_share  the same loop with the model replaced by an autograd Function
            that returns a prepared prediction and, in its backward, a new
            gradient tensor per parameter (as a backend hands them back): what
            the unchanged program runs in eager PyTorch around any backend
            (zero_grad, BCELoss, autograd through it, gradient accumulation,
            SGD, loss.item()). Not a training run: its losses are not compared.
            With graph, aot_eager and eager it gives a backend's floor on this
            loop: the graph API's step + torch_share + (aot_eager - eager)

Per variant: the first step's time, the total of all steps, and the warm step:
the median step after the first --warmup steps. Every variant's losses are
compared with eager PyTorch's (max |difference|, target <= 1e-5). The rounds
run interleaved (every model and variant once per round, the variant order
rotating); the table holds medians over the rounds, and the ratios are taken
within each round, then the median. Only the training step is timed: the batches
are made before the loop, the same for every variant.

Run from the repository root after `make build`:
  CLBOUND_LIBRARY=$PWD/build/lib/libclbound.so PYTHONPATH=$PWD/python python3 bench/torch-compile.py
Options: --steps N (100) --rounds N (3) --inductor-rounds N (default: every round)
--warmup N (10) --models xla,wide --variants eager,clbound,inductor,graph,aot_eager,torch_share (the
default; clbound_nopause and clbound_late on request) --json
--torch-threads N (torch.set_num_threads in every variant; default: PyTorch's choice)
--gomp-spincount N (every variant once more per round with GOMP_SPINCOUNT=N in its
environment, interleaved with the runs under the environment's own OpenMP waiting:
the tables and ratios of both settings from the same rounds; docs/benchmarks.md,
"Threads")
--profile MODEL (no benchmark: cProfile of warm steps of the clbound variant,
the top entries by own time and by cumulative time; --profile-steps N, 20).
--host-cpu MODEL (no benchmark: the calling thread's CPU time per warm step of
the clbound variant, by phase of its two calls; then the warm step with the
calling thread kept busy for 0, 100 and 200 us before each call's closing
sync, the values interleaved step by step: what CPU the backend spends while
the device works costs on a machine with few cores; --profile-steps N steps
per value).
--device-idle MODEL (no benchmark: where the warm step's time goes on the
device, the clbound backend against the graph API, each in processes of its own
with build/lib/libclbound-timeline.so preloaded (bench/timeline/cl-timeline.c:
every command's start and end from OpenCL's profiling): per warm step, the step,
the time the device ran a command (busy) and the rest (idle), the idle time
inside the backend's calls of its lowered graphs and between them (PyTorch's
own work), and the commands by kind; then aot_eager's step and its time between
its compiled calls (the same PyTorch work with no clbound in the process), and
a backend's floor on the loop from each between-call time; --profile-steps N
steps per process, --rounds N processes per variant, medians; --timeline-lib
PATH).
--wake-cost MODEL (no benchmark: aot_eager's loop with one thing done at the end
of each compiled call (WAKE_EXTRAS: a busy wait, a sleep, a clbound op enqueued,
a clbound host sync polling or blocking), PyTorch's work between the calls
against nothing done, and the calling thread's sleeps per step; --profile-steps
N steps per process, --rounds N processes per case, medians).
Exit status: 0; 1 when a variant's losses differ from eager's by more than 1e-5
or a variant other than inductor failed; without PyTorch it prints a line saying
so and exits 77 (skipped).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

MODELS = ("xla", "wide")
VARIANTS = ("eager", "clbound", "inductor", "graph", "aot_eager", "torch_share", "clbound_nopause", "clbound_late")
ON_REQUEST = ("clbound_nopause", "clbound_late")  # run only when named
DEFAULT_VARIANTS = tuple(v for v in VARIANTS if v not in ON_REQUEST)
# the clbound backend; without its OpenMP pause; with its outputs wrapped after the wait
BACKENDS = ("clbound", "clbound_nopause", "clbound_late")
OMP_WAIT_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")
LOSS_TOL = 1e-5
SKIPPED = 77
# the learning rates of python/tests/test_torch_compile.py
LR = {"xla": 1.0, "wide": 0.05}
BOUND = {"xla": 10, "wide": 4096}


def positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer")
    if v < 1:
        raise argparse.ArgumentTypeError(f"{v} is not >= 1")
    return v


def names(allowed: tuple) -> Any:
    def parse(text: str) -> List[str]:
        got = [t for t in text.split(",") if t]
        bad = [t for t in got if t not in allowed]
        if bad or not got:
            raise argparse.ArgumentTypeError(f"{text!r}: choose from {','.join(allowed)}")
        return got
    return parse


# ---- the models and their data: python/tests/test_torch_compile.py's own ----

TEST_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python", "tests",
                         "test_torch_compile.py")
SHARED = ("Feedforward", "create_dynamic_test_data", "batch_sizes", "WideMLP")
_shared: Dict[str, Any] = {}


def shared(torch: Any) -> Dict[str, Any]:
    """The tests' model classes and data helpers (SHARED), taken from the test
    file's source (the module itself needs pytest), so that the benchmark trains
    exactly the models the tests check against eager PyTorch."""
    if not _shared:
        import ast
        with open(TEST_FILE, encoding="utf-8") as f:
            tree = ast.parse(f.read(), TEST_FILE)
        body = [n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name in SHARED]
        missing = sorted(set(SHARED) - {n.name for n in body})
        if missing:
            raise RuntimeError(f"{TEST_FILE} no longer defines {', '.join(missing)}")
        ns: Dict[str, Any] = {"torch": torch}
        exec(compile(ast.Module(body=body, type_ignores=[]), TEST_FILE, "exec"), ns)
        _shared.update((k, ns[k]) for k in SHARED)
    return _shared


def new_model(torch: Any, model: str) -> Any:
    d = shared(torch)
    return d["Feedforward"](2, hidden_size=10) if model == "xla" else d["WideMLP"]()


def make_batches(torch: Any, model: str, steps: int) -> List[Any]:
    """[(x, y)] per step, the same for every variant: xla as the test's loop
    (PT/XLA's generator at sizes 2..10), wide as the test's train_wide."""
    d = shared(torch)
    if model == "xla":
        return [d["create_dynamic_test_data"](5, 2, n) for n in d["batch_sizes"](steps, 2, 10)]
    out = []
    g = torch.Generator().manual_seed(1)
    table = torch.randn(4096, 256, generator=g)
    labels = (table[:, :8].sum(1) > 0).float()
    for i in range(steps):
        mask = torch.rand(4096, generator=g) < (0.02 + 0.1 * (i % 5))  # batch = masked rows
        if int(mask.sum()) < 2:
            mask[:2] = True  # mark_dynamic's min=2
        out.append((table[mask], labels[mask]))
    return out


# ---- one variant in this process ----

def ensure_backend_registered(torch: Any) -> bool:
    """True when "clbound" was registered here (no entry point: the package is
    not pip-installed, e.g. PYTHONPATH=python)."""
    from torch._dynamo.backends.registry import list_backends, register_backend
    if "clbound" in list_backends(exclude_tags=()):
        return False

    def clbound_backend(gm: Any, ex: Any, **kw: Any) -> Any:
        from clbound.dynamo import backend
        return backend(gm, ex, **kw)
    register_backend(name="clbound")(clbound_backend)
    return True


class PreparedOutputs:
    """torch_share's model: an autograd Function whose forward returns a
    prediction of the batch's size (0.5 everywhere) and whose backward returns a
    new gradient tensor per parameter, as a backend's backward hands them back."""

    def __init__(self, torch: Any, model: Any) -> None:
        params = list(model.parameters())

        class Prepared(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, x: Any, *ps: Any) -> Any:
                return torch.full((x.shape[0], 1), 0.5)

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                return (None,) + tuple(torch.full_like(p, 1e-6) for p in params)

        self.fn, self.params = Prepared, params

    def __call__(self, x: Any) -> Any:
        return self.fn.apply(x, *self.params)


class TorchStep:
    """eager / clbound / inductor: the test's training loop."""

    def __init__(self, torch: Any, variant: str, model: str) -> None:
        self.torch = torch
        self.model_name = model
        torch.manual_seed(0)
        self.model = new_model(torch, model)
        self.run_model = self.model
        if variant in BACKENDS:
            import clbound.dynamo as cd
            cd.config.pause_openmp = False if variant == "clbound_nopause" else "auto"
            cd._views["early"] = variant != "clbound_late"  # internal: only for this comparison
            self.run_model = torch.compile(self.model, backend="clbound")
        elif variant == "inductor":
            self.run_model = torch.compile(self.model, backend="inductor", dynamic=True)
        elif variant == "aot_eager":  # PyTorch's front end alone: Dynamo and AOTAutograd, eager kernels
            self.run_model = torch.compile(self.model, backend="aot_eager")
        elif variant == "torch_share":  # the loop's eager part alone
            self.run_model = PreparedOutputs(torch, self.model)
        self.criterion = torch.nn.BCELoss()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=LR[model])
        self.model.train()

    def __call__(self, x: Any, y: Any) -> float:
        torch = self.torch
        torch._dynamo.mark_dynamic(x, 0, min=2, max=BOUND[self.model_name])
        self.optimizer.zero_grad()
        pred = self.run_model(x)
        loss = self.criterion(pred.squeeze() if self.model_name == "xla" else pred.squeeze(1), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()


class GraphStep:
    """The same model and SGD in clbound's graph API (dynamic policy: one plan);
    made on the first call, so the first step includes building the graph."""

    def __init__(self, torch: Any, model: str) -> None:
        torch.manual_seed(0)
        m = new_model(torch, model)
        self.params = [p.detach().numpy().copy() for p in m.parameters()]  # w1, b1, w2, b2, ...
        self.model = model
        self.g = None

    def build(self) -> None:
        import numpy as np
        import clbound
        from clbound.graph import Graph

        self.ctx = clbound.Context()
        g = Graph(self.ctx, policy="dynamic", name=f"{self.model}-bench")
        feat = self.params[0].shape[1]
        bound = BOUND[self.model]
        self.x = g.input("x", np.float32, (bound, feat), dynamic=(True, False))
        self.y = g.input("y", np.float32, (bound,), dynamic=(True,))
        h = self.x
        layers = len(self.params) // 2
        for k in range(layers):
            w = g.param(f"w{k + 1}", self.params[2 * k])
            b = g.param(f"b{k + 1}", self.params[2 * k + 1])
            h = g.linear(h, w, b)
            h = g.unary("relu" if k + 1 < layers else "sigmoid", h)
        self.loss = g.loss("bce", h, self.y)  # [n, 1] against [n], as examples/python/train.py
        g.train(self.loss, lr=LR[self.model])
        self.g = g

    def __call__(self, x: Any, y: Any) -> float:
        if self.g is None:
            self.build()
        self.g.feed(self.x, x.numpy(), borrow=True)  # no copy: the batch outlives value()'s sync
        self.g.feed(self.y, y.numpy(), borrow=True)
        self.g.run()
        return float(self.g.value(self.loss))

    def stats(self) -> Dict[str, Any]:
        s = self.g.stats()
        c = self.ctx.counters()
        return {"plans": s["plans_compiled"], "graph_host_syncs": s["host_syncs"],
                "program_builds": c["program_builds"], "host_syncs": c["host_syncs"]}


def counts_now(variant: str, step: Any) -> Dict[str, int]:
    """The clbound Context's launches, host syncs and bytes each way so far."""
    if variant == "graph":
        m = step.ctx.metrics()
    else:
        import clbound.dynamo as cd
        m = cd.context().metrics()
    return {k: m[k] for k in ("kernel_launches", "host_syncs", "bytes_to_device", "bytes_to_host")}


def worker(variant: str, model: str, steps: int, warmup: int, threads: Optional[int]) -> Dict[str, Any]:
    import torch
    import torch._dynamo
    from torch._dynamo.utils import counters

    if threads:
        torch.set_num_threads(threads)  # PyTorch's own threads only (OpenBLAS in clbound keeps its rule)

    batches = make_batches(torch, model, steps)
    registered = False
    if variant in BACKENDS:
        registered = ensure_backend_registered(torch)
    step = GraphStep(torch, model) if variant == "graph" else TorchStep(torch, variant, model)
    out: Dict[str, Any] = {"variant": variant, "model": model, "steps": steps,
                           "sizes": [int(x.shape[0]) for x, _ in batches]}
    losses, times = [], []
    snap: Dict[str, Any] = {}
    try:
        for i, (x, y) in enumerate(batches):
            if i == warmup and variant in BACKENDS + ("graph",):
                snap = counts_now(variant, step)
            t0 = time.perf_counter()
            losses.append(step(x, y))
            times.append(time.perf_counter() - t0)
    except Exception as e:  # e.g. inductor without a working C++ compiler
        out["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:400]
        return out
    warm = times[warmup:] if len(times) > warmup else times[-1:]
    out.update(first_s=times[0], total_s=sum(times), warm_ms=1e3 * statistics.median(warm), losses=losses,
               torch=torch.__version__, torch_threads=torch.get_num_threads())
    if snap:
        end, n = counts_now(variant, step), len(batches) - warmup
        out.update({f"{k}_per_step": (end[k] - snap[k]) / n for k in snap})
    if variant in BACKENDS + ("inductor", "aot_eager"):
        out["dynamo_frames"] = int(counters["stats"]["unique_graphs"])
    if variant in BACKENDS:
        import clbound.dynamo as cd
        s = cd.stats()
        out.update(graphs_lowered=s["graphs_lowered"], graph_breaks=s["graph_breaks"],
                   graph_break_ops=s["graph_break_ops"], host_syncs=s.get("host_syncs"),
                   program_builds=s.get("program_builds"), backend_registered_here=registered,
                   openmp_pauses=s["openmp_pauses"])
    if variant == "graph":
        out.update(step.stats())
    if variant in BACKENDS:
        out["device"] = cd.context().metrics()["device"]
    if variant == "graph":
        out["device"] = step.ctx.metrics()["device"]
    return out


def profile(model: str, warmup: int, steps: int, top: int = 10) -> None:
    """cProfile of `steps` warm steps of the clbound variant (after `warmup`):
    the top entries by own time and by cumulative time, per step. A ctypes call
    into libclbound counts as own time of the Python function making it."""
    import cProfile
    import pstats
    import torch
    import torch._dynamo  # noqa: F401

    ensure_backend_registered(torch)
    # the profiled steps get batches of their own (the same sizes as the timed
    # ones): a batch object seen before would be found on the device, not uploaded
    batches = make_batches(torch, model, warmup + steps)
    fresh = [(x.clone(), y.clone()) for x, y in batches[warmup:]]
    step = TorchStep(torch, "clbound", model)
    for x, y in batches[:warmup]:
        step(x, y)
    t0 = time.perf_counter()
    for x, y in batches[warmup:]:
        step(x, y)
    plain = (time.perf_counter() - t0) / steps
    import clbound.dynamo as cd
    before = dict(cd.stats(), **cd.context().metrics())
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for x, y in fresh:
        step(x, y)
    prof.disable()
    wall = (time.perf_counter() - t0) / steps
    print(f"torch-compile.py --profile {model}: torch.compile(backend=\"clbound\"), {steps} warm step(s) after "
          f"{warmup}: {1e3 * plain:.3f} ms a step, {1e3 * wall:.3f} ms under cProfile (times below are per step)")
    after = dict(cd.stats(), **cd.context().metrics())
    print("per step: " + ", ".join(f"{k} {(after[k] - before[k]) / steps:g}" for k in (
        "calls", "uploads", "uploads_skipped", "host_syncs", "kernel_launches", "bytes_to_device", "bytes_to_host")))
    st = pstats.Stats(prof).stats  # (file, line, fn) -> (primitive calls, calls, own, cumulative, callers)

    def where(k: tuple) -> str:
        f, line, fn = k
        if f == "~":
            return fn
        parts = f.split(os.sep)
        short = os.sep.join(parts[-2:]) if parts[-1] in ("__init__.py", "_tensor.py") else parts[-1]
        return f"{short}:{line}({fn})"
    groups: Dict[str, float] = {}
    for k, v in st.items():
        f = k[0].replace(os.sep, "/")
        g = ("clbound.dynamo (the backend)" if f.endswith("clbound/dynamo.py") else
             "clbound binding (ctypes calls and their waits included)" if "/clbound/" in f else
             "torch (Python and C, eager loss and SGD included)" if "/torch/" in f or k[0] == "~" else
             "this benchmark" if f.endswith("torch-compile.py") else "other (numpy, sympy, stdlib)")
        groups[g] = groups.get(g, 0.0) + v[2]
    print("own time by package, ms/step: " + "; ".join(f"{g} {1e3 * t / steps:.3f}"
                                                       for g, t in sorted(groups.items(), key=lambda kv: -kv[1])))
    for col, key in ((2, "own time"), (3, "cumulative time")):
        print(f"\n-- top {top} by {key} --")
        print(f"{'ms/step':>9} {'own ms':>8} {'cum ms':>8} {'calls':>7}  function")
        for k, v in sorted(st.items(), key=lambda kv: -kv[1][col])[:top]:
            print(f"{1e3 * v[col] / steps:9.3f} {1e3 * v[2] / steps:8.3f} {1e3 * v[3] / steps:8.3f} "
                  f"{v[1] / steps:7.1f}  {where(k)}")


def host_cpu(model: str, warmup: int, steps: int, spins: tuple = (0, 100, 200)) -> None:
    """The calling thread's CPU time (time.thread_time) per warm step of the
    clbound variant, by phase of each lowered graph's call; then the warm step
    (median) with the thread kept busy for each of `spins` us before each
    call's closing sync, the values taking turns step by step."""
    import torch
    import torch._dynamo  # noqa: F401
    import clbound.dynamo as cd

    ensure_backend_registered(torch)
    tt = time.thread_time
    acc: Dict[str, float] = {}
    state: Dict[str, Any] = {"on": False, "spin": 0, "t": 0.0, "mark": None}

    def add(k: str, dt: float) -> None:
        if state["on"]:
            acc[k] = acc.get(k, 0.0) + dt
    L = cd._Lowered
    orig = (L._run, L._upload, L._read)

    def run(self: Any, args: Any) -> Any:
        state["t"], state["mark"] = tt(), None
        try:
            return orig[0](self, args)
        finally:
            if state["mark"] is not None:
                add(f"{self.name}: after the read", tt() - state["mark"])

    def upload(self: Any, i: int, x: Any) -> Any:
        t = tt()
        try:
            return orig[1](self, i, x)
        finally:
            add(f"{self.name}: inputs (uploads, parameters found)", tt() - t)

    def read(self: Any, ts: Any, keep: Any) -> Any:
        t = tt()
        add(f"{self.name}: everything before the read", t - state["t"])
        if state["spin"]:
            end = time.perf_counter() + state["spin"] * 1e-6
            while time.perf_counter() < end:
                pass
        try:
            return orig[2](self, ts, keep)
        finally:
            state["mark"] = tt()
            add(f"{self.name}: the read (its host sync, outputs to PyTorch)", state["mark"] - t)
    L._run, L._upload, L._read = run, upload, read
    try:
        n = len(spins)
        batches = make_batches(torch, model, warmup + steps * (n + 1))
        step = TorchStep(torch, "clbound", model)
        for x, y in batches[:warmup]:
            step(x, y)
        state["on"] = True
        for x, y in batches[warmup:warmup + steps]:
            step(x, y)
        state["on"] = False
        print(f"torch-compile.py --host-cpu {model}: torch.compile(backend=\"clbound\"), the calling thread's CPU "
              f"time per warm step, {steps} steps after {warmup} (us/step):")
        for k in sorted(acc, key=lambda k: (not k.startswith("forward"), k)):
            print(f"  {1e6 * acc[k] / steps:7.1f}  {k}")
        total = sum(v for k, v in acc.items() if "inputs" not in k)
        print(f"  {1e6 * total / steps:7.1f}  in all (the inputs are part of \"everything before the read\")")
        g = GraphStep(torch, model)
        for i, (x, y) in enumerate(batches[:warmup + steps]):
            if i == warmup:
                c0 = tt()
            g(x, y)
        print(f"  {1e6 * (tt() - c0) / steps:7.1f}  the graph API's whole step, for comparison (feeds, run, the loss's read)")
        times: Dict[int, List[float]] = {s: [] for s in spins}
        for i, (x, y) in enumerate(batches[warmup + steps:]):
            state["spin"] = spins[i % n]
            t0 = time.perf_counter()
            step(x, y)
            times[state["spin"]].append(time.perf_counter() - t0)
        base = statistics.median(times[spins[0]])
        print(f"warm step with the calling thread busy before each call's sync ({steps} steps each, interleaved):")
        for sp in spins:
            m = statistics.median(times[sp])
            print(f"  busy {sp:4d} us a call ({2 * sp:4d} us a step): {1e3 * m:.3f} ms, "
                  f"{1e3 * (m - base):+.3f} ms against {spins[0]} us")
    finally:
        L._run, L._upload, L._read = orig


# ---- the driver: every variant in a fresh process, interleaved rounds ----

def union_ns(spans: List[Any]) -> int:
    """The length of the union of (start, end) spans, in their unit."""
    total, cur = 0, None
    for a, b in sorted(spans):
        if cur is None or a > cur[1]:
            if cur is not None:
                total += cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return total + (cur[1] - cur[0] if cur is not None else 0)


def timed_aot_eager(torch: Any, model: str, clock: Callable[[], int], on_call: Callable[[int, int], None],
                    after: Optional[Callable[[], Any]] = None) -> TorchStep:
    """The training loop under PyTorch's own aot_eager, each call of its
    compiled forward and backward reported as on_call(start, end) on clock's
    time; after(), when given, runs at the end of each call, inside it."""
    import functools
    from torch._dynamo.backends.debugging import aot_eager, boxed_nop

    def timed_nop(gm: Any, ex: Any) -> Any:
        run = boxed_nop(gm, ex)

        def timed(args: Any) -> Any:
            t0 = clock()
            try:
                return run(args)
            finally:
                if after is not None:
                    after()
                on_call(t0, clock())
        timed._boxed_call = True  # type: ignore[attr-defined]
        return timed
    step = TorchStep(torch, "eager", model)
    step.run_model = torch.compile(step.model, backend=functools.partial(aot_eager, fw_compiler=timed_nop,
                                                                         bw_compiler=timed_nop))
    return step


def worker_rounds(mode: str, model: str, kinds: Sequence[str], args: argparse.Namespace, extra: Sequence[str] = (),
                  env: Optional[Dict[str, str]] = None) -> Optional[Dict[str, List[Dict[str, Any]]]]:
    """--rounds rounds of one process per kind (`--<mode>-worker KIND`), the
    kinds' order turning each round; each process's last stdout line as JSON,
    by kind; None (after a message) when one fails."""
    rows: Dict[str, List[Dict[str, Any]]] = {k: [] for k in kinds}
    order = list(kinds)
    for rd in range(args.rounds):
        for k in order[rd % len(order):] + order[:rd % len(order)]:
            cmd = [sys.executable, os.path.abspath(__file__), f"--{mode}-worker", k, "--model", model,
                   "--warmup", str(args.warmup), "--profile-steps", str(args.profile_steps), *extra]
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
            if p.returncode != 0:
                print(f"torch-compile.py: {mode} worker {k} failed (exit {p.returncode}):\n{p.stderr[-2000:]}",
                      file=sys.stderr)
                return None
            rows[k].append(json.loads(p.stdout.strip().splitlines()[-1]))
    return rows


def idle_worker(variant: str, model: str, warmup: int, steps: int, lib: str) -> Dict[str, Any]:
    """One process of --device-idle: `steps` warm steps of clbound (or
    clbound_late), graph or aot_eager with the device timeline recording (lib is preloaded already:
    LD_PRELOAD). For clbound and aot_eager the calls of the compiled forward and
    backward are timed too; aot_eager runs no OpenCL command."""
    import ctypes
    import torch
    import torch._dynamo  # noqa: F401

    tl = ctypes.CDLL(lib)
    tl.clt_now.restype = ctypes.c_uint64
    tl.clt_record.argtypes, tl.clt_record.restype = [ctypes.c_int], ctypes.c_size_t
    tl.clt_dump.argtypes, tl.clt_dump.restype = [ctypes.c_char_p], ctypes.c_long
    if tl.clt_record(0) != 0:  # nothing may be kept before this process turns recording on
        raise RuntimeError(f"{lib} kept commands before recording was turned on")
    calls: List[Any] = []  # (enter, exit) of the backend's calls of its lowered graphs, clt_now's clock
    if variant in ("clbound", "clbound_late"):
        ensure_backend_registered(torch)
        import clbound.dynamo as cd
        orig = cd._Lowered.__call__

        def call(self: Any, args: Any) -> Any:
            t0 = tl.clt_now()
            try:
                return orig(self, args)
            finally:
                calls.append((t0, tl.clt_now()))
        cd._Lowered.__call__ = call
        step: Any = TorchStep(torch, variant, model)
    elif variant == "aot_eager":  # PyTorch's own aot_eager, its compiled graphs' calls timed
        step = timed_aot_eager(torch, model, tl.clt_now, lambda a, b: calls.append((a, b)))
    else:
        step = GraphStep(torch, model)
    batches = make_batches(torch, model, warmup + steps)
    for x, y in batches[:warmup]:
        step(x, y)
    calls.clear()
    bounds = []
    tl.clt_record(1)
    for x, y in batches[warmup:]:
        t0 = tl.clt_now()
        step(x, y)
        bounds.append((t0, tl.clt_now()))
    tl.clt_record(0)
    with tempfile.TemporaryDirectory(prefix="clbound-timeline-") as d:
        path = os.path.join(d, "timeline.txt")
        if tl.clt_dump(path.encode()) < 0:
            raise RuntimeError(f"the timeline could not be written to {path}")
        cmds = []
        for line in open(path):
            if not line.startswith("#"):
                k, a, b = line.split()
                cmds.append((k, int(a), int(b)))
    per: Dict[str, List[float]] = {"step": [], "busy": [], "idle": [], "idle_in_calls": [], "idle_between": [],
                                   "fw_head": [], "fw_gaps": [], "fw_tail": [], "bw_head": [], "bw_gaps": [],
                                   "bw_tail": []}
    kinds: Dict[str, List[int]] = {}
    for t0, t1 in bounds:
        spans = [(max(a, t0), min(b, t1)) for _, a, b in cmds if b > t0 and a < t1]
        busy = union_ns(spans)
        mine = [(max(a, t0), min(b, t1)) for a, b in calls if b > t0 and a < t1]
        # idle inside the calls: each call's length less the device's busy time within it
        in_calls = sum((b - a) - union_ns([(max(x, a), min(y, b)) for x, y in spans if y > a and x < b])
                       for a, b in mine)
        per["step"].append(t1 - t0)
        per["busy"].append(busy)
        per["idle"].append(t1 - t0 - busy)
        per["idle_in_calls"].append(in_calls if variant != "graph" else t1 - t0 - busy)
        per["idle_between"].append(t1 - t0 - busy - per["idle_in_calls"][-1])
        if variant in ("clbound", "clbound_late") and len(mine) == 2:
            # each call's idle time in three parts: from its entry to its first
            # command's start (head), between its commands (gaps), from its last
            # command's end to its return (tail); the forward's call first
            for (a, b), who in zip(sorted(mine), ("fw", "bw")):
                inside = [(max(x, a), min(y, b)) for x, y in spans if y > a and x < b]
                if not inside:
                    continue
                head = min(x for x, _ in inside) - a
                tail = b - max(y for _, y in inside)
                per[f"{who}_head"].append(head)
                per[f"{who}_tail"].append(tail)
                per[f"{who}_gaps"].append((b - a) - union_ns(inside) - head - tail)
        for k in {k for k, _, _ in cmds}:
            kinds.setdefault(k, []).append(sum(1 for kk, a, _ in cmds if kk == k and t0 <= a < t1))
    out = {k: statistics.median(v) / 1e6 for k, v in per.items() if v}
    out["commands"] = {k: statistics.mean(v) for k, v in sorted(kinds.items())}
    out["steps"] = steps
    # what a timeline that works shows: commands every step, busy within the step
    # (aot_eager: no command, and calls in every step)
    opencl = variant != "aot_eager"
    out["problems"] = [p for p, bad in (("no command recorded", opencl and not cmds),
                                        ("a step with no command", opencl and any(sum(v) == 0 for v in zip(*kinds.values()))),
                                        ("an OpenCL command recorded", not opencl and bool(cmds)),
                                        ("device busy longer than the step", any(b > s for b, s in zip(per["busy"], per["step"]))),
                                        ("a call's idle time split into a negative part",
                                         any(v < 0 for k in per if k[:3] in ("fw_", "bw_") for v in per[k])),
                                        ("no call of the compiled graphs recorded", variant != "graph" and not calls),
                                        ("a step with no call of the compiled graphs", variant != "graph" and any(
                                            not any(t0 <= a < t1 for a, _ in calls) for t0, t1 in bounds)))
                       if bad]
    return out


def device_idle(model: str, args: argparse.Namespace) -> int:
    """--device-idle: the clbound backend's and the graph API's warm steps split
    into the device's busy and idle time (idle_worker), and aot_eager's time
    between its compiled calls (PyTorch's part of the loop with no clbound in
    the process), --rounds processes each, the variants' order turning."""
    lib = args.timeline_lib or os.path.join(os.path.dirname(os.environ.get("CLBOUND_LIBRARY", "")) or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), os.pardir, "build", "lib"), "libclbound-timeline.so")
    if not os.path.exists(lib):
        print(f"torch-compile.py --device-idle: {lib} is missing: `make build` makes it (bench/timeline), or give "
              "--timeline-lib PATH", file=sys.stderr)
        return 2
    lib = os.path.abspath(lib)
    env = dict(os.environ, LD_PRELOAD=":".join(p for p in (lib, os.environ.get("LD_PRELOAD")) if p))
    got = worker_rounds("idle", model, ("clbound", "clbound_late", "graph", "aot_eager"), args, ("--timeline-lib", lib),
                        env)
    if got is None:
        return 1
    rows = got
    for v, rs in rows.items():
        for r in rs:
            if r["problems"]:
                print(f"torch-compile.py --device-idle: {v}: the timeline is not usable: {'; '.join(r['problems'])}",
                      file=sys.stderr)
                return 1
    print(f"torch-compile.py --device-idle {model}: warm steps on the device's timeline, {args.profile_steps} steps "
          f"after {args.warmup} per process, {args.rounds} process(es) per variant, medians (ms per step):")
    print("| variant | step | device busy | device idle | idle inside the compiled calls | between the calls "
          "(PyTorch) | commands per step |")
    print("|---|---|---|---|---|---|---|")

    def m(v: str, k: str) -> float:
        return statistics.median(r[k] for r in rows[v])
    for v, label in (("clbound", "backend \"clbound\""), ("clbound_late", "the same, outputs wrapped after the wait"),
                     ("graph", "graph API"), ("aot_eager", "aot_eager (no device: PyTorch's kernels)")):
        rs = rows[v]
        cmds = {k: statistics.median(r["commands"].get(k, 0) for r in rs) for k in sorted({k for r in rs for k in r["commands"]})}
        between = f"{m(v, 'idle_between'):.3f}" if v != "graph" else "-"
        if v == "aot_eager":
            print(f"| {label} | {m(v, 'step'):.3f} | - | - | - | {between} | - |")
            continue
        print(f"| {label} | {m(v, 'step'):.3f} | {m(v, 'busy'):.3f} | {m(v, 'idle'):.3f} | {m(v, 'idle_in_calls'):.3f} | "
              f"{between} | {sum(cmds.values()):g}: {', '.join(f'{k} {c:g}' for k, c in cmds.items())} |")
    g = m("graph", "step")
    print(f"a backend's floor on this loop, (graph API step + the time between the calls) / graph API step: "
          f"{(g + m('clbound', 'idle_between')) / g:.2f}x with the backend's between-call time, "
          f"{(g + m('aot_eager', 'idle_between')) / g:.2f}x with aot_eager's; the backend: {m('clbound', 'step') / g:.2f}x "
          f"({m('clbound_late', 'step') / g:.2f}x with its outputs wrapped after the wait)")
    if all("fw_head" in r for r in rows["clbound"] + rows["clbound_late"]):
        print("the backend's idle time inside its calls (ms per step, medians): entry to the first command's start, "
              "between its commands, the last command's end to the return")
        print("| call | entry to first command | between commands | last command to return |")
        print("|---|---|---|---|")
        for v, what in (("clbound", ""), ("clbound_late", ", outputs wrapped after the wait")):
            for who, label in (("fw", "forward"), ("bw", "backward")):
                print(f"| {label}{what} | {m(v, who + '_head'):.3f} | {m(v, who + '_gaps'):.3f} | "
                      f"{m(v, who + '_tail'):.3f} |")
    return 0


WAKE_EXTRAS = ("nothing", "spin", "sleep", "enqueue", "sync", "sync-blocking")
WAKE_DOC = {"nothing": "nothing",
            "spin": "the calling thread busy for 200 us (it stays on its core)",
            "sleep": "time.sleep(50e-6): the calling thread blocks, as in a host sync",
            "enqueue": "one clbound op enqueued on a [10, 2] tensor, not waited for: the device's threads wake",
            "sync": "a clbound host sync of an idle queue, as CLBOUND_SYNC_SPIN_US says (on a CPU device: it polls)",
            "sync-blocking": "the same with CLBOUND_SYNC_SPIN_US=0: the calling thread blocks"}


def wake_worker(model: str, warmup: int, steps: int, extra: str) -> Dict[str, Any]:
    """One process of --wake-cost: aot_eager's warm steps with `extra` done at
    the end of each call of its compiled forward and backward; the step, the
    time between the calls (PyTorch's own work) and the calling thread's
    voluntary context switches, per step (medians)."""
    import torch

    now = time.perf_counter_ns
    in_calls = [0]
    act: Any = None
    if extra == "spin":
        def act() -> None:
            end = now() + 200_000
            while now() < end:
                pass
    elif extra == "sleep":
        def act() -> None:
            time.sleep(50e-6)
    elif extra in ("enqueue", "sync", "sync-blocking"):
        import numpy as np
        import clbound
        if extra == "sync-blocking":
            os.environ["CLBOUND_SYNC_SPIN_US"] = "0"  # read when the context is made
        ctx = clbound.Context()
        t = ctx.from_numpy(np.ones((10, 2), np.float32))
        ctx.sync()
        act = (lambda: ctx.unary("relu", t)) if extra == "enqueue" else ctx.sync

    def add(a: int, b: int) -> None:
        in_calls[0] += b - a

    def switches() -> int:
        with open("/proc/thread-self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt_switches"))
    step = timed_aot_eager(torch, model, now, add, act)
    batches = make_batches(torch, model, warmup + steps)
    for x, y in batches[:warmup]:
        step(x, y)
    per: Dict[str, List[float]] = {"step": [], "between": []}
    c0 = switches()
    for x, y in batches[warmup:]:
        in_calls[0] = 0
        t0 = now()
        step(x, y)
        dt = now() - t0
        per["step"].append(dt)
        per["between"].append(dt - in_calls[0])
    out: Dict[str, Any] = {k: statistics.median(v) / 1e6 for k, v in per.items()}
    out["sleeps"] = (switches() - c0) / steps
    return out


def wake_cost(model: str, args: argparse.Namespace) -> int:
    """--wake-cost: what a blocking wait or a wake of the device's threads costs
    the host code after it: aot_eager's loop (no clbound in its compiled calls)
    with each of WAKE_EXTRAS at the end of each call, --rounds processes each,
    the order turning; PyTorch's time between the calls against nothing."""
    got = worker_rounds("wake", model, WAKE_EXTRAS, args)
    if got is None:
        return 1
    rows = got

    def m(e: str, k: str) -> float:
        return statistics.median(r[k] for r in rows[e])
    print(f"torch-compile.py --wake-cost {model}: aot_eager, {args.profile_steps} warm steps after {args.warmup} per "
          f"process, {args.rounds} process(es) each, medians; PyTorch's own work between the compiled calls after "
          "each thing done at the end of every call:")
    print("| at the end of each compiled call | step (ms) | between the calls (ms) | between / with nothing | "
          "calling thread's sleeps per step |")
    print("|---|---|---|---|---|")
    base = m("nothing", "between")
    for e in WAKE_EXTRAS:
        r = m(e, "between") / base
        ratio = "1.00x" if e == "nothing" else f"{r:.2f}x slower" if r >= 1 else f"{1 / r:.2f}x faster"
        print(f"| {WAKE_DOC[e]} | {m(e, 'step'):.3f} | {m(e, 'between'):.3f} | {ratio} | {m(e, 'sleeps'):.2f} |")
    if min(r["sleeps"] for r in rows["sleep"]) < 2:  # two sleeps a step, each a voluntary switch
        print("torch-compile.py --wake-cost: the calling thread's sleeps were not counted "
              "(/proc/thread-self/status)", file=sys.stderr)
        return 1
    return 0


def run_worker(variant: str, model: str, args: argparse.Namespace, spin: Optional[int] = None) -> Dict[str, Any]:
    tmp = tempfile.mkdtemp(prefix="clb-tc-bench-")
    env = dict(os.environ)
    if spin is not None:  # how PyTorch's OpenMP workers wait: read when GNU OpenMP loads
        env["GOMP_SPINCOUNT"] = str(spin)
    # the warm steps time optimized kernels from the first step on (the default's
    # tiered builds swap them in seconds later: bench/cold-process.py times those)
    env.setdefault("CLBOUND_COLD_BUILD", "optimized")
    for var in ("CLBOUND_CACHE_DIR", "POCL_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        env[var] = os.path.join(tmp, var.lower())
        os.makedirs(env[var])
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", variant, "--model", model,
           "--steps", str(args.steps), "--warmup", str(args.warmup)]
    if args.torch_threads:
        cmd += ["--torch-threads", str(args.torch_threads)]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"variant": variant, "model": model, "error": f"timed out after {args.timeout} s"}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    wall = time.perf_counter() - t0
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"variant": variant, "model": model, "error": f"exit status {p.returncode}: {tail}"[:400]}
    r = json.loads(lines[-1])
    r["process_s"] = wall
    return r


def med(xs: List[float]) -> Optional[float]:
    return statistics.median(xs) if xs else None


def fmt(v: Optional[float], spec: str) -> str:
    return "-" if v is None else format(v, spec)


def plural(n: float, word: str) -> str:
    return f"{n:g} {word}" + ("" if n == 1 else "es" if word.endswith(("sh", "ch")) else "s")


def words(r: Optional[float], what: str) -> str:
    """A ratio as words: the backend is 2.0x slower than X, or 1.5x faster."""
    if r is None or r <= 0:
        return ""
    return f" (the backend is {r:.2f}x slower)" if r >= 1 else f" (the backend is {1 / r:.2f}x faster)"


def report(results: List[Dict[str, Any]], args: argparse.Namespace, load: tuple) -> Dict[str, Any]:
    summary: Dict[str, Any] = {"bench": "torch-compile", "steps": args.steps, "warmup": args.warmup,
                               "rounds": args.rounds, "load_before": load[0], "load_after": load[1], "models": {}}
    for model in args.models:
        rows = [r for r in results if r["model"] == model]
        rounds = sorted({r["round"] for r in rows})
        eager = {r["round"]: r for r in rows if r["variant"] == "eager" and "error" not in r}
        by: Dict[str, List[Dict[str, Any]]] = {v: [r for r in rows if r["variant"] == v] for v in args.variants}
        print(f"\n{model}: {MODELS_DOC[model]}, {args.steps} steps, warm = median step after the first "
              f"{args.warmup}; medians of {len(rounds)} round(s)")
        print("| variant | runs | first step (s) | all steps (s) | warm step (ms) | max loss diff vs eager | notes |")
        print("|---|---|---|---|---|---|---|")
        msum: Dict[str, Any] = {}
        for v in args.variants:
            ok = [r for r in by[v] if "error" not in r]
            diffs = []
            for r in ok:
                e = eager.get(r["round"])
                if e is not None and v != "torch_share":  # not a training run
                    diffs.append(max(abs(a - b) for a, b in zip(r["losses"], e["losses"])))
            notes = []
            if v in BACKENDS and ok:
                r = ok[-1]
                notes.append(f"{plural(r['dynamo_frames'], 'Dynamo frame')}, "
                             f"{plural(r['graphs_lowered'], 'graph')} lowered, {plural(r['graph_breaks'], 'graph break')}"
                             f", {plural(r['openmp_pauses'], 'OpenMP pause')}")
            if v in ("inductor", "aot_eager") and ok:
                notes.append(plural(ok[-1]["dynamo_frames"], "Dynamo frame"))
            if v == "torch_share" and ok:
                notes.append("the loop's eager part alone (no model, no Dynamo): losses not compared")
            if v == "graph" and ok:
                notes.append(f"{plural(ok[-1]['plans'], 'plan')}, {plural(ok[-1]['program_builds'], 'program build')}")
            if v in BACKENDS + ("graph",) and ok and "kernel_launches_per_step" in ok[-1]:
                r = ok[-1]
                notes.append(f"a warm step: {plural(r['kernel_launches_per_step'], 'launch')}, "
                             f"{plural(r['host_syncs_per_step'], 'host sync')}, "
                             f"{r['bytes_to_device_per_step'] / 1e3:.0f} kB in, "
                             f"{r['bytes_to_host_per_step'] / 1e3:.0f} kB out")
            for r in by[v]:
                if "error" in r:
                    notes.append(f"round {r['round']} failed: {r['error']}")
            maxdiff = max(diffs) if diffs else None
            flag = "" if maxdiff is None or maxdiff <= LOSS_TOL else " (over 1e-5)"
            first, total, warm = (med([r[k] for r in ok]) for k in ("first_s", "total_s", "warm_ms"))
            print(f"| {v} | {len(ok)} | {fmt(first, '.3f')} | {fmt(total, '.3f')} | {fmt(warm, '.3f')} | "
                  f"{fmt(maxdiff, '.1e')}{flag} | {'; '.join(notes)} |")
            msum[v] = {"runs": len(ok), "first_s": first, "total_s": total, "warm_ms": warm,
                       "max_loss_diff": maxdiff, "warm_ms_rounds": [r["warm_ms"] for r in ok],
                       "errors": [r["error"] for r in by[v] if "error" in r]}
            if ok and v in BACKENDS:
                msum[v].update({k: ok[-1][k] for k in ("dynamo_frames", "graphs_lowered", "graph_breaks",
                                                       "graph_break_ops")})
        ratios = {}
        for back, label in (("clbound", "clbound backend"), ("clbound_nopause", "clbound backend, no OpenMP pause"),
                            ("clbound_late", "clbound backend, outputs wrapped after the wait")):
            for other, what in (("graph", "native graph API"), ("eager", "eager PyTorch"), ("inductor", "inductor"),
                                ("aot_eager", "aot_eager")):
                if back not in args.variants or other not in args.variants:
                    continue
                per = []
                for rd in rounds:
                    a = [r for r in by[back] if r["round"] == rd and "error" not in r]
                    b = [r for r in by[other] if r["round"] == rd and "error" not in r]
                    if a and b:
                        per.append(a[0]["warm_ms"] / b[0]["warm_ms"])
                ratios[other if back == "clbound" else f"{back}/{other}"] = {"median": med(per), "rounds": per}
                target = " (issue 33's target: <= 1.2x)" if other == "graph" else ""
                print(f"warm step, {label} / {what}: {fmt(med(per), '.2f')}x{words(med(per), what)}"
                      f" (rounds: {', '.join(format(p, '.2f') for p in per) or '-'}){target}")
        # the front end's own floor: PyTorch's Dynamo and AOTAutograd with eager
        # kernels, against the graph API (no backend behind them can beat it)
        if "aot_eager" in args.variants and "graph" in args.variants:
            per = []
            for rd in rounds:
                a = [r for r in by["aot_eager"] if r["round"] == rd and "error" not in r]
                b = [r for r in by["graph"] if r["round"] == rd and "error" not in r]
                if a and b:
                    per.append(a[0]["warm_ms"] / b[0]["warm_ms"])
            ratios["aot_eager_over_graph"] = {"median": med(per), "rounds": per}
            print(f"warm step, aot_eager (PyTorch's front end, eager kernels) / native graph API: "
                  f"{fmt(med(per), '.2f')}x (rounds: {', '.join(format(p, '.2f') for p in per) or '-'})")
        # a backend's floor on this loop: the graph API's step for the model's
        # work, plus what PyTorch runs around the compiled module (torch_share),
        # plus Dynamo's and AOTAutograd's own overhead (aot_eager - eager)
        if all(v in args.variants for v in ("torch_share", "graph", "aot_eager", "eager")):
            per = []
            for rd in rounds:
                w = {v: [r for r in by[v] if r["round"] == rd and "error" not in r]
                     for v in ("torch_share", "graph", "aot_eager", "eager")}
                if all(w.values()):
                    g = w["graph"][0]["warm_ms"]
                    front = max(0.0, w["aot_eager"][0]["warm_ms"] - w["eager"][0]["warm_ms"])
                    per.append((g + w["torch_share"][0]["warm_ms"] + front) / g)
            ratios["floor_over_graph"] = {"median": med(per), "rounds": per}
            print(f"a backend's floor on this loop (graph API step + torch_share + aot_eager - eager) / native "
                  f"graph API: {fmt(med(per), '.2f')}x (rounds: {', '.join(format(p, '.2f') for p in per) or '-'})")
        msum["ratios"] = ratios
        summary["models"][model] = msum
    return summary


MODELS_DOC = {"xla": "PT/XLA Feedforward(2, 10), batches [<=10, 2] from nonzero",
              "wide": "WideMLP 256-512-256-1, batches [<=4096, 256] by mask"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=positive, default=100)
    ap.add_argument("--rounds", type=positive, default=3)
    ap.add_argument("--inductor-rounds", type=positive, default=None,
                    help="rounds that run inductor (the first ones; its cold compile takes 25-40 s a model on 2 "
                    "cores); default: every round")
    ap.add_argument("--warmup", type=positive, default=10)
    ap.add_argument("--models", type=names(MODELS), default=list(MODELS))
    ap.add_argument("--variants", type=names(VARIANTS), default=list(DEFAULT_VARIANTS))
    ap.add_argument("--torch-threads", type=positive, default=None,
                    help="torch.set_num_threads in every variant (default: PyTorch's own choice)")
    ap.add_argument("--gomp-spincount", type=positive, default=None,
                    help="also run every variant with GOMP_SPINCOUNT=N, interleaved in the same rounds")
    ap.add_argument("--timeout", type=positive, default=300, help="seconds per variant process")
    ap.add_argument("--json", action="store_true", help="also print the summary as one JSON object")
    ap.add_argument("--profile", choices=MODELS, help="profile warm steps of the clbound variant instead")
    ap.add_argument("--profile-steps", type=positive, default=20)
    ap.add_argument("--host-cpu", choices=MODELS, help="the calling thread's CPU time by phase instead")
    ap.add_argument("--device-idle", choices=MODELS,
                    help="the warm step split into the device's busy and idle time instead (backend, graph API, "
                    "aot_eager)")
    ap.add_argument("--wake-cost", choices=MODELS,
                    help="what a blocking wait or a wake of the device's threads costs PyTorch's work after it "
                    "instead (aot_eager)")
    ap.add_argument("--timeline-lib", default=None,
                    help="libclbound-timeline.so for --device-idle (default: beside CLBOUND_LIBRARY)")
    ap.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    ap.add_argument("--idle-worker", choices=("clbound", "clbound_late", "graph", "aot_eager"), help=argparse.SUPPRESS)
    ap.add_argument("--wake-worker", choices=WAKE_EXTRAS, help=argparse.SUPPRESS)
    ap.add_argument("--model", choices=MODELS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.warmup >= args.steps and not (args.profile or args.host_cpu or args.device_idle or args.idle_worker
                                          or args.wake_cost or args.wake_worker):
        args.warmup = args.steps - 1 if args.steps > 1 else 0
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch-compile.py: skipping: PyTorch is not installed (pip install torch); nothing was measured")
        return SKIPPED

    if args.worker:
        print(json.dumps(worker(args.worker, args.model, args.steps, args.warmup, args.torch_threads)))
        return 0
    if args.profile:
        profile(args.profile, args.warmup, args.profile_steps)
        return 0
    if args.host_cpu:
        host_cpu(args.host_cpu, args.warmup, args.profile_steps)
        return 0
    if args.idle_worker:
        print(json.dumps(idle_worker(args.idle_worker, args.model, args.warmup, args.profile_steps,
                                     args.timeline_lib)))
        return 0
    if args.device_idle:
        return device_idle(args.device_idle, args)
    if args.wake_worker:
        print(json.dumps(wake_worker(args.model, args.warmup, args.profile_steps, args.wake_worker)))
        return 0
    if args.wake_cost:
        return wake_cost(args.wake_cost, args)

    if args.gomp_spincount is not None and "GOMP_SPINCOUNT" in os.environ:
        print("torch-compile.py: --gomp-spincount compares with the environment's own OpenMP waiting, but "
              f"GOMP_SPINCOUNT={os.environ['GOMP_SPINCOUNT']} is set already; unset it", file=sys.stderr)
        return 2
    settings: List[Optional[int]] = [None] if args.gomp_spincount is None else [None, args.gomp_spincount]
    ind_rounds = args.rounds if args.inductor_rounds is None else min(args.inductor_rounds, args.rounds)
    if "eager" not in args.variants:
        args.variants.insert(0, "eager")  # the loss reference
    load0 = os.getloadavg()
    print(f"torch-compile.py: {args.rounds} round(s) of {','.join(args.models)} x {','.join(args.variants)} "
          f"(inductor in {ind_rounds}), {args.steps} steps each, every variant in a fresh process with fresh "
          f"caches; load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, {os.cpu_count()} CPUs",
          flush=True)
    t_start = time.perf_counter()
    results: List[Dict[str, Any]] = []
    for rd in range(args.rounds):
        for spin in settings[rd % len(settings):] + settings[:rd % len(settings)]:
            for model in args.models:
                order = args.variants[rd % len(args.variants):] + args.variants[:rd % len(args.variants)]
                for v in order:
                    if v == "inductor" and rd >= ind_rounds:
                        continue
                    r = run_worker(v, model, args, spin)
                    r["round"], r["spin"] = rd, spin
                    results.append(r)
                    what = r.get("error") or (f"first step {r['first_s']:.2f} s, warm {r['warm_ms']:.3f} ms, "
                                              f"process {r['process_s']:.1f} s")
                    label = "" if spin is None else f" GOMP_SPINCOUNT={spin}"
                    print(f"  round {rd + 1}{label} {model} {v}: {what}", file=sys.stderr, flush=True)
    load1 = os.getloadavg()
    summaries = {}
    for spin in settings:
        if len(settings) > 1:
            print("\n## OpenMP waiting: " + ("the environment's own" if spin is None else f"GOMP_SPINCOUNT={spin}"))
        summaries[spin] = report([r for r in results if r["spin"] == spin], args, (load0, load1))
    summary = summaries[None]
    if len(settings) > 1:
        print("\nbackend / native graph API, both settings from the same rounds:")
        for model in args.models:
            parts = []
            for spin in settings:
                g = summaries[spin]["models"][model].get("ratios", {}).get("graph", {})
                name = "the environment's own waiting" if spin is None else f"GOMP_SPINCOUNT={spin}"
                parts.append(f"{name} {fmt(g.get('median'), '.2f')}x")
            print(f"  {model}: {', '.join(parts)}")
        summary = dict(summary, gomp_spincount={"value": args.gomp_spincount,
                                                "models": summaries[args.gomp_spincount]["models"]})
    dev = next((r.get("device") for r in results if r.get("device")), None)
    tr = next((r for r in results if "torch" in r), {})
    # PyTorch's OpenMP workers spin after each parallel op (docs/benchmarks.md,
    # "Threads"): how they wait is part of the set-up, the same for every variant
    omp = {k: os.environ[k] for k in OMP_WAIT_VARS if k in os.environ}
    print(f"\ntorch {tr.get('torch')} ({tr.get('torch_threads')} threads; OpenMP waiting: "
          f"{', '.join(f'{k}={v}' for k, v in omp.items()) or 'the default'}); clbound device: {dev or 'unknown'} "
          f"(CLBOUND_COLD_BUILD={os.environ.get('CLBOUND_COLD_BUILD', 'optimized')}); "
          f"load average {load0[0]:.2f} before, {load1[0]:.2f} after; {time.perf_counter() - t_start:.0f} s in all")
    summary.update(device=dev, torch=tr.get("torch"), torch_threads=tr.get("torch_threads"), omp_wait=omp)
    if args.json:
        print(json.dumps(summary))
    # exit status 1: a loss off eager's by more than 1e-5, or a variant that failed
    # (inductor excepted: it needs a working C++ compiler)
    bad = [f"{m} {v}" for one in summaries.values() for m, s in one["models"].items() for v, x in s.items()
           if v != "ratios" and ((x.get("max_loss_diff") is not None and x["max_loss_diff"] > LOSS_TOL)
                                 or (x["errors"] and v != "inductor"))]
    if bad:
        print(f"torch-compile.py: failed: {', '.join(bad)} (losses off eager's by more than {LOSS_TOL:g}, "
              "or the variant failed)", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
