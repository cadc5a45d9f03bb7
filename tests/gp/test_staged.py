"""Fits in stages (pbr_core.gp.staged): when they run, what they report, and that they reach the
full-batch fit's objective. The stage sizes are scaled down (monkeypatched) so that both stages run
on a few thousand rows in seconds."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import pbr_core.gp.staged as staged
import pbr_core.gp.training as training
from pbr_core.gp.model import GPRecalibrationModel
from pbr_core.gp.objectives import ObjectiveSpec, draw_mc_noise
from pbr_core.gp.problem import FitData
from pbr_core.predictions import softmax
from pbr_core.recalibrators import load_recalibrator
from pbr_core.recalibrators.gp import PBR, GPCalibration


def _simulated(cifar10_logits, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n rows of real CIFAR-10 logits drawn with replacement, outcomes drawn from a known calibrated
    model (softmax of the logits at temperature 1.5: the network is over-confident)."""
    z, _ = cifar10_logits
    rng = np.random.default_rng(seed)
    rows = z[rng.integers(0, z.shape[0], n)]
    p = softmax(rows / 1.5)
    y = (p.cumsum(1) < rng.random(n)[:, None]).sum(1).clip(0, p.shape[1] - 1)
    return rows, y


def _objective(model: GPRecalibrationModel, z: np.ndarray, y: np.ndarray, alpha: float) -> float:
    """The PBR objective of every row on 64 fresh antithetic draws (not any fit's own)."""
    data = FitData(z=torch.as_tensor(z), labels=torch.as_tensor(y), spec=ObjectiveSpec.pbr(alpha),
                   eps=draw_mc_noise(len(z), 64, z.shape[1], 99, antithetic=True))
    with torch.no_grad():
        return float(data.terms(model, exact=True).total)


@pytest.fixture
def small_stages(monkeypatch):
    """Stage 1 on 400 rows; n x S = 2^13 draws per evaluation (S = 32 at 256 rows, 6 at 2,000)."""
    monkeypatch.setattr(staged, "STAGE_ROWS", 400)
    monkeypatch.setattr(staged, "MC_ROW_DRAWS", 2**13)


def test_when_a_fit_runs_in_stages() -> None:
    assert not staged.uses_stages(staged.STAGED_MIN_ROWS - 1, "auto")
    assert staged.uses_stages(staged.STAGED_MIN_ROWS, "auto")
    assert staged.uses_stages(10, True) and not staged.uses_stages(10**7, False)


def test_stage_sizes() -> None:
    assert staged.stage_sizes(staged.STAGE_ROWS) == [staged.STAGE_ROWS]
    assert staged.stage_sizes(100_000) == [5_000, 100_000]
    assert staged.stage_sizes(199_999) == [5_000, 199_999]
    assert staged.stage_sizes(200_000) == [5_000, 100_000, 200_000]
    assert staged.stage_sizes(10**6) == [5_000, 100_000, 10**6]
    order = staged.stage_rows(1000, seed=0)
    assert sorted(order) == list(range(1000))  # each stage's rows contain the previous stage's


def test_stage_draws_keep_a_fixed_budget() -> None:
    assert staged.stage_draw_count(1000, 32) == 32  # capped at the full-batch fit's S
    assert staged.stage_draw_count(4096, 32) == 32
    assert staged.stage_draw_count(10_000, 32) == 14  # 2^17 / 10^4 = 13.1 -> 14 (even)
    assert staged.stage_draw_count(100_000, 32) == 2
    assert staged.stage_draw_count(10**7, 32) == 2  # one antithetic pair at least
    assert staged.stage_draw_count(10_000, 16) == 14 and staged.stage_draw_count(5000, 16) == 16


def test_a_staged_fit_reaches_the_full_batch_objective(cifar10_logits, small_stages) -> None:
    z, y = _simulated(cifar10_logits, 2000)
    full = PBR(alpha=0.5, staged=False, device="cpu").fit(z, y)
    fast = PBR(alpha=0.5, staged=True, device="cpu").fit(z, y)
    stages = fast.fit_report_["stages"]
    assert [s["rows"] for s in stages] == [400, 2000]
    assert [s["n_mc"] for s in stages] == [22, 6]  # 2^13 / 400 -> 22, 2^13 / 2000 -> 6
    assert fast.fit_report_["n_mc"] == 6 and "stages" not in full.fit_report_  # a full-batch report as before
    assert fast.fit_report_["iterations"] == sum(s["iterations"] for s in stages)
    # The bound is the one of every row, with the KL of the fit on every row.
    assert fast.bounds_["n"] == 2000 and fast.bounds_["kl"] == pytest.approx(fast.kl_)
    a, b = _objective(full.model_, z, y, 0.5), _objective(fast.model_, z, y, 0.5)
    assert abs(b - a) / a < 5e-4, (a, b)
    assert fast.fit_report_["train_check"]["passed"]


def test_a_staged_fit_is_a_function_of_its_seed(cifar10_logits, small_stages) -> None:
    z, y = _simulated(cifar10_logits, 1200, seed=1)
    a = PBR(alpha=0.25, staged=True, device="cpu", random_state=3).fit(z, y)
    b = PBR(alpha=0.25, staged=True, device="cpu", random_state=3).fit(z, y)
    assert a.fit_report_["objective"] == b.fit_report_["objective"]
    np.testing.assert_array_equal(a.predict_proba(z[:20]), b.predict_proba(z[:20]))


def test_below_the_threshold_auto_is_the_full_batch_fit(cifar10_logits) -> None:
    z, y = cifar10_logits[0][:300], cifar10_logits[1][:300]
    auto = PBR(alpha=0.5, device="cpu", max_iter=120).fit(z, y)
    full = PBR(alpha=0.5, staged=False, device="cpu", max_iter=120).fit(z, y)
    assert auto.fit_report_["objective"] == full.fit_report_["objective"]
    assert "stages" not in auto.fit_report_


def test_gp_calibration_and_continued_fits_in_stages(cifar10_logits, small_stages) -> None:
    z, y = _simulated(cifar10_logits, 1000, seed=2)
    gp = GPCalibration(staged=True, device="cpu").fit(z, y)
    assert [s["rows"] for s in gp.fit_report_["stages"]] == [400, 1000]
    assert "n_mc" not in gp.fit_report_  # no Monte Carlo in Wenger's Taylor objective
    start = PBR(alpha=0.1, staged=True, device="cpu").fit(z, y)
    cont = PBR(alpha=0.5, staged=True, device="cpu").fit_continued(start, z, y)
    # A continued fit starts where its start ended: only the stage on every row runs.
    assert [s["rows"] for s in cont.fit_report_["stages"]] == [1000]
    assert cont.fit_report_.get("continued_from_alpha") == 0.1


def test_staged_is_saved_and_old_files_load_with_auto(tmp_path, cifar10_logits) -> None:
    z, y = cifar10_logits[0][:200], cifar10_logits[1][:200]
    r = PBR(alpha=0.5, staged=False, max_iter=40, n_mc=8, n_predict_samples=8, device="cpu").fit(z, y)
    path = tmp_path / "pbr.json"
    r.save(path)
    assert load_recalibrator(path).staged is False
    data = json.loads(path.read_text())
    del data["params"]["staged"]  # a file saved before the parameter existed
    path.write_text(json.dumps(data))
    old = load_recalibrator(path)
    assert old.staged == "auto"
    np.testing.assert_allclose(old.predict_proba(z[:5]), r.predict_proba(z[:5]), rtol=0, atol=0)


def test_staged_must_be_a_flag_or_auto() -> None:
    with pytest.raises(ValueError, match="staged"):
        PBR(staged="yes").fit(np.zeros((20, 3)), np.zeros(20, dtype=int))


def test_the_training_check_of_many_rows_uses_a_sample(monkeypatch, cifar10_logits) -> None:
    monkeypatch.setattr(training, "CHECK_MAX_ROWS", 150)
    z, y = cifar10_logits[0][:400], cifar10_logits[1][:400]
    r = PBR(alpha=0.5, max_iter=60, n_mc=8, n_predict_samples=8, device="cpu").fit(z, y)
    assert r.fit_report_["train_check"]["rows"] == 150 and r.fit_report_["train_check"]["passed"]


def test_a_stage_1_at_the_prior_is_no_start(monkeypatch, cifar10_logits, small_stages) -> None:
    """A stage 1 that collapsed to the prior leaves no gradient to follow: the fit on every row then
    runs from the prior (warm-up, restarts), not continued from it."""
    calls = []
    real = staged.fit_gp

    def spy(model, data, settings, progress=None, check=None, start=None, start_jitter=None):
        reports = real(model, data, settings, progress=progress, check=check, start=start, start_jitter=start_jitter)
        calls.append(start is not None)
        if len(calls) == 1:  # pretend stage 1 ended at the prior
            reports = [type(reports[0])(**{**reports[0].to_dict(), "ended_at_prior": True})]
        return reports

    monkeypatch.setattr(staged, "fit_gp", spy)
    z, y = _simulated(cifar10_logits, 800, seed=4)
    r = PBR(alpha=0.5, staged=True, device="cpu").fit(z, y)
    assert calls == [False, False]
    assert r.fit_report_["stages"][0]["ended_at_prior"] and r.fit_report_["train_check"]["passed"]
