"""``HARNESS_BENCH_SMOKE=1`` (harness.perf.smoke): what a benchmark's smoke run shrinks, how its
output is marked and which exits it keeps. The benchmarks themselves run as smoke runs in the
docs test (tests/docs_measure.py); this pins the one helper they share."""

from __future__ import annotations

import argparse

import pytest

from harness.perf import smoke


def _args() -> argparse.Namespace:
    return argparse.Namespace(trials=30, samples=5, layers=[2, 4, 8, 16], models=None)


@pytest.mark.parametrize("value", ["", "0"])
def test_outside_a_smoke_run_nothing_changes(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                             value: str) -> None:
    monkeypatch.setenv(smoke.ENV, value)
    args = _args()
    assert smoke.shrink(args, trials=1, layers=[1]) == []
    assert vars(args) == vars(_args())
    smoke.announce(["x"])
    assert smoke.finish(1) == 1 and smoke.finish(0) == 0
    assert capsys.readouterr().out == ""


def test_a_smoke_run_takes_the_smallest_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(smoke.ENV, "1")
    args = _args()
    changes = smoke.shrink(args, trials=1, samples=10, layers=[1], models=["bert-tiny"])
    # a number: at most the smoke value (a smaller one given stays); anything else: replaced
    assert (args.trials, args.samples, args.layers, args.models) == (1, 5, [1], ["bert-tiny"])
    assert changes == ["trials 30 -> 1", "layers 2 4 8 16 -> 1", "models None -> bert-tiny"]
    assert smoke.banner(changes).startswith(f"{smoke.MARK}: the smallest configuration: trials 30 -> 1")
    assert smoke.banner(changes).endswith("its numbers are not a measurement")


def test_a_smoke_run_says_so_and_keeps_failures(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(smoke.ENV, "1")
    smoke.announce([])
    assert smoke.finish(1) == 0  # a measurement verdict (a missed target) is not a smoke run's
    assert smoke.finish(2) == 2  # bad usage, a run that did not finish: still a failure
    assert smoke.finish(1, verdicts=()) == 1  # a script whose exit 1 means it did not work
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all(line.startswith(smoke.MARK) for line in lines), lines
    assert "verdict (exit 1) is not a verdict of a smoke run" in lines[1] and "failed (exit 2)" in lines[2]
