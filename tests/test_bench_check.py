"""scripts/bench_check.py without optimum's venv: one SKIP line with the reason, exit 0 (nothing to
compare is not a failure of the harness); a directory that is not optimum's layout is exit 2."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_check.py"


def _load():
    spec = importlib.util.spec_from_file_location("bench_check", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_skips_with_a_reason_without_optimum(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = _load()
    assert bench.main(["--optimum-python", str(tmp_path / "no-venv" / "python"), "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("SKIP: optimum's validation cannot run:") and "does not exist" in out


@pytest.mark.skipif(importlib.util.find_spec("optimum") is not None,
                    reason="this interpreter has optimum: the script would export and time for real")
def test_skips_an_interpreter_without_optimum(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _load()
    assert bench.main(["--optimum-python", sys.executable, "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("SKIP:") and "cannot import optimum.exporters.onnx" in out
