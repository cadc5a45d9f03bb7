"""Tests for the Predictions value: Predictions.from_arrays / from_top_label validation and helpers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pbr_core.predictions import (
    Predictions,
    PredictionsError,
    detect_input_type,
    log_probs,
    softmax,
)

P3 = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.2, 0.5, 0.3]])
Y3 = np.array([0, 2, 2])


def message(scores, labels, **kw) -> str:
    with pytest.raises(PredictionsError) as info:
        Predictions.from_arrays(scores, labels, source="t", **kw)
    assert str(info.value).startswith("t: ")
    return str(info.value)


def test_predictions_error_is_a_value_error():
    assert issubclass(PredictionsError, ValueError)


def test_probabilities_multiclass():
    p = Predictions.from_arrays(P3, Y3)
    assert p.kind == "multiclass" and p.input_type == "probabilities" and p.logits is None
    assert p.n == 3 and p.n_classes == 3 and p.class_names == ("0", "1", "2")
    np.testing.assert_allclose(p.confidence, [0.7, 0.6, 0.5])
    np.testing.assert_array_equal(p.predicted, [0, 2, 1])
    assert p.accuracy == pytest.approx(2 / 3)
    np.testing.assert_allclose(p.scores, np.log(P3))


def test_logits_detected_and_softmaxed():
    z = np.array([[2.0, -1.0, 0.5], [0.0, 0.0, 3.0]])
    p = Predictions.from_arrays(z, [0, 2])
    assert p.input_type == "logits" and p.kind == "multiclass"
    np.testing.assert_allclose(p.probs, softmax(z))
    np.testing.assert_allclose(p.scores, z)
    assert "outside [0, 1]" in p.notes[-1]


def test_unit_interval_rows_not_summing_are_probabilities_not_logits():
    bad = np.array([[0.2, 0.3, 0.4], [0.1, 0.1, 0.1]])
    m = message(bad, [0, 1])
    assert "row 0 sum to 0.9" in m and "2 rows" in m and "renormalise" in m
    p = Predictions.from_arrays(bad, [0, 1], renormalize=True)
    np.testing.assert_allclose(p.probs.sum(axis=1), 1.0)
    assert any("Renormalised 2 rows" in n for n in p.notes)
    # still logits when asked
    assert Predictions.from_arrays(bad, [0, 1], input_type="logits").input_type == "logits"


def test_tiny_drift_is_removed_exactly():
    p = Predictions.from_arrays(P3 * (1 + 1e-5), Y3)
    np.testing.assert_allclose(p.probs.sum(axis=1), 1.0, atol=1e-15)


def test_all_zero_rows_cannot_be_renormalised():
    m = message(np.array([[0.5, 0.5], [0.0, 0.0]]), [0, 1], renormalize=True)
    assert "row 1 are all zero" in m


@pytest.mark.parametrize("scores, labels, parts", [
    (np.zeros((0, 3)), np.zeros(0), ["empty"]),
    (np.array([["a", "b"]]), [0], ["not numeric"]),
    (np.zeros((2, 2, 2)), [0, 1], ["shape"]),
    (P3, np.zeros((3, 1)), ["labels of shape (n,)"]),
    (P3, [0, 1], ["mismatched lengths", "3 rows", "2 labels"]),
    (np.array([[0.5, np.nan], [0.5, 0.5]]), [0, 1], ["NaN or infinite", "row 0", "column 1"]),
    (P3, [0, 3, 1], ["label 3 at row 1", "0..2"]),
    (P3, [0, -1, 1], ["label -1 at row 1"]),
    (P3, [0, 1.5, 1], ["1.5 at row 1", "whole number"]),
    (P3, [0, np.nan, 1], ["non-finite label at row 1"]),
    (P3, ["a", "b", "c"], ["not numeric"]),
    (P3, [0, 1e30, 1], ["far outside"]),
    (np.array([[1.2, -0.7], [0.5, 0.4]]), [0, 1], []),  # logits: fine
    # every row sums to 1: probabilities with two corrupted cells, not logits
    (np.array([[1.2, -0.2], [0.5, 0.5]]), [0, 1], ["negative probability -0.2 at row 0, column 1",
                                                   "2 values are outside [0, 1]", "Every row sums to 1"]),
    (np.array([[0.5], [0.7]]), [0, 2], ["labels must be 0 or 1", "row 1"]),
    (np.array([0.5, 1.7]), [0, 1], ["p(y=1) in [0, 1]", "row 1"]),
])
def test_from_arrays_errors(scores, labels, parts):
    if not parts:
        Predictions.from_arrays(scores, labels)
        return
    m = message(scores, labels)
    for part in parts:
        assert part in m, m


def test_forced_probabilities_errors():
    z = np.array([[1.2, -0.2], [0.5, 0.5]])
    assert "negative probability -0.2 at row 0" in message(z, [0, 1], input_type="probabilities")


def test_class_names_and_binary():
    with pytest.raises(PredictionsError, match="2 class names for 3"):
        Predictions.from_arrays(P3, Y3, class_names=["a", "b"])
    p = Predictions.from_arrays(np.array([0.2, 0.9]), np.array([False, True]))
    assert p.kind == "binary" and p.n_classes == 2 and p.class_names == ("0", "1")
    np.testing.assert_allclose(p.p_positive, [0.2, 0.9])
    np.testing.assert_allclose(p.confidence, [0.8, 0.9])
    p2 = Predictions.from_arrays(np.array([[0.8, 0.2], [0.1, 0.9]]), [0, 1], class_names=["no", "yes"])
    assert p2.kind == "binary" and p2.class_names == ("no", "yes")
    with pytest.raises(PredictionsError, match="only defined for binary"):
        Predictions.from_arrays(P3, Y3).p_positive


def test_subset_with_probs_and_metric_inputs():
    p = Predictions.from_arrays(P3, Y3, class_names=["a", "b", "c"])
    s = p.subset([2, 0])
    np.testing.assert_array_equal(s.labels, [2, 0])
    np.testing.assert_allclose(s.probs, P3[[2, 0]])
    assert s.class_names == ("a", "b", "c")
    q = p.with_probs(np.full((3, 3), 1 / 3), source="recalibrated")
    assert q.source == "recalibrated" and q.class_names == ("a", "b", "c")
    probs, labels = p.metric_inputs()
    assert probs is p.probs and labels is p.labels


def test_from_top_label():
    t = Predictions.from_top_label([0.9, 0.6, 0.8], [1, 0, 2], [1, 1, 2], class_names=["a", "b", "c"])
    assert t.kind == "top_label" and not t.can_recalibrate and t.probs is None
    assert t.accuracy == pytest.approx(2 / 3)
    conf, correct = t.metric_inputs()
    np.testing.assert_allclose(conf, [0.9, 0.6, 0.8])
    np.testing.assert_array_equal(correct, [1.0, 0.0, 1.0])
    with pytest.raises(PredictionsError, match="cannot be recalibrated"):
        t.scores
    for args, part in [
        (([0.9, 1.2], [0, 0], [0, 1]), "confidence 1.2 at row 1"),
        (([0.9, np.nan], [0, 0], [0, 1]), "NaN or infinite confidence at row 1"),
        (([0.9, 0.8], [0], [0, 1]), "mismatched lengths"),
        (([], [], []), "empty"),
        ((["x"], [0], [0]), "not numeric"),
        (([0.9], [0.5], [0]), "predicted label 0.5 at row 0"),
    ]:
        with pytest.raises(PredictionsError, match="^t: ") as info:
            Predictions.from_top_label(*args, source="t")
        assert part in str(info.value)


@settings(max_examples=40, deadline=None)
@given(z=hnp.arrays(np.float64, st.tuples(st.integers(1, 15), st.integers(2, 6)), elements=st.floats(-40, 40)))
def test_property_detection(z):
    """Anything with a value outside [0, 1] is logits; a softmax output is probabilities."""
    z = z.copy()
    z[0, 0] = 2.0
    assert detect_input_type(z) == "logits"
    assert detect_input_type(softmax(z)) == "probabilities"
    p = Predictions.from_arrays(softmax(z), np.zeros(z.shape[0], dtype=int))
    assert p.input_type == "probabilities"
    np.testing.assert_allclose(p.probs, softmax(z), atol=1e-12)
    assert np.all(np.isfinite(log_probs(p.probs)))


def test_rounding_noise_below_zero_is_a_named_error_not_silent_logits():
    """Rows summing to 1 with a value a hair below 0 are broken probabilities: say so, never softmax them."""
    import numpy as np
    import pytest

    from pbr_core.predictions import Predictions, PredictionsError

    p = np.array([[0.5, 0.5, 0.0], [0.2, 0.8 + 2e-5, -2e-5], [0.1, 0.1, 0.8]])
    with pytest.raises(PredictionsError, match=r"negative probability -2e-05 at row 1.*rounding"):
        Predictions.from_arrays(p, np.array([0, 1, 2]))
    # Real logits (far outside [0, 1]) are still detected as logits.
    z = np.array([[2.0, -1.0, 0.5], [0.1, 3.0, -2.0], [-1.0, 0.0, 4.0]])
    assert Predictions.from_arrays(z, np.array([0, 1, 2])).input_type == "logits"


def test_probabilities_a_hair_outside_the_unit_interval_are_clipped_with_a_note():
    """1.0000001 or -1e-12 in a written file is float rounding: clipped, noted, the rows still checked
    (found in the wild: 1.0000001 made the loader call the columns ambiguous or refuse them)."""
    from pbr_core.predictions import UNIT_SLACK

    p = np.array([[1.0000001, 0.0, -1e-12], [0.2, 0.3, 0.5], [0.0, 0.0, 1.0]])
    preds = Predictions.from_arrays(p, np.array([0, 1, 2]))
    assert preds.input_type == "probabilities"
    assert preds.probs.min() >= 0 and preds.probs.max() <= 1
    np.testing.assert_allclose(preds.probs[1], [0.2, 0.3, 0.5])
    assert any("Clipped 2 probabilities" in n and "1.0000001" in n for n in preds.notes)
    # one column of p(y=1) too
    one = Predictions.from_arrays(np.array([1.0 + UNIT_SLACK / 2, 0.3]), np.array([1, 0]))
    np.testing.assert_allclose(one.p_positive, [1.0, 0.3])
    # further out stays an error naming the value at full precision
    with pytest.raises(PredictionsError, match=r"probability above 1 \(1\.00001\) at row 0"):
        Predictions.from_arrays(np.array([[1.00001, 0.0], [0.5, 0.5]]), np.array([0, 1]), input_type="probabilities")
    # a clipped row that does not sum to 1 is still refused, not read as logits
    with pytest.raises(PredictionsError, match="sum to 0.5"):
        Predictions.from_arrays(np.array([[0.2, 0.3, -1e-12], [0.2, 0.3, 0.5]]), np.array([0, 1]))


@pytest.mark.parametrize("k", [2, 3, 10])
def test_percentages_are_an_error_not_logits(k):
    """Rows of non-negative scores summing to 100 are probabilities in percent: softmaxing them as
    logits gave ECE .235 instead of .028 on a file in the wild."""
    rng = np.random.default_rng(k)
    p = rng.dirichlet(np.ones(k), size=50)
    y = rng.integers(0, k, size=50)
    with pytest.raises(PredictionsError, match=r"look like percentages.*Divide them by 100.*input_type='logits'"):
        Predictions.from_arrays(np.round(p * 100, 2), y)
    # asked for, they are logits
    assert Predictions.from_arrays(p * 100, y, input_type="logits").input_type == "logits"
    # one column of p(y=1) in percent: the range error says so
    with pytest.raises(PredictionsError, match=r"percentages\? divide them by 100"):
        Predictions.from_arrays(p[:, 0] * 100, (y > 0).astype(int))


def test_one_log_odds_column_read_as_binary_logits():
    """A logistic model's decision function (the log-odds of class 1) in one column, read with
    input_type="logits", gives exactly the model's own predict_proba (scikit-learn, real data)."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    x, y = load_breast_cancer(return_X_y=True)
    x = StandardScaler().fit_transform(x)
    model = LogisticRegression(C=0.1, max_iter=1000).fit(x[::2], y[::2])
    margin, reference = model.decision_function(x[1::2]), model.predict_proba(x[1::2])
    p = Predictions.from_arrays(margin, y[1::2], input_type="logits")
    assert p.kind == "binary" and p.input_type == "logits" and p.n_classes == 2
    np.testing.assert_allclose(p.probs, reference, rtol=0, atol=1e-12)
    np.testing.assert_allclose(p.logits, np.column_stack([np.zeros_like(margin), margin]))
    assert any("log-odds of class 1" in note for note in p.notes)
    # Without input_type="logits" the column is refused with the way to read it.
    text = message(margin, y[1::2])
    assert "must be p(y=1) in [0, 1]" in text and "input_type='logits'" in text and "log-odds" in text


def test_label_and_percentage_messages_say_what_the_values_likely_are():
    assert "counted from 1? subtract 1" in message(P3, Y3 + 1)
    assert "labels -1/+1? write -1 as 0" in message(np.array([0.2, 0.9, 0.6]), np.array([-1, 1, 1]))
    assert "subtract" not in message(P3, np.array([0, 5, 1]))  # neither 1..K nor -1/+1: no guess
    with pytest.raises(PredictionsError, match=r"percentages\? divide them by 100"):
        Predictions.from_top_label(np.array([92.0, 55.0]), np.array([0, 1]), np.array([0, 0]))


def test_rows_off_by_rounding_are_recognised_in_the_message():
    """Probabilities rounded to 2 or 3 decimals when written (real CIFAR-10 softmax outputs) are
    named as rounded, so that renormalising is seen to remove just that; rows off for another
    reason get no such sentence."""
    d = np.load(Path(__file__).resolve().parents[1] / "sample_data" / "cifar10_resnet110.npz")
    p, y = softmax(d["logits"][:500].astype(np.float64)), d["labels"][:500]
    for decimals, bound in ((2, "10 x 0.005 = 0.05"), (3, "10 x 0.0005 = 0.005")):
        text = message(np.round(p, decimals), y)
        assert f"at most {decimals} decimals" in text and bound in text and "ask to renormalise" in text
        fixed = Predictions.from_arrays(np.round(p, decimals), y, renormalize=True)
        assert np.abs(fixed.probs - p).max() <= 10 * 0.5 * 10.0 ** -decimals
    assert "decimal" not in message(p * 0.97, y)
    assert "decimal" not in message(np.round(p * 0.9, 2), y)  # multiples of 0.01, but off by 0.1


def test_top_label_data_is_refused_with_one_sentence(tmp_path):
    """Every place that cannot recalibrate top-label-only data says the same sentence (issue 36: it
    was written five times, in three wordings)."""
    from pbr_core.experiments._protocol import check_predictions
    from pbr_core.predictions import TOP_LABEL_NOT_RECALIBRATED
    from pbr_core.recalibrators import Identity
    from pbr_core.stream import apply_to_dataset, fit_platt, fit_temperature, open_dataset

    t = Predictions.from_top_label([0.9, 0.6, 0.8], [1, 0, 2], [1, 1, 2])
    with pytest.raises(PredictionsError) as raised:
        t.scores
    assert str(raised.value) == TOP_LABEL_NOT_RECALIBRATED
    with pytest.raises(PredictionsError) as raised:
        check_predictions(t)  # every protocol's first step
    assert str(raised.value).startswith(TOP_LABEL_NOT_RECALIBRATED)
    path = tmp_path / "top.csv"
    path.write_text("confidence,predicted,label\n0.9,1,1\n0.6,0,1\n0.8,2,2\n")
    dataset = open_dataset(str(path))
    fitted = Identity().fit(np.array([[0.2, 0.8], [0.7, 0.3]]), np.array([1, 0]))
    for call in (lambda: fit_temperature(dataset), lambda: fit_platt(dataset),
                 lambda: apply_to_dataset(fitted, dataset, tmp_path / "out.csv")):
        with pytest.raises(PredictionsError) as raised:
            call()
        assert str(raised.value) == f"{dataset.spec}: {TOP_LABEL_NOT_RECALIBRATED}"


def test_confidence_correct_labels_are_the_correctness_so_the_obvious_call_is_right():
    """Audit 9a: on (confidence, correct) records ``labels`` was 1 - correct (class 0 predicted), so the
    natural ``ece(preds.confidence, preds.labels)`` gave 0.632 for a true 0.178, without a warning; and
    ``ece(preds.probs, preds.labels)`` failed with "got shape ()", naming nothing."""
    import pbr_core

    rng = np.random.default_rng(9)
    conf = rng.uniform(0.3, 1.0, 2000)
    correct = rng.uniform(size=2000) < conf - 0.15          # 15 points too confident
    preds = Predictions.from_confidence_correct(conf, correct)
    np.testing.assert_array_equal(preds.labels, correct.astype(np.int64))
    np.testing.assert_array_equal(preds.correct, correct.astype(np.float64))
    slow = sum(abs(correct[b].mean() - conf[b].mean()) * b.sum() for b in
               [(conf >= lo) & ((conf < lo + 1 / 12) | (lo + 1 / 12 >= 1)) for lo in np.arange(12) / 12] if b.any()) / 2000
    assert pbr_core.ece(preds.confidence, preds.labels) == pytest.approx(slow, abs=1e-12)
    assert pbr_core.ece(*preds.metric_inputs()) == pytest.approx(slow, abs=1e-12)
    with pytest.raises(ValueError, match=r"`probs` is None.*metric_inputs"):
        pbr_core.ece(preds.probs, preds.labels)


# ----------------------------------------------------------------------------- from_predictions, one label value
@pytest.mark.parametrize("y, names", [([1, 1, 1], ("0", "1")), ([True, True, True], ("False", "True")),
                                      ([1.0, 1.0, 1.0], ("0.0", "1.0")), (["yes", "yes", "yes"], ("no", "yes")),
                                      (["Positive"] * 3, ("Negative", "Positive"))])
def test_from_predictions_one_positive_label_is_class_1(y, names):
    # audit 10a: the only label was made class 0 beside an invented 'positive', every number inverted
    import pbr_core

    preds = Predictions.from_predictions(np.array(y), np.array([0.2, 0.7, 0.9]))
    assert preds.class_names == names and preds.labels.tolist() == [1, 1, 1]
    # three bins of one row each: |0.2 - 1| + |0.7 - 1| + |0.9 - 1| over 3 = 0.4 (it gave 0.6)
    assert pbr_core.ece(preds.p_positive, preds.labels) == pytest.approx(0.4)


@pytest.mark.parametrize("y", [[0, 0], [False, False], [-1, -1], ["no", "no"], ["FALSE", "FALSE"]])
def test_from_predictions_one_negative_label_is_class_0(y):
    preds = Predictions.from_predictions(np.array(y), np.array([0.2, 0.7]))
    assert preds.labels.tolist() == [0, 0] and len(preds.class_names) == 2


@pytest.mark.parametrize("y", [[">50K", ">50K"], [2, 2], ["cat", "cat"]])
def test_from_predictions_one_label_of_unknown_side_asks_for_class_names(y):
    with pytest.raises(PredictionsError, match="class_names=\\[negative, positive\\]"):
        Predictions.from_predictions(np.array(y), np.array([0.2, 0.7]))
    named = Predictions.from_predictions(np.array(y), np.array([0.2, 0.7]), class_names=["other", y[0]])
    assert named.labels.tolist() == [1, 1]


def test_from_predictions_adult_rows_of_one_outcome_match_scikit_learn():
    from sklearn.metrics import brier_score_loss

    import pbr_core

    adult = pbr_core.load_predictions(Path(__file__).parents[1] / "sample_data" / "adult_gradient_boosting.csv.gz")
    rows = adult.labels == 1
    p = adult.p_positive[rows]
    preds = Predictions.from_predictions(adult.labels[rows], p)
    summary = pbr_core.calibration_summary(preds.p_positive, preds.labels, n_boot=10)
    # 0.2288 (it gave 0.4831 with the labels inverted)
    assert summary["brier"] == pytest.approx(brier_score_loss(np.ones(p.size), p), rel=1e-12)
