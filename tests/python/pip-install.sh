#!/bin/sh
# The Python package as a user installs it (issue 20's "done when"): a fresh venv,
# `pip install ./python` (scikit-build-core compiles libclbound with CMake; the
# build requirements, numpy and pytest come from the package registry), then
# `import clbound` from / with no CLBOUND_LIBRARY and no PYTHONPATH; and a wheel
# built by `python -m build` (sdist first, then the wheel from the sdist) holding
# the library. The venv stays for the Python tests (python/ops) that follow.
# PyTorch goes into the venv too (PyPI's `torch`, about 5 GB with its nvidia-*
# packages, about a minute from a near mirror) when CLBOUND_TEST_TORCH=1, and by
# default where CI is set (CLBOUND_TEST_TORCH=0 opts out): the tests that compare
# with PyTorch need it and skip without it (python/tests/conftest.py reads the two
# variables the same way).
# Usage: pip-install.sh SOURCE_DIR VENV_DIR PYTHON3
set -eu
src=$1
venv=$2
python=$3
pip_flags="--disable-pip-version-check --no-input -q"
# CI as the C tests read it (tests/common/test.h: set and not off/0/false/no);
# CLBOUND_TEST_TORCH as every CLBOUND_* boolean (README.md, "Environment").
lower() { printf %s "$1" | tr '[:upper:]' '[:lower:]'; }
case "$(lower "${CI:-}")" in
  ""|off|0|false|no) torch_default=0 ;;
  *) torch_default=1 ;;
esac
case "$(lower "${CLBOUND_TEST_TORCH:-}")" in
  "") torch=$torch_default ;;
  on|1|true|yes) torch=1 ;;
  off|0|false|no) torch=0 ;;
  *) echo "clbound: warning: CLBOUND_TEST_TORCH=\"$CLBOUND_TEST_TORCH\" is not on, off (or 1, 0, true, false, yes, no; any case); using the default ($torch_default)" >&2
     torch=$torch_default ;;
esac
start=$(date +%s)
step() { echo "== $1 ($(($(date +%s) - start)) s so far)"; }

step "python3 -m venv $venv"
rm -rf "$venv" "$venv-dist"
if ! "$python" -m venv "$venv"; then
  echo "pip-install: '$python -m venv' failed (on Debian: apt-get install python3-venv; scripts/setup.sh does)" >&2
  exit 1
fi

step "pip install ./python pytest build"
cd "$src"
env -u CLBOUND_LIBRARY -u PYTHONPATH "$venv/bin/pip" install $pip_flags ./python pytest build

if [ $torch = 1 ]; then
  step "pip install torch (CLBOUND_TEST_TORCH=${CLBOUND_TEST_TORCH:-unset}, CI=${CI:-unset}: about 5 GB)"
  env -u CLBOUND_LIBRARY -u PYTHONPATH "$venv/bin/pip" install $pip_flags --no-cache-dir torch
  "$venv/bin/python" -c 'import torch; print("torch", torch.__version__)'
else
  step "no torch (CLBOUND_TEST_TORCH=1 installs it for the PyTorch tests)"
fi

step "import clbound from /"
want=$(sed -n 's/^#define CLBOUND_VERSION_STRING "\(.*\)"$/\1/p' "$src/include/clbound/version.h")
cd /
env -u CLBOUND_LIBRARY -u PYTHONPATH "$venv/bin/python" - "$want" <<'EOF'
import os, sys
from importlib import metadata
import numpy as np
import clbound

want = sys.argv[1]
print("clbound", clbound.__version__, "from", clbound.__file__)
print("library", clbound.library_path())
pkg = os.path.dirname(os.path.abspath(clbound.__file__))
assert "site-packages" in pkg, f"clbound imported from {pkg}, not the venv's site-packages"
assert clbound.library_path() == os.path.join(pkg, "libclbound.so"), clbound.library_path()
assert clbound.__version__ == want, f"__version__ {clbound.__version__} != the header's {want}"
assert metadata.version("clbound") == want, f"package version {metadata.version('clbound')} != {want}"
assert "numpy" in {r.split()[0].split(">")[0].split("=")[0].lower() for r in metadata.requires("clbound")}
with clbound.Context() as ctx:
    x = ctx.from_numpy(np.array([3, -1, 0, 7], np.int32))
    got = ctx.relu(x).numpy()
    assert got.tolist() == [3, 0, 0, 7], got
print("ok")
EOF

step "python -m build (sdist, then the wheel from the sdist)"
env -u CLBOUND_LIBRARY -u PYTHONPATH "$venv/bin/python" -m build --outdir "$venv-dist" "$src/python" >"$venv-dist.log" 2>&1 ||
  { cat "$venv-dist.log" >&2; exit 1; }
"$venv/bin/python" - "$venv-dist" <<'EOF'
import glob, sys, zipfile
wheels = glob.glob(sys.argv[1] + "/clbound-*.whl")
assert len(wheels) == 1, wheels
names = zipfile.ZipFile(wheels[0]).namelist()
print(wheels[0].rsplit("/", 1)[1], len(names), "files")
for need in ("clbound/__init__.py", "clbound/graph.py", "clbound/py.typed", "clbound/libclbound.so"):
    assert need in names, f"{need} missing from the wheel: {names}"
EOF
step "done"
