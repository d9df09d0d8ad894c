"""A repro bundle is verified before anything in it is used: every number finite and every
threshold inside its metric's range, every file of the bundle listed with its sha256 and inside
the bundle. A refusal is one line naming the field, exit 2 (docs/reliability.md, "Untrusted
inputs")."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import pytest
from untrusted_fixtures import manifest_of, numeric_bundle, write

from harness.cli import main


def _repro(bundle: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["repro", str(bundle)])
    out, err = capsys.readouterr()
    return code, out, err


def _set_threshold(value: float) -> Callable[[dict[str, Any]], None]:
    def edit(m: dict[str, Any]) -> None:
        m["outputs"][0]["tolerance"][0]["threshold"] = value
    return edit


def test_an_intact_bundle_reproduces_and_a_measured_nan_is_kept(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The negative control: the hand-made bundle passes verification and reproduces; a NaN the
    run *measured* (a variant that output NaN) is the failure itself, not tampering."""
    bundle = numeric_bundle(tmp_path / "b")
    code, out, err = _repro(bundle, capsys)
    assert (code, err) == (1, "") and "REPRODUCES" in out
    m = manifest_of(bundle)
    m["outputs"][0]["metrics"]["norm_max_abs"] = float("nan")
    m["verdict"]["failures"][0]["value"] = float("nan")
    write(bundle, m)
    assert _repro(bundle, capsys)[0] == 1


#: edit of the manifest -> the words of the one-line refusal (the field it names)
TAMPERED: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "nan-threshold": (_set_threshold(float("nan")), "outputs[0].tolerance[0].threshold: expected a finite number, "
                                                    "got nan"),
    "inf-threshold": (_set_threshold(float("inf")), "outputs[0].tolerance[0].threshold: expected a finite number"),
    "negative-bound": (_set_threshold(-1.0), "outputs[0].tolerance[0].threshold: an error bound must be >= 0"),
    "recorded-threshold": (lambda m: m["verdict"]["failures"][0].update(threshold=float("nan")),
                           "verdict.failures[0].threshold: expected a finite number"),
    "unknown-metric": (lambda m: m["outputs"][0]["tolerance"][0].update(metric="no_such_metric"),
                       "outputs[0].tolerance[0].threshold: unknown metric 'no_such_metric'"),
    "threads": (lambda m: m.update(threads=0), "threads: expected a whole number >= 1, got 0"),
    "batches": (lambda m: m.update(batches=-1), "batches: expected a whole number >= 0, got -1"),
    "file-outside": (lambda m: m["files"].update({"../outside.txt": "0" * 64}),
                     "files['../outside.txt']: '../outside.txt' must be a relative path inside the bundle"),
    "absolute-file": (lambda m: m["files"].update({"/etc/hostname": "0" * 64}), "must be a relative path inside"),
    "artifact-elsewhere": (lambda m: m["artifact"].update(file="../../elsewhere.onnx"),
                           "artifact.file: '../../elsewhere.onnx' must be a relative path inside the bundle"),
    "artifact-unlisted": (lambda m: m["files"].pop("artifact/model.onnx"),
                          "artifact/model.onnx is not listed in bundle.json files"),
    "tokenizer-outside": (lambda m: m.update(tokenizer={"dir": "/usr/share"}), "tokenizer.dir: '/usr/share' must be"),
}


@pytest.mark.parametrize("damage", sorted(TAMPERED))
def test_a_tampered_manifest_is_one_line_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          damage: str) -> None:
    bundle = numeric_bundle(tmp_path / "b")
    edit, words = TAMPERED[damage]
    m = manifest_of(bundle)
    edit(m)
    write(bundle, m)
    code, out, err = _repro(bundle, capsys)
    assert (code, out) == (2, ""), err
    assert err.startswith("harness: error: ") and err.count("\n") == 1 and words in err, err


def test_a_file_added_to_a_bundle_or_a_symlink_in_it_is_refused(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Only what the writer listed may be in a bundle: an added file, or a listed file replaced by
    a link (to the same bytes, so the checksum still matches), is refused."""
    bundle = numeric_bundle(tmp_path / "b")
    (bundle / "artifact" / "model.onnx.data").write_bytes(b"\0" * 16)  # ONNX Runtime would read it beside the file
    code, _, err = _repro(bundle, capsys)
    assert code == 2 and "artifact/model.onnx.data is not listed in bundle.json files" in err, err
    (bundle / "artifact" / "model.onnx.data").unlink()
    outside = tmp_path / "model.onnx"
    os.replace(bundle / "artifact" / "model.onnx", outside)
    (bundle / "artifact" / "model.onnx").symlink_to(outside)
    code, _, err = _repro(bundle, capsys)
    assert code == 2 and "is a symbolic link" in err and err.count("\n") == 1, err
