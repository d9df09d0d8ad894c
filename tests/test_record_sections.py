"""Typed record sections (``harness.results.sections``): older records still load, odd shapes read as
the defaults, each writer round-trips through its reader, and no reader outside ``harness.results``
indexes the sections' keys by string."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from harness.results import Record
from harness.results.sections import (
    Evidence,
    Generation,
    Interrupted,
    Judged,
    Memory,
    PerfHeadlines,
    PerfSetup,
    Served,
    SettingsSection,
)

#: a record as harness 0.1 wrote it (before memory, phases, repro bundles, forensics and runtime settings)
OLD = {
    "schema": "harness.result/1", "id": "test_logits_parity[bert-tiny-fp16-ort_cpu]", "verdict": "fail",
    "reason": "1 check(s) failed", "metrics": {"model.logits.norm_max_abs": 0.01},
    "thresholds": {"model.logits.norm_max_abs": {"threshold": 0.001, "op": "<="}},
    "settings": {"opset": 17, "batch_size": 8}, "env": {"fingerprint": "abc"},
    "data": {"worst": {"model.logits": "batch=3, position=2, index=1"},
             "failing_batches": {"model": "cases/x/model-batch0.npz"}},
    "perf": {"p50_ms": 1.5},
}


def test_an_old_record_loads_with_every_section():
    record = Record.from_dict(OLD)
    assert Judged.of(record).worst == {"model.logits": "batch=3, position=2, index=1"}
    assert Judged.of(record).replayed_outputs == () and Judged.of(record).profile == {}
    evidence = Evidence.of(record)
    assert evidence.failing_batches == {"model": "cases/x/model-batch0.npz"} and evidence.repro_bundles == {}
    assert Memory.of(record) == Memory() and Memory.of(record).growth_bytes is None
    assert Generation.of(record) == Generation() and not Generation.of(record).replayed
    assert PerfHeadlines.of(record) == PerfHeadlines()
    assert SettingsSection.of(record).runtime is None


def test_sections_of_another_shape_read_as_defaults():
    odd = {**OLD, "data": {"worst": ["not", "a", "map"], "repro_bundles": "x", "worst_pairs": {"a": 1},
                           "generation": {"seconds": {"tokens_per_s": "fast"}}},
           "memory": {"peak_rss_bytes": "lots", "start_rss_bytes": True}, "perf": {"cold_start_ms": 3},
           "settings": {"runtime": "ort"}}
    record = Record.from_dict(odd)
    assert Judged.of(record).worst == {} and Evidence.of(record).repro_bundles == {}
    assert Generation.of(record).worst_pairs == () and Generation.of(record).tokens_per_s is None
    assert Memory.of(record).peak_rss_bytes is None and Memory.of(record).start_rss_bytes is None
    assert PerfHeadlines.of(record).cold_load_ms is None and SettingsSection.of(record).runtime is None


def test_writers_round_trip_and_evidence_merges():
    data: dict = {}
    Evidence(failing_batches={"encoder": "a.npz"}, repro_bundles={"encoder": "repro-encoder"}).write(data)
    Evidence(repro_bundles={"generation": "repro-generation"}, bundle_error="OSError: disk full").write(data)
    shapes = ({"graph": "encoder", "probe": "corpus", "shapes": {"input_ids": [2, 7]}},)
    judged = Judged({"encoder.last_hidden_state": "batch=0"}, ("encoder",), {"encoder": {"top": []}},
                    {"encoder.load": 0.123456, "encoder.run": 0.5}, shapes)
    judged.write(data)
    generation = Generation({"replayed": True}, {"bleu": "nrefs:1"}, {"tokens_per_s": 12.5}, "decoded.jsonl",
                            ({"index": 0, "source": "hi"},), ({"step": 2},), {"sentence": 0})
    generation.write(data)
    memory = Memory(100, 10, 40, 120, "vmhwm")
    record = Record.from_dict({**OLD, "data": data, "memory": memory.to_dict()})
    assert Evidence.of(record) == Evidence({"encoder": "a.npz"},
                                           {"encoder": "repro-encoder", "generation": "repro-generation"},
                                           "OSError: disk full")
    assert Judged.of(record) == Judged(judged.worst, judged.replayed_outputs, judged.profile,
                                       {"encoder.load": 0.1235, "encoder.run": 0.5}, shapes)  # seconds to 0.1 ms
    assert Generation.of(record) == generation and Generation.of(record).replayed
    assert Generation.of(record).tokens_per_s == 12.5
    assert Memory.of(record) == memory and memory.growth_bytes == 30


PAYLOADS = ("data", "memory", "perf", "settings")


def _payload_string_accesses(tree: ast.AST) -> list[tuple[int, str]]:
    """``x.data["key"]`` and ``x.data.get("key")`` (any receiver ``x``, any of the four payloads)."""
    found = []
    for node in ast.walk(tree):
        target: ast.expr | None = None
        key: ast.expr | None = None
        if isinstance(node, ast.Subscript):
            target, key = node.value, node.slice
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args):
            target, key = node.func.value, node.args[0]
        if (isinstance(target, ast.Attribute) and target.attr in PAYLOADS and isinstance(key, ast.Constant)
                and isinstance(key.value, str)):
            found.append((node.lineno, f"{target.attr}[{key.value!r}]"))
    return found


def test_no_code_outside_results_indexes_a_record_payload_by_string():
    """Every key of ``data``/``memory``/``perf``/``settings`` is spelled in ``harness/results/`` only:
    readers and writers elsewhere go through a section type (issue 22: were 37 sites in 15 modules;
    13 in 7 before the last sections). A new payload field gets a section, not a string."""
    root = Path(__file__).resolve().parents[1] / "harness"
    found = [f"{p.relative_to(root)}:{line}: {what}" for p in sorted(root.rglob("*.py")) if "results" not in p.parts
             for line, what in _payload_string_accesses(ast.parse(p.read_text()))]
    assert not found, "\n".join(found)


def test_the_payload_scan_sees_reads_and_writes():
    tree = ast.parse("a = rec.data['x']\nb = case.perf.get('y')\nr.settings['z'] = 1\nok = data['w']\n")
    assert [what for _, what in _payload_string_accesses(tree)] == ["data['x']", "perf['y']", "settings['z']"]


def test_perf_setup_interrupted_served_and_settings_round_trip():
    perf = {"latency_ms": {"throughput": 12.5, "summary": {}}}
    PerfSetup({"samples": 40, "threads": {"ort_intra_op_threads": 2}}).write(perf)
    data: dict = {}
    Interrupted("SIGTERM").write(data)
    Served({"model": {"name": "bert", "versions": ["1"]}}).write(data)
    record = Record(id="x", verdict="not-run", perf=perf, data=data,
                    settings={"options": {"threads": 2}, "samples_requested": 16, "batch_size": 8})
    assert perf["throughput"] == 12.5
    assert PerfSetup.of(record).ort_intra_op_threads == 2
    assert Interrupted.of(record) and Interrupted.of(record).signal == "SIGTERM"
    assert Served.of(record).models == {"model": {"name": "bert", "versions": ["1"]}}
    section = SettingsSection.of(record)
    assert (section.option("threads"), section.option("samples"), section.option("opset")) == (2, 16, None)
    old = Record.coerce(OLD)
    assert not Interrupted.of(old) and PerfSetup.of(old).ort_intra_op_threads is None and Served.of(old).models == {}


def test_no_reader_outside_results_indexes_the_typed_sections_by_string():
    """The keys a section declares are spelled in ``harness/results/`` only (and by their writers'
    callers through the section types): a report or gate reading them goes through the section."""
    keys = ("failing_batches", "repro_bundles", "repro_bundle_error", "worst_pairs", "generation_forensics",
            "replayed_outputs", "peak_rss_bytes", "start_rss_bytes", "end_rss_bytes", "cold_start_ms")
    pattern = re.compile(r"""\b(?:record|rec|r)\.(?:data|memory|perf)(?:\.get\(|\[)["'](%s)["']""" % "|".join(keys))
    root = Path(__file__).resolve().parents[1] / "harness"
    found = [f"{p.relative_to(root)}:{n}" for p in root.rglob("*.py") if "results" not in p.parts
             for n, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, found
    writers = [f"{p.relative_to(root)}:{n}" for p in root.rglob("*.py") if p.name != "sections.py"
               for n, line in enumerate(p.read_text().splitlines(), 1)
               if re.search(r"""\[["']repro_bundles["']\]\s*=""", line)]
    assert not writers, writers  # one writer: Evidence.write
