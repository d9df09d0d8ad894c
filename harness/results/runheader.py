"""When, where and with what a run measured: the header every page opens with (the HTML report,
the compare page, ``summary.md``), read from the records' ``finished`` times and ``env``.

A number read a week later is only comparable when its date, host, environment fingerprint and
library versions come with it; a perf page without them was read as "today, this machine".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Mapping

from harness.results.record import Record

#: the versions a header names, in this order; a library some backends need is named when a record
#: ran on that backend (OpenVINO, TensorRT), the others whenever they are installed
KEY_LIBRARIES = ("harness", "torch", "onnxruntime", "onnxruntime-gpu", "transformers")
USED_BY_BACKEND = {"openvino": "openvino", "tensorrt": "tensorrt"}


def _utc(stamp: str) -> datetime | None:
    """A record's ``finished`` (``2026-12-02T10:40:56+0000``, local time with its offset) in UTC."""
    for pattern in ("%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S"):
        try:
            parsed = datetime.strptime(stamp, pattern)
        except ValueError:
            continue
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
    return None


@dataclass(frozen=True)
class RunHeader:
    """The run's first and last finished case (UTC), host, fingerprint and key versions."""

    first: datetime | None = None
    last: datetime | None = None
    host: str | None = None
    fingerprint: str | None = None
    #: how many different environment fingerprints the records carry (> 1: not one environment)
    environments: int = 0
    versions: tuple[tuple[str, str], ...] = ()
    cpu: str | None = None
    cores: str | None = None
    system: str | None = None

    @classmethod
    def of(cls, records: Iterable[Record]) -> RunHeader:
        recs = list(records)
        times = sorted(t for r in recs if r.finished and (t := _utc(r.finished)) is not None)
        env: Mapping[str, object] = next((r.env for r in recs if r.env), {})
        installed = env.get("versions")
        versions = installed if isinstance(installed, Mapping) else {}
        backends = {r.backend for r in recs if r.backend}
        wanted = KEY_LIBRARIES + tuple(lib for backend, lib in USED_BY_BACKEND.items() if backend in backends)
        hosts = sorted({str(r.env["host"]) for r in recs if r.env.get("host")})
        system = " ".join(str(env[k]) for k in ("os", "machine") if env.get(k))
        return cls(times[0] if times else None, times[-1] if times else None, ", ".join(hosts) or None,
                   str(env["fingerprint"]) if env.get("fingerprint") else None,
                   len({r.fingerprint for r in recs if r.fingerprint}),
                   tuple((lib, str(versions[lib])) for lib in wanted if lib in versions),
                   str(env["cpu"]) if env.get("cpu") else None, str(env["cores"]) if env.get("cores") else None,
                   system or None)

    @property
    def when(self) -> str:
        """``2026-12-02 10:40–10:43 UTC`` (a run over midnight names both dates); '' unrecorded."""
        if self.first is None or self.last is None:
            return ""
        start = self.first.strftime("%Y-%m-%d %H:%M")
        if self.last.date() != self.first.date():
            return f"{start} – {self.last.strftime('%Y-%m-%d %H:%M')} UTC"
        end = self.last.strftime("%H:%M")
        return f"{start} UTC" if end == start[11:] else f"{start}–{end} UTC"

    @property
    def versions_text(self) -> str:
        return ", ".join(f"{lib} {version}" for lib, version in self.versions)

    @property
    def machine_text(self) -> str:
        """``Linux 6.1 x86_64, AMD EPYC, 2 cores`` ('' when unrecorded)."""
        cores = f"{self.cores} cores" if self.cores else ""
        return ", ".join(p for p in (self.system, self.cpu, cores) if p)

    def parts(self) -> list[tuple[str, str]]:
        """(label, value) of each field a header shows, in reading order; an unrecorded one says so
        (records written before the host was recorded have none)."""
        mixed = f" ({self.environments} different environments)" if self.environments > 1 else ""
        return [("run", self.when or "time not recorded"), ("host", self.host or "not recorded"),
                ("machine", self.machine_text or "not recorded"),
                ("fingerprint", (self.fingerprint or "not recorded") + mixed),
                ("versions", self.versions_text or "not recorded")]

    def text(self) -> str:
        """The header on one line: ``run 2026-12-02 10:40–10:43 UTC · host ci-7 · ...``."""
        return " · ".join(f"{label} {value}" for label, value in self.parts())
