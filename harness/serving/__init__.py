"""Judging a model as it is served: an Open Inference Protocol (KServe v2) endpoint as an
artifact source (``endpoint``, ``client``, ``source``), parity under concurrency, the
perf_analyzer-style load sweep (``sweep``), and the Triton model repository (``triton``).
docs/serving.md."""
