"""Every command's options, declared once, and the argparse parsers derived from them.

``harness run``'s options are the rows of :data:`harness.settings.options.OPTIONS` (they also
have a pytest form and a config key); a row's ``commands`` names the other commands that take it
(``harness check --samples`` is ``harness run --samples``). :data:`COMMAND_OPTIONS` holds the
options only other commands take (``--json``, ``--pairs``, ``--endpoint``). Each command's parser
is derived from both (:func:`add_command_options`): a flag, its type, choices, default and help
are written once, in a row; a command's own wording or default is a :class:`Use` of the row.

One concept has one spelling on every command: the spelling ``harness run`` gives it (the one
in every record's rerun command, the pytest form and the config key). A command that spelled a
concept otherwise (``--precision``, ``--threshold``, ``--db``) still accepts its old spelling for
one release, hidden, with one line on stderr naming the new one (``Use.was``): a team's CI script
keeps working and is told what to change; :data:`RENAMED` lists them for docs/options.md.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from harness.core.markdown import table
from harness.core.rundirs import HISTORY_DB_HELP
from harness.settings.endpoint import PROTOCOLS
from harness.settings.options import OPTIONS, Kind, Option, Use, describe, help_text, scalar_parsing, unset

#: The options no ``harness run`` takes. Order is the order of ``--help``.
COMMAND_OPTIONS: tuple[Option, ...] = (
    # -- harness run's own (not options of the session: what pytest is asked to collect and how) --
    Option("suites", Kind.PATH_LIST, "suite directories or files (default: the built-in suites; --builtin-suites "
           "adds them to yours)", metavar="PATH", commands=("run",)),
    Option("keyword", Kind.TEXT, "pytest -k expression to select cases", cli_flag="-k", commands=("run",)),
    Option("workers", Kind.TEXT, "pytest-xdist workers (e.g. 2 or auto)", cli_flag="-n", commands=("run",)),
    Option("pytest_args", Kind.REST, "passed to pytest verbatim", commands=("run",)),
    # -- judging files someone else built (harness check) ------------------------------------------
    Option("reference", Kind.TEXT, "the HF model directory the artifact was exported from (or a zoo model name)",
           metavar="DIR", commands=("check",)),
    Option("onnx", Kind.PATH, "an .onnx file, or a directory in optimum's layout (encoder_model.onnx, "
           "decoder_model.onnx, decoder_with_past_model.onnx, decoder_model_merged.onnx, model.onnx)",
           metavar="PATH", commands=("check",)),
    Option("no_generation", Kind.FLAG, "numeric parity only", commands=("check",)),
    Option("map", Kind.PAIRS, "pair a reference input/output with an artifact one by hand (repeatable; the "
           "protocol's names)", default=(), metavar="REFERENCE=ARTIFACT", commands=("check",)),
    Option("io_protocol", Kind.PATH, "the artifact's I/O protocol (TOML): mask form, padding, logits, cache naming, "
           "static shapes, names; overrides what is inferred from the file (docs/check.md)", metavar="FILE",
           commands=("check",)),
    Option("tolerance", Kind.PAIRS, "override a threshold at the judged precision, e.g. cosine=0.999 (repeatable; "
           "[models.<name>.tolerances] in harness.toml)", default=(), metavar="METRIC=VALUE",
           commands=("check", Use("bisect", help="override a per-tensor threshold, e.g. norm_max_abs=0.01 or "
                                                 "cosine=0.999 (repeatable)"))),
    Option("trust_remote_code", Kind.FLAG, "allow the reference directory's own Python code to run (off: such "
           "directories are refused)", commands=("check",)),
    Option("allow_pickle", Kind.FLAG, "accept pickle weights (read with torch.load(weights_only=True)); off: "
           "safetensors only", commands=("check",)),
    # -- a served model (harness check --endpoint) -------------------------------------------------
    Option("endpoint", Kind.TEXT, "judge the model a server serves instead of files: http://HOST:PORT or "
           "grpc://HOST:PORT", metavar="URL", commands=("check",)),
    Option("served_model", Kind.PAIRS, "the served model's name; ROLE=NAME (encoder=, decoder=, decoder_with_past=) "
           "for a seq2seq split served as several models (repeatable)", default=(), metavar="[ROLE=]NAME",
           commands=("check",)),
    Option("protocol", Kind.CHOICE, "transport when the URL has no scheme (default http)", choices=PROTOCOLS,
           commands=("check",)),
    Option("served_version", Kind.TEXT, "the model version (default: the server's)", metavar="V", commands=("check",)),
    Option("request_timeout", Kind.FLOAT, "seconds one request may take (default 30); slower is a counted error",
           above=0, metavar="S", commands=("check",)),
    Option("concurrency", Kind.INT_LIST, "with --perf: the load sweep's concurrency levels (default 1 2 4 8 16)",
           minimum=1, metavar="N", commands=("check",)),
    Option("sweep_window", Kind.FLOAT, "with --perf: seconds per measurement window (default 1)", above=0,
           metavar="S", commands=("check",)),
    Option("step_budget", Kind.FLOAT, "with --perf: seconds a level may take before it is recorded as not stable "
           "(default 15)", above=0, metavar="S", commands=("check",)),
    Option("sweep_budget", Kind.FLOAT, "with --perf: seconds the whole sweep may take (default 120)", above=0,
           metavar="S", commands=("check",)),
    Option("request_rate", Kind.LIST, "with --perf: offer these request rates (requests/s, or START:END:STEP as "
           "perf_analyzer's --request-rate-range) instead of concurrency levels", metavar="R", commands=("check",)),
    Option("arrival", Kind.CHOICE, "with --request-rate: fixed intervals or Poisson arrivals (default poisson)",
           choices=("constant", "poisson"), commands=("check",)),
    Option("p99_budget", Kind.FLOAT, "with --request-rate: the p99 latency a rate must meet; the highest that does "
           "is the sustainable rate, and the sweep stops after the first that does not", above=0, metavar="MS",
           commands=("check",)),
    Option("openai_route", Kind.CHOICE, "with --endpoint openai://: judge /v1/completions (the raw prompt) or "
           "/v1/chat/completions (one user message; the server's chat template applies)",
           choices=("completions", "chat"), default="completions", commands=("check",)),
    Option("no_stream", Kind.FLAG, "with --endpoint openai://: ask for whole answers (no TTFT / TPOT) instead of "
           "streamed ones", commands=("check",)),
    Option("load_host", Kind.PAIRS, "a non-loopback host the load sweep may target (the configured server's own)",
           default=(), metavar="HOST", commands=("check",)),
    # -- baselines and comparisons -----------------------------------------------------------------
    Option("baseline_name", Kind.TEXT, "the baseline", cli_flag="--name", metavar="NAME", commands=(
        Use("baseline save", required=True, help="baseline name: letters, digits, '.', '_' or '-'"),
        Use("baseline compare", required=True, help="the baseline to compare with"),
        Use("baseline env", required=True, help="the baseline whose environment to rebuild"))),
    Option("history_db", Kind.TEXT, f"history store: a SQLite file or a postgresql://user@host/db URL "
           f"({HISTORY_DB_HELP})", metavar="PATH|URL", commands=(
               Use("baseline save", help=f"history database for --history-last ({HISTORY_DB_HELP})"),
               Use("history add", was="--db"), Use("history show", was="--db"), Use("history changes", was="--db"),
               Use("history list", was="--db"),
               Use("report", was="--db", help="history store (SQLite path or postgresql:// URL): adds trend "
                                              "plots with baseline bands to --html"))),
    Option("history_last", Kind.INT, "aggregate the newest N runs of the history database (after any RUN_DIRs)",
           default=0, minimum=0, metavar="N", commands=("baseline save",)),
    Option("keep_artifacts", Kind.FLAG, "copy the timed artifacts into the baseline, so `compare --perf` can re-time "
           "them after the cache is gone (size printed; checked for room first)", commands=("baseline save",)),
    Option("baseline_env", Kind.TEXT, "with --perf: the blessed environment's interpreter (`harness baseline env` "
           "prints it): the blessed artifacts are re-timed in it, the candidate's in this one", default="",
           metavar="PYTHON", commands=("baseline compare",)),
    Option("all_rows", Kind.FLAG, "show accuracy metrics that passed too (JSON always has every row)",
           commands=("baseline compare",)),
    Option("env_dir", Kind.TEXT, "where to lay the blessed environment out (reused when already there)",
           default=".harness-blessed-env", metavar="DIR", cli_flag="--dir", commands=("baseline env",)),
    Option("strict", Kind.FLAG, "exit 1 when a case newly fails, a gating perf metric regressed or an accuracy "
           "metric moved past its margin", commands=("compare",)),
    # -- paired A/B timing (perf-compare, baseline compare --perf) ---------------------------------
    Option("pairs", Kind.INT, "block pairs (>= 8 for a verdict)", default=30, minimum=1,
           commands=("perf-compare", Use("baseline compare", default=20))),
    Option("block", Kind.INT, "calls per block", default=50, minimum=1,
           commands=("perf-compare", "baseline compare")),
    Option("warmup", Kind.INT, "untimed calls of each side first", default=20, minimum=0,
           commands=("perf-compare", "baseline compare")),
    Option("env_a", Kind.TEXT, "interpreter command of environment A, e.g. /venv-old/bin/python (pairs "
           "environments)", metavar="PYTHON", commands=("perf-compare",)),
    Option("env_b", Kind.TEXT, "interpreter command of environment B, e.g. '/venv-new/bin/python' (pairs "
           "environments)", metavar="PYTHON", commands=("perf-compare",)),
    Option("seq_len", Kind.INT, "sequence length of the timed inputs in tokens", default=32, minimum=1,
           commands=("bench", Use("perf-compare", was="--seq"))),
    Option("stats", Kind.TEXT, "statistics to judge (p99 advisory)", default="p50,p90", commands=("perf-compare",)),
    Option("seed", Kind.INT, "block order and inputs", default=0, commands=("perf-compare",)),
    # -- bench ------------------------------------------------------------------------------------
    Option("new_tokens", Kind.INT, "tokens per timed generation", default=16, minimum=1, commands=("bench",)),
    Option("rounds", Kind.INT, "interleaved rounds", default=20, minimum=1, commands=("bench",)),
    Option("calls", Kind.INT, "samples per contender per round", default=10, minimum=1, commands=("bench",)),
    # -- bisect -----------------------------------------------------------------------------------
    Option("graph", Kind.TEXT, "graph of the model (default: its first, e.g. encoder)", commands=("bisect",)),
    Option("top", Kind.INT, "how many are listed", default=10, minimum=0, commands=(
        Use("bisect", help="tensors listed by error"), Use("cache info", help="largest entries listed (0 none)"))),
    Option("suggest", Kind.FLAG, "search the smallest set of nodes to keep in FP32 (fp16: node_block_list) or leave "
           "unquantised (int8: nodes_to_exclude) that makes the case pass: each set is rebuilt by the harness and "
           "re-judged on the corpus with `harness run`'s thresholds; prints the before/after verdict and the "
           "harness.toml lines that apply it (exit 0 fixed, 1 not)", commands=("bisect",)),
    Option("max_rebuilds", Kind.INT, "--suggest: rebuild-and-judge steps at most (default 12)", minimum=1,
           metavar="N", commands=("bisect",)),
    Option("target", Kind.PAIRS, "--suggest: also require this output threshold (e.g. top1_agreement=0.99): tighten "
           "the gate and find the nodes that meet it; written into the suggested [models.<name>.tolerances]",
           default=(), metavar="METRIC=VALUE", commands=("bisect",)),
    # -- history ----------------------------------------------------------------------------------
    Option("variant", Kind.TEXT, "only this variant, e.g. bert-tiny-fp32-ort_cpu",
           commands=("history show", "history changes")),
    Option("metric", Kind.TEXT, "metric name glob, e.g. 'perf:latency_ms.p50' or 'metric:*.top1_agreement'",
           default="*", metavar="GLOB",
           commands=("history show", Use("history changes", default="perf:latency_ms.p50"))),
    Option("last", Kind.INT, "only the newest N runs", minimum=1, metavar="N", commands=("history show", "history changes")),
    Option("max_plots", Kind.INT, "at most N metrics plotted in --html", default=24, minimum=1, metavar="N",
           commands=("history show",)),
    # -- reports written beside the terminal output -------------------------------------------------
    Option("json", Kind.PATH, "also write the result as JSON here", metavar="OUT", commands=(
        "baseline compare", "bench", "perf-compare", Use("repro", metavar="FILE"))),
    Option("markdown", Kind.PATH, "also write the result as Markdown here", metavar="OUT",
           commands=("baseline compare", "bench", "compare", Use("report", help="summary.md as the run wrote it"))),
    Option("csv", Kind.PATH, "also write the rows as CSV here", metavar="OUT", commands=(
        "history show", Use("report", help="one row per case, every metric and perf number a column"))),
    Option("html", Kind.PATH, "also write a self-contained HTML page here", metavar="OUT", commands=(
        Use("history show", help="also write trend plots (baseline band shaded) as an HTML page"),
        "compare",
        Use("report", help="a self-contained HTML page: verdict banner, overview grid, failures first, "
                           "performance plots (docs/report.md)"))),
    Option("print_json", Kind.FLAG, "print JSON instead of a table", cli_flag="--json",
           commands=("cache info", "cache verify", "cache prune")),
    # -- the cache --------------------------------------------------------------------------------
    Option("area", Kind.PAIRS, "only this area: zoo, artifacts, references or verdicts (repeatable; default all)",
           default=(), metavar="AREA", commands=("cache info", "cache verify", "cache prune")),
    Option("remove", Kind.FLAG, "delete corrupt entries (a run would rebuild them anyway) instead of failing",
           commands=("cache verify",)),
    Option("older_than", Kind.TEXT, "remove entries unused for longer than AGE (30d, 12h, 2w; a bare number is days)",
           metavar="AGE", commands=("cache prune",)),
    Option("max_size", Kind.TEXT, "then remove least recently used entries until the areas fit in SIZE (10G, 500M)",
           metavar="SIZE", commands=("cache prune",)),
    Option("dry_run", Kind.FLAG, "list what would be removed; remove nothing", commands=("cache prune",)),
    # -- calibrate --------------------------------------------------------------------------------
    Option("min_runs", Kind.INT, "runs needed before anything is proposed (fewer: the observed intervals are "
           "reported and the exit code is 1)", default=3, minimum=1, metavar="N", commands=("calibrate",)),
    Option("headroom", Kind.FLOAT, "observed error x X becomes the bound (>= 1)", default=2.0, minimum=1,
           metavar="X", commands=("calibrate",)),
    # -- init -------------------------------------------------------------------------------------
    Option("add", Kind.PATH, "add this model to the existing harness.toml (its name to run.models, its table at the "
           "end); the workflow needs no change: its cache key covers every model the config names",
           metavar="MODEL_DIR", commands=("init",)),
    Option("repo_dir", Kind.PATH, "repository root to write into", default=Path("."), metavar="DIR", cli_flag="--dir",
           commands=("init",)),
    Option("model_name", Kind.TEXT, "the model's name in harness.toml (default: the directory's name)",
           cli_flag="--name", metavar="NAME", commands=("init",)),
    Option("family", Kind.TEXT, "model family when config.json does not tell it", commands=("init",)),
    Option("ci", Kind.CHOICE, "CI workflow to write", choices=("github", "none"), default="github",
           commands=("init",)),
    Option("shards", Kind.INT, "split the CI gate over N parallel jobs merged by `harness merge` (1: one job)",
           default=1, minimum=1, metavar="N", commands=("init",)),
    Option("force", Kind.FLAG, "replace what exists", commands=(
        Use("init", help="replace harness.toml and the workflow if they exist"),
        Use("merge", help="merge despite overlapping/missing shards, mixed environments or settings"))),
    # -- export-triton ----------------------------------------------------------------------------
    Option("max_batch_size", Kind.INT, "Triton max_batch_size (0: Triton does not batch)", default=8, minimum=0,
           metavar="N", commands=("export-triton",)),
    Option("preferred_batch_sizes", Kind.INT_LIST, "dynamic batching's preferred sizes (default: half the maximum "
           "and the maximum)", minimum=1, metavar="N", commands=("export-triton",)),
    Option("max_queue_delay_us", Kind.INT, "how long the dynamic batcher waits to fill a batch, in microseconds",
           default=100, minimum=0, metavar="US", commands=("export-triton",)),
    Option("instances", Kind.INT, "model instances (instance_group count)", default=1, minimum=1, metavar="N",
           commands=("export-triton",)),
    Option("model_version", Kind.INT, "the model version folder", default=1, minimum=1, metavar="V",
           cli_flag="--version", commands=("export-triton",)),
    Option("from_run", Kind.PATH, "export the variants this run directory judged and passed (its results.jsonl: "
           "ONNX Runtime variants with verdict pass), instead of --models/--precisions/--providers",
           metavar="RUN_DIR", cli_flag="--run", commands=("export-triton",)),
    Option("plan", Kind.PATH, "a TensorRT engine (trtexec --saveEngine) to ship as model.plan instead of model.onnx "
           "(one model, one precision, one graph)", metavar="ENGINE", commands=("export-triton",)),
)

#: every option of every command, by name (a run option's name is its key everywhere)
EVERY_OPTION: tuple[Option, ...] = OPTIONS + COMMAND_OPTIONS
TABLE: dict[str, Option] = {o.name: o for o in EVERY_OPTION}
_RUN = Use("run")


def takes(command: str) -> list[tuple[Option, Use]]:
    """The options ``command`` takes, in ``--help`` order, each with how the command uses it."""
    out: list[tuple[Option, Use]] = []
    if command == "run":
        out += [(o, _RUN) for o in OPTIONS if o.on_cli]
    for o in EVERY_OPTION:
        out += [(o, u) for u in o.uses if u.command == command]
    return out


def commands() -> list[str]:
    """Every command that takes an option of the table (``run`` first)."""
    seen = ["run"]
    for o in EVERY_OPTION:
        seen += [u.command for u in o.uses if u.command not in seen]
    return seen


def default_for(name: str, command: str) -> Any:
    """The default ``command`` gives option ``name`` (the row's, unless the command's own)."""
    o = TABLE[name]
    use = next((u for u in o.uses if u.command == command), _RUN)
    return use.default if use.default is not None else o.default


# -- parsers ------------------------------------------------------------------------------------
#: the attribute of a parsed namespace that says which command parsed it (limits are checked per command)
COMMAND_ATTR = "option_command"


def add_command_options(parser: argparse.ArgumentParser, command: str) -> None:
    """Give ``parser`` every option ``command`` takes, derived from the table; a renamed spelling
    (``Use.was``) is added hidden, as a deprecated alias of the same destination."""
    for o, use in takes(command):
        kwargs = _argparse_kwargs(o, use, run_option=o.name in _RUN_NAMES)
        if not use.was:
            parser.add_argument(o.flag, **kwargs)
            continue
        # a required option is given under either spelling: argparse counts a group, not a destination
        group = parser.add_mutually_exclusive_group(required=kwargs.pop("required", False))
        group.add_argument(o.flag, **kwargs)
        group.add_argument(use.was, **_alias_kwargs(kwargs, o.flag))
    parser.set_defaults(**{COMMAND_ATTR: command})


_RUN_NAMES = frozenset(o.name for o in OPTIONS)


def _argparse_kwargs(o: Option, use: Use, *, run_option: bool) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"dest": o.name, "help": _help(o, use, run_option)}
    if use.required:
        kwargs["required"] = True
    if o.kind is Kind.FLAG:
        return {**kwargs, "action": "store_true", "default": False}
    kwargs["default"] = _command_default(o, use, run_option)
    metavar = use.metavar or o.metavar
    if metavar:
        kwargs["metavar"] = metavar
    if o.kind in (Kind.LIST, Kind.INT_LIST) and not use.single:
        kwargs["nargs"] = "+"
    elif o.kind is Kind.PATH_LIST:
        kwargs.update(nargs="+", type=Path)
    elif o.kind is Kind.PAIRS:
        kwargs["action"] = "append"
    elif o.kind is Kind.REST:
        kwargs["nargs"] = argparse.REMAINDER
    elif o.kind is Kind.PATH:
        kwargs["type"] = Path
    else:
        kwargs.update(scalar_parsing(o))
    return kwargs


def _help(o: Option, use: Use, run_option: bool) -> str:
    """The ``--help`` line: the default this command applies; a ``harness run`` row's own default
    only where the command keeps the row's meaning (no wording of its own)."""
    if use.command == "run" or (use.help is None and use.default is None):
        return help_text(o, use.help)
    return help_text(o, use.help, _command_default(o, use, run_option), row_default=False)


def _command_default(o: Option, use: Use, run_option: bool) -> Any:
    """What argparse stores when the flag is absent: a command's own default, else the row's for a
    command option; a ``harness run`` option stays None (the config file may still set it)."""
    if use.default is not None:
        return use.default
    if o.kind is Kind.FLAG:
        return False
    if o.kind in (Kind.PAIRS, Kind.REST):  # repeatable: a command iterates what it was given, none or more
        return list(o.default or ())
    if run_option:
        return None
    return list(o.default) if isinstance(o.default, tuple) else o.default


def _alias_kwargs(kwargs: dict[str, Any], flag: str) -> dict[str, Any]:
    alias = {k: v for k, v in kwargs.items() if k not in ("help", "required", "default", "action")}
    mode = {"store_true": "flag", "append": "append"}.get(kwargs.get("action", ""), "store")
    if mode == "flag":
        alias["nargs"] = 0
    return {**alias, "help": argparse.SUPPRESS, "default": argparse.SUPPRESS, "action": OldSpelling,
            "spelling": flag, "mode": mode}


class OldSpelling(argparse.Action):
    """A flag's former spelling: does what the flag does, after one line on stderr naming the new
    spelling (a script that still uses it keeps working and says what to change)."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, spelling: str, mode: str,
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.spelling = spelling
        self.mode = mode

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"harness: warning: {option_string} is deprecated and will be removed in the next release; "
              f"use {self.spelling}", file=sys.stderr)
        if self.mode == "flag":
            values = True
        elif self.mode == "append":
            values = [*(getattr(namespace, self.dest, None) or []), values]
        setattr(namespace, self.dest, values)


def check_limits(args: argparse.Namespace) -> None:
    """The table's bounds (``minimum``, ``above``) on the numbers a command was given, as one line
    naming the flag (argparse checks types and choices, not ranges)."""
    command = getattr(args, COMMAND_ATTR, None)
    if command is None:
        return
    for o, _ in takes(command):
        value = getattr(args, o.name, None)
        if value is None or o.kind not in (Kind.INT, Kind.FLOAT):
            continue
        o.limit(value, o.flag)


def value_of(args: argparse.Namespace, name: str) -> Any:
    """Option ``name`` as the table parses it (an INT_LIST's ``1,8 16`` -> ``[1, 8, 16]``)."""
    return TABLE[name].parse(getattr(args, name, None), TABLE[name].flag)


# -- renamed spellings and docs -------------------------------------------------------------------
@dataclass(frozen=True)
class Renamed:
    """A spelling a command had before every command took the table's (``harness check --precision``)."""

    command: str
    old: str
    new: str


def renamed() -> list[Renamed]:
    return [Renamed(u.command, u.was, o.flag) for o in EVERY_OPTION for u in o.uses if u.was]


def renamed_table() -> str:
    """docs/options.md: every old spelling, still accepted for one release with a warning."""
    rows = [[f"`harness {r.command}`", f"`{r.old}`", f"`{r.new}`"] for r in renamed()]
    return "\n".join(table(["command", "old spelling (deprecated)", "spelling"], rows))


def command_docs() -> str:
    """docs/options.md: each command's options (``harness run``'s are the tables above)."""
    parts: list[str] = []
    for command in commands()[1:]:
        rows = []
        for o, use in takes(command):
            default = _command_default(o, use, o.name in _RUN_NAMES)
            shown = "" if unset(default) else describe(default)
            note = " (required)" if use.required else ""
            rows.append([f"`{o.flag}`" + (f" (was `{use.was}`)" if use.was else ""),
                         f"`{shown}`" if shown else "–", (use.help or o.help).replace("%%", "%") + note])
        parts.append(f"### `harness {command}`\n\n" + "\n".join(table(["option", "default", "what"], rows)))
    return "\n\n".join(parts)
