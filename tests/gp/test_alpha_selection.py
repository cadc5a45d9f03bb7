"""Alpha selection by k-fold cross-validation inside the recalibration data (GP_SPEC section 5)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pbr_core.alpha_selection import kfold_indices, select_alpha
from pbr_core.paper import PAPER_ALPHAS
from recal_doubles import FIT_FAILURE, failing_pbr_fits

QUICK = {"max_iter": 60, "n_mc": 10, "n_predict_samples": 20}


@pytest.fixture(scope="module")
def data(cifar10_logits):
    z, y = cifar10_logits
    return z[:120], y[:120]


def test_kfold_indices_partition_the_data() -> None:
    folds = kfold_indices(23, 5, seed=0)
    assert len(folds) == 5
    vals = np.concatenate([va for _, va in folds])
    assert sorted(vals.tolist()) == list(range(23))
    for tr, va in folds:
        assert set(tr).isdisjoint(va) and len(tr) + len(va) == 23 and len(va) in (4, 5)
    with pytest.raises(ValueError, match="n_splits"):
        kfold_indices(10, 1)
    with pytest.raises(ValueError, match="n_splits"):
        kfold_indices(3, 5)


def test_select_alpha_returns_the_whole_grid(data) -> None:
    z, y = data
    progress = []
    sel = select_alpha(z, (0.0, 0.5, 1.0), n_splits=3, progress=lambda *a: progress.append(a), labels=y, **QUICK)
    assert isinstance(sel.scores, pd.DataFrame) and len(sel.scores) == 9
    assert set(sel.scores.alpha) == {0.0, 0.5, 1.0} and set(sel.scores.fold) == {0, 1, 2}
    assert sel.scores.n_val.sum() == 3 * 120 and (sel.scores.n_train + sel.scores.n_val == 120).all()
    assert np.allclose(sel.scores.score, sel.scores.ece)
    assert list(sel.summary.alpha) == [0.0, 0.5, 1.0] and {"mean", "std"} <= set(sel.summary.columns)
    best = sel.summary.loc[sel.summary["mean"].idxmin(), "alpha"]
    assert sel.best_alpha == best and sel.metric == "ece" and not sel.batched
    assert len(progress) == 9 and progress[-1][:2] == (9, 9)


def test_metric_choice_and_validation(data) -> None:
    z, y = data
    sel = select_alpha(z, labels=y, grid=(0.5,), n_splits=2, metric="nll", **QUICK)
    assert np.allclose(sel.scores.score, sel.scores.nll) and sel.best_alpha == 0.5
    with pytest.raises(ValueError, match="metric"):
        select_alpha(z, labels=y, metric="auc")
    with pytest.raises(ValueError, match="grid"):
        select_alpha(z, labels=y, grid=(-1.0,))
    with pytest.raises(ValueError, match="optimizer='adam'"):
        select_alpha(z, labels=y, batched=True)
    assert PAPER_ALPHAS == (0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


def test_batched_selection_equals_sequential_with_adam(data) -> None:
    """Batched Adam == the same fits one by one (short, regularised fits; long unregularised Adam
    runs are chaotic: a 1e-14 change of the input moves them as much as batching does)."""
    z, y = data
    kw = dict(grid=(0.25, 1.0), n_splits=2, optimizer="adam", **QUICK)
    seq = select_alpha(z, labels=y, batched=False, warm_start=False, **kw)  # a batched fit starts at the prior
    bat = select_alpha(z, labels=y, batched=True, **kw)
    assert bat.batched and not seq.batched
    np.testing.assert_allclose(bat.scores.kl, seq.scores.kl, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(bat.scores.score, seq.scores.score, rtol=1e-6, atol=1e-9)


def test_binary_ece_convention_and_cancel(data, cifar10_logits) -> None:
    import pbr_core
    from pbr_core.bounds import optimal_n_bins
    from pbr_core.experiments import Cancelled
    from pbr_core.predictions import softmax

    z, y = data
    zb, yb = cifar10_logits[0][:600], cifar10_logits[1][:600]
    pz = softmax(zb)[:, 3]  # real binary task: "is it a cat?" from the CIFAR-10 ResNet's p(cat)
    logits = np.column_stack([np.log1p(-pz), np.log(pz)])
    yb = (yb == 3).astype(int)
    kw = dict(grid=(0.5,), n_splits=2, labels=yb, **QUICK)
    pos = select_alpha(logits, **kw)  # the default: p(y=1), the app's one binary ECE
    top = select_alpha(logits, binary_ece="top_label", **kw)  # the paper's tables
    # the same fits; only the ECE convention of the score differs: p(y=1) vs the top label
    np.testing.assert_array_equal(pos.scores.kl, top.scores.kl)
    assert not np.allclose(pos.scores.ece, top.scores.ece)
    from pbr_core.alpha_selection import kfold_indices
    from pbr_core.recalibrators.gp import PBR

    tr, va = kfold_indices(600, 2, seed=0)[0]
    p = PBR(alpha=0.5, **QUICK).fit(logits[tr], yb[tr]).predict_proba(logits[va])
    n_bins = optimal_n_bins(len(va))
    assert pos.scores.ece.iloc[0] == pytest.approx(pbr_core.ece(p[:, 1], yb[va], n_bins=n_bins), abs=1e-12)
    assert top.scores.ece.iloc[0] == pytest.approx(pbr_core.ece(p, yb[va], n_bins=n_bins), abs=1e-12)
    with pytest.raises(ValueError, match="binary_ece"):
        select_alpha(logits, binary_ece="p1", **kw)
    # cancel: checked before every fit; the third check stops the run after two fits
    checks = []
    with pytest.raises(Cancelled):
        select_alpha(z, labels=y, grid=(0.0, 1.0), n_splits=2, cancel=lambda: checks.append(1) or len(checks) > 2,
                     **QUICK)
    assert len(checks) == 3


def test_a_failed_fit_leaves_its_alpha_out_instead_of_ending_the_selection(data, monkeypatch) -> None:
    """One (alpha, fold) fit that fails (e.g. diverged even after the training code's recoveries)
    must not throw away the other fits: its row is NaN with the reason, a warning names it, its
    alpha is not chosen, and the fold's next alpha starts from the prior."""
    z, y = data
    log = failing_pbr_fits(monkeypatch, lambda alpha, n, nth: alpha == 0.1 and nth == 1)  # on fold 0 only
    with pytest.warns(RuntimeWarning, match=r"alpha = 0.1 on fold 1 of 2 failed \(GP fit diverged: test double\)"):
        sel = select_alpha(z, (0.01, 0.1, 1.0), n_splits=2, labels=y, **QUICK)
    assert [(a, c) for a, _, c in log] == [(0.01, False), (0.1, True), (1.0, False), (0.01, False), (0.1, True),
                                          (1.0, True)]
    bad = sel.scores[(sel.scores.alpha == 0.1) & (sel.scores.fold == 0)].iloc[0]
    assert bad["error"] == f"RuntimeError: {FIT_FAILURE}"
    assert np.isnan(bad[["score", "ece", "brier", "nll", "kl", "objective"]].astype(float)).all()
    assert not bad["converged"] and not bad["warm_start"]
    assert sel.scores.drop(bad.name)["error"].isna().all() and np.isfinite(sel.scores.drop(bad.name).score).all()
    row = sel.summary.set_index("alpha")
    assert row.loc[0.1, "failed"] == 1 and np.isnan(row.loc[0.1, "mean"]) and np.isnan(row.loc[0.1, "kl_mean"])
    assert (row.loc[[0.01, 1.0], "failed"] == 0).all() and np.isfinite(row.loc[[0.01, 1.0], "mean"]).all()
    assert sel.best_alpha == row.loc[[0.01, 1.0], "mean"].idxmin()
    assert len(sel.notes) == 1 and "left out of the selection" in sel.notes[0]
    # The fold's fit after the failure started from the prior (no solution to continue from).
    after = sel.scores[(sel.scores.alpha == 1.0) & (sel.scores.fold == 0)].iloc[0]
    assert not after["warm_start"] and sel.scores[(sel.scores.alpha == 1.0) & (sel.scores.fold == 1)].iloc[0]["warm_start"]


def test_the_selection_fails_only_when_every_alpha_has_a_failed_fit(data, monkeypatch) -> None:
    z, y = data
    # fold 0's alpha .01 and fold 1's alpha 1
    failing_pbr_fits(monkeypatch, lambda alpha, n, nth: (alpha, nth) in ((0.01, 1), (1.0, 2)))
    with pytest.warns(RuntimeWarning), pytest.raises(RuntimeError, match="Every alpha of the grid had a failed fit"):
        select_alpha(z, (0.01, 1.0), n_splits=2, labels=y, **QUICK)
