#!/usr/bin/env bash
# Run here (not on the GPU machine) before a session's first device call: puts
# the Debian packages that scripts/gpu_check.sh unpacks there (OpenBLAS and
# GoogleTest, which the GPU machine lacks and cannot download) into .debs/,
# kept out of git through .git/info/exclude. Every device call then carries
# [".debs"]. A fresh checkout has no .debs/; this is how to get it back.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exclude="$(git rev-parse --absolute-git-dir)/info/exclude"
mkdir -p .debs "$(dirname "$exclude")"
grep -qx "/.debs/" "$exclude" 2>/dev/null || echo "/.debs/" >> "$exclude"
(cd .debs && apt-get download libopenblas0-pthread libopenblas-pthread-dev libopenblas-dev libgtest-dev libgmock-dev \
  googletest)
ls -1 .debs
