#!/usr/bin/env bash
# The GPU verification in one command, on a machine with an NVIDIA GPU:
#
#     bash scripts/gpu_check.sh                 # bert-tiny and encoder-custom-12x768, batch 1 x seq 64
#     bash scripts/gpu_check.sh --iterations 20 # any scripts/gpu_check.py option passes through
#
# Installs the GPU extras into a fresh venv (PyPI's CUDA build of torch, onnxruntime-gpu in place
# of the CPU onnxruntime, tensorrt, pynvml), then runs torch_cuda, ort_cuda, ort_trt and native
# TensorRT (trt_native) at FP32/FP16/INT8 and prints the latency/accuracy table; it is also
# written to reports/gpu-check.md and .json. GPU_CHECK_SKIP_INSTALL=1 reuses the venv as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "gpu_check: nvidia-smi not found: this script needs a machine with an NVIDIA GPU and its driver" >&2
    exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

VENV="${GPU_CHECK_VENV:-.gpu-venv}"
if [ "${GPU_CHECK_SKIP_INSTALL:-0}" != "1" ]; then
    python3 -m venv "$VENV"
    # shellcheck disable=SC1091
    source "$VENV/bin/activate"
    python -m pip install --quiet --upgrade pip
    python -m pip install --quiet "torch>=2.4,<2.15"  # PyPI's Linux x86_64 wheel is the CUDA build
    python -m pip install --quiet -e ".[gpu]"
    # onnxruntime and onnxruntime-gpu install the same module; keep the GPU build only
    python -m pip uninstall --quiet -y onnxruntime onnxruntime-gpu || true
    python -m pip install --quiet "onnxruntime-gpu>=1.19,<2"
else
    # shellcheck disable=SC1091
    source "$VENV/bin/activate"
fi

# ORT's CUDA and TensorRT execution providers dlopen libcudnn / libnvinfer: the pip wheels ship
# them (nvidia-*-cu12, tensorrt_libs) outside the loader's path
LIBS="$(python - <<'PY'
import glob, os, site
dirs = []
for root in site.getsitepackages():
    dirs += sorted(glob.glob(os.path.join(root, "nvidia", "*", "lib"))) + glob.glob(os.path.join(root, "tensorrt_libs"))
print(":".join(dirs))
PY
)"
export LD_LIBRARY_PATH="${LIBS}${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
export HARNESS_CACHE="${HARNESS_CACHE:-$PWD/.harness-cache}"

python -c "import torch; assert torch.cuda.is_available(), 'torch sees no CUDA device'; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
python -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())"
python -c "import tensorrt as t; print('tensorrt', t.__version__)"

mkdir -p reports
python scripts/gpu_check.py --json reports/gpu-check.json --markdown reports/gpu-check.md "$@"
