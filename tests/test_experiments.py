"""The paper's experiment protocols (pbr_core.experiments) on small slices of REAL predictions.

Real inputs: the bundled CIFAR-10 ResNet-110 and CIFAR-100 DenseNet-121 test logits, and a binary
one-vs-rest task derived from the CIFAR-10 outputs. Sizes (n_re 200-500, 2-3 folds) keep the file fast.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import pbr_core
from pbr_core.bounds import corollary1_bound, optimal_n_bins
from pbr_core.experiments import (
    COMPARE_COLUMNS,
    KL_GAP_COLUMNS,
    Cancelled,
    KLGapResult,
    available_methods,
    best_mask,
    compare,
    evaluation_metrics,
    fit_and_test,
    fold_permutation,
    kl_vs_ece_gap,
    n_re_sweep,
    split_indices,
    summarize,
    summary_table,
    tqdm_progress,
)
from pbr_core.predictions import Predictions, PredictionsError
from pbr_core.recalibrators import get_recalibrator
from pbr_core.recalibrators.base import REGISTRY, Recalibrator
from recal_doubles import KLDouble


def _require(*methods: str) -> None:
    missing = [m for m in methods if m not in available_methods()]
    if missing:
        pytest.skip(f"recalibrators not registered yet: {missing}")


# ---------------------------------------------------------------------------- test doubles
# TEST DOUBLES, registered only for the duration of the tests that use them (monkeypatch), so they
# never leak into the shared recalibrator suite that walks REGISTRY.


class NoKLDouble(KLDouble):
    """TEST DOUBLE that takes alpha but exposes no KL after fitting."""

    method = "test_double_no_kl"

    def _fit(self, preds: Predictions) -> None:
        self.temperature_ = 1.0 + self.alpha


class RecordingDouble(Recalibrator):
    """TEST DOUBLE that records the labels and scores of every set it is fitted on (identity map)."""

    method = "test_double_record_a"
    seen: list[tuple[str, np.ndarray]] = []

    def __init__(self) -> None:
        pass

    def _fit(self, preds: Predictions) -> None:
        type(self).seen.append((self.method, preds.scores.copy()))

    def _predict_proba(self, preds: Predictions) -> np.ndarray:
        return preds.probs

    def _get_state(self) -> dict[str, Any]:
        return {}

    def _set_state(self, state: dict[str, Any]) -> None:
        pass


class RecordingDoubleB(RecordingDouble):
    method = "test_double_record_b"


class FailingDouble(RecordingDouble):
    """TEST DOUBLE whose fit always fails."""

    method = "test_double_fail"

    def _fit(self, preds: Predictions) -> None:
        raise FloatingPointError("made-up divergence")


class PredictFailingDouble(RecordingDouble):
    """TEST DOUBLE that fits but cannot predict."""

    method = "test_double_predict_fail"

    def _predict_proba(self, preds: Predictions) -> np.ndarray:
        raise MemoryError("made-up allocation failure")


class CancellingDouble(RecordingDouble):
    """TEST DOUBLE that stops the run from inside its fit, as a cancelling progress factory would."""

    method = "test_double_cancel"

    def _fit(self, preds: Predictions) -> None:
        raise Cancelled()


@pytest.fixture
def doubles(monkeypatch):
    for cls in (KLDouble, NoKLDouble, RecordingDouble, RecordingDoubleB, FailingDouble, PredictFailingDouble,
                CancellingDouble):
        monkeypatch.setitem(REGISTRY, cls.method, cls)
    RecordingDouble.seen = []
    return RecordingDouble.seen


# ---------------------------------------------------------------------------- data
@pytest.fixture(scope="module")
def c100(cifar100) -> Predictions:
    """Real CIFAR-100 DenseNet-121 logits (over-confident)."""
    return Predictions.from_arrays(*cifar100)


@pytest.fixture(scope="module")
def c10(cifar10) -> Predictions:
    """Real CIFAR-10 ResNet-110 logits."""
    return Predictions.from_arrays(*cifar10)


@pytest.fixture(scope="module")
def binary(c10: Predictions) -> Predictions:
    """Real binary task: "is it a cat?" (CIFAR-10 class 3), with the ResNet's p(cat) as p(y=1)."""
    return Predictions.from_arrays(c10.probs[:, 3], (c10.labels == 3).astype(np.int64))


N_RE, N_FOLDS, SEED = 300, 3, 7


@pytest.fixture(scope="module")
def table100(c100: Predictions) -> pd.DataFrame:
    return compare(c100, ["uncalibrated", "temperature"], n_re=N_RE, n_folds=N_FOLDS, seed=SEED)


# ---------------------------------------------------------------------------- splits
def test_split_is_reproducible_disjoint_and_differs_across_folds():
    re0, te0 = split_indices(1000, 200, fold=0, seed=3)
    again = split_indices(1000, 200, fold=0, seed=3)
    assert np.array_equal(re0, again[0]) and np.array_equal(te0, again[1])
    assert len(re0) == 200 and len(te0) == 800
    assert np.array_equal(np.sort(np.concatenate([re0, te0])), np.arange(1000))
    re1, _ = split_indices(1000, 200, fold=1, seed=3)
    assert not np.array_equal(re0, re1)
    # seed + fold does not alias: (seed=4, fold=0) is not (seed=3, fold=1).
    assert not np.array_equal(split_indices(1000, 200, fold=0, seed=4)[0], re1)
    # fold f does not depend on how many folds are run: it is SeedSequence(seed).spawn(F)[f].
    child = np.random.SeedSequence(3).spawn(5)[1]
    assert np.array_equal(fold_permutation(1000, 3, 1), np.random.default_rng(child).permutation(1000))


def test_every_method_is_fitted_on_the_same_rows_per_fold(c10, doubles):
    compare(c10, ["test_double_record_a", "test_double_record_b"], n_re=200, n_folds=3, seed=SEED)
    assert [m for m, _ in doubles] == ["test_double_record_a", "test_double_record_b"] * 3
    scores = [s for _, s in doubles]
    for f in range(3):
        a, b = scores[2 * f], scores[2 * f + 1]
        assert np.array_equal(a, b)
        re_idx, _ = split_indices(c10.n, 200, fold=f, seed=SEED)
        assert np.array_equal(a, c10.logits[re_idx])
    assert not np.array_equal(scores[0], scores[2])


# ---------------------------------------------------------------------------- compare
def test_compare_table_shape_and_sizes(table100, c100):
    assert list(table100.columns) == list(COMPARE_COLUMNS)
    assert len(table100) == 2 * N_FOLDS
    assert set(table100["fold"]) == set(range(N_FOLDS))
    assert (table100["n_re"] == N_RE).all()
    assert (table100["n_te"] == c100.n - N_RE).all()
    assert (table100["n_bins"] == optimal_n_bins(c100.n - N_RE)).all()
    assert optimal_n_bins(c100.n - N_RE) == math.floor((c100.n - N_RE) ** (1 / 3)) == 21
    assert table100["error"].isna().all() and table100["kl"].isna().all()
    assert (table100["fit_seconds"] >= 0).all()


def test_compare_ece_equals_an_independent_refit(table100, c100):
    fold = 1
    re_idx, te_idx = split_indices(c100.n, N_RE, fold=fold, seed=SEED)
    r = REGISTRY["temperature"]().fit(c100.subset(re_idx))
    p = r.predict_proba(c100.subset(te_idx))
    row = table100[(table100.method == "temperature") & (table100.fold == fold)].iloc[0]
    n_bins = math.floor(len(te_idx) ** (1 / 3))
    assert row["ece"] == pytest.approx(pbr_core.ece(p, c100.labels[te_idx], n_bins=n_bins), abs=1e-12)
    assert row["nll"] == pytest.approx(pbr_core.nll(p, c100.labels[te_idx]), abs=1e-12)


def fit_on_fold(preds, method, n_re, fold, seed, n_te=None):
    """(recalibrator, test set, test probabilities) of ``fit_and_test`` with a method by name."""
    h = fit_and_test(preds, get_recalibrator(method), n_re, fold=fold, seed=seed, n_te=n_te)
    return h.recalibrator, h.test_set, h.test_probs


def test_fit_and_test_reproduces_the_table_row(table100, c100):
    r, test_set, probs = fit_on_fold(c100, "temperature", n_re=N_RE, fold=2, seed=SEED)
    row = table100[(table100.method == "temperature") & (table100.fold == 2)].iloc[0]
    assert test_set.n == row["n_te"] and probs.shape == (test_set.n, 100)
    assert row["ece"] == pytest.approx(pbr_core.ece(probs, test_set.labels), abs=1e-12)


def test_uncalibrated_rows_are_the_raw_metrics_on_the_test_rows(table100, c100):
    for fold in range(N_FOLDS):
        _, te = split_indices(c100.n, N_RE, fold=fold, seed=SEED)
        row = table100[(table100.method == "uncalibrated") & (table100.fold == fold)].iloc[0]
        p, y = c100.probs[te], c100.labels[te]
        assert row["ece"] == pytest.approx(pbr_core.ece(p, y), abs=1e-12)
        assert row["accuracy"] == pytest.approx(pbr_core.accuracy(p, y), abs=1e-12)
        assert row["nll"] == pytest.approx(pbr_core.nll(p, y), abs=1e-12)
        assert row["brier"] == pytest.approx(pbr_core.brier_score(p, y), abs=1e-12)


def test_temperature_scaling_lowers_ece_of_the_overconfident_cifar100_model(table100):
    means = table100.groupby("method")["ece"].mean()
    assert means["temperature"] < means["uncalibrated"]


def test_compare_is_reproducible_under_the_seed(table100, c100):
    again = compare(c100, ["uncalibrated"], n_re=N_RE, n_folds=N_FOLDS, seed=SEED)
    mine = table100[table100.method == "uncalibrated"].reset_index(drop=True)
    assert np.array_equal(again["ece"].to_numpy(), mine["ece"].to_numpy())
    other = compare(c100, ["uncalibrated"], n_re=N_RE, n_folds=N_FOLDS, seed=SEED + 1)
    assert not np.array_equal(other["ece"].to_numpy(), mine["ece"].to_numpy())


def test_compare_n_te_uses_the_last_rows_of_each_fold_permutation(c100):
    table = compare(c100, ["uncalibrated"], n_re=N_RE, n_folds=2, seed=SEED, n_te=2000)
    assert (table["n_te"] == 2000).all() and (table["n_bins"] == 12).all()
    for fold in range(2):
        _, te = split_indices(c100.n, N_RE, fold=fold, seed=SEED, n_te=2000)
        assert np.array_equal(te, np.sort(fold_permutation(c100.n, SEED, fold)[-2000:]))
        row = table[table.fold == fold].iloc[0]
        assert row["ece"] == pytest.approx(pbr_core.ece(c100.probs[te], c100.labels[te], n_bins=12), abs=1e-12)
    _, te_set, probs = fit_on_fold(c100, "uncalibrated", n_re=N_RE, fold=1, seed=SEED, n_te=2000)
    assert te_set.n == 2000 and pbr_core.ece(probs, te_set.labels) == pytest.approx(table["ece"].iloc[1], abs=1e-12)
    with pytest.raises(ValueError, match="need 10300 rows"):
        compare(c100, ["uncalibrated"], n_re=N_RE, n_te=10000)


def test_compare_hands_each_folds_test_predictions_to_on_predictions(c100):
    seen = []
    table = compare(c100, ["uncalibrated", "temperature"], n_re=N_RE, n_folds=2, seed=SEED,
                    on_predictions=lambda fold, method, test_set, probs: seen.append((fold, method, test_set, probs)))
    assert [(f, m) for f, m, _, _ in seen] == [(0, "uncalibrated"), (0, "temperature"), (1, "uncalibrated"),
                                               (1, "temperature")]
    for (fold, method, test_set, probs), row in zip(seen, table.itertuples()):
        _, te = split_indices(c100.n, N_RE, fold=fold, seed=SEED)
        assert np.array_equal(test_set.labels, c100.labels[te]) and probs.shape == (len(te), 100)
        assert row.ece == pytest.approx(pbr_core.ece(probs, test_set.labels), abs=1e-12)
    _, _, refit = fit_on_fold(c100, "temperature", n_re=N_RE, fold=1, seed=SEED)
    np.testing.assert_array_equal(seen[3][3], refit)


GP_QUICK = {"max_iter": 40, "n_mc": 10, "n_predict_samples": 20, "device": "cpu"}


@pytest.mark.slow
def test_app_variants_share_the_base_fit_and_equal_separate_fits(c10):
    """gp/gp_app and pbr/pbr_app: one GP fit per pair, the same numbers as fitting each alone."""
    _require("gp", "gp_app", "pbr", "pbr_app")
    methods = ["gp", "gp_app", "pbr", "pbr_app"]
    params = {m: GP_QUICK for m in methods}
    small = c10.subset(np.arange(1500))
    shared = compare(small, methods, n_re=200, n_folds=1, seed=SEED, method_params=params)
    alone = compare(small, methods, n_re=200, n_folds=1, seed=SEED, method_params=params, share_fits=False)
    assert shared["fit_shared_with"].fillna("-").tolist() == ["-", "gp", "-", "pbr"]
    assert alone["fit_shared_with"].isna().all()
    for col in ("ece", "accuracy", "nll", "brier", "kl"):
        assert np.allclose(shared[col], alone[col], rtol=0, atol=1e-12), col
    # the app row reports the cost of the fit it reused
    assert shared["fit_seconds"].iloc[1] == shared["fit_seconds"].iloc[0]
    # mean approximation and J draws do differ in prediction, so the rows are not copies
    assert shared["nll"].iloc[0] != shared["nll"].iloc[1]


def test_at_prior_column_is_the_fits_own_record(c10, monkeypatch):
    """``at_prior``: None for methods without a prior, the GP fit's own record otherwise. A fit at the
    prior is forced by raising the training code's threshold (as tests/gp/test_training.py does):
    then every GP counts as "at the prior", no restart escapes it, and its stop reason says so."""
    _require("pbr")
    import pbr_core.gp.training as training
    from pbr_core.experiments import ended_at_prior

    small = c10.subset(np.arange(600))
    quick = {"max_iter": 6, "n_mc": 5, "n_predict_samples": 5, "device": "cpu"}
    plain = compare(small, ["temperature", "pbr"], n_re=100, n_folds=1, seed=SEED, method_params={"pbr": quick})
    assert plain["at_prior"].tolist()[0] is None and plain["at_prior"].tolist()[1] is False
    monkeypatch.setattr(training, "PRIOR_SHIFT", 1e9)
    forced = compare(small, ["temperature", "pbr"], n_re=100, n_folds=1, seed=SEED, method_params={"pbr": quick})
    assert forced["at_prior"].tolist() == [None, True]
    # The column adds information and changes no number of the other columns' methods.
    pd.testing.assert_frame_equal(plain.iloc[:1].drop(columns=["fit_seconds", "predict_seconds"]),
                                  forced.iloc[:1].drop(columns=["fit_seconds", "predict_seconds"]))
    # ended_at_prior reads a recalibrator, a fit report, or a report carrying an explicit flag.
    assert ended_at_prior({"stop_reason": "tolerance (ended at the prior; restarts from smaller alpha did not "
                                          "do better)"}) is True
    assert ended_at_prior({"stop_reason": "tolerance (restarted: the first fit ended at the prior, objective "
                                          ".31; from an alpha = 0.25 fit it reached .30)"}) is False
    assert ended_at_prior({"stop_reason": "x", "ended_at_prior": True}) is True
    assert ended_at_prior(object()) is None and ended_at_prior({}) is None


def test_ended_at_prior_reads_the_fits_flag_before_its_stop_reason():
    """The training code's flag is the one definition; the stop reason's note only reads reports saved
    before the flag existed. A restart can leave a fit at the prior that the note says moved away
    (tests/gp/test_training.py::test_ended_at_prior_is_decided_on_the_final_model)."""
    from pbr_core.experiments import ended_at_prior

    restarted = "reached max_iter=40 (restarted: the first fit ended at the prior, objective 0.0691111; ...)"
    assert ended_at_prior({"stop_reason": restarted}) is False                            # old report
    assert ended_at_prior({"stop_reason": restarted, "ended_at_prior": True}) is True
    assert ended_at_prior({"stop_reason": "x (ended at the prior; restarts ...)", "ended_at_prior": False}) is False
    assert ended_at_prior({"stop_reason": "x", "ended_at_prior": np.True_}) is True


def test_binary_methods_and_binary_ece(binary):
    table = compare(binary, ["uncalibrated", "platt", "isotonic"], n_re=500, n_folds=2, seed=SEED)
    assert table["error"].isna().all() and table["ece"].notna().all()
    _, te = split_indices(binary.n, 500, fold=0, seed=SEED)
    row = table[(table.method == "uncalibrated") & (table.fold == 0)].iloc[0]
    # Binary data: by default the app's one binary ECE, of p(y=1) (Appendix A), with the Brier score
    # and NLL of p(y=1) against y (scikit-learn's brier_score_loss / log_loss).
    from sklearn.metrics import brier_score_loss, log_loss

    from pbr_core.experiments import DEFAULT_BINARY_ECE

    assert DEFAULT_BINARY_ECE == pbr_core.metrics.DEFAULT_BINARY_TARGET == "positive"
    p1, y = binary.p_positive[te], binary.labels[te]
    assert row["ece"] == pytest.approx(pbr_core.ece(p1, y), abs=1e-12)
    assert row["brier"] == pytest.approx(brier_score_loss(y, p1), abs=1e-12)
    assert row["nll"] == pytest.approx(log_loss(y, p1), rel=1e-10)
    # The paper's tables (KITTI, after Wenger et al.): the top-label ECE and the two-class Brier score.
    top = compare(binary, ["uncalibrated"], n_re=500, n_folds=1, seed=SEED, binary_ece="top_label")
    assert top["ece"].iloc[0] == pytest.approx(pbr_core.ece(binary.probs[te], y, binary_target="top_label"), abs=1e-12)
    assert top["ece"].iloc[0] != pytest.approx(row["ece"], abs=1e-6)  # the two definitions differ here
    assert top["brier"].iloc[0] == pbr_core.brier_score(binary.probs[te], y)  # bit for bit, as before
    assert top["nll"].iloc[0] == pbr_core.nll(binary.probs[te], y)
    metrics = evaluation_metrics(binary.probs[te], y, "binary")
    assert metrics["ece"] == pytest.approx(row["ece"], abs=1e-12)


# ---------------------------------------------------------------------------- summaries
def test_summarize_equals_pandas_groupby(table100):
    s = summarize(table100)
    g = table100.groupby("method")
    for method in ("uncalibrated", "temperature"):
        for metric in ("ece", "accuracy", "nll", "brier", "fit_seconds"):
            r = s[(s.method == method) & (s.metric == metric)].iloc[0]
            assert r["mean"] == pytest.approx(g[metric].mean()[method], rel=1e-12)
            assert r["std"] == pytest.approx(g[metric].std()[method], rel=1e-12)
            assert r["n"] == N_FOLDS
    assert "kl" not in set(s["metric"])  # no method exposes a KL here


def test_summary_table_and_best_per_column(table100):
    s = summarize(table100)
    disp = summary_table(s, precision=3)
    assert list(disp.index) == ["uncalibrated", "temperature"]
    m, sd = s[(s.method == "temperature") & (s.metric == "ece")][["mean", "std"]].iloc[0]
    assert disp.loc["temperature", "ece"] == f"{m:.3f} ± {sd:.3f}"
    best = best_mask(s)
    assert best.shape == disp.shape
    assert best.loc["temperature", "ece"] and not best.loc["uncalibrated", "ece"]
    # Temperature scaling never changes the argmax: both are best in accuracy (a tie).
    assert best["accuracy"].all()
    # A per-fold table is accepted directly.
    assert summary_table(table100, precision=3).equals(disp)


def test_summarize_flags_best_for_higher_is_better_metric():
    t = pd.DataFrame({"method": ["a", "a", "b", "b"], "fold": [0, 1, 0, 1],
                      "ece": [0.1, 0.3, 0.2, 0.1], "accuracy": [0.5, 0.7, 0.8, 0.8]})
    s = summarize(t).set_index(["method", "metric"])
    assert s.loc[("b", "ece"), "best"] and not s.loc[("a", "ece"), "best"]
    assert s.loc[("b", "accuracy"), "best"] and not s.loc[("a", "accuracy"), "best"]


# ---------------------------------------------------------------------------- progress and cancel
def test_progress_is_reported_after_each_fit_and_cancel_keeps_partial_rows(c100):
    calls: list[tuple[int, int, str]] = []
    k = 3
    with pytest.raises(Cancelled) as info:
        compare(c100, ["uncalibrated", "temperature"], n_re=200, n_folds=3, seed=SEED,
                progress=lambda d, t, m: calls.append((d, t, m)), cancel=lambda: len(calls) >= k)
    assert [c[:2] for c in calls] == [(1, 6), (2, 6), (3, 6)]
    assert "fold 1/3" in calls[0][2] and "uncalibrated" in calls[0][2]
    partial = info.value.partial
    assert list(partial.columns) == list(COMPARE_COLUMNS)
    assert len(partial) == k and info.value.done == k and info.value.total == 6
    assert list(zip(partial.method, partial.fold)) == [("uncalibrated", 0), ("temperature", 0), ("uncalibrated", 1)]
    full = compare(c100, ["uncalibrated", "temperature"], n_re=200, n_folds=3, seed=SEED)
    pd.testing.assert_frame_equal(partial.drop(columns=["fit_seconds", "predict_seconds"]),
                                  full.iloc[:k].drop(columns=["fit_seconds", "predict_seconds"]))


def test_cancel_before_anything_gives_an_empty_table(c10, doubles):
    with pytest.raises(Cancelled) as info:
        compare(c10, ["test_double_record_a"], n_re=100, n_folds=2, cancel=lambda: True)
    assert info.value.partial.empty and list(info.value.partial.columns) == list(COMPARE_COLUMNS)
    assert doubles == []


def test_cancelled_raised_inside_a_fit_carries_the_partial_table(c10, doubles):
    with pytest.raises(Cancelled) as info:
        compare(c10, ["test_double_record_a", "test_double_cancel"], n_re=100, n_folds=2, on_error="warn")
    assert list(info.value.partial.method) == ["test_double_record_a"]
    assert (info.value.done, info.value.total) == (1, 4)


def test_tqdm_progress_drives_a_bar():
    from tqdm import tqdm

    with tqdm(disable=True) as bar:
        report = tqdm_progress(bar)
        report(2, 5, "temperature, fold 1/3")
        assert (bar.n, bar.total) == (2, 5)
        assert bar.desc == "temperature, fold 1/3"


# ---------------------------------------------------------------------------- validation
def test_unknown_method_lists_the_available_ones(c10):
    with pytest.raises(ValueError, match=r"Unknown recalibration method 'tempreature'.*Available methods:") as info:
        compare(c10, ["tempreature"], n_re=100, n_folds=1)
    for name in available_methods():
        assert name in str(info.value)


def test_n_re_must_leave_a_test_set(c10, doubles):
    with pytest.raises(ValueError, match="smaller than the number of rows"):
        compare(c10, ["test_double_record_a"], n_re=c10.n, n_folds=1)
    with pytest.raises(ValueError, match="n_re"):
        compare(c10, ["test_double_record_a"], n_re=1, n_folds=1)
    with pytest.raises(ValueError, match="n_folds"):
        compare(c10, ["test_double_record_a"], n_re=100, n_folds=0)


def test_bad_method_params_and_duplicates(c10, doubles):
    with pytest.raises(ValueError, match=r"Invalid parameter\(s\) \['alhpa'\] for 'test_double_kl'"):
        compare(c10, ["test_double_kl"], n_re=100, n_folds=1, method_params={"test_double_kl": {"alhpa": 1}})
    with pytest.raises(ValueError, match="not in `methods`"):
        compare(c10, ["test_double_kl"], n_re=100, n_folds=1, method_params={"other": {}})
    with pytest.raises(ValueError, match="Method 'test_double_kl': Expected argument `alpha` >= 0"):
        compare(c10, ["test_double_kl"], n_re=100, n_folds=1, method_params={"test_double_kl": {"alpha": -1}})
    assert doubles == []  # nothing was fitted before the bad value was found
    with pytest.raises(ValueError, match="more than once"):
        compare(c10, ["test_double_kl", "test_double_kl"], n_re=100, n_folds=1)


def test_top_label_only_data_is_refused(c10, doubles):
    top = Predictions.from_top_label(c10.confidence, c10.predicted, c10.labels)
    with pytest.raises(PredictionsError, match="Top-label-only"):
        compare(top, ["test_double_record_a"], n_re=100, n_folds=1)


def test_failing_fit_raises_or_is_recorded(c10, doubles):
    with pytest.raises(RuntimeError, match="test_double_fail, fold 1/2 failed: FloatingPointError"):
        compare(c10, ["test_double_fail"], n_re=100, n_folds=2)
    with pytest.warns(RuntimeWarning, match="made-up divergence"):
        t = compare(c10, ["test_double_record_a", "test_double_fail"], n_re=100, n_folds=2, on_error="warn")
    bad = t[t.method == "test_double_fail"]
    assert bad["ece"].isna().all() and bad["error"].str.contains("FloatingPointError").all()
    assert t[t.method == "test_double_record_a"]["ece"].notna().all()


def test_failing_prediction_raises_or_is_recorded(c10, doubles):
    with pytest.raises(RuntimeError, match="fold 1/1: prediction on the test set failed: MemoryError: made-up"):
        compare(c10, ["test_double_predict_fail"], n_re=100, n_folds=1)
    with pytest.warns(RuntimeWarning, match="prediction on the test set failed .*its metrics are NaN"):
        t = compare(c10, ["test_double_predict_fail"], n_re=100, n_folds=1, on_error="warn")
    row = t.iloc[0]
    assert row["error"] == "MemoryError: made-up allocation failure" and math.isnan(row["ece"])
    assert math.isnan(row["predict_seconds"]) and row["fit_seconds"] >= 0


# ---------------------------------------------------------------------------- KL vs ECE gap
def _check_kl_gap_result(res: KLGapResult, preds: Predictions, alphas, n_re: int, n_folds: int) -> None:
    t = res.table
    assert list(t.columns) == list(KL_GAP_COLUMNS)
    assert len(t) == len(alphas) * n_folds
    assert (t["n_bins"] == math.floor(n_re ** (1 / 3))).all()
    assert np.allclose(t["gap"], (t["ece_te"] - t["ece_re"]).abs(), rtol=0, atol=1e-15)
    r = stats.pearsonr(t["kl"], t["gap"])
    tau = stats.kendalltau(t["kl"], t["gap"])
    assert res.pearson_r == pytest.approx(r[0], abs=1e-12) and res.pearson_p == pytest.approx(r[1], rel=1e-9)
    assert res.kendall_tau == pytest.approx(tau[0], abs=1e-12) and res.kendall_p == pytest.approx(tau[1], rel=1e-9)
    for _, row in t.iterrows():
        assert row["bound"] == pytest.approx(corollary1_bound(n_re, row["n_bins"], max(row["kl"], 0.0)), rel=1e-12)
    corr = res.correlations()
    assert corr.loc["pearson", "statistic"] == res.pearson_r and corr.loc["kendall", "n"] == len(t)


def test_kl_vs_ece_gap_machinery_with_a_test_double(c10, doubles):
    alphas = (0.0, 0.5, 1.0)
    res = kl_vs_ece_gap(c10, alphas=alphas, objective="test_double_kl", n_re=250, n_folds=2, seed=SEED)
    _check_kl_gap_result(res, c10, alphas, 250, 2)
    # ECE on the recalibration set and on a disjoint test subset of the same size, by hand.
    t = res.table
    re_idx, te_idx = split_indices(c10.n, 250, fold=1, seed=SEED, n_te=250)
    assert len(np.intersect1d(re_idx, te_idx)) == 0
    row = t[(t.alpha == 0.5) & (t.fold == 1)].iloc[0]
    r = KLDouble(alpha=0.5).fit(c10.subset(re_idx))
    assert row["ece_re"] == pytest.approx(pbr_core.ece(r.predict_proba(c10.subset(re_idx)), c10.labels[re_idx], n_bins=6), abs=1e-12)
    assert row["ece_te"] == pytest.approx(pbr_core.ece(r.predict_proba(c10.subset(te_idx)), c10.labels[te_idx], n_bins=6), abs=1e-12)
    assert row["kl"] == pytest.approx(r.kl_)


@pytest.mark.slow
def test_kl_vs_ece_gap_with_real_pbr_fits(c10):
    """One small real PBR case (3 short fits, about 3 s each on an idle core)."""
    _require("pbr")
    alphas = (0.0, 0.5, 1.0)
    res = kl_vs_ece_gap(c10, alphas=alphas, objective="pbr", n_re=150, n_folds=1, seed=SEED,
                        max_iter=30, n_mc=10, n_predict_samples=10, device="cpu")
    _check_kl_gap_result(res, c10, alphas, 150, 1)
    t = res.table
    assert t["error"].isna().all()
    assert np.isfinite(t["kl"]).all() and (t["kl"] > -1e-9).all()
    assert res.objective == "pbr" and res.n_bins == 5


def test_kl_vs_ece_gap_validation_and_cancel(c10, doubles):
    with pytest.raises(ValueError, match=r"2 \* n_re <= n"):
        kl_vs_ece_gap(c10, objective="test_double_kl", n_re=6000, n_folds=1)
    with pytest.raises(ValueError, match="Unknown recalibration method 'nope'"):
        kl_vs_ece_gap(c10, objective="nope", n_re=100, n_folds=1)
    with pytest.raises(ValueError, match="no `kl_`"):
        kl_vs_ece_gap(c10, objective="test_double_no_kl", n_re=100, n_folds=1)
    done: list[int] = []
    with pytest.raises(Cancelled) as info:
        kl_vs_ece_gap(c10, alphas=(0.0, 0.5, 1.0), objective="test_double_kl", n_re=100, n_folds=2,
                      progress=lambda d, t, m: done.append(d), cancel=lambda: len(done) >= 4)
    assert len(info.value.partial) == 4 and list(info.value.partial.columns) == list(KL_GAP_COLUMNS)
    partial = KLGapResult.from_table(info.value.partial, objective="test_double_kl")
    assert partial.pearson_r == pytest.approx(stats.pearsonr(info.value.partial.kl, info.value.partial.gap)[0])


def test_kl_vs_ece_gap_runs_chosen_folds_with_the_rows_of_a_full_run(c10, doubles):
    alphas = (0.0, 1.0)
    full = kl_vs_ece_gap(c10, alphas=alphas, objective="test_double_kl", n_re=200, n_folds=3, seed=SEED).table
    with pytest.warns(RuntimeWarning, match="at least 3 fits"):
        part = kl_vs_ece_gap(c10, alphas=alphas, objective="test_double_kl", n_re=200, folds=[2], seed=SEED).table
    assert list(part["fold"]) == [2, 2]
    pd.testing.assert_frame_equal(part.drop(columns="fit_seconds"),
                                  full[full.fold == 2].drop(columns="fit_seconds").reset_index(drop=True))
    for bad, match in (([], "at least one fold"), ([1, 1], "more than once"), ([-1], "at least 0")):
        with pytest.raises(ValueError, match=match):
            kl_vs_ece_gap(c10, alphas=alphas, objective="test_double_kl", n_re=200, folds=bad)


# ---------------------------------------------------------------------------- n_re sweep
def test_n_re_sweep_keeps_the_test_set_fixed(c100):
    values = (50, 200, 600)
    with pytest.warns(UserWarning, match=r"Skipping n_re values \[20000\]"):
        t = n_re_sweep(c100, ["uncalibrated", "temperature"], n_re_values=values + (20000,), n_folds=2, seed=SEED)
    assert len(t) == 2 * len(values) * 2 and sorted(set(t.n_re)) == list(values)
    assert (t["n_te"] == c100.n - 600).all()
    # The same test rows at every n_re: the uncalibrated metrics do not change with n_re in a fold.
    unc = t[t.method == "uncalibrated"]
    assert (unc.groupby("fold")["ece"].nunique() == 1).all()
    # At the largest n_re the split is compare's split of the same fold and seed.
    cmp_ = compare(c100, ["temperature"], n_re=600, n_folds=2, seed=SEED)
    top = t[(t.method == "temperature") & (t.n_re == 600)].reset_index(drop=True)
    assert np.allclose(top["ece"], cmp_["ece"], rtol=0, atol=1e-12)
    s = summarize(t)
    assert {"method", "n_re"} <= set(s.columns)
    assert s.groupby(["n_re", "metric"])["best"].any().all()


def test_n_re_sweep_runs_chosen_folds_with_the_rows_of_a_full_run(c100):
    full = n_re_sweep(c100, ["uncalibrated", "temperature"], n_re_values=(50, 300), n_folds=2, seed=SEED)
    part = n_re_sweep(c100, ["temperature"], n_re_values=(300,), n_te=c100.n - 300, folds=[1], seed=SEED)
    want = full[(full.fold == 1) & (full.n_re == 300) & (full.method == "temperature")].reset_index(drop=True)
    cols = ["method", "fold", "n_re", "n_te", "n_bins", "ece", "accuracy", "nll", "brier"]
    pd.testing.assert_frame_equal(part[cols], want[cols])


def test_n_re_sweep_validation(c10, doubles):
    with pytest.raises(ValueError, match="fewer than 144 of the n=10000 rows to test on"):
        n_re_sweep(c10, ["test_double_record_a"], n_re_values=(c10.n, 2 * c10.n), n_folds=1)
    with pytest.raises(ValueError, match="n_te"):
        n_re_sweep(c10, ["test_double_record_a"], n_re_values=(10,), n_te=c10.n, n_folds=1)
    t = n_re_sweep(c10, ["test_double_record_a"], n_re_values=(10, 100), n_te=5000, n_folds=1)
    assert (t["n_te"] == 5000).all() and list(t["n_re"]) == [10, 100]


def test_fold_label_names_explicit_folds_by_their_index() -> None:
    from pbr_core.experiments._protocol import fold_label

    assert fold_label(1, [0, 1, 2]) == "fold 2/3"  # the usual run: as before
    assert fold_label(8, [8]) == "fold 9 (1 of 1 in this run)"  # not "fold 9/1"
    assert fold_label(8, [6, 8]) == "fold 9 (2 of 2 in this run)"


# ---------------------------------------------------------------------------- the smallest test set
def test_min_test_rows_is_where_theorem1_first_says_something():
    """MIN_TEST_ROWS (144) is the smallest n_te at which Theorem 1's bound on |TCE - ECE| at
    B = floor(n_te^(1/3)), L = 1, eps = 0.05 falls below 1 (the ECE's whole range), and it stays below
    for every larger n_te (checked up to 10^6)."""
    from pbr_core.bounds import BOUND_EPS, BOUND_LIPSCHITZ
    from pbr_core.experiments import MIN_TEST_ROWS, small_test_set_problem

    n = np.arange(2, 1_000_001)
    B = np.floor(np.cbrt(n) + 1e-9).astype(int)
    B -= B**3 > n  # exact floor of the cube root, as optimal_n_bins
    assert all(B[k - 2] == optimal_n_bins(int(k)) for k in (7, 8, 26, 27, 143, 144, 999, 1000, 10**6))
    bound = pbr_core.theorem1_bound(n, B, lipschitz=BOUND_LIPSCHITZ, eps=BOUND_EPS)
    says_nothing = n[bound >= 1]
    assert says_nothing.max() + 1 == MIN_TEST_ROWS == 144
    assert small_test_set_problem(144) is None and small_test_set_problem(10**6) is None
    one = small_test_set_problem(1)
    assert "1 row is too small to say anything" in one and "7.432" in one and "at least 144 test rows" in one
    assert "1.001" in small_test_set_problem(143)


def test_default_n_re_is_the_papers_1000_only_on_a_large_enough_file():
    from pbr_core.experiments import default_n_re, max_n_re

    assert [default_n_re(n) for n in (504, 1999, 2000, 9090, 10**6)] == [252, 999, 1000, 1000, 1000]
    assert max_n_re(504) == 360 and max_n_re(100) < 2


def test_protocols_warn_on_a_test_set_too_small_to_say_anything(c10, doubles):
    """The library warns and goes on (the front ends refuse); a large file's numbers are unchanged."""
    small = c10.subset(np.arange(504))
    with pytest.warns(UserWarning, match="1 row is too small to say anything"):
        compare(small, ["test_double_record_a"], n_re=503, n_folds=1)
    with pytest.warns(UserWarning, match="100 rows is too small"):
        fit_and_test(small, get_recalibrator("temperature"), 404)
    with pytest.warns(UserWarning, match="100 rows is too small"):
        kl_vs_ece_gap(small, alphas=(0.5,), objective="test_double_kl", n_re=100, n_folds=1)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a test set of 252 rows: no warning
        compare(small, ["test_double_record_a"], n_re=252, n_folds=1)
    # The sweep's fixed test set leaves out the n_re values that would leave fewer than 144 test rows.
    with pytest.warns(UserWarning, match=r"Skipping n_re values \[500\]"):
        t = n_re_sweep(small, ["test_double_record_a"], n_re_values=(10, 250, 500), n_folds=1)
    assert (t["n_te"] == 254).all() and sorted(set(t["n_re"])) == [10, 250]
