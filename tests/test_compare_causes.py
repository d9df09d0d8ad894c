"""``harness compare`` and ``harness baseline compare`` list what differs between the runs before
any verdict: a stricter ``--config`` that failed two cases without moving a number used to read
"every metric identical", "OK: no accuracy regression", "0 setting change(s)"."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_fixture import ENV, record, write_run

from harness.cli import main
from harness.compare.diff import compare
from harness.compare.render import to_html, to_markdown
from harness.results.rundir import read_results


def _case(variant: str, cosine_floor: float, config: str, run_id: str, verdict: str, **env: object) -> dict:
    return record("test_logits_parity", variant, verdict, run_id,
                  metrics={"model.logits.cosine": 0.99995, "model.logits.norm_max_abs": 0.01},
                  thresholds={"model.logits.cosine": {"threshold": cosine_floor, "op": ">="},
                              "model.logits.norm_max_abs": {"threshold": 0.15, "op": "<="}},
                  settings={"options": {"config": config}}, env={**ENV, **env})


def _runs(tmp_path: Path, strict: bool) -> tuple[Path, Path]:
    variants = ("bert-fp16-ort_cpu", "bert-int8-ort_cpu")
    a = write_run(tmp_path / "a", [_case(v, 0.99, "harness.toml", "a", "pass") for v in variants])
    floor, config, verdict = (0.99999, "strict.toml", "fail") if strict else (0.99, "harness.toml", "pass")
    b = write_run(tmp_path / "b", [_case(v, floor, config, "b", verdict) for v in variants])
    return a, b


def test_a_stricter_config_is_listed_first_as_the_cause(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _runs(tmp_path, strict=True)
    cmp = compare(read_results(a), read_results(b))
    assert [d.text() for d in cmp.differences] == [
        "tolerance: model/logits cosine: >= 0.99 -> >= 0.99999 (2 cases)",
        "configuration: config: harness.toml -> strict.toml (2 cases)"]
    assert not cmp.accuracy and not cmp.identical  # no number moved, and yet not identical
    md = to_markdown(cmp)
    assert md.index("## Differences between the runs") < md.index("## Verdict changes")
    assert "identical" not in md and "differences: 1 tolerance, 1 configuration" in md
    assert md.index("- A: **run** 2026-01-05 00:00 UTC · **host** ci-runner-7") < md.index("## Differences")
    page = to_html(cmp)
    assert page.index('id="differences"') < page.index('id="verdicts"') and "strict.toml" in page
    header = page[page.index('id="run-header"'):page.index('id="verdict"')]  # each run's header opens the page
    assert header.count("<b>host</b> ci-runner-7") == 2 and "<b>fingerprint</b> f00d" in header
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert out.index("tolerance: model/logits cosine: >= 0.99 -> >= 0.99999") < out.index("verdict changes")
    assert "identical" not in out


def test_identical_only_when_it_is(tmp_path: Path) -> None:
    a, b = _runs(tmp_path, strict=False)
    cmp = compare(read_results(a), read_results(b))
    assert cmp.differences == [] and cmp.identical
    md = to_markdown(cmp)
    assert "none: the same tolerances, settings, versions and environment" in md and "is identical" in md


def test_versions_and_environment_are_differences(tmp_path: Path) -> None:
    a, _ = _runs(tmp_path, strict=False)
    upgraded = {**ENV, "fingerprint": "beef", "versions": {"onnxruntime": "1.21.0"}}
    b = write_run(tmp_path / "c", [_case(v, 0.99, "harness.toml", "c", "pass", **upgraded)
                                   for v in ("bert-fp16-ort_cpu", "bert-int8-ort_cpu")])
    texts = [d.text() for d in compare(read_results(a), read_results(b)).differences]
    assert texts == ["version: onnxruntime: 1.20.0 -> 1.21.0"]


def test_baseline_compare_lists_the_differences_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _runs(tmp_path, strict=True)
    store = tmp_path / "store"
    assert main(["baseline", "save", str(a), "--name", "main", "--baseline-store", str(store)]) == 0
    capsys.readouterr()
    md = tmp_path / "cmp.md"
    main(["baseline", "compare", str(b), "--name", "main", "--baseline-store", str(store), "--markdown", str(md)])
    out = capsys.readouterr().out
    assert out.startswith("differences from the baseline:\n  tolerance: model/logits cosine: >= 0.99 -> >= 0.99999")
    assert md.read_text().startswith("### Differences from the baseline\n\n- tolerance:")
