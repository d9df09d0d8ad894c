"""``scripts/gpu_check.sh`` / ``gpu_check.py``: the GPU table, exercised where no GPU is.

The shell script must parse and refuse a machine without an NVIDIA driver before installing
anything; its Python part builds the same table from any providers, so CPU runtimes fill it
here and the GPU providers show their exact skip reasons.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import PATIENCE

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def test_the_shell_script_parses_and_refuses_a_machine_without_a_gpu(tmp_path):
    bash = shutil.which("bash")
    assert bash is not None
    assert subprocess.run([bash, "-n", str(SCRIPT)], capture_output=True).returncode == 0
    if shutil.which("nvidia-smi"):  # pragma: no cover - a GPU machine runs the script for real
        pytest.skip("nvidia-smi is present: the no-GPU refusal cannot show here")
    env = {**os.environ, "PATH": os.path.dirname(bash) + os.pathsep + "/usr/bin:/bin", "GPU_CHECK_VENV": str(tmp_path / "v")}
    proc = subprocess.run([bash, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=PATIENCE)
    assert proc.returncode == 2
    assert "nvidia-smi not found: this script needs a machine with an NVIDIA GPU" in proc.stderr
    assert not (tmp_path / "v").exists()  # refused before creating a venv or installing anything


def _gpu_check():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gpu_check
    finally:
        sys.path.pop(0)
    return gpu_check


def test_the_table_is_built_from_the_backend_registry_on_cpu(tmp_path, capsys):
    gpu_check = _gpu_check()
    out = tmp_path / "t.json"
    code = gpu_check.main(["--models", "bert-tiny", "--providers", "ort_cpu", "ov_cpu", "torch_cuda", "trt_native",
                           "--seq", "16", "--iterations", "3", "--warmup", "1", "--threads", "1",
                           "--json", str(out), "--markdown", str(tmp_path / "t.md")])
    assert code == 0
    payload = json.loads(out.read_text())
    cells = {(r["provider"], p): c for r in payload["rows"] for p, c in r["cells"].items()}
    assert cells[("ort_cpu", "fp32")]["max_err"] < 1e-4 and cells[("ort_cpu", "fp32")]["ms"] > 0
    assert 0 < cells[("ov_cpu", "int8")]["max_err"] < 1.0  # INT8 moves the logits, not wildly
    assert cells[("torch_cuda", "fp16")] == {"skip": "no CUDA device (torch.cuda.is_available() is False)"}
    assert "skip" in cells[("trt_native", "fp32")]
    text = (tmp_path / "t.md").read_text()
    assert "| model | provider | FP32 ms | FP32 max err | FP16 ms | FP16 max err | INT8 ms | INT8 max err |" in text
    assert "batch 1 x seq 16" in text and "- bert-tiny fp16 torch_cuda: skip: no CUDA device" in text


def test_bad_usage_is_one_line_and_exit_2(capsys):
    gpu_check = _gpu_check()
    assert gpu_check.main(["--providers", "trt_nativ"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpu_check: error: --providers: unknown provider 'trt_nativ'") and "trt_native" in err
    assert gpu_check.main(["--seq", "0"]) == 2
