#!/bin/sh
# installed-cli.sh BUILD_DIR WORK_DIR: the installed clbound command runs from
# any prefix, with no LD_LIBRARY_PATH and no MPI library. Installs BUILD_DIR
# into a scratch prefix, moves the prefix elsewhere (so nothing can point at
# the first place), then runs `clbound version`, `clbound --version` and
# `clbound info` from there. MPI: neither clbound nor the libraries it loads
# may need an MPI library (only clbound-dist, the data-parallel demo, may): a
# library the loader never opens cannot be missing, so the loaded set is
# checked with ldd, which also reports any library not found.
set -eu
build=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/first" > /dev/null
mv "$work/first" "$work/moved"
prefix="$work/moved"
unset LD_LIBRARY_PATH
fail() { echo "installed-cli: $*" >&2; exit 1; }

tool="$prefix/bin/clbound"
[ -x "$tool" ] || fail "no bin/clbound in the installed prefix"
out=$("$tool" version) || fail "clbound version exits $? from a moved prefix (library not found?)"
echo "$out" | grep -q '^clbound [0-9]' || fail "clbound version printed: $out"
"$tool" --version > /dev/null || fail "clbound --version failed"
"$tool" info > "$work/info.txt" || fail "clbound info failed: $(cat "$work/info.txt")"
grep -q 'OpenCL device' "$work/info.txt" || fail "clbound info printed: $(cat "$work/info.txt")"

libs=$(ldd "$tool") || fail "ldd $tool failed"
echo "$libs" | grep -q 'not found' && fail "libraries not found: $libs"
echo "$libs" | grep -q "$prefix/" || fail "clbound does not load the prefix's own library: $libs"
if echo "$libs" | grep -Eiq 'libmpi|libopen-rte|libopen-pal|libmpich'; then
  fail "clbound loads MPI libraries: $libs"
fi
# clbound-dist (built with MPI) finds the prefix's libraries too
if [ -x "$prefix/bin/clbound-dist" ]; then
  ldd "$prefix/bin/clbound-dist" | grep -q 'libclbound.*not found' && fail "clbound-dist: $(ldd "$prefix/bin/clbound-dist")"
fi
echo "installed-cli: ok ($out, from $prefix without LD_LIBRARY_PATH, no MPI library loaded)"
