#!/bin/sh
# demo-cache.sh CLBOUND: the persistent program cache seen from `clbound demo`.
# With --cache user (the configured cache), a second run in a new process builds
# no program from source (all come from disk) and says how much sooner its first
# step finished than the run that filled the cache; after the cache files
# are truncated or altered, a run still succeeds and rebuilds them. Also runs the
# shape log through `clbound shapes`.
set -eu
tool="$1"
dir=$(mktemp -d)
. "$(dirname "$0")/../common/rm-retry.sh"  # rm_retry: the store helper may still write the cache
trap 'rm_retry "$dir"' EXIT
export CLBOUND_CACHE_DIR="$dir/cache"
run() { "$tool" demo --cache user --workload xla-mlp --policy dynamic --iterations 12 --json > "$dir/$1.json"; }
field() { sed -n "s/.*\"$2\":\\([0-9.e+-]*\\).*/\\1/p" "$dir/$1.json"; }
fail() { echo "demo-cache: $*" >&2; cat "$dir"/*.json >&2; exit 1; }

run cold
[ "$(field cold program_builds)" -gt 0 ] || fail "the cold run built nothing"
# its entry, or its store manifest for the store helper (CLBOUND_CACHE_STORE=process)
ls "$CLBOUND_CACHE_DIR" | grep -q -E '[.](clbin|pending)$' || fail "the cold run wrote no cache entry"
"$tool" cache info > /dev/null # waits for the store helper

run warm
[ "$(field warm program_builds)" -eq 0 ] || fail "the warm run built $(field warm program_builds) programs from source"
[ "$(field warm cache_hits_disk)" -gt 0 ] || fail "the warm run loaded nothing from disk"
grep -q 'sooner than the run that filled this cache' "$dir/warm.json" || fail "the warm run does not say how much sooner it started"

# truncate every entry: each is rejected, rebuilt, and the run still succeeds
# (`cache info` first: it waits for the store helper, so the entries are there)
"$tool" cache info > /dev/null
for f in "$CLBOUND_CACHE_DIR"/*.clbin; do head -c 100 "$f" > "$f.t" && mv "$f.t" "$f"; done
run truncated
[ "$(field truncated program_builds)" -gt 0 ] || fail "truncated entries were not rebuilt"
[ "$(field truncated max_loss_error)" != "" ] || fail "no loss error reported"

# flip a byte in the middle of every entry
"$tool" cache info > /dev/null
for f in "$CLBOUND_CACHE_DIR"/*.clbin; do
  size=$(wc -c < "$f")
  printf '\377' | dd of="$f" bs=1 seek=$((size / 2)) conv=notrunc 2> /dev/null
done
run altered
[ "$(field altered program_builds)" -gt 0 ] || fail "altered entries were not rebuilt"

# the shape log of a graph, read back by `clbound shapes`
CLBOUND_SHAPE_LOG="$dir/shapes.log" "$tool" demo --workload xla-mlp --policy dynamic --iterations 3 --json > /dev/null
head -n 1 "$dir/shapes.log" | grep -q '^# data-dependent: count of nonzero' || fail "shape log header: $(head -n 1 "$dir/shapes.log")"
[ "$(grep -c '^x=5x2;y=10$' "$dir/shapes.log")" -eq 3 ] || fail "shape log lines: $(cat "$dir/shapes.log")"
"$tool" shapes "$dir/shapes.log" > "$dir/report.txt" || fail "clbound shapes failed"
grep -q 'count of nonzero' "$dir/report.txt" || fail "the report does not name the data-dependent ops: $(cat "$dir/report.txt")"
# `clbound cache warm` fills an empty cache ahead of time: the next run builds nothing
export CLBOUND_CACHE_DIR="$dir/warmed"
"$tool" cache warm --workload xla-mlp > "$dir/warm.txt" || fail "clbound cache warm failed"
grep -q '1 program(s) built and stored' "$dir/warm.txt" || fail "cache warm: $(cat "$dir/warm.txt")"
run afterwarm
[ "$(field afterwarm program_builds)" -eq 0 ] || fail "after cache warm the run built $(field afterwarm program_builds) programs"
echo "demo-cache: ok"
