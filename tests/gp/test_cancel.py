"""Stopping GP fits, alpha selection and comparisons part-way (pbr_core.cancel).

The bound is counted, not timed: every objective evaluation (``FitData.terms``, one L-BFGS closure
call or one Adam step) is counted, the stop is asked for at a known evaluation, and at most two
more may start before :class:`Cancelled` comes out (the one after an L-BFGS step that checks the
step's result, then the next closure's checkpoint). Before the fix a stop was seen only every
10 optimiser iterations (hundreds of evaluations in an L-BFGS line search) or between fits.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import pbr_core
import pbr_core.gp.training as training
from pbr_core.cancel import Cancelled, cancel_when, checkpoint
from pbr_core.gp.objectives import draw_mc_noise
from pbr_core.recalibrators.gp import PBR

#: Evaluations that may start after the stop was asked for (see the module docstring).
SLACK = 2


class Counter:
    """Counts objective evaluations; ``stop_at`` (an evaluation number) makes ``cancel()`` True."""

    def __init__(self, monkeypatch) -> None:
        self.n, self.stop_at, self.phase = 0, None, ""
        original = training.FitData.terms

        def counted(data, model, exact=False):
            self.n += 1
            return original(data, model, exact)

        monkeypatch.setattr(training.FitData, "terms", counted)

    def cancel(self) -> bool:
        return self.stop_at is not None and self.n >= self.stop_at

    def enter(self, monkeypatch, module, name: str, offset: int = 5) -> None:
        """Ask for the stop ``offset`` evaluations after ``module.name`` is first entered."""
        original = getattr(module, name)

        def entered(*args, **kwargs):
            if self.stop_at is None:
                self.phase, self.stop_at = name, self.n + offset
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, entered)


@pytest.fixture
def data(cifar10_logits):
    z, y = cifar10_logits
    return z[:200], y[:200]


@pytest.fixture(autouse=True)
def short_warmup(monkeypatch):
    """10 Adam warm-up steps instead of 100 before L-BFGS: the same code paths, faster tests."""
    from dataclasses import replace

    from pbr_core.recalibrators.gp import _GPRecalibrator

    original = _GPRecalibrator._train_settings

    def quick(rec):
        settings, check = original(rec)
        return replace(settings, warmup_iter=10), check

    monkeypatch.setattr(_GPRecalibrator, "_train_settings", quick)


def test_stop_inside_lbfgs_acts_at_the_next_evaluation(data, monkeypatch) -> None:
    z, y = data
    counter = Counter(monkeypatch)
    counter.enter(monkeypatch, training, "run_lbfgs")   # after the Adam warm-up steps
    rec = PBR(alpha=0.5, max_iter=300, n_mc=20, n_predict_samples=20)
    with cancel_when(counter.cancel), pytest.raises(Cancelled):
        rec.fit(z, y)
    assert counter.phase == "run_lbfgs" and counter.stop_at > 10
    assert counter.n <= counter.stop_at + SLACK
    assert not rec.is_fitted and not hasattr(rec, "model_")


def test_stop_inside_the_adam_warmup(data, monkeypatch) -> None:
    z, y = data
    counter = Counter(monkeypatch)
    counter.stop_at = 7
    with cancel_when(counter.cancel), pytest.raises(Cancelled):
        PBR(alpha=0.5, max_iter=300, n_mc=20).fit(z, y)
    assert counter.n == 7   # the warm-up's 7th step; its Adam update is never applied


def test_stop_inside_the_restarts_from_smaller_alpha(data, monkeypatch) -> None:
    """A fit that ended at the prior is redone from smaller alpha (forced here, as in
    test_training.py); a stop during those restarts acts at once too."""
    z, y = data
    monkeypatch.setattr(training, "PRIOR_SHIFT", 1e9)
    counter = Counter(monkeypatch)
    counter.enter(monkeypatch, training, "_escape_prior")
    with cancel_when(counter.cancel), pytest.raises(Cancelled):
        PBR(alpha=0.5, max_iter=40, n_mc=10).fit(z, y)
    assert counter.phase == "_escape_prior" and counter.n <= counter.stop_at + SLACK


def test_stop_inside_the_training_check_prediction(data, monkeypatch) -> None:
    """The check predicts with J draws per row, batch by batch; each batch is a checkpoint."""
    z, y = data
    batches = []
    monkeypatch.setattr("pbr_core.gp.predict.prediction_batch_size", lambda *a, **k: 50)   # 4 batches
    original = training.GPRecalibrationModel.marginals

    def marginals(model, x, grid=None):
        if not model.training:            # prediction (eval mode), not the fit
            batches.append(x.shape[0])
        return original(model, x, grid)

    monkeypatch.setattr(training.GPRecalibrationModel, "marginals", marginals)
    with cancel_when(lambda: len(batches) >= 2), pytest.raises(Cancelled):
        PBR(alpha=0.5, max_iter=40, n_mc=10).fit(z, y)
    assert batches == [50, 50]


def test_stop_inside_batched_alpha_selection(data, monkeypatch) -> None:
    from pbr_core.alpha_selection import select_alpha

    z, y = data
    counter = Counter(monkeypatch)
    counter.stop_at = 25                       # one evaluation = one Adam step of all 4 GPs
    with pytest.raises(Cancelled):
        select_alpha(z[:150], grid=(0.1, 1.0), n_splits=2, labels=y[:150], batched=True, optimizer="adam",
                     max_iter=60, n_mc=10, cancel=counter.cancel)
    assert counter.n <= counter.stop_at + SLACK   # was: the next multiple of 10 steps


def test_stop_inside_a_sequential_alpha_selection_fit(data, monkeypatch) -> None:
    from pbr_core.alpha_selection import select_alpha

    z, y = data
    counter = Counter(monkeypatch)

    def progress(done, total, message):
        if done == 1:
            counter.stop_at = counter.n + 5   # 5 evaluations into the second fit

    with pytest.raises(Cancelled) as info:
        select_alpha(z[:150], grid=(0.1, 1.0), n_splits=2, labels=y[:150], max_iter=60, n_mc=10,
                     progress=progress, cancel=counter.cancel)
    assert counter.n <= counter.stop_at + SLACK
    assert (info.value.done, info.value.total) == (1, 4)


def test_stop_inside_a_compare_gp_fit_keeps_the_finished_rows(cifar10_logits, monkeypatch) -> None:
    from pbr_core.experiments import compare

    z, y = cifar10_logits
    preds = pbr_core.Predictions.from_arrays(z[:400], y[:400])
    params = {"pbr": {"max_iter": 60, "n_mc": 10, "n_predict_samples": 20}}
    kw = dict(n_re=150, n_folds=2, seed=0, method_params=params)
    full = compare(preds, ["temperature", "pbr"], **kw)
    counter = Counter(monkeypatch)

    def progress(done, total, message):
        if done == 3:                          # fold 2's temperature fit is done; its PBR fit starts
            counter.stop_at = counter.n + 5

    with pytest.raises(Cancelled) as info:
        compare(preds, ["temperature", "pbr"], progress=progress, cancel=counter.cancel, **kw)
    assert counter.n <= counter.stop_at + SLACK
    partial = info.value.partial
    assert (info.value.done, info.value.total) == (3, 4)
    timing = ["fit_seconds", "predict_seconds"]
    pd.testing.assert_frame_equal(partial.drop(columns=timing), full.iloc[:3].drop(columns=timing))


def test_stop_inside_matrix_scaling() -> None:
    """The classical methods with an iterative optimiser stop between its evaluations too."""
    from pbr_core.recalibrators import MatrixScaling

    rng = np.random.default_rng(0)
    z, y = rng.normal(size=(400, 8)), rng.integers(0, 8, 400)
    calls = []
    with cancel_when(lambda: calls.append(1) or len(calls) >= 3), pytest.raises(Cancelled):
        MatrixScaling().fit(z, y)
    assert len(calls) == 3


def test_nobody_stopping_changes_no_number(data) -> None:
    """Checkpoints read no random generator: a fit under a cancel that never fires is the same fit."""
    z, y = data
    a = PBR(alpha=0.5, max_iter=60, n_mc=10, n_predict_samples=20).fit(z, y)
    with cancel_when(lambda: False):
        b = PBR(alpha=0.5, max_iter=60, n_mc=10, n_predict_samples=20).fit(z, y)
        pb = b.predict_proba(z[:50])
    for (name, p), q in zip(a.model_.named_parameters(), b.model_.parameters()):
        assert torch.equal(p, q), name
    np.testing.assert_array_equal(a.predict_proba(z[:50]), pb)
    assert a.fit_report_["iterations"] == b.fit_report_["iterations"]


def test_mc_draws_in_blocks_equal_one_draw(monkeypatch) -> None:
    import pbr_core.gp.objectives as objectives

    monkeypatch.setattr(objectives, "MC_DRAW_BLOCK", 7 * 3 * 2)   # blocks of 2 rows
    blocks = []
    with cancel_when(lambda: blocks.append(1) or False):
        eps = draw_mc_noise(11, 7, 3, seed=4)
    assert len(blocks) == 6
    expected = np.random.default_rng(4).standard_normal((11, 7, 3))
    np.testing.assert_array_equal(eps.numpy(), expected)


def test_predictions_in_draw_blocks_equal_one_block(data, monkeypatch) -> None:
    """On the CPU the prediction draws come in row blocks with a stop check between them; the
    generator fills sequentially and each row is computed alone, so the numbers are the same."""
    import pbr_core.gp.predict as predict

    z, y = data
    rec = PBR(alpha=0.5, max_iter=20, n_mc=10, n_predict_samples=30, device="cpu").fit(z[:100], y[:100])
    whole = predict.predict_proba(rec.model_, z, False, 30, seed=2)
    monkeypatch.setattr(predict, "DRAW_BLOCK", 30 * 10 * 7)        # blocks of 7 rows
    checks = []
    with cancel_when(lambda: checks.append(1) or False):
        blocks = predict.predict_proba(rec.model_, z, False, 30, seed=2)
    np.testing.assert_array_equal(blocks, whole)
    assert len(checks) >= 200 // 7


def test_a_tracked_loop_stops_before_its_next_item() -> None:
    """One-vs-all maps (and any loop wrapped with ``track``) stop between items."""
    from pbr_core.recalibrators.base import track
    from pbr_core.recalibrators import IsotonicCalibration

    seen = []
    with cancel_when(lambda: len(seen) >= 2), pytest.raises(Cancelled):
        for item in track(range(5), total=5):
            seen.append(item)
    assert seen == [0, 1]
    assert list(track(range(3))) == [0, 1, 2]      # nothing installed: the plain loop
    rng = np.random.default_rng(1)
    z, y = rng.normal(size=(300, 6)), rng.integers(0, 6, 300)
    calls = []
    with cancel_when(lambda: calls.append(1) or len(calls) >= 3), pytest.raises(Cancelled):
        IsotonicCalibration(multiclass="one_vs_all").fit(z, y)  # 6 one-vs-all maps; stopped before the third
    assert len(calls) == 3


def test_cancel_when_nests_and_checkpoint_is_free_without_it() -> None:
    checkpoint()                              # nothing installed: returns
    outer, inner = [False], [False]
    with cancel_when(lambda: outer[0]):
        with cancel_when(lambda: inner[0]):
            checkpoint()
            outer[0] = True
            with pytest.raises(Cancelled):
                checkpoint()
        outer[0] = False
        inner[0] = True
        checkpoint()                          # the inner callable is gone with its block
    with cancel_when(None):
        checkpoint()
