"""A judged case: its stages in order and its record.

- ``pipeline``: the stages every judged case goes through (compare, then the side outputs:
  failing-batch dumps, repro bundles, profiles), whichever front end runs it;
- ``collector``: the suite ``Case`` (the ``harness`` fixture) and the pytest-side
  ``RecordCollector`` that writes exactly one record per case.

This package sits above the comparisons (``judge/``), the measurements (``perf/``) and the
bundle writers (``repro/``) it runs, and below every front end (``check/``, ``engine/``,
``suites/``, the pytest plugin) that runs a case.
"""
