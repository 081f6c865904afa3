#!/usr/bin/env bash
# One step of a session on the lent GPU machine, each sized for one device
# call (at most 10 minutes), so a session issues them back to back while the
# machine is warm (it is released 30 s after a call; a cold start costs about
# 4.5 minutes of the session's 30). A step builds kiln first (96 s, through
# scripts/gpu_check.sh) unless a warm machine already has it installed.
# Results go to $OUT; carry [".debs"] (scripts/fetch_debs.sh makes it here; see scripts/gpu_check.sh).
#
#   bash scripts/gpu_step.sh check          # build, every C++ test, pytest -k cuda
#   bash scripts/gpu_step.sh first          # check, then the short measurements (graph addresses,
#                                           # number precision, memory probes): a session's first call
#   bash scripts/gpu_step.sh bench-1|2|3    # bench/run.py, three workloads each, all four backends
#   bash scripts/gpu_step.sh quick W,W...    # bench/run.py, kiln and reduce-overhead only (a check of a change)
#                                           # (bench steps: env PROCESSES=N times each row in N fresh processes;
#                                           # run 13's bench-N calls, 15 processes each, took 299-368 s;
#                                           # quick with PROCESSES=3 ran 3 b1 rows in about 500 s (run 15:
#                                           # a fourth row did not fit in 560 s), so 3 rows a call at most;
#                                           # run 19, each call on a fresh machine with its 100 s build: 2 b1
#                                           # rows in 297 s, and resnet50_b1 + bert_base_b32 past 370 s;
#                                           # run 20: linear24x8192_b8 + resnet50_b32 in 455 s, vit_b_16_b32
#                                           # + bert_base_b32 in 351 s, each with its build; run 21 on
#                                           # one warm machine: gpt2_b1 + gpt2_b32 in 382 s, bert_base_b32
#                                           # alone 168 s, and three b1 rows + a b32 row past 570 s)
#   bash scripts/gpu_step.sh profile W...   # bench/kernel_profile.py per workload, --backends $BACKENDS (eager,kiln)
#   bash scripts/gpu_step.sh host W...      # bench/host_profile.py (kiln, reduce-overhead) per workload
#   bash scripts/gpu_step.sh zoo fp16|bf16  # bench/zoo_gpu.py, one dtype per call (docs/models.md)
#   bash scripts/gpu_step.sh soak           # bench/soak.py --device cuda (docs/reliability.md)
#   bash scripts/gpu_step.sh pick K [R]     # pytest tests/python -k K, and ctest -R R (a short call)
#   bash scripts/gpu_step.sh probes         # bench/l2_prefetch_probe.py, then bench/import_stage_split.py for
#                                           # vit_b_16, bert and resnet50 on cuda (run 23's open questions)
#   bash scripts/gpu_step.sh py FILE [ARG...] # a Python script of the tree (a diagnostic), output in $OUT/py.log
#   bash scripts/gpu_step.sh ncu REGEX FILE [ARG...] # ncu's counters for the first kernel matching REGEX that the
#                                           # script launches, in $OUT/ncu_N.txt (N counts the calls of one command)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-/tmp/kiln-out}"; mkdir -p "$OUT"
export OUT
LIBDIR=/tmp/kiln-debs/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH="$LIBDIR/openblas-pthread:$LIBDIR:${LD_LIBRARY_PATH:-}"
step="${1:?usage: gpu_step.sh check|first|bench-1|bench-2|bench-3|quick W,W|profile W...|host W...|zoo fp16|bf16|soak|pick K [R]|probes|py FILE [ARG...]|ncu REGEX FILE [ARG...]}"
shift

ensure_built() {
  if (cd /tmp && python3 -c "import kiln._kiln" 2>/dev/null); then return 0; fi
  KILN_GPU_BUILD_ONLY=1 bash "$ROOT/scripts/gpu_check.sh" > "$OUT/build_step.txt" 2>&1
  tail -2 "$OUT/build_step.txt"
}

# Rows of earlier calls travel as bench/results/*.jsonl (copy each call's $OUT/bench.jsonl there):
# they are merged in, so the last call's bench.md holds the whole table.
bench() {
  ensure_built
  local merges=() f
  for f in "$ROOT"/bench/results/*.jsonl; do [ -f "$f" ] && merges+=(--merge "$f"); done
  cd "$ROOT/bench" && python3 run.py --workloads "$1" --backends "${2:-eager,inductor,reduce-overhead,kiln}" \
    --processes "${PROCESSES:-1}" "${merges[@]}" --json "$OUT/bench.jsonl" --out "$OUT/bench.md" > "$OUT/bench_$step.log" 2>&1
  echo "bench rc=$?"; tail -30 "$OUT/bench.md"
}

case "$step" in
  check)
    bash "$ROOT/scripts/gpu_check.sh" -k cuda > "$OUT/check.txt" 2>&1
    tail -25 "$OUT/check.txt"; grep -E "^FAILED|\*\*\*Failed" "$OUT/pytest.log" "$OUT/ctest.log" | head -20 ;;
  first)
    bash "$ROOT/scripts/gpu_step.sh" check
    cd "$ROOT"
    python3 bench/cuda_graph_addresses.py > "$OUT/graph_addresses.txt" 2>&1; echo "graph addresses rc=$?"
    python3 bench/scalar_precision.py --device cuda > "$OUT/scalar_precision.txt" 2>&1; echo "scalar precision rc=$?"
    python3 -m kiln.memory_probe --layers 24 --width 8192 --device cuda --dtype fp16 --png "$OUT/memory_fp16.png" \
      > "$OUT/memory_fp16.txt" 2>&1; echo "memory probe fp16 rc=$?"
    python3 -m kiln.memory_probe --layers 24 --width 8192 --device cuda --dtype fp32 --precision fp16 --donate \
      --png "$OUT/memory_donate.png" > "$OUT/memory_donate.txt" 2>&1; echo "memory probe donate rc=$?"
    for f in graph_addresses scalar_precision memory_fp16 memory_donate; do
      echo "== $f"; grep -v -i warn "$OUT/$f.txt" | tail -16
    done ;;
  bench-1) bench linear24x8192_b8,resnet50_b1,resnet50_b32 ;;
  bench-2) bench vit_b_16_b1,vit_b_16_b32,bert_base_b1 ;;
  bench-3) bench bert_base_b32,gpt2_b1,gpt2_b32 ;;
  quick) bench "${1:?quick needs workloads, e.g. resnet50_b32,gpt2_b1}" reduce-overhead,kiln ;;
  host)
    ensure_built
    for w in "$@"; do
      (cd "$ROOT/bench" && python3 host_profile.py "$w" --iters 100 --top 25) > "$OUT/hprof_$w.txt" 2>&1
      grep -v -i warn "$OUT/hprof_$w.txt" | grep -E "^==|^--|us  x" | head -24
    done ;;
  profile)
    ensure_built
    for w in "$@"; do
      (cd "$ROOT/bench" && python3 kernel_profile.py "$w" --backends "${BACKENDS:-eager,kiln}" --top "${TOP:-12}") > "$OUT/kprof_$w.txt" 2>&1
      grep -v -i warn "$OUT/kprof_$w.txt" | tail -60
    done ;;
  zoo)
    ensure_built
    dtype="${1:?zoo needs a dtype: fp16 or bf16 (one per call)}"
    (cd "$ROOT/bench" && python3 zoo_gpu.py --dtypes "$dtype" --out "$OUT/zoo_gpu_$dtype") > "$OUT/zoo_$dtype.log" 2>&1
    echo "zoo rc=$?"; tail -5 "$OUT/zoo_$dtype.log" ;;
  soak)
    ensure_built
    python3 "$ROOT/bench/soak.py" --device cuda --calls 100000 --compiles 1000 --json "$OUT/soak.json" \
      > "$OUT/soak.log" 2>&1
    echo "soak rc=$?"; tail -15 "$OUT/soak.log" ;;
  pick)
    ensure_built
    (cd "$ROOT" && python3 -m pytest -q -p no:cacheprovider tests/python -k "${1:?pick needs a pytest -k expression}") \
      > "$OUT/pick.log" 2>&1
    echo "pytest rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/pick.log" | tail -12
    if [ -n "${2:-}" ]; then
      ctest --test-dir "$ROOT/build/gpu" -j 16 -R "$2" > "$OUT/pick_ctest.log" 2>&1; echo "ctest rc=$?"
      tail -4 "$OUT/pick_ctest.log"
    fi ;;
  probes)
    ensure_built
    (cd "$ROOT/bench" && python3 l2_prefetch_probe.py) > "$OUT/l2_prefetch.txt" 2>&1
    echo "l2 prefetch probe rc=$?"; tail -30 "$OUT/l2_prefetch.txt"
    for m in vit_b_16 bert resnet50; do
      (cd "$ROOT/bench" && python3 import_stage_split.py "$m" --device cuda) > "$OUT/import_split_$m.txt" 2>&1
      echo "import split $m rc=$?"; grep -v -i warn "$OUT/import_split_$m.txt" | tail -22
    done ;;
  py)
    ensure_built
    (cd "$ROOT" && python3 "${1:?py needs a script}" "${@:2}") > "$OUT/py.log" 2>&1
    echo "py rc=$?"; tail -40 "$OUT/py.log" ;;
  ncu)
    ensure_built
    regex="${1:?ncu needs a kernel name regex and a script}"; n=1
    while [ -f "$OUT/ncu_$n.txt" ]; do n=$((n + 1)); done
    (cd "$ROOT" && ncu --clock-control none -k "regex:$regex" -c 1 --section SpeedOfLight --section Occupancy \
      --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
      --section ComputeWorkloadAnalysis python3 "${2:?ncu needs a script}" "${@:3}") > "$OUT/ncu_$n.txt" 2>&1
    echo "ncu rc=$? ($OUT/ncu_$n.txt)"; grep -E "Duration|Registers|Achieved Occupancy|Theoretical Occupancy|Memory Throughput|Block Limit|Waves|Issued Ipc|No Eligible|Warp Cycles Per Issued" "$OUT/ncu_$n.txt" | head -24 ;;
  *) echo "unknown step '$step'" >&2; exit 2 ;;
esac
