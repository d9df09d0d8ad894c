"""Value types and option parsing: ids are a public contract, typos get one-line help."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.core import Check, Precision, UsageError, Variant, parse_precision, split_csv
from harness.runners import PROVIDERS, parse_provider
from harness.settings.resolve import build_options


def test_variant_id_is_stable_and_readable():
    v = Variant("marian-tiny", Precision.INT8, PROVIDERS["ort_cpu"])
    assert v.id == "marian-tiny-int8-ort_cpu"
    assert v.backend == "onnxruntime"


def test_parse_errors_suggest_the_close_name():
    with pytest.raises(UsageError, match="did you mean 'fp16'"):
        parse_precision("fp61")
    with pytest.raises(UsageError, match="did you mean 'ort_cpu'"):
        parse_provider("ort-cpu")


def test_split_csv_accepts_commas_spaces_and_repeats():
    assert split_csv(["a,b", "c d", ""]) == ["a", "b", "c", "d"]
    assert split_csv(None) == []


def test_check_direction_and_nan():
    assert Check("cosine", 0.99, higher_is_better=True).passes(0.995)
    assert not Check("cosine", 0.99, higher_is_better=True).passes(0.98)
    assert Check("max_abs", 1e-3).passes(1e-4)
    assert not Check("max_abs", 1e-3).passes(float("nan"))


def test_tolerance_overrides_keep_direction():
    from harness.judge.tolerances import tolerance_for

    tol = tolerance_for(Precision.INT8, is_logits=True, overrides={"int8": {"cosine": 0.9, "top1_agreement": 0.5}})
    merged = {c.metric: c for c in tol.checks}
    assert merged["cosine"].threshold == 0.9 and merged["cosine"].higher_is_better
    assert merged["top1_agreement"].threshold == 0.5 and merged["top1_agreement"].higher_is_better
    assert merged["norm_max_abs"].threshold == 0.15 and not merged["norm_max_abs"].higher_is_better
    hidden = {c.metric for c in tolerance_for(Precision.INT8, is_logits=False).checks}
    assert hidden == {"norm_max_abs", "cosine"}  # top-1 / KL only for logits


@given(st.floats(allow_nan=False, allow_infinity=False), st.floats(allow_nan=False, allow_infinity=False))
def test_check_passes_exactly_one_side_of_threshold(value, threshold):
    low, high = Check("m", threshold), Check("m", threshold, True)
    assert low.passes(value) or high.passes(value)  # at the threshold both pass
    if value != threshold:
        assert low.passes(value) != high.passes(value)


def test_build_options_defaults_and_validation():
    options = build_options()
    assert {"marian-tiny", "bert-tiny", "llama-tiny", "encoder-custom"} <= set(options.models)
    assert [p.value for p in options.precisions] == ["fp32", "fp16", "int8"]
    assert [p.short for p in options.providers] == ["torch_cpu", "ort_cpu"]
    with pytest.raises(UsageError, match="--models: unknown model 'bert-tyni'.*did you mean 'bert-tiny'"):
        build_options(models=["bert-tyni"])
    with pytest.raises(UsageError, match="--samples: must be >= 1"):
        build_options(samples=0)
