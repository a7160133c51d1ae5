#!/bin/sh
# check-layers.sh: fails if a file includes or calls into a folder above its own
# layer, or if files form a dependency cycle (docs/design.md, "Layers"). Run by
# `make test` (ctest layout/layers) and by hand: scripts/check-layers.sh
set -eu
exec python3 "$(dirname "$0")/check-layers.py" "$(cd "$(dirname "$0")/.." && pwd)"
