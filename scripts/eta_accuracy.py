"""How far the progress ETA was from the truth: on a real run, or replayed from a finished one.

    python scripts/eta_accuracy.py --run -- --out reports/eta-default            # the default run
    python scripts/eta_accuracy.py --run -- --perf --models bert-tiny --out reports/eta-perf
    python scripts/eta_accuracy.py --journal eta.jsonl                          # a journal kept before
    python scripts/eta_accuracy.py --replay reports/run-20261202-080024 [--workers 1]
    python scripts/eta_accuracy.py --replay reports/run-b --history reports/run-a   # a's durations as history
    python scripts/eta_accuracy.py --replay reports/run-c --history reports/run-b reports/run-a
    python scripts/eta_accuracy.py --floor reports/run-a reports/run-b reports/run-c   # how repeatable

``--run`` runs ``harness run`` with the given arguments and ``HARNESS_PROGRESS_ETA_LOG`` set: the
progress display writes every estimate it showed with its wall-clock time, and the session's end
(``harness.plugins.progress.EtaJournal``). The truth of an estimate is the wall-clock time from it
to the end of the session, start-up, collection, the gaps between cases and the reports included.
Prints the fraction of the estimates taken after a third of the cases had finished that fall
within +-30 % of the true remaining time (all of them, and those made with 5 s or more still to
come), and of the finish times they predict within +-30 % of the run's wall time, with median
and worst errors, the run's wall time and the load average (1-minute, sampled every 5 s while the
run lasted: its mean and maximum).

``--replay`` replays a run directory's ``results.jsonl`` in the order its cases finished, each with
its duration, through the estimator (the shard planner's cost weights, no durations history -- a
first run; an export counts as cached when it is in ``HARNESS_CACHE`` now); its truth is the sum
of the durations still to come, so it judges the model, not the wall clock. ``--history`` replays
it as a later run: with an earlier run directory's durations as its history (each case's duration
there, scaled by how this run's finished cases compare with theirs), printed first; more than one
directory are read as the display reads the runs beside its ``--out``: the first the history, the
others its alternatives (``Estimator.source`` prices with whichever priced the last cases best).

``--floor`` asks how much of the misses the runs' own noise makes, whatever the estimator: given
several run directories of the same command, it prices each run's cases still to come at their
median duration in the other runs, times this run's own speed against those medians over the
whole run -- what an ETA would show that knew every case's typical duration and, in advance, how
fast this run would go. What it misses is the cases' run-to-run spread alone (the last seconds of
a default run took 3.5 % to 6.0 % of its case time across five quiet runs; a busy neighbour
tripled some cases and not others). Printed per run beside the estimator's replay with the other
runs as its history, then totalled.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.plugins.progress import Estimator, EtaJournal, case_kinds, case_weights, run_weights

#: an estimate counts as good within this relative error of the true remaining time
TOLERANCE = 0.30
#: the third reading judges only the estimates with at least this much still to come: in the last
#: seconds one 0.3-s case is a third of what remains, and a reader waits them out either way
LEFT_FLOOR_S = 5.0


@dataclass(frozen=True)
class Accuracy:
    """The estimates from the first third of a run on: (cases done, estimated s, true s, seconds
    elapsed since the run started) each.

    Two readings of one estimate, both printed: its error against the time still to come (strict:
    two seconds off with one second left reads +200 %), and the finish time it predicts (now +
    estimate) against the real finish, as a fraction of the whole run's wall time (what a reader
    planning around the run meets)."""

    estimates: list[tuple[int, float, float, float]]

    @property
    def errors(self) -> list[float]:
        return [eta / truth - 1 for _, eta, truth, _ in self.estimates]

    @property
    def errors_with_time_left(self) -> list[float]:
        """:attr:`errors` of the estimates made with at least :data:`LEFT_FLOOR_S` still to come."""
        return [eta / truth - 1 for _, eta, truth, _ in self.estimates if truth >= LEFT_FLOOR_S]

    @property
    def finish_errors(self) -> list[float]:
        return [(eta - truth) / (elapsed + truth) for _, eta, truth, elapsed in self.estimates]

    def line(self, name: str, total: int) -> str:
        if not self.estimates:
            return f"{name}: no estimate after a third of the {total} cases"
        return (f"{name}, from case {self.estimates[0][0]} of {total}:\n"
                f"  remaining time: {_share(self.errors)}\n"
                f"  remaining time, {LEFT_FLOOR_S:g} s or more still to come: {_share(self.errors_with_time_left)}\n"
                f"  finish time (error as a share of the run's wall time): {_share(self.finish_errors)}")


def _share(errors: list[float]) -> str:
    if not errors:
        return "no estimate"
    good = sum(abs(e) <= TOLERANCE for e in errors)
    return (f"{good}/{len(errors)} estimates ({good / len(errors):.0%}) within +-{TOLERANCE:.0%}; median |error| "
            f"{statistics.median(abs(e) for e in errors):.0%}, worst {max(errors, key=abs):+.0%}")


def replay(records: list[dict[str, Any]], workers: int = 1, weighted: bool = True, by_kind: bool = True,
           history: list[dict[str, Any]] | None = None, alternatives: list[list[dict[str, Any]]] | None = None) -> Accuracy:
    """The estimates a run's cases would have been shown, in the order they finished; ``history``:
    an earlier run's records, what the display reads as its durations history (none: a first run);
    ``alternatives``: other earlier runs' records, tried as the history too."""
    ids = [str(r["id"]) for r in records]
    seconds = [float(r.get("duration_s") or 0.0) for r in records]
    kinds = case_kinds(ids)
    weights = run_weights(ids) if by_kind else case_weights(ids)
    earlier = _durations(history or [])
    others = [_durations(rows) for rows in alternatives or []]
    estimator = Estimator(earlier, weights=weights if weighted else None, kinds=kinds if by_kind else None,
                          alternatives=others)
    out = []
    for done in range(max(len(ids) // 3, 1), len(ids)):
        finished = dict(zip(ids[:done], seconds[:done]))
        eta = estimator.eta(ids[done:], {}, finished, workers)
        truth = sum(seconds[done:]) / workers
        if eta is not None and truth > 0:
            out.append((done, eta, truth, sum(seconds[:done]) / workers))
    return Accuracy(out)


def repeatability(runs: list[list[dict[str, Any]]], names: list[str] | None = None) -> list[Accuracy]:
    """Per run, the estimates of an ETA that knew each case's median duration in the other runs and
    this run's overall speed against them (``--floor``): the misses the cases' spread alone makes.
    Every case of a run must be timed by some other run (the runs are of one command)."""
    if len(runs) < 2:
        raise ValueError("at least two runs of the same command are needed")
    timed = [_durations(rows) for rows in runs]
    out = []
    for n, rows in enumerate(runs):
        ids = [str(r["id"]) for r in rows]
        seconds = [float(r.get("duration_s") or 0.0) for r in rows]
        others = [t for m, t in enumerate(timed) if m != n]
        typical = {}
        for case in ids:
            seen = [t[case] for t in others if case in t]
            if seen:
                typical[case] = statistics.median(seen)
        untimed = [case for case, s in zip(ids, seconds) if s > 0 and case not in typical]
        if untimed:
            name = names[n] if names else f"run {n + 1}"
            raise ValueError(f"{name}: {len(untimed)} case(s) no other run timed, e.g. {untimed[0]} "
                             "(the runs must be of the same command)")
        speed = sum(seconds) / (sum(typical.values()) or 1.0)
        estimates = []
        for done in range(max(len(ids) // 3, 1), len(ids)):
            truth = sum(seconds[done:])
            if truth > 0:
                estimates.append((done, speed * sum(typical.get(c, 0.0) for c in ids[done:]), truth,
                                  sum(seconds[:done])))
        out.append(Accuracy(estimates))
    return out


def floor(paths: list[Path]) -> int:
    """``--floor``: each run's repeatability reading beside the estimator's replay with the other
    runs as its history, per run and in total."""
    runs = [_records(path) for path in paths]
    try:
        references = repeatability(runs, [str(path) for path in paths])
    except ValueError as error:
        print(f"eta_accuracy: --floor: {error}", file=sys.stderr)
        return 2
    totals: dict[str, list[float]] = {"known durations and speed": [], "the estimator, the others as history": []}
    totals_left: dict[str, list[float]] = {name: [] for name in totals}
    for n, (path, rows, reference) in enumerate(zip(paths, runs, references)):
        others = [r for m, r in enumerate(runs) if m != n]
        estimator = replay(rows, history=others[0], alternatives=others[1:])
        print(f"{path} ({len(rows)} cases):")
        for name, accuracy in zip(totals, (reference, estimator)):
            totals[name] += accuracy.errors
            totals_left[name] += accuracy.errors_with_time_left
            print(f"  {name}: {_share(accuracy.errors)}")
    print(f"all {len(runs)} runs, estimates from the first third on within +-{TOLERANCE:.0%} of the time still to come:")
    for name in totals:
        print(f"  {name}: {_share(totals[name])}\n"
              f"  {name}, {LEFT_FLOOR_S:g} s or more still to come: {_share(totals_left[name])}")
    return 0


@dataclass(frozen=True)
class Journal:
    """A journal's estimates and the session's start and end (wall clock)."""

    started: float | None
    ended: float
    total: int
    entries: list[tuple[float, int, float | None]]

    @classmethod
    def read(cls, path: Path) -> Journal:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        ended = next((e["ended"] for e in reversed(lines) if "ended" in e), None)
        if ended is None:
            raise SystemExit(f"{path}: the session's end is not in the journal (the run did not finish)")
        entries = [(float(e["t"]), int(e["done"]), e.get("eta")) for e in lines if "t" in e]
        total = max((int(e["total"]) for e in lines if "total" in e), default=0)
        return cls(next((e.get("started") for e in lines if "started" in e), None), float(ended), total, entries)

    def accuracy(self) -> Accuracy:
        third = self.total / 3
        start = self.started if self.started is not None else min((t for t, _, _ in self.entries), default=self.ended)
        return Accuracy([(done, float(eta), self.ended - t, t - start) for t, done, eta in self.entries
                         if done >= third and eta is not None and self.ended - t > 0])


class LoadSampler:
    """The 1-minute load average every ``period`` seconds while a run lasts."""

    def __init__(self, period: float = 5.0) -> None:
        self.samples = [os.getloadavg()[0]]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(period,), daemon=True)
        self.thread.start()

    def _run(self, period: float) -> None:
        while not self.stop.wait(period):
            self.samples.append(os.getloadavg()[0])

    def close(self) -> str:
        self.stop.set()
        self.thread.join(timeout=10)
        return f"load average (1 min) mean {statistics.mean(self.samples):.1f}, max {max(self.samples):.1f}"


def run(args: list[str], keep: Path | None = None) -> int:
    """``harness run ARGS`` with the journal on (kept at ``keep`` when given); prints its accuracy
    and the load."""
    with tempfile.TemporaryDirectory() as tmp:
        path = keep or Path(tmp) / "eta.jsonl"
        path.unlink(missing_ok=True)
        load = LoadSampler()
        began = time.time()
        code = subprocess.call([sys.executable, "-c", "from harness.cli import entrypoint; entrypoint()", "run", *args],
                               env={**os.environ, EtaJournal.ENV: str(path)})
        wall = time.time() - began
        load_line = load.close()
        journal = Journal.read(path)
    print(f"harness run {' '.join(args)}: exit {code}, {journal.total} cases, {wall:.0f} s wall; {load_line}")
    print(journal.accuracy().line("ETA (wall clock, start-up to the reports)", journal.total))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", action="store_true", help="run `harness run` with the arguments after --")
    source.add_argument("--journal", type=Path, help="an ETA journal a run wrote (HARNESS_PROGRESS_ETA_LOG)")
    source.add_argument("--replay", type=Path, metavar="RUN_DIR", help="replay a run directory's durations")
    source.add_argument("--floor", type=Path, metavar="RUN_DIR", nargs="+",
                        help="run directories of one command: the misses their cases' run-to-run spread "
                             "makes alone, beside the estimator's")
    parser.add_argument("--workers", type=int, default=1, help="with --replay: the run's xdist workers")
    parser.add_argument("--history", type=Path, metavar="RUN_DIR", nargs="+",
                        help="with --replay: earlier run directories, the first read as the durations "
                             "history, the others as its alternatives (the display reads the runs "
                             "beside the run's --out, the best match first)")
    parser.add_argument("--keep-journal", type=Path, metavar="FILE", help="with --run: keep the journal here")
    parser.add_argument("rest", nargs="*", help="with --run: harness run's arguments (after --)")
    args = parser.parse_args()
    if args.history is not None and args.replay is None:
        parser.error("--history: only with --replay (a live run reads its history beside its --out)")
    if args.run:
        return run(args.rest, args.keep_journal)
    if args.floor:
        if len(args.floor) < 2:
            parser.error("--floor: at least two run directories of the same command")
        return floor(args.floor)
    if args.journal:
        journal = Journal.read(args.journal)
        print(journal.accuracy().line("ETA (wall clock)", journal.total))
        return 0
    records = _records(args.replay)
    if args.history:
        history, *alternatives = [_records(path) for path in args.history]
        names = " then ".join(str(path) for path in args.history)
        print(replay(records, args.workers, history=history, alternatives=alternatives).line(
            f"durations history of {names}, scaled by this run's speed", len(records)))
    for weighted, by_kind, name in ((True, True, "cost model, reused builds, rates per suite and backend"),
                                    (True, False, "cost model, rates per suite (the former estimate)"),
                                    (False, False, "mean of finished cases")):
        print(replay(records, args.workers, weighted, by_kind).line(name, len(records)))
    return 0


def _durations(records: list[dict[str, Any]]) -> dict[str, float]:
    return {str(r["id"]): float(r["duration_s"]) for r in records if r.get("duration_s")}


def _records(run_dir: Path) -> list[dict[str, Any]]:
    results = run_dir / "results.jsonl"
    if not results.is_file():
        print(f"eta_accuracy: {run_dir}: no results.jsonl (not a run directory)", file=sys.stderr)
        raise SystemExit(2)
    return [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines() if line.strip()]


if __name__ == "__main__":
    raise SystemExit(main())
