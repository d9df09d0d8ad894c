"""The harness in a team's own repository: `harness init`, CI semantics, honest inputs,
text metrics chosen from the data (issue 9). Cheap, in-process; the installed-wheel run from an
empty directory is tests/test_wheel_install.py."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
import yaml

import harness.judge.workspace  # noqa: F401  (see tests/test_plugin.py: import native stacks once)
from harness.cli import main
from harness.core import RunOptions, Settings, UsageError
from harness.core.rundirs import HISTORY_DB
from harness.settings.config_file import load_config
from harness.settings.resolve import build_options
from harness.zoo.base import materialize, resolve, spec_for_directory
from harness.zoo.loading import load_model


@pytest.fixture(scope="module")
def bert_dir() -> Path:
    return materialize(resolve("bert-tiny"))


@pytest.fixture
def repo(tmp_path, monkeypatch, bert_dir) -> Path:
    """A team's repository with its model in a directory whose name holds a space."""
    shutil.copytree(bert_dir, tmp_path / "models" / "intent model")
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --- harness init ---------------------------------------------------------------------------------
def test_init_writes_a_valid_commented_config_a_workflow_and_ignore_entries(repo, capsys):
    (repo / ".gitignore").write_text("__pycache__/\nreports/\n")
    assert main(["init", "models/intent model"]) == 0
    out = capsys.readouterr().out
    assert "family encoder" in out and "BertForSequenceClassification" in out
    text = (repo / "harness.toml").read_text()
    assert text.count("\n#") > 20  # commented: every section says what it is for
    cfg = load_config(repo / "harness.toml")  # harness run's own reader accepts it
    entry = cfg.entries["intent-model"]
    assert cfg.models == ["intent-model"] and entry.family == "encoder"
    assert entry.path == (repo / "models" / "intent model").resolve() and entry.corpus == "sentences_en"
    assert "# norm_max_abs = 0.15" in text  # the int8 default, from the metric registry

    workflow = yaml.safe_load((repo / ".github" / "workflows" / "model-harness.yml").read_text())
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert "pull_request" in triggers and triggers["schedule"][0]["cron"]
    steps = workflow["jobs"]["gate"]["steps"]
    cache = next(s for s in steps if s.get("uses", "").startswith("actions/cache"))
    assert cache["with"]["path"] == "${{ env.HARNESS_CACHE }}" and cache["with"]["key"] == "${{ steps.cache-key.outputs.key }}"
    key_step = next(s for s in steps if s.get("id") == "cache-key")
    assert "$(harness cache key)" in key_step["run"] and steps.index(key_step) < steps.index(cache)
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "reports/"
    assert any("harness run" in s.get("run", "") and s.get("if") == "github.event_name == 'schedule'" for s in steps)
    assert workflow["jobs"]["gate"]["env"]["HARNESS_CACHE"].endswith(".harness-cache")
    # the run history carried between jobs: restored before the gate, this job's run added and
    # saved after it, also when the gate failed (the next job's ETA reads it; the nightly plots it)
    named = {s["name"].split(" (")[0]: s for s in steps if "name" in s}
    restore, add = named["Restore the run history"], named["Add this run to the run history"]
    save, trends = named["Save the run history"], named["Trends of the nightly runs"]
    assert restore["uses"].startswith("actions/cache/restore") and save["uses"].startswith("actions/cache/save")
    assert restore["with"]["path"] == save["with"]["path"] == HISTORY_DB.as_posix() == "reports/history.sqlite"
    assert restore["with"]["restore-keys"] == "harness-history-" and "github.run_id" in save["with"]["key"]
    assert steps.index(restore) < steps.index(named["Gate"]) < steps.index(add) < steps.index(save)
    assert steps.index(named["Nightly gate with performance"]) < steps.index(add)
    assert add["if"] == "always()" and save["if"].startswith("always() && hashFiles(")
    assert "reports/gate" in add["run"] and "reports/nightly" in add["run"] and "harness history add" in add["run"]
    assert "schedule" in trends["if"] and "--html reports/nightly/trends.html" in trends["run"]
    prune = next(s for s in steps if s.get("run", "").startswith("harness cache prune"))
    assert prune["if"] == "always()" and steps.index(prune) > steps.index(cache)
    (repo / ".harness-cache").mkdir()  # the step's command is one the installed CLI accepts
    assert main([*prune["run"].split()[1:], "--cache", str(repo / ".harness-cache"), "--dry-run"]) == 0

    # ignore entries added once, existing lines kept
    entries = [line for line in (repo / ".gitignore").read_text().splitlines() if not line.startswith("#")]
    assert entries == ["__pycache__/", "reports/", ".harness-cache/", ".harness-baseline/", ".harness-blessed-env/",
                       ".benchmarks/"]


def test_init_shards_write_a_matrix_and_a_merge_job_that_gates(repo, capsys):
    assert main(["init", "models/intent model", "--shards", "3"]) == 0
    workflow = yaml.safe_load((repo / ".github" / "workflows" / "model-harness.yml").read_text())
    gate, merge = workflow["jobs"]["gate"], workflow["jobs"]["merge"]
    assert gate["strategy"]["matrix"]["shard"] == [1, 2, 3] and gate["strategy"]["fail-fast"] is False
    run = next(s["run"] for s in gate["steps"] if "--shard" in s.get("run", ""))
    assert 'shard="--shard ${{ matrix.shard }}/3 --out reports/shard-${{ matrix.shard }}"' in run
    assert "harness run $shard $durations || true" in run
    assert "harness run --perf $shard $durations || true" in run  # the nightly variant
    assert merge["needs"] == "gate" and merge["if"] == "always()"
    gate_step = next(s for s in merge["steps"] if "harness merge" in s.get("run", ""))
    assert "|| true" not in gate_step["run"]  # the merge is the verdict
    assert main(["init", "models/intent model", "--shards", "0", "--force"]) == 2
    assert "--shards: must be >= 1, got 0" in capsys.readouterr().err


def test_init_never_overwrites_without_force(repo, capsys):
    (repo / "harness.toml").write_text("# ours\n")
    assert main(["init", "models/intent model"]) == 2
    err = capsys.readouterr().err
    assert "harness.toml" in err and "already exists" in err and "--force" in err
    assert (repo / "harness.toml").read_text() == "# ours\n"
    assert not (repo / ".github").exists() and not (repo / ".gitignore").exists()  # all or nothing
    assert main(["init", "models/intent model", "--force"]) == 0
    assert "[models.intent-model]" in (repo / "harness.toml").read_text()
    assert main(["init", "models/intent model", "--force"]) == 0
    assert (repo / ".gitignore").read_text().count(".harness-cache/") == 1


def test_init_refuses_a_model_outside_the_repository_and_works_without_one(repo, tmp_path_factory, bert_dir, capsys):
    outside = tmp_path_factory.mktemp("elsewhere") / "m"
    shutil.copytree(bert_dir, outside)
    assert main(["init", str(outside)]) == 2
    assert "outside" in capsys.readouterr().err
    assert main(["init", "--ci", "none"]) == 0
    assert load_config(repo / "harness.toml").models is None  # the zoo's defaults
    assert not (repo / ".github").exists()


# --- CI semantics ---------------------------------------------------------------------------------
def test_a_run_that_judged_nothing_fails(tmp_path, capsys):
    """--allow-skip lets a requested-but-missing provider skip; when that leaves nothing judged
    at all the run still exits 1 (a green gate that checked nothing is the failure mode)."""
    out = tmp_path / "run"
    code = main(["run", "--models", "bert-tiny", "--precisions", "fp32", "--providers", "ort_cuda", "--allow-skip",
                 "-k", "logits", "--out", str(out)])
    assert code == 1
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert record["verdict"] == "skip"
    assert "nothing was judged" in (out / "summary.md").read_text()
    assert "nothing was judged" in capsys.readouterr().out


def test_allow_skip_from_the_config_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "harness.toml").write_text('[run]\nproviders = ["ort_cuda"]\nallow_skip = true\n')
    options = build_options(models=["bert-tiny"])
    assert options.settings.allow_skip and options.explicit_variants  # providers from the config are a request too


def test_default_matrix_is_not_an_explicit_request(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert not build_options(models=["bert-tiny"]).explicit_variants
    assert build_options(models=["bert-tiny"], providers=["ort_cpu"]).explicit_variants


def test_junit_xml_from_records_holds_every_verdict():
    from harness.report.junit import render_junit

    base = {"suite": "test_logits_parity", "duration_s": 0.5, "rerun": "harness run -k x"}
    records = [{**base, "id": f"test_logits_parity[m-fp32-{v}]", "verdict": v, "reason": f"why {v}\x1b[31m"}
               for v in ("pass", "fail", "error", "skip", "not-run")]
    root = ET.fromstring(render_junit(records))
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("5", "2", "1", "1")
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["test_logits_parity[m-fp32-not-run]"].find("failure").get("type") == "not-run"
    assert cases["test_logits_parity[m-fp32-error]"].find("error") is not None
    assert cases["test_logits_parity[m-fp32-skip]"].find("skipped") is not None
    assert "\x1b" not in render_junit(records)  # control characters escaped: XML 1.0 cannot hold them


# --- inputs ---------------------------------------------------------------------------------------
def test_samples_above_the_corpus_is_a_usage_error(capsys, tmp_path):
    assert main(["run", "--models", "bert-tiny", "--samples", "400", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--samples 400" in err and "has only 166 sentences" in err
    assert not (tmp_path / "r").exists()


def test_names_are_zoo_names_and_paths_are_paths(repo, capsys):
    (repo / "bert-tiny").mkdir()  # a local directory shadowing a zoo name
    options = build_options(models=["bert-tiny"])
    assert options.models == ["bert-tiny"] and options.catalog.resolve("bert-tiny").path is None  # the zoo model
    (note,) = options.notes
    assert "not the local directory" in note and "./bert-tiny" in note
    with pytest.raises(UsageError, match=r"not a directory"):
        build_options(models=["./no-such-dir"])
    (repo / "my-model").mkdir()
    with pytest.raises(UsageError, match=r"unknown model 'my-model'.*--models ./my-model"):
        build_options(models=["my-model"])
    spaced = build_options(models=["./models/intent model"])
    assert spaced.catalog.resolve("./models/intent model").path == (repo / "models" / "intent model").resolve()


def test_an_unloadable_user_directory_is_one_line_from_run_as_from_check(repo, capsys):
    model = repo / "models" / "intent model"
    (model / "model.safetensors").unlink()
    torch.save({"w": torch.zeros(2)}, model / "pytorch_model.bin")
    with pytest.raises(UsageError) as refused:  # what `harness check` reports (its loader)
        load_model(spec_for_directory(model))
    assert main(["run", "--models", "./models/intent model", "--out", str(repo / "r")]) == 2
    err = capsys.readouterr().err
    assert err == f"harness: error: {refused.value}\n"
    assert "pickle" in err and "Traceback" not in err


def test_truncation_respects_the_models_positions(repo, bert_dir):
    """A 64-position model: inputs are cut at 64 tokens (a fixed 128 crashed the embedding
    lookup with IndexError), parity runs, and the record says how many sentences were cut."""
    from transformers import BertConfig, BertForSequenceClassification

    from harness.case.collector import Case
    from harness.families.base import input_token_limit, tokenize, truncated_count
    from harness.judge.workspace import Workspace
    from tests.conftest import variant

    cfg = json.loads((bert_dir / "config.json").read_text())
    cfg["max_position_embeddings"] = 64
    torch.manual_seed(0)
    short = repo / "short-bert"
    BertForSequenceClassification(BertConfig(**{k: v for k, v in cfg.items() if k != "architectures"})) \
        .save_pretrained(short)
    for f in bert_dir.glob("*"):
        if f.name.startswith(("tokenizer", "special", "vocab")):
            shutil.copy(f, short / f.name)
    ws = Workspace(RunOptions(models=["./short-bert"], settings=Settings(samples=166, batch_size=64, threads=1)))
    model = ws.model("./short-bert")
    assert input_token_limit(model) == 64
    texts = ws.texts(model)
    assert tokenize(model, texts)["input_ids"].shape[1] == 64 and truncated_count(model, texts) > 0
    case = Case(ws, variant("./short-bert", "fp32", "torch_cpu"), repo / "run", "test_logits_parity[x]")
    case.numeric_parity().assert_ok()
    settings = case.payload()["settings"]
    assert settings["max_input_tokens"] == 64 and settings["truncated_sentences"] == truncated_count(model, texts)
    assert settings["num_samples"] == 166 and settings["corpus_size"] == 166


def test_recorded_sample_count_is_what_was_used(tmp_path):
    """A corpus shorter than the default request: the record says how many sentences ran."""
    from harness.case.collector import Case
    from harness.judge.workspace import Workspace
    from tests.conftest import variant

    corpus = tmp_path / "five.txt"
    corpus.write_text("".join(f"Sentence number {i} of five.\n" for i in range(5)))
    (tmp_path / "harness.toml").write_text(f'[models.five]\npath = "m"\ncorpus = "{corpus.name}"\n')
    shutil.copytree(materialize(resolve("bert-tiny")), tmp_path / "m")
    options = build_options(config=str(tmp_path / "harness.toml"))
    ws = Workspace(options)
    settings = Case(ws, variant("five", "fp32", "torch_cpu"), tmp_path / "run").payload()["settings"]
    assert (settings["num_samples"], settings["samples_requested"], settings["corpus_size"]) == (5, 32, 5)


# --- text metrics from the data -------------------------------------------------------------------
def test_a_chinese_model_judged_from_another_path_scores_bleu_in_chinese(tmp_path):
    """A copy of numbers-en-zh as a user directory: nothing in its name says Chinese, yet
    identical outputs score BLEU 100 with the zh tokenizer (the zoo name chose tok:13a: 0.0)."""
    from harness.judge.generation import GenerationRequest, generation_parity
    from harness.judge.workspace import Workspace
    from tests.conftest import variant

    src = Path(__file__).resolve().parents[1] / "harness" / "zoo" / "models" / "numbers-en-zh"
    shutil.copytree(src, tmp_path / "zh model")
    path = str(tmp_path / "zh model")
    ws = Workspace(RunOptions(models=[path], settings=Settings(threads=1)))
    result = generation_parity(ws, variant(path, "fp32", "torch_cpu"), GenerationRequest(samples=6))
    assert result.metrics["gen_bleu_vs_torch"] == pytest.approx(100.0)
    assert "tok:zh" in result.signatures["bleu_vs_torch"]
    assert result.settings["target_lang"] == "zh"
    assert result.settings["target_lang_from"] == "detected from the PyTorch outputs"


def test_builtin_suites_from_the_config_join_a_foreign_repository(pytester: pytest.Pytester):
    """`builtin_suites = true` under [run]: plain pytest in a team's repository collects the
    installed suites beside the team's own tests (which use the public fixtures)."""
    pytester.makefile(".toml", harness='[run]\nmodels = ["bert-tiny"]\nprecisions = ["fp32"]\n'
                                       'providers = ["ort_cpu"]\nbuiltin_suites = true\n')
    pytester.makepyfile(test_team_own="from harness.testing import Case, Variant\n\n\n"
                                      "def test_team_rule(variant: Variant, harness: Case) -> None:\n"
                                      "    harness.metrics['answer'] = 42.0\n")
    result = pytester.runpytest_inprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*test_team_own.py::test_team_rule[[]bert-tiny-fp32-ort_cpu[]]",
                                 "*test_logits_parity.py::test_logits_parity[[]bert-tiny-fp32-ort_cpu[]]"])
