#!/bin/sh
# cold-process-no-peers.sh PYTHON COLD_PROCESS_PY TOOL: bench/cold-process.py
# where neither JAX nor PyTorch imports (no-torch/ first on PYTHONPATH) says so
# for each, still runs clbound cold and warm (3 iterations, 1 round), checks its
# final loss against the float64 reference, reports that the cold process
# handed its program to the store helper, and runs the driver alone (`clbound
# bench build-floor`: a one-line kernel from an empty PoCL cache). Not timed.
here=$(dirname "$0")
out=$(PYTHONPATH="$here/no-torch" PYTHONDONTWRITEBYTECODE=1 "$1" "$2" --clbound "$3" --rounds 1 --iterations 3 2>&1)
rc=$?
printf '%s\n' "$out"
fail() { echo "cold-process-no-peers: $*" >&2; exit 1; }
[ "$rc" = 0 ] || fail "exit status $rc, want 0"
for want in 'jax: skipped: jax not installed (pip install jax)' 'torch: skipped: torch not installed (pip install torch)' \
            'clbound 0.67300[0-9]* (ok)' '^clbound, cold' '^clbound, warm' 'handed to the store helper 1' \
            '^the driver alone: a one-line kernel, cold' 'a one-line kernel built from source [0-9]* ms, its first launch'; do
  printf '%s\n' "$out" | grep -q -- "$want" || fail "no line matching: $want"
done
echo "cold-process-no-peers: ok"
