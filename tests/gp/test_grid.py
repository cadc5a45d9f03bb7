"""The alpha x fold grid engine (pbr_core.gp.grid) that the alpha selection and the KL-gap study share.

Each grid fit must equal the recalibrator's own fit (from the prior, or continued with
``fit_continued``), a failed fit is handed to the scorer, and the batched grid scores each member
as its recalibrator would predict. Small real CIFAR-10 fits.
"""

from __future__ import annotations

import numpy as np
import pytest

from pbr_core.gp.grid import GridFit, fit_grid, fit_grid_batched
from pbr_core.predictions import Predictions
from pbr_core.recalibrators.gp import PBR
from recal_doubles import FIT_FAILURE, failing_pbr_fits

QUICK = {"max_iter": 25, "n_mc": 8, "n_predict_samples": 8}


@pytest.fixture(scope="module")
def data(cifar10_logits) -> Predictions:
    z, y = cifar10_logits
    return Predictions.from_arrays(z[:160], y[:160])


def _probs_on_rest(fit: GridFit, data: Predictions) -> dict:
    """A scorer: the fit's KL and its probabilities of rows 120-159 (the same for every fold)."""
    if fit.error is not None:
        return {"error": fit.error}
    return {"kl": fit.kl, "probs": fit.predict_proba(data.subset(np.arange(120, 160))), "continued": fit.continued,
            "error": None}


def test_each_fit_is_the_recalibrators_own(data) -> None:
    folds = [np.arange(0, 60), np.arange(60, 120)]
    got: dict = {}
    fit_grid(data, PBR(**QUICK), [1.0, 0.1], folds, _probs_on_rest, lambda f, i, row: got.__setitem__((f, i), row),
             warm_start=True)
    assert sorted(got) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    rest = data.subset(np.arange(120, 160))
    for f, rows in enumerate(folds):
        cold = PBR(alpha=0.1, **QUICK).fit(data.subset(rows))  # the fold's smallest alpha: from the prior
        warm = PBR(alpha=1.0, **QUICK).fit_continued(cold, data.subset(rows))
        assert not got[f, 1]["continued"] and got[f, 0]["continued"]
        np.testing.assert_array_equal(got[f, 1]["probs"], cold.predict_proba(rest))
        np.testing.assert_array_equal(got[f, 0]["probs"], warm.predict_proba(rest))
        assert got[f, 0]["kl"] == warm.kl_


def test_a_failed_fit_goes_to_the_scorer_and_the_next_starts_from_the_prior(data, monkeypatch) -> None:
    log = failing_pbr_fits(monkeypatch, lambda alpha, n, nth: alpha == 0.1)
    got: dict = {}
    fit_grid(data, PBR(**QUICK), [0.1, 1.0], [np.arange(60)], _probs_on_rest,
             lambda f, i, row: got.__setitem__(i, row), warm_start=True)
    assert got[0] == {"error": f"RuntimeError: {FIT_FAILURE}"} and got[1]["error"] is None
    assert log == [(0.1, 60, False), (1.0, 60, False)]  # alpha = 1 from the prior, not continued
    with pytest.raises(RuntimeError, match=f"pbr alpha=0.1, first fold failed: RuntimeError: {FIT_FAILURE}"):
        fit_grid(data, PBR(**QUICK), [0.1], [np.arange(60)], _probs_on_rest, lambda *a: None, on_error="raise",
                 names=["first fold"], prefix="pbr ")
    with pytest.warns(RuntimeWarning, match="alpha=0.1, fold 1/1 failed .*; its metrics are NaN"):
        fit_grid(data, PBR(**QUICK), [0.1], [np.arange(60)], _probs_on_rest, lambda *a: None, on_error="warn")


def test_the_batched_grid_predicts_as_each_member_would(data) -> None:
    template = PBR(optimizer="adam", **QUICK)
    rows = fit_grid_batched(data, template, [0.5, 1.0], [np.arange(60)], _probs_on_rest)
    assert [(f, i) for f, i, _ in rows] == [(0, 0), (0, 1)]
    model, reports, device = template.fit_batch(data, [np.arange(60)] * 2, [0.5, 1.0])
    rest = data.subset(np.arange(120, 160))
    for (_, i, row), report in zip(rows, reports):
        assert row["kl"] == float(report.kl) and not row["continued"]
        np.testing.assert_array_equal(row["probs"], template.predict_member(model, i, rest.scores, device))
