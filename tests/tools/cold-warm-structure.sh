#!/bin/sh
# cold-warm-structure.sh CLBOUND: the structure of a cold and a warm start (issue 32,
# item 5; counts, not times). For both demo workloads under the dynamic and
# automatic policies, with a program cache of the test's own:
#  * cold (empty cache): at most one program built from source per plan, at least
#    one; each kernel compiled once (kernels compiled = kernels first launched);
#    nothing built or first launched after the first step;
#  * warm (the same cache, a new process): no program built from source; every
#    plan's program loaded from the disk cache; each kernel created once.
set -eu
tool="$1"
dir=$(mktemp -d)
. "$(dirname "$0")/../common/rm-retry.sh"  # rm_retry: the store helper may still write the cache
trap 'rm_retry "$dir"' EXIT
fail() { echo "cold-warm-structure: $*" >&2; exit 1; }
num() { sed -n "s/.*\"$2\":\\([0-9][0-9]*\\).*/\\1/p" "$1" | head -n 1; }
for w in xla-mlp wide-mlp; do
  for p in dynamic automatic; do
    export CLBOUND_CACHE_DIR="$dir/cache-$w-$p"
    for run in cold warm; do
      out="$dir/$w-$p-$run.json"
      "$tool" demo --workload "$w" --policy "$p" --iterations 12 --cache user --no-check --quiet --json 2> "$dir/err.txt" |
        grep '^{' > "$out" || fail "$w $p $run: the demo failed: $(cat "$dir/err.txt")"
      plans=$(num "$out" plans_compiled); built=$(num "$out" program_builds); disk=$(num "$out" cache_hits_disk)
      kc=$(num "$out" kernels_compiled); fl=$(num "$out" first_launches)
      after=$(num "$out" builds_after_first); fl_after=$(num "$out" first_launches_after_first)
      echo "$w $p $run: plans $plans, built from source $built, from the disk cache $disk, kernels compiled $kc, first launched $fl"
      [ "$plans" -ge 1 ] || fail "$w $p $run: no plan compiled"
      # the process's phases are reported (issue 32): start-up, build, first launch, free (the store)
      for k in context_new_ms build_ms first_launch_ms; do [ -n "$(num "$out" $k)" ] || fail "$w $p $run: no $k"; done
      grep -q '"free_s":[0-9]' "$out" || fail "$w $p $run: no free_s"
      [ "$kc" -eq "$fl" ] || fail "$w $p $run: $kc kernels compiled for $fl first launches (a kernel compiled twice, or one never run)"
      [ "$after" -eq 0 ] && [ "$fl_after" -eq 0 ] || fail "$w $p $run: $after builds and $fl_after first launches after the first step"
      if [ "$run" = cold ]; then
        [ "$built" -ge 1 ] && [ "$built" -le "$plans" ] || fail "$w $p cold: $built programs built from source for $plans plan(s)"
        [ "$disk" -eq 0 ] || fail "$w $p cold: $disk disk cache hits in an empty cache"
      else
        [ "$built" -eq 0 ] || fail "$w $p warm: $built programs built from source"
        [ "$disk" -ge "$plans" ] || fail "$w $p warm: $disk programs from the disk cache for $plans plan(s)"
      fi
      # the cold run's store helper finishes first (a run during its work builds
      # from source: docs/observability.md, "Store modes")
      [ "$run" = warm ] || "$tool" cache info > /dev/null
    done
  done
done
echo "cold-warm-structure: ok"
