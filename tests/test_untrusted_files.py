"""An outside ONNX file never makes the harness read outside its folder or load native code:
external-data locations that climb out (``..``), are absolute, are links leaving the folder,
FIFOs, devices or shorter than they claim are refused before any runtime opens the file; a graph
that needs a custom-op library is refused unless ``--custom-op-library`` names one. Each refusal
is one line naming the file, the tensor or node and what is wrong, exit 2 (docs/reliability.md,
"Untrusted inputs")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from untrusted_fixtures import bert_with_external_data, relocated, with_custom_op

from harness.cli import main
from harness.zoo.base import materialize, resolve


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bert_with_external_data(tmp_path_factory.mktemp("bert") / "good")


def _check(onnx_file: Path, out: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main(["check", "--reference", str(materialize(resolve("bert-tiny"))), "--onnx", str(onnx_file),
                 "--samples", "4", "--no-generation", "--out", str(out), *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_intact_file_with_external_data_is_judged(bert: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The negative control: the same export with its data beside it is read and passes."""
    code, out, err = _check(bert, tmp_path / "out", capsys)
    assert code == 0, out + err


def _plant(kind: str, bert: Path, tmp: Path) -> Path:
    secret = tmp / "secret.bin"
    secret.write_bytes(bert.with_name("model.onnx.data").read_bytes())
    folder = tmp / kind
    if kind == "dotdot":
        return relocated(bert, folder, "../secret.bin")
    if kind == "absolute":
        return relocated(bert, folder, str(secret))
    if kind == "device":
        return relocated(bert, folder, "/dev/zero")
    if kind == "symlink-out":
        path = relocated(bert, folder, "weights.bin")
        (folder / "weights.bin").symlink_to(secret)
        return path
    if kind == "symlink-to-device":
        path = relocated(bert, folder, "weights.bin")
        (folder / "weights.bin").symlink_to("/dev/zero")
        return path
    if kind == "fifo":
        path = relocated(bert, folder, "weights.bin")
        os.mkfifo(folder / "weights.bin")  # a read would block forever
        return path
    if kind == "truncated":
        path = relocated(bert, folder, "model.onnx.data")
        data = folder / "model.onnx.data"
        data.write_bytes(data.read_bytes()[:1000])
        return path
    raise AssertionError(kind)


PLANTED = {
    "dotdot": "external data location '../secret.bin' climbs out of the artifact's folder ('..'); not read",
    "absolute": "is an absolute path; external data must lie beside the graph",
    "device": "external data location '/dev/zero' is an absolute path",
    "symlink-out": "external data location 'weights.bin' is a link to ",
    "symlink-to-device": "is a link to /dev/zero, outside the artifact's folder",
    "fifo": "external data location 'weights.bin' is a FIFO, not a regular file; not read",
    "truncated": "of a 1000-byte file; not read",
}


@pytest.mark.parametrize("kind", sorted(PLANTED))
def test_planted_external_data_is_refused_before_any_runtime_reads_it(kind: str, bert: Path, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = _plant(kind, bert, tmp_path)
    code, out, err = _check(path, tmp_path / "out", capsys)
    assert code == 2, out + err
    assert err.startswith(f"harness: error: {path}: tensor ") and err.count("\n") == 1, err
    assert PLANTED[kind] in err, err
    assert "Traceback" not in out + err


def test_a_custom_op_domain_is_refused_and_a_library_loads_only_when_named(bert: Path, tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = with_custom_op(bert, tmp_path / "custom")
    code, out, err = _check(path, tmp_path / "out", capsys)
    assert code == 2 and err.count("\n") == 1, out + err
    assert (f"{path}: node vendor_op (StringRegexReplace) is in the custom-op domain 'ai.onnx.contrib', whose "
            "kernels come from a shared library; none is loaded unless named by --custom-op-library LIB") in err
    # named: the library is what ONNX Runtime is asked to load (this one is no library: refused by name)
    fake = tmp_path / "libvendor_ops.so"
    fake.write_bytes(b"not a shared object")
    code, out, err = _check(path, tmp_path / "out2", capsys, "--custom-op-library", str(fake))
    assert code == 2 and err.count("\n") == 1 and "libvendor_ops.so" in err, out + err
    code, out, err = _check(path, tmp_path / "out3", capsys, "--custom-op-library", str(tmp_path / "absent.so"))
    assert code == 2 and "--custom-op-library: " in err and "no such file" in err, out + err
