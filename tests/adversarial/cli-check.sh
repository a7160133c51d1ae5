#!/bin/sh
# cli-check.sh RC PATTERN TOOL ARGS...: runs TOOL ARGS and expects exit code RC
# and the fixed string PATTERN in its standard error (a bad option value must be
# refused with a message that names the option and its range).
# cli-check.sh --json PYTHON RC TOOL ARGS...: expects exit code RC ("any": any)
# and a standard output of one or more lines that each parse as JSON (no inf,
# nan or progress text in it).
set -u
json=""
if [ "$1" = --json ]; then
  json=$2
  shift 2
fi
want=$1 pattern=$2
shift 2
[ -n "$json" ] && set -- "$pattern" "$@" # --json: there is no pattern
dir=$(mktemp -d)
. "$(dirname "$0")/../common/rm-retry.sh"  # rm_retry: the store helper may still write the cache
trap 'rm_retry "$dir"' EXIT
"$@" > "$dir/out" 2> "$dir/err"
rc=$?
fail() {
  echo "cli-check: $*" >&2
  echo "--- stderr ---" >&2
  cat "$dir/err" >&2
  echo "--- stdout (first 2000 bytes) ---" >&2
  head -c 2000 "$dir/out" >&2
  exit 1
}
[ "$want" = any ] || [ "$rc" = "$want" ] || fail "exit code $rc, want $want"
if [ -n "$json" ]; then
  "$json" -c '
import json, sys
def no_constants(c):
    raise ValueError("not JSON: " + c)
lines = open(sys.argv[1]).readlines()
assert lines, "no output"
for l in lines:
    json.loads(l, parse_constant=no_constants)
print("cli-check: ok: %d lines of JSON" % len(lines))
' "$dir/out" || fail "standard output is not JSON lines"
else
  grep -qF -- "$pattern" "$dir/err" || fail "stderr should contain: $pattern"
  echo "cli-check: ok: exit $rc: $(head -n 1 "$dir/err")"
fi
