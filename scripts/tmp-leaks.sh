#!/bin/sh
# tmp-leaks.sh snapshot|check LIST: what `make test` leaves in the temporary
# folder (TMPDIR, else /tmp). The tests, the demo and the tools make their
# temporary folders and files there as clbound-*, and each removes its own.
#   snapshot LIST  writes the clbound-* entries there now into LIST;
#   check LIST     fails, naming them, when entries that LIST lacks are there
#                  now: something the run made was left behind.
set -eu
tmp="${TMPDIR:-/tmp}"
list="$2"
entries() { (cd "$tmp" && ls -d clbound-* 2> /dev/null || true) | sort; }
case "$1" in
  snapshot) entries > "$list" ;;
  check)
    [ -f "$list" ] || { echo "tmp-leaks.sh: no snapshot $list" >&2; exit 2; }
    left=$(entries | comm -13 "$list" -)
    rm -f "$list"
    if [ -n "$left" ]; then
      echo "make test: the run left these in $tmp (each test removes its own temporary files):" >&2
      echo "$left" | sed 's/^/  /' >&2
      exit 1
    fi ;;
  *) echo "usage: tmp-leaks.sh snapshot|check LIST" >&2; exit 2 ;;
esac
