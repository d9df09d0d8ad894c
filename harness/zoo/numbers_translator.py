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
    )
)
