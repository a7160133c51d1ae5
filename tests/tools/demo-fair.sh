#!/bin/sh
# demo-fair.sh CLBOUND: what `clbound demo` compares is fair by construction,
# and its metrics file describes the run.
#  * default (--cache cold): both policies build every program from source, the
#    output says so, compares them end to end in words that read right, and
#    shows compile and step time apart; CLBOUND_METRICS_FILE counts the whole
#    run (non-zero builds, launches and plans over every context);
#  * --cache warm: both policies load every program from a cache of the run's
#    own (0 builds from source in the timed runs), removed at the end;
#  * --cache user with only dynamic's programs in the cache: the states differ,
#    so the demo states both and does not compare them end to end.
set -eu
tool="$1"
dir=$(mktemp -d)
. "$(dirname "$0")/../common/rm-retry.sh"  # rm_retry: the store helper may still write the cache
trap 'rm_retry "$dir"' EXIT
fail() { echo "demo-fair: $*" >&2; cat "$dir"/*.txt >&2 2> /dev/null || true; exit 1; }
num() { sed -n "s/.*\"$2\":\\([0-9][0-9]*\\).*/\\1/p" "$1"; }
demo() { "$tool" demo --workload xla-mlp --iterations 6 --no-check --quiet "$@"; }

# cold, the default
export CLBOUND_CACHE_DIR="$dir/user-cache"
# built optimized at once: the counts compared here must not move when a tiered
# build's optimized program arrives (cmake/clbound-test.cmake)
export CLBOUND_COLD_BUILD=optimized
CLBOUND_METRICS_FILE="$dir/metrics.json" demo > "$dir/cold.txt" || fail "the cold demo failed"
grep -q '^Program cache: cold for every policy' "$dir/cold.txt" || fail "no cache statement"
[ "$(grep -c '^  \(dynamic\|static\) *cache cold: first step' "$dir/cold.txt")" -eq 2 ] || fail "not both cold"
grep -Eq '^  cache cold for both: dynamic is [0-9]+\.[0-9]x (faster|slower) end to end than static \([0-9.]+ s against [0-9.]+ s\)$' \
  "$dir/cold.txt" || fail "no end-to-end comparison of equal states"
grep -Eq '^  compile [0-9.]+ s against [0-9.]+ s; steps [0-9.]+ s against [0-9.]+ s' "$dir/cold.txt" || fail "compile and steps not apart"
grep -q 'total s compile s  steps s' "$dir/cold.txt" || fail "no compile and steps columns"
grep -Eq ' 0\.[0-9]+x (faster|slower)| 1 programs|\(1 programs' "$dir/cold.txt" && fail "words that read wrong"
ls "$CLBOUND_CACHE_DIR"/*.clbin > /dev/null 2>&1 && fail "--cache cold stored programs in the user's cache"
[ -s "$dir/metrics.json" ] || fail "no metrics file"
for k in program_builds kernel_launches plans_compiled; do
  [ "$(num "$dir/metrics.json" $k)" -gt 0 ] || fail "metrics file: $k is $(num "$dir/metrics.json" $k): $(cat "$dir/metrics.json")"
done
[ "$(num "$dir/metrics.json" contexts)" -ge 2 ] || fail "metrics file: not every context: $(cat "$dir/metrics.json")"

# warm: both from a cache of the run's own, a temporary folder that the run
# removes (TMPDIR: a folder of this test's, empty before)
mkdir "$dir/tmp"
TMPDIR="$dir/tmp" demo --cache warm --json > "$dir/warm.txt" || fail "the warm demo failed"
[ -z "$(ls -A "$dir/tmp")" ] || fail "--cache warm left its cache folder: $(ls -A "$dir/tmp")"
[ "$(grep -c '"cache":"warm","cache_state":"warm"' "$dir/warm.txt")" -eq 2 ] || fail "not both warm"
[ "$(grep -c '"program_builds":0,' "$dir/warm.txt")" -eq 2 ] || fail "a warm run built programs"

# user, with the states made to differ: stated, not compared end to end
"$tool" cache warm --workload xla-mlp --policy dynamic > /dev/null || fail "cache warm failed"
demo --cache user > "$dir/user.txt" || fail "the user-cache demo failed"
grep -q '^  dynamic *cache warm' "$dir/user.txt" || fail "dynamic's state not stated as warm"
grep -q '^  static *cache cold' "$dir/user.txt" || fail "static's state not stated as cold"
grep -q "not compared end to end: dynamic's cache was warm, static's cold" "$dir/user.txt" || fail "no statement of unequal states"
grep -q 'faster end to end\|slower end to end\|took [0-9.]*x as long' "$dir/user.txt" && fail "unequal cache states compared end to end"
echo "demo-fair: ok"
