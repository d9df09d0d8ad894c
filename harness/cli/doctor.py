"""``harness doctor``: what this machine can run, and why a variant would be skipped."""

from __future__ import annotations

import argparse
from collections import defaultdict
from typing import TYPE_CHECKING, Callable, Iterable

from rich.markup import escape
from rich.table import Table

from harness.report.console import cli_console
from harness.report.variants import precision_rank
from harness.results.bytecode import bytecode_line
from harness.results.envinfo import environment
from harness.settings.matrix import matrix

if TYPE_CHECKING:  # pragma: no cover
    from harness.core.types import Variant


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("doctor", help="versions, execution providers, and which variants would be skipped")
    from harness.settings.commands import add_command_options

    add_command_options(p, "doctor")
    p.set_defaults(func=doctor)


def doctor(args: argparse.Namespace) -> int:
    from harness.judge.runtimes import RuntimeStore
    from harness.runners import PROVIDERS, backends
    from harness.settings.options import cli_values
    from harness.settings.resolve import build_options
    from harness.zoo.base import cache_root, unavailable_models

    values = cli_values(args)
    values.setdefault("providers", list(PROVIDERS))  # doctor's point: every provider, runnable or not
    options = build_options(values)
    console = cli_console()
    env = environment()
    console.print(f"[bold]harness doctor[/]  cpu: {env['cpu']} ({env['cores']} cores), gpu: {env['gpu'] or 'none'}")
    for lib, version in env["versions"].items():
        console.print(f"  {lib:22s} {version}")
    console.print(escape(bytecode_line()), highlight=False)
    console.print("runtimes (one line per registered backend):")
    for backend in backends().values():  # each says what it sees here: version, devices, or why not
        try:
            line = backend.runtime_summary()
        except Exception as exc:  # noqa: BLE001 - a broken runtime install is a finding, not a doctor crash
            line = f"{backend.name}: cannot be queried ({type(exc).__name__}: {exc})"
        console.print(f"  {escape(line)}", highlight=False)
    from harness.families import family_names

    console.print(f"families: {', '.join(family_names())}", highlight=False)  # built-in and entry points
    console.print(f"cache: {cache_root()}")
    zoo = Table(title="models")
    for col in ("name", "family", "default", "description"):
        zoo.add_column(col)
    for name, spec in (options.catalog.registered() if options.catalog else {}).items():
        zoo.add_row(name, spec.family, "yes" if spec.default else "opt-in", spec.description)
    for name, reason in unavailable_models().items():  # known, but its extra is not installed
        zoo.add_row(name, "?", "unavailable", f"[yellow]{escape(reason)}[/]")
    console.print(zoo)
    console.print(variants_table(matrix(options), RuntimeStore.unavailable_reason))
    return 0


def variants_table(variants: Iterable[Variant], reason_of: Callable[[Variant], str | None]) -> Table:
    """One row per model: how many of its variants run (and which precision x provider settings),
    how many are skipped and on which providers; each skip reason is said once below the table
    (180 variant rows, most repeating "CUDAExecutionProvider not available", said less than this)."""
    runs: dict[str, list[str]] = defaultdict(list)
    skipped: dict[str, list[str]] = defaultdict(list)
    reasons: dict[str, set[str]] = defaultdict(set)
    for variant in variants:
        setting = variant.id[len(variant.model) + 1:]
        reason = reason_of(variant)
        if reason is None:
            runs[variant.model].append(setting)
        else:
            skipped[variant.model].append(setting)
            reasons[reason].add(variant.provider.short)
    table = Table(title="variants (one row per model)")
    for column in ("model", "run", "precision × provider that run", "skipped", "skipped on"):
        table.add_column(column, overflow="fold")
    for model in sorted(set(runs) | set(skipped)):
        settings = sorted(runs[model], key=lambda s: (precision_rank(s.split("-")[0]), s))
        providers = sorted({s.split("-", 1)[1] if "-" in s else s for s in skipped[model]})
        table.add_row(escape(model), str(len(runs[model])), escape(", ".join(settings)), str(len(skipped[model])),
                      escape(", ".join(providers)))
    total = sum(map(len, runs.values()))
    notes = [f"{total} variant(s) run here."] + [f"skip on {', '.join(sorted(p))}: {r}" for r, p in sorted(reasons.items())]
    table.caption = escape("\n".join(notes))
    table.caption_justify = "left"
    return table
