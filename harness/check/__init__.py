"""``harness check``: judge ONNX artifacts built outside the harness against the PyTorch reference.

Only what is particular to foreign files lives here: ``layout`` reads and validates them
(optimum's directory layout included), ``io_match`` pairs their inputs/outputs with the
reference graphs', ``synth`` fills inputs the reference computes implicitly, ``jobs`` says
which reference graph each file is judged against, ``judge`` runs the suites' own pipeline
over them (``harness.runners.prebuilt`` is the artifact source) into results records, and
``report`` prints the outcome.
"""
