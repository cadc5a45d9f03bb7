"""Cross-validated comparison of recalibrators (paper Section 6.2, Table 1, Appendix F-G).

Protocol: split the predictions into a recalibration set of ``n_re`` rows and a test set (the rest),
fit each method on the recalibration set, evaluate on the test set (ECE with B = floor(n_te^(1/3)),
accuracy, NLL, Brier), repeat over ``n_folds`` random splits, report mean and std over folds.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from pbr_core.bounds import optimal_n_bins
from pbr_core.cancel import checkpoint
from pbr_core.experiments._protocol import (
    BinaryECE,
    DEFAULT_BINARY_ECE,
    CancelCallback,
    OnError,
    Runner,
    check_int,
    check_methods,
    check_predictions,
    ended_at_prior,
    evaluation_metrics,
    guarded,
    iter_folds,
    kl_of,
    split_indices,
    timed_fit,
    warn_small_test_set,
)
from pbr_core.evaluation import EVALUATION_METRICS
from pbr_core.parallel import check_n_jobs, run_chains
from pbr_core.predictions import Predictions
from pbr_core.progress import Progress
from pbr_core.recalibrators import get_recalibrator

__all__ = ["COMPARE_COLUMNS", "compare", "fit_and_evaluate"]

#: Columns of :func:`compare`'s table, in order.
COMPARE_COLUMNS = (
    "method", "fold", "n_re", "n_te", "n_bins", *EVALUATION_METRICS, "nll_infinite_rows", "kl", "at_prior",
    "fit_seconds", "predict_seconds", "fit_shared_with", "error",
)


#: Fits that later methods of the same fold may reuse: fit_key -> (method, fitted recalibrator, fit seconds).
SharedFits = dict[Any, tuple[str, Any, float]]


def fit_and_evaluate(method: str, params: Mapping[str, Any] | None, fit_set: Predictions, test_set: Predictions,
                     *, binary_ece: BinaryECE = DEFAULT_BINARY_ECE, on_error: OnError = "raise",
                     what: str = "", shared: SharedFits | None = None,
                     on_predictions: Callable[[Predictions, np.ndarray], None] | None = None) -> dict[str, Any]:
    """Fit one method on ``fit_set`` and return its test metrics, KL, timings and error (one table row).

    ``at_prior`` is the fit's own record that it ended at the prior (:func:`ended_at_prior`: True /
    False for the GP family, None for methods without a prior or a failed fit).

    The returned dict has every column of :data:`COMPARE_COLUMNS` except method, fold and n_re.
    With ``on_error="warn"`` a failing fit or prediction gives NaN metrics and the error message.

    ``shared`` (one dict per recalibration set) lets methods that learn the same state share one
    fit (``Recalibrator.fit_key``): ``gp_app`` reuses ``gp``'s fitted GP, ``pbr_app`` ``pbr``'s and
    ``pbr_total_app`` ``pbr_total``'s, through ``Recalibrator.fit_from``, which re-checks the fit
    with the method's own prediction and refits when that check fails. A reused row has
    ``fit_shared_with`` = the method whose fit it took, and ``fit_seconds`` = that fit's time (what
    the method costs on its own).

    ``on_predictions(test_set, probs)``, when given, receives the recalibrated test probabilities
    (e.g. to draw a reliability diagram without fitting again).
    """
    what = what or f"Method {method!r}"
    recalibrator = get_recalibrator(method, **dict(params or {}))
    key = recalibrator.fit_key() if shared is not None else None
    base = shared.get(key) if key is not None else None
    row: dict[str, Any] = {"n_te": test_set.n, "fit_shared_with": None}
    fit_seconds, error = timed_fit(recalibrator, fit_set, on_error, what, reuse=None if base is None else base[1])
    report = getattr(recalibrator, "fit_report_", None)
    if error is None and base is not None and isinstance(report, dict) and report.get("fit_shared_with"):
        row["fit_shared_with"], fit_seconds = base[0], base[2]
    elif error is None and key is not None and base is None:
        shared[key] = (method, recalibrator, fit_seconds)
    row["fit_seconds"] = fit_seconds
    predict_seconds = math.nan
    metrics = None
    if error is None:
        probs, predict_seconds, error = guarded(lambda: recalibrator.predict_proba(test_set), on_error,
                                                f"{what}: prediction on the test set failed")
        if error is not None:
            predict_seconds = math.nan
        else:
            metrics = evaluation_metrics(probs, test_set.labels, test_set.kind, binary_ece)
            if on_predictions is not None:
                on_predictions(test_set, probs)
    if metrics is None:
        metrics = {"n_bins": optimal_n_bins(test_set.n), **dict.fromkeys(EVALUATION_METRICS, math.nan)}
    row.update(metrics)
    row["kl"] = kl_of(recalibrator) if error is None else math.nan
    row["at_prior"] = ended_at_prior(recalibrator) if error is None else None
    row["predict_seconds"] = predict_seconds
    row["error"] = error
    return row


def compare(
    preds: Predictions,
    methods: Sequence[str] = ("uncalibrated", "temperature"),
    n_re: int = 1000,
    n_folds: int = 10,
    seed: int = 0,
    method_params: Mapping[str, Mapping[str, Any]] | None = None,
    progress: Progress | None = None,
    cancel: CancelCallback | None = None,
    *,
    n_te: int | None = None,
    binary_ece: BinaryECE = DEFAULT_BINARY_ECE,
    on_error: OnError = "raise",
    share_fits: bool = True,
    on_predictions: Callable[[int, str, Predictions, np.ndarray], None] | None = None,
    n_jobs: int = 1,
) -> pd.DataFrame:
    """Fit every method on the same random recalibration/test splits and evaluate on the test sets.

    The paper's comparison protocol (Section 6.2 and Appendix F, "Performance evaluation"):
    ``n_folds`` random splits into a recalibration set of ``n_re`` rows and a test set of the other
    ``n_te = n - n_re`` rows; every method is fitted on the recalibration set of a fold and evaluated
    on its test set with ECE (B = floor(n_te^(1/3)), Theorem 1), accuracy, NLL and Brier score.

    Parameters
    ----------
    preds : Predictions
        Full probability (or logit) vectors and labels; top-label-only data raises
        :class:`~pbr_core.PredictionsError` (it cannot be recalibrated).
    methods : sequence of str
        Names in the recalibrator registry (:func:`available_methods`), e.g. ``"uncalibrated"``,
        ``"temperature"``, ``"gp"``, ``"pbr"``, ``"pbr_total"``. Binary methods run one-vs-all on
        multiclass data (Platt, beta, as in Wenger et al.) or on the top label (isotonic, histogram
        binning, BBQ, Venn-Abers: their default ``multiclass``).
    n_re : int
        Recalibration set size (paper: 1000). Must be smaller than the number of rows; a test set
        of fewer than :data:`MIN_TEST_ROWS` rows gives a warning (its ECE says nothing; the dashboard
        and ``pbr-calib compare`` refuse it). :func:`default_n_re` is the front ends' proposal.
    n_folds : int
        Number of random splits (paper: 10). Fold f's split is the same for every method and depends
        only on ``(n, n_re, seed, f)`` (see :func:`split_indices`).
    seed : int
        Seed of the splits.
    method_params : mapping of method name -> dict, optional
        Constructor parameters per method, e.g. ``{"pbr": {"alpha": 0.5}}``.
    progress : callable ``progress(done, total, message)``, optional
        Called after each fit; ``total = n_folds * len(methods)``.
    cancel : callable ``cancel() -> bool``, optional
        Checked before each fit and, through :func:`pbr_core.cancel.checkpoint`, within each fit and
        its evaluation (every optimiser evaluation, every prediction batch); when it returns True,
        :class:`Cancelled` is raised within about a second, carrying the rows of the fits finished
        so far in ``.partial`` (the interrupted fit is dropped).
    n_te : int or None
        Test rows per fold: None (default) uses all ``n - n_re`` other rows; a number uses that
        many (the last ``n_te`` of the fold's permutation, see :func:`split_indices`), e.g. the
        paper's KITTI protocol (n_re = 1000, n_te = 8000 of 9090 rows).
    binary_ece : {"positive", "top_label"}
        For binary data, the ECE of p(y=1) (paper Appendix A; the default, :data:`DEFAULT_BINARY_ECE`,
        the app's one choice) or the top-label ECE (what the paper's tables report, KITTI included:
        pass "top_label" to reproduce them). Multiclass data: always top-label. The NLL and Brier
        columns score what the ECE measures (see :func:`evaluation_metrics`).
    on_error : {"raise", "warn"}
        A failing fit raises (default), or gives a warning, NaN metrics and a message in ``error``.
    share_fits : bool, default True
        Within a fold, methods that learn the same state share one fit (``gp``/``gp_app``,
        ``pbr``/``pbr_app``, ``pbr_total``/``pbr_total_app`` with the same settings): the paper's
        Table 1 with all six GP variants costs three GP fits per fold instead of six. The results
        equal separate fits (see :func:`fit_and_evaluate`). False fits every method separately.
    on_predictions : callable ``on_predictions(fold, method, test_set, probs)``, optional
        Receives each method's recalibrated test probabilities of each fold as soon as they are
        computed (``test_set`` is the fold's raw test Predictions). The table keeps only metrics;
        use this to keep what you need, e.g. fold 0's reliability diagrams, without refitting.
    n_jobs : int, default 1
        Folds fitted at the same time, each in a worker process (:mod:`pbr_core.parallel`; -1: one
        per available core); the same rows as with 1 (only the timing columns differ), in the same
        order. ``on_predictions`` still runs in this process (the workers send the probabilities).
        Worth it for GP methods on several folds (a worker pays 1-2 CPU s to import torch).

    Returns
    -------
    pandas.DataFrame
        One row per (fold, method), columns :data:`COMPARE_COLUMNS`: method, fold, n_re, n_te, n_bins,
        ece, accuracy, nll, brier, kl (NaN for methods without ``kl_``), at_prior (True where a GP
        fit ended at its prior, i.e. did not recalibrate: see :func:`ended_at_prior`; False for other
        GP fits; None for methods without a prior), fit_seconds,
        predict_seconds, fit_shared_with (the method whose fit this row reused, else None), error
        (None when the fit succeeded). Folds are the outer loop, so a cancelled run holds complete
        folds first.

    References
    ----------
    Fujisawa & Futami, "PAC-Bayes Analysis for Recalibration in Classification", ICML 2025,
    Section 6.2, Table 1 and Appendix F.

    Examples
    --------
    >>> import numpy as np, pbr_core
    >>> from pbr_core.experiments import compare, summarize
    >>> d = np.load("sample_data/cifar10_resnet110.npz")  # doctest: +SKIP
    >>> preds = pbr_core.Predictions.from_arrays(d["logits"], d["labels"])  # doctest: +SKIP
    >>> table = compare(preds, ["uncalibrated", "temperature"], n_re=500, n_folds=2)  # doctest: +SKIP
    >>> summarize(table)  # doctest: +SKIP
    """
    preds = check_predictions(preds)
    methods = check_methods(methods, method_params)
    method_params = dict(method_params or {})
    _check_n_re(n_re, preds.n)
    _, te_idx = split_indices(preds.n, n_re, fold=0, seed=seed, n_te=n_te)  # checks n_te before any fit
    warn_small_test_set(te_idx.size)  # the front ends refuse it (MIN_TEST_ROWS)
    folds = list(iter_folds(n_folds))
    n_jobs = check_n_jobs(n_jobs)
    runner = Runner(total=len(folds) * len(methods), columns=COMPARE_COLUMNS, progress=progress, cancel=cancel)
    chains = [(preds, list(methods), method_params, fold, len(folds), n_re, n_te, seed, binary_ece, on_error,
               share_fits, on_predictions is not None) for fold in folds]

    test_sets: dict[int, Predictions] = {}   # each fold's test rows, made once for on_predictions

    def on_item(pos: int, item: tuple) -> None:
        i, row, what, probs = item
        if on_predictions is not None and probs is not None:  # None: the fit failed (on_error="warn")
            # The worker sent the test probabilities; the callable runs here (it need not pickle).
            if pos not in test_sets:
                _, te_idx = split_indices(preds.n, n_re, fold=folds[pos], seed=seed, n_te=n_te)
                test_sets[pos] = preds.subset(te_idx)
            on_predictions(folds[pos], methods[i], test_sets[pos], probs)
        runner.put((pos, i), row, what)

    # Rows keep (fold, method) order, however the folds' fits interleave or finish.
    with runner.fitting():
        run_chains(_fold_chain, chains, n_jobs, on_item)
    return runner.table()


def _fold_chain(preds: Predictions, methods: list[str], method_params: dict, fold: int, n_folds: int, n_re: int,
                n_te: int | None, seed: int, binary_ece: BinaryECE, on_error: OnError, share_fits: bool,
                keep_probs: bool, *, emit: Callable[[tuple], None]) -> None:
    """One fold of :func:`compare`: every method fitted on its recalibration set and evaluated on its
    test set; ``emit((method index, row, message, test probabilities or None))`` after each.
    Module level, so that :func:`pbr_core.parallel.run_chains` can run it in a worker process."""
    re_idx, te_idx = split_indices(preds.n, n_re, fold=fold, seed=seed, n_te=n_te)
    fit_set, test_set = preds.subset(re_idx), preds.subset(te_idx)
    shared: SharedFits | None = {} if share_fits else None
    for i, method in enumerate(methods):
        checkpoint()  # a stop asked for between two fits (in this process; workers are terminated)
        what = f"{method}, fold {fold + 1}/{n_folds}"
        kept: list[np.ndarray] = []
        row = {"method": method, "fold": fold, "n_re": int(n_re)}
        row.update(fit_and_evaluate(method, method_params.get(method), fit_set, test_set,
                                    binary_ece=binary_ece, on_error=on_error, what=what, shared=shared,
                                    on_predictions=(lambda _test, probs: kept.append(probs)) if keep_probs else None))
        emit((i, row, what, kept[0] if kept else None))


def _check_n_re(n_re: Any, n: int) -> int:
    check_int("n_re", n_re, 2)
    if n_re >= n:
        raise ValueError(
            f"Expected `n_re` smaller than the number of rows ({n}) so that a test set remains, but got n_re={n_re}."
        )
    return int(n_re)
