#!/usr/bin/env bash
# One short GPU check: profile every visible GPU in default mode and keep the evidence.
#
#   bash bench/gpu_check.sh [OUTPUT_DIR]
#
# Writes OUTPUT_DIR (default: bench/results/gpu/<date>-<host>) with result.json, report.md,
# roofline.png, compact.txt, references.txt (an independent torch D2D copy and 8192^3 matmul
# measured in the same run, with the profiler/reference ratios) and nvidia-smi.txt.
# Needs a CUDA (or ROCm) build of torch already installed, e.g. `pip install torch==2.13.0`.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-bench/results/gpu/$(date -u +%Y%m%d)-$(hostname -s)}}"
mkdir -p "$out"

python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no GPU visible to torch')"
python3 -m pip install --quiet --no-deps -e . 2>/dev/null || python3 -m pip install --quiet --no-deps .
python3 -m pip install --quiet "jsonschema>=4.17" "matplotlib>=3.7" "nvidia-ml-py>=12.535" || true

command -v nvidia-smi >/dev/null && nvidia-smi > "$out/nvidia-smi.txt" || true
start=$(date +%s)
python3 -m roofline_profiler.cli profile --json "$out/result.json" --markdown "$out/report.md" \
    --plot "$out/roofline.png" --compact "$out/compact.txt" | tee "$out/summary.txt"
echo "profile wall time: $(( $(date +%s) - start )) s" | tee -a "$out/summary.txt"
python3 bench/gpu_reference.py "$out/result.json" | tee "$out/references.txt"
