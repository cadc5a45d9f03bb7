"""Continuation along the alpha grid: a fit that starts from another fit's solution (warm start).

``fit_gp(start=...)`` and ``PBR.fit_continued`` (pbr_core.gp.training, pbr_core.recalibrators.gp),
and their use by the alpha selection (``select_alpha(warm_start=True)``, PBRCV) and the KL-gap
protocol. Small real CIFAR-10 fits.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pbr_core.gp.objectives as objectives
from pbr_core.alpha_selection import kfold_indices, select_alpha
from pbr_core.experiments import KL_GAP_COLUMNS, kl_vs_ece_gap
from pbr_core.paper import continuation_order
from pbr_core.predictions import Predictions
from pbr_core.recalibrators import PBRCV
from pbr_core.recalibrators.gp import PBR

#: Long enough for the L-BFGS phase (100 Adam warm-up steps come first in a fit from the prior).
SETTINGS = {"max_iter": 200, "n_mc": 10, "n_predict_samples": 20}


@pytest.fixture(scope="module")
def rows(cifar10_logits):
    z, y = cifar10_logits
    return z[:120], y[:120]


def test_continuation_order_is_ascending_and_stable() -> None:
    assert continuation_order([0.5, 0.0, 1.0, 0.5, 0.1]) == [1, 4, 0, 3, 2]
    assert continuation_order([]) == []


def test_continuing_a_fit_at_its_own_alpha_never_ends_higher(rows) -> None:
    """From the cold fit's own solution, L-BFGS (monotone) can only stay or go lower: the continued
    fit's objective <= the cold fit's, with no Adam warm-up and few iterations."""
    z, y = rows
    cold = PBR(alpha=0.5, **SETTINGS).fit(z, y)
    warm = PBR(alpha=0.5, **SETTINGS).fit_continued(cold, z, y)
    assert warm.fit_report_["objective"] <= cold.fit_report_["objective"] + 1e-12
    assert warm.fit_report_["continued_from_alpha"] == 0.5 and "continued_from_alpha" not in cold.fit_report_
    assert warm.fit_report_["iterations"] < 30 < cold.fit_report_["iterations"]
    assert warm.fit_report_["train_check"]["passed"]


def test_a_continued_fit_starts_at_the_start_and_goes_down(rows) -> None:
    """fit_gp(start=...): the objective of the new alpha at the start's parameters is an upper
    bound of the continued fit's (evaluated on the same fixed draws, recomputed here)."""
    from pbr_core.gp.objectives import draw_mc_noise
    from pbr_core.gp.problem import FitData

    z, y = rows
    start = PBR(alpha=0.1, **SETTINGS).fit(z, y)
    warm = PBR(alpha=1.0, **SETTINGS).fit_continued(start, z, y)
    rec = PBR(alpha=1.0, **SETTINGS)
    dev = warm.model_.variational_strategy.inducing_points.device
    data = FitData(z=torch.as_tensor(z, dtype=torch.float64, device=dev), labels=torch.as_tensor(y, device=dev),
                   spec=rec._spec(),
                   eps=draw_mc_noise(len(y), SETTINGS["n_mc"], z.shape[1], 0, device=dev, dtype=objectives.MC_DTYPE,
                                     antithetic=rec.mc_draws == "antithetic"))
    with torch.no_grad():
        at_start = float(data.terms(start.model_).total)
        at_end = float(data.terms(warm.model_).total)
    assert at_end == pytest.approx(warm.fit_report_["objective"], rel=1e-9)
    assert at_end <= at_start
    # the start itself is untouched
    assert start.fit_report_["objective"] == pytest.approx(float(_objective(start, z, y)), rel=1e-9)


def _objective(rec: PBR, z: np.ndarray, y: np.ndarray) -> float:
    from pbr_core.gp.objectives import draw_mc_noise
    from pbr_core.gp.problem import FitData

    dev = rec.model_.variational_strategy.inducing_points.device
    data = FitData(z=torch.as_tensor(z, dtype=torch.float64, device=dev), labels=torch.as_tensor(y, device=dev),
                   spec=rec._spec(),
                   eps=draw_mc_noise(len(y), int(rec.n_mc), z.shape[1], int(rec.random_state), device=dev,
                                     dtype=objectives.MC_DTYPE,
                                     antithetic=rec.mc_draws == "antithetic"))
    with torch.no_grad():
        return float(data.terms(rec.model_).total)


def test_fit_continued_refuses_what_it_cannot_continue(rows) -> None:
    z, y = rows
    start = PBR(alpha=0.5, **SETTINGS).fit(z, y)
    for start_, rec, words in [
        (PBR(alpha=0.5), PBR(alpha=1.0), "needs a fitted GP recalibrator"),
        (object(), PBR(alpha=1.0), "needs a fitted GP recalibrator to start from, but got object"),
        (start, PBR(alpha=1.0, n_inducing=5), "inducing points 10 vs 5"),
        (start, PBR(alpha=1.0, variational="cholesky"), "variational family 'mean_field' vs 'cholesky'"),
        (start, PBR(alpha=1.0, prior_split=0.3), "prior_split > 0"),
    ]:
        with pytest.raises(ValueError, match=words):
            rec.fit_continued(start_, z, y)
        assert not rec.is_fitted
    p3 = np.exp(z[:, :3]) / np.exp(z[:, :3]).sum(1, keepdims=True)
    with pytest.raises(ValueError, match="classes 10 vs 3"):
        PBR(alpha=1.0).fit_continued(start, Predictions.from_arrays(np.log(p3), y % 3, input_type="logits"))


def test_batched_fit_cannot_start_warm() -> None:
    from pbr_core.gp.training import fit_gp

    class Batched:
        batch_shape = torch.Size([2])

    with pytest.raises(ValueError, match="batched model always starts at its prior"):
        fit_gp(Batched(), None, start={})  # type: ignore[arg-type]


def test_warm_selection_agrees_with_cold_where_the_scores_differ_with_fewer_iterations(cifar10_logits) -> None:
    """On 300 rows of a real file (150 per fit; on fewer, the held-out ECE is noise): the same
    verdict where the scores differ (alpha = 0 scores 0.069, the others 0.022-0.024; on an H200
    0.047 and 0.021-0.022), a choice
    that costs at most 0.003 in the cold scores, with well under half the iterations, the grid's
    order kept in the scores, the first alpha of each fold fitted from the prior (bit for bit as
    cold), the others continued. Not "the same alpha": 0.5 and 1.0 are 0.0008 apart on the CPU,
    and on an H200 the cold selection chose 1.0, the warm one 0.5 (2026-11-27)."""
    z, y = cifar10_logits[0][:300], cifar10_logits[1][:300]
    kw = dict(grid=(0.5, 0.0, 1.0), n_splits=2, labels=y, **SETTINGS)
    cold = select_alpha(z, warm_start=False, **kw)
    warm = select_alpha(z, **kw)   # warm_start=True is the default
    assert warm.warm_start and not cold.warm_start
    cold_mean, warm_mean = (s.scores.groupby("alpha").score.mean() for s in (cold, warm))
    assert cold_mean[0.0] > 1.5 * cold_mean.drop(0.0).max() and 0.0 not in (cold.best_alpha, warm.best_alpha)
    assert cold_mean[warm.best_alpha] <= cold_mean.min() + 0.003
    assert (warm_mean - cold_mean).abs().max() <= 0.003
    for sel in (cold, warm):
        assert sel.scores.alpha.tolist() == [0.5, 0.0, 1.0] * 2 and sel.scores.fold.tolist() == [0] * 3 + [1] * 3
    assert warm.scores.warm_start.tolist() == [True, False, True] * 2 and not cold.scores.warm_start.any()
    first = warm.scores.alpha == 0.0
    np.testing.assert_array_equal(warm.scores[first][["objective", "kl", "score"]],
                                  cold.scores[first][["objective", "kl", "score"]])
    assert warm.scores.iterations.sum() < 0.6 * cold.scores.iterations.sum()
    # the selection's fits are the continuation done by hand
    tr, _ = kfold_indices(len(y), 2, 0)[1]
    by_hand = PBR(alpha=0.5, **SETTINGS).fit_continued(PBR(alpha=0.0, **SETTINGS).fit(z[tr], y[tr]), z[tr], y[tr])
    row = warm.scores[(warm.scores.alpha == 0.5) & (warm.scores.fold == 1)].iloc[0]
    assert row["kl"] == by_hand.kl_ and row["objective"] == by_hand.fit_report_["objective"]


def test_pbr_cv_warm_start_parameter(rows) -> None:
    z, y = rows
    # Not fewer iterations or draws: on an H200 (2026-11-27) the cold fit of fold 1 at alpha 0.1 with
    # max_iter=30, n_mc=5, n_predict_samples=5 failed the training check (brier 0.0149 vs 0.0096
    # uncalibrated; 0.0098 on the CPU, inside the 0.002 margin) and PBRCV raised.
    kw = dict(alphas=[0.1, 1.0], cv=2)
    warm, cold = PBRCV(PBR(**SETTINGS), **kw).fit(z, y), PBRCV(PBR(**SETTINGS), warm_start=False, **kw).fit(z, y)
    assert warm.selection_.warm_start and not cold.selection_.warm_start
    assert warm.selection_.scores.warm_start.tolist() == [False, True] * 2
    # the final fit is a plain fit from the prior either way
    best = PBR(alpha=warm.alpha_, **SETTINGS).fit(z, y)
    assert warm.best_estimator_.to_dict() == best.to_dict() and "continued_from_alpha" not in warm.fit_report_
    with pytest.raises(ValueError, match="warm_start"):
        PBRCV(warm_start="yes").fit(z, y)
    with pytest.raises(ValueError, match="warm_start"):
        select_alpha(z, labels=y, warm_start="yes")


def test_kl_gap_protocol_continues_along_the_grid(cifar10_logits) -> None:
    z, y = cifar10_logits
    preds = Predictions.from_arrays(z[:400], y[:400], input_type="logits")
    kw = dict(alphas=(1.0, 0.0, 0.5), objective="pbr", n_re=150, n_folds=1, seed=0, device="cpu", **SETTINGS)
    seen = []
    warm = kl_vs_ece_gap(preds, progress=lambda d, t, m: seen.append(m), warm_start=True, **kw)
    assert list(warm.table.columns) == list(KL_GAP_COLUMNS) and warm.table.alpha.tolist() == [1.0, 0.0, 0.5]
    assert warm.table.error.isna().all()
    # fitted in ascending alpha, the table in the order of `alphas`
    assert [m.split(",")[0] for m in seen] == ["pbr alpha=0", "pbr alpha=0.5", "pbr alpha=1"]
    # alpha = 0 from the prior, .5 continued from it: the same fits by hand
    from pbr_core.experiments import split_indices

    re_idx, _ = split_indices(preds.n, 150, fold=0, seed=0, n_te=150)
    fit = preds.subset(re_idx)
    params = {k: v for k, v in kw.items() if k in ("device", *SETTINGS)}
    first = PBR(alpha=0.0, **params).fit(fit)
    assert warm.table.kl.iloc[1] == first.kl_
    assert warm.table.kl.iloc[2] == PBR(alpha=0.5, **params).fit_continued(first, fit).kl_
    # the default is the paper's protocol: every fit from the prior
    cold = kl_vs_ece_gap(preds, **kw)
    assert cold.table.kl.iloc[1] == first.kl_
    assert cold.table.kl.iloc[2] == PBR(alpha=0.5, **params).fit(fit).kl_
    with pytest.raises(ValueError, match="warm_start"):
        kl_vs_ece_gap(preds, warm_start=None, **kw)


def _fail_check_on_call(monkeypatch, fail_at: int) -> list[int]:
    """The real training-set check, except that its ``fail_at``-th call (1-based) says "failed"."""
    import pbr_core.gp.training as training

    real, calls = training.training_check, []

    def check(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append(1)
        return {**out, "passed": False} if len(calls) == fail_at else out

    monkeypatch.setattr(training, "training_check", check)
    return calls


def test_a_continuation_that_fails_the_training_check_is_redone_from_the_prior(rows, monkeypatch) -> None:
    """A continued fit that fails the training check is abandoned for the fit from the prior, the
    very one ``fit`` makes (warm-up, restarts, Adam recovery), so a warm start never fails where a
    cold fit would not. Before, the recovery was Adam from the prior with the continuation's
    settings (no warm-up), which a cold fit never runs. The failure is forced here: the real check,
    answered "failed" once."""
    z, y = rows
    start = PBR(alpha=0.1, **SETTINGS).fit(z, y)
    cold = PBR(alpha=1.0, **SETTINGS).fit(z, y)
    calls = _fail_check_on_call(monkeypatch, 1)
    with pytest.warns(RuntimeWarning, match="continued from another fit's solution failed the training check"):
        warm = PBR(alpha=1.0, **SETTINGS).fit_continued(start, z, y)
    assert len(calls) == 2      # the continuation's check (failed), then the refit's
    report = warm.fit_report_
    assert report["continuation_abandoned_from_alpha"] == 0.1 and "continued_from_alpha" not in report
    assert not report["continued"] and cold.fit_report_["continued"] is False
    assert any("refitted from the prior" in w for w in report["warnings"])
    assert warm.kl_ == cold.kl_ and report["objective"] == cold.fit_report_["objective"]
    np.testing.assert_array_equal(warm.predict_proba(z), cold.predict_proba(z))
    # the abandoned continuation's iterations are counted too
    assert report["iterations"] > cold.fit_report_["iterations"]
    # without the forced failure the continuation stands
    monkeypatch.undo()
    kept = PBR(alpha=1.0, **SETTINGS).fit_continued(start, z, y)
    assert kept.fit_report_["continued"] and kept.fit_report_["continued_from_alpha"] == 0.1


def test_a_selection_survives_a_failed_continuation(rows, monkeypatch) -> None:
    """In select_alpha (and so PBRCV) the failed continuation's row is the cold fit's, marked as not
    warm-started; the other rows are untouched."""
    z, y = rows
    kw = dict(grid=(0.0, 1.0), n_splits=2, labels=y, **SETTINGS)
    plain = select_alpha(z, **kw)
    _fail_check_on_call(monkeypatch, 2)      # fold 0: alpha 0 from the prior (call 1), alpha 1 continued (call 2)
    with pytest.warns(RuntimeWarning, match="refitted from the prior"):
        sel = select_alpha(z, **kw)
    assert sel.scores.warm_start.tolist() == [False, False, False, True]
    assert plain.scores.warm_start.tolist() == [False, True, False, True]
    cold = select_alpha(z, warm_start=False, **kw)
    row = (sel.scores.fold == 0) & (sel.scores.alpha == 1.0)
    np.testing.assert_array_equal(sel.scores[row][["kl", "score"]], cold.scores[row][["kl", "score"]])
    np.testing.assert_array_equal(sel.scores[~row][["kl", "score"]], plain.scores[~row][["kl", "score"]])


def test_a_failed_continuation_is_redone_with_the_cold_jitter(rows, monkeypatch) -> None:
    """The continued fit takes the start's jitter (its K_uu needed it); the fit redone from the prior
    goes back to the cold fit's own, so it is that fit exactly."""
    import pbr_core.gp.training as training

    z, y = rows
    start = PBR(alpha=0.1, **SETTINGS).fit(z, y)
    start.model_.jitter = 100 * start.model_.jitter
    cold = PBR(alpha=1.0, **SETTINGS).fit(z, y)
    seen = []
    real = training._fit_body
    monkeypatch.setattr(training, "_fit_body", lambda model, *a: seen.append(model.jitter) or real(model, *a))
    _fail_check_on_call(monkeypatch, 1)
    with pytest.warns(RuntimeWarning, match="refitted from the prior"):
        warm = PBR(alpha=1.0, **SETTINGS).fit_continued(start, z, y)
    assert seen == [start.model_.jitter, cold.model_.jitter]          # continued, then redone cold
    assert warm.model_.jitter == cold.model_.jitter and warm.kl_ == cold.kl_
    np.testing.assert_array_equal(warm.predict_proba(z), cold.predict_proba(z))


def test_a_continuation_that_raises_is_redone_from_the_prior(rows, monkeypatch) -> None:
    """Not only a failed check: an optimiser's RuntimeError in the continued fit (divergence, K_uu
    never positive definite) falls back to the fit from the prior too; a Stop is not caught."""
    import pbr_core.gp.training as training
    from pbr_core.cancel import Cancelled

    z, y = rows
    start = PBR(alpha=0.1, **SETTINGS).fit(z, y)
    cold = PBR(alpha=1.0, **SETTINGS).fit(z, y)
    real = training._optimise
    calls = []

    def optimise(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("GP fit diverged and could not be recovered: planted")
        return real(*args, **kwargs)

    monkeypatch.setattr(training, "_optimise", optimise)
    with pytest.warns(RuntimeWarning, match="failed \\(GP fit diverged and could not be recovered: planted\\)"):
        warm = PBR(alpha=1.0, **SETTINGS).fit_continued(start, z, y)
    assert "continuation_abandoned_from_alpha" in warm.fit_report_ and warm.kl_ == cold.kl_
    calls.clear()
    monkeypatch.setattr(training, "_optimise", lambda *a, **k: (_ for _ in ()).throw(Cancelled()))
    with pytest.raises(Cancelled):
        PBR(alpha=1.0, **SETTINGS).fit_continued(start, z, y)
