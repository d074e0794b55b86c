#!/usr/bin/env bash
# run.sh: issue 22's GPU check, one command (see check.py for what it does).
#
#   make gpu-bundle                 # here, with Go: builds dist/gpu-bundle (about 45 MB)
#   benchmarks/gpu/run.sh           # on the GPU machine (Python, torch with CUDA, transformers)
#   benchmarks/gpu/run.sh --cpu-dry-run   # anywhere: host memory, proves nothing of the GPU path
#
# BUNDLE overrides the bundle folder (default: dist/gpu-bundle of this checkout). The whole run
# is bounded by timeout (5 minutes).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=${BUNDLE:-$here/../../dist/gpu-bundle}
for f in mooncake libmooncake_store.so python/mooncake/store.py; do
	[ -e "$bundle/$f" ] || { echo "FAIL $bundle/$f is missing: run make gpu-bundle and carry dist/gpu-bundle" >&2; exit 1; }
done
if [ "${1:-}" != "--cpu-dry-run" ]; then
	command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
	python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__, "gpu", torch.cuda.get_device_name(0))'
fi
exec timeout 300 python3 "$here/check.py" --bundle "$bundle" "$@"
