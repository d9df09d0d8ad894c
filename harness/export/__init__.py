"""Building the artifacts a variant runs: PyTorch to ONNX (``onnx_export``), then FP16 (``fp16``),
INT8 (``int8``) and INT4 (``int4``) conversions, with their content-hash cache (``cache``, ``artifacts``)
and the static checks of a file (``lint``)."""
