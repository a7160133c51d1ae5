#!/bin/sh
# setup.sh: makes sure the Debian packages clbound builds and tests with are
# installed. As root it installs what is missing; otherwise it prints the exact
# command to run and fails. Called by `make demo`, `make test` and `make bench`;
# extra package names given as arguments are checked too.
set -eu

# Build: compiler, CMake, pkg-config. OpenCL: the ICD loader and headers, PoCL
# (the CPU driver every test runs on), CLBlast (GEMM). Tests: clang and its
# runtime (libclang-rt-dev) for the libFuzzer target, valgrind for the overflow
# tests; python3 with numpy and pytest for the Python binding, python3-venv for
# the test that pip-installs the Python package into a venv (tests/python).
PACKAGES="cmake make gcc g++ pkg-config ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd libclblast-dev clang libclang-rt-dev valgrind python3 python3-numpy python3-pytest python3-venv $*"

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup: not a Debian system; make sure these (or your system's equivalents) are installed:" >&2
  echo "  $PACKAGES" >&2
  exit 0
fi

missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "setup: clbound needs Debian packages that are not installed. Run:" >&2
  echo "  sudo apt-get install -y$missing" >&2
  exit 1
fi

echo "setup: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
