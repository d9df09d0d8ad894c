"""``harness doctor`` groups its variants: one row per model, each skip reason said once."""

from __future__ import annotations

import io

from rich.console import Console

from harness.cli.doctor import variants_table
from harness.core.types import Precision, Variant
from harness.runners import parse_provider


def test_one_row_per_model_and_each_skip_reason_once() -> None:
    variants = [Variant(model, precision, parse_provider(provider)) for model in ("bert-tiny", "marian-tiny")
                for precision in (Precision.INT8, Precision.FP32, Precision.FP16)
                for provider in ("ort_cpu", "ort_cuda")]

    def reason(v: Variant) -> str | None:
        return "CUDAExecutionProvider not available" if v.provider.short == "ort_cuda" else None

    out = io.StringIO()
    Console(file=out, width=200).print(variants_table(variants, reason))
    text = out.getvalue()
    rows = [line for line in text.splitlines() if line.startswith("│ ")]
    assert len(rows) == 2, text
    assert "fp32-ort_cpu, fp16-ort_cpu, int8-ort_cpu" in rows[0] and "ort_cuda" in rows[0]  # FP32 -> FP16 -> INT8
    assert text.count("CUDAExecutionProvider not available") == 1
    assert "6 variant(s) run here." in text


def test_doctor_says_when_every_process_would_compile_the_heavy_libraries_again(tmp_path, monkeypatch) -> None:
    """A venv installed without bytecode (uv's default) where PYTHONDONTWRITEBYTECODE is set compiles
    torch and transformers from source in every process (docs/pitfalls.md #22): doctor names the
    packages and the fix; once compiled, it says so. Nothing is imported to find out."""
    import py_compile
    import sys

    from harness.results import bytecode

    package = tmp_path / "heavy_pkg_for_doctor"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('importing it is not how doctor checks')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    names = ("heavy_pkg_for_doctor", "a_package_that_is_not_installed")
    assert bytecode.uncompiled(names) == ["heavy_pkg_for_doctor"]  # an absent package is not a finding

    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    line = bytecode.bytecode_line(names)
    assert "heavy_pkg_for_doctor not compiled, and this interpreter writes none" in line
    assert "--compile-bytecode" in line and "-m compileall -q" in line
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert "the first process that imports them writes it" in bytecode.bytecode_line(names)

    py_compile.compile(str(package / "__init__.py"), doraise=True)  # what pip (or compileall) leaves
    assert bytecode.uncompiled(names) == []
    assert bytecode.bytecode_line(names[:1]) == "bytecode: compiled (heavy_pkg_for_doctor)"
