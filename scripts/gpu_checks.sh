#!/usr/bin/env bash
# One-shot GPU verification for the GP recalibrators (issue "GP calibration and PBR ... on CPU and CUDA").
#
# Run on a machine with an NVIDIA GPU, torch and gpytorch installed, from the repository root, with
# the four CIFAR-100 files of ../shared/data/predictions copied into .gpu_data/ (git-ignored) and
# carried to the device (the device tool: carry [".gpu_data"]):
#     mkdir -p .gpu_data && cp ../shared/data/predictions/aigen_c100_*.npz .gpu_data/   # here, 22 MB
#     bash scripts/gpu_checks.sh            # results under ${OUT:-gpu_results}/, about 5-8 minutes
#     bash scripts/gpu_checks.sh tests      # a second call: the GP test suite on CUDA, about 4 minutes
# Steps of the first call, most important first, each under its own time limit so that one slow step
# cannot eat the rest (limits add up to 540 s: one device-tool call, 600 s at most):
#   1. CPU vs CUDA agreement of the same fits (bench_gp.py --parts consistency)
#   2. the paper's protocol on one CIFAR-100 model: 10 splits x 8 alpha, n_re = 1000, batched,
#      plus one split's 8 fits alone (bench_gp.py --parts protocol)
#   3. the stability test of the paper's protocol (tests/gp/test_stability.py, PBR_SLOW=1): on each
#      CIFAR-100 model in .gpu_data, the 80 PBR fits (10 splits x 8 alpha, default optimiser) as ONE
#      batch, every fit sound (on an H200, 2026-11-28: the four networks in 58.9 s, all 320 fits
#      sound); each model's PASSED/FAILED line streams to the log, so a step stopped by its limit
#      still says which models passed
#   4. the library's KL-gap study, kl_vs_ece_gap, as a user runs it: Adam (batched on CUDA) for the
#      10 folds, the default L-BFGS for one fold (bench_gp.py --parts klgap)
#   5. the single-fit grid n_re x K on CUDA (bench_gp.py --parts grid)
#   6. float32 vs float64 Monte Carlo draws on the GPU (bench_gp.py --parts precision): the fast-PBR
#      quality bar (benchmarks/RESULTS_fast_pbr.md) on CUDA, whose default draws are float32 too
# `stability`: step 3 alone, under STABILITY_LIMIT seconds (540 by default).
# `crossover`: where a GPU pays (issue 40): one PBR fit per cell of n_re x K x S (300 .. 100,000 rows,
# K = 2 / 10 / 100, S = 8 / 32) on CUDA (one warm process) and on the CPU (one thread per fit, 8 cells
# side by side on the device's 16 cores), under CROSSOVER_LIMIT seconds (500 by default; the table is
# rewritten as cells finish). Writes benchmarks/RESULTS_device.md: per cell the faster device and
# whether device="auto" (CUDA from n x K = 50,000 scores, pbr_core.gp.device: provisional until this
# has run) picks it. Needs nothing carried (sample_data/ only). Then set AUTO_CUDA_MIN_SCORES from it.
# `tests`: the GP test suite with CUDA visible (device="auto" picks the GPU), every failure listed
# (no -x), in 8 processes where pytest-xdist is installed (the device image has it, and 16 cores):
# on an H200 (2026-11-28) its 237 tests took 213 s in 8 processes, the slowest (the stability test
# fit by fit) 141 s alone; 4 processes had not finished in 200 s.
# On an H200 (2026-11-28) consistency, protocol, klgap, grid and precision took 26 + 31 + 48 + 41 + 32 s.
# At most 8 files land in $OUT (the device tool returns 8).
# DEVICE=cpu runs the same steps on the CPU where they can run there (a check of this script on a
# machine without a GPU; consistency then only says "skipped"), with PROTOCOL_SPLITS=1 to keep it short.
# bench_gp.py rewrites its sections of benchmarks/RESULTS_gp.md; the updated file and every log are
# copied to $OUT after each step (a device machine returns only what is under $OUT).
set -u
OUT=${OUT:-gpu_results}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-}:$(pwd)
pip install -q --no-deps -e . >/dev/null 2>&1 || true   # the package itself (torch/gpytorch are already there)
python3 - <<'PY' | tee "$OUT/steps.txt"
import torch, gpytorch
print("torch", torch.__version__, "gpytorch", gpytorch.__version__, "cuda", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-")
PY
step() {  # step NAME SECONDS COMMAND...
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    timeout -k 10 "$limit" "$@" >"$OUT/$name.log" 2>&1
    echo "$name: exit $? in $((SECONDS - t0)) s" | tee -a "$OUT/steps.txt"
    cp benchmarks/RESULTS_gp.md "$OUT/RESULTS_gp.md"
}
if [ "${1:-}" = tests ]; then
    XDIST=$(python3 -c "import xdist" 2>/dev/null && echo "-n 8")
    step tests_gp 560 python3 -m pytest -q -rfE --tb=short $XDIST tests/gp -p no:cacheprovider
    tail -n 15 "$OUT/tests_gp.log"
    exit 0
fi
if [ "${1:-}" = stability ]; then   # the stability step alone, with most of one call's 600 s
    PBR_SLOW=1 PBR_SHARED_PREDICTIONS=$(pwd)/.gpu_data step stability "${STABILITY_LIMIT:-540}" \
        python3 -m pytest -v -rA --tb=short tests/gp/test_stability.py -k paper_protocol -p no:cacheprovider
    tail -n 15 "$OUT/stability.log"
    exit 0
fi
if [ "${1:-}" = crossover ]; then   # the device crossover alone (issue 40), one device call
    LIMIT=${CROSSOVER_LIMIT:-500}
    timeout -k 10 $((LIMIT + 40)) python3 benchmarks/bench_device.py --time-limit "$LIMIT" --jobs 8 \
        >"$OUT/crossover.log" 2>&1
    echo "crossover: exit $?" | tee -a "$OUT/steps.txt"
    cp benchmarks/RESULTS_device.md "$OUT/RESULTS_device.md" 2>/dev/null
    tail -n 40 "$OUT/RESULTS_device.md" 2>/dev/null || tail -n 20 "$OUT/crossover.log"
    exit 0
fi
DEVICE=${DEVICE:-cuda}
SPLITS=${PROTOCOL_SPLITS:-10}
step consistency 45 python3 benchmarks/bench_gp.py --device "$DEVICE" --parts consistency
step protocol 55 python3 benchmarks/bench_gp.py --device "$DEVICE" --parts protocol --protocol-splits "$SPLITS"
if [ "$DEVICE" != cuda ]; then
    echo "stability: skipped (one by one on a CPU it takes hours)" | tee -a "$OUT/steps.txt"
else
    ls .gpu_data/aigen_c100_*.npz >/dev/null 2>&1 ||
        echo "stability: no CIFAR-100 files in .gpu_data/ (copy them and carry .gpu_data); its test skips" | tee -a "$OUT/steps.txt"
    PBR_SLOW=1 PBR_SHARED_PREDICTIONS=$(pwd)/.gpu_data step stability 250 \
        python3 -m pytest -v -rA --tb=short tests/gp/test_stability.py -k paper_protocol -p no:cacheprovider
fi
step klgap 75 python3 benchmarks/bench_gp.py --device "$DEVICE" --parts klgap --protocol-splits "$SPLITS"
step grid 65 python3 benchmarks/bench_gp.py --device "$DEVICE" --parts grid --time-limit 30
step precision 50 python3 benchmarks/bench_gp.py --device "$DEVICE" --parts precision
tail -n 3 "$OUT"/*.log
