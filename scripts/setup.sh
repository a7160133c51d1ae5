#!/bin/sh
# setup.sh: makes sure the Debian packages clbound builds and tests with are
# installed. As root it installs what is missing; otherwise it prints the exact
# command to run and fails. Called by `make demo`, `make test` and `make bench`;
# extra package names given as arguments are checked too. It says what it
# installs and roughly how long that takes, and lets apt-get print its progress.
set -eu

# Build: compiler, CMake, pkg-config. OpenCL: the ICD loader and headers, PoCL
# (the CPU driver every test runs on), CLBlast (GEMM) and its tuners
# (clblast-utils, for `clbound tune`). Tests: clang and its
# runtime (libclang-rt-dev) for the libFuzzer target, valgrind for the overflow
# tests, oclgrind (a simulated device that reports data races) for the oclgrind
# label; python3 with numpy and pytest for the Python binding, python3-venv for
# the test that pip-installs the Python package into a venv (tests/python);
# Open MPI for runtime/dist (clbound_dist, the data-parallel demo and tests/dist;
# without it those are simply not built).
PACKAGES="cmake make gcc g++ pkg-config ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd libclblast-dev clblast-utils libopenblas-dev clang libclang-rt-dev valgrind oclgrind python3 python3-numpy python3-pytest python3-venv libopenmpi-dev openmpi-bin $*"

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup: not a Debian system; make sure these (or your system's equivalents) are installed:" >&2
  echo "  $PACKAGES" >&2
  exit 0
fi

echo "setup: checking $(echo $PACKAGES | wc -w) Debian packages"
missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
  echo "setup: all installed"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "setup: clbound needs Debian packages that are not installed. Run:" >&2
  echo "  sudo apt-get install -y$missing" >&2
  exit 1
fi

n=$(echo $missing | wc -w)
echo "setup: installing $n package(s):$missing"
echo "setup: on a fresh Debian machine (all of them, with clang, LLVM for PoCL and valgrind) apt-get"
echo "       downloads a few hundred MB and takes roughly 1-5 minutes; its progress follows"
export DEBIAN_FRONTEND=noninteractive
echo "setup: apt-get update"
apt-get update -q
echo "setup: apt-get install"
apt-get install -y -q --no-install-recommends $missing
echo "setup: done"
