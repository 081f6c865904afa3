#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs kiln's main job on its
# built-in default model (python -m kiln; options: --help).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="$(bash "$ROOT/scripts/setup.sh" | tail -n 1)"
cd "$ROOT"
exec "$PYTHON" -m kiln "$@"
