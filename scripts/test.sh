#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs all of kiln's tests: the C++
# GoogleTest programs through ctest, then the Python suite through pytest.
# CUDA tests skip on machines without a GPU.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="$(bash "$ROOT/scripts/setup.sh" | tail -n 1)"

echo "== C++ tests (ctest)"
"$(dirname "$PYTHON")/ctest" --test-dir "$ROOT/build/main" --output-on-failure -j "$(nproc)"

if [ -z "${KILN_SKIP_SANITIZE:-}" ]; then
  echo "== C++ tests under ASan and UBSan (scripts/sanitize.sh)"
  bash "$ROOT/scripts/sanitize.sh" "$PYTHON"
fi

echo "== Python tests (pytest)"
cd "$ROOT"
"$PYTHON" -m pytest -q -p no:cacheprovider tests/python "$@"
