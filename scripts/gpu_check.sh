#!/usr/bin/env bash
# On the lent GPU machine (see DESIGN.md section 13): build kiln there with its
# CUDA backend against the machine's own torch and Python, run the C++ tests
# and the Python suite (CUDA tests included). OpenBLAS and GoogleTest travel as
# Debian packages in .debs/ (unpacked under /tmp, never into /). Logs go to $OUT.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-/tmp/kiln-out}"; mkdir -p "$OUT"
DEBS=/tmp/kiln-debs
if ! compgen -G "$ROOT/.debs/*.deb" > /dev/null; then
  echo "gpu_check.sh: no .debs/*.deb here: run scripts/fetch_debs.sh on the development machine and carry [\".debs\"]" >&2
  exit 2
fi
mkdir -p "$DEBS" && for f in "$ROOT"/.debs/*.deb; do dpkg -x "$f" "$DEBS"; done
LIBDIR="$DEBS/usr/lib/x86_64-linux-gnu"
export LD_LIBRARY_PATH="$LIBDIR/openblas-pthread:$LIBDIR:${LD_LIBRARY_PATH:-}"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch; print('torch', torch.__version__)"; nvcc --version | tail -1; } | tee "$OUT/env.txt"
cd "$ROOT"
time python3 -m pip install -q --no-build-isolation --no-deps \
  -Cbuild-dir=build/gpu -Ccmake.define.KILN_BUILD_TESTS=ON \
  -Ccmake.define.BLA_VENDOR=OpenBLAS -Ccmake.define.CMAKE_LIBRARY_PATH="$LIBDIR/openblas-pthread" \
  -Ccmake.define.CBLAS_INCLUDE_DIR="$DEBS/usr/include/x86_64-linux-gnu/openblas-pthread" \
  -Ccmake.define.CMAKE_PREFIX_PATH="$DEBS/usr" -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
  -Ccmake.build-type="${KILN_BUILD_TYPE:-Release}" . > "$OUT/build.log" 2>&1
echo "build rc=$?"; tail -5 "$OUT/build.log"
[ -n "${KILN_GPU_BUILD_ONLY:-}" ] && exit 0
ctest --test-dir build/gpu -j 16 > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"; tail -3 "$OUT/ctest.log"
python3 -m pytest -q -p no:cacheprovider tests/python "$@" > "$OUT/pytest.log" 2>&1; echo "pytest rc=$?"; tail -15 "$OUT/pytest.log"
