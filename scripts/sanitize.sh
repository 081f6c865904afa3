#!/usr/bin/env bash
# Builds kiln's C++ core and GoogleTest programs with the address and
# undefined-behaviour sanitizers (no Python module, no CUDA plugin) and runs
# them through ctest, with a bounded mutation run of each fuzz target
# (KILN_FUZZ_SECONDS, default 20 s each). Any sanitizer report fails the run. Called by
# scripts/test.sh after setup (it uses the venv's cmake, ninja and ccache).
# Built at -O1 with line tables only: quick to compile on CI's two cores, and
# reports still name file and line.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$(dirname "${1:?usage: sanitize.sh PATH/TO/venv/bin/python}")"
BUILD="$ROOT/build/sanitize"
export CCACHE_DIR="${CCACHE_DIR:-${KILN_CACHE:-$HOME/.cache/kiln}/ccache}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"  # paths inside the clone hash relative: clones share the cache
export CCACHE_NOHASHDIR=1  # and so does the -g1 build (its line tables may name another clone's folder)
"$BIN/cmake" -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_MAKE_PROGRAM="$BIN/ninja" \
  -DCMAKE_BUILD_TYPE= -DCMAKE_CXX_FLAGS="-O1 -g1" -DKILN_SANITIZE=ON -DKILN_BUILD_TESTS=ON \
  -DKILN_BUILD_PYTHON=OFF -DKILN_ENABLE_CUDA=OFF -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -DKILN_FUZZ_SECONDS="${KILN_FUZZ_SECONDS:-20}" > "$BUILD.configure.log"
"$BIN/cmake" --build "$BUILD" -j "$(nproc)"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
"$BIN/ctest" --test-dir "$BUILD" --output-on-failure -j "$(nproc)"
