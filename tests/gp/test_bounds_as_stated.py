"""Bounds valid as stated (``prior_split``) and fresh prediction draws on the fitted rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pbr_core.bounds import corollary1_bound, corollary2_bound, optimal_n_bins
from pbr_core.gp.objectives import draw_mc_noise
from pbr_core.recalibrators import load_recalibrator
from pbr_core.recalibrators.gp import (
    BOUND_VALIDITY,
    PBR,
    GPCalibration,
    PBRTotalApp,
    prediction_seed,
    prior_split_rows,
)

QUICK = dict(max_iter=40, n_mc=10, n_predict_samples=10)


@pytest.fixture(scope="module")
def small(cifar10_logits):
    z, y = cifar10_logits
    return z[:300].astype(np.float64), y[:300]


def _prior_state(rec) -> dict[str, np.ndarray]:
    m = rec.model_
    return {"inducing": m.variational_strategy.inducing_points.detach().cpu().numpy().copy(),
            **{k: v.detach().cpu().numpy().copy() for k, v in m.covar_module.state_dict().items()}}


def test_prior_is_chosen_on_the_prior_rows_only(small):
    z, y = small
    rec = PBR(alpha=0.5, prior_split=0.4, **QUICK).fit(z, y)
    prior_rows, bound_rows = prior_split_rows(300, 0.4, 0)
    assert prior_rows.size == 120 and bound_rows.size == 180 and np.intersect1d(prior_rows, bound_rows).size == 0
    np.testing.assert_array_equal(rec.bound_rows_, bound_rows)
    # The prior (inducing points, kernel hyperparameters) is what a plain fit on the prior rows learns ...
    alone = PBR(alpha=0.5, **QUICK).fit(z[prior_rows], y[prior_rows])
    for key, value in _prior_state(alone).items():
        np.testing.assert_array_equal(_prior_state(rec)[key], value, err_msg=key)
    # ... so it does not depend on the bound rows at all: other labels there, the same prior.
    y2 = y.copy()
    y2[bound_rows] = (y2[bound_rows] + 1) % 10
    other = PBR(alpha=0.5, prior_split=0.4, **QUICK).fit(z, y2)
    for key, value in _prior_state(rec).items():
        np.testing.assert_array_equal(_prior_state(other)[key], value, err_msg=key)
    # while q was fitted on the bound rows (it moved away from N(0, I), and differs between the two)
    assert rec.kl_ > 0 and not np.isclose(rec.kl_, other.kl_)


def test_bounds_are_computed_on_the_bound_rows_and_labelled(small):
    z, y = small
    rec = PBR(alpha=0.5, prior_split=0.4, **QUICK).fit(z, y)
    b = rec.bounds_
    n = 180
    assert (b["n"], b["n_rows"], b["n_bins"]) == (n, 300, optimal_n_bins(n))
    assert b["corollary1"] == pytest.approx(corollary1_bound(n, optimal_n_bins(n), rec.kl_), rel=1e-12)
    assert b["corollary2"] == pytest.approx(corollary2_bound(n, optimal_n_bins(n), rec.kl_), rel=1e-12)
    assert b["validity"] == BOUND_VALIDITY["split"] and b["validity"].startswith("valid as stated")
    assert rec.fit_report_["prior"] == {"kind": "split", "n_prior": 120, "n_bound": 180,
                                        "validity": BOUND_VALIDITY["split"]}
    plain = PBR(alpha=0.5, **QUICK).fit(z, y)
    assert plain.bounds_["validity"].startswith("approximate") and plain.bounds_["n"] == 300
    assert plain.fit_report_["prior"]["kind"] == "same_rows"


def test_prior_split_round_trips_and_old_files_say_approximate(small, tmp_path):
    z, y = small
    rec = GPCalibration(prior_split=0.3, **QUICK).fit(z, y)
    rec.save(tmp_path / "r.json")
    back = load_recalibrator(tmp_path / "r.json")
    assert back.prior_split == 0.3 and back.bounds_ == rec.bounds_
    np.testing.assert_array_equal(back.predict_proba(z[:20]), rec.predict_proba(z[:20]))
    # a file saved before the option existed: no prior_split, no validity label
    import json

    state = json.loads((tmp_path / "r.json").read_text())
    state["params"].pop("prior_split")
    state["state"]["bounds"] = {k: v for k, v in state["state"]["bounds"].items() if k not in ("prior", "validity")}
    (tmp_path / "old.json").write_text(json.dumps(state))
    old = load_recalibrator(tmp_path / "old.json")
    assert old.prior_split == 0.0 and old.bounds_["validity"] == BOUND_VALIDITY["same_rows"]


@pytest.mark.parametrize("value", [-0.1, 0.95, 1.0, float("nan"), True, "half"])
def test_bad_prior_split_is_named(value):
    with pytest.raises(ValueError, match="prior_split"):
        PBRTotalApp(prior_split=value)._validate_params()


def test_too_few_rows_for_a_split_is_a_clear_error(small):
    z, y = small
    with pytest.raises(ValueError, match="at least 2 rows"):
        PBR(prior_split=0.9, **QUICK).fit(z[:10], y[:10])


# ---------------------------------------------------------------------------- fresh draws
def test_predictions_on_the_fitted_rows_do_not_reuse_the_fits_draws(small):
    """The fit optimised its objective on fixed draws eps (seed random_state); predicting the same
    rows with those very draws flatters every recalibration-set metric. Before the fix the
    prediction on the fitted rows WAS that flattering one (the same seed, S = J)."""
    z, y = small
    rec = PBR(alpha=0.0, **QUICK).fit(z, y)
    dev = rec.model_.variational_strategy.inducing_points.device   # the GPU where device="auto" found one
    with torch.no_grad():
        mu, var = rec.model_.marginals(torch.as_tensor(z, dtype=torch.float64, device=dev))
        eps = draw_mc_noise(300, QUICK["n_mc"], 10, rec.random_state, device=dev,  # the fit's own draws
                            antithetic=rec.mc_draws == "antithetic")
        fits_own = torch.softmax(mu.unsqueeze(1) + var.sqrt().unsqueeze(1) * eps, dim=-1).mean(1).cpu().numpy()
    probs = rec.predict_proba(z)
    assert np.abs(probs - fits_own).max() > 1e-3
    # still deterministic, from a stream derived from random_state
    np.testing.assert_array_equal(probs, rec.predict_proba(z))
    assert prediction_seed(0) != 0 and prediction_seed(0) == prediction_seed(0) != prediction_seed(1)
    # the training-set check judges the fit with fresh draws too
    assert rec.fit_report_["train_check"]["recalibrated"] == pytest.approx(
        float(((probs - np.eye(10)[y]) ** 2).sum(1).mean()), rel=1e-12)
