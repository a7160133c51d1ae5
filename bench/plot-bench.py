#!/usr/bin/env python3
"""plot-bench.py: turns the JSON lines of `clbound bench steps` and `clbound
bench ops` into SVG plots with gnuplot.

usage: plot-bench.py BENCH_DIR OUT_DIR
  BENCH_DIR/steps.jsonl -> OUT_DIR/steps.svg: wide-mlp step time against the
                           actual batch size, per policy
  BENCH_DIR/ops.jsonl   -> OUT_DIR/ops-fraction.svg: fraction of the copy
                           kernel's bandwidth per op and density (the median
                           when several runs are appended)
"""
import json
import os
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


def plot_steps(rows, out_dir, work):
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
set title 'wide-mlp training step (256-512-256-1) against the actual batch size'
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


def plot_ops(rows, out_dir, work):
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
set title 'n = {big}: fraction of a copy kernel over the same bytes (median)'
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


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    bench, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    made = [p for p in (plot_steps(load(os.path.join(bench, "steps.jsonl")), out_dir, bench),
                        plot_ops(load(os.path.join(bench, "ops.jsonl")), out_dir, bench)) if p]
    for p in made:
        print("wrote", p)
    return 0 if made else 1


if __name__ == "__main__":
    sys.exit(main())
