#!/usr/bin/env bash
# The GPU check: the worker on onnxruntime's CUDA execution provider, measured with the batching
# item (6) against the bare batched model on the same provider, in one run. Nothing requires a
# GPU: without one (no nvidia-smi, or no CUDA provider library) this says so and exits 0.
#
#   bash bench/gpu-check.sh            # writes bench/results/gpu/latest.{json,md,svg}
#
# The CUDA build of onnxruntime-node must be installed already (the GPU machine has no network):
# `ONNXRUNTIME_NODE_INSTALL=cuda12 pnpm install --frozen-lockfile`, as the gpu-worker image does.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no GPU here (nvidia-smi finds none); nothing run"
  exit 0
fi
provider=$(find node_modules/.pnpm -path '*onnxruntime-node*' -name 'libonnxruntime_providers_cuda.so' 2>/dev/null | head -1)
if [ -z "$provider" ]; then
  echo "gpu-check: onnxruntime-node has no CUDA provider here; install it with ONNXRUNTIME_NODE_INSTALL=cuda12 (see the header)"
  exit 0
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
out=bench/results/gpu
mkdir -p "$out"
# Item 6 only; the worker and the bare model both on CUDA (the worker falls back to the CPU
# provider for any operator CUDA lacks, as in production).
pnpm bench --only 6 --out "$out" --env TASKLINE_EXECUTION_PROVIDER=cuda
echo "gpu-check: report in $out/latest.md"
