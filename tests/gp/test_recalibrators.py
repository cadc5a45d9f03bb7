"""GPCalibration / PBR behind the recalibrator interface: devices, determinism, save/load, real data."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import pbr_core
from pbr_core.bounds import corollary1_bound, corollary2_bound, optimal_n_bins
from pbr_core.predictions import softmax
from pbr_core.recalibrators import load_recalibrator
from pbr_core.recalibrators.gp import (
    PBR,
    GPCalibration,
    GPCalibrationApp,
    PBRApp,
    PBRTotal,
    PBRTotalApp,
)

from gp_testdata import Split, class_subset, split

QUICK = {"max_iter": 80, "n_mc": 20}


@pytest.fixture(scope="module")
def small(cifar10_logits) -> Split:
    z, y = cifar10_logits
    return split(z, y, 150, seed=1, n_te=500)


# ---------------------------------------------------------------------- devices
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only behaviour")
@pytest.mark.parametrize("cls", [GPCalibration, PBR])
def test_cuda_without_a_gpu_is_a_clear_error(cls, small) -> None:
    rec = cls(device="cuda", **QUICK)
    with pytest.raises(RuntimeError, match=r"device='cuda' was requested, but PyTorch cannot use a CUDA GPU"):
        rec.fit(small.z, small.y)
    assert not rec.is_fitted


def test_auto_device_runs_on_the_cpu_without_a_gpu(small) -> None:
    rec = PBR(device="auto", **QUICK).fit(small.z, small.y)
    assert rec.fit_report_["device"] == ("cuda:0" if torch.cuda.is_available() else "cpu")


@pytest.mark.parametrize("bad,match", [({"alpha": -0.1}, "alpha"), ({"objective": "elbo"}, "objective"),
                                       ({"n_inducing": 0}, "n_inducing"), ({"optimizer": "sgd"}, "optimizer"),
                                       ({"device": "tpu"}, "device"), ({"n_mc": 2.5}, "n_mc")])
def test_bad_parameters_are_named(bad, match, small) -> None:
    with pytest.raises(ValueError, match=match):
        PBR(**bad).fit(small.z, small.y)


def test_n_mc_auto_is_32_draws_below_50_classes_and_16_from_50_on(cifar10_logits, cifar100_logits, tmp_path) -> None:
    from pbr_core.gp.objectives import auto_mc_draws

    assert [auto_mc_draws(k) for k in (2, 10, 49, 50, 100, 1000)] == [32, 32, 32, 16, 16, 16]
    assert PBR().n_mc == "auto" and PBRTotal().n_mc == "auto"
    for (z, y), k, s in ((cifar10_logits, 10, 32), (cifar100_logits, 100, 16)):
        fit = dict(max_iter=8, n_predict_samples=5)
        auto = PBR(**fit).fit(z[:60], y[:60])
        assert auto.fit_report_["n_mc"] == s == auto.mc_draw_count(k)
        # "auto" is that S exactly: the same draws, the same fit, bit for bit
        fixed = PBR(n_mc=s, **fit).fit(z[:60], y[:60])
        assert fixed.fit_report_["objective"] == auto.fit_report_["objective"]
        np.testing.assert_array_equal(fixed.predict_proba(z[60:90]), auto.predict_proba(z[60:90]))
        loaded = load_recalibrator(auto.save(tmp_path / f"auto{k}.json"))
        assert loaded.n_mc == "auto" and loaded.fit_report_["n_mc"] == s
    assert PBR(n_mc=7, max_iter=3, n_predict_samples=5).fit(z[:60], y[:60]).fit_report_["n_mc"] == 7
    assert "n_mc" not in GPCalibration(max_iter=3).fit(z[:60], y[:60]).fit_report_  # no Monte Carlo there


@pytest.mark.parametrize("bad", ["automatic", 0, -3, True])
def test_n_mc_must_be_a_positive_integer_or_auto(bad, small) -> None:
    with pytest.raises(ValueError, match=r"Expected argument `n_mc` to be an integer from 1 to 10000 or 'auto'"):
        PBR(n_mc=bad).fit(small.z, small.y)


# ---------------------------------------------------------------------- determinism and state
def test_same_seed_same_result_other_seed_other_draws(small) -> None:
    a = PBRTotal(**QUICK).fit(small.z, small.y)
    b = PBRTotal(**QUICK).fit(small.z, small.y)
    np.testing.assert_array_equal(a.predict_proba(small.z_te), b.predict_proba(small.z_te))
    assert a.to_dict() == b.to_dict()
    c = PBRTotal(random_state=1, **QUICK).fit(small.z, small.y)
    assert not np.array_equal(a.predict_proba(small.z_te), c.predict_proba(small.z_te))


@pytest.mark.parametrize("cls", [GPCalibration, PBR, PBRTotalApp])
def test_save_load_round_trip_gives_identical_predictions(cls, small, tmp_path) -> None:
    rec = cls(**QUICK).fit(small.z, small.y)
    path = rec.save(tmp_path / "gp.json")
    loaded = load_recalibrator(path)
    assert type(loaded) is cls
    np.testing.assert_array_equal(loaded.predict_proba(small.z_te), rec.predict_proba(small.z_te))
    assert loaded.kl_ == rec.kl_ and loaded.bounds_ == rec.bounds_
    assert {k: v for k, v in rec.fit_report_.items() if k != "wall_time_s"} == loaded.fit_report_
    for name, value in rec.gp_parameters().items():
        np.testing.assert_array_equal(loaded.gp_parameters()[name], value)
    doc = json.loads(path.read_text())
    assert set(doc["state"]["gp"]) == set(rec.gp_parameters())


def test_fit_exposes_kl_report_and_valid_bounds(small) -> None:
    rec = PBR(alpha=0.5, **QUICK).fit(small.z, small.y)
    rep = rec.fit_report_
    for key in ("iterations", "objective", "brier", "kl", "wall_time_s", "device", "converged", "warnings"):
        assert key in rep
    assert rep["ce"] is None and rep["kl"] == rec.kl_ >= 0
    n = small.y.size
    B = optimal_n_bins(n)
    assert rec.bounds_["n_bins"] == B
    assert rec.bounds_["corollary1"] == pytest.approx(float(corollary1_bound(n, B, rec.kl_, eps=0.05)))
    assert rec.bounds_["corollary2"] == pytest.approx(float(corollary2_bound(n, B, rec.kl_, lipschitz=1.0, eps=0.05)))


def test_scores_of_another_kind_at_prediction_are_refused(small) -> None:
    rec = PBR(**QUICK).fit(small.z, small.y, input_type="logits")
    with pytest.raises(ValueError, match="fitted on logits but is asked to predict from probabilities"):
        rec.predict_proba(softmax(small.z_te))


def test_app_variants_predict_softmax_of_the_latent_mean(small) -> None:
    for cls in (GPCalibrationApp, PBRApp):
        rec = cls(**QUICK).fit(small.z, small.y)
        assert rec.mean_approx is True
        with torch.no_grad():
            dev = rec.model_.variational_strategy.inducing_points.device
            mu, _ = rec.model_.marginals(torch.as_tensor(small.z_te, device=dev))
        np.testing.assert_allclose(rec.predict_proba(small.z_te), torch.softmax(mu, -1).cpu().numpy(), rtol=1e-12)
    assert PBRTotalApp().objective == "pbr_total" and PBRApp().objective == "pbr"


def test_fit_from_reuses_an_equal_fit_and_refits_otherwise(small, monkeypatch) -> None:
    import pbr_core.recalibrators.gp as gp_module

    base = PBR(**QUICK).fit(small.z, small.y)
    assert base.fit_key() == PBRApp(**QUICK).fit_key() == PBR(mean_approx=True, n_predict_samples=7, **QUICK).fit_key()
    assert base.fit_key() != PBR(alpha=0.1, **QUICK).fit_key() != PBRTotal(**QUICK).fit_key()
    assert GPCalibration(**QUICK).fit_key() == GPCalibrationApp(**QUICK).fit_key() != base.fit_key()
    shared = PBRApp(**QUICK).fit_from(base, small.z, small.y)
    alone = PBRApp(**QUICK).fit(small.z, small.y)
    assert shared.fit_report_["fit_shared_with"] == "pbr" and "fit_shared_with" not in alone.fit_report_
    assert shared.kl_ == alone.kl_ and shared.fit_report_["train_check"]["passed"]
    np.testing.assert_array_equal(shared.predict_proba(small.z_te), alone.predict_proba(small.z_te))
    # different settings, an unfitted source, or other data: a full fit of its own
    for other, z, y in ((PBR(alpha=0.1, **QUICK).fit(small.z, small.y), small.z, small.y),
                        (PBR(**QUICK), small.z, small.y), (base, small.z[:100], small.y[:100])):
        r = PBRApp(**QUICK).fit_from(other, z, y)
        assert r.is_fitted and "fit_shared_with" not in r.fit_report_
    # the training-set check with the adopter's own prediction fails: refit (and recover) as a fresh fit would
    real_check = gp_module.training_check
    calls = []

    def failing_once(*args, **kwargs):
        calls.append(1)
        return {**real_check(*args, **kwargs), "passed": False} if len(calls) == 1 else real_check(*args, **kwargs)

    monkeypatch.setattr(gp_module, "training_check", failing_once)
    r = PBRApp(**QUICK).fit_from(base, small.z, small.y)
    assert calls and "fit_shared_with" not in r.fit_report_ and r.kl_ == alone.kl_


@pytest.mark.parametrize("prob_input,kind", [("wenger", "probs"), ("log", "log_probs")])
def test_probability_input_is_recalibrated_by_the_chosen_model(small, prob_input: str, kind: str) -> None:
    probs = softmax(small.z)
    rec = PBR(prob_input=prob_input, **QUICK).fit(probs, small.y)
    assert rec.input_kind_ == kind
    p = rec.predict_proba(softmax(small.z_te))
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-12)


# ---------------------------------------------------------------------- real data
def _ece(p, y) -> float:
    return pbr_core.ece(p, y)


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_gp_calibration_and_pbr_lower_the_test_ece_of_an_over_confident_model(cifar100_logits, seed) -> None:
    """CIFAR-100 DenseNet-121 (over-confident), 20-class slice, n_re = 300: test ECE .036 -> ~.02."""
    zs, ys = class_subset(*cifar100_logits, 20)
    s = split(zs, ys, 300, seed=seed)
    before = _ece(softmax(s.z_te), s.y_te)
    for cls in (GPCalibration, PBR):
        after = _ece(cls().fit(s.z, s.y).predict_proba(s.z_te), s.y_te)
        assert after < before - 0.005, f"{cls.__name__}: {before:.4f} -> {after:.4f}"


def test_a_well_calibrated_model_stays_well_calibrated(cifar10_logits) -> None:
    """CIFAR-10 logits temperature-scaled with T from a grid on the recalibration rows (ECE ~.015)."""
    z, y = cifar10_logits
    s = split(z, y, 300, seed=0, n_te=2000)
    temps = np.linspace(0.5, 3.0, 251)
    nll = [pbr_core.nll(softmax(s.z / t), s.y) for t in temps]
    t = temps[int(np.argmin(nll))]
    before = _ece(softmax(s.z_te / t), s.y_te)
    for cls in (GPCalibration, PBR, PBRTotal):
        after = _ece(cls().fit(s.z / t, s.y).predict_proba(s.z_te / t), s.y_te)
        assert after <= before + 0.01, f"{cls.__name__}: {before:.4f} -> {after:.4f}"


@pytest.mark.slow
def test_full_cifar100_k100_n1000(cifar100_logits) -> None:
    """The issue's setting: K = 100, n_re = 1000 (about 30 s CPU per fit on the shared machine)."""
    s = split(*cifar100_logits, 1000, seed=0, n_te=4000)
    before = _ece(softmax(s.z_te), s.y_te)
    for cls in (GPCalibration, PBR, PBRTotal):
        after = _ece(cls().fit(s.z, s.y).predict_proba(s.z_te), s.y_te)
        assert after < before - 0.01, f"{cls.__name__}: {before:.4f} -> {after:.4f}"


def test_full_cholesky_variational_option(small, tmp_path) -> None:
    rec = PBR(variational="cholesky", **QUICK).fit(small.z, small.y)
    assert rec.gp_parameters()["variational_strategy._variational_distribution.chol_variational_covar"].shape == (10, 10)
    loaded = load_recalibrator(rec.save(tmp_path / "chol.json"))
    np.testing.assert_array_equal(loaded.predict_proba(small.z_te), rec.predict_proba(small.z_te))


def test_fits_drive_the_shared_progress_hook(small) -> None:
    from pbr_core.recalibrators import report_progress

    seen = []

    def progress(done, total, message):
        if not seen:
            seen.append((total, message))
        seen.append(done)

    with report_progress(progress):
        PBR(**QUICK).fit(small.z, small.y)
    assert seen[0] == (QUICK["max_iter"], "pbr fit") and len(seen) > 2
