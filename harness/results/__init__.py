"""Results: the ``harness.result/1`` record, its composer, its store and the failure text.

- ``record``: ``Record`` (one typed case record, read tolerantly), ``Verdict``, ``MetricKey``;
- ``compose``: the one composer both the pytest collector and ``harness check`` use;
- ``store``: append-only ``results.jsonl`` writer and readers (typed and dict);
- ``checks``: ``CheckResult``, the ``<subject>: N check(s) failed`` text and ``GateFailure``;
- ``jsonsafe``: strict JSON (non-finite floats as ``"NaN"``/``"Infinity"``/``"-Infinity"``);
- ``envinfo``: the environment fingerprint every record carries;
- ``history``: the nightly history store (SQLite) and trends over many runs.

Format: docs/results-schema.md.
"""

from harness.results.checks import (
    CheckResult,
    GateFailure,
    fail,
    failure_text,
    outcomes_text,
    raise_failures,
    raise_outcomes,
)
from harness.results.compose import CaseIdentity, compose, compose_standalone, new_run_id
from harness.results.record import (
    FAILING,
    SCHEMA,
    VERDICTS,
    MetricKey,
    Record,
    RecordError,
    Verdict,
    as_verdict,
    decode_record,
)
from harness.results.store import (
    RESULTS_FILE,
    ResultsFileError,
    ResultsWriter,
    iter_records,
    iter_typed,
    latest_records,
    read_records,
    read_typed,
    record_line,
    write_records,
)

__all__ = [
    "FAILING",
    "RESULTS_FILE",
    "SCHEMA",
    "VERDICTS",
    "CaseIdentity",
    "CheckResult",
    "GateFailure",
    "MetricKey",
    "Record",
    "RecordError",
    "ResultsFileError",
    "ResultsWriter",
    "Verdict",
    "as_verdict",
    "compose",
    "compose_standalone",
    "decode_record",
    "fail",
    "failure_text",
    "iter_records",
    "iter_typed",
    "latest_records",
    "new_run_id",
    "outcomes_text",
    "raise_failures",
    "raise_outcomes",
    "read_records",
    "read_typed",
    "record_line",
    "write_records",
]
