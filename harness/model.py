"""Load a model spec into an FP32 PyTorch model in eval mode, with its tokenizer.

Intake is safe by default: weights only from safetensors, no ``trust_remote_code``.
``weights_sha256`` identifies the exact weights in results records and cache keys.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from harness.config import UsageError
from harness.zoo.base import ModelSpec, materialize


@dataclass
class LoadedModel:
    spec: ModelSpec
    path: Path
    model: torch.nn.Module
    tokenizer: Any
    config: dict
    weights_sha256: str
    cache: dict = field(default_factory=dict)  # per-session memo (feeds, references)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def family(self) -> str:
        return self.spec.family


def weights_digest(path: Path) -> str:
    """sha256 over every weight file (sorted), streamed: identifies the weights exactly."""
    files = sorted(p for p in path.iterdir() if p.suffix in (".safetensors", ".bin", ".pt", ".pth"))
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
    path = materialize(spec)
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path / 'config.json'}: unreadable ({exc})") from None
    has_safetensors = any(path.glob("*.safetensors"))
    if not has_safetensors and not allow_pickle:
        raise UsageError(
            f"{path}: no safetensors weights; pickle checkpoints run code on load and are refused "
            "(convert to safetensors, or opt in with allow_pickle)"
        )
    model = _load_torch_model(spec, path, config, trust_remote_code, has_safetensors)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    tokenizer = _load_tokenizer(path, trust_remote_code, config.get("model_type") == "harness-encoder-custom")
    return LoadedModel(spec, path, model, tokenizer, config, weights_digest(path))


def _load_torch_model(spec: ModelSpec, path: Path, config: dict, trust_remote_code: bool, safetensors: bool) -> torch.nn.Module:
    if config.get("model_type") == "harness-encoder-custom":
        from harness.zoo.encoder_custom import load_encoder_custom

        return load_encoder_custom(path)
    import transformers

    kwargs: dict[str, Any] = {
        "trust_remote_code": trust_remote_code,
        "use_safetensors": safetensors,
        "attn_implementation": "eager",
        "local_files_only": True,
    }
    archs = config.get("architectures") or []
    if spec.family == "seq2seq":
        cls = transformers.AutoModelForSeq2SeqLM
    elif spec.family == "causal_lm":
        cls = transformers.AutoModelForCausalLM
    elif any(a.endswith("ForSequenceClassification") for a in archs):
        cls = transformers.AutoModelForSequenceClassification
    else:
        cls = transformers.AutoModel
    try:
        return cls.from_pretrained(str(path), **kwargs)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot load model ({str(exc).splitlines()[0]})") from None


def _load_tokenizer(path: Path, trust_remote_code: bool, custom: bool = False) -> Any:
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    if custom:  # not an HF architecture: AutoTokenizer would guess from config.json
        return PreTrainedTokenizerFast.from_pretrained(str(path), local_files_only=True)

    try:
        return AutoTokenizer.from_pretrained(str(path), trust_remote_code=trust_remote_code, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot load tokenizer ({str(exc).splitlines()[0]})") from None
