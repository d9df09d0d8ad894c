"""Tiny random models of common Hugging Face architectures, built from their config classes.

Breadth is proven, not claimed: ``scripts/architecture_table.py`` builds every entry of
``ARCHITECTURES`` into an HF directory (random weights, a fixed seed, a byte-level BPE trained
on the project's corpus, tiny dimensions) and runs the harness's own matrix over them; the
table it writes is ``docs/architectures.md``. The CI subset (``CI_SUBSET``) runs in the tests.

Nothing here is registered in the zoo: these directories are judged the way a team's own model
is (``--models ./dir``), detection from ``config.json`` included. Chosen by usage: the most
common text families of transformers' model list -- encoders with every head the harness judges,
decoder-only LMs, encoder-decoders -- and seven architectures outside the zoo that its coverage accounting was first tried on.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from harness.core.cachedir import lock_for, replace_dir, temp_dir_for
from harness.families.tasks import task_of_architecture
from harness.zoo.hf_tiny import corpus_texts
from harness.zoo.tokenizer import Style, save_tokenizer, train_tokenizer

SEED = 1234
#: learned positions of every tiny model: small, like GPT-2's tiny test configs, so the
#: prompt + new-token limit is exercised (the corpus's longest prompt is ~40 tokens)
TINY_POSITIONS = 64
#: bumped when ``harness.zoo.tokenizer`` changes what a built tokenizer encodes (2: RoBERTa-style
#: pairs get their separator, so a QA model's question and context are told apart)
TOKENIZER_RECIPE = 2


@dataclass(frozen=True)
class Architecture:
    """One architecture: the transformers model class (its head) and the config keyword
    arguments that make it tiny. ``style`` picks the tokenizer's special tokens."""

    name: str
    model_class: str
    kind: str  # encoder / causal_lm / seq2seq (the table's grouping)
    style: Style
    config: Mapping[str, Any] = field(default_factory=dict)

    @property
    def task(self) -> str:
        return task_of_architecture(self.model_class, {"is_encoder_decoder": self.kind == "seq2seq"}) or "?"


_ENC = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=TINY_POSITIONS)
_LM = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
           max_position_embeddings=TINY_POSITIONS, tie_word_embeddings=False)
_BART = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
             encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=TINY_POSITIONS)

ARCHITECTURES: tuple[Architecture, ...] = (
    # -- encoders, one per head the harness judges ------------------------------------------------
    Architecture("bert", "BertForSequenceClassification", "encoder", "bert", {**_ENC, "num_labels": 3}),
    Architecture("bert-token", "BertForTokenClassification", "encoder", "bert", {**_ENC, "num_labels": 5}),
    Architecture("bert-mlm", "BertForMaskedLM", "encoder", "bert", _ENC),
    Architecture("distilbert", "DistilBertForQuestionAnswering", "encoder", "bert",
                 dict(dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=TINY_POSITIONS)),
    Architecture("distilbert-cls", "DistilBertForSequenceClassification", "encoder", "bert",
                 dict(dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=TINY_POSITIONS,
                      num_labels=2)),
    Architecture("roberta", "RobertaForMaskedLM", "encoder", "roberta", {**_ENC, "max_position_embeddings": TINY_POSITIONS + 2}),
    Architecture("roberta-cls", "RobertaForSequenceClassification", "encoder", "roberta",
                 {**_ENC, "max_position_embeddings": TINY_POSITIONS + 2, "num_labels": 3}),
    Architecture("xlm-roberta", "XLMRobertaModel", "encoder", "roberta", {**_ENC, "max_position_embeddings": TINY_POSITIONS + 2}),
    Architecture("albert", "AlbertForSequenceClassification", "encoder", "bert",
                 {**_ENC, "embedding_size": 16, "num_labels": 2}),
    Architecture("electra", "ElectraForTokenClassification", "encoder", "bert",
                 {**_ENC, "embedding_size": 16, "num_labels": 4}),
    Architecture("deberta-v2", "DebertaV2ForSequenceClassification", "encoder", "bert", {**_ENC, "num_labels": 2}),
    Architecture("mpnet", "MPNetForMaskedLM", "encoder", "roberta", {**_ENC, "max_position_embeddings": TINY_POSITIONS + 2}),
    Architecture("camembert", "CamembertForQuestionAnswering", "encoder", "roberta",
                 {**_ENC, "max_position_embeddings": TINY_POSITIONS + 2}),
    # -- decoder-only language models ------------------------------------------------------------------
    Architecture("gpt2", "GPT2LMHeadModel", "causal_lm", "gpt2",
                 dict(n_embd=32, n_layer=2, n_head=4, n_inner=64, n_positions=TINY_POSITIONS)),
    Architecture("gpt-neo", "GPTNeoForCausalLM", "causal_lm", "gpt2",
                 dict(hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64,
                      attention_types=[[["global", "local"], 1]], window_size=16,
                      max_position_embeddings=TINY_POSITIONS)),
    Architecture("opt", "OPTForCausalLM", "causal_lm", "gpt2",
                 dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, ffn_dim=64,
                      word_embed_proj_dim=32, max_position_embeddings=TINY_POSITIONS)),
    Architecture("bloom", "BloomForCausalLM", "causal_lm", "gpt2", dict(hidden_size=32, n_layer=2, n_head=4)),
    Architecture("llama", "LlamaForCausalLM", "causal_lm", "llama", {**_LM, "num_key_value_heads": 2}),
    Architecture("mistral", "MistralForCausalLM", "causal_lm", "llama", {**_LM, "num_key_value_heads": 2,
                                                                         "sliding_window": None}),
    Architecture("qwen2", "Qwen2ForCausalLM", "causal_lm", "gpt2", {**_LM, "num_key_value_heads": 2}),
    Architecture("qwen3", "Qwen3ForCausalLM", "causal_lm", "gpt2", {**_LM, "num_key_value_heads": 2, "head_dim": 8}),
    Architecture("gemma", "GemmaForCausalLM", "causal_lm", "llama", {**_LM, "num_key_value_heads": 1, "head_dim": 8}),
    Architecture("phi", "PhiForCausalLM", "causal_lm", "gpt2", _LM),
    Architecture("phi3", "Phi3ForCausalLM", "causal_lm", "llama", {**_LM, "num_key_value_heads": 2}),
    Architecture("gpt-neox", "GPTNeoXForCausalLM", "causal_lm", "gpt2", _LM),
    Architecture("falcon", "FalconForCausalLM", "causal_lm", "gpt2",
                 dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, new_decoder_architecture=False,
                      multi_query=True, max_position_embeddings=TINY_POSITIONS)),
    Architecture("stablelm", "StableLmForCausalLM", "causal_lm", "gpt2", {**_LM, "num_key_value_heads": 2}),
    Architecture("olmo", "OlmoForCausalLM", "causal_lm", "gpt2", {**_LM, "num_key_value_heads": 2}),
    Architecture("starcoder2", "Starcoder2ForCausalLM", "causal_lm", "gpt2", {**_LM, "num_key_value_heads": 2,
                                                                              "sliding_window": None}),
    Architecture("gptj", "GPTJForCausalLM", "causal_lm", "gpt2",
                 dict(n_embd=32, n_layer=2, n_head=4, n_inner=64, rotary_dim=4, n_positions=TINY_POSITIONS)),
    # -- encoder-decoders ------------------------------------------------------------------------------
    Architecture("bart", "BartForConditionalGeneration", "seq2seq", "bart", _BART),
    Architecture("mbart", "MBartForConditionalGeneration", "seq2seq", "bart", _BART),
    Architecture("marian", "MarianMTModel", "seq2seq", "marian", {**_BART, "share_encoder_decoder_embeddings": True}),
    Architecture("pegasus", "PegasusForConditionalGeneration", "seq2seq", "marian", _BART),
    Architecture("m2m100", "M2M100ForConditionalGeneration", "seq2seq", "bart", _BART),
    Architecture("t5", "T5ForConditionalGeneration", "seq2seq", "t5",
                 dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                      relative_attention_num_buckets=8, relative_attention_max_distance=16)),
    Architecture("mt5", "MT5ForConditionalGeneration", "seq2seq", "t5",
                 dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                      relative_attention_num_buckets=8, relative_attention_max_distance=16)),
)

#: architectures at the edge of what the harness handles: in the table with what happens to them
#: (a refusal with its one line, an error, or verdicts), so "does not work" is measured too
FRONTIER: tuple[Architecture, ...] = (
    Architecture("xlm", "XLMWithLMHeadModel", "encoder", "bert",
                 dict(emb_dim=32, n_layers=2, n_heads=4, max_position_embeddings=TINY_POSITIONS)),
    Architecture("mamba", "MambaForCausalLM", "causal_lm", "gpt2",
                 dict(hidden_size=32, num_hidden_layers=2, state_size=8, expand=2, conv_kernel=4)),
    Architecture("gemma2", "Gemma2ForCausalLM", "causal_lm", "llama",
                 {**_LM, "num_key_value_heads": 2, "head_dim": 8, "sliding_window": 16}),
    Architecture("codegen", "CodeGenForCausalLM", "causal_lm", "gpt2",
                 dict(n_embd=32, n_layer=2, n_head=4, n_inner=64, rotary_dim=4, n_positions=TINY_POSITIONS,
                      n_ctx=TINY_POSITIONS)),
    Architecture("mpt", "MptForCausalLM", "causal_lm", "gpt2",
                 dict(d_model=32, n_layers=2, n_heads=4, expansion_ratio=2, max_seq_len=TINY_POSITIONS)),
    Architecture("xglm", "XGLMForCausalLM", "causal_lm", "bart",
                 dict(d_model=32, num_layers=2, attention_heads=4, ffn_dim=64,
                      max_position_embeddings=TINY_POSITIONS)),
    Architecture("led", "LEDForConditionalGeneration", "seq2seq", "bart",
                 {**{k: v for k, v in _BART.items() if k != "max_position_embeddings"},
                  "max_encoder_position_embeddings": TINY_POSITIONS, "max_decoder_position_embeddings": TINY_POSITIONS,
                  "attention_window": [8, 8]}),
    Architecture("longformer", "LongformerForMaskedLM", "encoder", "roberta",
                 {**_ENC, "max_position_embeddings": TINY_POSITIONS + 2, "attention_window": 8}),
    Architecture("funnel", "FunnelForMaskedLM", "encoder", "bert",
                 dict(d_model=32, n_head=4, d_head=8, d_inner=64, block_sizes=[1, 1], num_decoder_layers=1,
                      max_position_embeddings=TINY_POSITIONS)),
)

#: what CI runs (tests/test_architectures.py): one of each kind the issue names, tiny and fast
CI_SUBSET = ("gpt2", "bart", "distilbert", "bert-token", "roberta")


def architecture(name: str) -> Architecture:
    for arch in ARCHITECTURES + FRONTIER:
        if arch.name == name:
            return arch
    raise KeyError(f"unknown architecture {name!r}; known: {', '.join(a.name for a in ARCHITECTURES)}")


def _special_ids(tok: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for attr in ("pad_token_id", "bos_token_id", "eos_token_id", "sep_token_id", "cls_token_id"):
        value = getattr(tok, attr, None)
        if value is not None:
            out[attr] = int(value)
    return out


def build(arch: Architecture, directory: Path) -> Path:
    """Write ``arch`` as an HF directory (config, safetensors, tokenizer) into ``directory``."""
    import torch
    import transformers

    tok = train_tokenizer(corpus_texts(), arch.style, vocab_size=600)
    model_cls = getattr(transformers, arch.model_class)
    config_cls = model_cls.config_class
    specials = _special_ids(tok)
    kwargs: dict[str, Any] = {"vocab_size": len(tok), **specials, "attn_implementation": "eager", **arch.config}
    if arch.kind == "seq2seq":
        # BART-like models start decoding from </s>, Marian / T5 from <pad>
        start = specials.get("eos_token_id") if arch.style == "bart" else specials.get("pad_token_id", 0)
        kwargs.setdefault("decoder_start_token_id", start)
        kwargs.setdefault("forced_eos_token_id", specials.get("eos_token_id"))
    if arch.style == "gpt2":  # pad = eos models: no pad token of their own
        kwargs["pad_token_id"] = specials["eos_token_id"]
    config = config_cls(**kwargs)
    torch.manual_seed(SEED)
    model = model_cls(config).eval()
    if arch.kind != "encoder":
        model.generation_config.pad_token_id = kwargs.get("pad_token_id")
        model.generation_config.num_beams = 1
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(directory), safe_serialization=True)
    save_tokenizer(tok, directory)
    (directory / "harness-architecture.json").write_text(json.dumps({"name": arch.name, "class": arch.model_class}))
    return directory


def build_cached(arch: Architecture, root: Path) -> Path:
    """``arch`` built once under ``root`` (keyed by its recipe and the library versions)."""
    import tokenizers
    import torch
    import transformers


    recipe = json.dumps({"arch": arch.name, "class": arch.model_class, "style": arch.style, "config": arch.config,
                         "seed": SEED, "tokenizer": TOKENIZER_RECIPE,
                         "v": [torch.__version__, transformers.__version__, tokenizers.__version__]},
                        sort_keys=True, default=str)
    target = root / f"{arch.name}-{hashlib.sha256(recipe.encode()).hexdigest()[:10]}"
    if (target / "config.json").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    with lock_for(target):
        if (target / "config.json").is_file():
            return target
        tmp = temp_dir_for(target)
        build(arch, tmp)
        replace_dir(tmp, target)
    return target
