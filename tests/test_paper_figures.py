"""scripts/paper_figures.py on tiny real data: the statistics equal scipy's, a resumed run fits only
what is missing and equals one full protocol run, and the plots step writes its files."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pbr_core.experiments import kl_vs_ece_gap, n_re_sweep
from pbr_core.predictions import Predictions
from pbr_core.recalibrators.base import REGISTRY
from recal_doubles import KLDouble

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("paper_figures", ROOT / "scripts" / "paper_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class KLTemperatureDouble(KLDouble):
    """TEST DOUBLE for PBR (see recal_doubles.KLDouble) with the GP methods' ``device`` parameter,
    which the script passes."""

    method = "test_double_figs_kl"

    def __init__(self, alpha: float = 0.5, device: str = "cpu") -> None:
        self.alpha, self.device = alpha, device


@pytest.fixture
def double(monkeypatch):
    monkeypatch.setitem(REGISTRY, KLTemperatureDouble.method, KLTemperatureDouble)
    return KLTemperatureDouble.method


@pytest.fixture(scope="module")
def c10(cifar10) -> Predictions:
    logits, labels = cifar10
    return Predictions.from_arrays(logits[:3000], labels[:3000])


def _counting_log(messages: list[str]):
    return messages.append


# ---------------------------------------------------------------------------- statistics
def test_statistics_equal_scipy_per_model_and_leave_out_failed_and_alpha_zero_fits(script):
    rng = np.random.default_rng(0)
    rows = []
    for model in ("a", "b"):
        for fold in range(4):
            for alpha in (0.0, 0.5, 1.0):
                kl = rng.gamma(2.0, 3.0)
                rows.append({"dataset": "d", "model": model, "fold": fold, "alpha": alpha, "n_re": 1000,
                             "kl": kl, "gap": 0.001 * kl + rng.normal(0, 0.01), "error": None})
    rows[3].update(kl=math.nan, gap=math.nan, error="RuntimeError: made up")  # a failed fit of model a
    table = pd.DataFrame(rows)

    got = script.kl_gap_statistics(table).set_index("model")
    got_no0 = script.kl_gap_statistics(table, exclude_alpha_zero=True).set_index("model")
    for model in ("a", "b"):
        ok = table[(table.model == model)].dropna(subset=["kl", "gap"])
        r, rp = stats.pearsonr(ok.kl, ok.gap)
        tau, tp = stats.kendalltau(ok.kl, ok.gap)
        assert got.loc[model, "fits"] == len(ok) == (11 if model == "a" else 12)
        assert got.loc[model, "pearson_r"] == pytest.approx(r, abs=1e-12)
        assert got.loc[model, "pearson_p"] == pytest.approx(rp, rel=1e-10)
        assert got.loc[model, "kendall_tau"] == pytest.approx(tau, abs=1e-12)
        assert got.loc[model, "kendall_p"] == pytest.approx(tp, rel=1e-10)
        pos = ok[ok.alpha > 0]
        assert got_no0.loc[model, "fits"] == len(pos)
        assert got_no0.loc[model, "kendall_tau"] == pytest.approx(stats.kendalltau(pos.kl, pos.gap)[0], abs=1e-12)

    md = script.kl_gap_summary_markdown(script.kl_gap_statistics(table), got_no0.reset_index())
    line_b = next(line for line in md.splitlines() if line.startswith("| d | b |"))
    assert f"{got.loc['b', 'pearson_r']:+.3f}" in line_b and "12 (4)" in line_b


# ---------------------------------------------------------------------------- resuming
def test_kl_gap_run_resumes_and_equals_one_protocol_run(script, double, c10, tmp_path):
    load = lambda dataset, model: c10  # noqa: E731
    kw = dict(n_re=200, seed=3, objective=double, device="cpu", out=tmp_path, load=load)
    first: list[str] = []
    path = script.run_kl_gap("kitti", ["m"], [0], [0.0, 0.5], log=first.append, **kw)
    assert len(first) == 2 and path == tmp_path / "kl_gap_kitti.csv"
    before = pd.read_csv(path)

    second: list[str] = []
    script.run_kl_gap("kitti", ["m"], [0, 1], [0.0, 0.5, 1.0], log=second.append, **kw)
    # Only what was missing: fold 0 alpha 1, fold 1 all three.
    assert len(second) == 4 and all("fold 0 alpha 0:" not in m and "fold 0 alpha 0.5:" not in m for m in second)
    table = pd.read_csv(path)
    assert len(table) == 6 and list(table.columns) == script.KL_COLUMNS
    # The rows written first are kept as they were (not refitted).
    assert before.set_index(["fold", "alpha"])["finished"].equals(
        table.set_index(["fold", "alpha"]).loc[before.set_index(["fold", "alpha"]).index, "finished"])
    assert (table["seed"] == 3).all() and (table["n_te"] == 200).all() and table["commit"].notna().all()

    # Fit by fit, the same numbers as one call of the protocol over both folds.
    full = kl_vs_ece_gap(c10, alphas=(0.0, 0.5, 1.0), objective=double, n_re=200, n_folds=2, seed=3).table
    merged = full.merge(table, on=["fold", "alpha"], suffixes=("_full", ""))
    assert len(merged) == 6
    for col in ("kl", "ece_re", "ece_te", "gap", "bound"):
        assert np.allclose(merged[col], merged[f"{col}_full"], rtol=0, atol=1e-12), col

    third: list[str] = []
    script.run_kl_gap("kitti", ["m"], [0, 1], [0.0, 0.5, 1.0], log=third.append, **kw)
    assert third == []  # everything done: nothing is fitted again


def test_n_re_run_resumes_keeps_the_test_set_fixed_and_equals_one_protocol_run(script, c10, tmp_path):
    load = lambda dataset, model: c10  # noqa: E731
    methods = ["uncalibrated", "temperature"]
    kw = dict(alpha=0.5, seed=1, device="cpu", out=tmp_path, load=load)
    first: list[str] = []
    path = script.run_n_re("cifar100", ["m"], [0], [20, 100, 500], methods, log=first.append, **kw)
    assert len(first) == 6
    second: list[str] = []
    script.run_n_re("cifar100", ["m"], [0, 1], [20, 100, 500], methods, log=second.append, **kw)
    assert len(second) == 6 and all(" fold 1 " in m for m in second)
    table = pd.read_csv(path)
    assert len(table) == 12 and (table["n_te"] == c10.n - 500).all()
    full = n_re_sweep(c10, methods, n_re_values=(20, 100, 500), n_folds=2, seed=1)
    merged = full.merge(table, on=["method", "fold", "n_re"], suffixes=("_full", ""))
    assert len(merged) == 12
    for col in ("ece", "accuracy", "nll", "brier"):
        assert np.allclose(merged[col], merged[f"{col}_full"], rtol=0, atol=1e-12), col
    # The uncalibrated test ECE of a fold does not move with n_re: the test set is the same.
    assert (table[table.method == "uncalibrated"].groupby("fold")["ece"].nunique() == 1).all()


def test_binary_figures_keep_the_papers_top_label_ece(script, double, tmp_path):
    """The library's binary ECE is the app's p(y=1) (pbr_core.metrics.DEFAULT_BINARY_TARGET); the
    script passes the paper's top label explicitly, so its KITTI figures do not change."""
    from pbr_core import load_predictions
    from pbr_core.metrics import DEFAULT_BINARY_TARGET

    assert DEFAULT_BINARY_TARGET == "positive"
    kitti = load_predictions(ROOT / "sample_data" / "kitti_xgboost.csv").subset(np.arange(0, 9090, 9))
    load = lambda dataset, model: kitti  # noqa: E731
    path = script.run_kl_gap("kitti", ["m"], [0], [0.5], n_re=300, seed=0, objective=double, device="cpu",
                             out=tmp_path, load=load, log=lambda m: None)
    row = pd.read_csv(path).iloc[0]
    top = kl_vs_ece_gap(kitti, alphas=(0.5,), objective=double, n_re=300, n_folds=1, binary_ece="top_label")
    pos = kl_vs_ece_gap(kitti, alphas=(0.5,), objective=double, n_re=300, n_folds=1)
    assert row["ece_te"] == pytest.approx(top.table["ece_te"].iloc[0], abs=1e-12)
    assert top.table["ece_te"].iloc[0] != pos.table["ece_te"].iloc[0]
    path = script.run_n_re("kitti", ["m"], [0], [100, 300], ["uncalibrated"], alpha=0.5, seed=0, device="cpu",
                           out=tmp_path, load=load, log=lambda m: None)
    table = pd.read_csv(path)
    paper = n_re_sweep(kitti, ["uncalibrated"], n_re_values=(100, 300), n_folds=1, binary_ece="top_label")
    assert np.allclose(table["ece"], paper["ece"], rtol=0, atol=1e-12)
    assert np.allclose(table["brier"], paper["brier"], rtol=0, atol=1e-12)  # the paper's two-class Brier


def test_a_failed_fit_is_kept_and_retried_only_on_request(script, c10, tmp_path):
    store = script.ResultStore(tmp_path / "x.csv", ["model", "fold", "error"], ("model", "fold"))
    store.add({"model": "m", "fold": 0, "error": "RuntimeError: made up"})
    store.add({"model": "m", "fold": 1, "error": None})
    assert ("m", 0) in script.ResultStore(tmp_path / "x.csv", store.columns, store.key)
    retry = script.ResultStore(tmp_path / "x.csv", store.columns, store.key, retry_failed=True)
    assert ("m", 0) not in retry and ("m", 1) in retry
    retry.add({"model": "m", "fold": 0, "error": None})  # the retried row replaces the failed one
    table = pd.read_csv(tmp_path / "x.csv")
    assert len(table) == 2 and table["error"].isna().all()


# ---------------------------------------------------------------------------- plots
def test_plots_write_figures_and_summaries_from_the_csvs(script, double, c10, tmp_path):
    load = lambda dataset, model: c10  # noqa: E731
    for model in ("m1", "m2"):
        script.run_kl_gap("cifar100", [model], [0, 1], [0.0, 0.5, 1.0], n_re=200, seed=0, objective=double,
                          device="cpu", out=tmp_path, load=load, log=lambda m: None)
    script.run_n_re("kitti", ["m1"], [0, 1], [100, 300], ["uncalibrated", "temperature"], alpha=0.5, seed=0,
                    device="cpu", out=tmp_path, load=load, log=lambda m: None)
    written = script.main(["--experiment", "plots", "--out", str(tmp_path)])
    names = {p.name for p in written}
    assert names == {"kl_gap_summary.csv", "kl_gap_summary.md", "kl_gap_cifar100.png", "n_re_kitti.png",
                     "n_re_summary.md"}
    for p in written:
        assert p.stat().st_size > 0
    assert (tmp_path / "kl_gap_cifar100.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = pd.read_csv(tmp_path / "kl_gap_summary.csv")
    assert len(summary) == 4 and set(summary["alpha_zero"]) == {"included", "excluded"}
    md = (tmp_path / "n_re_summary.md").read_text(encoding="utf-8")
    assert "| n_re | uncalibrated | temperature |" in md and "| 300 |" in md
