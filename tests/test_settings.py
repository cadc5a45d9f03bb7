"""The studies' typed settings check themselves, take method facts from the registry, and their runs
give the protocols' numbers (issue 36: the front ends only fill settings in and draw results)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core.evaluation import reliability_table
from pbr_core.experiments import (MIN_TEST_ROWS, SmallTestSetError, compare, fit_and_test, kl_vs_ece_gap,
                                  n_re_sweep, split_indices)
from pbr_core.experiments.runs import run_apply, run_compare, run_fit, run_kl_gap, run_pbr, run_sweep
from pbr_core.experiments.settings import (CompareSettings, FitSettings, GroupGapSettings, KLGapSettings,
                                           PBRSettings, SweepSettings, default_holdout_percent, method_settings,
                                           min_holdout_percent, params_of)
from pbr_core.recalibrators import get_recalibrator


@pytest.fixture(scope="module")
def kitti() -> pbr_core.Predictions:
    return pbr_core.load_predictions("sample_data/kitti_random_forest.csv").subset(np.arange(600))


@pytest.mark.parametrize("make, words", [
    (lambda: PBRSettings(objective="nope"), "objective 'nope'"),
    (lambda: PBRSettings(n_re=1), "`n_re` to be an integer of at least 2, but got 1"),
    (lambda: PBRSettings(alpha=-1.0), "`alpha` to be a finite number >= 0"),
    (lambda: PBRSettings(cv_score="auc"), "`cv_score` to be 'ece', 'brier' or 'nll'"),
    (lambda: PBRSettings(binary_ece="p1"), "`binary_ece` to be 'positive' or 'top_label'"),
    (lambda: PBRSettings(eps=0.0), r"`eps` to be a number in \(0, 1\)"),
    (lambda: CompareSettings(methods=("nope",)), "Unknown recalibration method 'nope'"),
    (lambda: CompareSettings(methods=()), "at least one method"),
    (lambda: CompareSettings(on_error="ignore"), "`on_error` to be 'warn' or 'raise'"),
    (lambda: SweepSettings(n_re_values=(1,)), "`n_re_values` to be an integer of at least 2"),
    (lambda: KLGapSettings(objective="temperature"), "a method with an alpha, but got 'temperature'"),
    (lambda: KLGapSettings(alphas=()), "`alphas` to be a non-empty list"),
    (lambda: FitSettings(holdout=1.0), r"`holdout` to be a number in \[0, 1\)"),
    (lambda: GroupGapSettings(n_folds=0), "`n_folds` to be an integer of at least 1"),
])
def test_settings_check_themselves(make, words) -> None:
    with pytest.raises(ValueError, match=words):
        make()


def test_method_facts_come_from_the_registry() -> None:
    assert PBRSettings(objective="gp").uses_alpha is False and PBRSettings(objective="gp").method == "gp"
    s = PBRSettings(objective="pbr_total", mean_approx=True, alpha=None, alpha_grid=(0.1, 1.0), cv_folds=3,
                    max_iter=20, prior_split=0.3)
    assert s.method == "pbr_total_app" and s.auto_alpha and s.n_fits == 7
    rec = s.recalibrator()
    assert rec.method == "pbr_cv" and rec.estimator.method == "pbr_total_app" and rec.cv == 3
    assert rec.estimator.max_iter == 20 and rec.estimator.prior_split == 0.3
    assert method_settings("temperature", alpha=0.3, max_iter=50) == {}
    assert method_settings("pbr", alpha=0.3, max_iter=50) == {"alpha": 0.3, "max_iter": 50}
    c = CompareSettings.of(["temperature", "pbr", "vector_scaling"], 300, 2, alpha=0.3, max_iter=50)
    assert c.method_params() == {"pbr": {"alpha": 0.3, "max_iter": 50}, "vector_scaling": {"max_iter": 50}}
    assert c.heavy and c.planned == 6 and params_of({"a": {}, "b": {"x": 1}}) == (("b", (("x", 1),)),)


def test_settings_check_the_data() -> None:
    with pytest.raises(SmallTestSetError, match="at least 144 test rows are needed. Do this."):
        PBRSettings(n_re=400).check(500, "Do this.")
    PBRSettings(n_re=300).check(500)
    with pytest.raises(SmallTestSetError):
        CompareSettings(n_re=100, n_te=100).check(1000)
    with pytest.raises(SmallTestSetError):
        KLGapSettings(n_re=100).check(1000)
    FitSettings(holdout=0.0).check(10)  # nothing held out: measured in-sample, nothing to refuse
    assert FitSettings(holdout=0.2).split(10_000) == (8000, 2000)
    assert min_holdout_percent(504) == 30 and default_holdout_percent(504) == 30 and default_holdout_percent(100) == 0
    assert FitSettings(holdout=min_holdout_percent(504) / 100).split(504)[1] >= MIN_TEST_ROWS


def test_runs_give_the_protocols_numbers(kitti) -> None:
    c = run_compare(kitti, CompareSettings.of(["uncalibrated", "temperature"], 300, 2, binary_ece="top_label"))
    pd.testing.assert_frame_equal(c.table.drop(columns=["fit_seconds", "predict_seconds"]),
                                  compare(kitti, ["uncalibrated", "temperature"], n_re=300, n_folds=2,
                                          binary_ece="top_label", on_error="warn").drop(
                                      columns=["fit_seconds", "predict_seconds"]))
    assert c.ece_target == "top_label" and not c.binary_positive and set(c.diagrams) == {"uncalibrated", "temperature"}
    s = run_sweep(kitti, SweepSettings(methods=("temperature",), n_re_values=(50, 200), n_folds=1))
    assert s.table["ece"].tolist() == n_re_sweep(kitti, ["temperature"], n_re_values=[50, 200], n_folds=1)["ece"].tolist()
    assert s.binary_positive
    p = run_pbr(kitti, PBRSettings(objective="gp", n_re=300, max_iter=20))
    h = fit_and_test(kitti, get_recalibrator("gp", max_iter=20), 300)
    assert p.after == h.after and p.kl == h.kl and p.alpha is None and p.at_prior is not None
    pd.testing.assert_frame_equal(p.reliability_after, reliability_table(h.test_probs, h.test_set.labels, "binary"))
    k = run_kl_gap(kitti, KLGapSettings(alphas=(0.1, 1.0), n_re=150, n_folds=1, max_iter=15))
    ref = kl_vs_ece_gap(kitti, alphas=[0.1, 1.0], n_re=150, n_folds=1, max_iter=15)
    assert k.result.table["gap"].tolist() == ref.table["gap"].tolist() and k.n_classes == 2


def test_fit_and_apply_runs(kitti) -> None:
    f = run_fit(kitti, FitSettings(method="temperature", holdout=0.3, seed=1))
    re_idx, te_idx = split_indices(kitti.n, 420, fold=0, seed=1)
    assert f.n_fit == 420 and f.n_eval == 180 and not f.in_sample and f.at_prior is None
    rec = get_recalibrator("temperature").fit(kitti.subset(re_idx))
    assert f.recalibrator.to_dict() == rec.to_dict()
    a = run_apply(kitti.subset(te_idx), rec)
    assert a.after == f.after and a.settings is None and a.n_fit == 0 and a.binary_positive


def test_sweep_and_group_gap_settings_of_the_shared_controls() -> None:
    """SweepSettings.of / GroupGapSettings.of give each method the shared controls' settings, as
    CompareSettings.of (the Compare page's sweep and group gaps build theirs with them)."""
    s = SweepSettings.of(["temperature", "pbr"], [250, 50], 2, 3, alpha=0.25, max_iter=40, binary_ece="top_label")
    assert s == SweepSettings(methods=("temperature", "pbr"), n_re_values=(50, 250), n_folds=2, seed=3,
                              binary_ece="top_label",
                              params=params_of({m: method_settings(m, 0.25, 40) for m in ("temperature", "pbr")}))
    assert dict(s.params)["pbr"] == (("alpha", 0.25), ("max_iter", 40))
    g = GroupGapSettings.of("pbr", ["segment"], 500, 4, 1, alpha=0.25, max_iter=None)
    assert g == GroupGapSettings(method="pbr", by=("segment",), n_re=500, n_folds=4, seed=1,
                                 params=(("alpha", 0.25),))
    assert GroupGapSettings.of("vector_scaling", ["segment"], 500, 4, max_iter=40).params == (("max_iter", 40),)
    assert GroupGapSettings.of("temperature", ["segment"], 500, 4, max_iter=40).params == ()
    # alpha=None: the method's own default (the Groups page's slice recalibration)
    assert GroupGapSettings.of("pbr", ["slice"], 500, 4, alpha=None).params == ()
