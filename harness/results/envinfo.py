"""The environment a result was measured in.

Every record carries it, so a number is never read without knowing the library versions,
CPU and thread settings behind it; the ``fingerprint`` is what baselines compare to refuse
apples-to-oranges comparisons.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
from functools import lru_cache
from typing import Any

from harness.core.hooks import machine_info

LIBRARIES = ("harness", "torch", "transformers", "tokenizers", "onnx", "onnxruntime", "onnxruntime-gpu",
             "onnxconverter-common", "numpy", "sacrebleu", "tensorrt", "openvino")
_DIST = {"harness": "model-harness"}


def versions() -> dict[str, str]:
    out: dict[str, str] = {"python": platform.python_version()}
    for lib in LIBRARIES:
        try:
            out[lib] = importlib.metadata.version(_DIST.get(lib, lib))
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def thread_settings(intra_op: int | None = None, inter_op: int | None = None) -> dict[str, Any]:
    import torch

    return {
        "torch_num_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "ort_intra_op_threads": intra_op or 0,  # 0 = onnxruntime's default (one per physical core)
        "ort_inter_op_threads": inter_op or 0,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS"),
    }


@lru_cache(maxsize=1)
def _static() -> dict[str, Any]:
    import psutil

    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "memory_bytes": psutil.virtual_memory().total,
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        # the host a number was measured on (not part of the fingerprint: CI runners differ by name only)
        "host": platform.node(),
        "versions": versions(),
        "gpu": gpu_name(),
    }


def gpu_name() -> str | None:
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001  pragma: no cover - depends on drivers (a probe of the environment: any failure means 'unknown')
        return None
    return None


def environment(intra_op: int | None = None, inter_op: int | None = None) -> dict[str, Any]:
    static = _static()
    ident = {k: static[k] for k in ("cpu", "cores", "os", "machine", "versions", "gpu")}
    fingerprint = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]

    # a team's fields (``harness_machine_info``) join after the fingerprint: they never split comparable runs
    return machine_info({**static, "threads": thread_settings(intra_op, inter_op), "fingerprint": fingerprint})
