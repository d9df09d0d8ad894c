"""Judging a generative model served behind an OpenAI-compatible API against PyTorch: a real
LitServe process (its own venv, tests/serving/openai_server.py) serving llama-tiny greedily on
CPU through ``/v1/completions`` and ``/v1/chat/completions`` (streamed).

Negative control: the same server also serves a model whose MLP weights are perturbed (another
model under the same tokenizer): its text leaves PyTorch's and ``check_generation`` fails by
name. With ``--perf`` each concurrency level records TTFT, TPOT and tokens per second.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator

import pytest

from tests.serving import openai_server as oa
from tests.serving.mlserver import Server
from tests.serving.venv_server import Relaunching, check, required

GEN = ["--reference", "llama-tiny", "--gen-samples", "6"]


def _reference_dir() -> Path:
    from harness.zoo import registered
    from harness.zoo.loading import load_model

    return Path(load_model(registered()["llama-tiny"]).path)


def _other_model(src: Path, dst: Path) -> Path:
    """llama-tiny with every MLP down-projection scaled by 3: the same tokenizer, other text."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(src)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.mlp.down_proj.weight.mul_(3.0)
    model.save_pretrained(dst)
    for item in src.iterdir():
        if "token" in item.name or item.name == "special_tokens_map.json":
            shutil.copy(item, dst / item.name)
    return dst


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[Relaunching]:
    root = tmp_path_factory.mktemp("openai")
    reference = _reference_dir()
    models = {"llama": reference, "llama-other": _other_model(reference, root / "other")}
    running = Relaunching(lambda: required(lambda: oa.start(root / "server", models), oa.REQUIRE_ENV, "LitServe"),
                          "LitServe")
    yield running
    running.stop()


@pytest.fixture
def server(live: Relaunching) -> Server:
    """The module's server, started again first if it died during an earlier test."""
    return live.serving()


def _url(server: Server) -> str:
    return f"openai://127.0.0.1:{server.http_port}"


def test_completions_of_the_faithful_model_match_pytorch_token_for_token(server, tmp_path, capsys):
    code, text, suites = check([*GEN, "--endpoint", _url(server), "--served-model", "llama", "--no-stream"],
                                tmp_path / "run", capsys)
    assert code == 0, text
    gen = suites["check_generation"]
    assert gen["verdict"] == "pass" and gen["metrics"]["gen_token_exact_match"] == 1.0
    assert gen["data"]["served"]["model"]["api"] == "completions"
    assert gen["settings"]["endpoint"]["route"] == "completions"


def test_streamed_chat_is_judged_and_timed_per_concurrency_level(server, tmp_path, capsys):
    code, text, suites = check([*GEN, "--endpoint", _url(server), "--served-model", "llama", "--openai-route", "chat",
                                 "--perf", "--concurrency", "1", "2"], tmp_path / "run", capsys)
    assert code == 0, text
    assert suites["check_generation"]["metrics"]["gen_token_exact_match"] == 1.0
    perf = suites["check_perf"]["perf"]
    levels = perf["generation_serving"]["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 2] and all(lv["errors"] == 0 for lv in levels)
    assert all(lv["ttft_ms_p50"] > 0 and lv["tokens_per_s"] > 0 for lv in levels)
    assert perf["latency_ms[gen=ttft,concurrency=2]"]["samples"] and "latency_ms[gen=tpot,concurrency=1]" in perf
    assert "TTFT p50" in text


def test_a_server_decoding_another_model_fails_generation_parity(server, tmp_path, capsys):
    code, text, suites = check([*GEN, "--endpoint", _url(server), "--served-model", "llama-other", "--no-stream"],
                                tmp_path / "run", capsys)
    assert code == 1, text
    gen = suites["check_generation"]
    assert gen["verdict"] == "fail" and "gen_token_exact_match" in gen["reason"] and gen["metrics"]["gen_token_exact_match"] < 1.0
    assert "first divergence" in gen["reason"]


def test_an_unknown_model_is_refused_in_one_line_with_the_servers_message(server, tmp_path, capsys):
    code, text, suites = check([*GEN, "--endpoint", _url(server), "--served-model", "nope"], tmp_path / "run", capsys)
    assert code == 2 and not suites, text
    assert "Traceback" not in text and "request failed [" in text.strip().splitlines()[-1]
