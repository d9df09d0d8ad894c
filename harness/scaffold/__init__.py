"""``harness init``: the files a team adds to its own repository to gate a model in CI.

One module per file written: ``config.py`` (a commented ``harness.toml``), ``workflow.py``
(the GitHub Actions workflow: pull-request gate, nightly schedule, cache, report artifact),
``ignore.py`` (the ``.gitignore`` entries). ``files.py`` writes them together: nothing is
overwritten without ``force``, and nothing is written unless everything can be.
"""
