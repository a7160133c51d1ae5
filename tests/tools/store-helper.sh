#!/bin/sh
# store-helper.sh CLBOUND: the store at exit is a process of its own (issue 32,
# item 3; CLBOUND_CACHE_STORE=process, the default). Counts, not times:
#  * a cold demo process stores nothing itself: store_local 0, store_handoffs 1,
#    and while the test holds the folder's lock (so the helper cannot have
#    finished) the folder holds 1 store manifest and 0 entries;
#  * once the lock is free, the helper alone (nothing else touches the folder)
#    writes the entry and removes the manifest; the next process builds 0
#    programs and loads 1 from disk;
#  * two cold processes at once on one folder: one entry, no manifest and no
#    temporary file left, and the next process builds 0;
#  * a missing helper (CLBOUND_STORE_HELPER names none): the process stores in
#    itself (store_local 1, store_handoffs 0), says so under CLBOUND_LOG=cache,
#    and its entry is there when it exits;
#  * CLBOUND_COLD_BUILD=fast (part 4), the work-group shapes the process
#    launched handed to the helper (part 5), and those of a plan warmed by
#    `clbound cache warm` without a launch (part 6).
set -eu
tool="$1"
dir=$(mktemp -d)
holder=
. "$(dirname "$0")/../common/rm-retry.sh"  # rm_retry: the store helper may still write the cache
trap '[ -n "$holder" ] && kill "$holder" 2> /dev/null; rm_retry "$dir"' EXIT
fail() { echo "store-helper: $*" >&2; exit 1; }
num() { sed -n "s/.*\"$2\":\\([0-9][0-9]*\\).*/\\1/p" "$1" | head -n 1; }
count() { ls "$1" 2> /dev/null | grep -c "$2\$" || true; }
demo() { # cache folder, metrics file, [env...]
  c=$1 m=$2
  shift 2
  env CLBOUND_CACHE_DIR="$c" CLBOUND_METRICS_FILE="$m" "$@" "$tool" demo --workload xla-mlp --policy dynamic \
    --iterations 12 --cache user --no-check --quiet --json > "$m.out" 2> "$m.err" || fail "the demo failed: $(cat "$m.err")"
}
# waits (at most 5 minutes) until no store manifest is left in folder $1
settle() {
  i=0
  while [ "$(count "$1" .pending)" -gt 0 ]; do
    i=$((i + 1))
    [ $i -le 1500 ] || fail "the store helper left $(count "$1" .pending) manifest(s) in $1 for 5 minutes"
    sleep 0.2
  done
}

# holds folder $1's lock until release: a shell that takes it on its descriptor 9,
# then becomes sleep (killing it frees the lock and leaves no process behind)
hold() {
  mkdir -p -m 700 "$1"
  (flock 9 && exec sleep 600) 9> "$1/.store.lock" > /dev/null 2>&1 &
  holder=$!
  i=0
  while flock -n "$1/.store.lock" true; do
    i=$((i + 1))
    [ $i -le 500 ] || fail "the test could not take the folder's lock"
    sleep 0.02
  done
}
release() {
  kill "$holder"
  holder=
}

# 1. the process hands its program over; the helper waits for the lock the test holds
c="$dir/c1"
hold "$c"
demo "$c" "$dir/cold.json"
[ "$(num "$dir/cold.json" store_local)" = 0 ] || fail "the cold process stored $(num "$dir/cold.json" store_local) program(s) itself"
[ "$(num "$dir/cold.json" store_handoffs)" = 1 ] || fail "the cold process handed $(num "$dir/cold.json" store_handoffs) program(s) to the helper, not 1"
[ "$(count "$c" .pending)" = 1 ] || fail "$(count "$c" .pending) store manifests after the cold process, not 1"
[ "$(count "$c" .clbin)" = 0 ] || fail "an entry was written while the helper could not run"
release
settle "$c"
[ "$(count "$c" .clbin)" = 1 ] || fail "the helper wrote $(count "$c" .clbin) entries, not 1"
demo "$c" "$dir/warm.json"
[ "$(num "$dir/warm.json" program_builds)" = 0 ] || fail "the warm process built $(num "$dir/warm.json" program_builds) program(s)"
[ "$(num "$dir/warm.json" program_cache_hits_disk)" = 1 ] || fail "the warm process loaded $(num "$dir/warm.json" program_cache_hits_disk) program(s) from disk, not 1"
[ "$(num "$dir/warm.json" store_handoffs)" = 0 ] || fail "the warm process handed programs over"

# 2. two cold processes at once on one folder, and their helpers
c="$dir/c2"
demo "$c" "$dir/a.json" &
a=$!
demo "$c" "$dir/b.json"
wait "$a" || fail "the first of two concurrent processes failed"
settle "$c"
[ "$(count "$c" .clbin)" = 1 ] || fail "two processes and their helpers left $(count "$c" .clbin) entries, not 1"
[ "$(ls -a "$c" | grep -c '\.tmp\.')" = 0 ] || fail "temporary files left: $(ls -a "$c")"
demo "$c" "$dir/after.json"
[ "$(num "$dir/after.json" program_builds)" = 0 ] || fail "after two helpers, a process built $(num "$dir/after.json" program_builds) program(s)"

# 3. no helper: the process stores in itself, and says so
c="$dir/c3"
demo "$c" "$dir/nohelper.json" CLBOUND_STORE_HELPER="$dir/no-such-helper" CLBOUND_LOG=cache
[ "$(num "$dir/nohelper.json" store_local)" = 1 ] || fail "without a helper, $(num "$dir/nohelper.json" store_local) program(s) stored in the process, not 1"
[ "$(num "$dir/nohelper.json" store_handoffs)" = 0 ] || fail "without a helper, programs were handed over"
grep -q "store helper .*no-such-helper cannot be run" "$dir/nohelper.json.err" || fail "no log line for the missing helper: $(cat "$dir/nohelper.json.err")"
[ "$(count "$c" .clbin)" = 1 ] && [ "$(count "$c" .pending)" = 0 ] || fail "without a helper: $(ls "$c")"
# Parts 4-6 are about CPU devices (PoCL): only there are cold builds fast
# (CLBOUND_COLD_BUILD) and work-group functions compiled per shape at first
# launch; elsewhere programs are always built optimized (docs/api.md).
if ! "$tool" info 2> /dev/null | grep -m 1 -E '^ +type ' | grep -q CPU; then
  echo "store-helper: parts 1-3 passed; parts 4-6 (fast cold builds, PoCL's work-group shapes) apply to CPU devices only, and the device is not one"
  exit 0
fi
# 4. CLBOUND_COLD_BUILD=fast: the cold process builds without LLVM's optimizations
#    (and says so), stores no binary itself, and its manifest asks the helper for
#    the optimized build; the next process loads that entry and builds nothing
c="$dir/c4"
hold "$c"
demo "$c" "$dir/fast.json" CLBOUND_COLD_BUILD=fast CLBOUND_LOG=builds
grep -q "building from source (CLBOUND_COLD_BUILD=fast: -cl-opt-disable" "$dir/fast.json.err" ||
  fail "the fast cold build did not say it was built with -cl-opt-disable: $(cat "$dir/fast.json.err")"
[ "$(num "$dir/fast.json" store_local)" = 0 ] || fail "the fast cold process stored a binary itself"
[ "$(num "$dir/fast.json" store_handoffs)" = 1 ] || fail "the fast cold process handed $(num "$dir/fast.json" store_handoffs) program(s) over, not 1"
[ "$(count "$c" .pending)" = 1 ] || fail "$(count "$c" .pending) store manifests after the fast cold process, not 1"
grep -q -- "-D CLB_NO_REQD_WG" "$c"/*.pending || fail "the manifest has no build options"
! grep -q -- "-cl-opt-disable" "$c"/*.pending || fail "the manifest asks the helper for the unoptimized build"
release
settle "$c"
[ "$(count "$c" .clbin)" = 1 ] || fail "after a fast cold process, the helper wrote $(count "$c" .clbin) entries, not 1"
demo "$c" "$dir/fast-warm.json" CLBOUND_COLD_BUILD=fast
[ "$(num "$dir/fast-warm.json" program_builds)" = 0 ] || fail "after a fast cold process, the next built $(num "$dir/fast-warm.json" program_builds) program(s)"
# with the cache off there is no helper to build it again: the optimized build
demo off "$dir/fast-off.json" CLBOUND_COLD_BUILD=fast CLBOUND_LOG=builds
! grep -q -- "-cl-opt-disable" "$dir/fast-off.json.err" || fail "with the cache off, the build was unoptimized"
# 5. the helper is told the work-group shapes the process launched
#    (POCL_BINARY_SPECIALIZE_WG: PoCL then puts those compiled work-group
#    functions into the binary it stores, so the next process compiles none);
#    a value in the environment is passed on unchanged
wrap="$dir/helper-wrapper"
printf '#!/bin/sh\nprintf "%%s\\n" "${POCL_BINARY_SPECIALIZE_WG-unset}" >> "%s"\nexec "%s" "$@"\n' "$dir/wg.txt" "$tool" > "$wrap"
chmod +x "$wrap"
c="$dir/c5"
demo "$c" "$dir/wg.json" CLBOUND_COLD_BUILD=fast CLBOUND_STORE_HELPER="$wrap"
settle "$c"
[ "$(count "$c" .clbin)" = 1 ] || fail "through the wrapper, the helper wrote $(count "$c" .clbin) entries, not 1"
shapes=$(head -n 1 "$dir/wg.txt")
printf '%s\n' "$shapes" | grep -Eq '^[0-9]+-1-1-goffs0(-smallgrid)?(,[0-9]+-1-1-goffs0(-smallgrid)?)*$' ||
  fail "the helper was not given the launched work-group shapes: '$shapes'"
c="$dir/c6"
demo "$c" "$dir/wg-user.json" CLBOUND_STORE_HELPER="$wrap" POCL_BINARY_SPECIALIZE_WG=7-1-1
settle "$c"
[ "$(sed -n 2p "$dir/wg.txt")" = 7-1-1 ] || fail "the environment's POCL_BINARY_SPECIALIZE_WG was not passed on: $(cat "$dir/wg.txt")"
# 6. `clbound cache warm` launches nothing (it walks the plan), yet its helper
#    is told the shapes the plan's launches will have: the same as a run's
c="$dir/c7"
env CLBOUND_CACHE_DIR="$c" CLBOUND_COLD_BUILD=fast CLBOUND_STORE_HELPER="$wrap" "$tool" cache warm --workload xla-mlp \
  > "$dir/warm7.out" 2>&1 || fail "cache warm failed: $(cat "$dir/warm7.out")"
settle "$c"
[ "$(count "$c" .clbin)" = 1 ] || fail "after cache warm, the helper wrote $(count "$c" .clbin) entries, not 1"
warmed=$(sed -n 3p "$dir/wg.txt")
[ "$warmed" = "$shapes" ] || fail "cache warm handed the helper the shapes '$warmed', a run '$shapes'"
echo "store-helper: ok"
