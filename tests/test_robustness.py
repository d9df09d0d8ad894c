"""Robustness suite (issue 11): bad input and faults, each case as a careless operator meets it.

Every case ends in one of two ways: the harness does the right thing, or it refuses with ONE line
on stderr and exit 2 -- never a traceback, never a silently wrong pass. docs/reliability.md lists
every case with the test that proves it. Cases the harness already handled well before issue 11
are kept here (or referenced in the docs where another module already proves them) so they stay
so. The fuzzing of the three readers is in ``test_robustness_fuzz.py``.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.core import UsageError
from harness.data.corpus import CorpusError, datasets_dir, load_corpus, load_corpus_file
from harness.results import SCHEMA, Record
from harness.settings.config_file import load_config

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_line_refusal(code: int, out: str, err: str) -> str:
    """The contract of a refusal: exit 2, one line on stderr starting ``harness: error:``, no traceback."""
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("harness: error: "), err
    assert "Traceback" not in err + out
    return lines[0]


# -- inputs: paths held to the config's root ------------------------------------------------------------
@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "models" / "m").mkdir(parents=True)
    (root / "models" / "m" / "config.json").write_text("{}")
    return root


def _config(root: Path, text: str) -> Path:
    path = root / "harness.toml"
    path.write_text(text)
    return path


def test_symlinked_file_in_a_config_model_dir_pointing_outside_is_refused(project: Path, tmp_path: Path) -> None:
    """Was: followed, the case passed with weights from outside the root."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "weights.safetensors").write_bytes(b"not yours")
    os.symlink(outside / "weights.safetensors", project / "models" / "m" / "model.safetensors")
    path = _config(project, "[models.m]\npath = 'models/m'\nfamily = 'encoder'\n")
    with pytest.raises(UsageError, match=r"models\.m\.path: 'models/m' holds model\.safetensors, a link to .*outside"):
        load_config(path)


def test_symlink_deep_inside_an_artifacts_dir_pointing_outside_is_refused(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "weights.bin").write_bytes(b"x")
    nested = project / "onnx" / "sub"
    nested.mkdir(parents=True)
    os.symlink(outside / "weights.bin", nested / "model.onnx_data")
    path = _config(project, "[models.bert-tiny.artifacts]\nfp32 = 'onnx'\n")
    with pytest.raises(UsageError, match=r"artifacts\.fp32: 'onnx' holds sub/model\.onnx_data, a link to"):
        load_config(path)


def test_symlinks_that_stay_inside_the_root_are_fine(project: Path) -> None:
    (project / "shared.json").write_text("{}")
    os.symlink(project / "shared.json", project / "models" / "m" / "tokenizer.json")
    os.symlink(project / "models", project / "models" / "m" / "loop")  # a loop: walked once, not forever
    config = load_config(_config(project, "[models.m]\npath = 'models/m'\nfamily = 'encoder'\n"))
    assert config.entries["m"].path == (project / "models" / "m").resolve()


@pytest.mark.parametrize("value", ["../outside", "/etc", "linked"])
def test_dotdot_absolute_and_symlinked_dirs_stay_refused(project: Path, tmp_path: Path, value: str) -> None:
    """Already handled well: kept so."""
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", project / "linked")
    with pytest.raises(UsageError, match="escapes the config's directory|is absolute"):
        load_config(_config(project, f"[models.m]\npath = '{value}'\n"))


# -- inputs: corpora ----------------------------------------------------------------------------------
@pytest.fixture
def tampered_datasets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "datasets"
    shutil.copytree(datasets_dir(), root)
    with (root / "sentences_en.txt").open("a", encoding="utf-8") as fh:
        fh.write("A sentence nobody reviewed.\n")
    monkeypatch.setenv("HARNESS_DATASETS", str(root))
    return root


def _identity_onnx(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "t"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["b", "t"])
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["b", "t"])
    graph = helper.make_graph([helper.make_node("Cast", ["input_ids"], ["logits"], to=TensorProto.FLOAT)], "g",
                              [ids, mask], [logits])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_check_on_a_corpus_that_no_longer_matches_its_manifest_is_one_line(tampered_datasets, tmp_path, capsys):
    """Was: a 22-line traceback, exit 1 (``harness run`` reported it properly)."""
    onnx_file = _identity_onnx(tmp_path / "model.onnx")
    code, out, err = _cli(["check", "--reference", "bert-tiny", "--onnx", str(onnx_file), "--out",
                           str(tmp_path / "out")], capsys)
    line = _one_line_refusal(code, out, err)
    assert "sentences_en.txt: sha256 mismatch for corpus 'sentences_en'" in line
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_tampered_corpus_is_refused_by_the_reader(tampered_datasets) -> None:
    """Already handled well (``harness run`` reports it through the same reader): kept so."""
    with pytest.raises(CorpusError, match="sha256 mismatch"):
        load_corpus("sentences_en")


def test_bad_corpus_line_is_named_by_file_and_line(tmp_path: Path) -> None:
    """Already handled well: kept so (more shapes in test_corpus.py and the fuzzing)."""
    path = tmp_path / "pairs.tsv"
    path.write_text("a\tb\nno tab here\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"pairs\.tsv:2: expected exactly one tab"):
        load_corpus_file(path)


def test_bad_config_is_named_by_file_and_key(project: Path) -> None:
    """Already handled well: kept so (more shapes in test_config_file.py and the fuzzing)."""
    with pytest.raises(UsageError, match=r"harness\.toml: run\.samples: must be >= 1, got 0"):
        load_config(_config(project, "[run]\nsamples = 0\n"))
    with pytest.raises(UsageError, match=r"harness\.toml: invalid TOML .*line 1"):
        load_config(_config(project, "[run\n"))


# -- inputs: foreign databases ---------------------------------------------------------------------------
def _run_dir(root: Path) -> Path:
    root.mkdir(parents=True)
    record = {"schema": SCHEMA, "id": "test_x[m-fp32-ort_cpu]", "run_id": "r1", "verdict": "pass",
              "finished": "2026-01-01T00:00:00+00:00", "metrics": {"logits.cosine": 0.9999}}
    (root / "results.jsonl").write_text(json.dumps(record) + "\n")
    return root


@pytest.mark.parametrize("foreign", ["CREATE TABLE users (id INTEGER, name TEXT)",
                                     "CREATE TABLE runs (id INTEGER, name TEXT)"],
                         ids=["other-tables", "a-runs-table-of-its-own"])
def test_history_refuses_another_applications_database_untouched(tmp_path, capsys, foreign):
    """Was: the harness tables written into it, then a traceback (or silently added)."""
    db = tmp_path / "other.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute(foreign)
        conn.execute(f"INSERT INTO {foreign.split()[2]} VALUES (1, 'someone')")
    conn.close()
    before = db.read_bytes()
    run = _run_dir(tmp_path / "run")
    for argv in (["add", str(run)], ["list"], ["show"]):
        code, out, err = _cli(["history", *argv, "--history-db", str(db)], capsys)
        assert "is not a harness history database" in _one_line_refusal(code, out, err)
        assert db.read_bytes() == before


def test_history_refuses_a_file_that_is_not_sqlite_untouched(tmp_path, capsys):
    db = tmp_path / "notes.sqlite"
    db.write_text("just some notes\n" * 100)
    code, out, err = _cli(["history", "add", str(_run_dir(tmp_path / "run")), "--history-db", str(db)], capsys)
    assert "is not a usable history database" in _one_line_refusal(code, out, err)
    assert db.read_text() == "just some notes\n" * 100


def test_history_still_opens_its_own_database(tmp_path, capsys):
    db = tmp_path / "history.sqlite"
    assert _cli(["history", "add", str(_run_dir(tmp_path / "run")), "--history-db", str(db)], capsys)[0] == 0
    assert _cli(["history", "add", str(tmp_path / "run"), "--history-db", str(db)], capsys)[0] == 0  # idempotent, reopened
    assert _cli(["history", "list", "--history-db", str(db)], capsys)[0] == 0


# -- inputs: CLI values judged as their config counterparts ---------------------------------------------
BAD_TOLERANCES = [("norm_max_abs=-1", "an error bound must be >= 0"), ("cosine=nan", "expected a finite number"),
                  ("cosine=inf", "expected a finite number"), ("max_abs=-inf", "expected a finite number")]


@pytest.mark.parametrize("command", [["check", "--reference", "absent-model", "--onnx", "absent.onnx"],
                                     ["bisect", "--models", "absent-model", "--precisions", "int8"]],
                         ids=["check", "bisect"])
@pytest.mark.parametrize("value,message", BAD_TOLERANCES)
def test_cli_tolerance_is_validated_as_the_config_validates_it(command, value, message, project, capsys):
    """Was: accepted; the check could then never pass."""
    code, out, err = _cli([*command, "--tolerance", value], capsys)
    line = _one_line_refusal(code, out, err)
    assert f"--tolerance {value}: {message}" in line
    metric, number = value.split("=")
    config = _config(project, f"[tolerances.int8]\n{metric} = {number}\n")
    with pytest.raises(UsageError, match=message):  # the same rule, the same words, in the config file
        load_config(config)


@pytest.mark.parametrize("argv,message", [
    (["run", "--threads", "-3"], "--threads: must be >= 1, got -3"),
    (["run", "--samples", "0"], "--samples: must be >= 1, got 0"),
    (["check", "--reference", "x", "--onnx", "y", "--threads", "-3"], "--threads: must be >= 1, got -3"),
    (["check", "--reference", "x", "--onnx", "y", "--samples", "0"], "--samples: must be >= 1, got 0"),
    (["check", "--reference", "x", "--onnx", "y", "--batch-size", "0"], "--batch-size: must be >= 1, got 0"),
    (["check", "--reference", "x", "--onnx", "y", "--gen-samples", "0"], "--gen-samples: must be >= 1, got 0"),
    (["bench", "--threads", "-3"], "--threads: must be >= 1, got -3"),
    (["bench", "--rounds", "0"], "--rounds: must be >= 1, got 0"),
    (["bisect", "--models", "x", "--precisions", "int8", "--samples", "0"], "--samples: must be >= 1, got 0"),
    (["bisect", "--models", "x", "--precisions", "int8", "--top", "0"], "--top: must be >= 1, got 0"),
])
def test_every_subcommands_int_options_are_validated(argv, message, capsys):
    """``--threads -3`` and friends: refused by the option table's minimum, as the config's [run]."""
    assert message in _one_line_refusal(*_cli(argv, capsys))


@pytest.mark.parametrize("value", ["p50=nan", "p50=-5%", "p50=inf"])
def test_baseline_threshold_that_would_switch_the_gate_off_is_refused(value):
    """Found while checking every CLI value: ``--baseline-threshold p50=nan`` silently disabled the perf gate."""
    from harness.gate.compare import parse_threshold

    with pytest.raises(UsageError, match="an effect threshold must be a finite fraction >= 0"):
        parse_threshold(value)


def test_run_threads_and_config_threads_share_the_option_tables_rule(project):
    with pytest.raises(UsageError, match=r"run\.threads: must be >= 1, got -3"):
        load_config(_config(project, "[run]\nthreads = -3\n"))


# -- inputs: what reaches summary.md --------------------------------------------------------------------
def test_summary_makes_text_from_corpora_and_models_inert() -> None:
    """Was: raw HTML and control text from corpora embedded in summary.md."""
    from harness.report.summary import render_summary

    record = Record.from_dict({
        "id": "test_generation_parity[m`x-int8-ort_cpu]", "verdict": "fail", "suite": "generation",
        "reason": "text differs\n```\n<script>alert(1)</script>", "data": {"worst_pairs": [{
            "index": 0, "source": "<img src=x onerror=alert(1)> *bold* [a](javascript:x)", "reference": "ok",
            "pytorch": "a\x1b[31mred", "variant": "b|c", "edit_distance": 3, "norm_edit_distance": 0.5}]}})
    text = render_summary([record])
    assert "<img" not in text and "&lt;img src=x" in text
    fenced = text.split("````\n")[1]  # the reason, verbatim but inert: inside a fence it cannot close
    assert "<script>" in fenced and "<script>" not in text.replace(fenced, "")
    assert "\x1b" not in text and "\\*bold\\*" in text and "](javascript" not in text
    assert "``test_generation_parity[m`x-int8-ort_cpu]``" in text  # a backtick in an id cannot end its code span
    assert "````" in text  # the reason's fence is longer than the ``` inside it


def test_summary_keeps_comparisons_and_identifiers_readable() -> None:
    from harness.report.summary import md_cell

    assert md_cell("max_abs 0.5 <= 0.01 and cosine >= 0.99") == "max_abs 0.5 <= 0.01 and cosine >= 0.99"
    assert md_cell("a & b, <b>bold</b>") == "a & b, &lt;b>bold&lt;/b>"


def test_terminal_table_shows_control_characters_as_escapes() -> None:
    import io

    from rich.console import Console

    from harness.report.terminal import build_table

    record = Record.from_dict({"id": "t[m-fp32-ort_cpu]", "verdict": "fail", "reason": "decoded a\x1b[2Jb [bold]x"})
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(build_table([record]))
    shown = console.file.getvalue()
    assert "\x1b" not in shown and "\\x1b[2Jb" in shown and "[bold]x" in shown


# -- inputs: records -----------------------------------------------------------------------------------
@pytest.mark.parametrize("line,message", [
    ("[1, 2]", "a record is a JSON object, got list"),
    ("42", "a record is a JSON object, got int"),
    ('{"foo": 1}', "record has no 'id'"),
    ('{"schema": "other.app/1", "id": "a", "verdict": "pass"}', "not a harness record"),
    ('{"id": "a", "verdict": "pass", "metrics": {"x": "abc"}}', "metric 'x' is not a number"),
    ('{"id": "a", "verdict": "pass", "metrics": [1]}', "'metrics' must be an object"),
    ('{"id": "a", "verdict": "maybe"}', "unknown verdict"),
    ("{not json", "corrupt JSON"),
])
def test_report_refuses_lines_that_are_not_harness_records(tmp_path, capsys, line, message):
    """Was: non-record lines accepted (skipped or rendered)."""
    run = tmp_path / "run"
    run.mkdir()
    good = json.dumps({"schema": SCHEMA, "id": "t[a]", "verdict": "pass"})
    (run / "results.jsonl").write_text(good + "\n" + line + "\n")
    code, out, err = _cli(["report", str(run), "--csv", str(tmp_path / "r.csv")], capsys)
    refusal = _one_line_refusal(code, out, err)
    assert "results.jsonl:2: " in refusal and message in refusal
    assert not (tmp_path / "r.csv").exists()


def test_records_with_nonfinite_numbers_and_older_shapes_still_read(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    lines = [{"id": "t[a]", "verdict": "fail", "metrics": {"x": "NaN", "y": None, "z": 1, "flag": True}},
             {"schema": SCHEMA, "id": "t[b]", "verdict": "pass", "future_field": [1]}]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert _cli(["report", str(run), "--csv", str(tmp_path / "r.csv")], capsys)[0] == 0


# -- errors on stderr -----------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["report", "does-not-exist"], ["history", "list", "--history-db", "absent.sqlite"],
                                  ["run", "--precisions", "fp64"], ["check", "--onnx", "x"]])
def test_refusals_go_to_stderr_not_stdout(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, err = _cli(argv, capsys)
    _one_line_refusal(code, out, err)
    assert out == ""


# -- concurrency: one cache, many processes --------------------------------------------------------------
def _build_entry(root: str, counter: str) -> str:
    from harness.export.cache import ArtifactCache

    def build(tmp: Path) -> None:
        with open(counter, "a") as fh:
            fh.write("built\n")
        time.sleep(0.2)  # long enough for the others to arrive while the first one builds
        (tmp / "model.onnx").write_bytes(b"payload")

    return str(ArtifactCache(Path(root)).get_or_build("m", {"w": "abc"}, build).directory)


def test_concurrent_processes_on_one_cache_build_an_entry_once(tmp_path: Path) -> None:
    """Already handled well (see also test_plugin.py::test_xdist_produces_the_same_records_as_serial): kept so."""
    counter = tmp_path / "builds.txt"
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        dirs = pool.starmap(_build_entry, [(str(tmp_path / "cache"), str(counter))] * 3)
    assert len(set(dirs)) == 1
    assert counter.read_text().count("built") == 1
    assert (Path(dirs[0]) / "model.onnx").read_bytes() == b"payload"
