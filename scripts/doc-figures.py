#!/usr/bin/env python3
"""doc-figures.py BUILD_DIR [--check]: the deterministic figures the docs quote.

Bytes, counts of programs, kernels, launches, host syncs and plans do not vary
from run to run on a device; they change when the code does. This script runs
the commands that produce them (`clbound demo --json`, see COMMANDS), writes
them to docs/figures.md (a table: figure, value, command), and puts each value
where README.md or docs/*.md quote it, between markers:

    <!--fig:wide-mlp.dynamic.peak_device_bytes@mb-->43.6 MB<!--/fig-->
    <!--figs:memory-plan-->  (a whole generated table)  <!--/figs-->

The key is workload.policy.field of the plan run, `pool:` before it for the
run without the memory plan (CLBOUND_MEMORY_PLAN=0), `short:` for the default
short demo; after `@`, the format: `mb` (MB, 10^6 bytes, one decimal), `n`
(digits grouped by commas, the default), `plain` (digits).

Without --check it rewrites the files (`make doc-figures`: run it after a change
that moves a figure, and commit the result). With --check it changes nothing
and exits 1 listing every figure whose quoted value differs (ctest
docs/figures). The figures hold for the device they were made on (the
conditions line of docs/figures.md: platform, device type, compute units,
whether host BLAS runs the matmuls); on another, --check exits 77 (skipped).
Timings are not here: they stay quoted with their date, machine and command.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
FIGURES_MD = os.path.join(ROOT, "docs", "figures.md")
ITERATIONS = 6  # every policy, the whole batch-size schedule (--full), 6 steps
DEMO = ["demo", "--cache", "user", "--no-check", "--quiet", "--json"]
COMMANDS = {
    "": ("clbound demo --full --iterations %d --cache user --no-check --json" % ITERATIONS,
         DEMO + ["--full", "--iterations", str(ITERATIONS)], {}),
    "pool:": ("CLBOUND_MEMORY_PLAN=0 clbound demo --full --iterations %d --cache user --no-check --json" % ITERATIONS,
              DEMO + ["--full", "--iterations", str(ITERATIONS)], {"CLBOUND_MEMORY_PLAN": "0"}),
    "short:": ("clbound demo --iterations 3 --cache user --no-check --json (the default demo's 3 batch sizes: "
               "its programs)", DEMO + ["--iterations", "3"], {}),
}
# the fields kept of each command's rows
FIELDS = {
    "": ["plans_compiled", "programs_built", "kernels_compiled", "launches_per_step", "host_syncs",
         "peak_device_bytes", "arena_bytes", "live_lower_bound_bytes", "pool_peak_bytes", "arena_max_bytes",
         "arena_allocations"],
    "pool:": ["peak_device_bytes", "host_syncs"],
    "short:": ["programs_built", "kernels_compiled", "launches_per_step"],
}
POLICIES = ["dynamic", "automatic", "bucketed", "static"]


def run(tool, build, args, env_extra):
    env = dict(os.environ)
    env.setdefault("POCL_CACHE_DIR", os.path.join(build, "pocl-cache"))
    env["CLBOUND_CACHE_DIR"] = os.path.join(build, "clbound-cache")  # programs load warm; no figure depends on it
    # built optimized at once: under tiered builds (the default) a long run from an
    # empty cache swaps in the helper's programs when written, which adds kernels
    # to the counts at a time that depends on the helper
    env["CLBOUND_COLD_BUILD"] = "optimized"
    for k in ("CLBOUND_METRICS_FILE", "CLBOUND_MEMORY_PLAN", "CLBOUND_MEM_BASE_ALIGN_BITS", "CLBOUND_GEMM",
              "CLBOUND_RECORD", "CLBOUND_FUSE", "CLBOUND_LOG"):
        env.pop(k, None)
    env.update(env_extra)
    out = subprocess.run([tool] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, check=False)
    if out.returncode != 0:
        sys.exit("doc-figures: clbound %s failed (%d): %s" % (" ".join(args), out.returncode,
                                                               out.stderr.decode(errors="replace")))
    return out.stdout.decode()


def conditions(tool):
    info = subprocess.run([tool, "info"], stdout=subprocess.PIPE, check=True).stdout.decode()
    platform = re.search(r"\(platform \d+: (.*)\)", info)
    kind = re.search(r"^\s+type\s+(\S+)", info, re.M)
    cu = re.search(r"^\s+compute units\s+(\d+)", info, re.M)
    cache = os.path.join(os.path.dirname(os.path.dirname(tool)), "CMakeCache.txt")
    blas = "unknown"
    if os.path.exists(cache):
        with open(cache) as f:
            blas = "host BLAS" if re.search(r"^OPENBLAS_FOUND:INTERNAL=1", f.read(), re.M) else "no host BLAS"
    return "%s, %s, %s compute units, %s" % (platform.group(1) if platform else "?", kind.group(1) if kind else "?",
                                             cu.group(1) if cu else "?", blas)


def measure(tool, build):
    figs = {}
    for prefix, (_, args, env) in COMMANDS.items():
        for line in run(tool, build, args, env).splitlines():
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            for f in FIELDS[prefix]:
                figs["%s%s.%s.%s" % (prefix, r["workload"], r["policy"], f)] = int(r[f])
    return figs


def fmt(value, style):
    if style == "mb":
        return "%.1f MB" % (value / 1e6)
    if style == "plain":
        return "%d" % value
    return "{:,}".format(value)


def memory_plan_table(figs):
    rows = ["| workload | policy | plans | arena bytes (sum) | lower bound (sum) | arena / bound | largest plan's arena "
            "| pool model (sum) | peak device bytes | peak, pool path | host syncs (plan / pool) | arena `cl_mem` |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for w in ("xla-mlp", "wide-mlp"):
        for p in POLICIES:
            k = "%s.%s." % (w, p)
            a, lb = figs[k + "arena_bytes"], figs[k + "live_lower_bound_bytes"]
            rows.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %d / %d | %d |" % (
                w, p, figs[k + "plans_compiled"], fmt(a, "n"), fmt(lb, "n"),
                "%.4f" % (a / lb) if lb else "-", fmt(figs[k + "arena_max_bytes"], "n"),
                fmt(figs[k + "pool_peak_bytes"], "n"), fmt(figs[k + "peak_device_bytes"], "n"),
                fmt(figs["pool:" + k + "peak_device_bytes"], "n"), figs[k + "host_syncs"],
                figs["pool:" + k + "host_syncs"], figs[k + "arena_allocations"]))
    return "\n".join(rows)


BLOCKS = {"memory-plan": memory_plan_table}


def figures_md(figs, cond):
    lines = ["# Deterministic figures",
             "",
             "<!-- generated by scripts/doc-figures.py: do not edit; `make doc-figures` rewrites this file and the",
             "figures quoted in README.md and docs/, ctest docs/figures checks them -->",
             "",
             "Bytes and counts that do not vary from run to run on a device, from these commands",
             "(`build/bin/clbound`; `CLBOUND_CACHE_DIR` only makes the programs load faster, no figure depends on it):",
             ""]
    for prefix, (text, _, _) in COMMANDS.items():
        lines.append("- `%s`%s" % (text.split(" (")[0], " (" + text.split(" (", 1)[1] if " (" in text else "")
                     + (": keys `%s...`" % prefix if prefix else ": keys without a prefix"))
    lines += ["", "Conditions: %s." % cond, "",
              "Keys are `workload.policy.field` (fields as in `clbound demo --json`, bench/README.md).", "",
              "| figure | value |", "|---|---|"]
    for k in figs:  # in the order measured: command, workload, policy, field
        lines.append("| `%s` | %d |" % (k, figs[k]))
    return "\n".join(lines) + "\n"


FIG = re.compile(r"<!--fig:([^@>]+?)(?:@(\w+))?-->(.*?)<!--/fig-->", re.S)
FIGS = re.compile(r"(<!--figs:([\w-]+)-->\n)(.*?)(<!--/figs-->)", re.S)


def doc_files():
    files = [os.path.join(ROOT, "README.md")]
    d = os.path.join(ROOT, "docs")
    files += [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".md") and f != "figures.md"]
    return files


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    check = "--check" in sys.argv[2:]
    tool = os.path.join(build, "bin", "clbound")
    cond = conditions(tool)
    if check and os.path.exists(FIGURES_MD):
        with open(FIGURES_MD) as f:
            m = re.search(r"^Conditions: (.*)\.$", f.read(), re.M)
        if m and m.group(1) != cond:
            print("doc-figures: skipped: the figures are for %s; this device is %s" % (m.group(1), cond))
            return 77
    figs = measure(tool, build)
    problems, changed = [], []

    def sub_fig(m, path):
        key, style, old = m.group(1), m.group(2) or "n", m.group(3)
        if key not in figs:
            problems.append("%s: unknown figure %s" % (os.path.relpath(path, ROOT), key))
            return m.group(0)
        new = fmt(figs[key], style)
        if new != old:
            problems.append("%s: %s is quoted as %s, measured %s" % (os.path.relpath(path, ROOT), key, old, new))
        return "<!--fig:%s%s-->%s<!--/fig-->" % (key, "@" + m.group(2) if m.group(2) else "", new)

    def sub_block(m, path):
        name = m.group(2)
        if name not in BLOCKS:
            problems.append("%s: unknown figure block %s" % (os.path.relpath(path, ROOT), name))
            return m.group(0)
        new = BLOCKS[name](figs) + "\n"
        if new != m.group(3):
            problems.append("%s: the %s table differs from the measured one" % (os.path.relpath(path, ROOT), name))
        return m.group(1) + new + m.group(4)

    for path in doc_files():
        with open(path) as f:
            text = f.read()
        new = FIG.sub(lambda m: sub_fig(m, path), text)
        new = FIGS.sub(lambda m: sub_block(m, path), new)
        if new != text:
            changed.append((path, new))
    table = figures_md(figs, cond)
    old_table = open(FIGURES_MD).read() if os.path.exists(FIGURES_MD) else ""
    if table != old_table:
        problems.append("docs/figures.md differs from the measured figures")
        changed.append((FIGURES_MD, table))
    if check:
        for p in problems:
            print("doc-figures: " + p)
        if problems:
            print("doc-figures: %d figure(s) out of date: run `make doc-figures` and commit the result" % len(problems))
            return 1
        print("doc-figures: ok (%d figures, every quoted one as measured)" % len(figs))
        return 0
    for path, text in changed:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        print("doc-figures: wrote %s" % os.path.relpath(path, ROOT))
    if not changed:
        print("doc-figures: every figure as measured (%d)" % len(figs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
