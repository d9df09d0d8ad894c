"""Decoding loops that run the same way over every runner (PyTorch, ONNX Runtime, ...).

``settings`` (what to decode, mirrored to ``generate()`` kwargs), ``processors`` (score
adjustments), ``steppers`` (one step over the exported graphs, cached or not),
``search`` (greedy, beam), ``decode`` (batches of texts in, tokens and text out).
"""

from harness.generation.decode import Decoded, decode_texts, prompt_batch
from harness.generation.search import beam_search, greedy, search
from harness.generation.settings import GenerationSettings, settings_for_model

__all__ = ["Decoded", "GenerationSettings", "beam_search", "decode_texts", "greedy", "prompt_batch", "search",
           "settings_for_model"]
