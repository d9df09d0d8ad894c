"""Load a model spec into an FP32 PyTorch model in eval mode, with its tokenizer.

Intake is safe by default, because a model directory is untrusted input that a CI job
runs with its credentials:

* weights come from safetensors; a pickle checkpoint (``pytorch_model.bin``) runs code on
  load and is refused unless the caller opts in (``allow_pickle``), and even then it is read
  with ``torch.load(weights_only=True)``, which rejects anything but tensors and containers;
* a directory that ships its own modelling code (``auto_map`` in its configs, ``*.py``
  files) is refused unless the caller opts in to ``trust_remote_code``;
* nothing is fetched: every load is ``local_files_only``.

Opt-ins come from the keyword arguments or from the spec's ``extra`` (a suite config sets
them per model). ``weights_sha256`` identifies the exact weights in records and cache keys.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from harness.core import UsageError, describe_error
from harness.zoo.base import ModelSpec, materialize

#: weight files that are Python pickles (``torch.save``): loading them can run code
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt")


@dataclass
class LoadedModel:
    spec: ModelSpec
    path: Path
    model: torch.nn.Module
    tokenizer: Any
    config: dict[str, Any]
    weights_sha256: str
    cache: dict[Any, Any] = field(default_factory=dict)  # per-session memo (feeds, references)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def family(self) -> str:
        return self.spec.family


def weights_digest(path: Path) -> str:
    """sha256 over every weight file (sorted), streamed: identifies the weights exactly."""
    files = sorted(p for p in path.iterdir() if p.suffix in (".safetensors", *PICKLE_SUFFIXES))
    if not files:
        raise UsageError(f"{path}: no weight files (*.safetensors) found")
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _quiet_transformers() -> None:
    """Progress bars and load chatter would drown the test report."""
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def load_model(spec: ModelSpec, *, trust_remote_code: bool = False, allow_pickle: bool = False) -> LoadedModel:
    _quiet_transformers()
    trust_remote_code = trust_remote_code or spec.extra.get("trust_remote_code") is True
    allow_pickle = allow_pickle or spec.extra.get("allow_pickle") is True
    path, config, has_safetensors = _intake(spec, trust_remote_code, allow_pickle)
    model = _load_torch_model(spec, path, config, trust_remote_code, has_safetensors)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    tokenizer = _load_tokenizer(path, trust_remote_code, config.get("model_type") == "harness-encoder-custom")
    return LoadedModel(spec, path, model, tokenizer, config, weights_digest(path))


def check_intake(spec: ModelSpec) -> None:
    """Every refusal ``load_model`` makes before the weights are read (structure, remote code,
    pickle checkpoints, a loadable tokenizer), as the same one-line ``UsageError``, without
    building the model: ``harness run`` and the pytest plugin call it for users' directories
    before any case starts, so a bad directory is exit 2 with one line, as from ``harness check``."""
    _quiet_transformers()
    trust_remote_code = spec.extra.get("trust_remote_code") is True
    path, config, _ = _intake(spec, trust_remote_code, spec.extra.get("allow_pickle") is True)
    _load_tokenizer(path, trust_remote_code, config.get("model_type") == "harness-encoder-custom")


def _intake(spec: ModelSpec, trust_remote_code: bool, allow_pickle: bool) -> tuple[Path, dict[str, Any], bool]:
    """The directory, its config and whether it has safetensors, after the safety refusals."""
    path = materialize(spec)
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path / 'config.json'}: unreadable ({exc})") from None
    if not isinstance(config, dict):
        raise UsageError(f"{path / 'config.json'}: expected a JSON object")
    if not trust_remote_code:
        refuse_remote_code(path, config)
    has_safetensors = any(path.glob("*.safetensors"))
    if not has_safetensors:
        pickles = sorted(p for p in path.iterdir() if p.suffix in PICKLE_SUFFIXES)
        if not allow_pickle:
            found = f" (found {', '.join(p.name for p in pickles)})" if pickles else ""
            raise UsageError(
                f"{path}: no safetensors weights{found}; pickle checkpoints run code on load and are refused "
                "(convert to safetensors, or opt in with allow_pickle = true)"
            )
        for pickle_file in pickles:
            check_weights_only(pickle_file)
    return path, config, has_safetensors


def refuse_remote_code(path: Path, config: dict[str, Any]) -> None:
    """Refuse a directory whose model or tokenizer needs its own Python code."""
    mapped = dict(config.get("auto_map") or {})
    tok_cfg = path / "tokenizer_config.json"
    if tok_cfg.is_file():
        try:
            tok = json.loads(tok_cfg.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise UsageError(f"{tok_cfg}: unreadable ({exc})") from None
        if isinstance(tok, dict) and tok.get("auto_map"):
            mapped["tokenizer"] = tok["auto_map"]
    code = sorted(p.name for p in path.glob("*.py"))
    if mapped or code:
        what = f"auto_map {sorted(mapped)}" if mapped else f"code files {', '.join(code)}"
        raise UsageError(
            f"{path}: the model ships its own Python code ({what}); it is not run unless you opt in with "
            "trust_remote_code = true (config) or --trust-remote-code (harness check)"
        )


def check_weights_only(path: Path) -> None:
    """Open a pickle checkpoint with ``weights_only=True``: only tensors and plain containers
    are accepted, so a checkpoint carrying code is refused before anything else reads it."""
    try:
        torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # UnpicklingError, RuntimeError (not a zip), EOFError...
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"{path}: refused: not a plain weights checkpoint under torch.load(weights_only=True) "
                         f"({first[:200]})") from None


def _load_torch_model(spec: ModelSpec, path: Path, config: dict[str, Any], trust_remote_code: bool,
                      safetensors: bool) -> torch.nn.Module:
    if config.get("model_type") == "harness-encoder-custom":
        from harness.zoo.encoder_custom import load_encoder_custom

        return load_encoder_custom(path)

    kwargs: dict[str, Any] = {
        "trust_remote_code": trust_remote_code,
        "use_safetensors": safetensors,
        "attn_implementation": "eager",
        "local_files_only": True,
    }
    if not safetensors:
        kwargs["weights_only"] = True  # the pickle path: never full unpickling
    from harness.families import family_for

    cls = family_for(spec.family).hf_model_class(config)
    try:
        loaded: torch.nn.Module = cls.from_pretrained(str(path), **kwargs)
        return loaded
    except Exception as exc:  # corrupt safetensors, bad config values...: bad input, not a crash
        raise UsageError(f"{path}: cannot load model ({describe_error(exc)})") from None


def _load_tokenizer(path: Path, trust_remote_code: bool, custom: bool = False) -> Any:
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    if custom:  # not an HF architecture: AutoTokenizer would guess from config.json
        return PreTrainedTokenizerFast.from_pretrained(str(path), local_files_only=True)

    try:
        return AutoTokenizer.from_pretrained(str(path), trust_remote_code=trust_remote_code, local_files_only=True)
    except Exception as exc:  # tokenizers raises bare Exception on a corrupt tokenizer.json
        raise UsageError(f"{path}: cannot load tokenizer ({describe_error(exc)})") from None

