"""Tiny random-weight HuggingFace models: MarianMT, BERT classifier, Llama.

Each is built from a config with a fixed seed and saved in HF format with a tokenizer
trained on the project's corpus. Sizes are small enough for CI on two cores yet keep
the structure that breaks in real exports (cross-attention masks, KV cache, padding).
Attention is "eager": the dynamo exporter cannot trace SDPA with symbolic causal flags
(PITFALLS #2), and eager is the common denominator for every exporter.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.data.corpus import load_corpus
from harness.zoo.base import ModelSpec, register
from harness.zoo.tokenizer import save_tokenizer, train_tokenizer

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedModel

SEED = 1234


def corpus_texts() -> list[str]:
    return list(load_corpus("sentences_en").sources)


def _save(model: PreTrainedModel, tokenizer: Any, directory: Path) -> None:
    model.eval()
    model.save_pretrained(str(directory), safe_serialization=True)
    save_tokenizer(tokenizer, directory)


def build_marian_tiny(directory: Path) -> None:
    import torch
    from transformers import MarianConfig, MarianMTModel

    tok = train_tokenizer(corpus_texts(), "marian", vocab_size=1000)
    pad = tok.pad_token_id
    cfg = MarianConfig(  # type: ignore[call-arg]  # transformers' dataclass_transform signature omits the kwargs PreTrainedConfig.__post_init__ takes
        vocab_size=len(tok),
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_position_embeddings=256,
        pad_token_id=pad,
        eos_token_id=tok.eos_token_id,
        decoder_start_token_id=pad,
        forced_eos_token_id=tok.eos_token_id,
        attn_implementation="eager",
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
    )
    torch.manual_seed(SEED)
    model = MarianMTModel(cfg)
    model.generation_config.max_length = 64
    model.generation_config.num_beams = 1
    _save(model, tok, directory)


def build_bert_tiny(directory: Path) -> None:
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    tok = train_tokenizer(corpus_texts(), "bert", vocab_size=1000)
    cfg = BertConfig(  # type: ignore[call-arg]  # transformers' dataclass_transform signature omits the kwargs PreTrainedConfig.__post_init__ takes
        vocab_size=len(tok),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=256,
        num_labels=5,
        pad_token_id=tok.pad_token_id,
        attn_implementation="eager",
    )
    torch.manual_seed(SEED)
    model = BertForSequenceClassification(cfg)
    _save(model, tok, directory)


def build_llama_tiny(directory: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = train_tokenizer(corpus_texts(), "llama", vocab_size=1000)
    cfg = LlamaConfig(  # type: ignore[call-arg]  # transformers' dataclass_transform signature omits the kwargs PreTrainedConfig.__post_init__ takes
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        attn_implementation="eager",
        tie_word_embeddings=False,
    )
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(cfg)
    model.generation_config.max_length = 64
    model.generation_config.pad_token_id = tok.pad_token_id
    _save(model, tok, directory)


MARIAN_TINY = register(
    ModelSpec(
        name="marian-tiny",
        family="seq2seq",
        description="MarianMT (en->zh layout), d_model 64, 2+2 layers, random weights, BPE on sentences_en",
        build=build_marian_tiny,
        generates=True,
        target_lang="zh",
    )
)
BERT_TINY = register(
    ModelSpec(
        name="bert-tiny",
        family="encoder",
        description="BertForSequenceClassification, hidden 64, 2 layers, 5 labels, random weights",
        build=build_bert_tiny,
    )
)
LLAMA_TINY = register(
    ModelSpec(
        name="llama-tiny",
        family="causal_lm",
        description="LlamaForCausalLM, hidden 64, 2 layers, GQA 4/2 heads, random weights",
        build=build_llama_tiny,
        generates=True,
        target_lang="en",
    )
)
