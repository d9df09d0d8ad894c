"""Repro bundles: a failing case packed so that it can be judged again anywhere.

A bundle is a directory (``<run>/cases/<case>/repro-<graph>/``) holding everything the
verdict of one graph depended on -- the ONNX file (or its path and sha256 when it is large),
the exact corpus feeds, the PyTorch reference outputs and valid-position masks, the variant's
outputs as they were, the thresholds each output was judged with, the runtime settings, the
library versions and the environment fingerprint -- so ``harness repro BUNDLE`` re-judges it
with neither the zoo, the model, the tokenizer nor the cache. Generation failures, perf
budget breaches (``perf.py``; fresh-process and decode-loop budgets: ``perf_process.py``) and
erroring cases (``error.py``; a generation case's: ``error_decode.py``) have bundles of their
own kind in the same format. See docs/repro.md.
"""

from harness.repro.bundle import (
    FORMAT,
    Bundle,
    BundleError,
    EmbeddingDerived,
    ReproResult,
    load_bundle,
    rejudge,
    write_bundle,
)

__all__ = ["FORMAT", "Bundle", "BundleError", "EmbeddingDerived", "ReproResult", "load_bundle", "rejudge", "write_bundle"]
