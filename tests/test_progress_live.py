"""The live progress display on a real terminal (issue 26 item 2): ``harness run`` under a
pseudo-terminal draws cases done/total, each running case with its phase, and leaves pytest's
and the harness's final output intact -- serially (where pytest's fd capture points fd 1 at a
file while a case runs) and under ``-n 2`` (the workers report their phases to the controller).

Event-driven, never timed: each case waits inside its ``reference`` phase until the test has
*seen* a frame naming it in that phase, then the test lets it go.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from scripts_module import load_script

from tests.waiting import PATIENCE

ROOT = Path(__file__).resolve().parents[1]

SUITE = '''
import os
import time
from pathlib import Path

from harness.core import phases


def test_waits(variant, harness):
    gate = Path(os.environ["LIVE_GATE"]) / variant.id
    with phases.phase("reference"):
        deadline = time.monotonic() + float(os.environ["LIVE_PATIENCE"])
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    harness.metrics["answer"] = 42.0
'''

VARIANTS = ("bert-tiny-fp32-ort_cpu", "bert-tiny-int8-ort_cpu")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _screen_text(raw: bytes) -> str:
    """The bytes a terminal received, without colours and cursor moves (each redraw is a line)."""
    return ANSI.sub("", raw.decode("utf-8", "replace")).replace("\r", "\n")


def _in_reference(case: str, suite: str = "waits") -> str:
    """A frame's row of ``case`` running in its ``reference`` phase."""
    return rf"{re.escape(case)} {suite}\s+reference [\d.]+ s"


def run_under_pty(args: list[str], gate: Path, cwd: Path,
                  rows: dict[str, str] | None = None) -> tuple[int, str]:
    """Run ``harness run`` on a 160x40 pseudo-terminal; open each case's gate (a file named by a
    key of ``rows``) once a frame shows its row (the value, a regex): running in its ``reference``
    phase. Returns (exit code, what the terminal received)."""
    rows = rows if rows is not None else {variant: _in_reference(variant) for variant in VARIANTS}
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    env = {**os.environ, "LIVE_GATE": str(gate), "LIVE_PATIENCE": str(PATIENCE), "TERM": "xterm-256color"}
    env.pop("COLUMNS", None)
    env.pop("HARNESS_PROGRESS", None)
    proc = subprocess.Popen([sys.executable, "-c", "from harness.cli import entrypoint; entrypoint()", *args],
                            stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, close_fds=True)
    os.close(slave)
    raw = b""
    released: set[str] = set()
    deadline = time.monotonic() + PATIENCE
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                raw += chunk
            elif proc.poll() is not None:
                break
            screen = _screen_text(raw)
            for name, row in rows.items():
                if name not in released and re.search(row, screen):
                    (gate / name).touch()
                    released.add(name)
        else:
            raise AssertionError(f"no exit after {PATIENCE:.0f} s:\n{_screen_text(raw)[-3000:]}")
    finally:
        for name in rows:  # whatever happened, no case is left waiting
            (gate / name).touch()
        code = proc.wait()
        os.close(master)
    return code, _screen_text(raw)


@pytest.mark.parametrize("workers", [1, 2], ids=["serial", "xdist-2"])
def test_live_display_on_a_terminal(tmp_path: Path, workers: int) -> None:
    (tmp_path / "test_live_suite.py").write_text(SUITE)
    gate = tmp_path / "gate"
    gate.mkdir()
    out = tmp_path / "run"
    args = ["run", "--suites", str(tmp_path / "test_live_suite.py"), "--models", "bert-tiny", "--precisions", "fp32",
            "int8", "--providers", "ort_cpu", "--out", str(out)] + (["-n", str(workers)] if workers > 1 else [])
    # each case is let go once a frame shows it a second into its phase: the display ticks while it runs
    code, screen = run_under_pty(args, gate, tmp_path, {v: _in_reference(v).replace(r"[\d.]+ s", r"[1-9]\.\d s")
                                                        for v in VARIANTS})
    assert code == 0, screen[-3000:]
    for variant in VARIANTS:  # the same running case redrawn with its clock moving
        shown = set(re.findall(rf"{re.escape(variant)} waits\s+reference ([\d.]+) s", screen))
        assert len(shown) >= 2, (variant, shown)
    if workers == 1:  # while the second case runs, the ETA counts down instead of freezing
        etas = [float(x) for x in re.findall(r"harness 1/2 cases.*?ETA ([\d.]+) s", screen)]
        assert any(b < a for a, b in zip(etas, etas[1:])), etas
    # frames: the counter, each case with its phase (xdist: with its worker), then the last count
    assert re.search(r"harness 0/2 cases", screen), screen[-3000:]
    for variant in VARIANTS:
        row = re.search(rf"(gw\d|▶)\s+{re.escape(variant)} waits\s+reference [\d.]+ s\s+\(case [\d.]+ s\)", screen)
        assert row, screen[-3000:]
        assert (row.group(1).startswith("gw")) == (workers > 1)
    assert re.search(r"harness 1/2 cases\s+\S+\s+1 PASS", screen), screen[-3000:]
    assert re.search(r"harness 2/2 cases\s+\S+\s+2 PASS\s+elapsed", screen), screen[-3000:]
    # the final output is whole: pytest's progress and totals, the harness's summary, its files
    tail = screen.split("harness 2/2 cases")[-1]
    assert "[100%]" in tail and "harness summary" in tail and re.search(r"2 passed", tail), tail
    for variant in VARIANTS:
        assert f"test_waits[{variant}]" in tail
    assert f"results: {out / 'results.jsonl'}" in tail
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
    # the piped per-case lines are not drawn on a terminal
    assert not re.search(r"^\[\d/2\] PASS", screen, flags=re.M)


BARE_SUITE = '''
import os
import time
from pathlib import Path

from harness.core import phases


def _wait(name):
    gate = Path(os.environ["LIVE_GATE"]) / name
    with phases.phase("reference"):
        deadline = time.monotonic() + float(os.environ["LIVE_PATIENCE"])
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.05)


def test_first():
    _wait("test_first")


def test_second():
    _wait("test_second")
'''


def test_live_display_for_a_bare_harness_run(tmp_path: Path) -> None:
    """No model, precision, provider or config: ``harness run`` still draws the live display
    (it printed pytest's dots only, for minutes, on the first command a user types)."""
    (tmp_path / "test_bare_suite.py").write_text(BARE_SUITE)
    gate = tmp_path / "gate"
    gate.mkdir()
    # a plain test has no harness phases: its row says `other` and for how long it has run
    rows = {name: rf"{name}\s+{name.removeprefix('test_')}\s+other [\d.]+ s" for name in ("test_first", "test_second")}
    code, screen = run_under_pty(["run", "--suites", str(tmp_path / "test_bare_suite.py"), "--out",
                                  str(tmp_path / "run")], gate, tmp_path, rows)
    assert code == 0, screen[-3000:]
    assert re.search(r"harness 0/2 cases", screen) and re.search(r"harness 2/2 cases\s+\S+\s+2 PASS", screen), \
        screen[-3000:]


def test_eta_reads_the_durations_history_scaled_by_this_runs_speed() -> None:
    from harness.plugins.progress import Estimator

    history = {"test_a[m]": 10.0, "test_b[m]": 20.0, "test_c[m]": 40.0}
    est = Estimator(history)
    # nothing finished yet: the history as it is, running cases for what they have left
    assert est.eta(["s.py::test_b[m]", "s.py::test_c[m]"], {"s.py::test_a[m]": 4.0}, {}, 1) == 6.0 + 20.0 + 40.0
    # test_a took twice its history: the machine is slower, the rest is expected twice as long
    assert est.eta(["s.py::test_c[m]"], {}, {"s.py::test_a[m]": 20.0}, 1) == 80.0
    # two workers share what is left; a case never timed counts this run's mean
    assert est.eta(["s.py::test_c[m]", "s.py::test_new[m]"], {}, {"s.py::test_a[m]": 10.0}, 2) == (40.0 + 10.0) / 2
    # no history: this run's mean; nothing to go on: no estimate
    assert Estimator().eta(["x", "y"], {}, {"z": 3.0}, 1) == 6.0
    assert Estimator().eta(["x"], {}, {}, 1) is None
    assert Estimator().eta(["x"], {}, {"skipped": 0.0}, 1) is None  # a 0-s skip is no estimate of 0 s left


def test_the_eta_shown_counts_the_reports_written_after_the_last_case(tmp_path: Path) -> None:
    """The display's ETA is read to the end of the run: the cases left, then the reports
    (REPORT_TAIL_S). Without them the last estimates of a quiet default run read -31 to -46 %."""
    from types import SimpleNamespace

    from harness.plugins.progress import REPORT_TAIL_S, Estimator, Tally

    tally = Tally(SimpleNamespace(option=SimpleNamespace(numprocesses=0)), tmp_path)  # type: ignore[arg-type]
    tally.estimator = Estimator({"test_a[m]": 2.0, "test_b[m]": 3.0})
    tally.total, tally.ids = 2, ["s.py::test_a[m]", "s.py::test_b[m]"]
    tally.finished = {"s.py::test_a[m]": 2.0}  # as its history: this run's speed is the history's
    tally.first_start = time.monotonic() - 2.0
    assert REPORT_TAIL_S > 0
    assert tally.eta_seconds() == pytest.approx(3.0 + REPORT_TAIL_S)


def test_the_display_reads_every_earlier_run_beside_its_out(tmp_path: Path) -> None:
    """The ETA's history is the run beside this one that times most of its cases; the other runs
    beside it (an interrupted one included, ranked after) are its alternatives."""
    from types import SimpleNamespace

    from report_fixture import record

    from harness.core.interrupts import MARKER
    from harness.plugins.progress import Tally
    from harness.session import RUN_DIR

    ids = [f"s.py::test_logits_parity[bert-tiny-{p}-ort_cpu]" for p in ("fp32", "fp16", "int8")]
    rows = {"run-a": (ids, 1.0), "run-b": (ids[:1], 5.0), "run-c": (ids, 2.0)}  # oldest first
    for age, (name, (cases, seconds)) in enumerate(rows.items()):
        (tmp_path / name).mkdir()
        results = tmp_path / name / "results.jsonl"
        results.write_text("".join(json.dumps(record("test_logits_parity", i.split("[")[1].rstrip("]"),
                                                     duration_s=seconds)) + "\n" for i in cases))
        os.utime(results, (1_000_000 + age, 1_000_000 + age))  # the runs' order: oldest first
    (tmp_path / "run-c" / MARKER).write_text("interrupted")
    this_run = tmp_path / "run-d"

    class Config(SimpleNamespace):
        def getoption(self, name: str, default: object = None) -> object:
            return default

    config = Config(option=SimpleNamespace(numprocesses=0), stash={RUN_DIR: this_run})
    tally = Tally(config, tmp_path / "progress")  # type: ignore[arg-type]
    tally.total, tally.ids = len(ids), ids
    tally._weigh()
    est = tally.estimator
    key = ids[0].split("::")[-1]
    # run-a and run-c time every case, run-c was interrupted: run-a first, then run-c, then run-b
    assert est.history[key] == 1.0
    assert [h[key] for h in est.alternatives] == [2.0, 5.0]


def test_the_display_reads_the_history_stores_runs_in_the_background(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CI job on a fresh checkout has no run beside its ``--out``: the ETA's histories are then
    the history store's newest runs (``$HARNESS_HISTORY_DB``), read in the background so a
    database server that does not answer delays nothing; the newest run first."""
    from types import SimpleNamespace

    from report_fixture import record

    from harness.plugins.progress import Tally
    from harness.results import history
    from harness.session import RUN_DIR

    ids = [f"s.py::test_logits_parity[bert-tiny-{p}-ort_cpu]" for p in ("fp32", "int8")]
    db = tmp_path / "history.sqlite"
    for night, seconds in ((1, 1.0), (2, 2.0)):
        run = tmp_path / f"night-{night}"
        run.mkdir()
        (run / "results.jsonl").write_text("".join(json.dumps(record(
            "test_logits_parity", i.split("[")[1].rstrip("]"), run_id=f"night-{night}", duration_s=seconds,
            finished=f"2026-01-0{night}T00:00:00+0000")) + "\n" for i in ids))
        history.ingest(run, db)
    monkeypatch.setenv("HARNESS_HISTORY_DB", str(db))

    class Config(SimpleNamespace):
        def getoption(self, name: str, default: object = None) -> object:
            return default

    (tmp_path / "ci").mkdir()
    config = Config(option=SimpleNamespace(numprocesses=0), stash={RUN_DIR: tmp_path / "ci" / "run"})
    tally = Tally(config, tmp_path / "progress")  # type: ignore[arg-type]
    tally.total, tally.ids = len(ids), ids
    tally._weigh()
    assert tally.store_read.wait(timeout=PATIENCE)
    key = ids[0].split("::")[-1]
    assert tally.estimator.history[key] == 2.0  # the newest stored run
    assert [h[key] for h in tally.estimator.alternatives] == [1.0]
    # no store: nothing read, the run goes on without a history
    monkeypatch.setenv("HARNESS_HISTORY_DB", str(tmp_path / "absent.sqlite"))
    bare = Tally(config, tmp_path / "progress-2")  # type: ignore[arg-type]
    bare.total, bare.ids = len(ids), ids
    bare._weigh()
    assert bare.store_read.wait(timeout=PATIENCE)
    assert bare.estimator.history == {} and bare.estimator.alternatives == []
    assert not (tmp_path / "absent.sqlite").exists()  # reading never creates a store


def test_eta_without_history_weighs_cases_by_the_shard_planners_cost_model() -> None:
    """A first run (no history): a pending case costs its weight (harness.shard.cost) times the
    seconds per unit of cost of its suite's finished cases, pulled towards the run's rate; a
    pending case of a suite not seen yet takes the run's rate. The mean of the finished cases
    (the former estimate) would call a 1-unit logits case as long as a 5-unit perf case."""
    from harness.plugins.progress import Estimator

    weights = {"test_logits_parity[m-fp32-ort_cpu]": 1.0, "test_logits_parity[m-int8-ort_cpu]": 1.3,
               "test_latency[m-fp32-ort_cpu]": 5.0, "test_latency[m-int8-ort_cpu]": 6.5}
    est = Estimator(weights=weights)
    logits_done = {"s.py::test_logits_parity[m-fp32-ort_cpu]": 2.0}  # 2 s per unit
    assert est.eta(["s.py::test_latency[m-fp32-ort_cpu]"], {}, logits_done, 1) == 10.0
    latency_done = {**logits_done, "s.py::test_latency[m-fp32-ort_cpu]": 20.0}  # the latency suite: 4 s per unit
    # one latency case: its rate pulled towards the run's (the median of its suites' rates, 2 and
    # 4: 3) by one case's worth, for 6.5 units
    assert abs(est.eta(["s.py::test_latency[m-int8-ort_cpu]"], {}, latency_done, 1) - 6.5 * (20 + 3.0 * 5) / 10) < 1e-9
    # two logits cases: the suite's own rate, 2.5 s per unit
    two = {**logits_done, "s.py::test_logits_parity[m-int8-ort_cpu]": 3.85}
    assert abs(est.eta(["s.py::test_latency[m-fp32-ort_cpu]"], {}, two, 1) - 5.0 * 5.85 / 2.3) < 1e-9
    # a running case past its estimate still has a quarter of its elapsed time to go: no frozen 0
    assert est.eta([], {"s.py::test_logits_parity[m-int8-ort_cpu]": 40.0}, logits_done, 1) == 10.0


def test_eta_rates_per_suite_and_backend() -> None:
    """A PyTorch variant's cold start imports torch in every fresh process (~20x an ONNX Runtime
    one's seconds per unit): within a suite, each backend's finished cases set its own rate."""
    from harness.plugins.progress import Estimator, case_kinds

    ids = [f"test_cold_start_memory[m-{p}-{b}]" for p in ("fp32", "int8") for b in ("ort_cpu", "torch_cpu")]
    kinds = case_kinds(ids)
    assert kinds == {ids[0]: "onnxruntime", ids[1]: "pytorch", ids[2]: "onnxruntime", ids[3]: "pytorch"}
    weights = dict.fromkeys(ids, 1.0)
    done = {f"s.py::{ids[0]}": 1.0, f"s.py::{ids[1]}": 20.0}
    by_kind = Estimator(weights=weights, kinds=kinds).eta([f"s.py::{ids[3]}"], {}, done, 1)
    assert by_kind == (20.0 + 10.5) / 2  # one torch case: pulled towards the suite's 10.5 s per unit once
    assert Estimator(weights=weights).eta([f"s.py::{ids[3]}"], {}, done, 1) == 10.5  # the control: one rate


def test_eta_drops_a_history_the_cost_model_predicted_this_run_better_than() -> None:
    """A history is one scale for the whole run. Beside a busy neighbour the in-process PyTorch
    cases slowed 4x and the ONNX Runtime ones not at all: the history scaled by the mixture
    (2.5x) prices what is left 2.5x too long, where the cost model's rates per suite and backend
    had priced the last cases right; a history that held keeps pricing what the model cannot
    know (one case ten times the others)."""
    from harness.plugins.progress import Estimator, case_kinds

    ids = [f"test_latency[m{i}-fp32-{b}]" for i in range(9) for b in ("ort_cpu", "torch_cpu")]
    weights, kinds = dict.fromkeys(ids, 1.0), case_kinds(ids)
    quiet = dict.fromkeys(ids, 1.0)
    loaded = {f"s.py::{i}": (4.0 if i.endswith("torch_cpu]") else 1.0) for i in ids[:12]}
    pending = [f"s.py::{i}" for i in ids[12:] if i.endswith("ort_cpu]")]  # three ONNX Runtime cases, 1 s each
    est = Estimator(quiet, weights=weights, kinds=kinds)
    assert est.source(loaded) is None  # the cost model
    assert est.eta(pending, {}, loaded, 1) == pytest.approx(3.0)
    # the control: the history scaled by the run's speed (2.5x) had priced every pending case 2.5 s
    assert Estimator(quiet).eta(pending, {}, loaded, 1) == pytest.approx(7.5)
    # a history the finished cases agreed with is kept, for what only it knows
    held = {**{k: loaded[f"s.py::{k}"] for k in ids[:12]}, ids[12]: 10.0, ids[14]: 1.0, ids[16]: 1.0}
    kept = Estimator(held, weights=weights, kinds=kinds)
    assert kept.source(loaded) is kept.history
    assert kept.eta(pending, {}, loaded, 1) == pytest.approx(12.0)


def test_a_case_skipped_here_says_nothing_about_this_runs_speed() -> None:
    """A case the history timed but this run skipped at collection (0 s) scaled the history down
    (to 0 when it was the only one), and choosing the source then took the log of 0."""
    from harness.plugins.progress import Estimator

    history = {"test_a[m]": 2.0, "test_b[m-fp32-ort_cpu]": 1.0, "test_c[m]": 3.0}
    weights = {"test_x[m-fp32-ort_cpu]": 1.0, "test_b[m-fp32-ort_cpu]": 1.0}
    finished = {"s.py::test_x[m-fp32-ort_cpu]": 1.0, "s.py::test_a[m]": 0.0, "s.py::test_b[m-fp32-ort_cpu]": 1.0}
    est = Estimator(history, weights=weights)
    assert est.scale(finished) == 1.0  # test_b took its history's time; test_a's 0 s is no speed
    assert est.eta(["s.py::test_c[m]"], {}, finished, 1) == pytest.approx(3.0)


def test_an_estimate_that_fails_shows_no_eta_instead_of_failing_the_run(tmp_path: Path) -> None:
    """The ETA is computed in pytest's report hook: an estimator error there was an INTERNALERROR
    that ended the run (the log of 0 above did)."""
    from types import SimpleNamespace

    from harness.plugins.progress import Estimator, Tally

    class Broken(Estimator):
        def eta(self, *args: object, **kwargs: object) -> float | None:
            raise ValueError("math domain error")

    tally = Tally(SimpleNamespace(option=SimpleNamespace(numprocesses=0)), tmp_path)  # type: ignore[arg-type]
    tally.estimator = Broken()
    tally.total, tally.ids = 2, ["s.py::test_a[m]", "s.py::test_b[m]"]
    tally.finished = {"s.py::test_a[m]": 2.0}
    assert tally.eta_seconds() is None
    assert tally._eta() == ""  # the line is printed without an ETA


def test_eta_prices_with_the_earlier_run_whose_load_was_this_runs() -> None:
    """The newest earlier run ran beside a busy neighbour (PyTorch cases 2x, the cold starts not
    slowed: fresh processes); this run is quiet. Scaled by the finished cases, that history calls
    the cold starts still to come half their time; an older quiet run beside it, tried as an
    alternative, priced the finished cases right and prices the rest right."""
    from harness.plugins.progress import Estimator, case_kinds

    fast = [f"test_latency[m{i}-fp32-{b}]" for i in range(6) for b in ("ort_cpu", "torch_cpu")]
    cold = [f"test_cold_start_memory[m{i}-fp32-torch_cpu]" for i in range(3)]
    quiet = {**{i: (2.0 if "torch" in i else 1.0) for i in fast}, **dict.fromkeys(cold, 15.0)}
    busy = {**{i: (4.0 if "torch" in i else 1.0) for i in fast}, **dict.fromkeys(cold, 15.0)}
    weights, kinds = dict.fromkeys(fast + cold, 1.0), case_kinds(fast + cold)
    this_run = {f"s.py::{i}": quiet[i] for i in fast}
    pending = [f"s.py::{i}" for i in cold]
    est = Estimator(busy, weights=weights, kinds=kinds, alternatives=[quiet])
    assert est.source(this_run) is est.alternatives[0]
    assert est.eta(pending, {}, this_run, 1) == pytest.approx(45.0)
    # the controls: the busy run alone, scaled by this run's speed against it (18 / 30 s); the cost
    # model, which cannot know a cold start costs more than a latency case of the same weight
    assert Estimator(busy).eta(pending, {}, this_run, 1) == pytest.approx(45.0 * 0.6)
    assert Estimator(weights=weights, kinds=kinds).eta(pending, {}, this_run, 1) == pytest.approx(3 * 1.5)


def test_a_variant_built_earlier_in_the_run_weighs_as_one_that_exports_nothing() -> None:
    from harness.plugins.progress import case_kinds, reused_builds
    from harness.shard.cost import TORCH_FACTOR

    ids = ["test_generation_parity[m-fp32-ort_cpu]", "test_generation_parity[m-fp32-torch_cpu]",
           "test_logits_parity[m-fp32-ort_cpu]", "test_logits_parity[m-fp32-torch_cpu]", "test_logits_parity[b-fp32-ort_cpu]"]
    weights = dict.fromkeys(ids, 1.0)
    assert reused_builds(ids, weights, case_kinds(ids)) == {**weights, ids[2]: TORCH_FACTOR}  # the ORT export reused


def test_a_model_exported_by_an_earlier_case_loses_its_exporters_cost() -> None:
    """A dynamo model's FP32 export costs its exporter's own time once: the FP16 and INT8 cases
    after it convert the cached graph, and the same variant later reuses its files outright."""
    from harness.plugins.progress import case_kinds, reused_builds
    from harness.shard.cost import TORCH_FACTOR

    ids = ["test_logits_parity[e-fp32-torch_cpu]", "test_logits_parity[e-fp32-ort_cpu]",
           "test_logits_parity[e-fp16-ort_cpu]", "test_logits_parity[f-fp32-ort_cpu]", "test_latency[e-fp32-ort_cpu]"]
    weights = dict.fromkeys(ids, 41.0)
    exports = {i: (0.0 if "torch" in i else 40.0) for i in ids}
    out = reused_builds(ids, weights, case_kinds(ids), exports)
    assert out == {ids[0]: 41.0, ids[1]: 41.0, ids[2]: 1.0, ids[3]: 41.0, ids[4]: 1.0 * TORCH_FACTOR}


def test_eta_replay_of_a_recorded_run_is_within_30_percent() -> None:
    """The replay ``scripts/eta_accuracy.py`` does, on a run whose suites cost what the model
    says up to a factor per suite: from the first third on, every estimate is within +-30 %;
    the former mean-of-finished estimate is not (a cheap suite after an expensive one)."""
    module = load_script("eta_accuracy")
    from harness.plugins.progress import case_weights

    ids = [f"test_generation_parity[marian-tiny-{p}-{b}]" for p in ("fp32", "fp16", "int8") for b in ("torch_cpu", "ort_cpu")]
    ids += [f"test_logits_parity[{m}-{p}-{b}]" for m in ("bert-tiny", "llama-tiny", "marian-tiny")
            for p in ("fp32", "fp16", "int8") for b in ("torch_cpu", "ort_cpu")]
    weights = case_weights(ids)
    assert set(weights) == set(ids)
    # the machine's truth: 3 s per unit for generation, 0.9 for logits (the model's suite factors off by ~10 %)
    rate = {"test_generation_parity": 3.0, "test_logits_parity": 0.9}
    records = [{"id": i, "duration_s": weights[i] * rate[i.split("[")[0]]} for i in ids]
    errors = module.replay(records).errors
    assert errors and max(abs(e) for e in errors) <= 0.30, errors
    mean_errors = module.replay(records, weighted=False).errors
    assert max(abs(e) for e in mean_errors) > 0.30  # the negative control: the former estimate misses


def test_eta_replay_reads_an_earlier_run_as_its_history(tmp_path: Path) -> None:
    """``--replay RUN --history EARLIER``: the run replayed as the display shows a later run, each
    case priced at its duration in the earlier run times this run's speed against it. A run twice
    as slow as its history throughout is estimated exactly; without the history, from the cost
    model alone, it is not. A history that is no run directory is refused with exit 2."""
    module = load_script("eta_accuracy")
    ids = [f"test_logits_parity[{m}-{p}-{b}]" for m in ("bert-tiny", "marian-tiny")
           for p in ("fp32", "fp16", "int8") for b in ("torch_cpu", "ort_cpu")]
    earlier = [{"id": i, "duration_s": 0.1 * (1 + n % 5)} for n, i in enumerate(ids)]
    records = [{"id": r["id"], "duration_s": 2 * r["duration_s"]} for r in earlier]
    with_history = module.replay(records, history=earlier).errors
    assert with_history and max(abs(e) for e in with_history) < 1e-9, with_history
    assert max(abs(e) for e in module.replay(records).errors) > 0.05  # the control: the cost model alone
    for name, rows in (("b", records), ("a", earlier)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    script = [sys.executable, str(ROOT / "scripts" / "eta_accuracy.py"), "--replay", str(tmp_path / "b")]
    shown = subprocess.run([*script, "--history", str(tmp_path / "a")], capture_output=True, text=True, cwd=ROOT)
    assert shown.returncode == 0, shown.stderr
    assert "durations history of" in shown.stdout, shown.stdout
    assert re.search(r"remaining time: (\d+)/\1 estimates \(100%\)", shown.stdout.split("cost model")[0]), shown.stdout
    refused = subprocess.run([*script, "--history", str(tmp_path / "none")], capture_output=True, text=True, cwd=ROOT)
    assert refused.returncode == 2 and "no results.jsonl" in refused.stderr, refused.stderr
    alone = subprocess.run([*script[:2], "--journal", str(tmp_path / "j"), "--history", str(tmp_path / "a")],
                           capture_output=True, text=True, cwd=ROOT)
    assert alone.returncode == 2 and "--history: only with --replay" in alone.stderr, alone.stderr


def test_eta_accuracy_reads_the_estimates_with_time_left_apart() -> None:
    """In the last seconds one 0.3-s case is a third of what remains: the accuracy line also
    judges the estimates made with at least LEFT_FLOOR_S still to come, and says when there are none."""
    module = load_script("eta_accuracy")
    floor = module.LEFT_FLOOR_S
    # (done, estimate, truth, elapsed): one estimate 10 % off with time left, two 100 % off near the end
    accuracy = module.Accuracy([(1, 1.1 * 2 * floor, 2 * floor, 1.0), (2, 2.0, 1.0, 5.0), (3, 1.0, 0.5, 6.0)])
    assert accuracy.errors_with_time_left == pytest.approx([0.1])
    line = accuracy.line("ETA", 3)
    assert "remaining time: 1/3 estimates (33%)" in line, line
    assert f"remaining time, {floor:g} s or more still to come: 1/1 estimates (100%)" in line, line
    short = module.Accuracy([(1, 2.0, 1.0, 1.0)]).line("ETA", 1)
    assert f"{floor:g} s or more still to come: no estimate" in short, short


def test_eta_floor_tells_the_runs_spread_from_the_estimators_misses(tmp_path: Path) -> None:
    """``--floor``: each run's cases left priced at their median in the other runs times the run's
    own overall speed. Runs that differ by one factor are read exactly; runs whose last cases
    spread 3x between them are missed there whatever the speed (the misses no estimator avoids).
    Fewer than two runs, or runs of different commands, are refused with exit 2."""
    module = load_script("eta_accuracy")
    ids = [f"test_logits_parity[{m}-{p}-{b}]" for m in ("bert-tiny", "marian-tiny")
           for p in ("fp32", "fp16", "int8") for b in ("torch_cpu", "ort_cpu")]
    base = [0.1 * (1 + n % 4) for n in range(len(ids))]
    scaled = [[{"id": i, "duration_s": f * d} for i, d in zip(ids, base)] for f in (1.0, 2.0, 1.5)]
    for accuracy in module.repeatability(scaled):
        assert accuracy.errors and max(abs(e) for e in accuracy.errors) < 1e-9, accuracy.errors
    # the last three cases take 0.2, 0.6 or 1.8 s from run to run; the rest as before
    spread = [[{"id": i, "duration_s": (s if n < len(ids) - 3 else 0.2 * 3 ** ((n + k) % 3))}
               for n, (i, s) in enumerate(zip(ids, base))] for k in range(3)]
    read = module.repeatability(spread)
    assert all(min(a.errors) < -0.30 or max(a.errors) > 0.30 for a in read), [a.errors for a in read]
    for k, rows in enumerate(spread):
        (tmp_path / f"run-{k}").mkdir()
        (tmp_path / f"run-{k}" / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "results.jsonl").write_text(json.dumps({"id": "test_x[m-fp32-ort_cpu]", "duration_s": 1}))
    script = [sys.executable, str(ROOT / "scripts" / "eta_accuracy.py"), "--floor"]
    shown = subprocess.run([*script, *(str(tmp_path / f"run-{k}") for k in range(3))],
                           capture_output=True, text=True, cwd=ROOT)
    assert shown.returncode == 0, shown.stderr
    assert "all 3 runs" in shown.stdout and "known durations and speed" in shown.stdout, shown.stdout
    assert "the estimator, the others as history" in shown.stdout, shown.stdout
    alone = subprocess.run([*script, str(tmp_path / "run-0")], capture_output=True, text=True, cwd=ROOT)
    assert alone.returncode == 2 and "at least two run directories" in alone.stderr, alone.stderr
    mixed = subprocess.run([*script, str(tmp_path / "run-0"), str(tmp_path / "other")],
                           capture_output=True, text=True, cwd=ROOT)
    assert mixed.returncode == 2 and "no other run timed" in mixed.stderr and "run-0" in mixed.stderr, mixed.stderr
    assert "Traceback" not in mixed.stderr


def test_one_slow_group_does_not_price_the_suites_after_it() -> None:
    """A suite with no finished case is priced at the median of the finished groups' rates (a
    suite's cases of one backend), each group one vote: the seconds of every finished case over
    their units are mostly the heaviest group's, and cold exports beside another job (generation
    parity's ONNX Runtime cases at 0.5 s per unit, the other groups 0.2) priced every later suite
    at that."""
    from harness.plugins.progress import Estimator, case_kinds

    done_ids = ["test_generation_parity[m-fp32-ort_cpu]", "test_generation_parity[m-fp32-torch_cpu]",
                "test_logits_parity[m-fp32-ort_cpu]", "test_logits_parity[m-fp32-torch_cpu]"]
    pending = ["test_latency[m-fp32-ort_cpu]"]
    ids = done_ids + pending
    weights = {ids[0]: 60.0, ids[1]: 36.0, ids[2]: 9.0, ids[3]: 9.0, ids[4]: 10.0}
    est = Estimator(weights=weights, kinds=case_kinds(ids))
    done = {f"s.py::{ids[0]}": 30.0, f"s.py::{ids[1]}": 7.2, f"s.py::{ids[2]}": 1.8, f"s.py::{ids[3]}": 1.8}
    eta = est.eta([f"s.py::{pending[0]}"], {}, done, 1)
    assert eta is not None and abs(eta - 10 * 0.2) < 1e-9  # median of 0.5, 0.2, 0.2, 0.2
    assert abs(eta - 10 * 40.8 / 114) > 1.0  # the former prior: every finished second over every unit


def test_a_case_the_model_cannot_weigh_costs_what_those_it_could_not_weigh_took() -> None:
    """A case naming no variant (``test_artifact_perf[none]``: a suite with nothing to run, skipped
    at collection) took 0.0 s like the other such case already finished: it was priced at the mean
    finished case, 5 s of a ``--perf`` run's, shown as the ETA with nothing left to run."""
    from harness.plugins.progress import Estimator

    est = Estimator(weights={"test_latency[m-fp32-ort_cpu]": 5.0})
    done = {"s.py::test_artifact[none]": 0.0, "s.py::test_latency[m-fp32-ort_cpu]": 10.0}
    assert est.eta(["s.py::test_artifact_perf[none]"], {}, done, 1) == 0.0
    # none of them finished yet: the mean of the finished cases that took time, as before
    assert est.eta(["s.py::test_artifact_perf[none]"], {}, {"s.py::test_latency[m-fp32-ort_cpu]": 10.0}, 1) == 10.0
    assert Estimator().eta(["s.py::test_x"], {}, done, 1) == 10.0  # no cost model: the mean that took time


def test_eta_replay_of_a_perf_run_with_flat_suites_is_within_30_percent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``--perf`` run's cold starts take the same per backend whatever the model's graph count
    and precision (20 s a PyTorch variant, 1.5 s an ONNX Runtime one: SuiteFactor.flat): replayed
    through the cost model every estimate from the first third on is within +-30 %. Weighed by
    graphs x precision, llama-tiny's cases (one graph) after marian-tiny's (three) read -60 %."""
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))  # sizes unknown: 1, as on a cold cache
    module = load_script("eta_accuracy")
    ids = [f"test_cold_start_memory[{m}-{p}-{b}]" for m in ("marian-tiny", "llama-tiny")
           for p in ("fp32", "fp16", "int8") for b in ("torch_cpu", "ort_cpu")]
    records = [{"id": i, "duration_s": 20.0 if "torch" in i else 1.5} for i in ids]
    errors = module.replay(records).errors
    assert errors and max(abs(e) for e in errors) <= 0.30, errors


def test_wall_clock_stretches_the_eta_and_the_journal_judges_it(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The cases' durations leave out the gaps between them: the ETA is stretched by the wall
    seconds per case second so far (1 to 2x, once 3 cases finished); the journal a run keeps with
    ``HARNESS_PROGRESS_ETA_LOG`` is judged against the session's true end."""
    from harness.plugins.progress import MAX_WALL_FACTOR, EtaJournal, wall_factor

    assert wall_factor(15.0, [4.0, 3.0, 3.0], [], 1) == 1.5
    assert wall_factor(15.0, [5.0, 5.0], [], 1) == 1.0  # too few cases to trust the clock
    assert wall_factor(7.5, [5.0, 5.0, 5.0], [], 2) == 1.0  # two workers: 7.5 s busy each, no gap
    assert wall_factor(600.0, [1.0, 1.0, 1.0], [], 1) == MAX_WALL_FACTOR
    log = tmp_path / "eta.jsonl"
    monkeypatch.setenv(EtaJournal.ENV, str(log))
    journal = EtaJournal.from_env()
    assert journal is not None
    for done, eta in ((1, 1.0), (2, 8.0), (3, 2.0), (4, 0.5), (5, None)):
        journal.estimate(done, 5, eta)
    journal.ended()
    module = load_script("eta_accuracy")
    read = module.Journal.read(log)
    estimates = read.accuracy().estimates
    # from a third on; once every case finished the display shows no ETA and journals none (a 0 s
    # there read as a -100 % miss against the reports' last tenth of a second)
    assert read.total == 5 and [done for done, _, _, _ in estimates] == [2, 3, 4]
    truths = [truth for _, _, truth, _ in estimates]
    assert all(t > 0 for t in truths) and truths == sorted(truths, reverse=True)
    elapsed = [seconds for _, _, _, seconds in estimates]
    assert all(s >= 0 for s in elapsed) and elapsed == sorted(elapsed)  # the wall seconds when each was made


def test_pytest_benchmark_table_is_narrowed_under_harness_run(tmp_path: Path) -> None:
    """Its ten default columns wrapped on a terminal and pushed the harness's summary off screen;
    under ``harness run`` it has four (its full statistics are in the records), unless the user's
    ``--pytest-args`` chose columns."""
    bench = tmp_path / "test_bench_width.py"
    bench.write_text("def test_a_rather_long_benchmark_name(benchmark):\n    benchmark(lambda: sum(range(50)))\n")
    # a run of its own: an xdist worker's variables would tell pytest-benchmark to stay quiet
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}, "COLUMNS": "100"}
    done = subprocess.run([sys.executable, "-c", "from harness.cli import entrypoint; entrypoint()", "run", "--suites",
                           str(bench), "--out", str(tmp_path / "run")], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=PATIENCE)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    table = [line for line in done.stdout.splitlines()
             if line.startswith(("a_rather_long_benchmark_name", "Name (time")) or "benchmark: 1 tests" in line]
    assert table and all(len(line) <= 100 for line in table), table
    header = next(line for line in table if "Median" in line)
    assert "StdDev" not in header and "Max" not in header
    from harness.cli.run import _benchmark_args

    assert _benchmark_args(["--benchmark-columns=min,max"]) == []  # the user's choice wins


def test_the_eta_history_is_the_earlier_run_that_timed_this_runs_cases():
    """Beside the full nightly, the newest run was often a one-model try: its durations cover few of
    this run's cases. The history is the run timing most of them, a finished one before an
    interrupted one (whose slow cases are missing), the newest among equals; the others follow
    in that order as the ETA's alternatives."""
    from harness.plugins.progress import ranked_histories

    def best(runs, ids):
        ranked = ranked_histories(runs, ids)
        return ranked[0] if ranked else {}

    ids = [f"suite.py::test_x[case-{i}]" for i in range(4)]
    full = {f"test_x[case-{i}]": 10.0 + i for i in range(4)}
    try_one = {"test_x[case-0]": 9.0, "test_x[case-1]": 9.5}
    other = {f"test_y[other-{i}]": 1.0 for i in range(9)}
    newest_first = [(try_one, True), (other, True), (full, True)]
    assert best(newest_first, ids) is full
    ranked = ranked_histories(newest_first, ids)
    assert [id(h) for h in ranked] == [id(full), id(try_one), id(other)]
    interrupted = dict(full)
    assert best([(interrupted, False), (full, True)], ids) is full  # same cases: the finished one
    again = dict(full)
    assert best([(again, True), (full, True)], ids) is again  # equals: the newest
    assert best([(try_one, True), ({}, True)], ids) is try_one
    assert ranked_histories([(try_one, True), ({}, True)], ids) == [try_one]  # a run that timed nothing: no candidate
    assert best([(other, True), (try_one, True)], []) is other  # no cases known yet: the newest
    assert ranked_histories([], ids) == []
