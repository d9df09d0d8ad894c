"""The case engine: one case job in, typed case results out, with no test framework in between.

A *case job* is an artifact source (files on disk, a served endpoint, the harness's own builds), the
variant it is judged as, and the case's stages in order -- resolve, run, compare, record, side outputs
(failing-batch dump, repro bundle, error bundle, profile) -- ending in a
:class:`harness.results.outcome.CaseResult` per record, composed by one composer (:func:`conclude`).
``harness check`` on files, ``harness check --endpoint`` and the artifact suites are front ends: they
pick a source, call :func:`run_job`, and read verdicts from its results. A suite case of ``harness run``
(the harness's own builds) goes through the same stage functions and the same ``Decision`` in
``harness.case.pipeline.numeric_case`` / ``generation_case``, one layer below: the pytest plugin only
hands the case over and writes the record the case decided.

A new source is one module: a :class:`JobSource` subclass (``files.py`` here, ``serving/check.py``
for a served model) -- how its artifacts are opened and described, and the stages only it has.
"""

from harness.engine.job import conclude, run_job
from harness.engine.source import JobRun, JobSource

__all__ = ["JobRun", "JobSource", "conclude", "run_job"]
