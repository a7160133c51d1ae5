#!/usr/bin/env python3
"""demo-story.py CLBOUND: the default `clbound demo`, as `make demo` runs it.

Checks, on a first run (an empty program cache of its own):
  * it finishes (exit code 0);
  * it never goes quiet: every line is timestamped as it arrives (stdout and
    stderr together, as a log shows them) and no gap, from the start to the
    exit, exceeds 10 s;
  * each workload's loss falls under every policy: the row's mean loss over the
    last cycle of batch sizes is below 0.95 x its mean over the first cycle;
  * the summary ends with its three sentences and where to read more.
The run time is printed, not asserted (the goal of a minute is a benchmark
figure on a quiet machine, docs/benchmarks.md)."""
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

MAX_GAP_S = 10.0
FALL = 0.95  # last cycle's mean loss must be below FALL x the first cycle's


def main():
    tool = sys.argv[1]
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, CLBOUND_CACHE_DIR=cache)
        t0 = time.monotonic()
        proc = subprocess.Popen([tool, "demo"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        lines, lock = [], threading.Lock()

        def pump(stream, name):
            for raw in iter(stream.readline, b""):
                with lock:
                    lines.append((time.monotonic() - t0, name, raw.decode(errors="replace").rstrip("\n")))

        threads = [threading.Thread(target=pump, args=(proc.stdout, "out")),
                   threading.Thread(target=pump, args=(proc.stderr, "err"))]
        for t in threads:
            t.start()
        rc = proc.wait()
        for t in threads:
            t.join()
        t_end = time.monotonic() - t0
    lines.sort(key=lambda l: l[0])
    for t, name, text in lines:
        print("%7.2f %s %s" % (t, name, text))
    failures = []
    if rc != 0:
        failures.append("exit code %d" % rc)
    stamps = [0.0] + [t for t, _, _ in lines] + [t_end]
    gaps = [(b - a, a) for a, b in zip(stamps, stamps[1:])]
    worst = max(gaps)
    print("demo-story: run time %.1f s, %d lines, longest quiet gap %.1f s (at %.1f s)" %
          (t_end, len(lines), worst[0], worst[1]))
    if worst[0] > MAX_GAP_S:
        failures.append("quiet for %.1f s from %.1f s (limit %.0f s)" % (worst[0], worst[1], MAX_GAP_S))
    out = [text for _, name, text in lines if name == "out"]
    rows = 0
    for text in out:
        m = re.match(r"\s+(dynamic|static|automatic|bucketed)\s.*\s(\d+\.\d+) -> (\d+\.\d+)\s", text)
        if not m:
            continue
        rows += 1
        first, last = float(m.group(2)), float(m.group(3))
        print("demo-story: %s: mean loss %.4f -> %.4f" % (m.group(1), first, last))
        if not last < FALL * first:
            failures.append("%s: the loss does not fall: %.4f -> %.4f" % (m.group(1), first, last))
    if rows != 4:
        failures.append("%d table rows with a loss trend, want 4 (2 workloads x dynamic, static)" % rows)
    text = "\n".join(out)
    for want in (r"Program cache: cold for every policy",
                 r"Programs built from source, by policy: dynamic \d+, static \d+\.",
                 r"(Static|Dynamic) took \d+\.\dx as long as (dynamic|static) for the same steps .*, the cache cold for both",
                 r"compile [0-9.]+ s against [0-9.]+ s; steps [0-9.]+ s against [0-9.]+ s",
                 r"Dynamic made 0 host syncs during training",
                 r"Read more: ",
                 r"PyTorch/XLA's dynamic-shape MLP test"):
        if not re.search(want, text):
            failures.append("the output lacks /%s/" % want)
    for f in failures:
        print("demo-story: FAIL: " + f, file=sys.stderr)
    if not failures:
        print("demo-story: ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
