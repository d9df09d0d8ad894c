"""Decoding loops that run the same way over every runner (PyTorch, ONNX Runtime, ...).

``settings`` (what to decode, mirrored to ``generate()`` kwargs), ``processors`` (score
adjustments), ``search`` (greedy, beam), ``decode`` (batches of texts in, tokens and text out).
One step over the exported graphs, cached or not, is the family's stepper
(``harness.families.steppers``, returned by ``Family.starter``).
"""

from harness.generation.decode import Decoded, decode_texts, prompt_batch
from harness.generation.search import beam_search, greedy, search
from harness.generation.settings import GenerationSettings, settings_for_model

__all__ = ["Decoded", "GenerationSettings", "beam_search", "decode_texts", "greedy", "prompt_batch", "search",
           "settings_for_model"]
