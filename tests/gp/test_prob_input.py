"""The GP on probability inputs: Wenger et al.'s model (``prob_input="wenger"``) next to the GP on log p.

Wenger et al. (AISTATS 2020; pycalib ``GPCalibration(logits=False)``) feed p itself to the GP with
a log mean function, f = log p + g(p), and put their kernel ranges on that input space. These
tests pin the model by a slow obvious computation, check that it starts at the input prediction,
that a fitted one saves and loads exactly, and that files saved before ``prob_input`` existed load
as the model they were saved with.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from gp_testdata import class_subset, load_logits

from pbr_core.gp.model import GPRecalibrationModel, initial_inducing_points, kernel_inputs
from pbr_core.gp.predict import predict_proba
from pbr_core.predictions import log_probs, softmax
from pbr_core.recalibrators import RecalibratorFileError, load_recalibrator
from pbr_core.recalibrators.gp import GPCalibration, PBR, PBRApp, PBRTotal

F64 = torch.float64
QUICK = {"max_iter": 40, "n_mc": 20, "n_predict_samples": 20, "device": "cpu"}
LEGACY = Path(__file__).parent / "data" / "legacy_pbr_log_probs.json"


@pytest.fixture(scope="module")
def probs3() -> tuple[np.ndarray, np.ndarray]:
    """Real probabilities: CIFAR-10 ResNet-110 softmax restricted to classes 0-2 (K = 3)."""
    z, y = class_subset(*load_logits("cifar10_resnet110.npz"), 3)
    return softmax(z), y


def _slow_marginals(p: np.ndarray, zu: np.ndarray, s2: float, ls: float, white: float, jitter: float,
                    m: np.ndarray, sd2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Wenger's whitened mean-field SVGP on probability inputs, one entry at a time:
    k(a, b) = s2 exp(-(a - b)^2 / (2 ls^2)) (+ white on the diagonal of one input set),
    A = L^-1 k(Z, p_nk), mu_nk = log p_nk + A^T m, var_nk = s2 + white + jitter - A^T A + A^T diag(sd2) A."""
    M = zu.size
    kuu = np.array([[s2 * np.exp(-(zu[i] - zu[j]) ** 2 / (2 * ls ** 2)) for j in range(M)] for i in range(M)])
    L = np.linalg.cholesky(kuu + (white + jitter) * np.eye(M))
    mu, var = np.empty_like(p), np.empty_like(p)
    for n in range(p.shape[0]):
        for k in range(p.shape[1]):
            kuf = np.array([s2 * np.exp(-(zu[i] - p[n, k]) ** 2 / (2 * ls ** 2)) for i in range(M)])
            a = np.linalg.solve(L, kuf)
            mu[n, k] = np.log(p[n, k]) + a @ m
            var[n, k] = s2 + white + jitter - a @ a + a @ (sd2 * a)
    return mu, var


def _moved(model: GPRecalibrationModel, seed: int = 0) -> GPRecalibrationModel:
    """Every parameter moved away from its initial value (not at the prior)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


# ---------------------------------------------------------------------- the model
def test_marginals_are_wengers_model_on_p_by_a_slow_computation(probs3) -> None:
    p = probs3[0][:30]
    zu = initial_inducing_points(p, 6)
    model = _moved(GPRecalibrationModel(torch.as_tensor(zu), "probs"))
    mu, var = model.marginals(torch.as_tensor(log_probs(p)))
    dist = model.variational_strategy._variational_distribution
    ref_mu, ref_var = _slow_marginals(
        p, model.variational_strategy.inducing_points.detach().numpy().ravel(),
        model.scaled_rbf.outputscale.item(), model.scaled_rbf.base_kernel.lengthscale.item(),
        model.white.noise.item(), model.jitter, dist.variational_mean.detach().numpy(),
        dist._variational_stddev.detach().numpy() ** 2)
    np.testing.assert_allclose(mu.detach().numpy(), ref_mu, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(var.detach().numpy(), ref_var, rtol=1e-10, atol=1e-12)
    # The GP on log p (today's "log_probs") is a different model on the same parameters.
    other = GPRecalibrationModel(torch.as_tensor(zu), "log_probs")
    other.load_state_dict(model.state_dict())
    assert not np.allclose(other.marginals(torch.as_tensor(log_probs(p)))[0].detach().numpy(), ref_mu, atol=1e-3)


@pytest.mark.parametrize("variational", ["mean_field", "cholesky"])
def test_marginals_equal_gpytorch_with_the_log_mean_at_p(variational: str, probs3) -> None:
    """GPyTorch's own path, ``model(p)`` with the LogMean module, gives the same mean and variance."""
    p = probs3[0][:40]
    model = _moved(GPRecalibrationModel(torch.as_tensor(initial_inducing_points(p, 8)), "probs", variational), 3)
    mu, var = model.marginals(torch.as_tensor(log_probs(p)))
    model.variational_strategy._clear_cache()
    out = model(torch.as_tensor(p.reshape(-1, 1)))
    torch.testing.assert_close(mu.reshape(-1), out.mean.detach(), rtol=1e-9, atol=1e-11)
    torch.testing.assert_close(var.reshape(-1), out.variance.detach(), rtol=1e-9, atol=1e-11)


def test_at_the_prior_the_latent_mean_is_log_p_and_predictions_are_the_input(probs3) -> None:
    p = probs3[0][:50]
    z = torch.as_tensor(log_probs(p))
    model = GPRecalibrationModel(torch.as_tensor(initial_inducing_points(p, 10)), "probs")
    with torch.no_grad():
        mu, var = model.marginals(z)
    assert torch.equal(mu, z)  # m(p) = log p, E g = 0
    # Prior variance: outputscale 1 + white 0.01 + jitter, whatever the input.
    np.testing.assert_allclose(var.numpy(), 1.0 + 0.01 + model.jitter, rtol=1e-12)
    np.testing.assert_allclose(predict_proba(model, z.numpy(), mean_approx=True), p, rtol=1e-12, atol=1e-15)
    # Wenger's initial values and ranges, now on the input space they were chosen for.
    assert model.scaled_rbf.base_kernel.lengthscale.item() == pytest.approx(0.5, rel=1e-12)
    assert model.scaled_rbf.raw_outputscale_constraint.upper_bound.item() == 5.0
    assert model.scaled_rbf.base_kernel.raw_lengthscale_constraint.lower_bound.item() == pytest.approx(1e-3)


def test_kernel_inputs_and_inducing_points_live_on_p(probs3) -> None:
    p = probs3[0][:200]
    z = log_probs(p)
    np.testing.assert_allclose(kernel_inputs(z, "probs"), p, rtol=1e-14)
    assert kernel_inputs(z, "log_probs") is z and kernel_inputs(z, "logits") is z
    zu = initial_inducing_points(kernel_inputs(z, "probs"), 10)
    assert np.all((zu > 0) & (zu < 1))  # k-means on the flattened p, as pycalib does


# ---------------------------------------------------------------------- the recalibrators
@pytest.mark.parametrize("cls", [GPCalibration, PBR, PBRTotal])
def test_wenger_fit_uses_the_model_on_p_and_round_trips(cls, probs3, tmp_path) -> None:
    p, y = probs3
    rec = cls(prob_input="wenger", **QUICK).fit(p[:200], y[:200], input_type="probabilities")
    assert rec.input_kind_ == "probs" and rec.model_.input_kind == "probs"
    path = rec.save(tmp_path / "model.json")
    doc = json.loads(path.read_text())
    assert doc["params"]["prob_input"] == "wenger" and doc["state"]["input_kind"] == "probs"
    loaded = load_recalibrator(path)
    assert loaded.prob_input == "wenger" and loaded.model_.input_kind == "probs"
    np.testing.assert_array_equal(loaded.predict_proba(p[200:300]), rec.predict_proba(p[200:300]))
    assert loaded.to_dict() == rec.to_dict()


def test_logit_inputs_do_not_depend_on_prob_input(probs3) -> None:
    z, y = class_subset(*load_logits("cifar10_resnet110.npz"), 3)
    a = PBR(prob_input="log", **QUICK).fit(z[:150], y[:150])
    b = PBR(prob_input="wenger", **QUICK).fit(z[:150], y[:150])
    assert a.input_kind_ == b.input_kind_ == "logits"
    np.testing.assert_array_equal(a.predict_proba(z[150:200]), b.predict_proba(z[150:200]))


def test_the_two_models_on_probabilities_differ(probs3) -> None:
    p, y = probs3
    a = PBR(prob_input="log", **QUICK).fit(p[:200], y[:200], input_type="probabilities")
    b = PBR(prob_input="wenger", **QUICK).fit(p[:200], y[:200], input_type="probabilities")
    assert a.input_kind_ == "log_probs" and b.input_kind_ == "probs"
    assert a.fit_key() != b.fit_key()  # an app. variant never shares a fit across the two
    assert not np.allclose(a.predict_proba(p[200:]), b.predict_proba(p[200:]), atol=1e-6)
    shared = PBRApp(prob_input="wenger", **QUICK).fit_from(b, p[:200], y[:200], input_type="probabilities")
    assert shared.fit_report_.get("fit_shared_with") == "pbr" and shared.model_ is b.model_


def test_wenger_is_the_default_on_probabilities(probs3) -> None:
    """Chosen by measurement on KITTI (docs/reproduction.md, "The GP on probability inputs")."""
    for cls in (GPCalibration, PBR, PBRTotal, PBRApp):
        assert cls().prob_input == "wenger"


def test_bad_prob_input_is_a_clear_error(probs3) -> None:
    p, y = probs3
    with pytest.raises(ValueError, match="Expected argument `prob_input` to be 'log' or 'wenger', but got 'exp'"):
        PBR(prob_input="exp", **QUICK).fit(p[:50], y[:50], input_type="probabilities")


# ---------------------------------------------------------------------- files saved before prob_input
def test_a_file_saved_before_prob_input_loads_as_the_model_it_was_saved_with(tmp_path) -> None:
    """tests/gp/data/legacy_pbr_log_probs.json was written by the code of commit 96937c5 (GP on
    log p, no ``prob_input`` parameter) together with its predictions: it loads as that model and
    predicts the same numbers."""
    legacy = json.loads(LEGACY.read_text())
    doc = legacy["recalibrator"]
    assert "prob_input" not in doc["params"] and doc["state"]["input_kind"] == "log_probs"
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    rec = load_recalibrator(path)
    assert rec.prob_input == "log" and rec.input_kind_ == "log_probs" and rec.model_.input_kind == "log_probs"
    X = np.asarray(legacy["probs"])
    np.testing.assert_allclose(rec.predict_proba(X), np.asarray(legacy["expected"]), rtol=1e-12, atol=1e-14)
    app = predict_proba(rec.model_, log_probs(X), mean_approx=True)
    np.testing.assert_allclose(app, np.asarray(legacy["expected_app"]), rtol=1e-12, atol=1e-14)
    # Saved again, it records the parameter and loads the same.
    again = load_recalibrator(rec.save(tmp_path / "new.json"))
    assert again.to_dict()["params"]["prob_input"] == "log"
    np.testing.assert_array_equal(again.predict_proba(X), rec.predict_proba(X))


def test_a_file_whose_prob_input_and_model_disagree_is_refused(tmp_path) -> None:
    doc = json.loads(LEGACY.read_text())["recalibrator"]
    bad = {**doc, "params": {**doc["params"], "prob_input": "wenger"}}
    path = tmp_path / "model.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(RecalibratorFileError, match='state.input_kind is "log_probs", but .*prob_input "wenger".* '
                                                    'acts on "probs"'):
        load_recalibrator(path)
    bad = {**doc, "params": {**doc["params"], "prob_input": "lin"}}
    path.write_text(json.dumps(bad))
    with pytest.raises(RecalibratorFileError, match="prob_input"):
        load_recalibrator(path)
