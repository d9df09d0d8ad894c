"""Model specs and the registry that names them.

A ``ModelSpec`` says what a model is (family, how to materialise it, which corpus feeds it,
tolerance overrides); it does not load anything. Built-in models are materialised
deterministically into the cache dir the first time they are needed, so a run never
touches the network. Users' own models are any local HF directory (``--models ./my-model``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from harness.core import UsageError, did_you_mean
from harness.core.cachedir import cache_root as root
from harness.core.cachedir import lock_for, mark_used, replace_dir, sweep_orphans, temp_dir_for
from harness.core.registry import Registry
from harness.families import detect_family as detect
from harness.families import family_for
from harness.families import family_names as registered_families
from harness.families.registry import describe_undetected
from harness.metrics.registry import METRICS, TOLERANCE_SCOPES
from harness.zoo.integrity import LegacyEntry, check_model_dir, entry_problem, write_manifest

if TYPE_CHECKING:  # pragma: no cover
    from harness.families import Family

log = logging.getLogger("harness.cache")


def family_names() -> tuple[str, ...]:
    """Families the harness knows how to export and judge: the family registry's names."""
    return registered_families()


def __getattr__(name: str) -> tuple[str, ...]:
    """``FAMILIES``, derived from the family registry when read (deprecated: use ``family_names()``)."""
    if name == "FAMILIES":
        return family_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class ModelSpec:
    """What a model is and where its HF-format directory comes from.

    Exactly one of ``build`` (a deterministic builder writing an HF dir) or ``path``
    (an existing directory) is set. ``recipe_version`` is bumped whenever ``build``
    changes what it writes, so cached materialisations are rebuilt.
    """

    name: str
    family: str
    description: str
    build: Callable[[Path], None] | None = None
    path: Path | None = None
    recipe_version: int = 1
    corpus: str = "sentences_en"
    #: language of generated text (BLEU tokenizer); None: detected from the data when scored
    target_lang: str | None = None
    generates: bool = False
    default: bool = True
    #: exporter this model needs by default (None: the run's choice, TorchScript unless told)
    exporter: str | None = None
    #: INT8: one scale per output channel (more accurate, e.g. sentence encoders) instead of per tensor
    int8_per_channel: bool = False
    #: ONNX ops this model keeps in FP32 when converted to FP16 (added to the run's list)
    fp16_op_block_list: tuple[str, ...] = ()
    #: ONNX node names this model keeps in FP32 (FP16) / leaves unquantised (INT8), added
    #: to the run's lists (what ``harness bisect --suggest`` prints for ``[models.<name>]``)
    fp16_node_block_list: tuple[str, ...] = ()
    int8_nodes_to_exclude: tuple[str, ...] = ()
    #: precision -> {metric: threshold}; merged over the per-precision defaults.
    tolerances: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    #: performance budgets, e.g. {"p50_ms": 5.0, "peak_rss_mb": 600, "artifact_mb": 20}
    budgets: Mapping[str, float] = field(default_factory=dict)
    #: arguments users may need, e.g. {"trust_remote_code": False}; each key has its own shape
    #: (``generation``: a mapping, ``artifacts``: precision -> path), read by the part that owns it
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.family not in family_names():
            raise ValueError(f"{self.name}: unknown family {self.family!r}; known: {family_names()}")
        if (self.build is None) == (self.path is None):
            raise ValueError(f"{self.name}: give exactly one of build= or path=")

        for precision, checks in self.tolerances.items():  # the rule the config file and the CLI apply
            for name, value in checks.items():
                problem = METRICS.lookup(name, *TOLERANCE_SCOPES, what="tolerance metric").threshold_problem(value)
                if problem:
                    raise ValueError(f"{self.name}: tolerances.{precision}.{name}: {problem}")


#: the zoo's declarations: filled once by the modules of ``harness.zoo`` at import, never
#: changed by a run (a run's own models and overrides live in its ``ModelCatalog``)
ZOO: Registry[ModelSpec] = Registry("zoo model", lambda spec: spec.name)
#: known names that cannot be used here, with the reason (a zoo model whose extra is missing)
_UNAVAILABLE: dict[str, str] = {}


def register(spec: ModelSpec) -> ModelSpec:
    """Declare a zoo model (at import of its module)."""
    return ZOO.register(spec)  # a second spec of one name is a RegistryError


class ModelCatalog:
    """The models one run can name: the zoo, plus the suite config's new models and its
    overrides of zoo models (tolerances, budgets...). Scoped to the run (``RunOptions.catalog``)
    so a config never outlives the run that read it."""

    def __init__(self) -> None:
        self._own: dict[str, ModelSpec] = {}

    def add(self, spec: ModelSpec) -> ModelSpec:
        """Add a model or replace one for this run only."""
        self._own[spec.name] = spec
        return spec

    def builtin(self, name: str) -> ModelSpec | None:
        """The zoo's own spec for ``name`` (ignoring this run's overrides), or None."""
        _import_zoo()
        return ZOO.get(name)

    def registered(self) -> dict[str, ModelSpec]:
        _import_zoo()
        return {**ZOO.items(), **self._own}

    def resolve(self, name: str) -> ModelSpec:
        """A model by name (this run's first, then the zoo), or a local HF directory."""
        if name in self._own:
            return self._own[name]
        return resolve(name)


def _import_zoo() -> None:
    from harness import zoo  # noqa: F401  # deferred: harness.zoo imports this module at import time (its models register)


def unavailable_models() -> dict[str, str]:
    """Zoo names that cannot be used here, with the reason (``harness doctor`` names the extra)."""
    return dict(_UNAVAILABLE)


def register_unavailable(name: str, reason: str) -> None:
    """A zoo model that exists but cannot load here; naming it gives ``reason``, not "unknown"."""
    _UNAVAILABLE[name] = reason


def registered() -> dict[str, ModelSpec]:
    return ZOO.items()


def cache_root() -> Path:
    """Where built models and exported artifacts live (``HARNESS_CACHE``; ``core.cachedir.cache_root``)."""
    return root()


def _fingerprint_build(spec: ModelSpec) -> str:
    # the installed versions, read from the distributions' metadata (the same strings as their
    # ``__version__``): naming a cache entry must not import transformers (a replayed run needs none)
    blob = json.dumps(
        {
            "name": spec.name,
            "recipe": spec.recipe_version,
            "torch": version("torch"),
            "transformers": version("transformers"),
            "tokenizers": version("tokenizers"),
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def zoo_entry(spec: ModelSpec, root: Path | None = None) -> Path:
    """Where the cache keeps zoo model ``spec`` (``<cache>/zoo/<name>-<recipe fingerprint>``)."""
    return (root or cache_root()) / "zoo" / f"{spec.name}-{_fingerprint_build(spec)}"


def materialize(spec: ModelSpec) -> Path:
    """Return the HF directory of ``spec``, checked for this process's first use.

    A zoo model is built once (atomically, under its lock) and verified against the sha256
    of every file recorded when it was built; a corrupt or incomplete entry is rebuilt from
    its recipe (``harness.zoo.integrity``). A directory the user supplied has nothing to
    rebuild from: it is held to cheap structural checks and refused with one line."""
    if spec.path is not None:
        check_model_dir(spec.path)
        return spec.path
    root = cache_root() / "zoo"
    root.mkdir(parents=True, exist_ok=True)
    sweep_orphans(root)
    target = zoo_entry(spec)
    if _entry_problem(target, locked=False) is None:
        mark_used(target)
        return target
    with lock_for(target):
        problem = _entry_problem(target, locked=True)
        if problem is None:
            return target
        if target.exists():
            log.warning("zoo model %s: %s; rebuilding it from its recipe", target, problem)
        tmp = temp_dir_for(target)
        try:
            assert spec.build is not None
            spec.build(tmp)
            write_manifest(tmp)
            replace_dir(tmp, target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return target


def _entry_problem(target: Path, *, locked: bool) -> str | None:
    """What is wrong with the zoo entry (None: intact). An entry finished by harness <= 0.1
    (a marker without hashes) is adopted under the lock when its files pass the structural
    checks: rebuilding every shared cache on upgrade would re-export every artifact."""
    try:
        return entry_problem(target)
    except LegacyEntry:
        if not locked:
            return "recorded without hashes"
        try:
            check_model_dir(target)
        except UsageError as exc:
            return str(exc)
        write_manifest(target)
        return None


def is_path(name: str) -> bool:
    """Whether ``--models`` text names a directory rather than a zoo model: it holds a path
    separator or starts with ``.`` or ``~``. Names are zoo names, paths are paths, so a local
    directory that happens to be called like a zoo model never changes what a name means."""
    return any(sep in name for sep in ("/", os.sep)) or name.startswith((".", "~"))


def shadowed_directory(name: str) -> Path | None:
    """A directory in the working directory with the same name as the zoo model ``name`` (it
    is *not* what the name means; the run says so, and ``./name`` judges the directory)."""
    candidate = Path(name)
    return candidate if not is_path(name) and candidate.is_dir() else None


def resolve(name: str) -> ModelSpec:
    """A registered model by name, or a local HF directory given as a path (``./my-model``,
    ``/abs/path``, ``~/models/x``; spaces in the path are fine)."""
    _import_zoo()
    if is_path(name):
        candidate = Path(name).expanduser()
        if not candidate.is_dir():
            raise UsageError(f"--models: {name!r} is not a directory")
        return spec_for_directory(candidate)
    zoo = ZOO.items()
    if name in zoo:
        return zoo[name]
    if name in _UNAVAILABLE:
        raise UsageError(f"--models: {name!r} is not available: {_UNAVAILABLE[name]}")
    local = f"; the local directory {name!r} is judged as --models ./{name}" if Path(name).is_dir() else \
        " (or a path to a local HF model directory)"
    raise UsageError(
        f"--models: unknown model {name!r}{did_you_mean(name, zoo)}; "
        f"known: {', '.join(sorted(zoo))}{local}"
    )


def spec_for_directory(path: Path, *, name: str | None = None, family: str | None = None) -> ModelSpec:
    """Describe a user's HF model directory; the family comes from its config."""
    config = path / "config.json"
    if not config.is_file():
        raise UsageError(f"{path}: not an HF model directory (no config.json)")
    try:
        cfg = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{config}: unreadable config.json ({exc})") from None
    try:
        family = family or detect_family(cfg)
    except UsageError as exc:
        raise UsageError(f"{path}/{exc}") from None
    if family is None:
        raise UsageError(f"{path}/{describe_undetected(cfg)}")
    check_model_dir(path)
    return ModelSpec(
        name=name or path.resolve().name,
        family=family,
        description=f"local HF model at {path}",
        path=path.resolve(),
        generates=_family(family).generates,
    )


def detect_family(cfg: Mapping[str, object]) -> str | None:
    """The family of an HF config, asked of every registered family (``Family.detects``)."""
    return detect(cfg)


def _family(name: str) -> "Family":
    return family_for(name)
