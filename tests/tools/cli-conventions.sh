#!/bin/sh
# cli-conventions.sh CLBOUND: the command's conventions. -h, --help and help
# print the usage on stdout and exit 0; --version exits 0; every command and
# subcommand answers --help on stdout with exit 0 (and runs nothing); the usage
# lists every benchmark and gives each cache command its own description line.
set -u
tool="$1"
dir=$(mktemp -d)
. "$(dirname "$0")/../common/rm-retry.sh"  # rm_retry: the store helper may still write the cache
trap 'rm_retry "$dir"' EXIT
bad=0
fail() { echo "cli-conventions: FAIL: $*" >&2; bad=1; }

for h in -h --help help; do
  "$tool" $h > "$dir/out" 2> "$dir/err"; rc=$?
  [ $rc -eq 0 ] || fail "clbound $h exits $rc"
  grep -q '^usage: clbound' "$dir/out" || fail "clbound $h: no usage on stdout"
done
"$tool" --help > "$dir/usage"
"$tool" --version > "$dir/out"; rc=$?
[ $rc -eq 0 ] || fail "clbound --version exits $rc"
grep -Eq '^clbound [0-9]+\.[0-9]+\.[0-9]+$' "$dir/out" || fail "clbound --version printed: $(cat "$dir/out")"

for b in ops gemm steps whole-step; do
  grep -q "^  bench $b " "$dir/usage" || fail "the usage does not list bench $b"
done
# each cache command on its own line, its description on the next
grep -A1 '^  cache info|clear \[DIR\]$' "$dir/usage" | tail -n 1 | grep -q '^                   the persistent program cache' ||
  fail "cache info|clear has no description line of its own: $(grep -A1 'cache info' "$dir/usage")"
grep -A1 '^  cache warm \[--workload W\] \[--policy P\]$' "$dir/usage" | tail -n 1 | grep -q '^                   build and store' ||
  fail "cache warm has no description line of its own: $(grep -A1 'cache warm' "$dir/usage")"

# every subcommand: --help on stdout, exit 0
check() {
  "$tool" "$@" > "$dir/out" 2> "$dir/err"; rc=$?
  [ $rc -eq 0 ] || fail "clbound $* exits $rc: $(cat "$dir/err")"
  grep -q '^usage: ' "$dir/out" || fail "clbound $*: no usage on stdout: $(cat "$dir/out" "$dir/err")"
}
for c in info version demo bench shapes cache tune; do check $c --help; done
for b in ops gemm steps whole-step; do check bench $b --help; check bench $b -h; done
check demo --workload chain --help
check demo --full --help
check cache warm --help
check shapes -h
# the data-parallel demo: its usage where clbound-dist is built, else a clear refusal
if [ -x "$(dirname "$tool")/clbound-dist" ]; then
  check demo --data-parallel --help
else
  "$tool" demo --data-parallel --help > /dev/null 2> "$dir/err"
  grep -q 'built without MPI' "$dir/err" || fail "demo --data-parallel without clbound-dist: $(cat "$dir/err")"
fi
[ $bad -eq 0 ] && echo "cli-conventions: ok"
exit $bad
