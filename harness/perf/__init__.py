"""Performance: latency statistics, measurement loops, fresh-process cold start and memory.

Deliberately empty of imports: ``python -m harness.perf.child`` measures cold start and peak
memory, and an eager ``harness.perf.stats`` import (scipy) would add ~1.5 s and ~100 MB to
every measurement. Import the submodules you need (``harness.perf.stats`` etc.).
"""
