"""numbers-en-zh: a small trained MarianMT, English number words -> Chinese numerals.

The zoo's one generation model whose output quality is real and exactly checkable: its
held-out corpus (``numbers_en_zh``, excluded from training) has a known right answer for
every sentence, so a deployment regression shows up as wrong numerals and lost BLEU
against the references, not only as drift from PyTorch. Trained by
scripts/train_numbers_translator.py; the weights and tokenizer are committed.
"""

from __future__ import annotations

from pathlib import Path

from harness.zoo.base import ModelSpec, register

MODEL_DIR = Path(__file__).resolve().parent / "models" / "numbers-en-zh"

NUMBERS_EN_ZH = register(
    ModelSpec(
        name="numbers-en-zh",
        family="seq2seq",
        description="MarianMT d_model 128, 2+2 layers, trained on English number words -> Chinese numerals",
        path=MODEL_DIR,
        corpus="numbers_en_zh",
        target_lang="zh",
        generates=True,
        # Every held-out pair is decoded (the longest target is 28 tokens with EOS).
        extra={"generation": {"samples": None, "max_new_tokens": 40, "batch_size": 32}},
        # A trained model decodes stably, so its generation gates are tight (docs/generation.md):
        # measured, every precision reproduced PyTorch's tokens on all 332 pairs (BLEU 100),
        # while a decoder without its cross-attention mask lost ~15 BLEU against the references.
        tolerances={
            "fp32": {"gen_bleu_vs_ref": 99.0},
            "fp16": {"gen_bleu_vs_torch": 99.0, "gen_bleu_ref_drop": 0.5},
            "int8": {"gen_bleu_vs_torch": 95.0, "gen_bleu_ref_drop": 1.0},
        },
    )
)
