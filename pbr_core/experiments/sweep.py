"""Test ECE as a function of the recalibration set size n_re (paper Figure 3, Figures 7-9).

Design decision (the paper does not say how its test set changes with n_re): within a fold the
TEST SET IS FIXED, the same rows for every n_re and every method, and the recalibration sets are
nested (the first n_re rows of the fold's permutation; the test set is its last n_te rows). Then the
curve shows the effect of n_re alone: the ECE estimator's own bias depends on n_te through
B = floor(n_te^(1/3)) (Theorem 1), so letting n_te = n - n_re shrink as n_re grows would mix a
change of the yardstick into the curve. By default n_te = n - (largest usable n_re), so at that
n_re the split is exactly :func:`compare`'s split of the same fold and seed; an n_re is usable when it
leaves at least :data:`~pbr_core.experiments.MIN_TEST_ROWS` rows to test on (a smaller test set's ECE
says nothing; the larger values are skipped with a warning).
"""

from __future__ import annotations

import warnings
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from pbr_core.experiments._protocol import (
    BinaryECE,
    DEFAULT_BINARY_ECE,
    CancelCallback,
    OnError,
    Runner,
    check_folds,
    fold_label,
    check_methods,
    check_predictions,
    fold_permutation,
    MIN_TEST_ROWS,
    iter_folds,
    small_test_set_problem,
)
from pbr_core.experiments.compare import COMPARE_COLUMNS, SharedFits, fit_and_evaluate
from pbr_core.paper import PAPER_N_RE_VALUES
from pbr_core.predictions import Predictions
from pbr_core.progress import Progress

__all__ = ["SMALL_TEST_SET_WARNING", "n_re_sweep"]

#: Below this many test rows the sweep warns that its test ECE says nothing (the protocols'
#: :data:`~pbr_core.experiments.MIN_TEST_ROWS`; 125, B <= 4, before it existed).
SMALL_TEST_SET_WARNING = MIN_TEST_ROWS


def n_re_sweep(
    preds: Predictions,
    methods: Sequence[str] = ("uncalibrated", "temperature"),
    n_re_values: Sequence[int] = PAPER_N_RE_VALUES,
    n_folds: int = 10,
    seed: int = 0,
    progress: Progress | None = None,
    cancel: CancelCallback | None = None,
    *,
    method_params: Mapping[str, Mapping[str, Any]] | None = None,
    n_te: int | None = None,
    binary_ece: BinaryECE = DEFAULT_BINARY_ECE,
    on_error: OnError = "raise",
    folds: Sequence[int] | None = None,
) -> pd.DataFrame:
    """Test ECE (and accuracy, NLL, Brier) of each method for each recalibration set size (Figure 3).

    Parameters
    ----------
    preds : Predictions
        Full probability (or logit) vectors and labels.
    methods : sequence of str
        Registry names, as in :func:`compare`.
    n_re_values : sequence of int
        Recalibration set sizes (paper: {10, 50, 100, 250, 500, 1000, 3000, 5000}). Values that
        leave no room for the test set (n_re >= n, or n_re + n_te > n when ``n_te`` is given) are
        skipped with a warning.
    n_folds, seed : int
        Random splits and their seed (fold f uses the same permutation as in :func:`compare`).
    progress, cancel : callables, optional
        As in :func:`compare`; ``total = n_folds * len(kept n_re values) * len(methods)``.
    method_params : mapping of method name -> dict, optional
        Constructor parameters per method.
    n_te : int or None
        Size of the fixed test set. None: n minus the largest usable n_re, an n_re being usable when
        it leaves at least :data:`~pbr_core.experiments.MIN_TEST_ROWS` rows (144) to test on.
    binary_ece, on_error
        As in :func:`compare`. Tiny recalibration sets can make some methods fail; ``on_error="warn"``
        keeps the rest of the sweep.
    folds : sequence of int or None
        Which folds to run (indices; ``n_folds`` is then ignored). None: folds 0 .. n_folds-1.
        With ``n_te`` given, a fold's rows do not depend on which other folds or n_re values are
        run, so a long sweep can be run in pieces and resumed.

    Returns
    -------
    pandas.DataFrame
        One row per (fold, n_re, method) with :func:`compare`'s columns; ``n_te`` is the same in every
        row. ``summarize(table)`` groups it by method and n_re.

    References
    ----------
    Fujisawa & Futami (ICML 2025), Section 6.2 ("n_re vs ECE"), Figure 3, Appendix G.
    """
    preds = check_predictions(preds)
    methods = check_methods(methods, method_params)
    method_params = dict(method_params or {})
    n = preds.n
    values = sorted({_check_n_re(v) for v in np.atleast_1d(n_re_values).tolist()})
    if not values:
        raise ValueError("Expected at least one value in `n_re_values`, but got none.")
    if n_te is None:
        usable = [v for v in values if v <= n - MIN_TEST_ROWS]
        if not usable:
            raise ValueError(f"Every n_re in {values} leaves fewer than {MIN_TEST_ROWS} of the n={n} rows to test on. "
                             + (small_test_set_problem(n - min(values)) or ""))
        n_te = n - max(usable)
    elif isinstance(n_te, bool) or not isinstance(n_te, (int, np.integer)) or not 1 <= n_te < n:
        raise ValueError(f"Expected argument `n_te` to be an integer in [1, {n - 1}], but got {n_te!r}.")
    n_te = int(n_te)
    kept = [v for v in values if v + n_te <= n]
    skipped = [v for v in values if v + n_te > n]
    if not kept:
        raise ValueError(f"No n_re in {values} leaves room for a test set of n_te={n_te} rows out of n={n}.")
    if skipped:
        warnings.warn(f"Skipping n_re values {skipped}: with n={n} rows they leave no room for the "
                      f"test set of n_te={n_te} rows.", UserWarning, stacklevel=2)
    if n_te < SMALL_TEST_SET_WARNING:
        warnings.warn(f"{small_test_set_problem(n_te)} Drop the largest n_re values or pass a larger n_te.",
                      UserWarning, stacklevel=2)

    folds = list(iter_folds(n_folds)) if folds is None else check_folds(folds)
    runner = Runner(total=len(folds) * len(kept) * len(methods), columns=COMPARE_COLUMNS,
                    progress=progress, cancel=cancel)
    for fold in folds:
        perm = fold_permutation(n, seed, fold)  # the same permutation as split_indices(..., fold=fold)
        test_set = preds.subset(np.sort(perm[n - n_te:]))
        for n_re in kept:
            fit_set = preds.subset(np.sort(perm[:n_re]))
            shared: SharedFits = {}  # gp / gp_app etc. share one fit per recalibration set
            for method in methods:
                runner.check_cancel()
                what = f"{method}, n_re={n_re}, {fold_label(fold, folds)}"
                row = {"method": method, "fold": fold, "n_re": n_re}
                with runner.fitting():
                    row.update(fit_and_evaluate(method, method_params.get(method), fit_set, test_set,
                                                binary_ece=binary_ece, on_error=on_error, what=what,
                                                shared=shared))
                runner.add(row, what)
    return runner.table()


def _check_n_re(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 2:
        raise ValueError(f"Expected every n_re to be an integer of at least 2, but got {value!r}.")
    return int(value)
