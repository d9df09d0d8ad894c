"""How options depend on each other, declared once beside the option table.

An option that only means something with another one, given without it, used to be accepted
and ignored: ``--baseline-force`` without ``--baseline-save`` and ``harness check --gen-samples 5
--no-generation`` both exited 0 having done nothing the user asked for. Each such dependency is
one row of :data:`RELATIONS`; ``check_relations`` judges the options a session was given against
every row and names them as the user typed them (``spell``: the CLI flag, the pytest option or
the config key). Harmful combinations are refused (one line, exit 2); harmless ones are warned
about once. ``docs_table`` writes the table into docs/options.md.
"""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from harness.core import UsageError
from harness.core.markdown import table


class Rule(str, enum.Enum):
    REQUIRES = "requires"  # inert unless one of ``others`` is given too
    CONFLICTS = "conflicts"  # contradicts ``others``: which one should win is not ours to guess


class Severity(str, enum.Enum):
    REFUSE = "refuse"  # exit 2 before any work: the user asked for something that would not happen
    WARN = "warn"  # one warning line: nothing is lost by going on


@dataclass(frozen=True)
class Relation:
    """``option`` ``rule`` ``others`` (any one of them satisfies REQUIRES), in ``commands``
    (``run``: ``harness run``, pytest and the config's ``[run]``; ``check``: ``harness check``)."""

    option: str
    rule: Rule
    others: tuple[str, ...]
    why: str
    severity: Severity = Severity.REFUSE
    commands: tuple[str, ...] = ("run",)


RELATIONS: tuple[Relation, ...] = (
    Relation("baseline_force", Rule.REQUIRES, ("baseline_save",), "it lets a baseline save replace an existing one"),
    Relation("baseline_force_env", Rule.REQUIRES, ("baseline_compare",),
             "it lets a baseline comparison run across different environments"),
    Relation("baseline_threshold", Rule.REQUIRES, ("baseline_compare",), "thresholds judge a baseline comparison"),
    Relation("allow_missing", Rule.REQUIRES, ("baseline_compare",),
             "it lets a baseline comparison pass with cases missing", Severity.WARN),
    Relation("shard_durations", Rule.REQUIRES, ("shard",), "durations balance the shards of --shard K/N"),
    *(Relation(name, Rule.REQUIRES, ("perf", "baseline_save", "baseline_compare"),
               "the performance suites run only with it", Severity.WARN)
      for name in ("perf_samples", "perf_warmup", "perf_batch_sizes", "perf_seq_lens", "perf_repeats",
                   "perf_new_tokens", "perf_tail_seconds")),
    Relation("gen_samples", Rule.CONFLICTS, ("no_generation",), "no sentence is decoded with --no-generation",
             commands=("check",)),
)


def _given(value: Any) -> bool:
    return value is not None and value is not False and value != [] and value != ()


def check_relations(values: Mapping[str, Any], spell: Callable[[str], str], command: str = "run",
                    warn: Callable[[str], None] | None = None) -> list[str]:
    """Refuse the first REFUSE-severity relation ``values`` (option name -> value given) break;
    warn once (``warn``, default stderr) for each WARN one. Returns the warnings."""
    warnings: list[str] = []
    for rel in RELATIONS:
        if command not in rel.commands or not _given(values.get(rel.option)):
            continue
        present = [o for o in rel.others if _given(values.get(o))]
        if rel.rule is Rule.REQUIRES and not present:
            others = " or ".join(spell(o) for o in rel.others)
            text = f"{spell(rel.option)}: has no effect without {others} ({rel.why})"
        elif rel.rule is Rule.CONFLICTS and present:
            text = f"{spell(rel.option)}: contradicts {spell(present[0])} ({rel.why}); give one of them"
        else:
            continue
        if rel.severity is Severity.REFUSE:
            raise UsageError(text)
        warnings.append(text)
    for text in warnings:
        (warn or (lambda t: print(f"harness: warning: {t}", file=sys.stderr)))(text)
    return warnings


def docs_table() -> str:
    """docs/options.md: the relations as a Markdown table (generated)."""
    rows = []
    for rel in RELATIONS:
        flag = ("--" if rel.commands != ("check",) else "harness check --") + rel.option.replace("_", "-")
        others = ", ".join(f"`--{o.replace('_', '-')}`" for o in rel.others)
        rows.append([f"`{flag}`", rel.rule.value, others, rel.severity.value, rel.why])
    return "\n".join(table(["option", "rule", "with", "when broken", "why"], rows))
