"""The reader's own exports that docs/check.md and docs/runtime.md judge, built for the docs test.

Those paragraphs start from files another tool made (``harness check`` gates *the file you are
about to ship*): a Marian in optimum's layout, a MiniLM export and a query file, a Marian decoder
exported with the tied dynamic axes of a widely copied recipe. What stands for them here is real:
the same raw ``torch.onnx.export`` calls tests/test_check.py and tests/test_minilm.py check
(never ``harness.export``, which would make the harness judge its own exporter), on the zoo
models the documents name or that stand for theirs (marian-tiny for ``./opus-mt-en-de``, the
packaged all-MiniLM-L6-v2 for the reader's MiniLM), quantized with ONNX Runtime's own
``quantize_dynamic`` where the command judges INT8.

Each file is built once per test process, and only when a document's commands name its path
(``docs_run.mentioned``): the test for docs/check.md pays for two Marian exports and a MiniLM
one, every other document for nothing.
(Files a document *prints* for the reader to save are laid from the document itself:
tests/docs_given.py.)
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import docs_run


def _opus_mt(target: Path) -> None:
    """``./opus-mt-en-de``: the reader's HF Marian directory; marian-tiny's (same family and files)."""
    from harness.zoo.base import materialize, resolve

    shutil.copytree(materialize(resolve("marian-tiny")), target)


def _optimum_out(target: Path) -> None:
    """``./optimum-out/``: ``./opus-mt-en-de`` exported in optimum's layout and names (encoder,
    decoder, decoder with past), then dynamically quantized file by file as optimum's quantizer
    does it (``--precisions int8`` in the command): MatMul weights to INT8 per channel, 7-bit
    (``reduce_range``: full 8-bit weights saturate ONNX Runtime's AVX2 kernels on a CPU without
    VNNI, docs/pitfalls.md 16)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from test_check import _marian_dir

    fp32 = _marian_dir(target.with_name(target.name + "-fp32"), optimum_names=True)
    target.mkdir(parents=True)
    for source in sorted(fp32.glob("*.onnx")):
        quantize_dynamic(str(source), str(target / source.name), weight_type=QuantType.QInt8, per_channel=True,
                         reduce_range=True, op_types_to_quantize=["MatMul"])


def _tied(target: Path) -> None:
    """``./tied/``: marian-tiny in optimum's layout whose decoder gives target and source length
    one dynamic axis name (the recipe runtime.md's paragraph describes)."""
    from test_check import _marian_dir

    _marian_dir(target, tied_axes=True)


def _minilm(target: Path) -> None:
    """``./minilm.onnx``: all-MiniLM-L6-v2 exported by hand with optimum's feature-extraction I/O."""
    import torch
    from test_minilm import _Exported

    from harness.zoo.base import resolve
    from harness.zoo.loading import load_model

    model = load_model(resolve("minilm-l6")).model
    ids = torch.tensor([[101, 2023, 2003, 102], [101, 2460, 102, 0]])
    mask = (ids != 0).long()
    names = ["input_ids", "attention_mask", "token_type_ids"]
    with torch.no_grad():
        torch.onnx.export(_Exported(model).eval(), (ids, mask, torch.zeros_like(ids)), str(target),
                          input_names=names, output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                          dynamic_axes={n: {0: "b", 1: "s"} for n in [*names, "last_hidden_state"]})


def _queries(target: Path) -> None:
    """``./data/queries.txt``: the reader's queries, one a line, at least the 64 the command
    judges; the committed English corpus's lines (mixed lengths: padding is exercised)."""
    corpus = Path(__file__).resolve().parents[1] / "harness" / "data" / "corpora" / "sentences_en.txt"
    target.write_text("".join(f"{line}\n" for line in corpus.read_text(encoding="utf-8").splitlines()[:80]),
                      encoding="utf-8")


@dataclass(frozen=True)
class Given:
    """A path a document's commands take as the reader's, and how what stands for it is made."""

    path: str  # as the commands spell it
    build: Callable[[Path], None]  # writes the file or directory at the path it is given


GIVEN = (Given("./opus-mt-en-de", _opus_mt), Given("./optimum-out", _optimum_out), Given("./tied", _tied),
         Given("./minilm.onnx", _minilm), Given("./data/queries.txt", _queries))


class Builds:
    """The files of :data:`GIVEN`, built under ``root`` on first need and copied into each
    sandbox whose document names them."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def built(self, given: Given) -> Path:
        path = self.root / given.path
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            given.build(path)
        return path

    def lay(self, steps: list[docs_run.Step], sandbox: Path) -> None:
        for given in GIVEN:
            if docs_run.mentioned(given.path, steps):
                source, target = self.built(given), sandbox / given.path
                target.parent.mkdir(parents=True, exist_ok=True)
                if source.is_dir():
                    shutil.copytree(source, target)
                else:
                    shutil.copy(source, target)
