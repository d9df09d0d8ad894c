"""The report's plots keep honest axes (issue 28 item 2): one unit per axis, totals written in their
unit, every series shown or counted, grid columns in precision order."""

from __future__ import annotations

import re

from report_fixture import record

from harness.report.html.grid import render_grid
from harness.report.html.perf import render_perf
from harness.results import Record


def _labels(html: str) -> list[str]:
    return re.findall(r'<figure class="plot" aria-label="([^"]+)"><svg', html)


def test_tokens_and_calls_per_second_never_share_an_axis_and_totals_carry_units() -> None:
    rows = [Record.from_dict(record("test_latency", "bert-fp32-ort_cpu", perf={
                "latency_ms": {"summary": {"p50": 1.1}, "throughput": 900.0}})),
            Record.from_dict(record("test_generation_perf", "marian-fp32-torch_cpu", perf={"tokens_per_s": 4.5})),
            Record.from_dict(record("test_cold_start_memory", "bert-fp32-ort_cpu", perf={
                "cold_start_ms": {"load": 10047.0, "first_inference": 20.0}}))]
    html = render_perf(rows)
    assert {"throughput (calls/s)", "throughput (tokens/s)"} <= set(_labels(html))
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", html)
    assert " 10.1 s" in texts and not any("e+0" in t for t in texts)  # was `1.047e+04`


def test_latency_cdf_shows_every_variant_as_small_multiples() -> None:
    """12 variants of 2 models: a panel per model, every variant drawn (one panel used to stop at 10)."""
    variants = [f"{m}-{p}-{b}" for m in ("bert", "marian") for p in ("fp32", "fp16", "int8")
                for b in ("torch_cpu", "ort_cpu")]
    rows = [Record.from_dict(record("test_latency", v, perf={
        "latency_ms": {"samples": [1.0 + i, 1.1 + i, 1.2 + i], "summary": {"p50": 1.1 + i}}}))
        for i, v in enumerate(variants)]
    html = render_perf(rows)
    label = next(x for x in _labels(html) if x.startswith("latency distribution"))
    assert "12 variants, one panel per model" in label and "first 10" not in label
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", html)
    assert all(any(v in t for t in texts) for v in variants), [v for v in variants if not any(v in t for t in texts)]
    assert {"bert", "marian"} <= {t.strip() for t in texts}  # the panels' titles


def test_grid_columns_run_fp32_fp16_int8_and_name_the_runtime_setting() -> None:
    rows = [Record.from_dict(record("test_logits_parity", v)) for v in
            ("bert-int8-ort_cpu", "bert-fp16-ort_cpu", "bert-fp32-ort_cpu")]
    rows.append(Record.from_dict({**record("test_logits_parity", "bert-fp32-ort_cpu"),
                                  "id": "test_logits_parity[bert-fp32-ort_cpu-opt_disabled]",
                                  "variant": "bert-fp32-ort_cpu-opt_disabled"}))
    heads = re.findall(r'<th scope="col">([^<]+)<br><small>([^<]+)</small>', render_grid(rows))
    assert heads == [("fp32", "ort_cpu"), ("fp32", "ort_cpu · opt_disabled"), ("fp16", "ort_cpu"), ("int8", "ort_cpu")]
