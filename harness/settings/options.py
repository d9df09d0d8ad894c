"""Every run option, declared once.

One row of :data:`OPTIONS` says what an option is called on the command line
(``harness run --samples``), in pytest (``--harness-samples``) and in the suite config
(``[run] samples``), its type, default and help, and whether it changes results. From the
table are derived: the ``harness run`` arguments, the pytest options, the ``harness run`` ->
pytest argument forwarding, the config file's ``[run]`` keys and value checks, and the
one-command rerun that every record carries. Before the table these were written six times
and drifted (the rerun command forgot ``--config`` and ``--threads``; ``harness run`` could not
set the TensorRT profile). Adding an option is one row here plus the code that reads its value.
"""

from __future__ import annotations

import argparse
import enum
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from harness.core import DEFAULT_PRECISIONS, Precision, UsageError, split_csv
from harness.core.compared import ALLOW_MISSING_HELP, TREND_ALLOW_MISSING_HELP
from harness.core.markdown import table
from harness.core.rundirs import BASELINE_STORE
from harness.export.reduce_range import CHOICES as REDUCE_RANGE_CHOICES
from harness.runners import DEFAULT_PROVIDERS


class Kind(str, enum.Enum):
    """How an option's value is written and parsed."""

    FLAG = "flag"  # present or not
    INT = "int"
    FLOAT = "float"
    TEXT = "text"
    CHOICE = "choice"  # one of ``choices``
    PATH = "path"
    LIST = "list"  # names: ``--models a b`` on the CLI, ``--harness-models=a,b`` in pytest, a TOML list
    INT_LIST = "int_list"  # ``--perf-batch-sizes 1 8`` / ``--harness-perf-batch-sizes=1,8``
    PAIRS = "pairs"  # repeatable ``NAME=VALUE``
    PATH_LIST = "path_list"  # ``--suites a/ b.py``: paths, one per argument
    REST = "rest"  # every argument after the flag, verbatim (``--pytest-args -x -q``)


class Rerun(str, enum.Enum):
    """Whether a record's rerun command repeats the option (it does for all that change results)."""

    NEVER = "never"  # where output goes, caches, gates: the numbers do not depend on it
    GIVEN = "given"  # repeated when the session set it explicitly
    ALWAYS = "always"  # repeated with the value the case used, set or not (data sizes: cheap to state)
    CASE = "case"  # the case's own value (model, precision, provider): written by the rerun itself


class Group(str, enum.Enum):
    RUN = "run"
    PERF = "perf"
    GATE = "gate"
    GEN = "gen"  # generation parity (``--harness-gen-*``): None leaves each model's own choice


@dataclass(frozen=True)
class Use:
    """A command other than ``harness run`` that takes an option, and what differs there: its own
    default or wording, a required option, one value of a list option (``harness bisect
    --precisions int8``: one precision is bisected), and ``was``, the spelling the command had
    before the option table made it one (``--precision``): accepted for one release as a hidden
    alias that prints one line naming the new spelling, so a team's CI script keeps working and
    says what to change."""

    command: str  # as typed after ``harness``: ``check``, ``baseline compare``
    help: str | None = None
    default: Any = None  # None: the row's default (an option of ``harness run``: unset, the config fills it)
    required: bool = False
    single: bool = False
    metavar: str | None = None
    was: str | None = None


@dataclass(frozen=True)
class Option:
    """One option. ``name`` is its key everywhere: the record's ``settings.options``, the
    ``[run]`` key of the config (when ``in_config``), ``--<name with dashes>`` on the CLI and
    ``--harness-<name with dashes>`` in pytest (``pytest_dest`` is its pytest attribute)."""

    name: str
    kind: Kind
    help: str
    group: Group = Group.RUN
    default: Any = None  # what applies when neither an argument nor the config sets it (documentation)
    choices: tuple[str, ...] = ()
    #: the smallest value accepted (INT, FLOAT); ``above`` (FLOAT): the value must be greater than it
    minimum: int | None = None
    above: float | None = None
    in_config: bool = False
    rerun: Rerun = Rerun.GIVEN
    metavar: str | None = None
    #: the CLI flag differs from the canonical spelling (``--samples``, kept for compatibility)
    cli_flag: str | None = None
    #: offered on the command line (``harness run`` and pytest); False: a config-file key only
    on_cli: bool = True
    #: a LIST whose items may hold spaces (paths: ``--models "/models/my model"``): items are
    #: separated by commas and repeated arguments only, never by whitespace
    spaced_items: bool = False
    #: the commands besides ``harness run`` that take it (a name, or a :class:`Use` where it differs)
    commands: tuple[str | Use, ...] = ()

    @property
    def uses(self) -> tuple[Use, ...]:
        return tuple(u if isinstance(u, Use) else Use(u) for u in self.commands)

    @property
    def flag(self) -> str:
        return self.cli_flag or "--" + self.name.replace("_", "-")

    @property
    def pytest_flag(self) -> str:
        return "--harness-" + self.name.replace("_", "-")

    @property
    def pytest_dest(self) -> str:
        return "harness_" + self.name

    @property
    def changes_results(self) -> bool:
        return self.rerun is not Rerun.NEVER

    def describe_default(self) -> str:
        return "" if self.default is None else describe(self.default)

    # -- values --------------------------------------------------------------------------
    def parse(self, raw: Any, where: str | None = None) -> Any:
        """A raw argument value (string, list of strings, int, bool) -> the typed value, or a
        one-line UsageError naming ``where`` (the flag by default). One parser per kind
        (``_PARSERS``): a new kind is one function there."""
        if raw is None:
            return None
        return _PARSERS[self.kind](self, raw, where or self.flag)

    def limit(self, value: float, where: str) -> None:
        """The row's bounds (``minimum``, ``above``), as one line naming ``where``."""
        if self.above is not None and not value > self.above:
            raise UsageError(f"{where}: must be > {self.above:g}, got {value:g}")
        if self.minimum is not None and value < self.minimum:
            raise UsageError(f"{where}: must be >= {self.minimum}, got {value:g}")

    def argv(self, value: Any, *, pytest_form: bool) -> list[str]:
        """The arguments that set ``value`` again (pytest form: ``--harness-x=v``)."""
        if value is None or value is False or value == [] or value == ():
            return []
        flag = self.pytest_flag if pytest_form else self.flag
        if self.kind is Kind.FLAG:
            return [flag]
        if self.kind in (Kind.LIST, Kind.INT_LIST):
            items = [str(v) for v in value]
            return [f"{flag}={','.join(items)}"] if pytest_form else [flag, *items]
        if self.kind is Kind.PAIRS:
            return [part for item in value for part in ((f"{flag}={item}",) if pytest_form else (flag, str(item)))]
        return [f"{flag}={value}"] if pytest_form else [flag, str(value)]


def _numeric(cast: Callable[[Any], float], what: str) -> Callable[[Option, Any, str], Any]:
    """The parser of an INT (``int``) or FLOAT (``float``) row: the cast, then the row's bounds."""
    def parse(o: Option, raw: Any, where: str) -> Any:
        try:
            value = cast(raw)
        except (TypeError, ValueError):
            raise UsageError(f"{where}: expected {what}, got {raw!r}") from None
        o.limit(value, where)
        return value
    return parse


def _choice(o: Option, raw: Any, where: str) -> str:
    text = str(raw).strip().lower()
    if text not in o.choices:
        raise UsageError(f"{where}: unknown value {raw!r}; valid: {', '.join(o.choices)}")
    return text


def _names(o: Option, raw: Any, where: str) -> list[str] | None:
    if o.spaced_items:
        items = [raw] if isinstance(raw, str) else list(raw)
        return [p.strip() for item in items for p in str(item).split(",") if p.strip()] or None
    return split_csv(raw) or None


def _integers(o: Option, raw: Any, where: str) -> list[int] | None:
    out: list[int] = []
    for part in split_csv(raw):
        try:
            out.append(int(part))
        except ValueError:
            raise UsageError(f"{where}: {part!r} is not an integer") from None
        o.limit(out[-1], where)
    return list(dict.fromkeys(out)) or None


def _pairs(o: Option, raw: Any, where: str) -> list[str] | None:
    items = [raw] if isinstance(raw, str) else list(raw)
    return [str(i) for i in items] or None


_PARSERS: dict[Kind, Callable[[Option, Any, str], Any]] = {
    Kind.FLAG: lambda o, raw, where: bool(raw),
    Kind.INT: _numeric(int, "an integer"),
    Kind.FLOAT: _numeric(float, "a number"),
    Kind.CHOICE: _choice,
    Kind.PATH: lambda o, raw, where: Path(str(raw)).expanduser(),
    Kind.TEXT: lambda o, raw, where: str(raw),
    Kind.LIST: _names,
    Kind.INT_LIST: _integers,
    Kind.PAIRS: _pairs,
    Kind.PATH_LIST: lambda o, raw, where: [Path(str(p)).expanduser() for p in ([raw] if isinstance(raw, str) else raw)] or None,
    Kind.REST: lambda o, raw, where: [str(p) for p in raw] or None,
}


_CACHE_ROOT = "cache root (default: $HARNESS_CACHE, else ~/.cache/model-harness)"

#: The table. Order is the order of ``--help``.
OPTIONS: tuple[Option, ...] = (
    # -- what runs ------------------------------------------------------------------------
    Option("models", Kind.LIST, "models to judge: zoo names or local HF dirs (default: the built-in zoo)",
           in_config=True, rerun=Rerun.CASE, metavar="NAMES", spaced_items=True,
           commands=(
               "doctor",
               "export-triton",
               Use("check", help="with --config: only these models"),
               Use("bench", help="default: the bench's own encoder and translator"),
               Use("calibrate", help="only these models (default: every model)"),
               Use("bisect", required=True, single=True, metavar="MODEL", help="one zoo name or local HF model dir"),
           )),
    Option("precisions", Kind.LIST, " ".join(p.value for p in Precision), default=tuple(p.value for p in DEFAULT_PRECISIONS),
           in_config=True, rerun=Rerun.CASE, metavar="LIST",
           commands=(
               "doctor",
               "export-triton",
               Use("init", help="precisions to gate (default fp32 fp16 int8)"),
               Use("check", single=True, metavar="PRECISION", was="--precision", help=f"{', '.join(p.value for p in Precision)}: "
                       "which tolerances apply (default: detected from the files)"),
               Use("bisect", single=True, required=True, metavar="PRECISION", was="--precision", help="fp16 or int8"),
               Use("perf-compare", single=True, default="fp32", metavar="PRECISION", was="--precision", help="precision "
                       "the backend runs the files at (OpenVINO's inference hint)"),
           )),
    Option("providers", Kind.LIST, "torch_cpu ort_cpu ov_cpu ort_cuda ort_trt trt_native ...",
           default=DEFAULT_PROVIDERS, in_config=True, rerun=Rerun.CASE, metavar="LIST",
           commands=(
               "doctor",
               "export-triton",
               Use("init", help="providers to gate on (default torch_cpu ort_cpu)"),
               Use("bench", help="providers to compare (default: torch_cpu, ort_cpu and every other CPU provider that "
                       "runs ONNX files here, e.g. ov_cpu)"),
               Use("check", single=True, default="ort_cpu", metavar="PROVIDER", was="--provider", help="a provider that "
                       "runs ONNX files: ort_* (ONNX Runtime), ov_cpu (OpenVINO), trt_native"),
               Use("bisect", single=True, default="ort_cpu", metavar="PROVIDER", was="--provider", help="--suggest: the "
                       "provider the fix is judged on"),
               Use("perf-compare", single=True, default="ort_cpu", metavar="PROVIDER", was="--provider", help="provider "
                       "both files run on (any that runs ONNX files, e.g. ov_cpu)"),
               Use("repro", single=True, metavar="PROVIDER", was="--provider", help="run on another provider than the "
                       "recorded one (e.g. ort_cuda to compare devices)"),
           )),
    Option("config", Kind.PATH, "declarative suite config (harness.toml or pyproject.toml [tool.harness]); "
           "default: harness.toml in the rootdir if present", metavar="FILE",
           commands=(
               "doctor",
               "export-triton",
               "baseline compare",
               "compare",
               Use("check", help="check every [models.<name>.artifacts] and [models.<name>.endpoint] entry of a suite "
                       "config instead"),
               Use("bisect", help="suite config (harness.toml / pyproject.toml [tool.harness]) as `harness run` reads "
                       "it; default: harness.toml in the working directory if present. Its models, exporter and node "
                       "lists apply, so the artifact bisected is the one the run judges"),
               Use("cache key", help="the config (default: harness.toml or pyproject.toml [tool.harness] here)"),
           )),
    # -- how data and artifacts are made: these change numbers ------------------------------
    Option("samples", Kind.INT, "corpus sentences per model", default=32, minimum=1, in_config=True,
           rerun=Rerun.ALWAYS,
           commands=(
               Use("check", help="corpus sentences for numeric parity (default 32)"),
               Use("bisect", default=8, help="corpus sentences in the one batch that is run"),
           )),
    Option("batch_size", Kind.INT, "sentences per batch", default=8, minimum=1, in_config=True,
           rerun=Rerun.ALWAYS,
           commands=(
               "check",
               Use("bench", default=1, help="sentences per timed call"),
               Use("perf-compare", default=1, was="--batch", help="batch size of the generated inputs"),
           )),
    Option("opset", Kind.INT, "ONNX opset", default=17, minimum=11, in_config=True, rerun=Rerun.ALWAYS,
           commands=("export-triton",)),
    Option("exporter", Kind.CHOICE, "torch.onnx exporter (default: torchscript, or the model's own default)",
           choices=("torchscript", "dynamo"), in_config=True,
           commands=("export-triton",)),
    Option("threads", Kind.INT, "intra-op threads for ONNX Runtime, OpenVINO and torch", minimum=1, in_config=True,
           commands=(
               "export-triton",
               "check",
               Use("bench", help="intra-op threads for torch and ORT alike (default: each library's own default)"),
               Use("perf-compare", help="intra-op threads for both sessions"),
               Use("repro", help="intra-op threads (default: the recorded ones)"),
           )),
    Option("corpus", Kind.TEXT, "default corpus (a manifest name or a .txt/.tsv file) of the models the config "
           "file defines (otherwise sentences_en)", in_config=True, on_cli=False,
           commands=(Use("check", help="corpus name or .txt/.tsv file (default: the model's)"),)),
    Option("fp16_block_list", Kind.LIST, "ONNX op types kept in FP32 by the FP16 conversion (e.g. Softmax Pow)",
           metavar="OPS",
           commands=("export-triton",)),
    Option("int8_per_channel", Kind.FLAG, "INT8 with per-channel weight scales (default: per tensor, or the "
           "model's own choice)",
           commands=("export-triton",)),
    Option("int8_reduce_range", Kind.CHOICE, "INT8 weights in 7 bits (ONNX Runtime's remedy for x86 CPUs without "
           "VNNI, whose u8s8 kernels saturate): auto = on for per-channel INT8 on such a CPU",
           choices=REDUCE_RANGE_CHOICES, default="auto", in_config=True, rerun=Rerun.ALWAYS),
    Option("trt_max_batch", Kind.INT, "TensorRT profile: largest batch (default: the batch size)", minimum=1,
           commands=("export-triton",)),
    Option("trt_max_seq", Kind.INT, "TensorRT profile: longest sequence in tokens", default=128, minimum=1,
           commands=("export-triton",)),
    # --- the harness in a team's own repository and CI ---------------------------------
    Option("target_lang", Kind.TEXT, "language of the generated text, for BLEU's tokenizer (zh, ja, ko, en, ...; "
           "default: the model's own, else detected from the references or outputs)", in_config=True, metavar="LANG"),
    Option("allow_skip", Kind.FLAG, "a requested variant that cannot run here (no such provider) is a skip; "
           "without it the case is 'not-run' and the run exits 1", in_config=True, rerun=Rerun.NEVER),
    Option("builtin_suites", Kind.FLAG, "also collect the built-in suites (harness.suites) beside your own tests "
           "or --suites", in_config=True, rerun=Rerun.NEVER),
    Option("junit_xml", Kind.PATH, "also write the run's JUnit XML here (always written as junit.xml in the "
           "run directory)", rerun=Rerun.NEVER, metavar="FILE"),
    # --- runtime settings (harness.core.runtime.RuntimeSettings), profiling, static INT8 ---
    Option("graph_optimization", Kind.LIST, "ONNX Runtime graph optimisation level(s): disabled basic extended all; "
           "several make it a matrix axis (ids get -opt_<level> for non-default levels)", default=("all",),
           in_config=True, rerun=Rerun.CASE, metavar="LEVELS",
           commands=("check", "export-triton")),
    Option("inter_threads", Kind.INT, "inter-op threads for ONNX Runtime (parallel execution mode)", minimum=1,
           in_config=True,
           commands=("check", "export-triton")),
    Option("execution_mode", Kind.CHOICE, "ONNX Runtime execution mode", choices=("sequential", "parallel"),
           default="sequential", in_config=True,
           commands=("check", "export-triton")),
    Option("mem_pattern", Kind.CHOICE, "ONNX Runtime memory pattern optimisation", choices=("on", "off"),
           default="on", in_config=True,
           commands=("check", "export-triton")),
    Option("cpu_arena", Kind.CHOICE, "ONNX Runtime CPU memory arena", choices=("on", "off"), default="on",
           in_config=True,
           commands=("check", "export-triton")),
    Option("session_config", Kind.PAIRS, "an ONNX Runtime session configuration entry, KEY=VALUE (e.g. "
           "session.intra_op.allow_spinning=0, session.disable_prepacking=1; repeatable; a key ONNX Runtime "
           "would ignore is refused)", in_config=True, metavar="KEY=VALUE",
           commands=("check",)),
    Option("max_memory", Kind.TEXT, "refuse a model directory or ONNX file whose estimated memory (declared "
           "sizes at the judged batch and length) exceeds this, e.g. 16G (default: the memory this machine has "
           "available)", in_config=True, rerun=Rerun.NEVER, metavar="SIZE",
           commands=("check",)),
    Option("max_nodes", Kind.INT, "refuse an ONNX graph with more nodes than this (subgraphs included)",
           default=500_000, minimum=1, in_config=True, rerun=Rerun.NEVER, metavar="N",
           commands=("check",)),
    Option("custom_op_library", Kind.PATH, "a shared library of ONNX Runtime custom-op kernels to load "
           "(onnxruntime-extensions, a vendor's ops); without it a graph that uses a custom-op domain is "
           "refused and no library is ever loaded", metavar="LIB",
           commands=("check",)),
    Option("provider_options", Kind.PAIRS, "an execution-provider option, PROVIDER:KEY=VALUE "
           "(e.g. ort_cuda:cudnn_conv_algo_search=HEURISTIC; repeatable; validated by the provider's backend)",
           in_config=True, metavar="PROVIDER:KEY=VALUE", cli_flag="--provider-option",
           commands=("check", "export-triton")),
    Option("trt_profile", Kind.PAIRS, "TensorRT optimisation profile of one input, trtexec-like "
           "INPUT:MIN,OPT,MAX (e.g. input_ids:1x16,8x64,16x256; repeatable; <graph>.INPUT for one graph)",
           in_config=True, metavar="INPUT:MIN,OPT,MAX",
           commands=("export-triton",)),
    Option("trt_engine_cache", Kind.PATH, "TensorRT engine cache directory (default: beside the artifact)",
           in_config=True, metavar="DIR",
           commands=("export-triton",)),
    Option("trt_timing_cache", Kind.PATH, "TensorRT timing cache directory", in_config=True, metavar="DIR",
           commands=("export-triton",)),
    Option("profile", Kind.FLAG, "ONNX Runtime profiling of each judged session: top ops, share per op type, "
           "first run vs steady in the record and summary; the trace stays in the case directory",
           commands=("check",)),
    Option("int8_calibration", Kind.CHOICE, "int8-static calibration method", choices=("minmax", "entropy",
           "percentile"), default="minmax", in_config=True),
    Option("int8_calibration_samples", Kind.INT, "int8-static calibration sentences, taken from the corpus after "
           "the judged ones (never the same sentences)", default=32, minimum=1, in_config=True, metavar="N"),
    # --- models over 2 GB (harness/export/external.py, docs/large-models.md) ---
    Option("external_data", Kind.CHOICE, "store ONNX artifacts' weights in a model.onnx.data file beside the graph: "
           "auto (above 1.5 GB of weights), always, never", choices=("auto", "always", "never"), default="auto",
           in_config=True,
           commands=(
               "export-triton",
               Use("bisect", default="auto", help="bisect the artifacts built with this --external-data mode (as `harness run`)"),
           )),
    Option("release_models", Kind.CHOICE, "free a model's PyTorch module and its FP16/INT8 copies when a case "
           "ends (loaded again by the next case that needs it): auto (models of 1 GB or more of weights), "
           "always, never", choices=("auto", "always", "never"), default="auto", in_config=True,
           rerun=Rerun.NEVER,
           commands=(Use("check", help="judge in stages so the PyTorch module and the files' sessions are never "
                                       "alive together (references first, the module freed, then the files): auto "
                                       "(files of 1 GB or more), always, never (docs/large-models.md)"),)),
    # --- precision fixes (`harness bisect --suggest` finds them, docs/bisect.md) ---
    Option("fp16_node_block_list", Kind.LIST, "ONNX node names kept in FP32 by the FP16 conversion "
           "(onnxconverter-common node_block_list; a name applies to every graph of the model that has it)",
           in_config=True, metavar="NODES", spaced_items=True),
    Option("int8_nodes_to_exclude", Kind.LIST, "ONNX node names INT8 quantisation leaves in FP32 (onnxruntime "
           "nodes_to_exclude, dynamic and static)", in_config=True, metavar="NODES", spaced_items=True),
    # -- where things go: no effect on numbers ------------------------------------------------
    # --- repro bundles of failing cases (harness/repro/, docs/repro.md) ---
    Option("repro_bundles", Kind.CHOICE, "repro bundle of each failing numeric, embedding, generation, "
           "perf-budget or erroring case (cases/<id>/repro-*/, re-judged by `harness repro`): auto copies the "
           "ONNX file when <= 32 MiB, else path+sha256; bytes always copies it; off writes none",
           choices=("auto", "bytes", "off"), default="auto", in_config=True,
           rerun=Rerun.NEVER,
           commands=("check",)),
    Option("out", Kind.PATH, "run directory for results.jsonl and summary.md (default: reports/run-<time>)",
           rerun=Rerun.NEVER, metavar="DIR",
           commands=(
               Use("check", help="run directory (default: reports/check-<time>)"),
               Use("bisect", help="report directory (default: reports/bisect-<time>)"),
               Use("merge", help="merged run directory (default: reports/merged-<time>)"),
               Use("calibrate", metavar="FILE", help="write the snippet here instead of stdout"),
               Use("export-triton", default=Path("model_repository"), help="repository directory"),
           )),
    Option("cache", Kind.PATH, "cache for built models and artifacts (default: $HARNESS_CACHE or "
           "~/.cache/model-harness)", rerun=Rerun.NEVER, metavar="DIR",
           commands=(
               "export-triton",
               "bench",
               Use("cache info", help=_CACHE_ROOT),
               Use("cache verify", help=_CACHE_ROOT),
               Use("cache prune", help=_CACHE_ROOT),
           )),
    # --- sharding across machines (harness/shard/, docs/sharding.md) ---
    Option("shard", Kind.TEXT, "run only shard K of N of the case matrix (deterministic; combine the shard "
           "directories with `harness merge`)", rerun=Rerun.NEVER, metavar="K/N"),
    Option("shard_durations", Kind.TEXT, "balance shards by the case durations of a run directory or a history "
           "database (path or URL); every shard must be given the same one", rerun=Rerun.NEVER, metavar="SOURCE"),
    # --- reference cache, where the time goes ---
    Option("fresh_references", Kind.FLAG, "recompute the PyTorch FP32 references (outputs, decodes) and the cached "
           "outputs of CPU variants instead of reading them from the reference cache, and rewrite the entries",
           rerun=Rerun.NEVER),
    Option("durations", Kind.INT, "list the N slowest phases and cases at the end of the run (0: all)",
           minimum=0, rerun=Rerun.NEVER, metavar="N"),
    Option("progress", Kind.CHOICE, "progress while cases run: auto (on a terminal a live display of cases done/total, "
           "the running cases and their phases, elapsed and ETA; piped, as in CI logs, one line per finished case "
           "([12/60] PASS <variant> <suite> 1.2 s) and a heartbeat for a case running over 30 s), lines (the lines "
           "always), off",
           choices=("auto", "lines", "off"), default="auto", rerun=Rerun.NEVER),
    # -- performance ------------------------------------------------------------------------
    Option("perf", Kind.FLAG, "run the performance suites: latency, fresh-process cold start and memory, generation",
           group=Group.PERF,
           commands=(
               "check",
               Use("baseline compare", help="re-time the blessed artifacts and the candidate's interleaved in this job "
                       "(paired) where both are at hand; the rest unpaired (the output says which and why)"),
           )),
    Option("perf_samples", Kind.INT, "timed calls per latency metric (p99 needs >= 1000 to be trusted)",
           group=Group.PERF, default=300, minimum=1, metavar="N",
           commands=("check",)),
    Option("perf_warmup", Kind.INT, "untimed calls before each latency metric", group=Group.PERF, default=20,
           minimum=0, metavar="N",
           commands=("check",)),
    Option("perf_time_budget", Kind.INT, "seconds of timed calls per latency case, shared by its metrics: an "
           "expensive metric stops early (never below 40 calls) and records why (0: no limit)",
           group=Group.PERF, default=30, minimum=0, metavar="S",
           commands=("check",)),
    Option("perf_batch_sizes", Kind.INT_LIST, "batch sizes to time (the first is the gated latency_ms)",
           group=Group.PERF, default=(1,), minimum=1, metavar="LIST",
           commands=("check",)),
    Option("perf_seq_lens", Kind.INT_LIST, "sequence-length buckets in tokens", group=Group.PERF, default=(32,),
           minimum=1, metavar="LIST",
           commands=("check",)),
    Option("perf_repeats", Kind.INT, "fresh processes per variant for cold start and memory", group=Group.PERF,
           default=3, minimum=1, metavar="N",
           commands=("check",)),
    Option("perf_new_tokens", Kind.INT, "tokens per timed generation", group=Group.PERF, default=16, minimum=2,
           metavar="N",
           commands=("check",)),
    Option("perf_tail_seconds", Kind.INT, "extra seconds per latency metric to time until its p99 interval is "
           "narrower than the gate's p99 threshold (0: time --perf-samples calls only; p99 stays advisory)",
           group=Group.PERF, default=2, minimum=0, metavar="S",
           commands=("check",)),
    # -- generation parity (harness/judge/generation.py): unset leaves each model's own choice ----
    Option("gen_samples", Kind.INT, "sentences decoded per model, spread over its corpus; 0 = all (default: 48, "
           "numbers-en-zh: all)", group=Group.GEN, minimum=0, in_config=True, metavar="N",
           commands=(Use("check", help="sentences to decode for generation parity"),)),
    Option("gen_max_new_tokens", Kind.INT, "new tokens per sentence (default 32; numbers-en-zh 40)",
           group=Group.GEN, minimum=1, in_config=True, metavar="N"),
    Option("gen_beams", Kind.INT, "beam width; 1 = greedy (default)", group=Group.GEN, minimum=1, in_config=True,
           metavar="K"),
    Option("gen_cache", Kind.CHOICE, "decode with the KV-cache graphs (on, default) or re-run the full decoder "
           "per step (off)", group=Group.GEN, choices=("on", "off"), in_config=True),
    Option("gen_repetition_penalty", Kind.FLOAT, "repetition penalty as in generate() (default: the model's "
           "generation_config)", group=Group.GEN, above=0, in_config=True, metavar="F"),
    Option("gen_batch_size", Kind.INT, "sentences per decoding batch (default 16)", group=Group.GEN, minimum=1,
           in_config=True, metavar="N"),
    Option("gen_worst", Kind.INT, "worst sentences per case kept for summary.md (default 5)", group=Group.GEN,
           minimum=0, in_config=True, rerun=Rerun.NEVER, metavar="N"),
    # -- the baseline gate: judges the numbers, does not change them -------------------------
    Option("baseline_save", Kind.TEXT, "at the end of a passing session, save its perf records as baseline NAME",
           group=Group.GATE, rerun=Rerun.NEVER, metavar="NAME"),
    Option("baseline_compare", Kind.TEXT, "at session end, compare with baseline NAME; exit 1 on a confirmed "
           "regression", group=Group.GATE, rerun=Rerun.NEVER, metavar="NAME"),
    Option("baseline_store", Kind.PATH, "where baselines live (default: reports/baselines)", group=Group.GATE,
           rerun=Rerun.NEVER, metavar="DIR",
           commands=(
               Use("baseline save", default=BASELINE_STORE, was="--store"),
               Use("baseline compare", default=BASELINE_STORE, was="--store"),
               Use("baseline env", default=BASELINE_STORE, was="--store"),
               Use("baseline list", default=BASELINE_STORE, was="--store"),
           )),
    Option("baseline_force", Kind.FLAG, "let a baseline save replace an existing baseline", group=Group.GATE,
           rerun=Rerun.NEVER,
           commands=(Use("baseline save", was="--force", help="replace an existing baseline of the same name"),)),
    Option("baseline_force_env", Kind.FLAG, "compare even though the environment fingerprints differ",
           group=Group.GATE, rerun=Rerun.NEVER,
           commands=(Use("baseline compare", was="--force-env"),)),
    Option("allow_missing", Kind.FLAG, "the session-end baseline gate (and `harness baseline compare`, "
           "`compare`) passes although the candidate lacks cases the baseline has, or nothing was compared "
           "(the verdict line says so); without it either is a failure",
           group=Group.GATE, rerun=Rerun.NEVER,
           commands=(
               Use("baseline compare", help=ALLOW_MISSING_HELP),
               Use("compare", help=ALLOW_MISSING_HELP),
               Use("merge", help=ALLOW_MISSING_HELP),
               Use("history show", help=TREND_ALLOW_MISSING_HELP),
               Use("history changes", help=TREND_ALLOW_MISSING_HELP),
           )),
    Option("baseline_threshold", Kind.PAIRS, "override a gate threshold, e.g. p50=8%% (repeatable)",
           group=Group.GATE, rerun=Rerun.NEVER, metavar="METRIC=FRACTION",
           commands=(
               Use("baseline compare", was="--threshold", help="override an effect threshold, e.g. p50=8%% (repeatable; "
                       "see docs/perf-gate.md)"),
               Use("perf-compare", was="--threshold", help="override an effect threshold, e.g. p50=8%% (repeatable)"),
           )),
    # --- accuracy gate against a blessed baseline (docs/accuracy-gate.md) ---
    Option("accuracy_margin", Kind.PAIRS, "override an accuracy-gate margin against the baseline, e.g. "
           "int8:embedding_cosine=10%%,0.002 or minilm-l6:int8:cosine=rel=5%% or fp32:top1_agreement=exact "
           "(repeatable; [margins] in harness.toml)", group=Group.GATE, rerun=Rerun.NEVER,
           metavar="[MODEL:][PREC:]METRIC=REL[,ABS]",
           commands=("baseline compare", "compare", "calibrate")),
)

BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}
#: the ``[run]`` keys of the suite config
CONFIG_KEYS: tuple[str, ...] = tuple(o.name for o in OPTIONS if o.in_config)


def option(name: str) -> Option:
    return BY_NAME[name]


def in_group(group: Group) -> tuple[Option, ...]:
    return tuple(o for o in OPTIONS if o.group is group)


# -- generated front ends -------------------------------------------------------------------------
def _help(o: Option) -> str:
    return help_text(o)


def help_text(o: Option, wording: str | None = None, default: Any = None, *, row_default: bool = True) -> str:
    """An option's ``--help`` line: the command's own ``wording`` or the row's help, with the default
    the command applies (``default``, else the row's unless ``row_default`` is False) unless the
    wording already says it."""
    text = wording or o.help
    shown = describe(default) if not unset(default) else \
        (o.describe_default() if row_default else "")
    return f"{text} (default {shown})" if shown and "default" not in text else text


def unset(value: Any) -> bool:
    """No value to show: None, False, an empty list or text (0 is a value)."""
    return value is None or value is False or (isinstance(value, (list, tuple, str)) and not value)


def describe(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def add_pytest_options(parser: Any, group: Group, *, title: str, description: str) -> None:
    """Register ``group``'s options with pytest (``--harness-...``). Lists are repeatable and
    comma-separated; every default is None so the config file can fill what was not given.
    Config-only options (``on_cli=False``) are not offered here either."""
    pgroup = parser.getgroup(title, description)
    for o in in_group(group):
        if not o.on_cli:
            continue
        kwargs: dict[str, Any] = {"dest": o.pytest_dest, "help": _help(o)}
        if o.kind is Kind.FLAG:
            pgroup.addoption(o.pytest_flag, action="store_true", default=False, **kwargs)
            continue
        if o.kind in (Kind.LIST, Kind.INT_LIST, Kind.PAIRS):
            kwargs["action"] = "append"
        elif o.kind is not Kind.PATH:
            kwargs.update(scalar_parsing(o))
        pgroup.addoption(o.pytest_flag, default=None, metavar=o.metavar or o.name.upper(), **kwargs)


def scalar_parsing(o: Option) -> dict[str, Any]:
    """argparse's ``type`` / ``choices`` for a scalar row: the one place both the pytest options
    and the subcommands' flags derive them from (``Option.parse`` still checks limits)."""
    if o.kind is Kind.INT:
        return {"type": int}
    if o.kind is Kind.FLOAT:
        return {"type": float}
    if o.kind is Kind.CHOICE:
        return {"choices": o.choices}
    return {}


def spaced_list_value(args: Sequence[str], is_path: Callable[[str], bool]) -> str | None:
    """The one-line error for ``--harness-precisions fp32 int8``: pytest reads one value per
    option, so ``int8`` becomes a test path and the session ends ``file or directory not found:
    int8``. Accepting space-separated values (``nargs``) is not safe in pytest: the option would
    swallow the test paths that follow it (``--harness-models a b tests/``, where a model may be
    a path too). So lists take commas, and a word after a list option's value that is no path
    (``is_path``) is named with the spelling that works."""
    flags = {o.pytest_flag for o in OPTIONS if o.kind in (Kind.LIST, Kind.INT_LIST) and o.on_cli}
    for i, word in enumerate(args[:-2]):
        if word in flags and not args[i + 1].startswith("-") and not args[i + 2].startswith("-") \
                and not is_path(args[i + 2]):
            values = [args[i + 1]]
            for extra in args[i + 2:]:
                if extra.startswith("-") or is_path(extra):
                    break
                values.append(extra)
            return (f"{word} {' '.join(values)}: pytest takes one value per option and reads "
                    f"{values[1]!r} as a test path; write {word}={','.join(values)}")
    return None


def pytest_values(config: Any, group: Group | None = None) -> dict[str, Any]:
    """The options this pytest session set explicitly, parsed: ``{name: value}``."""
    out: dict[str, Any] = {}
    for o in OPTIONS:
        if group is not None and o.group is not group:
            continue
        try:
            raw = config.getoption(o.pytest_dest)
        except ValueError:  # the group's plugin is not loaded in this session
            continue
        value = o.parse(raw, o.pytest_flag)
        if value is not None and value is not False:
            out[o.name] = value
    return out


def cli_values(args: argparse.Namespace) -> dict[str, Any]:
    """The options a ``harness`` subcommand was given explicitly, parsed."""
    out: dict[str, Any] = {}
    for o in OPTIONS:
        if not hasattr(args, o.name):
            continue
        value = o.parse(getattr(args, o.name), o.flag)
        if value is not None and value is not False:
            out[o.name] = value
    return out


class _ArgparseGroup:
    """``add_pytest_options``'s pytest parser, over an argparse parser (``pytest_form_values``)."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser

    def getgroup(self, *_: Any) -> "_ArgparseGroup":
        return self

    def addoption(self, *flags: str, **kwargs: Any) -> None:
        self.parser.add_argument(*flags, **kwargs)


def pytest_form_values(args: Sequence[str]) -> dict[str, Any]:
    """The options set in pytest's form (``--harness-x``) among ``args`` (``harness run --pytest-args``),
    parsed as the plugin parses them; other arguments are pytest's and ignored here. A front end that
    hands its options whole to the session (``harness.session.Handoff``) must fold these in: the
    session does not rebuild its options from pytest's flags (xdist workers do)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for group in Group:
        add_pytest_options(_ArgparseGroup(parser), group, title="", description="")
    known, _ = parser.parse_known_args(list(args))
    out: dict[str, Any] = {}
    for o in OPTIONS:
        value = o.parse(getattr(known, o.pytest_dest, None), o.pytest_flag)
        if value is not None and value is not False:
            out[o.name] = value
    return out


def pytest_argv(values: Mapping[str, Any]) -> list[str]:
    """``harness run`` -> pytest: the same settings as ``--harness-...`` arguments."""
    out: list[str] = []
    for o in OPTIONS:
        if o.name in values:
            out += o.argv(values[o.name], pytest_form=True)
    return out


# -- reproduction ---------------------------------------------------------------------------------
def recordable(values: Mapping[str, Any]) -> dict[str, Any]:
    """The explicitly set options that change results, JSON-ready (paths absolute, so the
    rerun works from any directory): what a record keeps in ``settings.options``."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        o = BY_NAME.get(name)
        if o is None or not o.changes_results or o.rerun is Rerun.CASE:  # the case's own values: in the rerun itself
            continue
        if isinstance(value, Path):
            value = str(value.resolve())
        elif isinstance(value, tuple):
            value = list(value)
        out[name] = value
    return out


#: record ``settings`` fields written before ``settings.options`` existed (harness 0.1 records)
_LEGACY_SETTINGS = {"samples": "num_samples", "batch_size": "batch_size", "opset": "opset"}


def rerun_command(nodeid: str, case: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    """One command that re-runs exactly this case with every setting that changes its
    result: the case's model, precision and provider, the data sizes it used, and every
    other results-changing option the session set (config file, threads, exporter, ...)."""
    function = nodeid.split("::")[-1].split("[")[0]
    given: dict[str, Any] = dict(settings.get("options") or {})
    for name, key in _LEGACY_SETTINGS.items():  # effective sizes, set or not
        if settings.get(key) is not None:
            given[name] = settings[key]
    if isinstance(settings.get("int8_reduce_range"), bool) and str(case.get("precision") or "").startswith("int8"):
        # the effective value (`auto` depends on the CPU), for the cases it changes: INT8 artifacts
        given["int8_reduce_range"] = "on" if settings["int8_reduce_range"] else "off"
    if "options" not in settings:  # an older record: what it knew how to say
        if settings.get("exporter_explicit") and settings.get("exporter"):
            given["exporter"] = settings["exporter"]
        if settings.get("int8_per_channel_forced"):
            given["int8_per_channel"] = True
        if settings.get("fp16_op_block_list"):
            given["fp16_block_list"] = list(settings["fp16_op_block_list"])
    suite_file = nodeid.split("::")[0]
    # a built-in suite is found by `harness run` itself wherever the harness is installed; its node
    # id path is relative to whatever rootdir pytest chose, so it is not repeated
    builtin = str(case.get("suite_module") or "").startswith("harness.suites.") or _builtin_suite(suite_file)
    parts = ["harness", "run"] if builtin else ["harness", "run", "--suites", suite_file]
    for name in ("models", "precisions", "providers"):
        parts += [option(name).flag, str(case.get(name.rstrip("s")) or "")]
    for pair in str(case.get("runtime") or "").split(","):  # the case's runtime axis values
        axis, _, value = pair.partition("=")
        if axis and value and axis in BY_NAME:
            parts += [option(axis).flag, value]
    for o in OPTIONS:  # config-only options come back with --config
        if o.rerun in (Rerun.GIVEN, Rerun.ALWAYS) and o.on_cli and o.name in given:
            parts += o.argv(given[o.name], pytest_form=False)
    parts += ["-k", f"{function} and {case.get('variant')}"]
    return " ".join(shlex.quote(p) if p and not _plain(p) else p for p in parts)


def _builtin_suite(path: str) -> bool:
    """Whether a node id's file is one of the suites shipped in ``harness/suites`` (the directory
    beside this package, found without importing the suites)."""
    parts = Path(path).parts
    suites = Path(__file__).resolve().parents[1] / "suites"
    return len(parts) >= 3 and parts[-3:-1] == ("harness", "suites") and (suites / parts[-1]).is_file()


def _plain(text: str) -> bool:
    return all(c.isalnum() or c in "-_./=,:+" for c in text)


def docs_table(group: Group) -> str:
    """docs/options.md: ``group``'s options as a Markdown table (generated, never hand-written)."""
    rows = []
    for o in in_group(group):
        cli = f"`{o.flag}`" if o.on_cli else "–"
        pytest_flag = f"`{o.pytest_flag}`" if o.on_cli else "–"
        config = f"`{o.name}`" if o.in_config else "–"
        default = f"`{o.describe_default()}`" if o.describe_default() else "–"
        changes = {Rerun.NEVER: "no", Rerun.CASE: "yes (the case)", Rerun.GIVEN: "yes", Rerun.ALWAYS: "yes"}[o.rerun]
        rows.append([cli, pytest_flag, config, default, changes, o.help.replace("%%", "%")])
    return "\n".join(table(["`harness run`", "pytest", "config `[run]`", "default", "changes results", "what"], rows))


_CONFIG_TYPES = {Kind.LIST: "list of names", Kind.INT: "int", Kind.FLOAT: "number", Kind.TEXT: "string", Kind.CHOICE: "one of",
                 Kind.FLAG: "true/false", Kind.PATH: "path", Kind.INT_LIST: "list of ints", Kind.PAIRS: "list"}


def config_docs_table() -> str:
    """docs/config.md: the ``[run]`` keys (the config options of the table)."""
    rows = []
    for o in OPTIONS:
        if not o.in_config:
            continue
        kind = _CONFIG_TYPES[o.kind]
        if o.kind is Kind.CHOICE:
            kind = " \\| ".join(f"`{c}`" for c in o.choices)
        elif o.minimum is not None:
            kind += f" ≥ {o.minimum}"
        elif o.above is not None:
            kind += f" > {o.above:g}"
        default = f"`{o.describe_default()}`" if o.describe_default() else "–"
        rows.append([f"`{o.name}`", kind, default, o.help])
    return "\n".join(table(["key", "type", "default", "meaning"], rows))


# -- the typed values: harness/core/values.py is generated from the table -----------------------
_PY_TYPES = {Kind.FLAG: "bool", Kind.INT: "int", Kind.FLOAT: "float", Kind.TEXT: "str", Kind.CHOICE: "str",
             Kind.PATH: "Path", Kind.LIST: "tuple[str, ...]", Kind.INT_LIST: "tuple[int, ...]",
             Kind.PAIRS: "tuple[str, ...]"}
_SEQUENCES = (Kind.LIST, Kind.INT_LIST, Kind.PAIRS)


def typed(o: Option, value: Any) -> Any:
    """A parsed option value as the typed settings hold it: sequences as tuples, a flag as a
    bool, an unset sequence as ``()``."""
    if o.kind is Kind.FLAG:
        return bool(value)
    if o.kind in _SEQUENCES:
        return tuple(value) if value is not None else ()
    if o.kind is Kind.PATH and isinstance(value, str):  # a config file's path value
        return Path(value)
    return value


def typed_default(o: Option) -> Any:
    return typed(o, o.default)


def settings_source() -> str:
    """The source of ``harness/core/values.py``: one typed field per option, named as the option,
    defaulting to the table's default. Generated (``python scripts/render_metric_docs.py``; a test
    and ``--check`` hold it to the table) so the core layer, which imports nothing of the
    harness, carries the typed values without a second declaration to keep in step."""
    lines = [
        '"""The resolved value of every run option: one typed field per row of the option table.',
        "",
        "GENERATED from ``harness/settings/options.py`` by ``python scripts/render_metric_docs.py``;",
        "do not edit. A field is named exactly as its option (``samples``, ``threads``) and defaults to",
        "the table's default; ``harness.settings.resolve.build_options`` fills it explicit > config >",
        "default by iterating the table. Sequences are tuples; an unset sequence is ``()``.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from dataclasses import dataclass",
        "from pathlib import Path",
        "",
        "",
        "@dataclass(frozen=True)",
        "class Settings:",
        '    """Every option\'s value for one run (``RunOptions.settings``)."""',
        "",
    ]
    for o in OPTIONS:
        py = _PY_TYPES[o.kind]
        value = typed_default(o)
        if value is None:
            py += " | None"
        lines.append(f"    {o.name}: {py} = {value!r}")
    return "\n".join(lines) + "\n"

