"""GPU memory through NVML (``pynvml``, from the ``gpu`` extra): what a process holds on the device.

Runtimes that allocate through their own allocators (ONNX Runtime's CUDA arena, TensorRT's
engine and context memory) have no peak counter a caller can read, so the harness reads the
driver's per-process figure (``nvmlDeviceGetComputeRunningProcesses``). Unknown is None,
never zero: no pynvml, no driver or no entry for this process.
"""

from __future__ import annotations

import os


def nvml_process_bytes(device_index: int = 0) -> int | None:
    """GPU memory this process holds on device ``device_index`` (None when unknown)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
        for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if proc.pid == os.getpid():
                return int(proc.usedGpuMemory or 0)
    except Exception:  # noqa: BLE001 - no pynvml, no driver: unknown, not zero
        return None
    return None


def nvml_device_used_bytes(device_index: int = 0) -> int | None:
    """Memory in use on the whole device (every process), or None when unknown."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(device_index)).used)
    except Exception:  # noqa: BLE001 - no pynvml, no driver: unknown, not zero
        return None
