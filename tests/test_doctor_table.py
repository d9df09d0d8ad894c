"""``harness doctor`` groups its variants: one row per model, each skip reason said once."""

from __future__ import annotations

import io

from rich.console import Console

from harness.cli.doctor import variants_table
from harness.core.types import Precision, Variant
from harness.runners import parse_provider


def test_one_row_per_model_and_each_skip_reason_once() -> None:
    variants = [Variant(model, precision, parse_provider(provider)) for model in ("bert-tiny", "marian-tiny")
                for precision in (Precision.INT8, Precision.FP32, Precision.FP16)
                for provider in ("ort_cpu", "ort_cuda")]

    def reason(v: Variant) -> str | None:
        return "CUDAExecutionProvider not available" if v.provider.short == "ort_cuda" else None

    out = io.StringIO()
    Console(file=out, width=200).print(variants_table(variants, reason))
    text = out.getvalue()
    rows = [line for line in text.splitlines() if line.startswith("│ ")]
    assert len(rows) == 2, text
    assert "fp32-ort_cpu, fp16-ort_cpu, int8-ort_cpu" in rows[0] and "ort_cuda" in rows[0]  # FP32 -> FP16 -> INT8
    assert text.count("CUDAExecutionProvider not available") == 1
    assert "6 variant(s) run here." in text
