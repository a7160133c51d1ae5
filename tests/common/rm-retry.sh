# rm-retry.sh: sourced by the test scripts that give clbound a cache folder of
# their own in a temporary folder.
# rm_retry DIR removes DIR, retrying for up to 5 s: the program store helper
# (CLBOUND_CACHE_STORE=process, a detached process) may still be writing a
# program into the cache for a moment after the run that queued it exited, and
# `rm -rf` then fails with "Directory not empty". The last try reports.
rm_retry() {
  for _ in 1 2 3 4 5 6 7 8 9; do
    rm -rf "$1" 2> /dev/null && return 0
    sleep 0.5
  done
  rm -rf "$1"
}
