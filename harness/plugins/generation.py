"""pytest options for generation parity (``--harness-gen-*``) and the request fixture.

Unset options leave each model's own choice (``ModelSpec.extra["generation"]``) or the
defaults in ``harness.judge.generation.DEFAULT_REQUEST``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from harness.judge.generation import GenerationRequest

# imported lazily: this plugin loads in every pytest session of the environment
REQUEST = pytest.StashKey[Any]()


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise pytest.UsageError(f"expected an integer >= 1, got {value}")
    return number


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness-generation", "generation parity (decode and score text)")
    group.addoption("--harness-gen-samples", type=int, default=None, metavar="N",
                    help="sentences decoded per model, spread over its corpus; 0 = all (default: 48, "
                         "numbers-en-zh: all)")
    group.addoption("--harness-gen-max-new-tokens", type=_positive, default=None, metavar="N",
                    help="new tokens per sentence (default 32; numbers-en-zh 40)")
    group.addoption("--harness-gen-beams", type=_positive, default=None, metavar="K",
                    help="beam width; 1 = greedy (default)")
    group.addoption("--harness-gen-cache", choices=("on", "off"), default=None,
                    help="decode with the KV-cache graphs (on, default) or re-run the full decoder per step (off)")
    group.addoption("--harness-gen-repetition-penalty", type=float, default=None, metavar="F",
                    help="repetition penalty as in generate() (default: the model's generation_config)")
    group.addoption("--harness-gen-batch-size", type=_positive, default=None, metavar="N",
                    help="sentences per decoding batch (default 16)")
    group.addoption("--harness-gen-worst", type=int, default=None, metavar="N",
                    help="worst sentences per case kept for summary.md (default 5)")


def pytest_configure(config: pytest.Config) -> None:
    cache = config.getoption("harness_gen_cache")
    samples = config.getoption("harness_gen_samples")
    penalty = config.getoption("harness_gen_repetition_penalty")
    if samples is not None and samples < 0:
        raise pytest.UsageError(f"--harness-gen-samples: must be >= 0, got {samples}")
    if penalty is not None and not penalty > 0:
        raise pytest.UsageError(f"--harness-gen-repetition-penalty: must be > 0, got {penalty}")
    config.stash[REQUEST] = dict(
        samples=samples, max_new_tokens=config.getoption("harness_gen_max_new_tokens"),
        num_beams=config.getoption("harness_gen_beams"), use_cache=None if cache is None else cache == "on",
        repetition_penalty=penalty, batch_size=config.getoption("harness_gen_batch_size"),
        worst=config.getoption("harness_gen_worst"))


@pytest.fixture
def generation_request(request: pytest.FixtureRequest) -> "GenerationRequest":
    """What this run asks of generation parity (from the ``--harness-gen-*`` options)."""
    from harness.judge.generation import GenerationRequest

    return GenerationRequest(**request.config.stash[REQUEST])
