"""An artifact's I/O protocol: exports in the layouts teams ship, judged by ``harness check``.

Each fixture is built here, in-process, from the zoo's tiny Llama with torch.onnx.export, in a
layout practitioners use: seed article 002's export_llama_to_onnx layout (4-D additive float
mask, last-token logits, ``past_key_in{i}`` -> ``past_key{i}``), seed 003's wrapper with a
pre-expanded ``[B, T, T]`` mask, an optimum-like with-past file whose presents hold zeros at
left-pad positions (another transformers version's behaviour), and a cacheless decoder whose
ids and mask share one ``seq_len`` axis. Faithful files pass; planted faults (a weight x1.05,
key and value swapped, the mask ignored, positions not offset) fail naming the check.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.cli import main
from harness.zoo.base import materialize, resolve

LLAMA = "llama-tiny"


def _dir(name: str) -> Path:
    return materialize(resolve(name))


def _check(argv: list[str], out: Path, capsys) -> tuple[int, dict[str, dict], str]:
    code = main(["check", "--reference", str(_dir(LLAMA)), *argv, "--out", str(out)])
    captured = capsys.readouterr()
    path = out / "results.jsonl"
    records = {} if not path.exists() else {
        r["suite"]: r for r in (json.loads(line) for line in path.read_text().splitlines() if line.strip())}
    return code, records, captured.out + captured.err


def _llama(scale: float = 1.0):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(_dir(LLAMA)), attn_implementation="eager").eval()
    if scale != 1.0:  # a bad weight conversion: one layer's value projection 5 % off
        with torch.no_grad():
            model.model.layers[0].self_attn.v_proj.weight.mul_(scale)
    return model


class _Decoder(torch.nn.Module):
    """One decoder step in a foreign layout. ``mask``: how the graph takes the mask (``keep``
    2-D, ``additive`` 4-D float, ``expanded`` 3-D bool); faults: ``swap`` returns value as key,
    ``ignore_mask`` attends to pads, ``restart_positions`` forgets the past length;
    ``zero_pads`` writes 0 into the presents at left-pad positions (what another exporter
    version does: no query reads them)."""

    def __init__(self, model, mask: str, last_only: bool = False, cache: bool = True, swap: bool = False,
                 ignore_mask: bool = False, restart_positions: bool = False, zero_pads: bool = False) -> None:
        super().__init__()
        self.model, self.layers, self.mask = model, model.config.num_hidden_layers, mask
        self.last_only, self.cache, self.swap = last_only, cache, swap
        self.ignore_mask, self.restart_positions, self.zero_pads = ignore_mask, restart_positions, zero_pads

    def forward(self, input_ids, attention_mask, position_ids, *past):
        from transformers.cache_utils import DynamicCache

        if self.mask == "additive":  # the last query row of [B, 1, N, past + N] sees every real position
            keep = (attention_mask[:, 0, -1, :] == 0).long()
        elif self.mask == "expanded":
            keep = attention_mask[:, -1, :].long()
        else:
            keep = attention_mask
        if self.ignore_mask:
            keep = torch.ones_like(keep)
        if self.restart_positions:
            position_ids = position_ids - position_ids[:, :1]
        kwargs = {}
        if self.cache:
            kwargs["cache"] = DynamicCache([(past[2 * i], past[2 * i + 1]) for i in range(self.layers)])
        out = self.model(input_ids=input_ids, attention_mask=keep, position_ids=position_ids, use_cache=self.cache,
                         **kwargs)
        logits = out.logits[:, -1] if self.last_only else out.logits
        if not self.cache:
            return logits
        presents = []
        for layer in kwargs["cache"].layers:
            k, v = (layer.values, layer.keys) if self.swap else (layer.keys, layer.values)
            if self.zero_pads:
                kept = keep[:, None, :, None].to(k.dtype)
                k, v = k * kept, v * kept
            presents += [k, v]
        return (logits, *presents)


def _export(module: torch.nn.Module, path: Path, *, mask: str, past_in: str, present: str, logits: str,
            cache: bool = True, tied: bool = False, mask_name: str = "attention_mask", width: int = 2) -> Path:
    """``past_in``/``present``: name templates with ``{i}`` and ``{kv}`` (key/value); ``width``
    1 bakes one token per call (the sequence axis is left static)."""
    cfg = module.model.config
    kv, hd, layers = cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads, cfg.num_hidden_layers
    ids = torch.tensor([[5, 6], [7, 8]])[:, :width]
    past_len = 3 if cache else 0
    keep = torch.ones(2, past_len + width, dtype=torch.long)
    if mask == "additive":
        m = torch.zeros(2, 1, width, past_len + width)
    elif mask == "expanded":
        m = torch.ones(2, width, past_len + width, dtype=torch.bool)
    else:
        m = keep
    pos = torch.tensor([[past_len, past_len + 1][:width]] * 2)
    past = [torch.randn(2, kv, past_len, hd) for _ in range(2 * layers)] if cache else []
    past_names = [past_in.format(i=i, kv=k) for i in range(layers) for k in ("key", "value")] if cache else []
    present_names = [present.format(i=i, kv=k) for i in range(layers) for k in ("key", "value")] if cache else []
    seq = "seq_len" if tied else "sequence"
    total = "seq_len" if tied else "total"
    axes_of_seq = {1: seq} if width > 1 else {}
    mask_axes = {0: "batch", 1: total} if mask == "keep" else {0: "batch", 1 if mask == "expanded" else 2: seq,
                                                                 2 if mask == "expanded" else 3: total}
    axes = {"input_ids": {0: "batch", **axes_of_seq}, mask_name: mask_axes, "position_ids": {0: "batch", **axes_of_seq},
            logits: {0: "batch"} if module.last_only else {0: "batch", **axes_of_seq},
            **{n: {0: "batch", 2: "past"} for n in past_names}, **{n: {0: "batch", 2: "total"} for n in present_names}}
    with torch.no_grad():
        torch.onnx.export(module.eval(), (ids, m, pos, *past), str(path), dynamo=False, opset_version=17,
                          input_names=["input_ids", mask_name, "position_ids", *past_names],
                          output_names=[logits, *present_names], dynamic_axes=axes)
    return path


SEED002 = dict(mask="additive", past_in="past_{kv}_in{i}", present="past_{kv}{i}", logits="logits")
OPTIMUM = dict(mask="keep", past_in="past_key_values.{i}.{kv}", present="present.{i}.{kv}", logits="logits")


@pytest.fixture(scope="module")
def seed002(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("seed002")
    model, scaled = _llama(), _llama(1.05)
    return {
        "good": _export(_Decoder(model, "additive", last_only=True), root / "good.onnx", **SEED002),
        "swap": _export(_Decoder(model, "additive", last_only=True, swap=True), root / "swap.onnx", **SEED002),
        "weight": _export(_Decoder(scaled, "additive", last_only=True), root / "weight.onnx", **SEED002),
        "positions": _export(_Decoder(model, "additive", last_only=True, restart_positions=True),
                             root / "positions.onnx", **SEED002),
    }


def test_seed002_layout_is_judged_in_its_own_protocol(seed002, tmp_path, capsys):
    """The 4-D additive mask is built from the 2-D one, the reference's logits are cut to the
    last token, and the cache is paired by layer and role although its outputs are named
    ``past_key{i}``: generation runs with the file's own cache, on every --gen-samples."""
    code, records, text = _check(["--onnx", str(seed002["good"]), "--samples", "8", "--gen-samples", "8"],
                                 tmp_path / "good", capsys)
    assert code == 0, records.get("check", {}).get("reason", text)
    job = records["check"]["data"]["jobs"]["model_step"]
    protocol = job["protocol"]
    assert protocol["mask_form"] == "additive" and protocol["logits"] == "last", protocol
    slots = {(s["layer"], s["role"]): (s["input"], s["output"]) for s in protocol["cache"]["slots"]}
    assert slots[(1, "value")] == ("past_value_in1", "past_value1")
    how = {r["reference"]: (r["artifact"], r["how"]) for r in job["io_match"]}
    assert how["present.0.key"] == ("past_key0", "protocol: layer 0 key")
    generation = records["check_generation"]
    assert generation["data"]["protocol"]["model_step"]["logits"] == "last"  # every record carries it
    assert generation["metrics"]["gen_token_exact_match"] == 1.0
    assert generation["metrics"]["cached_decoding.presents.cosine"] > 0.99999
    assert "decoded without a KV cache" not in text and "mask: additive" in text


@pytest.mark.parametrize("fault, check", [("swap", "cached_decoding"), ("weight", "model_step/logits"),
                                          ("positions", "model_step/logits")])
def test_seed002_planted_faults_fail_naming_the_check(seed002, tmp_path, capsys, fault, check):
    code, records, text = _check(["--onnx", str(seed002[fault]), "--samples", "8", "--gen-samples", "4"],
                                 tmp_path / fault, capsys)
    reasons = " ".join(r["reason"] for r in records.values())
    assert code == 1 and check in reasons, reasons or text


def test_pad_positions_of_the_cache_are_not_compared(tmp_path, capsys):
    """optimum-like with past, presents 0 at left-pad positions (PyTorch writes real numbers
    there; no query reads them): the closed loop compares the positions the mask keeps."""
    path = _export(_Decoder(_llama(), "keep", zero_pads=True), tmp_path / "model.onnx", **OPTIMUM)
    code, records, text = _check(["--onnx", str(path), "--samples", "8", "--gen-samples", "8"], tmp_path / "run", capsys)
    assert code == 0, records.get("check_generation", records.get("check", {})).get("reason", text)
    assert records["check_generation"]["metrics"]["cached_decoding.presents.cosine"] > 0.99999


def test_expanded_mask_wrapper_passes_and_an_ignored_mask_fails(tmp_path, capsys):
    """Seed 003's wrapper: no cache, a pre-expanded boolean [B, T, T] mask named ``bias``;
    ``--map attention_mask=bias`` names it and the protocol builds its form (``--map`` used to
    refuse it: "rank is 3, not 2"); left-padded rows show a mask the graph ignores."""
    model = _llama()
    spec = dict(mask="expanded", past_in="", present="", logits="logits", cache=False, mask_name="bias")
    good = _export(_Decoder(model, "expanded", cache=False), tmp_path / "good.onnx", **spec)
    code, records, text = _check(["--onnx", str(good), "--samples", "8", "--gen-samples", "4",
                                  "--map", "attention_mask=bias"], tmp_path / "g", capsys)
    assert code == 0, records.get("check", {}).get("reason", text)
    assert records["check"]["data"]["jobs"]["model_prefill"]["protocol"]["mask_form"] == "expanded"
    bad = _export(_Decoder(model, "expanded", cache=False, ignore_mask=True), tmp_path / "bad.onnx", **spec)
    code, records, text = _check(["--onnx", str(bad), "--samples", "8", "--no-generation",
                                  "--map", "attention_mask=bias"], tmp_path / "b", capsys)
    assert code == 1 and "model_prefill/logits" in records["check"]["reason"], records["check"]["reason"]


def test_cacheless_decoder_with_one_seq_len_passes_tied_axes(tmp_path, capsys):
    """Without a cache, ids and mask have one length: one ``seq_len`` name is right."""
    spec = dict(mask="keep", past_in="", present="", logits="logits", cache=False, tied=True)
    path = _export(_Decoder(_llama(), "keep", cache=False), tmp_path / "model.onnx", **spec)
    code, records, text = _check(["--onnx", str(path), "--samples", "8", "--no-generation"], tmp_path / "r", capsys)
    assert code == 0, records.get("check", {}).get("reason", text)
    assert records["check"]["metrics"]["model_prefill.artifact.tied_axes"] == 0


def test_rows_feeding_gives_the_batched_numbers(seed002, tmp_path, capsys):
    """``feeding = "rows"`` (what GroupQueryAttention files get): one unpadded row per call,
    outputs put back at their padded positions; the verdict and numbers match batched feeding,
    and the record says how the file was fed."""
    table = tmp_path / "protocol.toml"
    table.write_text('feeding = "rows"\n')
    code, records, text = _check(["--onnx", str(seed002["good"]), "--samples", "8", "--no-generation",
                                  "--io-protocol", str(table)], tmp_path / "rows", capsys)
    assert code == 0, records.get("check", {}).get("reason", text)
    job = records["check"]["data"]["jobs"]["model_prefill"]
    assert any("one row per call" in n for n in job["notes"]), job["notes"]
    assert records["check"]["metrics"]["model_prefill.logits.cosine"] > 0.99999


def test_a_one_token_step_graph_is_fed_token_by_token(tmp_path, capsys):
    """A step graph exported with one token (its sequence axis static at 1, as decode-only
    graphs are): prompts and multi-token steps go one token per call, each fed the presents of
    the one before; every sentence is judged and generation runs with its cache."""
    path = _export(_Decoder(_llama(), "keep"), tmp_path / "one.onnx", **OPTIMUM, width=1)
    code, records, text = _check(["--onnx", str(path), "--samples", "8", "--gen-samples", "4"], tmp_path / "r", capsys)
    assert code == 0, records.get("check", {}).get("reason", text)
    job = records["check"]["data"]["jobs"]["model_step"]
    assert job["protocol"]["one_token_per_call"] and any("one token per call" in n for n in job["notes"])
    assert records["check_generation"]["metrics"]["cached_decoding.presents.cosine"] > 0.99999


def test_bad_protocol_file_is_one_line_exit_2(seed002, tmp_path, capsys):
    table = tmp_path / "protocol.toml"
    table.write_text('mask_form = "sideways"\n')
    code = main(["check", "--reference", str(_dir(LLAMA)), "--onnx", str(seed002["good"]),
                 "--io-protocol", str(table), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "mask_form = 'sideways'" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_group_query_attention_is_fed_unpadded_rows():
    """Inferred from the ops: GroupQueryAttention on ONNX Runtime CPU needs unpadded rows."""
    from harness.check.layout import ArtifactFile, TensorInfo
    from harness.check.protocol.infer import infer

    ins = (TensorInfo("input_ids", "int64", ("b", "s")), TensorInfo("attention_mask", "int64", ("b", "t")),
           TensorInfo("past_key_values.0.key", "float32", ("b", 2, "p", 8)),
           TensorInfo("past_key_values.0.value", "float32", ("b", 2, "p", 8)))
    outs = (TensorInfo("logits", "float32", ("b", "s", 100)), TensorInfo("present.0.key", "float32", ("b", 2, "t", 8)),
            TensorInfo("present.0.value", "float32", ("b", 2, "t", 8)))

    def art(ops: frozenset[str]) -> ArtifactFile:
        return ArtifactFile(Path("/nonexistent/model.onnx"), "model", ins, outs, {}, "", "fp32", "", "", 0, ops)

    gqa = infer(art(frozenset({"GroupQueryAttention", "MatMulNBits"})))
    assert gqa.rows_because.startswith("unpadded, one row per call: GroupQueryAttention")
    assert gqa.padding == ("right",) and gqa.positions.value == "implicit" and gqa.cache and gqa.cache.kv_heads == 2
    assert not infer(art(frozenset({"MatMul"}))).rows_because  # the negative control: batched, left-padded


def test_a_user_tolerance_for_a_lint_metric_is_applied(tmp_path):
    from harness.core import Precision
    from harness.families import GraphSpec
    from harness.judge.numeric import lint_result

    path = tmp_path / "m.onnx"
    _export(_Decoder(_llama(), "keep", cache=False), path, mask="keep", past_in="", present="", logits="logits",
            cache=False, tied=True)
    graph = GraphSpec("model", ("input_ids", "attention_mask", "position_ids", "past_key_values.0.key"), ("logits",),
                      {"input_ids": {1: "sequence"}, "attention_mask": {1: "past_sequence + sequence"},
                       "past_key_values.0.key": {2: "past_sequence"}})
    taken = {"input_ids": "input_ids", "attention_mask": "attention_mask", "past_key_values.0.key": "x"}
    tied = lint_result("model", str(path), graph, taken)  # as if it took a past: the tie is wrong
    assert tied.metrics["tied_axes"] == 1 and tied.failures()
    loosened = lint_result("model", str(path), graph, taken, Precision.FP32, {"fp32": {"tied_axes": 1}})
    assert not loosened.failures()
    cacheless = lint_result("model", str(path), graph, {"input_ids": "input_ids", "attention_mask": "attention_mask"})
    assert cacheless.metrics["tied_axes"] == 0
    assert np.isfinite(cacheless.metrics["training_mode_ops"])


def test_stacked_cache_and_masks_are_converted_both_ways():
    """``present_N`` [2, B, H, T, D] (the GPT-2 helper's layout) is split into key and value
    for the reference and stacked back on the next call; the 4-D additive mask holds causal and
    padding; a swapped stacking order shows (the negative control)."""
    from harness.check.layout import ArtifactFile, TensorInfo
    from harness.check.protocol.adapt import ProtocolRunner, mask_for
    from harness.check.protocol.fit import protocol_pairs
    from harness.check.protocol.infer import infer
    from harness.check.protocol.model import MaskForm, Protocol
    from harness.runners.base import GraphRunner

    ins = (TensorInfo("input_ids", "int64", ("b", "s")), TensorInfo("attention_mask", "float32", ("b", "t")),
           TensorInfo("past_0", "float32", (2, "b", 2, "p", 4)))
    outs = (TensorInfo("logits", "float32", ("b", "s", 10)), TensorInfo("present_0", "float32", (2, "b", 2, "t", 4)))
    protocol = infer(ArtifactFile(Path("/nonexistent/m.onnx"), "model", ins, outs, {}, "", "fp32", "", "", 0))
    assert protocol.cache is not None and protocol.cache.layout.value == "stacked"
    pairs = protocol_pairs(protocol)
    assert pairs["past_key_values.0.value"][0] == "past_0[value]" and pairs["present.0.key"][0] == "present_0[key]"

    class Concat(GraphRunner):  # the file: appends one new position (key 1s, value 2s) to the stacked past
        input_names, output_names = ["input_ids", "attention_mask", "past_0"], ["logits", "present_0"]

        def _run(self, feeds):
            past = feeds["past_0"]
            new = np.stack([np.ones_like(past[:, :, :, :1]), 2 * np.ones_like(past[:, :, :, :1])])[:, 0]
            return {"logits": np.zeros((past.shape[1], 1, 10), np.float32),
                    "present_0": np.concatenate([past, new], axis=3)}

    runner = ProtocolRunner(Concat(), protocol, ins, outs)
    key, value = np.zeros((1, 2, 3, 4), np.float32), np.full((1, 2, 3, 4), 5, np.float32)
    out = runner.run({"input_ids": np.array([[1]]), "attention_mask": np.ones((1, 4), np.float32),
                      "past_0[key]": key, "past_0[value]": value})
    assert out["present_0[key]"][0, 0, :, 0].tolist() == [0, 0, 0, 1]
    assert out["present_0[value]"][0, 0, :, 0].tolist() == [5, 5, 5, 2]
    additive = mask_for(Protocol(mask_form=MaskForm.ADDITIVE), np.array([[0, 1, 1]]), 2,
                        TensorInfo("m", "float32", (1, 1, 2, 3)))
    assert additive.shape == (1, 1, 2, 3)
    assert (additive[0, 0] == 0).tolist() == [[False, True, False], [False, True, True]]


def test_config_run_keys_check_does_not_apply_are_refused_and_gen_keys_apply(tmp_path, capsys, monkeypatch):
    """``[run] gen_batch_size = 1`` reaches the check's generation request; a key check does not
    apply (``opset``: the files are already built) is exit 2 naming it."""
    from harness.cli import build_parser
    from harness.cli.check import requests

    (tmp_path / "exports").mkdir()
    (tmp_path / "exports" / "lm.onnx").write_bytes(b"")  # never read: the request is resolved, not run
    shutil.copytree(_dir(LLAMA), tmp_path / "lm")
    base = '[models.lm]\npath = "lm"\n[models.lm.artifacts]\nfp32 = "exports/lm.onnx"\n'
    (tmp_path / "harness.toml").write_text("[run]\ngen_batch_size = 1\n\n" + base)
    monkeypatch.chdir(tmp_path)
    (request,) = requests(build_parser().parse_args(["check", "--config", "harness.toml"]))
    assert request.gen_settings.batch_size == 1
    (tmp_path / "strict.toml").write_text("[run]\nopset = 17\n\n" + base)
    code = main(["check", "--config", "strict.toml", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "[run] opset: not applied by harness check" in err, err


def test_a_reshape_baked_by_the_tracer_is_explained_and_ort_logs_nothing(tmp_path, capfd):
    """A real ONNX Runtime failure of a known cause gets its cause and fix before the raw text,
    and ORT's own error log line is not printed (the harness reports it, explained)."""
    from harness.runners.failures import explain
    from harness.runners.prebuilt import open_onnx

    class Flatten(torch.nn.Module):
        def forward(self, x):
            return x.view(2, -1) * 2  # the traced batch, 2, becomes a Reshape constant

    path = tmp_path / "baked.onnx"
    torch.onnx.export(Flatten(), (torch.ones(2, 3),), str(path), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}}, dynamo=False, opset_version=17)
    runner = open_onnx(path, "CPUExecutionProvider", 1)
    assert runner.run({"x": np.ones((2, 3), np.float32)})["y"].shape == (2, 3)
    with pytest.raises(Exception) as info:
        runner.run({"x": np.ones((3, 3), np.float32)})
    text = explain(str(info.value))
    assert text.startswith("a shape the tracer baked into a Reshape") and "runtime said:" in text
    assert "Reshape" in text.split("runtime said:", 1)[1]  # the raw message, kept whole
    assert explain("something else broke") == "something else broke"  # an unknown cause: the text alone
    assert "[E:onnxruntime" not in capfd.readouterr().err


def test_a_configs_io_protocol_reaches_the_request_and_a_bad_one_is_exit_2(tmp_path, capsys, monkeypatch):
    from harness.cli import build_parser
    from harness.cli.check import requests

    (tmp_path / "exports").mkdir()
    (tmp_path / "exports" / "lm.onnx").write_bytes(b"")  # never read: the request is resolved, not run
    shutil.copytree(_dir(LLAMA), tmp_path / "lm")
    base = '[models.lm]\npath = "lm"\n[models.lm.artifacts]\nfp32 = "exports/lm.onnx"\n[models.lm.io_protocol]\n'
    (tmp_path / "harness.toml").write_text(base + 'logits = "last"\n')
    monkeypatch.chdir(tmp_path)
    (request,) = requests(build_parser().parse_args(["check", "--config", "harness.toml"]))
    assert request.protocol == {"logits": "last"} and "[models.lm.io_protocol]" in request.protocol_origin
    (tmp_path / "bad.toml").write_text(base + 'logits = "first"\n')
    code = main(["check", "--config", "bad.toml", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "[models.lm.io_protocol]: logits = 'first': choose one of all, last" in err, err


def _identity(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.INT64, ["b", "t"])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, ["b", "t"])])
    onnx.save(helper.make_model(graph), str(path))
    return path


def test_a_folder_with_several_models_is_refused_listing_them(tmp_path, capsys):
    """optimum's in-place save (model.onnx beside model_quantized.onnx): never a silent pick.
    onnxruntime-genai's folder: its genai_config.json names the file judged."""
    from harness.check.layout import discover

    folder = tmp_path / "optimum"
    folder.mkdir()
    _identity(folder / "model.onnx")
    _identity(folder / "model_quantized.onnx")
    code = main(["check", "--reference", str(_dir(LLAMA)), "--onnx", str(folder), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "model.onnx and model_quantized.onnx" in err and len(err.strip().splitlines()) == 1, err
    genai = tmp_path / "genai"
    genai.mkdir()
    _identity(genai / "model.onnx")
    (genai / "genai_config.json").write_text(json.dumps({"model": {"decoder": {"filename": "model.onnx"}}}))
    assert [a.path.name for a in discover(genai)] == ["model.onnx"]
    _identity(genai / "model_int4.onnx")
    code = main(["check", "--reference", str(_dir(LLAMA)), "--onnx", str(genai), "--out", str(tmp_path / "g")])
    err = capsys.readouterr().err
    assert code == 2 and "genai_config.json names model.onnx" in err and "model_int4.onnx" in err, err


def test_a_sequence_first_cache_is_transposed_both_ways():
    """A cache exported as [B, T, H, D] (sequence before heads) is inferred from its static
    heads and head size, shown to the reference as [B, H, T, D] and transposed on each call."""
    from harness.check.layout import ArtifactFile, TensorInfo
    from harness.check.protocol.adapt import ProtocolRunner, canonical_inputs
    from harness.check.protocol.infer import infer
    from harness.runners.base import GraphRunner

    ins = (TensorInfo("input_ids", "int64", ("b", "s")), TensorInfo("attention_mask", "int64", ("b", "t")),
           TensorInfo("past_key_values.0.key", "float32", ("b", "p", 2, 4)),
           TensorInfo("past_key_values.0.value", "float32", ("b", "p", 2, 4)))
    outs = (TensorInfo("logits", "float32", ("b", "s", 10)), TensorInfo("present.0.key", "float32", ("b", "t", 2, 4)),
            TensorInfo("present.0.value", "float32", ("b", "t", 2, 4)))
    protocol = infer(ArtifactFile(Path("/nonexistent/m.onnx"), "model", ins, outs, {}, "", "fp32", "", "", 0))
    assert protocol.cache is not None and protocol.cache.layout.value == "sequence_first"
    assert protocol.cache.kv_heads == 2
    assert [t.shape for t in canonical_inputs(protocol, ins)][2] == ("b", 2, "p", 4)

    class Append(GraphRunner):  # the file: [B, T, H, D] in, one position appended along T
        input_names, output_names = [t.name for t in ins], [t.name for t in outs]

        def _run(self, feeds):
            out = {"logits": np.zeros((1, 1, 10), np.float32)}
            for role in ("key", "value"):
                past = feeds[f"past_key_values.0.{role}"]
                assert past.shape == (1, 3, 2, 4)  # the file got its own layout
                out[f"present.0.{role}"] = np.concatenate([past, np.full((1, 1, 2, 4), 7, np.float32)], axis=1)
            return out

    past = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)  # [B, H, T, D] as the reference holds it
    out = ProtocolRunner(Append(), protocol, ins, outs).run(
        {"input_ids": np.array([[1]]), "attention_mask": np.ones((1, 4), np.int64),
         "past_key_values.0.key": past, "past_key_values.0.value": past})
    assert out["present.0.key"].shape == (1, 2, 4, 4)
    assert np.array_equal(out["present.0.key"][:, :, :3], past) and (out["present.0.value"][:, :, 3] == 7).all()
