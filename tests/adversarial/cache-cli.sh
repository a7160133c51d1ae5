#!/bin/sh
# cache-cli.sh CASE CLBOUND: the program cache folder from the command line
# (issue 30, items 2 and 6). Each case fails with a message saying what it saw.
#   fifo       a FIFO in place of the demo's note of its cold run
#              (demo-first-iteration-<workload>-<policy>.txt): a cold and a warm
#              demo both finish (they hung in open() before)
#   warm-off   CLBOUND_CACHE_DIR=off clbound cache warm says nothing was stored
#   long       a 1,100-character folder: `cache info` says the name is too long,
#              and a demo prints the warning once
#   devnull    /dev/null as the folder is "not a folder", never "writable by
#              other users"
set -u
case_=$1 tool=$2
dir=$(mktemp -d)
. "$(dirname "$0")/../common/rm-retry.sh"  # rm_retry: the store helper may still write the cache
trap 'rm_retry "$dir"' EXIT
fail() { echo "cache-cli $case_: $*" >&2; exit 1; }
# --cache user: the demo uses the configured cache folder (its default, cold, uses none)
demo() { timeout 180 "$tool" demo --workload xla-mlp --policy dynamic --iterations 3 --quiet --cache user "$@"; }
case $case_ in
fifo)
  export CLBOUND_CACHE_DIR="$dir/cache"
  mkdir -m 700 "$CLBOUND_CACHE_DIR"
  note="$CLBOUND_CACHE_DIR/demo-first-iteration-xla-mlp-dynamic.txt"
  mkfifo "$note"
  demo > "$dir/cold.txt" 2>&1
  rc=$?
  [ $rc -eq 0 ] || fail "the cold demo with a FIFO note exited $rc (124: hung): $(cat "$dir/cold.txt")"
  [ -f "$note" ] && [ ! -p "$note" ] || fail "the cold demo did not replace the FIFO with its note"
  rm -f "$note"
  mkfifo "$note"
  "$tool" cache info > /dev/null # the cold run's store helper finishes first: then the next run is warm
  demo > "$dir/warm.txt" 2>&1
  rc=$?
  [ $rc -eq 0 ] || fail "the warm demo with a FIFO note exited $rc (124: hung): $(cat "$dir/warm.txt")"
  grep -q "sooner than" "$dir/warm.txt" && fail "the warm demo compared with a note it cannot have read"
  [ -p "$note" ] || fail "the warm demo removed or replaced the FIFO (it only reads the note)"
  ;;
warm-off)
  CLBOUND_CACHE_DIR=off "$tool" cache warm --workload xla-mlp > "$dir/out.txt" 2>&1
  rc=$?
  grep -q "stored" "$dir/out.txt" && ! grep -q "none stored" "$dir/out.txt" && fail "says stored: $(cat "$dir/out.txt")"
  grep -q "none stored: the persistent program cache is off (CLBOUND_CACHE_DIR=off)" "$dir/out.txt" ||
    fail "does not say why nothing was stored: $(cat "$dir/out.txt")"
  [ $rc -eq 1 ] || fail "exit status $rc, want 1 (nothing was stored)"
  ;;
long)
  long=$dir/$(printf '%01100d' 0)
  CLBOUND_CACHE_DIR=$long "$tool" cache info > "$dir/info.txt" 2>&1 || fail "cache info failed: $(cat "$dir/info.txt")"
  grep -q "longer than 1023 characters" "$dir/info.txt" || fail "cache info: $(cat "$dir/info.txt")"
  grep -q "or no HOME" "$dir/info.txt" && fail "cache info blames HOME: $(cat "$dir/info.txt")"
  CLBOUND_CACHE_DIR=$long demo > "$dir/demo.txt" 2>&1 || fail "the demo failed: $(cat "$dir/demo.txt")"
  n=$(grep -c "is longer than" "$dir/demo.txt")
  [ "$n" -eq 1 ] || fail "the demo printed the long-name warning $n times, want 1: $(cat "$dir/demo.txt")"
  ;;
devnull)
  CLBOUND_CACHE_DIR=/dev/null "$tool" cache warm --workload xla-mlp > "$dir/out.txt" 2>&1
  grep -q "writable by other users" "$dir/out.txt" && fail "says /dev/null is writable by other users: $(cat "$dir/out.txt")"
  grep -q "/dev/null is not a folder" "$dir/out.txt" || fail "does not say /dev/null is not a folder: $(cat "$dir/out.txt")"
  n=$(grep -c "is not a folder" "$dir/out.txt")
  [ "$n" -eq 1 ] || fail "the warning printed $n times, want 1"
  ;;
*) fail "unknown case" ;;
esac
exit 0
