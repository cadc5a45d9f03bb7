"""Inductive Venn-Abers predictors pinned to the authors' package (venn-abers) on real predictions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.special import softmax

from pbr_core.recalibrators import VennAbers

SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data"


@pytest.fixture(scope="module")
def kitti_xgb():
    df = pd.read_csv(SAMPLE_DATA / "kitti_xgboost.csv")
    p, y = df["p_positive"].to_numpy(), df["label"].to_numpy()
    return p[:1000], y[:1000], p[1000:4000]


@pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")  # inside venn-abers
def test_binary_pinned_to_venn_abers(kitti_xgb) -> None:
    """Measured: identical (0.0) probabilities and (p0, p1) on the KITTI XGBoost file."""
    va = pytest.importorskip("venn_abers")
    p, y, p_test = kitti_xgb
    ref = va.VennAbers().fit(np.column_stack([1 - p, p]), y)
    p_prime, p01 = ref.predict_proba(np.column_stack([1 - p_test, p_test]))
    ours = VennAbers().fit(p, y)
    np.testing.assert_allclose(ours.predict_proba(p_test)[:, 1], p_prime[:, 1], rtol=0, atol=1e-12)
    low, high = ours.predict_interval(p_test)
    np.testing.assert_allclose(low[:, 1], p01[:, 0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(high[:, 1], p01[:, 1], rtol=0, atol=1e-12)
    np.testing.assert_allclose(low[:, 0], 1 - high[:, 1])
    assert np.all(low <= high)


@pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")
def test_one_vs_rest_pinned_to_venn_abers(cifar10_split) -> None:
    va = pytest.importorskip("venn_abers.venn_abers")
    P = softmax(cifar10_split.fit.logits[:500], axis=1)
    y = cifar10_split.fit.labels[:500]
    P_test = softmax(cifar10_split.test.logits[:1000], axis=1)
    p_prime, p01 = va.predict_proba_prefitted_va(P, y, P_test, va_tpe="one_vs_rest")
    ours = VennAbers(multiclass="one_vs_all").fit(P, y)
    np.testing.assert_allclose(ours.predict_proba(P_test), p_prime, rtol=0, atol=1e-12)
    low, high = ours.predict_interval(P_test)
    for k in range(10):
        np.testing.assert_allclose(low[:, k], p01[k][:, 0], atol=1e-12)
        np.testing.assert_allclose(high[:, k], p01[k][:, 1], atol=1e-12)


@pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")
def test_top_label_pinned_to_venn_abers(cifar10_split) -> None:
    """Multiclass default: the package's binary Venn-Abers predictor on (confidence, correct) gives the top
    class's probability and interval; the other classes share the rest in the model's proportions, their
    intervals the image of the top class's; every probability lies in its interval."""
    va = pytest.importorskip("venn_abers")
    fit, test = cifar10_split.fit, cifar10_split.test
    P, y = softmax(fit.logits[:500].astype(np.float64), axis=1), fit.labels[:500]
    P_test = softmax(test.logits[:1000].astype(np.float64), axis=1)
    conf, correct = P.max(axis=1), (P.argmax(axis=1) == y).astype(int)
    ref = va.VennAbers().fit(np.column_stack([1 - conf, conf]), correct)
    rows, top = np.arange(P_test.shape[0]), P_test.argmax(axis=1)
    c_test = P_test[rows, top]
    p_prime, p01 = ref.predict_proba(np.column_stack([1 - c_test, c_test]))

    ours = VennAbers().fit(fit.logits[:500], y)
    assert ours.multiclass == "top_label" and len(ours.maps_) == 1
    Q = ours.predict_proba(test.logits[:1000])
    np.testing.assert_allclose(Q[rows, top], p_prime[:, 1], rtol=0, atol=1e-12)
    np.testing.assert_allclose(Q.sum(axis=1), 1.0, atol=1e-12)
    low, high = ours.predict_interval(test.logits[:1000])
    np.testing.assert_allclose(low[rows, top], p01[:, 0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(high[rows, top], p01[:, 1], rtol=0, atol=1e-12)
    other = np.ones_like(P_test, dtype=bool)
    other[rows, top] = False
    rest = np.where(other, P_test, 0.0)
    rest /= rest.sum(axis=1, keepdims=True)
    c = ours.rest_smoothing_  # the uniform share mixed into the rest, fitted on the wrong rows (test_top_label.py)
    rest = (1 - c) * rest + c * other / 9
    np.testing.assert_allclose(Q[other], (rest * (1 - Q[rows, top])[:, None])[other], rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(low[other], (rest * (1 - p01[:, 1:2]))[other], rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(high[other], (rest * (1 - p01[:, 0:1]))[other], rtol=1e-9, atol=1e-15)
    assert np.all(low <= high) and np.all((Q >= low - 1e-12) & (Q <= high + 1e-12))


@pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")
def test_cross_top_label_pinned_to_venn_abers(cifar10_split) -> None:
    """Cross Venn-Abers top-label: the package's binary VennAbersCV on (confidence, correct)."""
    va = pytest.importorskip("venn_abers")
    from pbr_core.recalibrators import VennAbersCross

    P = softmax(cifar10_split.fit.logits[:600].astype(np.float64), axis=1)
    y = cifar10_split.fit.labels[:600]
    P_test = softmax(cifar10_split.test.logits[:500].astype(np.float64), axis=1)
    rows, top = np.arange(P_test.shape[0]), P_test.argmax(axis=1)
    p_prime, p01 = _package_cvap(va, P.max(axis=1), (P.argmax(axis=1) == y).astype(int), P_test[rows, top], 3, 1)
    ours = VennAbersCross(n_splits=3, random_state=1).fit(P, y)
    np.testing.assert_allclose(ours.predict_proba(P_test)[rows, top], p_prime[:, 1], rtol=0, atol=1e-12)
    low, high = ours.predict_interval(P_test)
    np.testing.assert_allclose(low[rows, top], p01[:, :3].mean(axis=1), atol=1e-12)
    np.testing.assert_allclose(high[rows, top], p01[:, 3:].mean(axis=1), atol=1e-12)


@pytest.mark.parametrize("cross", [False, True])
def test_a_file_written_before_the_parameter_reads_as_one_vs_all(tmp_path, cifar10_split, cross: bool) -> None:
    import json

    from pbr_core.recalibrators import VennAbersCross, load_recalibrator

    z, y = cifar10_split.fit.logits[:400], cifar10_split.fit.labels[:400]
    ova = (VennAbersCross(multiclass="one_vs_all") if cross else VennAbers(multiclass="one_vs_all")).fit(z, y)
    doc = ova.to_dict()
    del doc["params"]["multiclass"]
    (tmp_path / "old.json").write_text(json.dumps(doc))
    old = load_recalibrator(tmp_path / "old.json")
    assert old.multiclass == "one_vs_all" and len(old.maps_) == 10
    np.testing.assert_array_equal(old.predict_proba(z), ova.predict_proba(z))


def test_interval_narrows_with_more_calibration_rows() -> None:
    """Known truth: y ~ Bernoulli(p). The mean width p1 - p0 shrinks as the calibration set grows."""
    rng = np.random.default_rng(0)
    p_new = rng.uniform(size=2000)
    widths = []
    for n in (100, 1000):
        p = rng.uniform(size=n)
        y = (rng.uniform(size=n) < p).astype(int)
        low, high = VennAbers().fit(p, y).predict_interval(p_new)
        widths.append(float(np.mean(high[:, 1] - low[:, 1])))
    assert widths[1] < widths[0] / 3


class _Fixed:
    """The model that made the scores, fixed: its predict_proba returns its input (the package's
    cross predictor refits an estimator on each fold; a recalibrator's model is never refitted)."""

    def __init__(self) -> None:
        pass

    def get_params(self, deep: bool = True) -> dict:
        return {}

    def set_params(self, **params) -> "_Fixed":
        return self

    def fit(self, X, y) -> "_Fixed":
        self.classes_ = np.array([0, 1])
        return self

    def predict_proba(self, X) -> np.ndarray:
        return np.asarray(X)


def _package_cvap(va, p_cal, y_cal, p_test, n_splits, seed):
    ref = va.VennAbersCV(_Fixed(), inductive=False, n_splits=n_splits, shuffle=seed is not None, random_state=seed)
    ref.fit(np.column_stack([1 - p_cal, p_cal]), y_cal)
    return ref.predict_proba(np.column_stack([1 - p_test, p_test]), p0_p1_output=True)


@pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")
@pytest.mark.parametrize("seed", [0, None])
def test_cross_pinned_to_venn_abers(kitti_xgb, seed) -> None:
    """Measured: the package's VennAbersCV(inductive=False, n_splits=5) on the KITTI XGBoost file
    gives the same probabilities (difference 0.0) and the same per-fold (p0, p1), whose means are
    our interval; the probability lies inside it on every one of the 3000 test rows."""
    va = pytest.importorskip("venn_abers")
    from pbr_core.recalibrators import VennAbersCross

    p, y, p_test = kitti_xgb
    p_prime, p01 = _package_cvap(va, p, y, p_test, 5, seed)
    ours = VennAbersCross(n_splits=5, random_state=seed).fit(p, y)
    q = ours.predict_proba(p_test)
    np.testing.assert_allclose(q[:, 1], p_prime[:, 1], rtol=0, atol=1e-12)
    low, high = ours.predict_interval(p_test)
    np.testing.assert_allclose(low[:, 1], p01[:, :5].mean(axis=1), rtol=0, atol=1e-12)
    np.testing.assert_allclose(high[:, 1], p01[:, 5:].mean(axis=1), rtol=0, atol=1e-12)
    assert np.all(low <= high)
    assert np.all((q[:, 1] >= low[:, 1] - 1e-12) & (q[:, 1] <= high[:, 1] + 1e-12))


@pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")
def test_cross_one_vs_rest_pinned_to_venn_abers(cifar10_split) -> None:
    """Multiclass: each class's one-vs-all CVAP is the package's binary VennAbersCV on (p_k, y == k)
    (its own multiclass CVAP is one-vs-one only), the K probabilities renormalised."""
    va = pytest.importorskip("venn_abers")
    from pbr_core.recalibrators import VennAbersCross

    P = softmax(cifar10_split.fit.logits[:500], axis=1)
    y = cifar10_split.fit.labels[:500]
    P_test = softmax(cifar10_split.test.logits[:500], axis=1)
    ours = VennAbersCross(n_splits=3, random_state=1, multiclass="one_vs_all").fit(P, y)
    low, high = ours.predict_interval(P_test)
    per_class = np.empty_like(P_test)
    for k in range(10):
        p_prime, p01 = _package_cvap(va, P[:, k], (y == k).astype(int), P_test[:, k], 3, 1)
        per_class[:, k] = p_prime[:, 1]
        np.testing.assert_allclose(low[:, k], p01[:, :3].mean(axis=1), atol=1e-12)
        np.testing.assert_allclose(high[:, k], p01[:, 3:].mean(axis=1), atol=1e-12)
    np.testing.assert_allclose(ours.predict_proba(P_test), per_class / per_class.sum(axis=1, keepdims=True),
                               rtol=0, atol=1e-12)


def test_cross_refuses_fewer_rows_than_folds() -> None:
    from pbr_core.recalibrators import VennAbersCross

    with pytest.raises(ValueError, match="needs at least 5 rows"):
        VennAbersCross(n_splits=5).fit(np.array([0.2, 0.7, 0.9]), np.array([0, 1, 1]))
    with pytest.raises(ValueError, match="Expected argument `n_splits` to be an integer from 2 to 100"):
        VennAbersCross(n_splits=1).fit(np.array([0.2, 0.7, 0.9]), np.array([0, 1, 1]))


def test_cross_notes_a_class_rarer_than_the_folds() -> None:
    from pbr_core.recalibrators import VennAbersCross

    rng = np.random.default_rng(0)
    p = rng.uniform(size=200)
    y = np.zeros(200, dtype=int)
    y[:3] = 1
    with pytest.warns(RuntimeWarning, match="fewer rows of one outcome than folds"):
        VennAbersCross(n_splits=5).fit(p, y)


def _tables_by_refitting(p: np.ndarray, y: np.ndarray):
    """The definition: isotonic regression fitted again with the new point, for every gap and label."""
    from sklearn.isotonic import isotonic_regression

    c, inverse = np.unique(p, return_inverse=True)
    w = np.bincount(inverse).astype(np.float64)
    s = np.bincount(inverse, weights=y.astype(np.float64))
    p0, p1 = np.empty(c.size + 1), np.empty(c.size + 1)
    for i in range(c.size + 1):
        weights, sums = np.insert(w, i, 1.0), np.insert(s, i, 0.0)
        p0[i] = isotonic_regression(sums / weights, sample_weight=weights, y_min=0.0, y_max=1.0)[i]
        sums[i] = 1.0
        p1[i] = isotonic_regression(sums / weights, sample_weight=weights, y_min=0.0, y_max=1.0)[i]
    return c, p0, p1


def test_tables_equal_refitting_isotonic_regression_for_every_gap() -> None:
    """The hull-bridge tables equal the definition (scikit-learn's isotonic regression refitted with
    the point added) on 300 random sets with ties, either monotone direction, and structured labels."""
    from pbr_core.recalibrators.venn_abers import venn_abers_tables

    rng = np.random.default_rng(5)
    cases = []
    for _ in range(300):
        n = int(rng.integers(1, 80))
        p = np.round(rng.beta(rng.uniform(0.2, 3), rng.uniform(0.2, 3), size=n), int(rng.integers(1, 4)))
        q = p if rng.uniform() < 0.5 else 1 - p
        cases.append((p, (rng.uniform(size=n) < q).astype(float)))
    p = np.sort(rng.uniform(size=400))
    cases += [(p, np.r_[np.ones(200), np.zeros(200)]), (p, np.r_[np.zeros(200), np.ones(200)]),
              (p, (np.arange(400) % 2).astype(float)), (p, np.zeros(400)), (p, np.ones(400))]
    for p, y in cases:
        for ours, ref in zip(venn_abers_tables(p, y), _tables_by_refitting(p, y)):
            np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-15)


@pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")
def test_the_interval_summary_says_why_a_probability_lies_outside() -> None:
    """Inductive top-label: every probability inside its interval. Cross: the probability merges the folds
    by geometric means and the interval is their arithmetic mean, so some rows fall outside (measured 1.8 %
    on CIFAR-10 with 2 folds); one-vs-all: the renormalisation moves them."""
    from pbr_core.experiments.runs import interval_summary
    from pbr_core.recalibrators import VennAbersCross

    from pbr_core import Predictions

    d = np.load(SAMPLE_DATA / "cifar10_resnet110.npz")
    z, y = d["logits"].astype(np.float64), d["labels"]
    fit = Predictions.from_arrays(z[:2000], y[:2000], input_type="logits")
    test = Predictions.from_arrays(z[5000:], y[5000:], input_type="logits")
    seen = {}
    for rec in (VennAbers(), VennAbersCross(), VennAbers(multiclass="one_vs_all")):
        rec.fit(fit)
        s = interval_summary(rec, test, rec.predict_proba(test), "top_label")
        seen[(type(rec).__name__, rec.multiclass)] = (s.inside, s.outside_reason)
    assert seen[("VennAbers", "top_label")] == (1.0, "")
    inside, reason = seen[("VennAbersCross", "top_label")]
    assert reason == "folds" and 0.9 < inside < 1.0
    inside, reason = seen[("VennAbers", "one_vs_all")]
    assert reason == "renormalised" and inside < 1.0


@pytest.mark.parametrize("multiclass", ["top_label", "one_vs_all"])
def test_intervals_follow_the_class_names_as_the_probabilities_do(cifar10_split, multiclass: str) -> None:
    """A file whose class columns come in another order than at fit: predict_proba matches classes by name,
    and so must predict_interval (by position, one-vs-all intervals belonged to other classes)."""
    from pbr_core import Predictions

    fit, test = cifar10_split.fit, cifar10_split.test
    names = [f"c{k}" for k in range(10)]
    P = softmax(fit.logits.astype(np.float64), axis=1)
    rec = VennAbers(multiclass=multiclass).fit(Predictions.from_arrays(P, fit.labels, class_names=names))
    Pt = softmax(test.logits[:500].astype(np.float64), axis=1)
    perm = np.random.default_rng(0).permutation(10)
    same = Predictions.from_arrays(Pt, test.labels[:500], class_names=names)
    moved = Predictions.from_arrays(Pt[:, perm], test.labels[:500], class_names=[names[k] for k in perm])
    low, high = rec.predict_interval(same)
    low_m, high_m = rec.predict_interval(moved)
    np.testing.assert_allclose(low_m, low[:, perm], rtol=1e-12, atol=1e-15)  # the rest's sum in another order
    np.testing.assert_allclose(high_m, high[:, perm], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(rec.predict_proba(moved), rec.predict_proba(same)[:, perm], rtol=0, atol=1e-15)
