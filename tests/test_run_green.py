"""Whether a run is green is decided by one rule (``harness.results.record.run_green``): every
surface that says PASSED/FAILED -- summary.md's status line, the HTML report's banner and
``harness merge``'s exit code, beside ``harness run``, the plugin and ``harness check`` -- asks it.

Before, the HTML banner and ``harness merge`` decided it themselves (``any(r.failed)``), so a run
whose every case was skipped read "passed" in report.html and merged with exit 0 while summary.md
said "FAILED -- nothing was judged".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.report.html.page import banner_state, render_report
from harness.report.summary import status_line
from harness.results import Record
from harness.results.record import run_green
from harness.shard.plan import ShardSpec, write_shard_file


def _records(verdicts: list[str]) -> list[dict[str, Any]]:
    return [{"schema": "harness.result/1", "id": f"test_logits_parity[m{i}-fp32-ort_cpu]", "verdict": v,
             "metrics": {}, "run_id": "r1", "env": {"fingerprint": "f1"}} for i, v in enumerate(verdicts)]


@pytest.mark.parametrize(("verdicts", "green"), [(["pass", "skip"], True), (["skip", "skip"], False),
                                                 (["pass", "fail"], False), (["pass", "not-run"], False)])
def test_every_surface_follows_the_one_rule(tmp_path: Path, verdicts: list[str], green: bool) -> None:
    records = _records(verdicts)
    typed = [Record.coerce(r) for r in records]
    assert run_green(verdicts) is green
    assert status_line(typed).startswith("PASSED" if green else "FAILED")
    assert banner_state(typed) == ("passed" if green else "failed")
    assert f'data-state="{"passed" if green else "failed"}"' in render_report(typed)

    shard = tmp_path / "shard"
    write_shard_file(shard, ShardSpec(1, 1), [r["id"] for r in records], None, None)
    (shard / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert main(["merge", str(shard), "--out", str(tmp_path / "merged")]) == (0 if green else 1)
