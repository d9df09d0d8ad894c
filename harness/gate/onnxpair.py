"""Two ONNX files opened alike and fed alike: the sessions and inputs of a paired A/B.

``harness perf-compare`` (two files a user names) and ``harness baseline compare --perf`` (the
blessed artifacts against the candidate's, ``harness.gate.retime``) time through the same
session options and the same generated inputs, so a paired verdict means the same thing
whichever command produced it. The inputs are synthetic but shaped like the recorded metric
(batch x sequence length): both sides of a pair get the very same arrays, which is all a
comparison of two builds needs; token ids are drawn from a small range every vocabulary has.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from harness.core import UsageError

#: the pairing ``baseline compare --perf`` uses unless told (``harness.gate.retime``): 20 pairs of
#: 50 calls per side, the setting whose power ``scripts/bench_gate_power.py`` measured in its
#: paired mode (0/10 false alarms, 10/10 detections of +30 %, docs/perf-gate.md)
DEFAULT_PAIRS = 20
DEFAULT_BLOCK = 50

_DTYPES = {"tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(float)": np.float32,
           "tensor(float16)": np.float16, "tensor(double)": np.float64, "tensor(bool)": np.bool_}


def synthetic_feeds(session: Any, batch: int, seq: int, seed: int) -> dict[str, np.ndarray]:
    """Inputs for every graph input: symbolic dims -> batch (first) or seq (others); integer
    inputs get token ids 1..99 (``*type*`` inputs zeros: a token-type table has 2 rows),
    ``*mask*`` inputs ones, float inputs N(0, 1)."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for arg in session.get_inputs():
        if arg.type not in _DTYPES:
            raise UsageError(f"input {arg.name!r} has type {arg.type}; only numeric tensors are generated")
        shape = [d if isinstance(d, int) and d > 0 else (batch if i == 0 else seq) for i, d in enumerate(arg.shape)]
        dtype = _DTYPES[arg.type]
        name = arg.name.lower()
        if "mask" in name or dtype is np.bool_:
            feeds[arg.name] = np.ones(shape, dtype=dtype)
        elif np.issubdtype(dtype, np.integer):
            feeds[arg.name] = (np.zeros(shape, dtype=dtype) if "type" in name
                               else rng.integers(1, 100, size=shape).astype(dtype))
        else:
            feeds[arg.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def open_session(path: Path, provider: str, threads: int | None) -> Any:
    """An ONNX Runtime session on ``provider`` (a short name, ``ort_cpu``): sequential execution,
    one inter-op thread, ``threads`` intra-op threads (None: ORT's default). Bad input is one
    line (``UsageError``)."""
    import onnxruntime as ort

    from harness.runners import PROVIDERS

    if provider not in PROVIDERS or PROVIDERS[provider].backend != "onnxruntime":
        known = sorted(k for k, v in PROVIDERS.items() if v.backend == "onnxruntime")
        raise UsageError(f"--provider: {provider!r} is not an ONNX Runtime provider; one of {', '.join(known)}")
    if not path.is_file():
        raise UsageError(f"{path}: no such ONNX file")
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    try:
        return ort.InferenceSession(str(path), options, providers=[PROVIDERS[provider].device])
    except Exception as exc:  # noqa: BLE001 - a corrupt or foreign file is bad input
        raise UsageError(f"{path}: onnxruntime cannot open it ({str(exc).splitlines()[0][:200]})") from None
