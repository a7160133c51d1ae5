#!/bin/sh
# bench-outputs.sh SOURCE_DIR: what `make bench` writes. It stays under the build
# folder (JSON lines, plots, meta.txt); only `make bench-docs` copies plots into
# docs/img/. plot-bench.py prints a text summary of the run and names the
# device, the date and the commit in every plot's title (the plots only where
# gnuplot is installed).
set -eu
src="$1"
dir=$(mktemp -d)
. "$(dirname "$0")/../common/rm-retry.sh"  # rm_retry: the store helper may still write the cache
trap 'rm_retry "$dir"' EXIT
fail() { echo "bench-outputs: $*" >&2; exit 1; }

make -s -n -C "$src" bench BUILD="$dir/b" > "$dir/bench.sh" 2> /dev/null || fail "make -n bench failed"
grep -q 'plot-bench.py' "$dir/bench.sh" || fail "make bench does not draw the plots: $(cat "$dir/bench.sh")"
grep -n 'docs/' "$dir/bench.sh" && fail "make bench writes into docs/"
make -s -n -C "$src" bench-docs BUILD="$dir/b" > "$dir/docs.sh" 2> /dev/null || fail "make -n bench-docs failed"
grep -q "cp $dir/b/bench/img/\*.svg docs/img/" "$dir/docs.sh" || fail "make bench-docs does not copy the plots: $(cat "$dir/docs.sh")"

# a run's output: plots and summary name its device, date and commit
mkdir -p "$dir/run"
printf 'device=Test Device 7\ndate=2031-02-03\ncommit=abc1234\n' > "$dir/run/meta.txt"
echo '{"bench":"steps","workload":"wide-mlp","n":64,"static_ms":2.0,"static_device_gemm_ms":2.5,"dynamic_ms":1.0,"bucketed_ms":1.5,"dynamic_over_static":0.5}' > "$dir/run/steps.jsonl"
echo '{"bench":"ops","op":"nonzero","n":4096,"shape":"64x64","density":0.50,"dtype":"bool","fraction_of_copy":0.75}' > "$dir/run/ops.jsonl"
python3 "$src/bench/plot-bench.py" "$dir/run" "$dir/run/img" > "$dir/out.txt" || fail "plot-bench.py failed: $(cat "$dir/out.txt")"
grep -q '^summary (Test Device 7, 2031-02-03, commit abc1234):' "$dir/out.txt" || fail "no summary line: $(cat "$dir/out.txt")"
grep -q 'bench steps .*n = 64 .*dynamic 1.00 ms, static 2.00 ms' "$dir/out.txt" || fail "steps not summarized: $(cat "$dir/out.txt")"
grep -q 'bench ops .*nonzero .*0.75 of a copy' "$dir/out.txt" || fail "ops not summarized: $(cat "$dir/out.txt")"
if command -v gnuplot > /dev/null; then
  for svg in steps ops-fraction; do
    [ -f "$dir/run/img/$svg.svg" ] || fail "no $svg.svg"
    grep -q 'Test Device 7, 2031-02-03, commit abc1234' "$dir/run/img/$svg.svg" || fail "$svg.svg does not name the device, date and commit"
  done
fi
echo "bench-outputs: ok"
