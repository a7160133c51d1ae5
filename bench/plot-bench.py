#!/usr/bin/env python3
"""plot-bench.py: turns the JSON lines of `clbound bench steps` and `clbound
bench ops` into SVG plots with gnuplot, and prints a short text summary of
every JSON file of the run (ops, gemm, steps, whole-step, demo).

usage: plot-bench.py BENCH_DIR OUT_DIR
  Each plot names the device, the date and the commit in its title, from
  BENCH_DIR/meta.txt (`make bench` writes it: device=..., date=..., commit=...).
  Without gnuplot the plots are skipped and the summary still printed.
  BENCH_DIR/steps.jsonl -> OUT_DIR/steps.svg: wide-mlp step time against the
                           actual batch size, per policy
  BENCH_DIR/ops.jsonl   -> OUT_DIR/ops-fraction.svg: fraction of the copy
                           kernel's bandwidth per op and density (the median
                           when several runs are appended)
"""
import json
import os
import shutil
import statistics
import subprocess
import sys


def load(path):
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def gnuplot(script):
    subprocess.run(["gnuplot"], input=script.encode(), check=True)


def load_meta(bench):
    """device, date and commit of the run, as `make bench` recorded them."""
    meta = {"device": "unknown device", "date": "unknown date", "commit": "unknown commit"}
    path = os.path.join(bench, "meta.txt")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                k, _, v = line.strip().partition("=")
                if k in meta and v:
                    meta[k] = v
    return meta


def subtitle(meta):
    # the second line of a title in a double-quoted gnuplot string
    text = "%s, %s, commit %s" % (meta["device"], meta["date"], meta["commit"])
    return text.replace("\\", "\\\\").replace('"', '\\"')


def plot_steps(rows, out_dir, work, meta):
    rows = sorted((r for r in rows if r.get("bench") == "steps"), key=lambda r: r["n"])
    if not rows:
        return None
    dat = os.path.join(work, "steps.dat")
    with open(dat, "w") as f:
        f.write("# n static static_device_gemm dynamic bucketed (ms)\n")
        for r in rows:
            f.write("%d %.4f %.4f %.4f %.4f\n" % (r["n"], r["static_ms"], r["static_device_gemm_ms"],
                                                  r["dynamic_ms"], r["bucketed_ms"]))
    out = os.path.join(out_dir, "steps.svg")
    gnuplot(f"""
set terminal svg size 720,420 dynamic font 'sans,12'
set output '{out}'
set termoption noenhanced
set title "wide-mlp training step (256-512-256-1) against the actual batch size\\n{subtitle(meta)}"
set xlabel 'actual batch size n (bound 4096)'
set ylabel 'ms per step (median)'
set logscale xy 2
set key top left
set grid
plot '{dat}' using 1:2 with linespoints title 'static: a plan per n (CLBlast)', \\
     '' using 1:3 with linespoints title 'static: a plan per n (clbound GEMM)', \\
     '' using 1:4 with linespoints lw 2 title 'dynamic: one plan bounded by 4096', \\
     '' using 1:5 with linespoints title 'bucketed: a plan per power of two'
""")
    return out


def plot_ops(rows, out_dir, work, meta):
    rows = [r for r in rows if "fraction_of_copy" in r and "op" in r]
    if not rows:
        return None
    big = max(r["n"] for r in rows)
    rows = [r for r in rows if r["n"] == big]
    # nonzero runs on bool and on f32 input: one bar each
    def label(r):
        return "%s (%s)" % (r["op"], r["dtype"]) if r["op"] == "nonzero" else r["op"]
    ops = sorted({label(r) for r in rows})
    dens = sorted({r["density"] for r in rows})
    dat = os.path.join(work, "ops.dat")
    with open(dat, "w") as f:
        f.write("# density " + " ".join(ops) + "\n")
        for d in dens:
            vals = []
            for op in ops:
                v = [r["fraction_of_copy"] for r in rows if label(r) == op and r["density"] == d]
                # several runs appended to one file: their median
                vals.append("%.4f" % statistics.median(v) if v else "NaN")
            f.write("%g %s\n" % (d, " ".join(vals)))
    out = os.path.join(out_dir, "ops-fraction.svg")
    cols = ", ".join(f"'' using {i + 2}:xtic(1) title '{op}'" if i else f"'{dat}' using {i + 2}:xtic(1) title '{op}'"
                     for i, op in enumerate(ops))
    gnuplot(f"""
set terminal svg size 720,420 dynamic font 'sans,12'
set output '{out}'
set termoption noenhanced
set title "n = {big}: fraction of a copy kernel over the same bytes (median)\\n{subtitle(meta)}"
set xlabel 'density of the mask (fraction of true / nonzero)'
set ylabel 'fraction of copy bandwidth'
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set yrange [0:1.2]
set key top center horizontal
set grid ytics
plot {cols}
""")
    return out


def med(values):
    values = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(values) if values else None


def summary(bench, meta):
    """A few lines per benchmark file: what `make bench` measured."""
    out = ["summary (%s, %s, commit %s):" % (meta["device"], meta["date"], meta["commit"])]
    ops = [r for r in load(os.path.join(bench, "ops.jsonl")) if "fraction_of_copy" in r]
    if ops:
        big = max(r["n"] for r in ops)
        for op in sorted({r["op"] for r in ops}):
            m = med([r["fraction_of_copy"] for r in ops if r["op"] == op and r["n"] == big])
            out.append("  bench ops        %-15s n = %d: %.2f of a copy kernel's bandwidth (median)" % (op, big, m))
    gemm = [r for r in load(os.path.join(bench, "gemm.jsonl")) if "of_blas" in r]
    for strat in sorted({r["strategy"] for r in gemm}):
        m = med([r["of_blas"] for r in gemm if r["strategy"] == strat])
        out.append("  bench gemm       %-15s %.2f of a direct BLAS call's GFLOP/s (median over shapes)" % (strat, m))
    steps = [r for r in load(os.path.join(bench, "steps.jsonl")) if r.get("bench") == "steps"]
    for r in sorted(steps, key=lambda r: r["n"]):
        if r["n"] in (64, 512, 4096):
            out.append("  bench steps      n = %-11d dynamic %.2f ms, static %.2f ms a step" %
                       (r["n"], r["dynamic_ms"], r["static_ms"]))
    for r in load(os.path.join(bench, "whole-step.jsonl")):
        if "step_ms" in r:
            out.append("  bench whole-step %-15s %.3f ms a step fused, %.3f op by op" %
                       (r["workload"], r["step_ms"], r["eager_step_ms"]))
    for r in load(os.path.join(bench, "demo.jsonl")):
        if "seconds" in r:
            out.append("  demo --full      %-8s %-9s %.2f s (cache %s), %d program(s) built" %
                       (r["workload"], r["policy"], r["seconds"], r.get("cache_state", "?"), r["program_builds"]))
    if len(out) == 1:
        out.append("  (no benchmark output in %s)" % bench)
    return "\n".join(out)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    bench, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    meta = load_meta(bench)
    made = []
    if shutil.which("gnuplot"):
        made = [p for p in (plot_steps(load(os.path.join(bench, "steps.jsonl")), out_dir, bench, meta),
                            plot_ops(load(os.path.join(bench, "ops.jsonl")), out_dir, bench, meta)) if p]
        for p in made:
            print("wrote", p)
    else:
        print("no gnuplot: no plots (Debian: gnuplot-nox)")
    print(summary(bench, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
