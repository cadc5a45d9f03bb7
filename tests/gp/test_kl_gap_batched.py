"""The KL-gap protocol fitted as one batch (``kl_vs_ece_gap(batched=...)``): the same Adam fits as
one after another, on real CIFAR-10 logits. The speed is a GPU's (benchmarks/RESULTS_gp.md); here
the CPU checks the numbers and the plumbing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pbr_core.experiments.kl_gap as kl_gap
from pbr_core.experiments import KL_GAP_COLUMNS, Cancelled, kl_vs_ece_gap
from pbr_core.predictions import Predictions

#: Short regularised Adam fits (long unregularised Adam runs are chaotic: batching moves them as a
#: 1e-14 change of the input does; tests/gp/test_alpha_selection.py).
ADAM = dict(optimizer="adam", max_iter=60, n_mc=10, n_predict_samples=20, device="cpu")
STUDY = dict(alphas=(1.0, 0.25), n_re=100, n_folds=2, seed=0)


@pytest.fixture(scope="module")
def preds(cifar10_logits) -> Predictions:
    z, y = cifar10_logits
    return Predictions.from_arrays(z[:400], y[:400], input_type="logits")


@pytest.fixture(scope="module")
def one_by_one(preds):
    return kl_vs_ece_gap(preds, batched=False, **STUDY, **ADAM)


def test_batched_rows_equal_the_fits_one_by_one(preds, one_by_one) -> None:
    seen = []
    bat = kl_vs_ece_gap(preds, batched=True, progress=lambda d, t, m: seen.append((d, t, m)), **STUDY, **ADAM)
    assert list(bat.table.columns) == list(KL_GAP_COLUMNS)
    cols = ["alpha", "fold", "n_re", "n_bins"]
    assert bat.table[cols].equals(one_by_one.table[cols])          # same order: folds, then `alphas`
    assert bat.table.error.isna().all() and (bat.table.fit_seconds > 0).all()
    for col in ("kl", "ece_re", "ece_te", "gap", "bound"):
        np.testing.assert_allclose(bat.table[col], one_by_one.table[col], rtol=1e-6, atol=1e-9, err_msg=col)
    # the batch reports its iterations, then one row after another
    assert any(m.startswith("batched fit of 4 GPs, iteration") and d == 0 for d, _, m in seen)
    assert [d for d, _, m in seen if not m.startswith("batched")] == [1, 2, 3, 4] and seen[-1][1] == 4
    assert bat.pearson_r == pytest.approx(one_by_one.pearson_r, abs=1e-6)
    assert bat.batched and not one_by_one.batched


def test_auto_batches_adam_fits_on_a_gpu_only(preds, one_by_one, monkeypatch) -> None:
    import pbr_core.gp.device as device

    calls = []
    monkeypatch.setattr(kl_gap, "_batched_rows", lambda *a, **k: calls.append(1))
    # on this CPU "auto" is the fits one by one, bit for bit
    auto = kl_vs_ece_gap(preds, **STUDY, **ADAM)
    assert not calls
    cols = ["kl", "ece_re", "ece_te"]
    np.testing.assert_array_equal(auto.table[cols], one_by_one.table[cols])
    # where the device is a GPU, "auto" batches Adam fits, and never L-BFGS or warm starts
    monkeypatch.setattr(device, "resolve_device", lambda d="auto": torch.device("cuda"))
    adam = {k: v for k, v in ADAM.items() if k != "device"}
    assert kl_gap._use_batch("auto", "pbr", [0.5], adam, False, 1)
    assert not kl_gap._use_batch("auto", "pbr", [0.5], {}, False, 1)                  # the default L-BFGS
    assert not kl_gap._use_batch("auto", "pbr", [0.5], adam, True, 1)                 # warm_start
    assert not kl_gap._use_batch("auto", "pbr", [0.5], adam, False, 2)                # worker processes


@pytest.mark.parametrize("kwargs, needs", [
    (dict(optimizer="lbfgs"), "optimizer='adam'"),
    (dict(optimizer="adam", warm_start=True), "warm_start=False"),
    (dict(optimizer="adam", n_jobs=2), "n_jobs=1"),
])
def test_batched_true_says_what_it_needs(preds, kwargs, needs) -> None:
    with pytest.raises(ValueError, match=f"batched=True\\) needs .*{needs}"):
        kl_vs_ece_gap(preds, batched=True, alphas=(0.5,), n_re=100, n_folds=1, **kwargs)
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match="`batched` to be True, False or 'auto'"):
            kl_vs_ece_gap(preds, batched=bad, alphas=(0.5,), n_re=100, n_folds=1)


def test_batched_probabilities_binary_and_chosen_folds(cifar10_logits) -> None:
    """Probability inputs (the GP on Wenger's input), a binary task with the ECE of p(y=1), and
    ``folds=`` in any order: the batch's rows are the fits one by one."""
    from pbr_core.predictions import softmax

    z, y = cifar10_logits
    p_cat = softmax(z[:400])[:, 3]                               # "is it a cat?"
    binary = Predictions.from_arrays(np.column_stack([1 - p_cat, p_cat]), (y[:400] == 3).astype(int),
                                     input_type="probabilities")
    kw = dict(alphas=(0.5, 0.5, 0.1), n_re=100, folds=[2, 0], seed=1, binary_ece="positive", **ADAM)
    bat, seq = (kl_vs_ece_gap(binary, batched=b, **kw) for b in (np.bool_(True), False))
    assert bat.batched and bat.table[["alpha", "fold"]].equals(seq.table[["alpha", "fold"]])
    assert bat.table.fold.tolist() == [2, 2, 2, 0, 0, 0]
    for col in ("kl", "ece_re", "ece_te"):
        np.testing.assert_allclose(bat.table[col], seq.table[col], rtol=1e-6, atol=1e-9, err_msg=col)


def test_a_failed_batch_falls_back_to_the_fits_one_by_one(preds, one_by_one, monkeypatch) -> None:
    """A batch that fails (one GP failing its training check even after the recovery fails the
    whole fit_batch) must not fail a study that the fits alone would finish: a warning, then the
    fits one after another, with on_error as usual."""
    import pbr_core.gp.batch as batch

    def broken(*args, **kwargs):
        raise RuntimeError("GP fit diverged: planted")

    monkeypatch.setattr(batch, "fit_batch", broken)
    for on_error in ("raise", "warn"):
        with pytest.warns(RuntimeWarning, match="batched fit of 4 GPs .* failed \\(RuntimeError: GP fit diverged: "
                                                "planted\\); fitting them one after another instead"):
            res = kl_vs_ece_gap(preds, batched=True, on_error=on_error, **STUDY, **ADAM)
        assert not res.batched and res.table.error.isna().all()
        cols = ["alpha", "fold", "kl", "ece_re", "ece_te", "bound"]
        np.testing.assert_array_equal(res.table[cols], one_by_one.table[cols])


def test_a_batched_study_stops(preds) -> None:
    asked = []
    with pytest.raises(Cancelled) as stop:
        kl_vs_ece_gap(preds, batched=True, cancel=lambda: asked.append(1) or len(asked) > 3, **STUDY, **ADAM)
    assert stop.value.partial.empty and stop.value.total == 4 and len(asked) == 4
