#!/usr/bin/env bash
# One short GPU check: profile every visible GPU in default mode and keep the evidence.
#
#   bash bench/gpu_check.sh [OUTPUT_DIR]
#
# Writes OUTPUT_DIR (default: bench/results/gpu/<date>-<host>) with
#   result.json, report.md, roofline.png, compact.txt, summary.txt   the default profile
#   references.txt      an independent torch D2D copy and 8192^3 matmul timed in the same run,
#                       with the profiler/reference ratios
#   model-*.{json,md}   a profile with two full-size model plans (a dense and a MoE preset)
#   fp8-*.{json,md}     a quick profile with the FP8 W8A8 format's roofline (torch's _scaled_mm)
#                       beside bf16's in the same run: its peak, ridge point and minimum batch
#   model_vs_transformers.md   the predicted decode step of Llama 3.1 8B (random weights) against
#                       its real transformers decode step (only where transformers is installed)
#   nvidia-smi.txt, steps.txt  the device, and each step's exit status and wall time
# Needs a CUDA (or ROCm) build of torch already installed, e.g. `pip install torch==2.13.0`.
# Installs nothing: where the project is not installed it runs from this source tree. Each step
# has its own time limit and a failing step does not stop the ones after it.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-bench/results/gpu/$(date -u +%Y%m%d)-$(hostname -s)}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1

python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no GPU visible to torch')" ||
    exit 1
if ! python3 -c "import roofline_profiler" 2>/dev/null; then
    export PYTHONPATH="$PWD/profiler:$PWD/cli:$PWD/operator${PYTHONPATH:+:$PYTHONPATH}"
fi
roofline=(python3 -m roofline_profiler.cli.commands)

# step NAME SECONDS COMMAND...: run COMMAND with a time limit, log its status and wall time.
step() {
    local name=$1 limit=$2 start rc
    shift 2
    start=$(date +%s)
    echo "== $name (limit ${limit} s)"
    timeout --kill-after=10 "$limit" "$@"
    rc=$?
    echo "$name: exit $rc, $(( $(date +%s) - start )) s" | tee -a "$out/steps.txt"
}

command -v nvidia-smi >/dev/null && nvidia-smi > "$out/nvidia-smi.txt"
step profile 150 "${roofline[@]}" profile --json "$out/result.json" --markdown "$out/report.md" \
    --plot "$out/roofline.png" --compact "$out/compact.txt" 2>&1 | tee "$out/summary.txt"
[ -s "$out/result.json" ] &&
    step references 60 python3 bench/gpu_reference.py "$out/result.json" 2>&1 |
    tee "$out/references.txt"
step models 100 "${roofline[@]}" profile --device cuda:0 --model llama-3.1-8b \
    --model qwen3-30b-a3b --context 4096,32768 --json "$out/model-result.json" \
    --markdown "$out/model-report.md" 2>&1 | tee "$out/model-summary.txt"
step fp8 60 "${roofline[@]}" profile --device cuda:0 --quick --weight-format fp8-w8a8 \
    --json "$out/fp8-result.json" --markdown "$out/fp8-report.md" 2>&1 | tee "$out/fp8-summary.txt"
if python3 -c "import transformers" 2>/dev/null; then
    step transformers 120 python3 bench/model_vs_transformers.py --device cuda:0 \
        --dtype bfloat16 --preset llama-3.1-8b --out "$out/model_vs_transformers.md" 2>&1 |
        tee "$out/model_vs_transformers.log"
fi
cat "$out/steps.txt"
