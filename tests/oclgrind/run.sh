#!/bin/sh
# run.sh OCLGRIND TEST [ARGS...]: runs one test binary on Oclgrind's simulated
# device with its checks on (data races, uniform writes, API errors; invalid
# accesses and barrier divergence are always on) and fails when the test fails
# or when Oclgrind reports anything: Oclgrind prints its reports to stderr and
# still exits with the program's status, so its output is scanned.
# Oclgrind's `oclgrind` command preloads its runtime, so the test sees one
# platform, "Oclgrind", whatever ICDs are installed.
set -u
oclgrind=$1
shift
log=${TMPDIR:-/tmp}/clbound-oclgrind.$$.log
trap 'rm -f "$log"' EXIT
"$oclgrind" --data-races --uniform-writes --check-api "$@" >"$log" 2>&1
rc=$?
cat "$log"
# Oclgrind's reports: "Invalid read/write ...", "Read-write data race ...",
# "Uniform write-write data race ...", "Work-group divergence detected ...",
# "Oclgrind - OpenCL runtime error detected", "Unaligned address ...", and
# its own failures ("Oclgrind: ...", "Oclgrind - ...").
reports=$(grep -c -i -E 'data race|^(Invalid|Unaligned|Uninitiali[sz]ed)|divergence|error detected|^Oclgrind' "$log")
if [ "$reports" -gt 0 ]; then
  echo "oclgrind: $reports report lines (above): failing" >&2
  exit 1
fi
if [ "$rc" = 77 ]; then exit 77; fi
if [ "$rc" != 0 ]; then
  echo "oclgrind: the test exited with status $rc" >&2
  exit 1
fi
exit 0
