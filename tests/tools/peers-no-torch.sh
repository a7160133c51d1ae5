#!/bin/sh
# peers-no-torch.sh PYTHON PEERS_PY TOOL: bench/peers.py where PyTorch cannot be
# imported (no-torch/ first on PYTHONPATH) prints its skip line and exits 0.
here=$(dirname "$0")
out=$(PYTHONPATH="$here/no-torch" PYTHONDONTWRITEBYTECODE=1 "$1" "$2" --clbound "$3")
rc=$?
printf '%s\n' "$out"
[ "$rc" = 0 ] || { echo "peers-no-torch: exit status $rc, want 0" >&2; exit 1; }
printf '%s\n' "$out" | grep -q 'peers.py: skipping: PyTorch is not installed' ||
  { echo "peers-no-torch: no skip line" >&2; exit 1; }
