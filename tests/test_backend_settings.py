"""Each backend owns its typed settings (issue 22): ONNX Runtime's session options and the TensorRT
settings are sections declared in the backends' own modules; ``harness.core`` names no backend, and
the runtime keys (options, ``[models.<name>.runtime]`` keys, honoured fields) are derived from the
declarations. Pure Python: no model, no session."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from harness.core import runtime as core_runtime
from harness.core.runtime import SECTIONS, SHARED_OPTIONS, BackendSettings, RuntimeSettings, runtime_from_dict, setting
from harness.runners import backends
from harness.runners.ort_runner import OrtBackend, OrtSessionSettings
from harness.runners.trt_profile import ShapeRange, TensorRTSettings
from harness.settings.options import BY_NAME
from harness.settings.runtime import build_runtime, runtime_keys

CORE = Path(__file__).resolve().parents[1] / "harness" / "core"
#: words that name a backend or one of its settings (at the start of a word: not ``import_module``)
BACKEND_WORDS = re.compile(r"(?<![a-z])(onnxruntime|ort_|ort\b|tensorrt|trt|openvino|cuda|graph_optimization|"
                           r"execution_mode|mem_pattern|cpu_arena)", re.IGNORECASE)


def _code_words(path: Path) -> list[str]:
    """Identifiers and key-like string constants of a module's code (docstrings and messages -- text
    with spaces -- left out: prose may give an example)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.append(node.id)
        elif isinstance(node, ast.Attribute):
            out.append(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.append(node.name)
        elif isinstance(node, ast.arg):
            out.append(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings \
                and not re.search(r"\s", node.value):
            out.append(node.value)
    return out


def test_core_code_names_no_backend():
    """``harness/core`` holds the generic record and machinery only. ``values.py`` is the option
    table's generated mirror (one typed field per row, settings/options.py), so it is left out."""
    found = {f"{p.name}: {w!r}" for p in sorted(CORE.glob("*.py")) if p.name != "values.py"
             for w in _code_words(p) if BACKEND_WORDS.search(w)}
    assert not found, sorted(found)


def test_the_walker_sees_a_backend_word():
    """A negative control: the ORT module's code names its own settings."""
    words = _code_words(Path(core_runtime.__file__).parents[1] / "runners" / "ort_runner.py")
    assert "graph_optimization" in words and "OrtSessionSettings" in words


def test_runtime_keys_are_derived_from_the_sections_the_backends_declare():
    backends()
    declared = {cls.section for cls in SECTIONS.values()}
    assert {"onnxruntime", "tensorrt"} <= declared
    keys = runtime_keys()
    expected = dict(SHARED_OPTIONS)
    for cls in SECTIONS.values():
        expected.update(cls.options())
    assert keys == expected
    # every key is a row of the option table, so CLI, pytest, config and rerun know it
    assert set(keys) <= set(BY_NAME), set(keys) - set(BY_NAME)
    assert {"graph_optimization", "execution_mode", "mem_pattern", "cpu_arena", "trt_profile", "trt_engine_cache",
            "trt_timing_cache", "trt_max_batch", "trt_max_seq", "threads", "inter_threads", "provider_options",
            "profile", "custom_op_library", "session_config"} == set(keys)
    # what a backend honours is written from the sections it reads
    assert OrtSessionSettings.names() | TensorRTSettings.names() <= OrtBackend.runtime_settings


def test_options_reach_their_section_typed_and_records_keep_the_flat_shape():
    runtime, axes = build_runtime({"graph_optimization": ["disabled", "all"], "mem_pattern": "off", "threads": 2,
                                   "trt_profile": ["input_ids:1x4,2x8,4x16"], "trt_max_seq": 64})
    assert axes == {"graph_optimization": ["disabled", "all"]}
    session, trt = runtime.of(OrtSessionSettings), runtime.of(TensorRTSettings)
    assert session.graph_optimization == "disabled" and session.mem_pattern is False
    assert trt.trt_profile == {"input_ids": ShapeRange((1, 4), (2, 8), (4, 16))} and trt.trt_max_seq == 64
    record = runtime.as_dict()
    # the record written before sections existed: the same keys, flat; build limits stay out of it
    assert set(record) == {"graph_optimization", "intra_op_threads", "inter_op_threads", "execution_mode",
                           "mem_pattern", "cpu_arena", "provider_options", "trt_profile", "trt_engine_cache",
                           "trt_timing_cache", "profile", "custom_op_library", "session_config"}
    assert record["trt_profile"] == {"input_ids": "1x4,2x8,4x16"} and record["mem_pattern"] is False
    again = runtime_from_dict(record)
    assert again.as_dict() == record
    assert again.describe() == "opt=disabled threads=2 mem_pattern=off trt:input_ids=1x4,2x8,4x16"


def test_an_older_record_loads():
    old = {"graph_optimization": "basic", "intra_op_threads": 1, "inter_op_threads": None, "execution_mode":
           "parallel", "mem_pattern": True, "cpu_arena": False, "provider_options": {"ort_cpu": {"use_arena": "0"}},
           "trt_profile": {}, "trt_engine_cache": None, "trt_timing_cache": None, "profile": False}
    loaded = runtime_from_dict(old)
    # settings added since (the custom-op library, session configuration entries) load at their defaults
    assert loaded.as_dict() == {**old, "custom_op_library": "", "session_config": {}}
    assert loaded.describe() == "opt=basic threads=1 exec=parallel arena=off ort_cpu:use_arena=0"


def test_unhonoured_fields_stay_at_their_defaults():
    runtime = RuntimeSettings(intra_op_threads=3).merged({"graph_optimization": "disabled", "trt_max_seq": 64})
    torch_like = runtime.only(frozenset({"intra_op_threads"}))
    assert torch_like.intra_op_threads == 3 and torch_like.of(OrtSessionSettings) == OrtSessionSettings()
    native_like = runtime.only(frozenset({"trt_max_batch", "trt_max_seq"}))
    assert native_like.of(TensorRTSettings).trt_max_seq == 64 and native_like.intra_op_threads is None


def test_a_field_two_sections_declare_is_an_error():
    with pytest.raises(RuntimeError, match="'graph_optimization' declared by sections 'onnxruntime' and 'copy'"):
        @BackendSettings.declare
        @dataclass(frozen=True)
        class Copy(BackendSettings):
            section: ClassVar[str] = "copy"
            graph_optimization: str = setting("all")
    assert "copy" not in SECTIONS
