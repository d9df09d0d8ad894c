"""Whether INT8 weights are quantised to 7 bits (``reduce_range``), decided once per model.

ONNX Runtime's x86 INT8 kernels multiply u8 activations by s8 weights. Without VNNI
(``avx512_vnni`` / ``avx_vnni``) they use AVX2's ``VPMADDUBSW``, whose pairwise sums saturate
at 16 bits, so full 8-bit weights can overflow; ONNX Runtime's quantization docs give
``reduce_range=True`` (7-bit weights) as the remedy on such machines, "especially for
per-channel mode". Measured here (AMD EPYC, AVX2, no VNNI), the effect is model-dependent for
per-tensor weights, so ``auto`` follows the documentation and no further:

| INT8 dynamic, this CPU | 8-bit weights | 7-bit (``reduce_range``) |
|---|---|---|
| encoder-custom, per tensor (random weights) | norm_max_abs 0.209 (fails 0.15) | 0.018 |
| MiniLM-L6, per tensor (trained) | embedding_cosine 0.966 | 0.881 (fails 0.93) |
| MiniLM-L6, per channel | (per-channel measured 2.9x the per-tensor error on bert-tiny) | 0.991 |

``--int8-reduce-range auto`` (the default) turns it on for **per-channel** INT8 on x86 CPUs
that lack VNNI, and leaves it off elsewhere (per-tensor weights, VNNI CPUs, ARM, unknown), so
per-tensor artifacts keep their cache keys and numbers; ``on`` forces it for a model like
encoder-custom. The effective value and why are recorded in every record's settings, and the
value is part of the INT8 artifact's cache key, so a baseline blessed on another kind of CPU
says so when compared ("changed since baseline: int8_reduce_range").
"""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass
from pathlib import Path

#: CPU flags (Linux ``/proc/cpuinfo`` names) whose INT8 dot-product instructions do not saturate
VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})
CHOICES = ("auto", "on", "off")


@dataclass(frozen=True)
class ReduceRange:
    """The effective ``reduce_range`` and the one-line reason recorded beside it."""

    enabled: bool
    why: str


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str] | None:
    """The CPU's feature flags from ``/proc/cpuinfo`` (Linux), or None where they are unknown."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return None


def _is_x86(machine: str) -> bool:
    return machine.lower() in ("x86_64", "amd64", "i386", "i686", "x86")


def resolve(choice: str, *, per_channel: bool, flags: frozenset[str] | None = None,
            machine: str | None = None) -> ReduceRange:
    """``on``/``off`` as given; ``auto``: on for per-channel weights on an x86 CPU known to lack
    VNNI (ONNX Runtime's documented case), off otherwise."""
    if choice == "on":
        return ReduceRange(True, "on (--int8-reduce-range on)")
    if choice == "off":
        return ReduceRange(False, "off (--int8-reduce-range off)")
    if choice != "auto":
        raise ValueError(f"int8_reduce_range must be one of {', '.join(CHOICES)}, got {choice!r}")
    if not per_channel:
        return ReduceRange(False, "auto: off (per-tensor weights: 7 bits cost trained models accuracy)")
    machine = platform.machine() if machine is None else machine
    if not _is_x86(machine):
        return ReduceRange(False, f"auto: off ({machine or 'unknown'} CPU: no AVX2 u8s8 saturation)")
    flags = cpu_flags() if flags is None else flags
    if flags is None:
        return ReduceRange(False, "auto: off (CPU flags unknown)")
    if flags & VNNI_FLAGS:
        return ReduceRange(False, f"auto: off (CPU has {', '.join(sorted(flags & VNNI_FLAGS))})")
    return ReduceRange(True, "auto: on (per-channel INT8 on an x86 CPU without VNNI: ONNX Runtime's u8s8 kernels "
                             "saturate 8-bit weights)")
