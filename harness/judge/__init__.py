"""Judging a variant against the PyTorch FP32 reference.

- ``workspace``: per-process run state (models, corpora, backends, memoised references, the
  artifact source: exported by the harness, or pre-built files for ``harness check``);
- ``numeric``: numeric parity of every graph over corpus batches;
- ``generation``: decoding with the variant's runners, text metrics, generation gates;
- ``embedding``: sentence-embedding parity for pooled encoders;
- ``tolerances``: the checks for one output at one precision (defaults from the metric registry).
"""
