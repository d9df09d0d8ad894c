"""Known causes of a runtime refusing or breaking on an exported file, said in one line.

ONNX Runtime's messages name a node and a status code; what a user needs is the cause and the
fix. Each :class:`KnownFailure` recognises one cause from the runtime's text (a shape the
tracer baked into a Reshape, GroupQueryAttention's padding and batch limits on CPU, ATen
fallback ops, an op with no kernel on the execution provider); :func:`explain` puts its line
before the raw message, which is kept whole after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class KnownFailure:
    name: str
    pattern: re.Pattern[str]
    cause: str
    fix: str

    def line(self) -> str:
        return f"{self.cause}; fix: {self.fix}"


KNOWN: tuple[KnownFailure, ...] = (
    KnownFailure("baked_reshape", re.compile(r"Reshape.*(cannot be reshaped|requested shape)|"
                                             r"(cannot be reshaped|requested shape).*Reshape", re.S | re.I),
                 "a shape the tracer baked into a Reshape (the file was exported at one batch/sequence size, "
                 "without dynamic_axes or from a size-1 dummy input: docs/pitfalls.md #2)",
                 "re-export with dynamic_axes for batch and sequence and a dummy input of batch >= 2, or declare "
                 "the static shape intended in an --io-protocol file"),
    KnownFailure("gqa_limits", re.compile(r"batch_size must be 1 when sequence_length > 1|"
                                          r"GroupQueryAttention.*(padding|past)", re.S | re.I),
                 "GroupQueryAttention on ONNX Runtime CPU takes only unpadded or right-padded prompts and batch 1 for "
                 "multi-token steps with past",
                 'feed it one unpadded row per call: feeding = "rows" in an --io-protocol file'),
    KnownFailure("aten_fallback", re.compile(r"\bATen\b", re.S),
                 "the export fell back to ATen ops (operator_export_type=ONNX_ATEN_FALLBACK) that ONNX Runtime "
                 "cannot run", "re-export without the ATen fallback (a newer opset, or the dynamo exporter)"),
    KnownFailure("missing_kernel", re.compile(r"Could not find an implementation for (\w+)", re.S),
                 "an op with no kernel on this execution provider (a contrib op or fusion made for another "
                 "provider, e.g. an optimizer run for CUDA or with --float16)",
                 "judge the file on the provider it was optimized for (--providers), or re-optimize it for this one"),
    KnownFailure("static_dims", re.compile(r"Got invalid dimensions for input: (\S+).*?Got: (\d+) Expected: (\d+)",
                                           re.S),
                 "the file bakes a dimension the feeds differ from (a static batch or sequence length)",
                 "re-export with dynamic_axes, or declare the static shape intended in an --io-protocol file"),
)


def known_failure(text: str) -> KnownFailure | None:
    return next((k for k in KNOWN if k.pattern.search(text)), None)


def explain(text: str) -> str:
    """``text`` (a runtime's message) with the known cause's line before it, if one is known."""
    known = known_failure(text)
    return f"{known.line()} -- runtime said: {text}" if known else text
