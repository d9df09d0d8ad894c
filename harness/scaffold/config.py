"""A commented ``harness.toml`` for one model (or for the built-in zoo when none is given).

The text is generated from the declarations it describes, so it cannot drift from them: the
family from the family registry's detection, the corpora from the shipped manifest, the
default tolerances from the metric registry, the providers from the backends. Every value
written is one the config reader accepts (``harness init`` validates the file before writing).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.data.corpus import read_manifest
from harness.families import family_for
from harness.zoo.base import spec_for_directory

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10: the same parser from PyPI
    import tomli as tomllib

from harness.core import DEFAULT_PRECISIONS, UsageError
from harness.metrics.registry import METRICS
from harness.metrics.spec import Scope
from harness.runners import DEFAULT_PROVIDERS


@dataclass(frozen=True)
class ModelFacts:
    """What ``harness init`` learned about the user's model directory."""

    name: str
    path: str  # relative to the config's directory, POSIX separators
    family: str
    architectures: tuple[str, ...]
    generates: bool


def model_facts(directory: Path, root: Path, *, family: str | None = None, name: str | None = None) -> ModelFacts:
    """Inspect ``directory`` (an HF model directory inside ``root``): family detected by the
    family registry from ``config.json`` (or ``family``), a name from the directory."""
    resolved, base = directory.expanduser().resolve(), root.resolve()
    if not resolved.is_dir():
        raise UsageError(f"harness init: {directory} is not a directory")
    if not resolved.is_relative_to(base):
        raise UsageError(f"harness init: {directory} is outside {base}; harness.toml paths stay inside the directory "
                         "the config is written to (run harness init from the repository that holds the model, or "
                         "pass --dir)")
    spec = spec_for_directory(resolved, family=family)
    try:
        config = json.loads((resolved / "config.json").read_text(encoding="utf-8"))
        architectures = tuple(str(a) for a in config.get("architectures") or ())
    except (OSError, ValueError, AttributeError):
        architectures = ()
    raw = name or resolved.name
    clean = "".join(c if c.isalnum() or c in "-_." else "-" for c in raw).strip("-.") or "model"
    rel = resolved.relative_to(base).as_posix()
    return ModelFacts(clean, f"./{rel}" if rel != "." else ".", spec.family, architectures,
                      family_for(spec.family).generates)


def _corpora_comment() -> list[str]:
    lines = []
    for name, entry in sorted(read_manifest()["corpora"].items()):
        refs = " with references" if entry.get("format") == "tsv" else ""
        about = str(entry.get("description", "")).split(" (")[0].split("; ")[0].split(", the ")[0]
        lines.append(f"#   {name}: {entry.get('lines')} lines{refs}: {about}")
    return lines


def _tolerance_comment(precision: str, generates: bool) -> list[str]:
    scopes = (Scope.NUMERIC, Scope.GENERATION) if generates else (Scope.NUMERIC,)
    defaults = METRICS.defaults(precision, *scopes)
    return [f"# {metric} = {value:g}" for metric, value in defaults.items()]


def render_config(model: ModelFacts | None, *, precisions: tuple[str, ...] | None = None,
                  providers: tuple[str, ...] | None = None) -> str:
    """The file's text. Without a model the run covers the built-in zoo (a starting point)."""
    precisions = precisions or tuple(p.value for p in DEFAULT_PRECISIONS)
    providers = providers or DEFAULT_PROVIDERS
    quoted = ", ".join
    out = [
        "# harness.toml: what `harness run` gates in this repository (written by `harness init`).",
        "# `harness run` (or `pytest --harness-builtin-suites`) in this directory reads it.",
        "# Every path is relative to this file and must stay inside this directory.",
        "# Reference: docs/config.md of model-harness (every key, its type and default).",
        "",
        "[run]",
    ]
    if model is not None:
        out += ["# the models to judge: the [models.*] tables below, or built-in zoo names",
                f'models = ["{model.name}"]']
    else:
        out += ["# the models to judge: built-in zoo names, or your own (add a [models.<name>] table with a path)",
                '# models = ["my-model"]          # default: the built-in zoo']
    out += [
        "# fp32 checks the export itself; fp16 / int8 what a reduced-precision deployment loses",
        f"precisions = [{quoted(repr(p).replace(chr(39), chr(34)) for p in precisions)}]",
        "# where each variant runs: torch_cpu = PyTorch eager, ort_cpu = ONNX Runtime CPU; on a GPU runner add",
        "# ort_cuda / ort_trt. A provider listed here that the machine lacks makes its cases 'not-run' and the",
        "# job fail (set allow_skip = true to let them skip instead)",
        f"providers = [{quoted(repr(p).replace(chr(39), chr(34)) for p in providers)}]",
        "# corpus sentences per model for numeric parity (at most the corpus size)",
        "samples = 32",
        "# allow_skip = false",
        "# target_lang = \"zh\"              # language of generated text for BLEU (default: detected from the data)",
        "",
    ]
    if model is None:
        out += [
            "# Your own model (a local Hugging Face directory with config.json, tokenizer and safetensors):",
            "# [models.my-model]",
            '# path = "./models/my-model"',
            '# corpus = "sentences_en"',
            "",
        ]
        return "\n".join(out) + "\n"
    out += model_table(model, precisions)
    return "\n".join(out) + "\n"


def model_table(model: ModelFacts, precisions: tuple[str, ...]) -> list[str]:
    """The commented ``[models.<name>]`` table of one model (``harness init`` and ``init --add``)."""
    detected = f"detected from config.json architectures {list(model.architectures)}" if model.architectures \
        else "detected from config.json"
    out = [
        f"[models.{model.name}]",
        f'path = "{model.path}"',
        f'family = "{model.family}"   # {detected}',
        "# corpus: a built-in corpus, or your own .txt (one source sentence a line) or .tsv",
        "# (source<TAB>reference) file relative to this file. Built in:",
        *_corpora_comment(),
        'corpus = "sentences_en"',
    ]
    if model.generates:
        out += ["# language of the generated text for BLEU's tokenizer (zh, ja, ko, en...; default: detected",
                "# from the corpus references, else from the PyTorch outputs)",
                '# target_lang = "zh"']
    out += ["# trust_remote_code = false     # a directory with its own modelling code is refused unless true",
            "# allow_pickle = false          # pytorch_model.bin is refused unless true (safetensors are not)",
            ""]
    for precision in precisions:
        out += [f"# Tolerances at {precision} (these are the defaults; uncomment to change, docs/tolerances.md):",
                f"# [models.{model.name}.tolerances.{precision}]", *_tolerance_comment(precision, model.generates), ""]
    out += ["# Performance budgets (checked by `harness run --perf`, docs/performance.md):",
            f"# [models.{model.name}.budgets]",
            "# p50_ms = 20",
            "# peak_rss_mb = 1500",
            ""]
    return out


#: the ``models = [...]`` of the ``[run]`` table (single- or multi-line), up to the next table
_RUN_MODELS = re.compile(r"^models\s*=\s*\[[^\]]*\][^\n]*$", re.M)


def add_model(text: str, model: ModelFacts) -> str:
    """``text`` (an existing harness.toml) with ``model`` added: its name appended to
    ``run.models`` and its commented table appended, at the precisions the file gates.
    Raises ``UsageError`` when the file already names the model."""
    data = tomllib.loads(text)
    found_run = data.get("run")
    run: dict[str, object] = found_run if isinstance(found_run, dict) else {}
    listed_models = run.get("models")
    models = [str(m) for m in listed_models] if isinstance(listed_models, list) else []
    tables = data.get("models")
    if model.name in models or (isinstance(tables, dict) and model.name in tables):
        raise UsageError(f"harness init --add: harness.toml already has a model named {model.name!r} "
                         "(pass --name to add it under another name)")
    listed = "models = [" + ", ".join(json.dumps(m) for m in [*models, model.name]) + "]"
    run_at = re.search(r"^\[run\]\s*$", text, re.M)
    if run_at is None:
        text = f"[run]\n{listed}\n\n{text}"
    else:
        end = re.search(r"^\[", text[run_at.end():], re.M)
        section_end = run_at.end() + (end.start() if end else len(text) - run_at.end())
        section = text[run_at.end():section_end]
        found = _RUN_MODELS.search(section)
        section = section[:found.start()] + listed + section[found.end():] if found else f"\n{listed}" + section
        text = text[:run_at.end()] + section + text[section_end:]
    gated = run.get("precisions")
    precisions = tuple(str(p) for p in gated) if isinstance(gated, list) and gated else \
        tuple(p.value for p in DEFAULT_PRECISIONS)
    return text.rstrip("\n") + "\n\n" + "\n".join(model_table(model, precisions)) + "\n"
