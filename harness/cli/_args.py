"""Argument parsing shared by subcommands (not a subcommand: the name starts with ``_``)."""

from __future__ import annotations

from typing import Iterable

from harness.core import UsageError, did_you_mean, valid_names
from harness.metrics.registry import METRICS


def parse_pairs(values: Iterable[str], option: str) -> dict[str, str]:
    """``NAME=VALUE`` options (repeatable) -> a dict; a malformed one is a one-line error."""
    out = {}
    for text in values:
        key, sep, value = text.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UsageError(f"{option} {text!r}: expected NAME=VALUE")
        out[key.strip()] = value.strip()
    return out


def parse_metric_values(values: Iterable[str], known: Iterable[str], option: str = "--tolerance") -> dict[str, float]:
    """``METRIC=NUMBER`` options, each metric one of ``known`` (did-you-mean on a typo), each value a
    threshold its declaration accepts (``MetricSpec.threshold_problem``, as in the config file)."""
    names = list(known)
    out: dict[str, float] = {}
    for metric, raw in parse_pairs(values, option).items():
        if metric not in names:
            raise UsageError(f"{option}: unknown metric {metric!r}{did_you_mean(metric, names)}; "
                             f"{valid_names(metric, sorted(names))}")
        try:
            value = float(raw)
        except ValueError:
            raise UsageError(f"{option} {metric}={raw}: not a number") from None
        problem = METRICS[metric].threshold_problem(value)  # exactly the config file's rule
        if problem:
            raise UsageError(f"{option} {metric}={raw}: {problem}")
        out[metric] = value
    return out
