"""The top-label reduction of the step-function methods on multiclass data (issue 37)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.special import softmax

from pbr_core.recalibrators import get_recalibrator, load_recalibrator

STEP_METHODS = ["isotonic", "histogram_binning", "bbq"]


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


def test_probabilities_with_exact_zeros_share_the_rest_uniformly() -> None:
    P = np.array([[0.7, 0.3, 0.0, 0.0], [0.5, 0.2, 0.2, 0.1], [1.0, 0.0, 0.0, 0.0], [0.1, 0.6, 0.1, 0.2]] * 10)
    y = np.array([0, 1, 0, 2] * 10)
    Q = get_recalibrator("histogram_binning", n_bins=2).fit(P, y).predict_proba(P[:4])
    assert np.all(np.isfinite(Q)) and np.allclose(Q.sum(axis=1), 1.0)
    assert Q[0, 2] == Q[0, 3] == 0.0 and Q[0, 1] > 0  # the model's ratios: 0 stays 0 beside a non-zero
    assert Q[2, 1] == Q[2, 2] == Q[2, 3] > 0  # all others 0: 1 - q shared uniformly


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
