#!/bin/sh
# The layering check (scripts/check-layers.py) against trees made here: it must
# fail on an upward include, an upward call and a cycle inside one folder, pass on
# a tree that only depends downwards, and pass on the project itself.
set -eu
src=$1
checker="$src/scripts/check-layers.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect() { # expect RC NAME: runs the checker on $tmp/NAME
  set +e
  out=$(python3 "$checker" "$tmp/$2" 2>&1)
  rc=$?
  set -e
  if [ "$rc" != "$1" ]; then
    echo "FAIL: $2: exit $rc, expected $1"; echo "$out"; fail=1
  else
    echo "ok: $2 (exit $rc)"; printf '%s\n' "$out" | sed 's/^/    /'
  fi
  [ "$#" -lt 3 ] || printf '%s\n' "$out" | grep -q "$3" || { echo "FAIL: $2: no '$3' in the output"; fail=1; }
}
mk() { mkdir -p "$(dirname "$tmp/$1")"; cat >"$tmp/$1"; }

# Downward only: ops calls core, core calls nothing above.
mk good/runtime/core/core.h <<'C'
int clb__low(int x);
C
mk good/runtime/core/low.c <<'C'
#include "runtime/core/core.h"
int clb__low(int x) { return x + 1; }
C
mk good/runtime/ops/op.c <<'C'
#include "runtime/core/core.h"
int clb_op(int x) { return clb__low(x); }
C
expect 0 good

# Upward include: core includes an ops header.
cp -r "$tmp/good" "$tmp/up-include"
mk up-include/runtime/ops/ops.h <<'C'
int clb_op(int x);
C
mk up-include/runtime/core/bad.c <<'C'
#include "runtime/ops/ops.h"
C
expect 1 up-include "upward: runtime/core/bad.c"

# Upward call: core calls a function that ops defines.
cp -r "$tmp/good" "$tmp/up-call"
mk up-call/runtime/core/bad.c <<'C'
int clb__uses_op(void) { return clb_op(1); }
C
expect 1 up-call "upward: runtime/core/bad.c (runtime/core) uses clb_op()"

# A cycle inside one folder.
cp -r "$tmp/good" "$tmp/cycle"
mk cycle/shapes/a.c <<'C'
int clb__b(void);
int clb__a(void) { return clb__b(); }
C
mk cycle/shapes/b.c <<'C'
int clb__a(void);
int clb__b(void) { return clb__a(); }
C
expect 1 cycle "cycle between shapes/a.c, shapes/b.c"

# An interposer of the OpenCL API in bench (bench/timeline) is no upward call:
# core's call of clFinish goes to the driver.
cp -r "$tmp/good" "$tmp/interposer"
mk interposer/runtime/core/q.c <<'C'
int clFinish(void *q);
int clb__finish(void *q) { return clFinish(q); }
C
mk interposer/bench/timeline/shim.c <<'C'
int clFinish(void *q) { return q != 0; }
C
expect 0 interposer

# The project itself.
set +e
python3 "$checker" "$src"
rc=$?
set -e
[ "$rc" = 0 ] || { echo "FAIL: the project's own tree breaks its layers"; fail=1; }
[ "$fail" = 0 ] && echo "5 passed, 0 failed" || { echo "layout checks failed"; exit 1; }
