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
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable

from harness.core import UsageError, describe_error
from harness.core.phases import phase
from harness.core.quiet import routed_output
from harness.families import family_for
from harness.families.limits import check_limits, prepare_tokenizer
from harness.zoo.base import ModelSpec, materialize
from harness.zoo.consistency import check_tokenizer
from harness.zoo.encoder_custom import load_encoder_custom

if TYPE_CHECKING:  # pragma: no cover
    import torch

#: weight files that are Python pickles (``torch.save``): loading them can run code
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt")


class LoadedModel:
    """A model directory opened for a run: spec, config, tokenizer, weights digest and -- on
    first use -- the FP32 PyTorch module in eval mode.

    The module is the expensive part (seconds for a real checkpoint) and a warm rerun often
    needs none of it: references come from the reference cache and ONNX variants run cached
    artifacts. So ``model`` may be given as a loader that runs on first access; everything
    else (tokenizer, config, digest) is read eagerly because feeds and cache keys need it."""

    def __init__(self, spec: ModelSpec, path: Path, model: "torch.nn.Module | Callable[[], torch.nn.Module]",
                 tokenizer: Any, config: dict[str, Any], weights_sha256: str,
                 cache: dict[Any, Any] | None = None) -> None:
        self.spec, self.path, self.tokenizer, self.config = spec, path, tokenizer, config
        self.weights_sha256 = weights_sha256
        self.cache: dict[Any, Any] = {} if cache is None else cache  # per-session memo (feeds, references)
        #: objects made *from* the PyTorch module (a runner's FP16 / INT8 copies): released with it
        self.derived: dict[Any, Any] = {}
        # a module is an instance of torch's class, so torch is imported already; a loader needs no torch
        is_module = "torch" in sys.modules and isinstance(model, sys.modules["torch"].nn.Module)
        self._model: torch.nn.Module | None = model if is_module else None  # type: ignore[assignment]
        self._loader: Callable[[], torch.nn.Module] | None = None if self._model is not None else model
        #: how many times the module was loaded (a released module loads again on next use)
        self.loads = 0 if self._model is None else 1
        #: what the model can take (``harness.families.limits.ModelLimits``), checked at load
        self.limits: Any = None

    @property
    def model(self) -> torch.nn.Module:
        """The PyTorch module (loaded now if it was not yet)."""
        if self._model is None:
            assert self._loader is not None
            self._model = self._loader()
            self.loads += 1
        return self._model

    def release_module(self) -> bool:
        """Drop the PyTorch module and everything derived from it (``derived``); the next use of
        ``model`` loads it again from the directory. Arrays computed from it (feeds, references in
        ``cache``) stay. False when there was nothing to release or no way to load it again (a
        module handed in directly, not by a loader)."""
        if self._loader is None:
            return False
        released = self._model is not None or bool(self.derived)
        self._model = None
        self.derived.clear()
        return released

    @property
    def model_loaded(self) -> bool:
        """Whether the PyTorch module has been loaded (a warm rerun may never load it)."""
        return self._model is not None

    def generation_source(self) -> Any:
        """What ``generation.settings_for_model`` reads (``config`` and ``generation_config``):
        the loaded module when there is one, else the same two objects read from the directory
        the way ``from_pretrained`` builds them -- without loading any weights."""
        if self._model is not None:
            return self._model
        if "generation_source" not in self.cache:
            self.cache["generation_source"] = _generation_source(self.path)
        return self.cache["generation_source"]

    @property
    def hf_config(self) -> Any:
        """The transformers ``PretrainedConfig`` (layer counts, heads): the loaded module's, or
        read from ``config.json`` without loading weights."""
        return self.generation_source().config

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def family(self) -> str:
        return self.spec.family

    def __repr__(self) -> str:
        return f"LoadedModel({self.spec.name!r}, {str(self.path)!r}, loaded={self.model_loaded})"


def _generation_source(path: Path) -> Any:
    """``config`` and ``generation_config`` as ``PreTrainedModel.from_pretrained`` sets them:
    ``generation_config.json`` when the directory has one, else derived from the config."""
    from transformers import AutoConfig, GenerationConfig

    config = AutoConfig.from_pretrained(str(path), local_files_only=True)
    if (path / "generation_config.json").is_file():
        generation = GenerationConfig.from_pretrained(str(path), local_files_only=True)
    else:
        generation = GenerationConfig.from_model_config(config)
    return SimpleNamespace(config=config, generation_config=generation)


def weight_files(path: Path) -> list[Path]:
    """The model directory's weight files (safetensors shards, or pickle checkpoints), sorted."""
    return sorted(p for p in path.iterdir() if p.suffix in (".safetensors", *PICKLE_SUFFIXES))


def weights_digest(path: Path) -> str:
    """sha256 over every weight file (sorted), streamed: identifies the weights exactly."""
    files = weight_files(path)
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


def load_model(spec: ModelSpec, *, trust_remote_code: bool = False, allow_pickle: bool = False,
               lazy: bool = False) -> LoadedModel:
    """``lazy``: the PyTorch module loads on first access of ``LoadedModel.model`` (the checks on
    the directory -- remote code, pickles -- still run now)."""
    with phase("build"):
        return _load_model(spec, trust_remote_code, allow_pickle, lazy)


def _load_model(spec: ModelSpec, trust_remote_code: bool, allow_pickle: bool, lazy: bool) -> LoadedModel:
    _quiet_transformers()
    trust_remote_code = trust_remote_code or spec.extra.get("trust_remote_code") is True
    allow_pickle = allow_pickle or spec.extra.get("allow_pickle") is True
    path, config, has_safetensors = _intake(spec, trust_remote_code, allow_pickle)

    def load_module() -> torch.nn.Module:
        with phase("build"):
            return _load_module()

    def _load_module() -> torch.nn.Module:
        module = _load_torch_model(spec, path, config, trust_remote_code, has_safetensors)
        module.eval()
        for p in module.parameters():
            p.requires_grad_(False)
        assert not module.training, f"{spec.name}: reference model must be in eval mode"
        return module

    tokenizer = load_tokenizer(path, trust_remote_code, config.get("model_type") == "harness-encoder-custom")
    check_tokenizer(path, config, tokenizer)  # ids past the embedding: one line now, not an IndexError per case
    limits = model_limits(spec, path, config, tokenizer)
    loaded = LoadedModel(spec, path, load_module if lazy else load_module(), tokenizer, config, weights_digest(path))
    loaded.limits = limits
    return loaded


def model_limits(spec: ModelSpec, path: Path, config: dict[str, Any], tokenizer: Any) -> Any:
    """The model's limits (``harness.families.limits``), checked before any work: one line and
    exit 2 when its tokenizer and config cannot work together. A pad-less tokenizer is given its
    EOS as pad here, so every later batch pads the same way."""
    if config.get("model_type") == "harness-encoder-custom":
        prepare_tokenizer(tokenizer)
        return None
    merged = dict(config)
    gen_file = path / "generation_config.json"
    if merged.get("decoder_start_token_id") is None and gen_file.is_file():
        try:
            start = json.loads(gen_file.read_text(encoding="utf-8")).get("decoder_start_token_id")
        except (OSError, json.JSONDecodeError, AttributeError):
            start = None
        if start is not None:
            merged["decoder_start_token_id"] = start
    family = family_for(spec.family)
    return check_limits(str(path), merged, tokenizer, generates=family.generates,
                        encoder_decoder=bool(config.get("is_encoder_decoder")))


def check_intake(spec: ModelSpec) -> None:
    """Every refusal ``load_model`` makes before the weights are read (structure, remote code,
    pickle checkpoints, a loadable tokenizer), as the same one-line ``UsageError``, without
    building the model: ``harness run`` and the pytest plugin call it for users' directories
    before any case starts, so a bad directory is exit 2 with one line, as from ``harness check``."""
    _quiet_transformers()
    trust_remote_code = spec.extra.get("trust_remote_code") is True
    path, config, _ = _intake(spec, trust_remote_code, spec.extra.get("allow_pickle") is True)
    tokenizer = load_tokenizer(path, trust_remote_code, config.get("model_type") == "harness-encoder-custom")
    check_tokenizer(path, config, tokenizer)
    model_limits(spec, path, config, tokenizer)


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
    import torch

    try:
        with routed_output(f"torch.load({path}, weights_only=True)"):  # torch's warnings: not before the refusal
            torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - UnpicklingError, RuntimeError (not a zip), EOFError...
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"{path}: refused: not a plain weights checkpoint under torch.load(weights_only=True) "
                         f"({first[:200]})") from None


def _load_torch_model(spec: ModelSpec, path: Path, config: dict[str, Any], trust_remote_code: bool,
                      safetensors: bool) -> torch.nn.Module:
    if config.get("model_type") == "harness-encoder-custom":
        return load_encoder_custom(path)

    kwargs: dict[str, Any] = {
        "trust_remote_code": trust_remote_code,
        "use_safetensors": safetensors,
        "attn_implementation": "eager",
        "local_files_only": True,
    }
    if not safetensors:
        kwargs["weights_only"] = True  # the pickle path: never full unpickling

    cls = family_for(spec.family).hf_model_class(config)

    try:
        with routed_output(f"model {path}"):
            loaded: torch.nn.Module = cls.from_pretrained(str(path), **kwargs)
        return loaded
    except Exception as exc:  # noqa: BLE001 - corrupt safetensors, bad config values...: bad input, not a crash
        raise UsageError(f"{path}: cannot load model ({describe_error(exc)})") from None


def load_tokenizer(path: Path, trust_remote_code: bool, custom: bool = False) -> Any:
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    if custom:  # not an HF architecture: AutoTokenizer would guess from config.json
        return PreTrainedTokenizerFast.from_pretrained(str(path), local_files_only=True)


    try:
        with routed_output(f"tokenizer {path}"):
            return AutoTokenizer.from_pretrained(str(path), trust_remote_code=trust_remote_code, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - tokenizers raises bare Exception on a corrupt tokenizer.json
        raise UsageError(f"{path}: cannot load tokenizer ({describe_error(exc)})") from None

