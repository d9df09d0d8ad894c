"""numbers-llama: a small trained decoder-only Llama, English number words -> Chinese numerals.

The zoo's decoder-only model whose output quality is real: a prompt ``<s> six hundred and five
<zh>`` is continued with ``六百零五</s>``, so on its held-out corpus (``numbers_en_zh``, excluded
from training) every answer is known, and an INT8 or INT4 export is judged on the numerals it
gets right against the references, not only on drift from PyTorch. A random-weight LM
(``llama-tiny``) has near-flat logits, so its greedy paths flip under any quantization noise and
its INT8/INT4 gates mean little; this model's are measured. It has grouped-query attention
(4 query heads, 2 key/value heads), so GQA exporters and cache layouts are exercised too.
Trained by scripts/train_numbers_decoder.py; the weights and tokenizer are committed.
"""

from __future__ import annotations

from pathlib import Path

from harness.zoo.base import ModelSpec, register

MODEL_DIR = Path(__file__).resolve().parent / "models" / "numbers-llama"

NUMBERS_LLAMA = register(
    ModelSpec(
        name="numbers-llama",
        family="causal_lm",
        description="LlamaForCausalLM hidden 64, 3 layers, GQA 4/2 heads, trained on English number words -> "
                    "Chinese numerals",
        path=MODEL_DIR,
        corpus="numbers_en_zh",
        target_lang="zh",
        generates=True,
        # not in the default matrix: the zoo's default run keeps its cost; name it (--models numbers-llama)
        default=False,
        # Every held-out prompt is decoded (the longest answer is 27 numerals + </s>).
        extra={"generation": {"samples": None, "max_new_tokens": 32, "batch_size": 32}},
        # Measured (harness run --precisions fp32 int8 int4 --providers ort_cpu): every precision decoded
        # all 332 held-out prompts exactly as PyTorch did (BLEU 100 against PyTorch and the references), so
        # the generation gates are tight, as for numbers-en-zh; INT4's numeric gates are the INT4 defaults.
        tolerances={
            "fp32": {"gen_bleu_vs_ref": 99.0},
            "int8": {"gen_bleu_vs_torch": 95.0, "gen_bleu_ref_drop": 1.0},
            "int4": {"gen_bleu_vs_torch": 95.0, "gen_bleu_ref_drop": 1.0},
        },
    )
)
