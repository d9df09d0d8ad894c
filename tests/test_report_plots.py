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


def test_throughput_keeps_its_unit_and_chart_totals_carry_units() -> None:
    rows = [Record.from_dict(record("test_latency", "bert-fp32-ort_cpu", perf={
                "latency_ms": {"summary": {"p50": 1.1}, "throughput": 900.0}})),
            Record.from_dict(record("test_generation_perf", "marian-fp32-torch_cpu", perf={
                "generation": {"kv=on": {"tokens_per_s": 4.5}}})),
            Record.from_dict(record("test_cold_start_memory", "bert-fp32-ort_cpu", perf={
                "cold_start_ms": {"load": 10047.0, "first_inference": 20.0}}))]
    html = render_perf(rows)
    cells = re.findall(r'<td class="num">([^<]*)</td>', html)
    assert "900 calls/s" in cells and "4.5 tokens/s" in cells  # never one "per second" column
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", html)
    assert " 10.1 s" in texts and not any("e+0" in t for t in texts)  # was `1.047e+04`


def test_latency_plots_show_every_variant_one_chart_per_model() -> None:
    """12 variants of 2 models: a chart and a CDF per model, every variant drawn (one panel used
    to stop at 10; one chart drew each variant twice, as throughput and as latency_ms)."""
    variants = [f"{m}-{p}-{b}" for m in ("bert", "marian") for p in ("fp32", "fp16", "int8")
                for b in ("torch_cpu", "ort_cpu")]
    rows = [Record.from_dict(record("test_latency", v, perf={
        "latency_ms": {"samples": [1.0 + i, 1.1 + i, 1.2 + i], "summary": {"p50": 1.1 + i}, "throughput": 9.0}}))
        for i, v in enumerate(variants)]
    html = render_perf(rows)
    labels = _labels(html)
    assert {"bert: 6 variants", "marian: 6 variants"} <= set(labels) and not any("first 10" in x for x in labels)
    for model in ("bert", "marian"):
        block = html[html.index(f'<div class="model-perf" data-model="{model}">'):]
        block = block[:block.index("</div>")]
        texts = re.findall(r"<text[^>]*>([^<]*)</text>", block[:block.index("<details>")])
        own = [v for v in variants if v.startswith(model)]
        assert sorted(t for t in texts if t in own) == sorted(own)  # each variant once in its model's chart
        assert "<table class=\"perf\">" in block[block.index("<details>"):]  # the percentiles: folded


def test_grid_columns_run_fp32_fp16_int8_and_name_the_runtime_setting() -> None:
    rows = [Record.from_dict(record("test_logits_parity", v)) for v in
            ("bert-int8-ort_cpu", "bert-fp16-ort_cpu", "bert-fp32-ort_cpu")]
    rows.append(Record.from_dict({**record("test_logits_parity", "bert-fp32-ort_cpu"),
                                  "id": "test_logits_parity[bert-fp32-ort_cpu-opt_disabled]",
                                  "variant": "bert-fp32-ort_cpu-opt_disabled"}))
    heads = re.findall(r'<th scope="col">([^<]+)<br><small>([^<]+)</small>', render_grid(rows))
    assert heads == [("fp32", "ort_cpu"), ("fp32", "ort_cpu · opt_disabled"), ("fp16", "ort_cpu"), ("int8", "ort_cpu")]
