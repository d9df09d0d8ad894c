"""The public API for a team's own tests: stable names to import beside the fixtures.

A test in your repository takes the plugin's fixtures (installed with the package, no
``conftest.py`` needed):

* ``variant`` (:class:`Variant`): the case's model x precision x provider; every test that takes
  it is parametrized over the run's matrix (``--harness-models``/``--harness-precisions``/
  ``--harness-providers`` or ``harness.toml``), ids like ``my-model-int8-ort_cpu``;
* ``harness`` (:class:`Case`): the case. ``harness.model`` is the loaded PyTorch FP32 reference
  (``LoadedModel``: ``.model``, ``.tokenizer``, ``.config``); ``harness.workspace`` builds and
  runs variants (``backend(variant, model).load(GraphRef(model, family, graph, variant))``,
  ``parity_batches``, ``texts``);
  ``harness.numeric_parity()`` is the built-in numeric judge; whatever the test puts in
  ``harness.metrics`` / ``thresholds`` / ``data`` / ``perf`` lands in the case's record;
* ``generation_request`` (:class:`GenerationRequest`, the ``--harness-gen-*`` options) and
  ``perf_settings`` (:class:`PerfSettings`, the ``--harness-perf-*`` options).

Failing a gate is :func:`fail` (verdict ``fail``); any other exception is verdict ``error``.
``@pytest.mark.harness(families=[...], generates=True, where=..., accepts=...)`` narrows a test's
matrix. See docs/own-repository.md and examples/test_own_model.py.
"""

from __future__ import annotations

from harness.case.collector import Case
from harness.case.pipeline import generation_case as judge
from harness.core import Precision, Provider, Variant
from harness.judge.generation import GenerationRequest
from harness.perf.measure import PerfSettings
from harness.results import Record, fail
from harness.results.checks import GateFailure
from harness.runners.base import GraphRef
from harness.suites import suites_dir
from harness.zoo.base import ModelSpec
from harness.zoo.loading import LoadedModel

__all__ = ["Case", "GateFailure", "GenerationRequest", "GraphRef", "LoadedModel", "ModelSpec", "PerfSettings",
           "Precision", "Provider", "Record", "Variant", "fail", "judge", "suites_dir"]
