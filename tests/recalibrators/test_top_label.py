"""The top-label reduction of the step-function methods on multiclass data (issue 37)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.special import softmax

from pbr_core.recalibrators import get_recalibrator, load_recalibrator

STEP_METHODS = ["isotonic", "histogram_binning", "bbq"]
SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data"


@pytest.mark.parametrize("method", STEP_METHODS)
def test_one_map_on_the_top_label_and_the_rest_in_the_model_proportions(cifar10_split, method: str) -> None:
    fit, test = cifar10_split.fit, cifar10_split.test
    rec = get_recalibrator(method).fit(fit.logits, fit.labels)
    assert rec.multiclass == "top_label" and len(rec.maps_) == 1
    P0 = softmax(test.logits.astype(np.float64), axis=1)
    Q = rec.predict_proba(test.logits)
    rows, top = np.arange(P0.shape[0]), P0.argmax(axis=1)
    np.testing.assert_allclose(Q.sum(axis=1), 1.0, atol=1e-12)
    # The top class's probability is the map of its confidence, the map fitted on (confidence, correct).
    one = get_recalibrator(method).fit(fit.probs.max(axis=1),
                                       (fit.probs.argmax(axis=1) == fit.labels).astype(int))
    np.testing.assert_allclose(Q[rows, top], one.predict_proba(P0[rows, top])[:, 1], atol=1e-12)
    # The other classes keep the model's ratios.
    rest = Q.copy()
    rest[rows, top] = 0
    model_rest = P0.copy()
    model_rest[rows, top] = 0
    np.testing.assert_allclose(rest / rest.sum(1, keepdims=True), model_rest / model_rest.sum(1, keepdims=True),
                               rtol=1e-9, atol=1e-15)
    # Probability input predicts as the logits do.
    np.testing.assert_allclose(rec.predict_proba(P0), Q, rtol=1e-9, atol=1e-13)


def test_probabilities_with_exact_zeros_get_no_zero() -> None:
    P = np.array([[0.7, 0.3, 0.0, 0.0], [0.5, 0.2, 0.2, 0.1], [1.0, 0.0, 0.0, 0.0], [0.1, 0.6, 0.1, 0.2]] * 10)
    y = np.array([0, 1, 0, 2] * 10)
    y = np.array([0, 1, 0, 3] * 10)  # the wrong top labels' true classes: shares .4 and .5 of the rest
    rec = get_recalibrator("histogram_binning", n_bins=2).fit(P, y)
    assert 1 / 41 <= rec.rest_smoothing_ < 0.2  # at least 1/(n+1): the input holds exact zeros
    Q = rec.predict_proba(P[:4])
    assert np.all(np.isfinite(Q)) and np.allclose(Q.sum(axis=1), 1.0) and np.all(Q > 0)
    assert Q[0, 2] == Q[0, 3] < Q[0, 1]  # the model's order kept
    assert Q[2, 1] == Q[2, 2] == Q[2, 3]  # all others 0: 1 - q shared uniformly


@pytest.mark.parametrize("seed", range(5))
def test_the_rest_mixing_is_the_likelihoods_maximum(seed: int) -> None:
    from pbr_core.recalibrators._binary import fit_rest_mixing

    rng = np.random.default_rng(seed)
    K = 6
    r = rng.dirichlet(np.full(K - 1, 0.3), 200)[:, 0] * (rng.uniform(size=200) < 0.9)  # some exact zeros
    grid = np.linspace(0, 1, 100001)[1:]
    loglik = np.log((1 - grid)[:, None] * r[None, :] + grid[:, None] / (K - 1)).mean(axis=1)
    assert fit_rest_mixing(r, K) == pytest.approx(grid[loglik.argmax()], abs=2e-5)
    assert fit_rest_mixing(np.full(10, 0.9), K) == 0.0  # the model's ranking right: trusted as it is
    assert fit_rest_mixing(np.full(10, 1 / (K - 1)), K) in (0.0, 1.0)  # a flat likelihood: either end
    assert fit_rest_mixing(np.zeros(0), K) == 0.0


@pytest.mark.parametrize("method", STEP_METHODS)
def test_the_kitti_random_forest_gets_no_zero(method: str) -> None:
    """The bundled multiclass random forest (exact zeros in many rows): every class gets a probability above 0
    on the test rows, so the test NLL is finite, and it is below the forest's own smoothed NLL."""
    import pbr_core

    preds = pbr_core.load_predictions(SAMPLE_DATA / "kitti_multiclass_random_forest.csv")
    P, y = preds.probs, preds.labels
    assert np.mean(np.any(P == 0.0, axis=1)) > 0.5
    fit, test = np.arange(P.shape[0]) < 5000, np.arange(P.shape[0]) >= 5000
    Q = get_recalibrator(method).fit(P[fit], y[fit]).predict_proba(P[test])
    assert np.all(Q > 0)
    nll = -np.log(Q[np.arange(test.sum()), y[test]]).mean()
    c = 1 / (fit.sum() + 1)  # the forest's own probabilities, smoothed the same way, for a finite NLL
    forest = -np.log((1 - c) * P[test][np.arange(test.sum()), y[test]] + c / P.shape[1]).mean()
    assert nll < forest


@pytest.mark.parametrize("method", STEP_METHODS)
def test_a_file_written_before_the_parameter_reads_as_one_vs_all(tmp_path, small_multiclass, method: str) -> None:
    X, y = small_multiclass
    ova = get_recalibrator(method, multiclass="one_vs_all").fit(X, y)
    doc = ova.to_dict()
    del doc["params"]["multiclass"]
    (tmp_path / "old.json").write_text(json.dumps(doc))
    old = load_recalibrator(tmp_path / "old.json")
    assert old.multiclass == "one_vs_all"
    np.testing.assert_array_equal(old.predict_proba(X), ova.predict_proba(X))


def test_invalid_multiclass_is_refused() -> None:
    with pytest.raises(ValueError, match="`multiclass`"):
        get_recalibrator("isotonic", multiclass="ovr")


@pytest.mark.parametrize("method", STEP_METHODS + ["venn_abers"])
def test_logits_and_probabilities_share_the_rest_alike_when_it_is_smoothed(cifar10_split, method: str) -> None:
    """On 300 rows the fitted uniform share of the rest is well above 0; logits input must mix it in as the
    probability input does (it was dropped for logits before)."""
    fit, test = cifar10_split.fit, cifar10_split.test
    rec = get_recalibrator(method).fit(fit.logits[:300], fit.labels[:300])
    assert rec.rest_smoothing_ > 0.02
    z = test.logits[:500].astype(np.float64)
    np.testing.assert_allclose(rec.predict_proba(z), rec.predict_proba(softmax(z, axis=1)), rtol=1e-9, atol=1e-13)


@pytest.mark.parametrize("method", STEP_METHODS + ["venn_abers"])
def test_changing_multiclass_after_fit_leaves_predictions_to_the_fitted_maps(cifar10_split, method: str) -> None:
    """scikit-learn's convention: set_params changes the next fit, not what a fitted model predicts (it read
    the parameter before, looped over the one top-label map as if one-vs-all and left columns unset)."""
    fit, test = cifar10_split.fit, cifar10_split.test
    rec = get_recalibrator(method).fit(fit.logits, fit.labels)
    before = rec.predict_proba(test.logits)
    rec.set_params(multiclass="one_vs_all")
    np.testing.assert_array_equal(rec.predict_proba(test.logits), before)
    if hasattr(rec, "predict_interval"):
        rec.set_params(multiclass="top_label")
        low, high = rec.predict_interval(test.logits)
        rec.set_params(multiclass="one_vs_all")
        after = rec.predict_interval(test.logits)
        np.testing.assert_array_equal(after[0], low)
        np.testing.assert_array_equal(after[1], high)
