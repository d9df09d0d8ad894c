"""``harness check`` on artifacts the harness did not build.

Every artifact here comes from raw ``torch.onnx.export`` calls written in this file (other
input/output names, other opsets, optimum's directory layout, a hand-merged decoder), never
from ``harness.export`` or the families' wrappers. Faithful exports must pass; a perturbed
weight and a decoder without its encoder mask must fail with the numbers shown; truncated,
corrupt or unmatchable inputs must be rejected with exit 2 and one line, no traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
import torch
from onnx import TensorProto, helper

from harness.cli import main
from harness.core import UsageError
from harness.results import SCHEMA
from harness.zoo.base import materialize, resolve


def _dir(name: str) -> Path:
    return materialize(resolve(name))


def _export(module: torch.nn.Module, args: tuple, path: Path, inputs: list[str], outputs: list[str],
            axes: dict, opset: int = 17) -> Path:
    module.eval()
    with torch.no_grad():
        torch.onnx.export(module, args, str(path), input_names=inputs, output_names=outputs, dynamic_axes=axes,
                          opset_version=opset, dynamo=False)
    return path


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(["check", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]


# -- an encoder classifier exported by hand ---------------------------------------------------------------
class _Classifier(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, tokens, attn_mask):
        return self.model(input_ids=tokens, attention_mask=attn_mask).logits


def _bert(perturb: bool = False):
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(str(_dir("bert-tiny")), attn_implementation="eager")
    if perturb:  # "subtly wrong": one value-projection row 10% off, as a bad weight conversion would leave it
        with torch.no_grad():
            model.bert.encoder.layer[1].attention.self.value.weight[3] *= 1.10
    return model.eval()


def _bert_onnx(path: Path, perturb: bool = False, opset: int = 14, dynamic: bool = True) -> Path:
    ids = torch.tensor([[2, 40, 41, 42, 3], [2, 50, 3, 0, 0]])
    mask = (ids != 0).long()
    axes = {"tokens": {0: "b", 1: "t"}, "attn_mask": {0: "b", 1: "t"}, "scores": {0: "b"}} if dynamic else {}
    return _export(_Classifier(_bert(perturb)), (ids, mask), path, ["tokens", "attn_mask"], ["scores"], axes, opset)


@pytest.fixture(scope="module")
def bert_files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bert")
    return {"good": _bert_onnx(root / "good.onnx"), "bad": _bert_onnx(root / "bad.onnx", perturb=True)}


def test_faithful_foreign_classifier_passes_with_renamed_io(bert_files, tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, err = _run(["--reference", str(_dir("bert-tiny")), "--onnx", str(bert_files["good"]),
                              "--samples", "16", "--out", str(out)], capsys)
    assert code == 0, err + stdout
    assert "tokens" in stdout and "alias" in stdout  # the matching account is printed
    (record,) = _records(out)
    assert record["schema"] == SCHEMA and record["suite"] == "check" and record["verdict"] == "pass"
    name = _dir("bert-tiny").name  # a directory is named after itself
    assert record["id"] == f"check[{name}-fp32-ort_cpu]" and record["model"] == name
    assert record["metrics"]["model.logits.norm_max_abs"] < 1e-5
    assert record["metrics"]["model.logits.top1_agreement"] == 1.0
    assert record["thresholds"]["model.logits.cosine"] == {"threshold": 0.99999, "op": ">="}
    account = {row["reference"]: (row["artifact"], row["how"]) for row in record["data"]["jobs"]["model"]["io_match"]}
    assert account["input_ids"] == ("tokens", "alias") and account["attention_mask"] == ("attn_mask", "alias")
    assert account["logits"] == ("scores", "alias")
    assert record["artifacts"]["good.onnx"]["opset"] == 14
    summary = (out / "summary.md").read_text()
    all_cases = summary.split("## All cases", 1)[1].split("\n## ", 1)[0]
    assert all_cases.count(f"check[{name}-fp32-ort_cpu]") == 1  # one row in the case table (coverage has its own)


def test_check_perf_times_the_shipped_file(bert_files, tmp_path, capsys):
    """``harness check --perf``: latency distribution (p99 with its count and confidence) and
    cold start of the user's own file, in a ``check_perf`` record and on the terminal."""
    out = tmp_path / "run"
    code, stdout, err = _run(["--reference", str(_dir("bert-tiny")), "--onnx", str(bert_files["good"]),
                              "--samples", "8", "--perf", "--perf-samples", "40", "--perf-tail-seconds", "0",
                              "--perf-warmup", "2", "--perf-repeats", "1", "--graph-optimization", "basic",
                              "--out", str(out)], capsys)
    records = {r["suite"]: r for r in _records(out)}
    assert code == 0, err + stdout + json.dumps({k: r["reason"] for k, r in records.items()})
    flat = " ".join(stdout.split())  # the console wraps at its width
    assert "p99" in flat and "n=40 (low confidence" in flat and "cold start: load" in flat
    perf = records["check_perf"]
    assert perf["verdict"] == "pass" and perf["variant"].endswith("-ort_cpu-opt_basic")
    assert perf["perf"]["latency_ms"]["summary"]["n"] == 40 and len(perf["perf"]["latency_ms"]["samples"]) == 40
    assert perf["perf"]["cold_start_ms"]["load"] > 0 and perf["perf"]["peak_rss_bytes"] > 0
    assert perf["perf"]["artifact_bytes"] == bert_files["good"].stat().st_size
    assert records["check"]["settings"]["runtime"]["graph_optimization"] == "basic"
    assert "p99" in (out / "summary.md").read_text()


def test_perturbed_weight_fails_with_the_numbers(bert_files, tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, err = _run(["--reference", str(_dir("bert-tiny")), "--onnx", str(bert_files["bad"]),
                              "--samples", "16", "--out", str(out)], capsys)
    assert code == 1, err
    (record,) = _records(out)
    assert record["verdict"] == "fail"
    assert "model/logits: norm_max_abs" in record["reason"]
    assert record["metrics"]["model.logits.norm_max_abs"] > 1e-4  # the FP32 gate
    assert "FAIL" in stdout and "worst" in stdout


def test_int8_quantized_foreign_export_is_detected_and_judged_at_int8(bert_files, tmp_path, capsys):
    from onnxruntime.quantization import quantize_dynamic

    q = tmp_path / "q.onnx"
    quantize_dynamic(str(bert_files["good"]), str(q))
    out = tmp_path / "run"
    code, stdout, err = _run(["--reference", str(_dir("bert-tiny")), "--onnx", str(q), "--samples", "16",
                              "--out", str(out)], capsys)
    (record,) = _records(out)
    assert record["precision"] == "int8" and "quantized op" in record["data"]["precision"]
    assert code == 0, record["reason"]
    assert record["thresholds"]["model.logits.cosine"]["threshold"] == 0.99


def test_fp16_export_with_fp16_io_is_detected_and_judged_at_fp16(bert_files, tmp_path, capsys):
    from onnxconverter_common import float16

    half = float16.convert_float_to_float16(onnx.load(str(bert_files["good"])), keep_io_types=False)
    path = tmp_path / "half.onnx"
    onnx.save(half, str(path))
    out = tmp_path / "run"
    code, stdout, err = _run(["--reference", str(_dir("bert-tiny")), "--onnx", str(path), "--samples", "16",
                              "--out", str(out)], capsys)
    (record,) = _records(out)
    assert code == 0 and record["precision"] == "fp16", record["reason"]
    account = {r["reference"]: r["detail"] for r in record["data"]["jobs"]["model"]["io_match"]}
    assert account["logits"].startswith("float16[")  # FP16 outputs, compared in FP32
    assert 1e-6 < record["metrics"]["model.logits.norm_max_abs"] < 1e-2


def test_static_shape_export_is_fed_its_fixed_batch(tmp_path, capsys):
    """A file that bakes batch 2 x 5 tokens cannot take the corpus's longer sentences: the
    shape-coverage check fails, counting them, unless the protocol declares the shape intended;
    its batch is fed whole (a short last batch is filled, no sentence is dropped)."""
    path = _bert_onnx(tmp_path / "static.onnx", dynamic=False)  # batch 2, length 5 baked in
    out = tmp_path / "run"
    code, stdout, err = _run(["--reference", str(_dir("bert-tiny")), "--onnx", str(path), "--samples", "5",
                              "--out", str(out)], capsys)
    (record,) = _records(out)
    assert code == 1 and "model/shapes: sentences_cut = 5" in record["reason"], record["reason"]
    assert "5 of 5 sentences longer than the baked 5 tokens" in record["reason"]
    intended = tmp_path / "protocol.toml"
    intended.write_text("static_intended = true\n")
    out = tmp_path / "intended"
    code, stdout, err = _run(["--reference", str(_dir("bert-tiny")), "--onnx", str(path), "--samples", "5",
                              "--io-protocol", str(intended), "--out", str(out)], capsys)
    (record,) = _records(out)
    notes = record["data"]["jobs"]["model"]["notes"]
    assert any("static batch 2" in n and "filled" in n for n in notes), notes
    assert any("static sequence length 5" in n and "declared intended" in n for n in notes), notes
    assert record["data"]["jobs"]["model"]["protocol"]["static_intended"] is True
    assert code == 0, record["reason"]


# -- bad input: exit 2, one line naming the file, no traceback ---------------------------------------------------
@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_damaged_artifact_is_rejected_with_exit_2(bert_files, tmp_path, capsys, damage):
    data = bert_files["good"].read_bytes()
    bad = tmp_path / "model.onnx"
    bad.write_bytes({"truncated": data[: len(data) // 2], "garbage": b"not a model" * 50, "empty": b""}[damage])
    code, stdout, err = _run(["--reference", str(_dir("bert-tiny")), "--onnx", str(bad),
                              "--out", str(tmp_path / "run")], capsys)
    assert code == 2
    assert err.startswith("harness: error: ") and str(bad) in err and err.count("\n") == 1
    assert "Traceback" not in err + stdout
    assert not (tmp_path / "run" / "results.jsonl").exists()


def test_unreadable_reference_and_missing_files_are_exit_2(bert_files, tmp_path, capsys):
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    cases = [
        (["--reference", str(empty), "--onnx", str(bert_files["good"])], "no config.json"),
        (["--reference", str(tmp_path / "nowhere"), "--onnx", str(bert_files["good"])], "no such directory"),
        (["--reference", str(_dir("bert-tiny")), "--onnx", str(tmp_path / "missing.onnx")], "missing.onnx"),
        (["--reference", str(_dir("bert-tiny")), "--onnx", str(bert_files["good"]), "--providers", "ort_cdua"],
         "did you mean 'ort_cuda'"),
        (["--reference", str(_dir("bert-tiny")), "--onnx", str(bert_files["good"]), "--tolerance", "cosin=1"],
         "did you mean 'cosine'"),
    ]
    for argv, expected in cases:
        code, stdout, err = _run(argv, capsys)
        assert code == 2 and expected in err and "Traceback" not in err, (argv, err)


def test_external_data_outside_the_artifact_dir_is_refused(bert_files, tmp_path, capsys):
    model = onnx.load(str(bert_files["good"]))
    inner = tmp_path / "artifact"
    inner.mkdir()
    onnx.save(model, str(inner / "model.onnx"), save_as_external_data=True, location="weights.bin",
              size_threshold=0)
    (tmp_path / "weights.bin").write_bytes((inner / "weights.bin").read_bytes())
    tampered = onnx.load(str(inner / "model.onnx"), load_external_data=False)
    for tensor in tampered.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = "../weights.bin"
    onnx.save(tampered, str(inner / "model.onnx"))
    code, _, err = _run(["--reference", str(_dir("bert-tiny")), "--onnx", str(inner / "model.onnx")], capsys)
    assert code == 2 and "external data location '../weights.bin' climbs out of the artifact's folder" in err


# -- I/O matching ---------------------------------------------------------------------------------------
def test_ambiguous_inputs_need_a_map_and_work_with_one(tmp_path, capsys):
    ids = torch.tensor([[2, 40, 41, 3], [2, 50, 3, 0]])
    path = _export(_Classifier(_bert()), (ids, (ids != 0).long()), tmp_path / "anon.onnx", ["a", "b"], ["c"],
                   {"a": {0: "B", 1: "T"}, "b": {0: "B", 1: "T"}, "c": {0: "B"}})
    code, _, err = _run(["--reference", str(_dir("bert-tiny")), "--onnx", str(path)], capsys)
    assert code == 2 and "--map" in err and "input_ids" in err
    out = tmp_path / "run"
    code, stdout, err = _run(["--reference", str(_dir("bert-tiny")), "--onnx", str(path), "--samples", "8",
                              "--map", "input_ids=a", "--map", "attention_mask=b", "--out", str(out)], capsys)
    assert code == 0, err
    account = {r["reference"]: r["how"] for r in _records(out)[0]["data"]["jobs"]["model"]["io_match"]}
    assert account == {"input_ids": "--map", "attention_mask": "--map", "logits": "shape"}


def test_io_matcher_stages_and_errors():
    from harness.check.io_match import Role, canonical, match_io, role
    from harness.check.layout import TensorInfo as T

    assert canonical("segment_ids") == "token_type_ids" and canonical("inputIds") == "input_ids"
    assert role("past_key_values.3.value") == role("past.3.v") == Role(None, "value", 3, None, "past")
    assert role("PastKeyValues0Key").kv == "key" and role("present.1.encoder.value").side == "encoder"
    ref_in = {"input_ids": T("input_ids", "int64", (8, 9)), "attention_mask": T("attention_mask", "int64", (8, 9))}
    ref_out = {"last_hidden_state": T("last_hidden_state", "float32", (8, 9, 64))}
    match = match_io("m", ref_in, ref_out,
                     [T("input_ids", "int32", ("b", "s")), T("segment_ids", "int64", ("b", "s")),
                      T("mask", "bool", ("b", "s"))],
                     [T("1234", "float32", ("b", "s", 64)), T("pooler", "float32", ("b", 64))],
                     synthesizable={"token_type_ids": "zeros"}, gated_outputs=None)
    how = {(p.reference, p.artifact): p.how for p in match.inputs + match.outputs}
    assert how[("input_ids", "input_ids")] == "name" and how[("attention_mask", "mask")] == "alias"
    assert how[(None, "segment_ids")] == "synthesized" and how[("last_hidden_state", "1234")] == "shape"
    assert how[(None, "pooler")] == "ignored"
    with pytest.raises(UsageError, match="rank is 2, not 3"):
        match_io("m", ref_in, ref_out, [T("input_ids", "int64", ("b", "s"))],
                 [T("last_hidden_state", "float32", ("b", 64))], synthesizable={}, gated_outputs=None)
    with pytest.raises(UsageError, match="'foo'.*no counterpart"):
        match_io("m", ref_in, ref_out, [T("input_ids", "int64", ("b", "s")), T("foo", "float32", ("b",))],
                 [T("out", "float32", ("b", "s", 64))], synthesizable={}, gated_outputs=None)


# -- seq2seq in optimum's layout, exported by hand ---------------------------------------------------------------
def _marian():
    from transformers import AutoModelForSeq2SeqLM

    return AutoModelForSeq2SeqLM.from_pretrained(str(_dir("marian-tiny")), attn_implementation="eager").eval()


class _Encoder(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.encoder = model.get_encoder()

    def forward(self, input_ids, attention_mask):
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class _Decoder(torch.nn.Module):
    """``use_mask=False`` is the classic export bug: cross-attention then reads padding."""

    def __init__(self, model, with_past: bool, use_mask: bool = True):
        super().__init__()
        self.model, self.with_past, self.use_mask = model, with_past, use_mask
        self.layers = model.config.decoder_layers

    def forward(self, input_ids, encoder_mask, *rest):
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache

        if self.with_past:
            past = rest
            self_kv = DynamicCache([(past[4 * i], past[4 * i + 1]) for i in range(self.layers)])
            cross = DynamicCache([(past[4 * i + 2], past[4 * i + 3]) for i in range(self.layers)])
            states = past[2].new_zeros((past[2].shape[0], past[2].shape[2], self.model.config.d_model))
        else:
            (states,) = rest
            self_kv, cross = DynamicCache(), DynamicCache()
        cache = EncoderDecoderCache(self_kv, cross)
        hidden = self.model.get_decoder()(input_ids=input_ids, encoder_hidden_states=states,
                                          encoder_attention_mask=encoder_mask if self.use_mask else None,
                                          cache=cache, use_cache=True).last_hidden_state
        logits = self.model.lm_head(hidden) + self.model.final_logits_bias
        outs = [logits]
        for i in range(self.layers):
            outs += [cache.self_attention_cache.layers[i].keys, cache.self_attention_cache.layers[i].values]
            if not self.with_past:
                outs += [cache.cross_attention_cache.layers[i].keys, cache.cross_attention_cache.layers[i].values]
        return tuple(outs)


def _marian_dir(root: Path, use_mask: bool = True, optimum_names: bool = False, tied_axes: bool = False) -> Path:
    """encoder_model.onnx / decoder_model.onnx / decoder_with_past_model.onnx, optimum's file
    names; the decoder's inputs are ``decoder_input_ids`` and ``encoder_outputs`` unless
    ``optimum_names`` (a merged decoder needs one name per input across both branches)."""
    model = _marian()
    layers, heads = model.config.decoder_layers, model.config.decoder_attention_heads
    hd = model.config.d_model // heads
    root.mkdir(parents=True, exist_ok=True)
    ids = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    mask = (ids != 0).long()
    _export(_Encoder(model), (ids, mask), root / "encoder_model.onnx", ["input_ids", "attention_mask"],
            ["last_hidden_state"], {n: {0: "b", 1: "s"} for n in ("input_ids", "attention_mask", "last_hidden_state")},
            opset=16)
    states = _Encoder(model)(ids, mask).detach()
    dec_in = torch.tensor([[0, 5, 6], [0, 9, 10]])
    presents = [f"present.{i}.{side}.{kv}" for i in range(layers) for side in ("decoder", "encoder")
                for kv in ("key", "value")]
    ids_name, states_name = ("input_ids", "encoder_hidden_states") if optimum_names else \
        ("decoder_input_ids", "encoder_outputs")
    # tied_axes: the widely copied Marian recipe's dynamic_axes, one name for target and source length
    t = "s" if tied_axes else "t"
    axes = {ids_name: {0: "b", 1: t}, "encoder_attention_mask": {0: "b", 1: "s"},
            states_name: {0: "b", 1: "s"}, "logits": {0: "b", 1: t}}
    axes.update({n: {0: "b", 2: (t if ".decoder." in n else "s")} for n in presents})
    _export(_Decoder(model, False, use_mask), (dec_in, mask, states), root / "decoder_model.onnx",
            [ids_name, "encoder_attention_mask", states_name], ["logits", *presents], axes, opset=16)
    past = [torch.randn(2, heads, 3 if ".decoder." in n else 5, hd) for n in presents]
    past_names = [n.replace("present", "past_key_values") for n in presents]
    dec_presents = [n for n in presents if ".decoder." in n]
    axes = {"input_ids": {0: "b", 1: "t"}, "encoder_attention_mask": {0: "b", 1: "s"}, "logits": {0: "b", 1: "t"}}
    axes.update({n: {0: "b", 2: ("p" if ".decoder." in n else "s")} for n in past_names})
    axes.update({n: {0: "b", 2: "p1"} for n in dec_presents})
    _export(_Decoder(model, True, use_mask), (dec_in[:, :1], mask, *past), root / "decoder_with_past_model.onnx",
            ["input_ids", "encoder_attention_mask", *past_names], ["logits", *dec_presents], axes, opset=16)
    return root


def _merge(decoder: Path, with_past: Path, target: Path) -> Path:
    """optimum's decoder_model_merged.onnx, by hand: an ``If`` on ``use_cache_branch``."""
    plain, cached = onnx.load(str(decoder)), onnx.load(str(with_past))
    outer = {i.name: i for i in list(plain.graph.input) + list(cached.graph.input)}
    outputs = [o.name for o in plain.graph.output]

    def branch(model: onnx.ModelProto, prefix: str, passthrough: dict[str, str]) -> onnx.GraphProto:
        graph = model.graph
        rename = lambda n: n if (n in outer or not n) else prefix + n  # noqa: E731
        nodes = []
        for node in graph.node:
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            copy.name = prefix + node.name
            copy.input[:] = [rename(n) for n in node.input]
            copy.output[:] = [rename(n) for n in node.output]
            nodes.append(copy)
        inits = []
        for init in graph.initializer:
            copy = onnx.TensorProto()
            copy.CopyFrom(init)
            copy.name = prefix + init.name
            inits.append(copy)
        produced = {o.name: o for o in graph.output}
        outs = []
        for name in outputs:
            if name in produced:
                outs.append(helper.make_tensor_value_info(rename(name), produced[name].type.tensor_type.elem_type, None))
            else:  # the cached branch passes the cross-attention cache through
                nodes.append(helper.make_node("Identity", [passthrough[name]], [prefix + name]))
                outs.append(helper.make_tensor_value_info(prefix + name, TensorProto.FLOAT, None))
        return helper.make_graph(nodes, f"{prefix}branch", [], outs, inits)

    enc_pass = {n: n.replace("present", "past_key_values") for n in outputs if ".encoder." in n}
    then_g = branch(cached, "cached/", enc_pass)
    else_g = branch(plain, "plain/", {})
    node = helper.make_node("If", ["use_cache_branch"], outputs, then_branch=then_g, else_branch=else_g)
    inputs = [outer[n] for n in dict.fromkeys([i.name for i in plain.graph.input] + [i.name for i in cached.graph.input])]
    inputs.append(helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1]))
    graph = helper.make_graph([node], "merged", inputs, list(plain.graph.output))
    merged = helper.make_model(graph, opset_imports=list(plain.opset_import))
    merged.ir_version = plain.ir_version
    onnx.save(merged, str(target))
    return target


@pytest.fixture(scope="module")
def marian_dirs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("marian")
    good = _marian_dir(root / "good")
    plain = _marian_dir(root / "optimum", optimum_names=True)
    merged = root / "merged"
    merged.mkdir()
    (merged / "encoder_model.onnx").write_bytes((plain / "encoder_model.onnx").read_bytes())
    _merge(plain / "decoder_model.onnx", plain / "decoder_with_past_model.onnx", merged / "decoder_model_merged.onnx")
    return {"good": good, "merged": merged, "nomask": _marian_dir(root / "nomask", use_mask=False),
            "tied": _marian_dir(root / "tied", tied_axes=True)}


def test_seq2seq_optimum_layout_passes_numeric_and_generation(marian_dirs, tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, err = _run(["--reference", str(_dir("marian-tiny")), "--onnx", str(marian_dirs["good"]),
                              "--samples", "16", "--gen-samples", "12", "--out", str(out)], capsys)
    records = {r["suite"]: r for r in _records(out)}
    assert code == 0, records["check"]["reason"] + err
    numeric, gen = records["check"], records["check_generation"]
    assert set(numeric["data"]["jobs"]) == {"encoder", "decoder", "decoder_with_past"}
    dec = {r["reference"]: (r["artifact"], r["how"]) for r in numeric["data"]["jobs"]["decoder"]["io_match"]}
    assert dec["input_ids"] == ("decoder_input_ids", "alias")
    assert dec["encoder_hidden_states"] == ("encoder_outputs", "alias")
    assert numeric["metrics"]["decoder_with_past.logits.top1_agreement"] == 1.0
    assert gen["verdict"] == "pass" and gen["metrics"]["gen_token_exact_match"] == 1.0
    assert gen["metrics"]["gen_sentences"] == 12


def test_a_second_check_of_the_same_files_replays_the_decode_and_changed_bytes_do_not(marian_dirs, tmp_path, capsys):
    """Files built elsewhere are keyed by their bytes like the harness's own artifacts: the same
    files decode from the output cache the second time; a file whose bytes differ (its doc string
    only: same outputs) is decoded again, with the same metrics."""
    import shutil
    import uuid

    import onnx

    args = ["--reference", str(_dir("marian-tiny")), "--samples", "16", "--gen-samples", "12"]
    gens = []
    edited = tmp_path / "edited"
    shutil.copytree(marian_dirs["good"], edited)
    model = onnx.load(str(edited / "decoder_with_past_model.onnx"))
    model.doc_string = f"same graph, other bytes ({uuid.uuid4()})"  # new bytes in every session (a shared cache)
    onnx.save(model, str(edited / "decoder_with_past_model.onnx"))
    for i, files in enumerate((marian_dirs["good"], marian_dirs["good"], edited)):
        code, _, err = _run([*args, "--onnx", str(files), "--out", str(tmp_path / f"run{i}")], capsys)
        assert code == 0, err
        gens.append(next(r for r in _records(tmp_path / f"run{i}") if r["suite"] == "check_generation"))
    replayed = [g["data"]["generation"]["settings"].get("replayed") for g in gens]
    assert replayed[1] is True and replayed[2] is not True, replayed
    assert gens[1]["metrics"] == gens[0]["metrics"] == gens[2]["metrics"]


def test_hand_merged_decoder_is_judged_on_both_branches(marian_dirs, tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, err = _run(["--reference", str(_dir("marian-tiny")), "--onnx", str(marian_dirs["merged"]),
                              "--samples", "16", "--gen-samples", "8", "--out", str(out)], capsys)
    records = {r["suite"]: r for r in _records(out)}
    assert code == 0, records["check"]["reason"] + err
    jobs = records["check"]["data"]["jobs"]
    assert set(jobs) == {"encoder", "merged_decoder", "merged_decoder_with_past"}
    synthesized = {r["artifact"] for r in jobs["merged_decoder_with_past"]["io_match"] if r["how"] == "synthesized"}
    assert synthesized == {"use_cache_branch", "encoder_hidden_states"}
    assert {r["artifact"] for r in jobs["merged_decoder"]["io_match"] if r["how"] == "synthesized"} == {
        "use_cache_branch", *(f"past_key_values.{i}.{s}.{kv}" for i in range(2) for s in ("decoder", "encoder")
                              for kv in ("key", "value"))}
    assert records["check"]["metrics"]["merged_decoder_with_past.logits.cosine"] > 0.99999
    assert records["check_generation"]["metrics"]["gen_token_exact_match"] == 1.0


def test_decoder_without_encoder_mask_fails(marian_dirs, tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, err = _run(["--reference", str(_dir("marian-tiny")), "--onnx", str(marian_dirs["nomask"]),
                              "--samples", "16", "--no-generation", "--out", str(out)], capsys)
    (record,) = _records(out)
    assert code == 1 and record["verdict"] == "fail"
    assert record["metrics"]["encoder.last_hidden_state.cosine"] > 0.99999  # the encoder is fine
    assert record["metrics"]["decoder.logits.norm_max_abs"] > 1e-3  # padding leaks into cross-attention
    assert "decoder/logits" in record["reason"]


def test_check_perf_on_a_seq2seq_layout_measures_generation_with_and_without_cache(marian_dirs, tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, err = _run(["--reference", str(_dir("marian-tiny")), "--onnx", str(marian_dirs["good"]),
                              "--samples", "8", "--no-generation", "--perf", "--perf-samples", "20",
                              "--perf-warmup", "1", "--perf-repeats", "1", "--perf-new-tokens", "4",
                              "--out", str(out)], capsys)
    assert code == 0, err + stdout
    perf = {r["suite"]: r for r in _records(out)}["check_perf"]["perf"]
    assert {"latency_ms", "latency_ms[graph=decoder]", "latency_ms[graph=decoder_with_past]"} <= set(perf)
    assert perf["generation"]["kv=on"]["tokens_per_s"] > 0 and perf["generation"]["kv=off"]["tokens_per_s"] > 0
    assert "latency_ms[gen=ttft,kv=on]" in perf and "TTFT" in " ".join(stdout.split())


def test_decoder_exported_with_tied_source_and_target_axes_fails_naming_them(marian_dirs, tmp_path, capsys):
    """The Marian recipe's ``dynamic_axes`` give the decoder's target length and the encoder's
    source length one name. Corpus batches (target = source length) pass; the shape probes
    (target != source) and the axis lint fail it, naming both axes, without generation."""
    out = tmp_path / "run"
    code, stdout, err = _run(["--reference", str(_dir("marian-tiny")), "--onnx", str(marian_dirs["tied"]),
                              "--samples", "8", "--no-generation", "--out", str(out)], capsys)
    (record,) = _records(out)
    assert code == 1 and record["verdict"] == "fail", record["reason"]
    assert record["metrics"]["decoder.artifact.tied_axes"] == 1
    assert "decoder_sequence" in record["reason"] and "encoder_sequence" in record["reason"]
    assert record["metrics"]["decoder.logits.cosine"] > 0.99999  # the numbers of equal lengths are right
    probes = {s["probe"] for s in record["data"]["jobs"]["decoder"]["shapes"]}
    assert any("target length" in p and "<" in p for p in probes) and any(">" in p for p in probes)
    # the correctly exported decoder passes the same probes and lint
    good = tmp_path / "good"
    code, _, _ = _run(["--reference", str(_dir("marian-tiny")), "--onnx", str(marian_dirs["good"]),
                       "--samples", "8", "--no-generation", "--out", str(good)], capsys)
    (ok,) = _records(good)
    assert code == 0, ok["reason"]
    assert ok["metrics"]["decoder.artifact.tied_axes"] == 0 and ok["metrics"]["decoder.shapes.shape_failures"] == 0
    assert ok["metrics"]["decoder_with_past.shapes.shape_failures"] == 0


# -- decoder-only with past, other names --------------------------------------------------------------------
class _Step(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model, self.layers = model, model.config.num_hidden_layers

    def forward(self, input_ids, attention_mask, position_ids, *past):
        from transformers.cache_utils import DynamicCache

        cache = DynamicCache([(past[2 * i], past[2 * i + 1]) for i in range(self.layers)])
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, cache=cache,
                         use_cache=True)
        return (out.logits, *[t for layer in cache.layers for t in (layer.keys, layer.values)])


def test_decoder_only_with_past_and_other_names_passes(tmp_path, capsys):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(_dir("llama-tiny")), attn_implementation="eager").eval()
    cfg = model.config
    kv, hd = cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads
    past = [torch.randn(2, kv, 3, hd) for _ in range(2 * cfg.num_hidden_layers)]
    past_names = [f"past.{i}.{k}" for i in range(cfg.num_hidden_layers) for k in ("key", "value")]
    present = [f"new_cache_{i}_{k}" for i in range(cfg.num_hidden_layers) for k in ("k", "v")]
    ids, mask = torch.tensor([[5, 6], [7, 8]]), torch.ones(2, 5, dtype=torch.long)
    axes = {"input_ids": {0: "b", 1: "t"}, "attention_mask": {0: "b", 1: "all"}, "position_ids": {0: "b", 1: "t"},
            "lm_logits": {0: "b", 1: "t"}, **{n: {0: "b", 2: "p"} for n in past_names},
            **{n: {0: "b", 2: "all"} for n in present}}
    path = _export(_Step(model), (ids, mask, torch.tensor([[3, 4], [3, 4]]), *past), tmp_path / "lm.onnx",
                   ["input_ids", "attention_mask", "position_ids", *past_names], ["lm_logits", *present], axes)
    out = tmp_path / "run"
    code, stdout, err = _run(["--reference", str(_dir("llama-tiny")), "--onnx", str(path), "--samples", "16",
                              "--gen-samples", "8", "--out", str(out)], capsys)
    records = {r["suite"]: r for r in _records(out)}
    assert code == 0, records["check"]["reason"] + err
    jobs = records["check"]["data"]["jobs"]
    assert set(jobs) == {"model_prefill", "model_step"}
    how = {r["reference"]: (r["artifact"], r["how"]) for r in jobs["model_step"]["io_match"]}
    assert how["past_key_values.1.value"] == ("past.1.value", "protocol: layer 1 value")
    assert how["present.0.key"] == ("new_cache_0_k", "protocol: layer 0 key")
    assert how["logits"] == ("lm_logits", "alias")
    assert records["check_generation"]["metrics"]["gen_token_exact_match"] == 1.0


def test_config_lists_artifacts_and_its_tolerances_decide(bert_files, tmp_path, capsys, monkeypatch):
    import shutil

    shutil.copytree(_dir("bert-tiny"), tmp_path / "models" / "clf")
    (tmp_path / "exports").mkdir()
    shutil.copy(bert_files["good"], tmp_path / "exports" / "clf.onnx")
    shutil.copy(bert_files["bad"], tmp_path / "exports" / "clf-v2.onnx")
    config = ('[run]\nsamples = 8\n\n[models.clf]\npath = "models/clf"\n'
              '[models.clf.artifacts]\nfp32 = "exports/clf.onnx"\n\n'
              '[models.clf2]\npath = "models/clf"\n[models.clf2.artifacts]\nfp32 = "exports/clf-v2.onnx"\n')
    (tmp_path / "harness.toml").write_text(config)
    monkeypatch.chdir(tmp_path)
    code, stdout, err = _run(["--config", "harness.toml", "--out", str(tmp_path / "strict")], capsys)
    by_id = {r["id"]: r for r in _records(tmp_path / "strict")}
    assert code == 1, err
    assert {i: r["verdict"] for i, r in by_id.items()} == {"check[clf-fp32-ort_cpu]": "pass",
                                                           "check[clf2-fp32-ort_cpu]": "fail"}
    assert by_id["check[clf-fp32-ort_cpu]"]["settings"]["num_samples"] == 8
    # the team accepts the new weights' drift for clf2: the config's tolerance decides
    (tmp_path / "harness.toml").write_text(config + "[models.clf2.tolerances.fp32]\nnorm_max_abs = 1e-3\n")
    code, stdout, err = _run(["--config", "harness.toml", "--models", "clf2", "--out", str(tmp_path / "loose")],
                             capsys)
    (record,) = _records(tmp_path / "loose")
    assert code == 0 and record["thresholds"]["model.logits.norm_max_abs"]["threshold"] == 1e-3


def test_check_reuses_the_workspaces_memoised_reference(bert_files, tmp_path, capsys, monkeypatch):
    """The batch that matches the I/O is the first judged batch: PyTorch runs it once, through the
    workspace's memo (the run pipeline's), not again in a second reference path."""
    from harness.families.encoder import EncoderFamily

    calls: list[str] = []
    original = EncoderFamily.module

    def counting(self, model, graph, torch_model=None):
        calls.append(graph.name)
        return original(self, model, graph, torch_model)

    monkeypatch.setattr(EncoderFamily, "module", counting)
    monkeypatch.setenv("HARNESS_FRESH_REFERENCES", "1")  # a warm reference cache would run PyTorch 0 times
    code, stdout, err = _run(["--reference", str(_dir("bert-tiny")), "--onnx", str(bert_files["good"]),
                              "--samples", "16", "--batch-size", "8", "--out", str(tmp_path / "run")], capsys)
    assert code == 0, err
    (record,) = _records(tmp_path / "run")
    tried = record["data"]["jobs"]["model"]["shapes"]  # the two corpus batches, then the shape sweep's
    assert [t["probe"] for t in tried[:2]] == ["corpus", "corpus"] and len(tried) > 2
    assert calls == ["model"] * len(tried)  # every batch run once (the I/O-matching one through the memo)
