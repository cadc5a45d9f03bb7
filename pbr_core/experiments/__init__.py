"""The paper's experiment protocols as functions returning tidy pandas DataFrames.

Fujisawa & Futami, "PAC-Bayes Analysis for Recalibration in Classification" (ICML 2025), Section 6
and Appendices F-G:

* :func:`compare` - cross-validated comparison of recalibrators (Table 1): one row per (method, fold).
* :func:`summarize`, :func:`summary_table`, :func:`best_mask` - mean ± std over folds, best per column.
* :func:`paired_tests` - does A differ from B beyond fold-to-fold noise: paired t-test, Wilcoxon
  signed-rank and corrected resampled t-test over folds, mean difference with its interval; the
  verdict rests on the corrected test (the folds overlap), Holm-corrected over the pairs;
  :func:`shown_best` - the best method only when the folds show it (:data:`MIN_PAIRED_FOLDS` = 6).
* :func:`kl_vs_ece_gap` - KL against the ECE generalisation gap over alpha (Section 6.1, Figure 2);
  :func:`fold_kendall` - whether the two go together: Kendall's tau within each fold, tested across folds;
  :func:`folds_overlap_too_much` - whether the folds share too many rows for that test to be read
  (n_re above n / 4), :func:`kl_gap_default_n_re` the n_re a front end proposes (n / 4 at most).
* :func:`n_re_sweep` - test ECE against the recalibration set size (Figure 3).
* :func:`split_indices` - one fold's split.
* :func:`fit_and_test` - one recalibrator fitted on one fold and tested on the rest, with the bounds of the fit.
* :data:`MIN_TEST_ROWS`, :func:`small_test_set_problem`, :func:`default_n_re` - the smallest test set
  whose ECE says anything (144 rows, from Theorem 1) and the split a front end proposes;
  :data:`MIN_FIT_ROWS`, :func:`small_fit_set_problem` the smallest recalibration set a front end
  measures (144 rows, same reason) and :func:`small_file_problem` for a file below both
  (:data:`MIN_MEASURED_ROWS` = 288 rows).
* :func:`evaluation_metrics` - the test metrics every protocol reports (ECE with B = floor(n^(1/3)),
  accuracy, NLL, Brier), for your own loops; :data:`METRICS` - every column's label, format and
  better direction (:mod:`pbr_core.evaluation`).
* :data:`PAPER_ALPHAS`, :data:`PAPER_N_RE`, :data:`PAPER_N_RE_VALUES` - the paper's settings
  (:mod:`pbr_core.paper`).

The typed settings of each study (:mod:`pbr_core.experiments.settings`: :class:`PBRSettings`,
:class:`CompareSettings`, :class:`SweepSettings`, :class:`KLGapSettings`, :class:`FitSettings`,
:class:`GroupGapSettings`) and their runs (:mod:`pbr_core.experiments.runs`: ``run_pbr``,
``run_compare``, ...) are what the front ends fill in and draw: the dashboard's pages, ``pbr-calib``
and the scripts decide nothing about the numbers.

Every protocol takes ``progress(done, total, message)`` (called after each fit) and ``cancel()``
(checked before and within each fit, see :mod:`pbr_core.cancel`; True raises :class:`Cancelled`, which
carries the partial table of the fits that finished).
:func:`tqdm_progress` adapts a tqdm bar for the command line.

Example
-------
>>> from pbr_core.experiments import compare, summary_table
>>> table = compare(preds, ["uncalibrated", "temperature", "pbr"], n_re=1000, n_folds=10)  # doctest: +SKIP
>>> summary_table(table)  # doctest: +SKIP
"""

from __future__ import annotations

from pbr_core.evaluation import EVALUATION_METRICS, METRICS, evaluation_metrics
from pbr_core.experiments._protocol import (
    DEFAULT_BINARY_ECE,
    MIN_FIT_ROWS,
    MIN_MEASURED_ROWS,
    MIN_TEST_ROWS,
    CancelCallback,
    Cancelled,
    SmallTestSetError,
    available_methods,
    check_fit_rows,
    check_test_rows,
    default_n_re,
    ended_at_prior,
    fold_permutation,
    max_n_re,
    small_file_problem,
    small_fit_set_problem,
    small_test_set_problem,
    split_problem,
    split_indices,
    tqdm_progress,
)
from pbr_core.experiments.compare import COMPARE_COLUMNS, compare, fit_and_evaluate
from pbr_core.experiments.holdout import HeldOutFit, fit_and_test
from pbr_core.experiments.kl_gap import (KL_GAP_COLUMNS, MAX_FOLD_SHARE, FoldKendall, KLGapResult, extreme_kl,
                                        fold_kendall, folds_overlap_too_much, kl_gap_default_n_re, kl_limit,
                                        kl_vs_ece_gap)
from pbr_core.experiments.settings import (CompareSettings, FitSettings, GroupGapSettings, KLGapSettings,
                                           PBRSettings, SweepSettings)
from pbr_core.experiments.paired import (MIN_PAIRED_FOLDS, PAIRED_COLUMNS, TEST_NAMES, default_pairs, infinite_nll_verdict, min_paired_folds,
                                        paired_test, paired_tests, shown_best, too_few_folds,
                                        verdict_kind)
from pbr_core.experiments.summary import HIGHER_IS_BETTER, LOWER_IS_BETTER, best_mask, summarize, summary_table
from pbr_core.experiments.sweep import n_re_sweep
from pbr_core.metrics import BINARY_TARGET
from pbr_core.paper import PAPER_ALPHAS, PAPER_BINARY_ECE, PAPER_N_RE, PAPER_N_RE_VALUES

__all__ = [
    "BINARY_TARGET",
    "DEFAULT_BINARY_ECE",
    "EVALUATION_METRICS",
    "METRICS",
    "PAPER_BINARY_ECE",
    "COMPARE_COLUMNS",
    "HIGHER_IS_BETTER",
    "KL_GAP_COLUMNS",
    "LOWER_IS_BETTER",
    "MIN_PAIRED_FOLDS",
    "MIN_FIT_ROWS",
    "MIN_MEASURED_ROWS",
    "MIN_TEST_ROWS",
    "PAIRED_COLUMNS",
    "infinite_nll_verdict",
    "PAPER_ALPHAS",
    "PAPER_N_RE",
    "PAPER_N_RE_VALUES",
    "SmallTestSetError",
    "CancelCallback",
    "Cancelled",
    "CompareSettings",
    "FitSettings",
    "GroupGapSettings",
    "KLGapSettings",
    "PBRSettings",
    "SweepSettings",
    "FoldKendall",
    "MAX_FOLD_SHARE",
    "folds_overlap_too_much",
    "kl_gap_default_n_re",
    "HeldOutFit",
    "KLGapResult",
    "TEST_NAMES",
    "available_methods",
    "best_mask",
    "check_fit_rows",
    "check_test_rows",
    "compare",
    "default_n_re",
    "default_pairs",
    "ended_at_prior",
    "evaluation_metrics",
    "extreme_kl",
    "fit_and_evaluate",
    "fit_and_test",
    "fold_kendall",
    "fold_permutation",
    "kl_limit",
    "kl_vs_ece_gap",
    "max_n_re",
    "min_paired_folds",
    "n_re_sweep",
    "paired_test",
    "paired_tests",
    "shown_best",
    "small_file_problem",
    "small_fit_set_problem",
    "small_test_set_problem",
    "split_problem",
    "split_indices",
    "summarize",
    "summary_table",
    "too_few_folds",
    "tqdm_progress",
    "verdict_kind",
]
