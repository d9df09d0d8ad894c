"""``harness compare RUN_A RUN_B``: what moved between two runs (``diff``), rendered for the
terminal, Markdown and HTML (``render``)."""
