"""``harness check``: judge ONNX artifacts built outside the harness against the PyTorch reference.

``layout`` reads and validates files (optimum's directory layout included), ``io_match``
pairs their inputs/outputs with the reference graphs', ``jobs`` says which graph each file
is judged against and feeds it, ``runners`` adapts a foreign session to the reference I/O,
``judge`` runs the comparison into results records, ``report`` prints it.
"""
