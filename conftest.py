"""Repository-level pytest setup: ``pytester`` for the plugin's own end-to-end tests.

The harness plugin itself is loaded through its ``pytest11`` entry point (installed with
``pip install -e .``), so suites behave the same here as in any other repository.
"""

pytest_plugins = ["pytester"]
