"""The declarative suite config: ``harness.toml``, or ``[tool.harness]`` in ``pyproject.toml``.

A team lists its models (local HF dirs, pre-built ONNX artifacts), precisions, providers,
corpora, tolerances and perf budgets without writing Python. This module only *reads and
validates*: every mistake is one ``UsageError`` naming the file and the key path
(``harness.toml: models.ranker.tolerances.int8.cosin: unknown metric ... (did you mean
'cosine'?)``), raised before anything runs. Every path in the file is relative to the
file's directory and must stay inside it, so a shared config cannot point a CI job at
``/etc`` or ``../../someone-else``. ``harness.settings.resolve`` turns the result into run options
and registered model specs.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from harness.data.corpus import CorpusError, list_corpora, load_corpus_file
from harness.families import family_names

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10: the same parser from PyPI
    import tomli as tomllib

from harness.core import Precision, UsageError, did_you_mean, valid_names
from harness.metrics.margins import MarginRule, rules_from_config
from harness.metrics.registry import METRICS, TOLERANCE_SCOPES, budget_names
from harness.runners import PROVIDERS
from harness.settings.endpoint import endpoint_from_table
from harness.settings.options import CONFIG_KEYS, Kind, option
from harness.settings.runtime import axis_levels, is_axis, runtime_fields, runtime_keys, validate_provider_options

CONFIG_FILE = "harness.toml"
PYPROJECT = "pyproject.toml"

TOP_KEYS = ("run", "models", "tolerances", "budgets", "margins")
MODEL_KEYS = ("path", "family", "description", "corpus", "target_lang", "exporter", "trust_remote_code",
              "allow_pickle", "tolerances", "budgets", "artifacts", "int8_per_channel", "fp16_op_block_list",
              "margins", "runtime", "fp16_node_block_list", "int8_nodes_to_exclude", "endpoint",
              "io_protocol")
#: keys that describe *where a model comes from*: not allowed on an override of a zoo model
SOURCE_KEYS = ("path", "family", "trust_remote_code", "allow_pickle")
PRECISIONS = tuple(p.value for p in Precision)
EXPORTERS = option("exporter").choices
#: the ``[run]`` table's keys: the option table's config options
RUN_KEYS = CONFIG_KEYS


@dataclass(frozen=True)
class ModelEntry:
    """One ``[models.<name>]`` table: a new model (``path`` set) or an override of a zoo model."""

    name: str
    path: Path | None = None
    family: str | None = None
    description: str | None = None
    corpus: str | None = None
    target_lang: str | None = None
    exporter: str | None = None
    trust_remote_code: bool = False
    allow_pickle: bool = False
    tolerances: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    budgets: Mapping[str, float] = field(default_factory=dict)
    int8_per_channel: bool | None = None  # None: the model's own default
    fp16_op_block_list: tuple[str, ...] = ()
    #: precision -> ONNX file or directory, judged by ``harness check --config``
    artifacts: Mapping[str, Path] = field(default_factory=dict)
    #: ``[models.<name>.endpoint]``: a served model judged by ``harness check --config`` (docs/serving.md)
    endpoint: Mapping[str, Any] | None = None
    #: ``[models.<name>.io_protocol]``: the artifacts' I/O protocol overrides (docs/check.md), read by
    #: ``harness check --config``, which validates it
    io_protocol: Mapping[str, Any] | None = None
    #: accuracy-gate margin overrides for this model (``[models.<name>.margins]``)
    margins: tuple[MarginRule, ...] = ()
    #: ``[models.<name>.runtime]``: RuntimeSettings fields this model runs with (over the run's)
    runtime: Mapping[str, Any] = field(default_factory=dict)
    #: node names this model keeps in FP32 (FP16) / leaves unquantised (INT8)
    fp16_node_block_list: tuple[str, ...] = ()
    int8_nodes_to_exclude: tuple[str, ...] = ()


@dataclass(frozen=True)
class SuiteConfig:
    """A validated config file. ``None`` means "not set here": the caller's default applies."""

    path: Path
    root: Path
    #: the ``[run]`` table: option name -> value, each checked by its row in the option table
    #: (``harness.settings.options``); an absent key is "not set here"
    run: Mapping[str, Any] = field(default_factory=dict)
    tolerances: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    budgets: Mapping[str, float] = field(default_factory=dict)
    entries: Mapping[str, ModelEntry] = field(default_factory=dict)
    #: accuracy-gate margin overrides for every model (``[margins]``)
    margins: tuple[MarginRule, ...] = ()

    def value(self, name: str) -> Any:
        """The ``[run]`` value of option ``name``, or None when the file does not set it."""
        return self.run.get(name)

    @property
    def models(self) -> list[str] | None:
        return self.run.get("models")

    @property
    def corpus(self) -> str | None:
        return self.run.get("corpus")

    def margin_rules(self) -> tuple[MarginRule, ...]:
        """Every margin override of the file: run-wide first, then per model (more specific)."""
        return (*self.margins, *(r for e in self.entries.values() for r in e.margins))


# -- finding and parsing ------------------------------------------------------------------------
def find_config(config_path: str | Path | None = None, rootdir: Path | None = None) -> Path | None:
    """The config file to use: the explicit one (must exist), else ``harness.toml`` or a
    ``pyproject.toml`` with ``[tool.harness]`` in ``rootdir``, then in the working directory
    (``harness run`` starts pytest from the packaged suites, whose rootdir is elsewhere)."""
    if config_path is not None:
        path = Path(config_path).expanduser()
        if not path.is_file():
            raise UsageError(f"--config: {path} not found")
        return path
    seen: set[Path] = set()
    for directory in (rootdir, Path.cwd()):
        if directory is None or Path(directory).resolve() in seen:
            continue
        seen.add(Path(directory).resolve())
        candidate = Path(directory) / CONFIG_FILE
        if candidate.is_file():
            return candidate
        pyproject = Path(directory) / PYPROJECT
        if pyproject.is_file() and _has_tool_harness(pyproject):
            return pyproject
    return None


def _has_tool_harness(path: Path) -> bool:
    try:
        return "harness" in _read_toml(path).get("tool", {})
    except UsageError:
        return False  # a broken pyproject that is not ours to validate


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: invalid TOML ({exc})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: unreadable ({exc})") from None


def load_config(path: str | Path) -> SuiteConfig:
    """Parse and validate ``path`` (a harness.toml, or a pyproject.toml's ``[tool.harness]``)."""
    path = Path(path)
    data = _read_toml(path)
    if path.name == PYPROJECT:
        tool = data.get("tool", {})
        if not isinstance(tool, dict) or "harness" not in tool:
            raise UsageError(f"{path}: no [tool.harness] table")
        data = tool["harness"]
        if not isinstance(data, dict):
            raise UsageError(f"{path}: tool.harness must be a table")
        prefix = "tool.harness."
    else:
        prefix = ""
    return _Validator(path, prefix).suite(data)


# -- validation -----------------------------------------------------------------------------------
class _Validator:
    """Walks the parsed TOML; every error names the file and the dotted key."""

    def __init__(self, path: Path, prefix: str) -> None:
        self.path, self.prefix = path, prefix
        self.root = path.resolve().parent

    def fail(self, where: str, message: str) -> UsageError:
        return UsageError(f"{self.path}: {self.prefix}{where}: {message}" if where else f"{self.path}: {message}")

    def keys(self, table: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
        for key in table:
            if key not in allowed:
                loc = f"{where}.{key}" if where else key
                raise self.fail(loc, f"unknown key{did_you_mean(key, allowed)}; {valid_names(key, allowed)}")

    # scalars
    def table(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected a table, got {_kind(value)}")
        return value

    def string(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(where, f"expected a non-empty string, got {_kind(value)}")
        return value.strip()

    def choice(self, value: Any, where: str, choices: tuple[str, ...] | Mapping[str, Any]) -> str:
        text = self.string(value, where).lower()
        if text not in choices:
            raise self.fail(where, f"unknown value {value!r}{did_you_mean(text, choices)}; "
                                   f"valid: {', '.join(choices)}")
        return text

    def boolean(self, value: Any, where: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(where, f"expected true or false, got {_kind(value)}")
        return value

    def integer(self, value: Any, where: str, low: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(where, f"expected an integer, got {_kind(value)}")
        if value < low:
            raise self.fail(where, f"must be >= {low}, got {value}")
        return value

    def number(self, value: Any, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(where, f"expected a finite number, got {value!r}")
        return float(value)

    def limited(self, value: float, where: str, o: Any) -> float:
        """A number held to its option row's limits (the row's own one-line message)."""
        try:
            return float(o.parse(value, where))
        except UsageError as exc:
            raise self.fail(where, str(exc).removeprefix(f"{where}: ")) from None

    def names(self, value: Any, where: str, choices: tuple[str, ...] | Mapping[str, Any] | None = None) -> list[str]:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items:
            raise self.fail(where, f"expected a non-empty list of strings, got {_kind(value)}")
        out = [self.string(v, f"{where}[{i}]") for i, v in enumerate(items)]
        if choices is not None:
            out = [self.choice(v, f"{where}[{i}]", choices) for i, v in enumerate(out)]
        return list(dict.fromkeys(out))

    # paths
    def inside(self, value: Any, where: str, *, kind: str) -> Path:
        """A path relative to the config's directory that exists and stays inside it."""
        text = self.string(value, where)
        raw = Path(text).expanduser()
        if raw.is_absolute():
            raise self.fail(where, f"{text!r} is absolute; paths are relative to {self.root} and must stay inside it")
        path = (self.root / raw).resolve()  # follows symlinks: a link out of the root is refused too
        if not path.is_relative_to(self.root):
            raise self.fail(where, f"{text!r} escapes the config's directory {self.root}")
        if kind == "dir" and not path.is_dir():
            raise self.fail(where, f"{text!r} is not a directory ({path} missing)" if not path.exists()
                            else f"{text!r} is not a directory")
        if kind == "file" and not path.is_file():
            raise self.fail(where, f"{text!r} not found ({path})")
        if kind == "any" and not path.exists():
            raise self.fail(where, f"{text!r} not found ({path})")
        if path.is_dir():
            escaped = _escaping_link(path, self.root)
            if escaped is not None:
                raise self.fail(where, f"{text!r} holds {escaped.relative_to(path)!s}, a link to "
                                       f"{escaped.resolve()} outside the config's directory {self.root}")
        return path

    def corpus(self, value: Any, where: str) -> str:
        """A manifest corpus name, or a .txt/.tsv file under the root (returned absolute)."""
        text = self.string(value, where)
        if text.endswith((".txt", ".tsv")) or "/" in text or os.sep in text:
            path = self.inside(text, where, kind="file")
            try:
                load_corpus_file(path)  # format errors now, with the config key, not mid-run
            except CorpusError as exc:
                raise self.fail(where, str(exc)) from None
            return str(path)
        try:
            known = list_corpora()
        except CorpusError as exc:
            raise self.fail(where, str(exc)) from None
        if text not in known:
            raise self.fail(where, f"unknown corpus {text!r}{did_you_mean(text, known)}; known: {', '.join(known)} "
                                   "(or a .txt/.tsv file relative to the config)")
        return text

    def tolerances(self, value: Any, where: str) -> dict[str, dict[str, float]]:
        """Thresholds of every metric that takes a tolerance (``harness.metrics.registry``)."""
        metrics = METRICS.as_dict(*TOLERANCE_SCOPES)
        out: dict[str, dict[str, float]] = {}
        for prec, checks in self.table(value, where).items():
            p = self.choice(prec, f"{where}.{prec}", PRECISIONS)
            out[p] = {}
            for metric, threshold in self.table(checks, f"{where}.{prec}").items():
                loc = f"{where}.{prec}.{metric}"
                if metric not in metrics:
                    raise self.fail(loc, f"unknown metric{did_you_mean(metric, metrics)}; "
                                         f"{valid_names(metric, sorted(metrics))}")
                problem = metrics[metric].threshold_problem(threshold)  # the rule the CLI applies too
                if problem:
                    raise self.fail(loc, problem)
                out[p][metric] = float(threshold)
        return out

    def budgets(self, value: Any, where: str) -> dict[str, float]:
        """Limits of the perf budgets the registry declares (each one read by ``harness.perf.budgets``)."""
        known = budget_names()
        out: dict[str, float] = {}
        for key, amount in self.table(value, where).items():
            if key not in known:
                raise self.fail(f"{where}.{key}", f"unknown budget{did_you_mean(key, known)}; "
                                                  f"{valid_names(key, known)}")
            number = self.number(amount, f"{where}.{key}")
            if number <= 0:
                raise self.fail(f"{where}.{key}", f"must be > 0, got {number:g}")
            out[key] = number
        return out

    def margins(self, value: Any, where: str, model: str | None = None) -> tuple[MarginRule, ...]:
        """Accuracy-gate margin overrides (``harness.metrics.margins``): metric = {rel, abs, exact,
        advisory}, directly (every precision) or under a precision."""
        table = self.table(value, where)
        return tuple(rules_from_config(table, f"{self.path}: {self.prefix}{where}", model, f"{self.path.name}: {where}"))

    # tables
    def suite(self, data: dict[str, Any]) -> SuiteConfig:
        self.keys(data, TOP_KEYS, "")
        entries: dict[str, ModelEntry] = {}
        if "models" in data:
            for name, body in self.table(data["models"], "models").items():
                entries[name] = self.model(name, body)
        run = self.table(data.get("run", {}), "run")
        self.keys(run, RUN_KEYS, "run")
        values = {key: self.run_value(key, run[key], entries) for key in RUN_KEYS if key in run}
        return SuiteConfig(
            path=self.path, root=self.root, run=values,
            tolerances=self.tolerances(data["tolerances"], "tolerances") if "tolerances" in data else {},
            budgets=self.budgets(data["budgets"], "budgets") if "budgets" in data else {},
            entries=entries,
            margins=self.margins(data["margins"], "margins") if "margins" in data else (),
        )

    def run_value(self, key: str, value: Any, entries: dict[str, ModelEntry]) -> Any:
        """One ``[run]`` value, checked by its row in the option table."""
        where, o = f"run.{key}", option(key)
        if key == "models":
            return [self._listed_path(n, i, entries) for i, n in enumerate(self.names(value, where))]
        if key == "corpus":
            return self.corpus(value, where)
        if o.kind is Kind.LIST:
            return self.names(value, where, _CHOICES.get(key))
        if o.kind is Kind.INT:
            return self.integer(value, where, o.minimum if o.minimum is not None else 0)
        if o.kind is Kind.FLOAT:
            return self.limited(self.number(value, where), where, o)
        if o.kind is Kind.CHOICE:
            return self.choice(value, where, o.choices)
        if o.kind is Kind.FLAG:
            return self.boolean(value, where)

        if o.kind is Kind.PAIRS or is_axis(key):
            return self.runtime_value(key, value, where)
        return self.string(value, where)

    def runtime_value(self, key: str, value: Any, where: str) -> Any:
        """A runtime setting (``[run]`` or ``[models.<name>.runtime]``), checked now (EP options
        by the provider's backend), returned as the option would be given."""
        if is_axis(key):
            try:
                return axis_levels(key, value if isinstance(value, (str, list)) else str(value), "")
            except UsageError as exc:
                raise self.fail(where, str(exc).removeprefix(": ")) from None
        if not isinstance(value, (dict, list, str)):
            raise self.fail(where, f"expected a table or a list of strings, got {_kind(value)}")
        raw = [value] if isinstance(value, str) else value
        try:
            fields, _ = runtime_fields({key: raw}, "x")
            if key == "provider_options":
                validate_provider_options(fields["provider_options"], "x")
        except UsageError as exc:
            raise self.fail(where, str(exc).split(": ", 1)[-1]) from None
        return raw

    def model_runtime(self, value: Any, where: str) -> dict[str, Any]:
        """``[models.<name>.runtime]``: the run's runtime keys, as RuntimeSettings field values."""
        table = self.table(value, where)
        self.keys(table, tuple(runtime_keys()), where)
        given: dict[str, Any] = {}
        for key, item in table.items():
            loc = f"{where}.{key}"
            o = option(key)
            if is_axis(key):
                levels = self.runtime_value(key, item, loc)
                if len(levels) != 1:
                    raise self.fail(loc, "a model takes one level (a list of levels is a [run] matrix axis)")
                given[key] = levels
            elif o.kind is Kind.PAIRS:
                given[key] = self.runtime_value(key, item, loc)
            elif o.kind is Kind.INT:
                given[key] = self.integer(item, loc, o.minimum or 0)
            elif o.kind is Kind.CHOICE:
                given[key] = self.choice(item, loc, o.choices)
            elif o.kind is Kind.FLAG:
                given[key] = self.boolean(item, loc)
            else:
                given[key] = self.string(item, loc)
        fields, _ = runtime_fields(given, where)
        return fields

    def _listed_path(self, name: str, index: int, entries: dict[str, ModelEntry]) -> str:
        """``models = ["./my-model"]``: a directory under the root becomes an entry named after it."""
        if not (name.startswith(".") or "/" in name or os.sep in name):
            return name
        path = self.inside(name, f"run.models[{index}]", kind="dir")
        entry_name = path.name
        existing = entries.get(entry_name)
        if existing is not None and existing.path != path:
            raise self.fail(f"run.models[{index}]", f"{name!r} is named {entry_name!r}, which models.{entry_name} "
                                                "already defines with another path")
        entries.setdefault(entry_name, ModelEntry(name=entry_name, path=path))
        return entry_name

    def endpoint(self, body: Any, where: str) -> dict[str, Any]:
        """``[models.<name>.endpoint]``, checked whole now (url, served model, protocol...)."""
        table = dict(self.table(body, where))
        try:
            endpoint_from_table(table, where)
        except UsageError as exc:
            raise self.fail(where, str(exc).removeprefix(f"{where}: ").removeprefix(f"{where}")) from None
        return table

    def model(self, name: str, body: Any) -> ModelEntry:
        where = f"models.{name}"
        table = self.table(body, where)
        self.keys(table, MODEL_KEYS, where)
        if not name.strip() or any(c in name for c in "/\\ "):
            raise self.fail(where, "a model name must be non-empty without '/', '\\' or spaces")
        path = self.inside(table["path"], f"{where}.path", kind="dir") if "path" in table else None
        if path is None:
            stray = [k for k in SOURCE_KEYS if k in table]
            if stray:
                raise self.fail(f"{where}.{stray[0]}", "only a model with 'path' (a new model) may set this; "
                                                       f"{name!r} has no path, so it overrides a zoo model")
        artifacts: dict[str, Path] = {}
        if "artifacts" in table:
            for prec, rel in self.table(table["artifacts"], f"{where}.artifacts").items():
                p = self.choice(prec, f"{where}.artifacts.{prec}", PRECISIONS)
                artifacts[p] = self.inside(rel, f"{where}.artifacts.{prec}", kind="any")
        return ModelEntry(
            name=name, path=path,
            family=self.choice(table["family"], f"{where}.family", _family_names()) if "family" in table else None,
            description=self.string(table["description"], f"{where}.description") if "description" in table else None,
            corpus=self.corpus(table["corpus"], f"{where}.corpus") if "corpus" in table else None,
            target_lang=self.string(table["target_lang"], f"{where}.target_lang") if "target_lang" in table else None,
            exporter=self.choice(table["exporter"], f"{where}.exporter", EXPORTERS) if "exporter" in table else None,
            trust_remote_code=self.boolean(table.get("trust_remote_code", False), f"{where}.trust_remote_code"),
            allow_pickle=self.boolean(table.get("allow_pickle", False), f"{where}.allow_pickle"),
            tolerances=self.tolerances(table["tolerances"], f"{where}.tolerances") if "tolerances" in table else {},
            budgets=self.budgets(table["budgets"], f"{where}.budgets") if "budgets" in table else {},
            artifacts=artifacts,
            endpoint=self.endpoint(table["endpoint"], f"{where}.endpoint") if "endpoint" in table else None,
            io_protocol=dict(self.table(table["io_protocol"], f"{where}.io_protocol")) if "io_protocol" in table
            else None,
            int8_per_channel=(self.boolean(table["int8_per_channel"], f"{where}.int8_per_channel")
                              if "int8_per_channel" in table else None),
            fp16_op_block_list=(tuple(self.names(table["fp16_op_block_list"], f"{where}.fp16_op_block_list"))
                                if "fp16_op_block_list" in table else ()),
            margins=self.margins(table["margins"], f"{where}.margins", name) if "margins" in table else (),
            runtime=self.model_runtime(table["runtime"], f"{where}.runtime") if "runtime" in table else {},
            **{key: tuple(self.names(table[key], f"{where}.{key}"))
               for key in ("fp16_node_block_list", "int8_nodes_to_exclude") if key in table},
        )


#: the allowed names of list options (checked with did-you-mean)
_CHOICES: dict[str, tuple[str, ...] | Mapping[str, Any]] = {"precisions": PRECISIONS, "providers": PROVIDERS}


def _family_names() -> tuple[str, ...]:
    """The registered families (imported on need: the family modules import torch)."""
    return tuple(family_names())


def _escaping_link(directory: Path, root: Path) -> Path | None:
    """The first entry under ``directory`` (files as directories, at any depth) that is a symlink
    resolving outside ``root``, else None. The directory itself was resolved and held to the root;
    without this a weights file linked to ``/elsewhere`` would be read as if it were inside."""
    seen: set[Path] = set()
    for current, dirs, files in os.walk(directory, followlinks=True):
        here = Path(current)
        real = here.resolve()
        if real in seen:  # a link loop or two links to one directory: walked once
            dirs[:] = []
            continue
        seen.add(real)
        for name in sorted(dirs) + sorted(files):
            entry = here / name
            if entry.is_symlink() and not entry.resolve().is_relative_to(root):
                return entry
    return None


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    return f"{type(value).__name__} {value!r}"
