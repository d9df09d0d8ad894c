"""``harness check``: judge ONNX artifacts built elsewhere against the PyTorch reference.

    harness check --reference ./my-model --onnx ./exported/ [--precisions int8] [--providers ort_cpu]
    harness check --config harness.toml          # every [models.<name>.artifacts] entry
    harness check --reference ./my-model --endpoint http://127.0.0.1:8000 --served-model bert [--perf]

Exit 0 every check passed, 1 a check failed or the artifact broke while running, 2 bad
input (missing or corrupt file, unreadable model directory, I/O that cannot be matched):
one line on stderr naming the file.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from harness.check.protocol.model import Protocol
from harness.check.protocol.overrides import apply, read_protocol_file
from harness.cli._args import parse_metric_values, parse_pairs
from harness.core import Precision, UsageError, Variant
from harness.core.admission import CHECK_COPIES, limits_from, set_limits
from harness.core.rundirs import default_run_dir
from harness.core.writable import ensure_writable_dir
from harness.metrics.registry import tolerance_names
from harness.report.console import cli_console
from harness.report.summary import write_summary
from harness.results import ResultsWriter, new_run_id
from harness.settings.endpoint import endpoint_from_table
from harness.settings.relations import check_relations

if TYPE_CHECKING:  # pragma: no cover
    from harness.check.judge import CheckOutcome
    from harness.check.request import CheckRequest
    from harness.core import Provider
    from harness.engine import JobSource
    from harness.results.record import Record


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from harness.settings.commands import add_command_options

    p = sub.add_parser("check", help="judge pre-built ONNX artifacts (any exporter) against the PyTorch reference",
                       description="Judge ONNX artifacts that were built outside the harness (optimum-cli, "
                                   "torch.onnx.export, vendor tools) against the PyTorch FP32 reference on real "
                                   "corpus batches: numeric parity per output and, for seq2seq / decoder-only "
                                   "models, generation parity. Exit 0 pass, 1 fail, 2 bad input.")
    add_command_options(p, "check")
    p.set_defaults(func=check)


def parse_tolerances(values: list[str]) -> dict[str, float]:
    return parse_metric_values(values, tolerance_names())


def requests(args: argparse.Namespace) -> list[CheckRequest]:
    from harness.check.request import CheckRequest
    from harness.settings.options import cli_values, option

    # the run options' own rows (type, minimum) judge them, as they judge the config's [run] values
    for name, flag in (("samples", "--samples"), ("batch_size", "--batch-size"), ("threads", "--threads")):
        option(name).parse(getattr(args, name), flag)
    if args.gen_samples is not None and args.gen_samples < 1:
        raise UsageError(f"--gen-samples: must be >= 1, got {args.gen_samples}")
    check_relations(vars(args), lambda name: "--" + name.replace("_", "-"), command="check")
    common = dict(corpus=args.corpus, maps=parse_pairs(args.map, "--map"), tolerances=parse_tolerances(args.tolerance),
                  trust_remote_code=args.trust_remote_code, allow_pickle=args.allow_pickle,
                  generation=not args.no_generation, gen_samples=args.gen_samples,
                  perf=perf_settings(args), runtime=runtime_settings(args),
                  repro_bundles=cli_values(args).get("repro_bundles"),
                  release_models=cli_values(args).get("release_models"), **protocol_option(args.io_protocol))
    from harness.serving.options import endpoint_of

    endpoint = endpoint_of(args)
    if args.config is not None:
        if args.reference or args.onnx or endpoint:
            raise UsageError("--config: give either --config or --reference with --onnx/--endpoint, not both")
        return config_requests(args, common)
    if endpoint is not None:
        if args.onnx:
            raise UsageError("--endpoint: give either --onnx PATH or --endpoint URL, not both")
        if not args.reference:
            raise UsageError("--endpoint: give --reference DIR (the model the served one was built from)")
        return [CheckRequest(reference=args.reference, endpoint=endpoint, precision=args.precisions,
                             samples=args.samples, batch_size=args.batch_size, threads=args.threads,
                             **{**common, "perf": sweep_settings(args, common["perf"])})]
    if not args.reference or not args.onnx:
        raise UsageError("give --reference DIR and --onnx PATH or --endpoint URL (or --config FILE)")
    return [CheckRequest(reference=args.reference, onnx=args.onnx, precision=args.precisions, provider=args.providers,
                         samples=args.samples, batch_size=args.batch_size, threads=args.threads, **common)]


def config_protocol(table: Any, origin: str) -> dict[str, Any]:
    """A model's ``[models.<name>.io_protocol]`` (``--io-protocol`` wins over it), validated now."""
    if not table:
        return {}
    apply(Protocol(), table, origin)
    return {"protocol": dict(table), "protocol_origin": origin}


def protocol_option(path: Path | None) -> dict[str, Any]:
    """``--io-protocol FILE``: its table and how errors name it (read now: a bad file is exit 2 at once)."""
    if path is None:
        return {}
    table = read_protocol_file(path)
    origin = f"--io-protocol {path}"
    apply(Protocol(), table, origin)  # unknown keys and bad values: one line before any model loads
    return {"protocol": table, "protocol_origin": origin}


def perf_settings(args: argparse.Namespace) -> Any:
    """PerfSettings when ``--perf`` was given, else None."""
    from harness.perf.measure import PerfSettings
    from harness.settings.options import cli_values

    values = cli_values(args)
    return PerfSettings.from_options(values) if values.get("perf") else None


def sweep_settings(args: argparse.Namespace, perf: Any) -> Any:
    """``--perf`` against an endpoint: the load sweep's settings (None without ``--perf``)."""
    from harness.serving.options import sweep_of

    return sweep_of(args) if perf is not None else None


def runtime_settings(args: argparse.Namespace) -> Any:
    """The check's RuntimeSettings (None: defaults); one level of graph optimisation per check."""
    from harness.settings.options import cli_values
    from harness.settings.runtime import build_runtime, runtime_keys

    # the runtime rows of the table this command takes (harness/settings/options.py: commands=)
    values = {k: v for k, v in cli_values(args).items() if k in runtime_keys()}
    if not values:
        return None
    runtime, axes = build_runtime(values)
    if len(axes.get("graph_optimization", [])) > 1:
        raise UsageError("--graph-optimization: harness check takes one level (an axis is a harness run matrix)")
    return runtime


def config_requests(args: argparse.Namespace, common: dict[str, Any]) -> list[CheckRequest]:
    from harness.check.request import CheckRequest
    from harness.settings.resolve import build_options
    from harness.zoo.base import ModelCatalog

    options = build_options(models=args.models, config=args.config, rootdir=Path.cwd(),
                            batch_size=args.batch_size, samples=args.samples, threads=args.threads)
    given = refuse_unhonoured_keys(Path(args.config))
    from harness.judge.generation import GenerationRequest

    common = {**common, "gen_settings": GenerationRequest.from_settings(options.settings)}
    # [run] precisions, when the config sets it: the artifacts judged (else every one it lists)
    wanted = {p.value for p in options.precisions} if "precisions" in given else None
    providers = available_ort_providers(options.providers)
    out = []
    catalog = options.catalog or ModelCatalog()
    for name in options.models:
        spec = catalog.resolve(name)
        table = spec.extra.get("endpoint")
        if table is not None:  # [models.<name>.endpoint]: the served model, judged once

            served = endpoint_from_table(table, f"{args.config}: [models.{name}.endpoint]")
            out.append(CheckRequest(reference=name, spec=spec, endpoint=served,
                                    precision=args.precisions or table.get("precision"),
                                    samples=options.settings.samples, batch_size=options.settings.batch_size,
                                    threads=options.settings.threads,
                                    **{**common, "perf": sweep_settings(args, common["perf"])}))
        own = config_protocol(spec.extra.get("io_protocol"), f"{args.config}: [models.{name}.io_protocol]")
        for precision, path in (spec.extra.get("artifacts") or {}).items():
            if (args.precisions and precision != args.precisions) or \
                    (wanted is not None and precision.split("-")[0] not in wanted):
                continue
            for provider in providers:
                out.append(CheckRequest(reference=name, spec=spec, onnx=Path(path), precision=precision,
                                        provider=provider, samples=options.settings.samples,
                                        batch_size=options.settings.batch_size, threads=options.settings.threads,
                                        **{**own, **common}))
    if not providers:
        raise UsageError(f"{args.config}: none of the run's ONNX-running providers (ort_*, ov_cpu) is available here")
    if not out:
        raise UsageError(f"{args.config}: no [models.<name>.artifacts] to check among {', '.join(options.models)}")
    return out


#: the ``[run]`` keys ``harness check --config`` applies; any other is refused, not ignored
CHECK_RUN_KEYS = frozenset({"models", "precisions", "samples", "batch_size", "threads", "providers", "corpus",
                            "repro_bundles",
                            "gen_samples", "gen_max_new_tokens", "gen_beams", "gen_cache", "gen_repetition_penalty",
                            "gen_batch_size", "gen_worst"})


def refuse_unhonoured_keys(path: Path) -> set[str]:
    """The config's ``[run]`` keys; one check would not apply is an error naming it: accepted and
    ignored, it left records saying one thing while the judging did another."""
    from harness.settings.config_file import load_config

    keys = set(load_config(path).run)
    ignored = sorted(keys - CHECK_RUN_KEYS)
    if ignored:
        raise UsageError(f"{path}: [run] {', '.join(ignored)}: not applied by harness check (it applies "
                         f"{', '.join(sorted(CHECK_RUN_KEYS))}); remove them or run the config with harness run")
    return keys


def available_ort_providers(providers: Iterable[Provider]) -> list[str]:
    """The run's providers whose backend runs ONNX files and that exist here (``ort_cpu`` if
    it names none); the others are skipped with a note, as the suites skip their variants."""
    from harness.judge.runtimes import RuntimeStore
    from harness.runners import backends
    from harness.runners.prebuilt import runs_onnx_files

    known = backends()
    wanted = [p for p in providers if runs_onnx_files(known.get(p.backend))]
    usable = []
    for provider in wanted:
        reason = RuntimeStore.unavailable_reason(Variant("check", Precision.FP32, provider))
        if reason:
            print(f"note: skipping {provider.short}: {reason}")
        else:
            usable.append(provider.short)
    return usable or (["ort_cpu"] if not wanted else [])


def judge_request(request: CheckRequest, out: Path, run_id: str) -> CheckOutcome:
    """A generative model behind an OpenAI-compatible API is judged by its generations alone
    (``harness.serving.openai_check``: no tensors to match); every other request is a case job of
    the engine with the source it names."""
    from harness.engine import run_job

    if request.endpoint is not None and request.endpoint.protocol == "openai":
        from harness.serving.openai_check import run_openai_check

        if request.perf is not None:  # the load targets loopback or a configured host only: refused before work
            why = request.endpoint.load_allowed()
            if why:
                raise UsageError(why)
        return run_openai_check(request, out, run_id)
    return run_job(request, source_of(request), out, run_id)


def source_of(request: CheckRequest) -> type[JobSource]:
    """The artifact source a request names: a served endpoint, else files on disk."""
    if request.endpoint is not None:
        from harness.serving.check import EndpointJobs

        return EndpointJobs
    from harness.engine.files import FileJobs

    return FileJobs


def check(args: argparse.Namespace) -> int:
    from harness.check.report import print_outcome
    # before any reference or artifact is read; a check holds the reference and the sessions, not an exporter
    set_limits(replace(limits_from(args), weight_copies=CHECK_COPIES[args.release_models or "auto"]))
    todo = requests(args)
    out = ensure_writable_dir(args.out or default_run_dir("check"), "--out")
    console = cli_console()
    writer = ResultsWriter(out)
    records: list[Record] = []
    code = 0
    run_id = new_run_id()  # one run: every request's records share it
    for request in todo:
        outcome = judge_request(request, out, run_id)
        print_outcome(outcome, console)
        for record in outcome.records:
            writer.append(record)
        records += outcome.records
        code = max(code, outcome.exit_code)
    summary = write_summary(out, records)
    console.print(f"results: {out / 'results.jsonl'}  summary: {summary}")
    return code
