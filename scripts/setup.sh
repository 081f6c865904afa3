#!/usr/bin/env bash
# Sets up everything kiln needs on a fresh Debian machine, idempotently:
# Debian packages (OpenBLAS, GoogleTest, ccache), a virtual environment with
# pinned PyPI packages (cached outside the clone, keyed by the requirements
# file), and a build of kiln (C++ core, tests, Python module) installed into
# that environment. Prints the venv's python path as the last line.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${KILN_CACHE:-$HOME/.cache/kiln}"
mkdir -p "$CACHE"

log() { echo "[kiln setup] $*" >&2; }

# ---- Debian packages --------------------------------------------------------
need_pkgs=()
for pkg in libopenblas-dev libgtest-dev ccache g++; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_pkgs+=("$pkg")
done
if ((${#need_pkgs[@]})); then
  log "installing Debian packages: ${need_pkgs[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >&2
fi

# ---- Python environment -----------------------------------------------------
PY="${KILN_PYTHON:-python3}"
req_hash="$(cat "$ROOT/requirements/dev.txt" | sha256sum | cut -c1-12)"
VENV="${KILN_VENV:-$CACHE/venv-$req_hash}"
if [ ! -x "$VENV/bin/python" ] || [ ! -f "$VENV/.complete" ]; then
  log "creating virtual environment $VENV"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q -r "$ROOT/requirements/dev.txt" >&2
  touch "$VENV/.complete"
fi

# ---- Build and install kiln -------------------------------------------------
export CCACHE_DIR="${CCACHE_DIR:-$CACHE/ccache}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"  # paths inside the clone hash relative: clones share the cache
export PATH="$VENV/bin:$PATH"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
log "building kiln (C++ core, tests, Python module)"
"$VENV/bin/pip" install -q --no-build-isolation --no-deps \
  -Cbuild-dir="$ROOT/build/main" \
  -Ccmake.define.KILN_BUILD_TESTS=ON \
  -Ccmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -Ccmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=ccache \
  "$ROOT" >&2
echo "$VENV/bin/python"
