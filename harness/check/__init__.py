"""``harness check``: judge ONNX artifacts built outside the harness against the PyTorch reference.

Only what is particular to foreign files lives here: ``request`` resolves the user's request
(exit 2 for anything wrong, before a model loads), ``layout`` reads and validates the files
(optimum's directory layout included), ``protocol`` describes each file's I/O protocol (inferred,
overridden, applied by an adapter runner), ``io_match`` pairs their inputs/outputs with the
reference graphs', ``synth`` fills inputs the reference computes implicitly, ``jobs`` says
which reference graph each file is judged against, ``judge`` runs the suites' own pipeline
over them (``harness.runners.prebuilt`` is the artifact source) into results records, and
``report`` prints the outcome.
"""
