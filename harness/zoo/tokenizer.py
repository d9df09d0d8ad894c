"""A real, deterministic tokenizer for the built-in random-weight models.

Random weights are fine for parity, but the inputs must look like what deployed models
see: subword ids of real sentences, of mixed lengths, padded. A byte-level BPE trained on
the project's corpus gives exactly that, offline and identical on every machine
(the trainer is deterministic for a fixed corpus and settings).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal, Sequence

if TYPE_CHECKING:  # pragma: no cover  (imported where a tokenizer is built: the zoo registers without transformers)
    from transformers import PreTrainedTokenizerFast

Style = Literal["bert", "marian", "llama", "gpt2", "roberta", "bart", "t5"]

_SPECIALS: dict[str, dict[str, str]] = {
    # BERT: [CLS] text [SEP]
    "bert": {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]"},
    # Marian: text </s>; decoder starts from <pad>
    "marian": {"pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>"},
    # Llama: <s> text; </s> ends generation
    "llama": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"},
    # GPT-2: no specials around the text, and no pad token of its own (pad = eos models)
    "gpt2": {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"},
    # RoBERTa / BART: <s> text </s>, with a mask token
    "roberta": {"bos_token": "<s>", "pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>",
                "mask_token": "<mask>"},
    "bart": {"bos_token": "<s>", "pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>",
             "mask_token": "<mask>"},
    # T5: text </s>; the decoder starts from <pad>
    "t5": {"pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>"},
}


def train_tokenizer(texts: Sequence[str], style: Style, vocab_size: int = 1000) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on ``texts`` and wrap it with the conventions of ``style``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = _SPECIALS[style]
    ordered = list(dict.fromkeys(specials.values()))  # pad first -> id 0 for bert/marian
    tok = Tokenizer(models.BPE(unk_token=specials.get("unk_token")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=ordered,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    ids = {t: tok.token_to_id(t) for t in ordered}
    if style == "bert":
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B [SEP]",
            special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])],
        )
    elif style in ("marian", "t5"):
        tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", ids["</s>"])])
    elif style in ("roberta", "bart"):
        # the pair as RoBERTa's own tokenizer writes it: a QA model's context starts after the separator
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
            special_tokens=[("<s>", ids["<s>"]), ("</s>", ids["</s>"])])
    elif style == "llama":
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", ids["<s>"])])
    # style "gpt2": no template (GPT-2's tokenizer adds nothing)
    padding_side = "left" if style == "llama" else "right"
    return PreTrainedTokenizerFast(tokenizer_object=tok, padding_side=padding_side, **specials)


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, directory: Path) -> None:
    tokenizer.save_pretrained(str(directory))
