"""Feature plugins loaded by ``harness.plugin`` (each module is a pytest plugin).

Adding a feature with its own pytest options/fixtures (perf, generation, config files) =
one module here; ``harness.plugin`` lists them in its ``pytest_plugins`` by file name.
"""
