"""What users look for first in a case's performance and settings, read from its record.

Renderers only (summary.md, the terminal table, the CSV): nothing is computed here that the
record does not hold. p99 is shown with its sample count and flagged ``low confidence`` when
the summary says there were too few calls for it (``harness.perf.stats``: p99 needs ~1000);
generation cases show TTFT, TPOT and tokens/s with the KV cache (and without it); every case
shows its non-default runtime settings (``settings.runtime``) and, with ``--profile``, the
first-vs-steady run and top op types of its ORT profile.
"""

from __future__ import annotations

from typing import Any, Mapping

from harness.core import runtime as _runtime
from harness.results import Record
from harness.results.record import RecordLike
from harness.results.sections import SettingsSection


def describe_runtime(settings: Mapping[str, Any] | None) -> str:
    """A record's ``settings.runtime`` as the settings line (``opt=disabled threads=1``); each
    backend's section words its own part, so the backends' modules are read first."""
    from harness.runners import backends

    backends()
    return _runtime.describe_runtime(settings)


def latency_text(perf: Mapping[str, Any]) -> str:
    """``p50 1.23 ms, p99 2.34 ms (n=300, low confidence)`` for the headline latency."""
    entry = perf.get("latency_ms")
    summary = entry.get("summary") if isinstance(entry, Mapping) else None
    if not isinstance(summary, Mapping) or summary.get("p99") is None:
        return ""
    n = summary.get("n")
    low = bool((summary.get("low_confidence") or {}).get("p99"))
    flag = ", low confidence" if low else ""
    return f"p50 {summary.get('p50', float('nan')):.3g} ms, p99 {summary.get('p99', float('nan')):.3g} ms (n={n}{flag})"


def generation_text(perf: Mapping[str, Any]) -> str:
    """``TTFT 3.1 ms, TPOT 1.2 ms, 812 tok/s (no cache: 301 tok/s)``."""
    gen = perf.get("generation")
    if not isinstance(gen, Mapping):
        return ""
    on, off = gen.get("kv=on"), gen.get("kv=off")
    if not isinstance(on, Mapping):
        return ""
    text = (f"TTFT {on.get('ttft_ms_p50', float('nan')):.3g} ms, TPOT {on.get('tpot_ms_p50', float('nan')):.3g} ms, "
            f"{on.get('tokens_per_s', float('nan')):.4g} tok/s")
    if isinstance(off, Mapping):
        text += f" (no cache: {off.get('tokens_per_s', float('nan')):.4g} tok/s)"
    return text


def profile_text(data: Mapping[str, Any]) -> str:
    from harness.runners.profiling import headline

    profiles = data.get("profile")
    if not isinstance(profiles, Mapping):
        return ""
    return "; ".join(f"{graph}: {headline(p)}" for graph, p in profiles.items() if isinstance(p, Mapping))


def highlights(record: RecordLike) -> dict[str, str]:
    """The highlight cells of one record: latency, generation, runtime, profile ('' if none)."""
    r = Record.coerce(record)
    runtime = SettingsSection.of(r).runtime
    return {"latency": latency_text(r.perf), "generation": generation_text(r.perf),
            "runtime": describe_runtime(runtime), "profile": profile_text(r.data)}


def perf_columns(record: Mapping[str, Any]) -> dict[str, Any]:
    """CSV columns: p99 with its sample count and flag, TTFT/TPOT/tokens/s, runtime settings."""
    perf = record.get("perf") if isinstance(record.get("perf"), Mapping) else {}
    settings = record.get("settings") if isinstance(record.get("settings"), Mapping) else {}
    out: dict[str, Any] = {}
    entry = perf.get("latency_ms") if isinstance(perf, Mapping) else None
    summary = entry.get("summary") if isinstance(entry, Mapping) else None
    if isinstance(summary, Mapping) and summary.get("p99") is not None:
        out["p99_ms"] = summary.get("p99")
        out["p99_samples"] = summary.get("n")
        out["p99_low_confidence"] = bool((summary.get("low_confidence") or {}).get("p99"))
    gen = perf.get("generation") if isinstance(perf, Mapping) else None
    if isinstance(gen, Mapping) and isinstance(gen.get("kv=on"), Mapping):
        on = gen["kv=on"]
        out.update(ttft_ms=on.get("ttft_ms_p50"), tpot_ms=on.get("tpot_ms_p50"), tokens_per_s=on.get("tokens_per_s"))
    runtime = settings.get("runtime") if isinstance(settings, Mapping) else None
    out["runtime"] = describe_runtime(runtime if isinstance(runtime, Mapping) else None)
    return out
