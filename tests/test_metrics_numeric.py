"""compare_arrays against numbers worked out by hand, plus properties that must always hold."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from harness.metrics.numeric import NUMERIC_METRICS, Location, compare_arrays

FLOAT_METRICS = ["max_abs", "mean_abs", "p99_abs", "max_rel", "norm_max_abs", "rel_l2", "cosine"]
LOGIT_METRICS = ["kl", "kl_max", "top1_agreement", "topk_agreement"]


# --- hand-computed values -------------------------------------------------------------


def test_every_float_metric_by_hand() -> None:
    ref = np.array([1.0, -2.0, 4.0, 0.0])
    got = np.array([1.5, -2.0, 3.0, 0.0])
    m = compare_arrays(ref, got).metrics
    # err = [0.5, 0, 1, 0]
    assert m["max_abs"] == 1.0
    assert m["mean_abs"] == pytest.approx(0.375)  # 1.5 / 4
    # sorted err [0, 0, 0.5, 1]; rank 0.99 * 3 = 2.97 -> 0.5 + 0.97 * (1 - 0.5)
    assert m["p99_abs"] == pytest.approx(0.985)
    # eps = 1e-6 * max|ref| = 4e-6; worst ratio is 0.5 / (1 + 4e-6) (the 1 / 4.000004 is smaller)
    assert m["max_rel"] == pytest.approx(0.5 / 1.000004, rel=1e-12)
    assert m["norm_max_abs"] == pytest.approx(0.25)  # 1 / 4
    # ||err|| = sqrt(0.25 + 1), ||ref|| = sqrt(1 + 4 + 16)
    assert m["rel_l2"] == pytest.approx(math.sqrt(1.25) / math.sqrt(21))  # 0.243975
    # dot = 1.5 + 4 + 12 = 17.5; ||got|| = sqrt(2.25 + 4 + 9) = sqrt(15.25)
    assert m["cosine"] == pytest.approx(17.5 / math.sqrt(21 * 15.25))  # 0.977887
    assert set(m) == set(FLOAT_METRICS)


def test_worst_location_and_count() -> None:
    c = compare_arrays(np.array([1.0, -2.0, 4.0, 0.0]), np.array([1.5, -2.0, 3.0, 0.0]))
    assert c.worst == Location(index=(2,), ref=4.0, got=3.0, abs_err=1.0)
    assert c.n_compared == 4


def test_max_rel_eps_keeps_tiny_references_from_exploding() -> None:
    # err = [1e-9, 0]; eps = 1e-6 * 1.0, so 1e-9 / (1e-9 + 1e-6) = 1 / 1001 instead of 1.0
    m = compare_arrays(np.array([1e-9, 1.0]), np.array([2e-9, 1.0])).metrics
    assert m["max_rel"] == pytest.approx(1 / 1001)


def test_norm_max_abs_is_scale_free() -> None:
    ref = np.array([0.1, -0.2, 0.05])
    got = ref + np.array([0.01, 0.0, 0.0])
    small = compare_arrays(ref, got).metrics
    big = compare_arrays(ref * 1000, got * 1000).metrics
    assert small["norm_max_abs"] == pytest.approx(0.05)  # 0.01 / 0.2
    assert big["norm_max_abs"] == pytest.approx(0.05)
    assert big["max_abs"] == pytest.approx(1000 * small["max_abs"])


def test_all_zero_reference() -> None:
    zeros = np.zeros(3)
    same = compare_arrays(zeros, zeros).metrics
    assert same["cosine"] == 1.0 and same["max_rel"] == 0.0 and same["rel_l2"] == 0.0
    off = compare_arrays(zeros, np.array([0.0, 0.5, 0.0])).metrics
    assert off["cosine"] == 0.0
    assert off["max_rel"] == math.inf and off["norm_max_abs"] == math.inf


def _logits_by_hand() -> tuple[np.ndarray, np.ndarray]:
    ln2, ln4 = math.log(2), math.log(4)
    ref = np.array([[ln4, ln2, 0.0], [0.0, 1.0, 2.0]])  # row 0: softmax [4/7, 2/7, 1/7]
    got = np.array([[ln2, ln4, 0.0], [0.0, 1.0, 2.0]])  # row 0: softmax [2/7, 4/7, 1/7]
    return ref, got


def test_logit_metrics_by_hand() -> None:
    ref, got = _logits_by_hand()
    m = compare_arrays(ref, got, is_logits=True, topk=2).metrics
    # row 0: KL = 4/7 ln(4/7 / 2/7) + 2/7 ln(2/7 / 4/7) + 1/7 ln 1 = (4/7 - 2/7) ln 2 = 2/7 ln 2
    # row 1: identical -> 0
    assert m["kl"] == pytest.approx(math.log(2) / 7)  # 0.0990210
    assert m["kl_max"] == pytest.approx(2 * math.log(2) / 7)  # 0.198042
    # argmax: row 0 ref 0 vs got 1 (differs), row 1 both 2
    assert m["top1_agreement"] == 0.5
    # top-2: row 0 {0, 1} vs {1, 0} -> 2/2; row 1 {2, 1} vs {2, 1} -> 2/2
    assert m["topk_agreement"] == 1.0
    assert set(m) == set(FLOAT_METRICS + LOGIT_METRICS)


def test_kl_direction_is_ref_to_got() -> None:
    # p = softmax([0, 0]) = [1/2, 1/2], q = softmax([ln 3, 0]) = [3/4, 1/4]
    # KL(p || q) = 1/2 ln(2/3) + 1/2 ln 2 = 1/2 ln(4/3) = 0.143841
    # (the reverse, KL(q || p) = 3/4 ln(3/2) + 1/4 ln(1/2) = 0.130812, must not come out)
    ref, got = np.array([[0.0, 0.0]]), np.array([[math.log(3), 0.0]])
    m = compare_arrays(ref, got, is_logits=True).metrics
    assert m["kl"] == pytest.approx(0.5 * math.log(4 / 3))


def test_topk_agreement_k1_and_k_capped_by_vocab() -> None:
    ref, got = _logits_by_hand()
    # k = 1: row 0 {0} vs {1} -> 0, row 1 -> 1; mean 0.5
    assert compare_arrays(ref, got, is_logits=True, topk=1).metrics["topk_agreement"] == 0.5
    # topk = 5 > vocab 3: k = 3 covers the whole vocabulary -> 1
    assert compare_arrays(ref, got, is_logits=True, topk=5).metrics["topk_agreement"] == 1.0
    with pytest.raises(ValueError, match="topk"):
        compare_arrays(ref, got, is_logits=True, topk=0)


def test_kl_is_stable_for_huge_logits() -> None:
    # naive softmax overflows at 1000; log-softmax gives the same answer as the shifted pair
    ref, got = _logits_by_hand()
    m = compare_arrays(ref + 1000.0, got + 1000.0, is_logits=True).metrics
    assert m["kl"] == pytest.approx(math.log(2) / 7)


# --- masking ----------------------------------------------------------------------------


def _logits_3d(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ref = rng.normal(0.0, 0.16, size=(2, 3, 5)).astype(np.float32)
    got = ref + rng.normal(0.0, 1e-3, size=ref.shape).astype(np.float32)
    mask = np.array([[True, True, False], [True, False, False]])
    return ref, got, mask


def test_masked_positions_change_nothing() -> None:
    ref, got, mask = _logits_3d()
    clean = compare_arrays(ref, got, valid_mask=mask, is_logits=True)
    poisoned = got.copy()
    poisoned[0, 2, :] = 1e6  # padding position: huge error
    poisoned[1, 1, 3] = np.nan  # padding position: NaN
    dirty = compare_arrays(ref, poisoned, valid_mask=mask, is_logits=True)
    assert dirty.metrics == clean.metrics
    assert dirty.worst == clean.worst
    assert dirty.n_compared == clean.n_compared == 3 * 5  # 3 valid positions x vocab 5
    unmasked = compare_arrays(ref, poisoned, is_logits=True)
    assert unmasked.metrics["max_abs"] == math.inf  # the NaN is seen without the mask


def test_mask_on_fewer_axes_broadcasts() -> None:
    ref, got, _ = _logits_3d()
    got = got.copy()
    got[1] += 5.0
    only_first = compare_arrays(ref, got, valid_mask=np.array([True, False]), is_logits=True)
    direct = compare_arrays(ref[:1], got[:1], is_logits=True)
    assert only_first.metrics == pytest.approx(direct.metrics)
    assert only_first.n_compared == 15


def test_all_masked_is_not_a_pass() -> None:
    ref, got, _ = _logits_3d()
    c = compare_arrays(ref, got, valid_mask=np.zeros((2, 3), bool), is_logits=True)
    assert c.n_compared == 0 and c.worst is None
    assert all(math.isnan(v) for v in c.metrics.values())


def test_bad_masks_raise() -> None:
    ref, got, _ = _logits_3d()
    with pytest.raises(ValueError, match="leading axes"):
        compare_arrays(ref, got, valid_mask=np.ones((3, 2), bool))
    with pytest.raises(ValueError, match="logits axis"):
        compare_arrays(ref, got, valid_mask=np.ones((2, 3, 5), bool), is_logits=True)
    with pytest.raises(ValueError, match="bool"):
        compare_arrays(ref, got, valid_mask=np.ones((2, 3), np.int64))


# --- worst location ---------------------------------------------------------------------


def test_worst_location_in_3d_follows_the_mask() -> None:
    ref = np.zeros((2, 3, 4), np.float32)
    got = ref.copy()
    got[1, 2, 3] = 0.7
    got[0, 1, 2] = -0.25
    c = compare_arrays(ref, got)
    assert c.worst is not None
    assert c.worst.index == (1, 2, 3)
    assert c.worst.got == pytest.approx(0.7)
    assert c.worst.describe(["batch", "position", "index"]) == (
        "batch=1, position=2, index=3 (ref 0, got 0.7, |err| 0.7)"
    )
    mask = np.array([[True, True, True], [True, True, False]])
    masked = compare_arrays(ref, got, valid_mask=mask)
    assert masked.worst is not None and masked.worst.index == (0, 1, 2)
    assert masked.worst.abs_err == pytest.approx(0.25)


def test_describe_names() -> None:
    loc = Location(index=(3, 17, 402), ref=1.23, got=1.31, abs_err=0.08)
    assert loc.describe(["batch", "position", "index"]) == (
        "batch=3, position=17, index=402 (ref 1.23, got 1.31, |err| 0.08)"
    )
    assert loc.describe(["batch"]).startswith("batch=3, dim1=17, dim2=402 ")
    assert Location((), 1.0, 1.5, 0.5).describe() == "scalar (ref 1, got 1.5, |err| 0.5)"
    with pytest.raises(ValueError):
        loc.describe(["a", "b", "c", "d"])


# --- non-finite and exact outputs ---------------------------------------------------------


def test_nan_and_inf_fail_every_gate_and_point_at_the_first() -> None:
    ref = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = ref.copy()
    got[1, 0] = np.inf
    got[0, 2] = np.nan  # row-major first
    c = compare_arrays(ref, got, is_logits=True)
    for name, value in c.metrics.items():
        if NUMERIC_METRICS[name].higher_is_better:
            assert math.isnan(value), name
        else:
            assert value == math.inf, name
    assert c.worst is not None and c.worst.index == (0, 2)
    assert c.worst.ref == 2.0 and math.isnan(c.worst.got) and c.worst.abs_err == math.inf


def test_matching_infinities_agree() -> None:
    # a banned token: -inf in both ref and got is agreement, not failure
    ref = np.array([[0.0, math.log(3), -np.inf]])
    got = np.array([[0.0, math.log(3), -np.inf]])
    m = compare_arrays(ref, got, is_logits=True).metrics
    assert m["max_abs"] == 0.0 and m["kl"] == 0.0 and m["top1_agreement"] == 1.0
    m = compare_arrays(ref, np.array([[0.0, math.log(3), 0.0]]), is_logits=True).metrics
    assert m["max_abs"] == math.inf  # got finite where ref is -inf: a real disagreement


def test_integer_outputs_compare_exactly() -> None:
    c = compare_arrays(np.array([1, 2, 3]), np.array([1, 5, 3]), is_logits=True)
    # |diff| = [0, 3, 0]
    assert c.metrics == {"max_abs": 3.0, "mean_abs": 1.0, "mismatch_rate": pytest.approx(1 / 3)}
    assert c.worst == Location((1,), 2.0, 5.0, 3.0)
    same = compare_arrays(np.array([True, False]), np.array([True, False]))
    assert same.metrics == {"max_abs": 0.0, "mean_abs": 0.0, "mismatch_rate": 0.0}
    flip = compare_arrays(np.array([True, False]), np.array([True, True]))
    assert flip.metrics["max_abs"] == 1.0 and flip.metrics["mismatch_rate"] == 0.5
    # 2**64 - 1 vs 2**64 - 2 differ by 1, which float64 alone would round to 0
    big = compare_arrays(np.array([2**64 - 1], np.uint64), np.array([2**64 - 2], np.uint64))
    assert big.metrics["max_abs"] == 1.0


def test_shape_mismatch_names_both_shapes() -> None:
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
        compare_arrays(np.zeros((2, 3)), np.zeros((3, 2)))


def test_registry_covers_every_metric() -> None:
    ref, got = _logits_by_hand()
    names = set(compare_arrays(ref, got, is_logits=True).metrics)
    names |= set(compare_arrays(np.array([1]), np.array([1])).metrics)
    assert names == set(NUMERIC_METRICS)
    assert {n for n, i in NUMERIC_METRICS.items() if i.higher_is_better} == {
        "cosine",
        "top1_agreement",
        "topk_agreement",
    }


# --- properties ---------------------------------------------------------------------------

_values = st.one_of(st.just(0.0), st.floats(1e-3, 1e3), st.floats(-1e3, -1e-3))
_shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5)


@st.composite
def _pairs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    shape = draw(_shapes)
    a = draw(hnp.arrays(np.float64, shape, elements=_values))
    b = draw(hnp.arrays(np.float64, shape, elements=_values))
    return a, b


@settings(max_examples=60, deadline=None)
@given(a=hnp.arrays(np.float64, _shapes, elements=_values))
def test_identical_arrays_agree_perfectly(a: np.ndarray) -> None:
    m = compare_arrays(a, a.copy(), is_logits=True, topk=3).metrics
    for name in [*FLOAT_METRICS[:-1], "kl", "kl_max"]:  # every error measure
        assert m[name] == 0.0, name
    assert m["cosine"] == pytest.approx(1.0, abs=1e-12)
    assert m["top1_agreement"] == 1.0 and m["topk_agreement"] == 1.0


@settings(max_examples=60, deadline=None)
@given(pair=_pairs())
def test_max_abs_is_symmetric_and_bounds_mean_and_p99(pair: tuple[np.ndarray, np.ndarray]) -> None:
    a, b = pair
    ab, ba = compare_arrays(a, b).metrics, compare_arrays(b, a).metrics
    assert ab["max_abs"] == ba["max_abs"]
    assert ab["mean_abs"] <= ab["max_abs"]
    assert ab["p99_abs"] <= ab["max_abs"]
    assert -1.0 <= ab["cosine"] <= 1.0


@settings(max_examples=60, deadline=None)
@given(pair=_pairs(), scale=st.floats(1e-3, 1e3))
def test_cosine_ignores_positive_scaling(pair: tuple[np.ndarray, np.ndarray], scale: float) -> None:
    a, b = pair
    plain = compare_arrays(a, b).metrics["cosine"]
    scaled = compare_arrays(a, b * scale).metrics["cosine"]
    assert scaled == pytest.approx(plain, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(pair=_pairs(), wanted=st.sets(st.sampled_from(FLOAT_METRICS), min_size=1))
def test_only_computes_the_metrics_asked_for_with_the_same_values(pair: tuple[np.ndarray, np.ndarray],
                                                                  wanted: set[str]) -> None:
    a, b = pair
    full = compare_arrays(a, b).metrics
    some = compare_arrays(a, b, only=wanted)
    assert set(some.metrics) == wanted
    assert some.metrics == {name: full[name] for name in wanted}
    with pytest.raises(ValueError, match="not an element metric: cosin"):
        compare_arrays(a, b, only=["cosin"])


def test_the_float_metrics_never_call_blas(monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy's OpenBLAS threads wait on cores the runtime's thread pool spins on: a cold check's
    closed loop spent 1.9 s of 2 s in them (docs/pitfalls.md #23). The metrics use ufunc sums."""
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("a BLAS call in the metrics")

    rng = np.random.default_rng(0)
    ref = rng.standard_normal((4, 64, 32))
    expected = compare_arrays(ref, ref * 1.01, is_logits=True).metrics
    monkeypatch.setattr(np, "dot", refuse)
    monkeypatch.setattr(np, "vdot", refuse)
    monkeypatch.setattr(np, "matmul", refuse)
    monkeypatch.setattr(np.linalg, "norm", refuse)
    assert compare_arrays(ref, ref * 1.01, is_logits=True).metrics == expected
    assert expected["cosine"] == pytest.approx(1.0, abs=1e-12) and expected["rel_l2"] == pytest.approx(0.01)
