"""The declarative suite config: parsing, validation errors, precedence, and a suite run it drives."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from harness.core import UsageError
from harness.settings.config_file import find_config, load_config
from harness.settings.resolve import build_options
from harness.zoo import registered
from harness.zoo.base import materialize, resolve

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "harness.toml"


@pytest.fixture(autouse=True)
def _zoo_registry_never_changes():
    """A config's models and overrides live in its run's catalog: the zoo's module-level
    registry is the same object contents after every test as before it."""
    before = registered()
    yield
    assert registered() == before


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A team's repository: a model directory, a corpus, an exported artifact."""
    shutil.copytree(materialize(resolve("bert-tiny")), tmp_path / "models" / "ticket-classifier")
    (tmp_path / "data").mkdir()
    # 32 sentences: the documented example asks for samples = 32 (a larger request is a usage error)
    tickets = ["My invoice is wrong.", "The app crashes when I log in today."]
    tickets += [f"Ticket {i}: the printer on floor {i % 7} prints blank pages again." for i in range(30)]
    (tmp_path / "data" / "tickets.txt").write_text("\n".join(tickets) + "\n")
    (tmp_path / "exports").mkdir()
    (tmp_path / "exports" / "classifier.onnx").write_bytes(b"placeholder")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(root: Path, text: str, name: str = "harness.toml") -> Path:
    path = root / name
    path.write_text(text)
    return path


GOOD = """
[run]
models = ["ticket-classifier", "bert-tiny"]
precisions = ["fp32", "int8"]
providers = ["ort_cpu"]
samples = 16
batch_size = 4
threads = 1

[tolerances.int8]
cosine = 0.98

[budgets]
p50_ms = 50

[models.ticket-classifier]
path = "models/ticket-classifier"
corpus = "data/tickets.txt"
description = "support ticket router"
[models.ticket-classifier.tolerances.fp32]
norm_max_abs = 2e-4
[models.ticket-classifier.budgets]
p50_ms = 12.5
peak_rss_mb = 900
[models.ticket-classifier.artifacts]
fp32 = "exports/classifier.onnx"

[models.bert-tiny.tolerances.int8]
top1_agreement = 0.8
"""


def test_config_drives_options_and_registers_models(project):
    write(project, GOOD)
    options = build_options(rootdir=project)
    assert options.models == ["ticket-classifier", "bert-tiny"]
    assert [p.value for p in options.precisions] == ["fp32", "int8"]
    assert [p.short for p in options.providers] == ["ort_cpu"]
    assert (options.settings.samples, options.settings.batch_size, options.settings.threads) == (16, 4, 1)
    mine = options.catalog.resolve("ticket-classifier")
    assert mine.path == (project / "models" / "ticket-classifier").resolve() and mine.family == "encoder"
    assert mine.corpus == str((project / "data" / "tickets.txt").resolve())
    assert mine.tolerances == {"fp32": {"norm_max_abs": 2e-4}, "int8": {"cosine": 0.98}}
    assert mine.budgets == {"p50_ms": 12.5, "peak_rss_mb": 900}  # the model's own budget wins
    assert mine.extra["artifacts"] == {"fp32": str((project / "exports" / "classifier.onnx").resolve())}
    assert mine.extra["trust_remote_code"] is False and mine.extra["allow_pickle"] is False
    zoo = options.catalog.resolve("bert-tiny")
    assert zoo.tolerances == {"int8": {"cosine": 0.98, "top1_agreement": 0.8}} and zoo.budgets == {"p50_ms": 50}


def test_explicit_arguments_win_and_config_is_forgotten_after(project):
    write(project, GOOD)
    options = build_options(models=["bert-tiny"], precisions=["fp16"], samples=4, rootdir=project)
    assert options.models == ["bert-tiny"] and [p.value for p in options.precisions] == ["fp16"]
    assert options.settings.samples == 4 and options.settings.batch_size == 4  # unset arguments still come from the file
    assert "ticket-classifier" in options.catalog.registered() and "ticket-classifier" not in registered()
    (project / "harness.toml").unlink()
    later = build_options(models=["bert-tiny"], rootdir=project)
    assert "ticket-classifier" not in later.catalog.registered()
    assert later.catalog.resolve("bert-tiny").tolerances == {} and resolve("bert-tiny").tolerances == {}


def test_pyproject_tool_harness_is_found(project):
    write(project, '[project]\nname = "x"\n\n[tool.harness.run]\nmodels = ["bert-tiny"]\nsamples = 3\n',
          "pyproject.toml")
    assert find_config(None, project) == project / "pyproject.toml"
    assert build_options(rootdir=project).settings.samples == 3
    write(project, "[run]\nsamples = 5\n")  # harness.toml takes precedence over pyproject
    assert build_options(rootdir=project).settings.samples == 5


def test_config_models_without_run_list_are_what_runs(project):
    write(project, '[models.mine]\npath = "models/ticket-classifier"\n')
    assert build_options(rootdir=project).models == ["mine"]
    write(project, '[run]\nmodels = ["./models/ticket-classifier"]\n')
    options = build_options(rootdir=project)
    assert options.models == ["ticket-classifier"] and options.catalog.resolve("ticket-classifier").path is not None


@pytest.mark.parametrize("text, message", [
    ("[run]\nprecision = ['fp32']\n", "run.precision: unknown key (did you mean 'precisions'?)"),
    ("[tolerance.fp32]\ncosine = 0.9\n", "tolerance: unknown key (did you mean 'tolerances'?)"),
    ("[run]\nprecisions = ['fp17']\n", "run.precisions[0]: unknown value 'fp17' (did you mean 'fp16'?)"),
    ("[run]\nproviders = 'ort_cpi'\n", "did you mean 'ort_cpu'?"),
    ("[run]\nsamples = 0\n", "run.samples: must be >= 1, got 0"),
    ("[run]\nsamples = '8'\n", "run.samples: expected an integer, got str '8'"),
    ("[tolerances.fp32]\ncosin = 0.9\n", "tolerances.fp32.cosin: unknown metric (did you mean 'cosine'?)"),
    ("[tolerances.fp32]\nmax_abs = -1\n", "an error bound must be >= 0"),
    ("[tolerances.int8]\ngen_bleu_vs_trch = 3\n", "did you mean 'gen_bleu_vs_torch'?"),
    ("[budgets]\np50 = 3\n", "budgets.p50: unknown budget (did you mean 'p50_ms'?)"),
    ("[budgets]\np50_ms = 0\n", "budgets.p50_ms: must be > 0"),
    ("[models.m]\npath = 'models/nope'\n", "models.m.path: 'models/nope' is not a directory"),
    ("[models.m]\npath = '../outside'\n", "models.m.path: '../outside' escapes the config's directory"),
    ("[models.m]\npath = '/etc'\n", "models.m.path: '/etc' is absolute"),
    ("[models.m]\npath = 'models/ticket-classifier'\nfamily = 'encodr'\n", "did you mean 'encoder'?"),
    ("[models.m]\npath = 'models/ticket-classifier'\nartifacts = { fp32 = 'exports/missing.onnx' }\n",
     "models.m.artifacts.fp32: 'exports/missing.onnx' not found"),
    ("[models.m]\npath = 'models/ticket-classifier'\ncorpus = 'data/none.txt'\n", "models.m.corpus: 'data/none.txt'"),
    ("[models.m]\npath = 'models/ticket-classifier'\ncorpus = 'sentence_en'\n", "did you mean 'sentences_en'?"),
    ("[models.m]\npath = 'models/ticket-classifier'\ntrust_remote_code = 'yes'\n", "expected true or false"),
    ("[models.bert-tiny]\nfamily = 'encoder'\n", "models.bert-tiny.family: only a model with 'path'"),
    ("[models.bert-tiny]\npath = 'models/ticket-classifier'\n", "name is taken by a built-in zoo model"),
    ("[models.bert-tiyn.tolerances.fp32]\ncosine = 0.9\n", "no zoo model of that name (did you mean 'bert-tiny'?)"),
    ("[run]\nmodels = ['nope']\n", "unknown model 'nope'"),
    ("[run\nmodels = 1\n", "invalid TOML"),
    ("[models.bert-tiny]\nint8_per_channel = 'yes'\n", "models.bert-tiny.int8_per_channel: expected true or false"),
    ("[models.bert-tiny]\nint8_per_chanel = true\n", "did you mean 'int8_per_channel'?"),
])
def test_validation_errors_name_file_and_key(project, text, message):
    path = write(project, text)
    with pytest.raises(UsageError) as info:
        build_options(rootdir=project)
    assert message in str(info.value) and str(path) in str(info.value)


def test_symlink_out_of_the_root_is_refused(project, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    os.symlink(outside, project / "models" / "linked")
    write(project, "[models.m]\npath = 'models/linked'\n")
    with pytest.raises(UsageError, match="escapes the config's directory"):
        build_options(rootdir=project)


def test_explicit_config_path_must_exist_and_pyproject_needs_the_table(project):
    with pytest.raises(UsageError, match="--config: .*missing.toml not found"):
        build_options(config=project / "missing.toml")
    write(project, "[project]\nname = 'x'\n", "pyproject.toml")
    with pytest.raises(UsageError, match=r"no \[tool.harness\] table"):
        build_options(config=project / "pyproject.toml")


def test_the_documented_example_is_valid(project):
    """examples/harness.toml, dropped into a repository that has the files it names."""
    shutil.move(project / "models" / "ticket-classifier", project / "models" / "ticket-router")
    (project / "exports" / "ticket-router").mkdir()
    for name in ("model.onnx", "model_quantized.onnx"):
        (project / "exports" / "ticket-router" / name).write_bytes(b"x")
    write(project, EXAMPLE.read_text())
    options = build_options(rootdir=project)
    assert options.models == ["ticket-router", "minilm-l6", "marian-tiny"] and options.settings.threads == 2
    router = options.catalog.resolve("ticket-router")
    assert router.tolerances["int8"] == {"top1_agreement": 0.95, "cosine": 0.985}
    assert router.budgets == {"p50_ms": 12.5, "peak_rss_mb": 2048, "artifact_mb": 120}
    assert options.catalog.resolve("marian-tiny").tolerances["fp16"] == {"top1_agreement": 0.99}
    cfg = load_config(project / "harness.toml")
    assert set(cfg.entries["ticket-router"].artifacts) == {"fp32", "int8"}
    documented = EXAMPLE.read_text()
    for key in ("[run]", "[tolerances.", "[budgets]", "[models.", "artifacts", "trust_remote_code", "allow_pickle"):
        assert key in documented


SUITE = '''
def test_config_driven_suite(variant, harness):
    harness.numeric_parity().assert_ok()
'''


def test_config_drives_a_suite_end_to_end(pytester: pytest.Pytester, tmp_path):
    """A subprocess, as CI runs it: an in-process run would drop the torch/transformers
    modules it first imported, and their native parts cannot be imported twice."""
    shutil.copytree(materialize(resolve("bert-tiny")), pytester.path / "models" / "clf")
    (pytester.path / "data").mkdir()
    (pytester.path / "data" / "short.txt").write_text("one short line\nand a second, longer line of text here\n")
    pytester.makefile(".toml", harness="""
[run]
models = ["clf"]
precisions = ["fp32", "int8"]
providers = ["ort_cpu"]
samples = 2

[models.clf]
path = "models/clf"
corpus = "data/short.txt"
[models.clf.tolerances.int8]
cosine = 0.999999
""")
    pytester.makepyfile(test_config_driven_suite=SUITE)  # a unique name: suites/ may be imported in-process
    out = tmp_path / "run"
    result = pytester.runpytest_subprocess(f"--harness-out={out}", "-p", "no:cacheprovider")
    records = {json.loads(line)["id"]: json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()}
    ids = [f"test_config_driven_suite[clf-{p}-ort_cpu]" for p in ("fp32", "int8")]
    assert set(records) == set(ids)
    fp32, int8 = records[ids[0]], records[ids[1]]
    assert fp32["verdict"] == "pass" and fp32["settings"]["num_samples"] == 2
    # the config's (absurdly strict) INT8 cosine is the gate that failed
    assert int8["verdict"] == "fail" and int8["thresholds"]["model.logits.cosine"]["threshold"] == 0.999999
    assert "cosine" in int8["reason"]
    result.assert_outcomes(passed=1, failed=1)


def test_model_quantization_settings_reach_the_export_settings(project):
    from harness.judge.workspace import Workspace

    write(project, """
[run]
models = ["bert-tiny"]

[models.bert-tiny]
int8_per_channel = true
fp16_op_block_list = ["Softmax"]
""")
    options = build_options(rootdir=project)
    spec = options.catalog.resolve("bert-tiny")
    assert spec.int8_per_channel and spec.fp16_op_block_list == ("Softmax",)
    ws = Workspace(replace(options, settings=replace(options.settings, fp16_block_list=("Pow",))))
    settings = ws.runtimes.settings_for(ws.model("bert-tiny"))
    assert settings.int8_per_channel and settings.fp16_op_block_list == ("Pow", "Softmax")
