"""The option table is the only declaration: every front end offers exactly its options, and
a record's rerun command parses back into the settings that produced the record."""

from __future__ import annotations

import argparse
import functools
import shlex
from pathlib import Path

import pytest

from harness.cli import build_parser
from harness.core import UsageError
from harness.settings.config_file import RUN_KEYS, SuiteConfig, load_config
from harness.settings.options import (
    OPTIONS,
    Group,
    Kind,
    Rerun,
    cli_values,
    option,
    pytest_argv,
    recordable,
    rerun_command,
)

#: a value for every option, as a user would type it
SAMPLE = {
    "models": ["bert-tiny", "/models/my model"], "precisions": ["int8"], "providers": ["ort_cpu"], "config": Path("/tmp/h.toml"),
    "samples": 7, "batch_size": 3, "opset": 18, "exporter": "dynamo", "threads": 2, "corpus": "sentences_en",
    "fp16_block_list": ["Softmax", "Pow"], "int8_per_channel": True, "int8_reduce_range": "off",
    "trt_max_batch": 4, "trt_max_seq": 64,
    "out": Path("/tmp/out"), "cache": Path("/tmp/cache"), "perf": True, "perf_samples": 50, "perf_warmup": 3,
    "perf_batch_sizes": [1, 8], "perf_seq_lens": [16, 64], "perf_repeats": 2, "perf_new_tokens": 4, "perf_tail_seconds": 3,
    "perf_time_budget": 12,
    "baseline_save": "nightly", "baseline_compare": "main", "baseline_store": Path("/tmp/b"),
    "baseline_force": True, "baseline_force_env": True, "allow_missing": True, "baseline_threshold": ["p50=8%"],
    "shard": "2/3", "shard_durations": "/tmp/durations",  # issue 12
    "accuracy_margin": ["int8:cosine=10%"],
    # issue 9
    "target_lang": "zh", "allow_skip": True, "builtin_suites": True, "junit_xml": Path("/tmp/j.xml"),
    "graph_optimization": ["disabled", "all"], "inter_threads": 2, "execution_mode": "parallel", "mem_pattern": "off",
    "cpu_arena": "off", "session_config": ["session.intra_op.allow_spinning=0"],
    "max_memory": "16G", "max_nodes": 1000, "custom_op_library": Path("/tmp/libvendor_ops.so"),
    "provider_options": ["ort_cuda:device_id=0"], "trt_profile": ["input_ids:1x16,8x64,16x256"],
    "trt_engine_cache": Path("/tmp/engines"), "trt_timing_cache": Path("/tmp/timing"), "profile": True,
    "int8_calibration": "entropy", "int8_calibration_samples": 16,
    # issue 13
    "fresh_references": True, "durations": 5, "progress": "lines",
    # issue 14
    "repro_bundles": "bytes",
    "fp16_node_block_list": ["/model/bert/encoder/layer.0/output/dense/MatMul", "node_add_1"],
    "int8_nodes_to_exclude": ["/model/model/layers.0/mlp/down_proj/MatMul"],
    # issue 16
    "external_data": "always", "release_models": "always",
    # generation parity (were pytest-only options outside the table)
    "gen_samples": 6, "gen_max_new_tokens": 9, "gen_beams": 2, "gen_cache": "off", "gen_repetition_penalty": 1.2,
    "gen_batch_size": 3, "gen_worst": 4,
}


@functools.cache
def _run_parser() -> argparse.ArgumentParser:
    """``harness run``'s parser, built once (a parser holds no state between parses)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def test_the_sample_covers_the_table():
    assert set(SAMPLE) == {o.name for o in OPTIONS}


def test_harness_run_offers_every_cli_option_and_forwards_it_to_pytest(pytestconfig):
    parser = _run_parser()
    argv = [part for o in OPTIONS if o.on_cli for part in o.argv(SAMPLE[o.name], pytest_form=False)]
    values = cli_values(parser.parse_args(argv))
    assert values == {o.name: SAMPLE[o.name] for o in OPTIONS if o.on_cli}
    # what harness run hands to pytest parses, with the plugin's own options, into the same values
    namespace = pytestconfig._parser.parse_known_args(pytest_argv(values))
    assert {o.name: o.parse(getattr(namespace, o.pytest_dest)) for o in OPTIONS if o.name in values} == values


def test_pytest_knows_every_command_line_option_and_no_config_only_one(pytestconfig):
    for o in OPTIONS:
        if o.on_cli:
            pytestconfig.getoption(o.pytest_dest)  # raises ValueError for an unknown option
        else:
            with pytest.raises(ValueError):
                pytestconfig.getoption(o.pytest_dest)


def test_generated_docs_list_every_option():
    from harness.settings.doc_tables import stale

    root = Path(__file__).resolve().parents[1]
    options_doc = (root / "docs" / "options.md").read_text()
    config_doc = (root / "docs" / "config.md").read_text()
    for o in OPTIONS:
        assert f"`{o.pytest_flag}`" in options_doc or not o.on_cli, o.name
        assert f"| `{o.name}` |" in config_doc or not o.in_config, o.name
    assert not stale(root)


def test_config_run_keys_are_the_config_options_and_validate_by_type(tmp_path):
    assert set(RUN_KEYS) == {o.name for o in OPTIONS if o.in_config}
    # the config holds the [run] table by option name: no per-option field to keep in step
    assert not set(RUN_KEYS) & (set(SuiteConfig.__dataclass_fields__) - {"run"})
    (tmp_path / "harness.toml").write_text('[run]\nsamples = 3\nexporter = "dynamo"\nthreads = 2\n'
                                           'precisions = ["fp16"]\n')
    cfg = load_config(tmp_path / "harness.toml")
    assert [cfg.value(n) for n in ("samples", "exporter", "threads", "precisions")] == [3, "dynamo", 2, ["fp16"]]
    (tmp_path / "harness.toml").write_text("[run]\nopset = 9\n")
    with pytest.raises(UsageError, match=r"run\.opset: must be >= 11, got 9"):
        load_config(tmp_path / "harness.toml")


@pytest.mark.parametrize("o", [o for o in OPTIONS if o.kind in (Kind.INT, Kind.INT_LIST) and o.minimum is not None],
                         ids=lambda o: o.name)
def test_limits_are_enforced_from_the_table(o):
    with pytest.raises(UsageError, match=f"{o.flag}: must be >= {o.minimum}"):
        o.parse(o.minimum - 1 if o.kind is Kind.INT else [str(o.minimum - 1)])


def test_an_exclusive_limit_is_enforced_from_the_table():
    with pytest.raises(UsageError, match="--gen-repetition-penalty: must be > 0, got 0"):
        option("gen_repetition_penalty").parse("0")


def test_rerun_command_reproduces_every_setting_that_changes_results():
    """The rerun command, parsed by ``harness run``'s own parser, gives back the case's model,
    precision, provider and every results-changing option that was set (before the table it
    dropped --config and --threads)."""
    given = {o.name: SAMPLE[o.name] for o in OPTIONS}
    settings = {"num_samples": 7, "batch_size": 3, "opset": 18, "options": recordable(given)}
    case = {"model": "bert-tiny", "precision": "int8", "provider": "ort_cpu", "variant": "bert-tiny-int8-ort_cpu"}
    command = rerun_command("suites/test_logits_parity.py::test_logits_parity[bert-tiny-int8-ort_cpu]", case,
                            settings)
    words = shlex.split(command)
    assert words[:2] == ["harness", "run"]
    args = _run_parser().parse_args(words[2:])
    back = cli_values(args)
    changing = {o.name for o in OPTIONS if o.rerun in (Rerun.GIVEN, Rerun.ALWAYS) and o.on_cli}
    expected = {name: SAMPLE[name] for name in changing}
    expected["config"] = Path("/tmp/h.toml").resolve()
    assert {k: back[k] for k in changing} == expected
    assert (back["models"], back["precisions"], back["providers"]) == (["bert-tiny"], ["int8"], ["ort_cpu"])
    assert args.keyword == "test_logits_parity and bert-tiny-int8-ort_cpu"
    assert [str(s) for s in args.suites] == ["suites/test_logits_parity.py"]
    # a built-in suite is found by `harness run` wherever the harness is installed: not repeated
    builtin = rerun_command("harness/suites/test_logits_parity.py::test_logits_parity[bert-tiny-int8-ort_cpu]",
                            case, settings)
    assert "--suites" not in builtin and _run_parser().parse_args(shlex.split(builtin)[2:]).suites is None
    # collected from another repository's rootdir the node id is just the file name: the module tells
    foreign = rerun_command("test_logits_parity.py::test_logits_parity[x]",
                            {**case, "suite_module": "harness.suites.test_logits_parity"}, settings)
    assert "--suites" not in foreign
    # where output goes does not change results: not repeated
    assert not {o.name for o in OPTIONS if o.rerun is Rerun.NEVER} & set(back)


def test_rerun_of_a_record_written_before_the_table_still_works():
    settings = {"num_samples": 16, "batch_size": 8, "opset": 17, "exporter": "dynamo", "exporter_explicit": True,
                "int8_per_channel_forced": True, "fp16_op_block_list": ["Pow"]}
    case = {"model": "m", "precision": "fp16", "provider": "ort_cpu", "variant": "m-fp16-ort_cpu"}
    command = rerun_command("suites/x.py::test_y[m-fp16-ort_cpu]", case, settings)
    assert command == ("harness run --suites suites/x.py --models m --precisions fp16 --providers ort_cpu "
                       "--samples 16 --batch-size 8 --opset 17 --exporter dynamo --fp16-block-list Pow "
                       "--int8-per-channel -k 'test_y and m-fp16-ort_cpu'")


def test_a_model_path_with_spaces_stays_one_model():
    """``--models "/models/my model"`` is one directory on the CLI, through the pytest forwarding
    and in the rerun command (it was split into two names)."""
    args = _run_parser().parse_args(["--models", "/models/my model", "bert-tiny"])
    values = cli_values(args)
    assert values["models"] == ["/models/my model", "bert-tiny"]
    assert option("models").parse(pytest_argv(values)[0].split("=", 1)[1]) == values["models"]
    case = {"model": "/models/my model", "precision": "fp32", "provider": "ort_cpu", "variant": "my_model-fp32-ort_cpu"}
    words = shlex.split(rerun_command("harness/suites/test_logits_parity.py::test_logits_parity[x]", case, {}))
    assert cli_values(_run_parser().parse_args(words[2:]))["models"] == ["/models/my model"]


def test_groups_partition_the_table():
    assert {o.group for o in OPTIONS} == set(Group)
    assert option("perf").group is Group.PERF and option("samples").group is Group.RUN


# -- options once, typed: the resolved settings are the table -----------------------------------------
def test_the_typed_settings_are_the_table():
    """``RunOptions.settings`` has one field per option, named as the option, defaulting to the
    table's default (harness/core/values.py is generated from the table and held to it here and by
    ``render_metric_docs.py --check``)."""
    from dataclasses import fields

    from harness.core import Settings
    from harness.settings.options import typed_default

    assert [f.name for f in fields(Settings)] == [o.name for o in OPTIONS]
    defaults = Settings()
    assert {o.name: getattr(defaults, o.name) for o in OPTIONS} == {o.name: typed_default(o) for o in OPTIONS}


def _toml(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


#: values build_options can resolve on this machine (the models and corpus exist, paths are the test's)
def _buildable(tmp_path):
    library = tmp_path / "libvendor_ops.so"  # named, so it must exist (never loaded here)
    library.write_bytes(b"")
    return {**SAMPLE, "models": ["bert-tiny"], "precisions": ["int8"], "providers": ["ort_cpu"],
            "config": None, "trt_engine_cache": tmp_path / "engines", "trt_timing_cache": tmp_path / "timing",
            "provider_options": [], "graph_optimization": ["disabled"], "custom_op_library": library}


@pytest.mark.parametrize("o", [o for o in OPTIONS if o.name not in ("config",)], ids=lambda o: o.name)
def test_every_option_round_trips_cli_config_record_rerun(o, tmp_path, monkeypatch):
    """One option at a time, from each source it has: the CLI (``harness run`` flag) and, when it
    is a ``[run]`` key, the config file. The resolved settings hold the value under the option's
    own name; a record's rerun command (for options that change results) gives it back through
    ``harness run``'s parser -- for a config value, through the ``--config`` it repeats."""
    from harness.settings.options import typed
    from harness.settings.resolve import build_options

    monkeypatch.chdir(tmp_path)
    value = _buildable(tmp_path)[o.name]
    if value in ([], None):
        pytest.skip(f"{o.name}: no value that resolves without a GPU provider (validated by the backend)")
    sources = ["cli"] + (["config"] if o.in_config else [])
    for source in sources:
        (tmp_path / "harness.toml").write_text(f"[run]\n{o.name} = {_toml(value)}\n" if source == "config" else "")
        if source == "cli":
            argv = o.argv(value, pytest_form=False) if o.on_cli else []
            if not o.on_cli:
                continue
            given = cli_values(_run_parser().parse_args(argv))
            assert given == {o.name: value}
        else:
            given = {}
        options = build_options(given, rootdir=tmp_path)
        assert getattr(options.settings, o.name) == typed(o, value), (o.name, source)
        # record -> rerun
        record_settings = {"num_samples": options.settings.samples, "batch_size": options.settings.batch_size,
                           "opset": options.settings.opset, "options": recordable(options.given)}
        case = {"model": "bert-tiny", "precision": "int8", "provider": "ort_cpu", "variant": "bert-tiny-int8-ort_cpu"}
        command = rerun_command("harness/suites/test_logits_parity.py::test_logits_parity[x]", case, record_settings)
        back = cli_values(_run_parser().parse_args(shlex.split(command)[2:]))
        if o.rerun is Rerun.CASE:
            assert back[o.name] == [case[o.name.rstrip("s")]] if o.name in case or o.name.rstrip("s") in case else True
            continue
        if o.rerun is Rerun.NEVER:
            assert o.name not in back
            continue
        if source == "cli":
            assert back[o.name] == value, command
        else:  # the config file is named by the rerun and holds the value
            assert Path(back["config"]) == (tmp_path / "harness.toml").resolve(), command
            rebuilt = build_options({"config": back["config"]}, rootdir=tmp_path)
            assert getattr(rebuilt.settings, o.name) == typed(o, value)


def test_generation_options_are_run_flags_config_keys_and_in_the_rerun():
    """The seven ``--harness-gen-*`` options were pytest-only: no ``harness run`` flag, no config key,
    dropped from the rerun command."""
    names = [o.name for o in OPTIONS if o.group is Group.GEN]
    assert len(names) == 7 and all(option(n).pytest_flag == "--harness-" + n.replace("_", "-") for n in names)
    assert all(option(n).in_config for n in names)
    help_text = _run_parser().format_help()
    assert all(option(n).flag in help_text for n in names)
