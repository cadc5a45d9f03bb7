"""PBRCV: alpha by cross-validation as an estimator, pinned against select_alpha and a plain PBR fit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core.alpha_selection import select_alpha
from pbr_core.experiments import compare, split_indices
from pbr_core.recalibrators import PBR, PBRCV, get_recalibrator
from recal_doubles import failing_pbr_fits

QUICK = {"max_iter": 20, "n_mc": 8, "n_predict_samples": 8}


@pytest.fixture(scope="module")
def data(cifar10_logits):
    z, y = cifar10_logits
    return z[:120], y[:120]


def test_pbr_cv_is_select_alpha_then_a_pbr_fit_with_the_winner(data) -> None:
    z, y = data
    seen = []
    rec = PBRCV(PBR(objective="pbr_total", mean_approx=True, **QUICK), alphas=[0.1, 1.0], cv=2, scoring="brier",
                cv_seed=3)
    rec.fit(z, y, progress=lambda *a: seen.append(a))
    sel = select_alpha(z, (0.1, 1.0), objective="pbr_total", n_splits=2, metric="brier", seed=3, labels=y,
                       mean_approx=True, **QUICK)
    assert rec.alpha_ == sel.best_alpha
    pd.testing.assert_frame_equal(pd.DataFrame(rec.cv_results_), sel.summary[list(rec.cv_results_)])
    best = get_recalibrator("pbr_total_app", alpha=sel.best_alpha, **QUICK).fit(z, y)
    assert rec.best_estimator_.to_dict() == best.to_dict()
    np.testing.assert_array_equal(rec.predict_proba(z), best.predict_proba(z))
    assert rec.kl_ == best.kl_ and rec.bounds_ == best.bounds_
    # one call per CV fit, then the choice (alpha_ set by then); total counts the final fit
    assert [a[:2] for a in seen] == [(1, 5), (2, 5), (3, 5), (4, 5), (4, 5)]
    assert seen[-1][2] == f"alpha={rec.alpha_:g} chosen"


def test_pbr_cv_parameters_are_checked_before_the_data(data) -> None:
    z, y = data
    for bad, words in [({"cv": 1}, "`cv` to be an integer from 2 to 100, or a splitter"),
                       ({"alphas": []}, "`alphas` to be a non-empty list"),
                       ({"alphas": [0.1, -1.0]}, "`alphas` to be a non-empty list"),
                       ({"scoring": "auc"}, "`scoring` to be 'ece', 'brier' or 'nll'"),
                       ({"estimator": PBR(objective="gp")}, "`objective` to be 'pbr' or 'pbr_total'"),
                       ({"estimator": get_recalibrator("temperature")}, "`estimator` to be a PBR recalibrator")]:
        with pytest.raises(ValueError, match=words):
            PBRCV(**bad).fit(z, y)
    with pytest.raises(ValueError, match="Method 'pbr_cv': Expected argument `objective` to be 'pbr' or 'pbr_total'"):
        get_recalibrator("pbr_cv", objective="gp")


def test_compare_runs_pbr_cv_per_fold(cifar10_logits) -> None:
    """In compare, alpha is chosen inside each fold's recalibration set (never on its test set)."""
    z, y = cifar10_logits
    preds = pbr_core.Predictions.from_arrays(z[:300], y[:300])
    params = {"alphas": [0.1, 1.0], "cv": 2, **QUICK}  # by name, the estimator's settings are flat
    table = compare(preds, ["pbr_cv"], n_re=100, n_folds=2, seed=0, method_params={"pbr_cv": params})
    for fold in range(2):
        re_idx, te_idx = split_indices(preds.n, 100, fold=fold, seed=0)
        rec = PBRCV(PBR(**QUICK), alphas=[0.1, 1.0], cv=2).fit(preds.subset(re_idx))
        row = table[table.fold == fold].iloc[0]
        assert row["kl"] == rec.kl_
        assert row["ece"] == pbr_core.ece(rec.predict_proba(preds.subset(te_idx)), y[:300][te_idx],
                                          n_bins=int(row["n_bins"]))


def test_pbr_cv_says_which_fits_failed_and_chooses_among_the_others(data, monkeypatch, tmp_path) -> None:
    """A failed (alpha, fold) fit: ``cv_results_['failed']`` counts it, that alpha is not chosen, and
    the final fit's report carries the reason (what the CLI and the PBR page show)."""
    z, y = data
    failing_pbr_fits(monkeypatch, lambda alpha, n, nth: alpha == 1.0 and n == 60 and nth == 1)  # fold 0's
    rec = PBRCV(PBR(**QUICK), alphas=[0.1, 1.0], cv=2)
    with pytest.warns(RuntimeWarning, match="alpha = 1 on fold 1 of 2 failed"):
        rec.fit(z, y)
    assert rec.cv_results_["failed"].tolist() == [0, 1] and np.isnan(rec.cv_results_["mean"][1])
    assert rec.alpha_ == 0.1 and rec.best_estimator_.alpha == 0.1
    assert any("alpha = 1 on fold 1 of 2 failed (GP fit diverged: test double)" in w
               for w in rec.fit_report_["warnings"])
    # Saved as strict JSON (the failed alpha's means as null) and loaded back exactly.
    import json

    from pbr_core.recalibrators import RecalibratorFileError, load_recalibrator

    doc = rec.to_dict()
    text = json.dumps(doc, allow_nan=False)
    assert doc["state"]["cv_results"]["mean"][1] is None
    loaded = load_recalibrator(rec.save(tmp_path / "cv.json"))
    assert loaded.to_dict() == doc and json.loads(text) == doc
    assert np.isnan(loaded.cv_results_["mean"][1]) and loaded.cv_results_["failed"].tolist() == [0, 1]
    np.testing.assert_array_equal(loaded.predict_proba(z), rec.predict_proba(z))
    # A null mean where no fit failed, or the chosen alpha among the failed ones, is refused.
    bad = json.loads(text)
    bad["state"]["cv_results"]["failed"]["__ndarray__"] = [0, 0]
    with pytest.raises(RecalibratorFileError, match="may be null only for an alpha with failed folds"):
        PBRCV.from_dict(bad)
    bad = json.loads(text)
    bad["state"]["alpha"] = 1.0
    with pytest.raises(RecalibratorFileError, match="without a failed fit"):
        PBRCV.from_dict(bad)


def test_a_pbr_cv_file_saved_before_failed_fits_were_counted_loads(data) -> None:
    """Files written before ``cv_results_['failed']`` existed have no such column: none failed."""
    z, y = data
    rec = PBRCV(PBR(**QUICK), alphas=[0.1, 1.0], cv=2).fit(z, y)
    doc = rec.to_dict()
    del doc["state"]["cv_results"]["failed"]
    loaded = PBRCV.from_dict(doc)
    assert loaded.cv_results_["failed"].tolist() == [0, 0] and loaded.alpha_ == rec.alpha_
    np.testing.assert_array_equal(loaded.predict_proba(z), rec.predict_proba(z))


DATA = Path(__file__).parent / "data"


def test_a_file_saved_before_the_wrapper_loads_and_predicts_as_saved(cifar10_logits) -> None:
    """``legacy_pbr_cv.json``: a PBRCV saved when it repeated PBR's parameters (flat "params"), fitted on
    CIFAR-10 rows 0-79; it loads as the wrapper, predicts rows 80-89 as it did, and the wrapper fitted the
    same way today saves the same file."""
    import json

    from pbr_core.recalibrators import load_recalibrator

    z, y = cifar10_logits
    legacy = json.loads((DATA / "legacy_pbr_cv.json").read_text())
    expected = json.loads((DATA / "legacy_pbr_cv_probs.json").read_text())
    loaded = load_recalibrator(DATA / "legacy_pbr_cv.json")
    assert isinstance(loaded, PBRCV) and loaded.alpha_ == expected["alpha"]
    assert type(loaded.best_estimator_).__name__ == "PBRTotalApp" and loaded.estimator.alpha == 0.5
    np.testing.assert_array_equal(loaded.predict_proba(z[80:90]), np.array(expected["probs"]))
    params = loaded.to_dict()["params"]
    assert {k: params[k] for k in legacy["params"]} == legacy["params"]  # later settings (if any) at their defaults
    today = PBRCV(get_recalibrator("pbr_total_app", max_iter=20, n_mc=8, n_predict_samples=8), alphas=[0.1, 1.0],
                  cv=2).fit(z[:80], y[:80])
    doc = today.to_dict()
    doc["state"]["fit_report"].pop("wall_time_s", None)
    assert doc["state"] == legacy["state"] and {k: doc["params"][k] for k in legacy["params"]} == legacy["params"]


def test_pbr_cv_is_a_wrapper_that_clones_its_estimator(data) -> None:
    from sklearn.base import clone
    from sklearn.model_selection import KFold

    z, y = data
    estimator = PBR(objective="pbr_total", **QUICK)
    rec = PBRCV(estimator, alphas=[0.1, 1.0], cv=KFold(2, shuffle=True, random_state=1))
    copy = clone(rec)
    assert copy is not rec and copy.estimator is not estimator and copy.get_params()["alphas"] == [0.1, 1.0]
    assert copy.estimator.get_params() == estimator.get_params() and not copy.is_fitted
    rec.fit(z, y)
    assert estimator.get_params()["alpha"] == 0.5 and not estimator.is_fitted  # the estimator itself is left alone
    folds = [(np.sort(tr), np.sort(va)) for tr, va in KFold(2, shuffle=True, random_state=1).split(z)]
    from pbr_core.alpha_selection import select_alpha_of

    sel = select_alpha_of(PBR(alpha=0.1, objective="pbr_total", **QUICK), pbr_core.Predictions.from_arrays(z, y),
                          folds, [0.1, 1.0])
    pd.testing.assert_frame_equal(rec.selection_.scores, sel.scores)
    assert rec.best_estimator_.method == "pbr_total" and rec.n_fits() == 5
    assert rec.to_dict()["params"]["cv"] == 2 and rec.to_dict()["params"]["objective"] == "pbr_total"
    assert rec.kl_ == rec.best_estimator_.kl_ and rec.fit_report_ is rec.best_estimator_.fit_report_
