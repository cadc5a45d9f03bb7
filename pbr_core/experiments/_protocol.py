"""Machinery shared by the paper's experiment protocols (Section 6, Appendix F).

Splits, method look-up, progress reporting and cancellation live here so that every protocol
(:func:`~pbr_core.experiments.compare`, :func:`~pbr_core.experiments.kl_vs_ece_gap`,
:func:`~pbr_core.experiments.n_re_sweep`) splits and reports in exactly the same way.

Splits
------
Fold ``f`` of a run with seed ``s`` shuffles the rows with
``np.random.default_rng(np.random.SeedSequence(s, spawn_key=(f,)))``, which is the generator that
``SeedSequence(s).spawn(F)[f]`` would give for any ``F > f``. So fold ``f`` does not depend on how
many folds are run, the folds are statistically independent, and ``seed=1, fold=0`` is not
``seed=0, fold=1`` (as it would be with ``seed + f``). The split depends only on
``(n, seed, fold)`` and the set sizes, never on the method: every method sees the same rows.
"""

from __future__ import annotations

import bisect
import contextlib
import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Literal, Mapping, Sequence

import numpy as np
import pandas as pd

from pbr_core.bounds import optimal_n_bins
from pbr_core.cancel import CancelCallback, Cancelled, cancel_when
from pbr_core.evaluation import evaluation_metrics
from pbr_core.metrics import BINARY_TARGET, BinaryTarget
from pbr_core.paper import PAPER_N_RE
from pbr_core.predictions import TOP_LABEL_NOT_RECALIBRATED, Predictions, PredictionsError
from pbr_core.progress import Progress, tqdm_progress
from pbr_core.recalibrators import available_methods, get_recalibrator

__all__ = [
    "MIN_FIT_ROWS",
    "MIN_MEASURED_ROWS",
    "MIN_TEST_ROWS",
    "SmallTestSetError",
    "check_fit_rows",
    "check_test_rows",
    "default_n_re",
    "max_n_re",
    "small_file_problem",
    "small_fit_set_problem",
    "split_problem",
    "small_test_set_problem",
    "warn_small_test_set",
    "Cancelled",
    "CancelCallback",
    "available_methods",
    "ended_at_prior",
    "evaluation_metrics",
    "fold_permutation",
    "split_indices",
    "tqdm_progress",
]

#: The protocols' binary ECE: one of :data:`pbr_core.metrics.BINARY_TARGET`'s values.
BinaryECE = BinaryTarget

#: The protocols' ECE on binary data unless asked otherwise: the app's one choice,
#: :data:`pbr_core.metrics.BINARY_TARGET` (p(y=1), Appendix A), so that a protocol, a page and
#: ``pbr-calib`` show the same test ECE for the same file. The paper's tables (Table `table:kitti`,
#: following Wenger et al.) use the top label: pass ``binary_ece=PAPER_BINARY_ECE`` to reproduce them,
#: as the scripts in ``scripts/`` do.
DEFAULT_BINARY_ECE: BinaryECE = BINARY_TARGET.default  # type: ignore[assignment]

# ``cancel()`` (CancelCallback, from pbr_core.cancel): checked before each fit and within it;
# returning True stops the run (raises Cancelled).

#: The smallest test set whose ECE says anything about the true calibration error: 144 rows.
#:
#: Why. Every protocol measures the test ECE with B = floor(n_te^(1/3)) bins (Theorem 1's rate), and
#: Theorem 1 bounds how far that ECE can be from the true calibration error:
#: |TCE - ECE| <= (1 + L)/B + 2 sqrt(2 (B log 2 + log(1/eps)) / n_te) (lambda optimised), with the
#: app's L = 1 and eps = 0.05 (:data:`pbr_core.bounds.BOUND_LIPSCHITZ`, :data:`~pbr_core.bounds.BOUND_EPS`).
#: An ECE lies in [0, 1], so a bound of 1 or more says nothing: whatever the test ECE, the true
#: calibration error may be anything from 0 to 1. The bound falls below 1 first at n_te = 144 (B = 5:
#: 0.9991; 1.0012 at 143) and stays below for every larger n_te (it decreases from there on; tested).
#: A test set of 1 row (B = 1) has a bound of 7.4: its "Test ECE 0.0000, accuracy 100 %" is noise.
#: The criterion is the paper's own guarantee, not a rule of thumb, and it is lenient: at 144 rows the
#: ECE is still only known to within ±1. The front ends (every dashboard page, ``pbr-calib``, the
#: report) refuse a smaller test set with :func:`small_test_set_problem`'s sentence; the library functions
#: warn and go on (a study of tiny sets on purpose stays possible).
MIN_TEST_ROWS = 144

#: The smallest recalibration set whose fit a front end offers as a measured result: 144 rows, the
#: same figure as :data:`MIN_TEST_ROWS`, for a different reason.
#:
#: Why. Theorem 1 bounds the error of a test ECE, not the quality of a fit, so it does not give this
#: figure; simulations do. A recalibrator learns the miscalibration of its recalibration rows and
#: removes it, and on few rows what it learns is mostly noise. Measured (tests/test_small_fit_rows.py;
#: CIFAR-10 ResNet-110 logits, labels drawn from softmax(z / 1.5), so the logits are overconfident with a
#: known test ECE of about 0.06; 60 draws, 5000 test rows): fitted on 144 rows, isotonic regression,
#: temperature scaling and histogram binning lowered the test ECE in 100 %, 100 % and 97 % of draws; on
#: 50 rows in 83 %, 93 % and 72 %; on 10 rows in 70 %, 37 % and 58 % (a coin). With labels drawn from
#: the softmax itself (truth: calibrated, nothing to remove) a fit on 10 rows raised the test ECE by
#: 0.064, 0.022 and 0.068 on average, on 144 rows by 0.007, 0.005 and 0.009. The audit's 150-row file
#: at n_re = 6: isotonic worse on all 10 folds (+0.099), which Compare's corrected t-test (variance
#: factor 1/F + n_te/n_re = 24.1 there) could only call "no difference shown", p 0.670: the
#: paired tests are powerless when n_re is small, because n_te/n_re is then large. 144 rows is where
#: these fits became reliable, and using the test side's figure keeps the rule to one number.
#:
#: One figure on both sides keeps the rule plain: a measured result needs at least 144 rows to fit
#: on and 144 other rows to test on, :data:`MIN_MEASURED_ROWS` = 288 in all. The front ends (the
#: PBR, Compare and Generalization pages, Fit & apply's check, ``pbr-calib compare`` and ``fit``, the
#: report) refuse a smaller recalibration set, or warn when they fit one anyway (Fit & apply,
#: ``pbr-calib fit``: the download stays possible, marked unmeasured). The paper's n_re sweep
#: (Figure 3, n_re from 10) stays possible: it is an explicit experiment about small recalibration
#: sets, each size measured on the same large test set, and the front ends run it only on files of
#: at least :data:`MIN_MEASURED_ROWS` rows. The library functions neither warn nor refuse.
MIN_FIT_ROWS = MIN_TEST_ROWS

#: The fewest rows of a file that can give both a recalibration set and a test set worth measuring.
MIN_MEASURED_ROWS = MIN_FIT_ROWS + MIN_TEST_ROWS


def default_n_re(n: int) -> int:
    """The recalibration set size a front end proposes for a file of ``n`` rows.

    The paper's n_re = 1000 (:data:`PAPER_N_RE`) when the file has at least 2000 rows, so that at
    least as many rows are left to test on as were fitted on (as in the paper's data: 1000 of 9090
    KITTI rows, of 10,000 CIFAR-100 rows); below that half the rows (``n // 2``), which leaves the
    other half, the larger part, to test on. A 504-row file gets 252 and 252 (before: 503 and 1).
    """
    return max(1, min(PAPER_N_RE, int(n) // 2))


def max_n_re(n: int) -> int:
    """The largest n_re that leaves :data:`MIN_TEST_ROWS` rows to test on (below 2: the file is too small)."""
    return int(n) - MIN_TEST_ROWS


def small_file_problem(n: int) -> str | None:
    """Why a file of ``n`` rows cannot give a measured recalibration result, with what to do, in one
    sentence; None when it has at least :data:`MIN_MEASURED_ROWS` rows."""
    n = int(n)
    if n >= MIN_MEASURED_ROWS:
        return None
    return (f"This file has {n:,} row{'' if n == 1 else 's'}, too few to measure a recalibrator, which needs "
            f"at least {MIN_FIT_ROWS} rows to fit on and {MIN_TEST_ROWS} other rows to test on: load a file with "
            f"at least {MIN_MEASURED_ROWS} labelled rows.")


def small_fit_set_problem(n_re: int) -> str | None:
    """Why a recalibration set of ``n_re`` rows is too small to fit a recalibrator worth measuring, in
    a few short sentences (the figures of :data:`MIN_FIT_ROWS`' simulations); None when it has at least
    :data:`MIN_FIT_ROWS` rows. Front ends add what to do."""
    n_re = int(n_re)
    if n_re >= MIN_FIT_ROWS:
        return None
    if n_re < 1:
        return f"No row is left to fit on; at least {MIN_FIT_ROWS} recalibration rows are needed."
    rows = "1 row" if n_re == 1 else f"{n_re:,} rows"
    return (f"A recalibration set of {rows} is too small to fit on. In simulations, recalibrators fitted on fewer "
            f"than {MIN_FIT_ROWS} rows were mostly noise: fitted on 10 rows of calibrated predictions, they made the "
            f"ECE worse by 0.02 to 0.07; fitted on {MIN_FIT_ROWS} rows of an over-confident model, they improved it "
            f"in 97 to 100 % of draws. At least {MIN_FIT_ROWS} recalibration rows are needed.")


def small_test_set_problem(n_te: int) -> str | None:
    """Why a test set of ``n_te`` rows is too small to say anything, in a few short sentences; None when it is
    large enough (:data:`MIN_TEST_ROWS`). Front ends add what to do in their own words (which control
    or option to change)."""
    from pbr_core.bounds import BOUND_EPS, BOUND_LIPSCHITZ, theorem1_bound

    n_te = int(n_te)
    if n_te >= MIN_TEST_ROWS:
        return None
    if n_te < 1:
        return f"No row is left to test on; at least {MIN_TEST_ROWS} test rows are needed."
    B = optimal_n_bins(n_te)
    bound = theorem1_bound(n_te, B, lipschitz=BOUND_LIPSCHITZ, eps=BOUND_EPS)
    rows = "1 row" if n_te == 1 else f"{n_te:,} rows"
    return (f"A test set of {rows} is too small to say anything. Theorem 1 bounds how far its ECE can be from the "
            f"true calibration error, but at {rows} the bound is {bound:.3f}, more than 1, so it says nothing: "
            f"even a test ECE of 0.0000 means nothing there. The bound first falls below 1 at {MIN_TEST_ROWS} rows, "
            f"so at least {MIN_TEST_ROWS} test rows are needed.")


def warn_small_test_set(n_te: int, stacklevel: int = 3) -> None:
    """The library's warning for a test set below :data:`MIN_TEST_ROWS` (front ends refuse instead)."""
    problem = small_test_set_problem(n_te)
    if problem is not None:
        warnings.warn(problem, UserWarning, stacklevel=stacklevel)


class SmallTestSetError(ValueError):
    """A front end's refusal of a test set below :data:`MIN_TEST_ROWS` (its message says why and what to do)."""


def check_test_rows(n_te: int, what_to_do: str = "") -> None:
    """Raise :class:`SmallTestSetError` with :func:`small_test_set_problem`'s sentence (and ``what_to_do``)
    when ``n_te`` is below :data:`MIN_TEST_ROWS`."""
    problem = small_test_set_problem(n_te)
    if problem is not None:
        raise SmallTestSetError(f"{problem} {what_to_do}".strip())


def split_problem(n: int, n_re: int, n_te: int | None = None) -> tuple[Literal["file", "fit", "test"], str] | None:
    """What keeps a split of a file of ``n`` rows into ``n_re`` rows to fit on and ``n_te`` to test on
    (None: every row not fitted on) from giving a measured result, or None when nothing does.

    Returns ``(which, sentence)``: ``"file"`` when no split of this file can (:func:`small_file_problem`,
    a complete sentence with what to do: load more rows), else ``"fit"`` when ``n_re`` is below
    :data:`MIN_FIT_ROWS` (raise it), else ``"test"`` when the test set is below :data:`MIN_TEST_ROWS`
    (lower ``n_re``, at most :func:`max_n_re`, or raise ``n_te``). Checked in that order, so that a
    front end never advises a value that is impossible or that the user already has: on a 150-row
    file the answer is "the file is too small", not "lower n_re to at most 6".
    """
    problem = small_file_problem(n)
    if problem is not None:
        return "file", problem
    problem = small_fit_set_problem(n_re)
    if problem is not None:
        return "fit", problem
    problem = small_test_set_problem(int(n) - int(n_re) if n_te is None else n_te)
    return None if problem is None else ("test", problem)


def check_fit_rows(n_re: int, what_to_do: str = "") -> None:
    """Raise :class:`SmallTestSetError` with :func:`small_fit_set_problem`'s sentence (and ``what_to_do``)
    when ``n_re`` is below :data:`MIN_FIT_ROWS`."""
    problem = small_fit_set_problem(n_re)
    if problem is not None:
        raise SmallTestSetError(f"{problem} {what_to_do}".strip())


# ---------------------------------------------------------------------------- splits
def check_int(name: str, value: Any, minimum: int) -> int:
    """``value`` as an int; ValueError naming ``name`` unless it is an integer (not a bool) >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"Expected argument `{name}` to be an integer of at least {minimum}, but got {value!r}.")
    return int(value)


def fold_permutation(n: int, seed: int, fold: int) -> np.ndarray:
    """The row permutation of fold ``fold`` (see the module docstring for why SeedSequence)."""
    check_int("seed", seed, 0)
    check_int("fold", fold, 0)
    rng = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(int(fold),)))
    return rng.permutation(int(n))


def split_indices(n: int, n_re: int, *, fold: int, seed: int = 0,
                  n_te: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Recalibration and test row indices of one fold (paper Section 6: n_re rows to fit, test on the rest).

    Parameters
    ----------
    n : int
        Number of rows in the prediction file.
    n_re : int
        Size of the recalibration set: the first ``n_re`` rows of the fold's permutation.
    fold, seed : int
        Which split (see :func:`fold_permutation`).
    n_te : int or None
        Size of the test set: the LAST ``n_te`` rows of the permutation. None: all ``n - n_re``
        remaining rows. Taking the test rows from the end means that, within a fold, the test set
        does not change when ``n_re`` changes, and smaller recalibration sets are nested in larger
        ones (used by :func:`~pbr_core.experiments.n_re_sweep`).

    Returns
    -------
    (re_idx, te_idx) : two sorted, disjoint int arrays.
    """
    n = check_int("n", n, 2)
    n_re = check_int("n_re", n_re, 1)
    if n_te is None:
        n_te = n - n_re
    n_te = check_int("n_te", n_te, 1)
    if n_re + n_te > n:
        raise ValueError(
            f"A recalibration set of n_re={n_re} and a test set of n_te={n_te} rows need "
            f"{n_re + n_te} rows, but the predictions have only n={n}."
        )
    perm = fold_permutation(n, seed, fold)
    return np.sort(perm[:n_re]), np.sort(perm[n - n_te:])


# ---------------------------------------------------------------------------- methods
def check_methods(methods: Sequence[str] | str, method_params: Mapping[str, Mapping[str, Any]] | None) -> list[str]:
    """Validate method names and parameters up front, before any (possibly long) fit runs."""
    if isinstance(methods, str):
        methods = [methods]
    methods = list(methods)
    if not methods:
        raise ValueError("Expected at least one method in `methods`, but got none.")
    dupes = sorted({m for m in methods if methods.count(m) > 1})
    if dupes:
        raise ValueError(f"Methods are listed more than once: {dupes}.")
    method_params = dict(method_params or {})
    unknown = sorted(set(method_params) - set(methods))
    if unknown:
        raise ValueError(f"`method_params` names methods that are not in `methods`: {unknown}.")
    for m in methods:
        get_recalibrator(m, **dict(method_params.get(m) or {}))
    return methods


def check_predictions(preds: Predictions) -> Predictions:
    if not isinstance(preds, Predictions):
        raise TypeError(
            "Expected a pbr_core.Predictions value (use pbr_core.load_predictions or "
            f"Predictions.from_arrays), but got {type(preds).__name__}."
        )
    if not preds.can_recalibrate:
        raise PredictionsError(TOP_LABEL_NOT_RECALIBRATED + " The recalibration experiments cannot run on it.")
    return preds


# ---------------------------------------------------------------------------- fits
def kl_of(recalibrator: Any) -> float:
    """The fitted KL(q || p) when the method exposes ``kl_`` (GP methods), else NaN."""
    kl = getattr(recalibrator, "kl_", None)
    return math.nan if kl is None else float(kl)


#: What :func:`pbr_core.gp.training.fit_gp` writes in a fit's ``stop_reason`` when the fit ended at the
#: prior and no restart from a smaller alpha did better. Reports written before the fit recorded
#: ``ended_at_prior`` (files saved by earlier versions) are read by this note; a restart that did
#: better says "restarted: the first fit ended at the prior, ..." instead (no semicolon).
AT_PRIOR_STOP_REASON = "ended at the prior;"


def ended_at_prior(fitted: Any) -> bool | None:
    """Whether a fitted GP recalibrator (or its ``fit_report_`` dict) ended at its prior.

    The fit's own record, ``fit_report_["ended_at_prior"]``: decided once by the training code on
    the final model (:class:`pbr_core.gp.problem.FitReport`): the GP's mean moves no training score
    by ``pbr_core.gp.training.PRIOR_SHIFT``, so the recalibrated predictions are (nearly) the
    uncalibrated ones. Not a KL threshold: a fit at the prior can keep a KL of a few hundredths
    (a collapsed outputscale). The CLI, the dashboard and the experiments' ``at_prior`` column all
    read it here. A report without the entry (saved before it existed) is read by its stop
    reason's :data:`AT_PRIOR_STOP_REASON` note.

    Returns
    -------
    bool or None
        True / False for a fit with a fit report (the GP family); None for methods without one
        (temperature scaling, isotonic regression, ...), whose fit has no prior.
    """
    report = fitted if isinstance(fitted, Mapping) else getattr(fitted, "fit_report_", None)
    if not isinstance(report, Mapping) or ("stop_reason" not in report and "ended_at_prior" not in report):
        return None
    flag = report.get("ended_at_prior")
    if isinstance(flag, (bool, np.bool_)):
        return bool(flag)
    return AT_PRIOR_STOP_REASON in str(report.get("stop_reason", ""))


# ---------------------------------------------------------------------------- running
@dataclass
class Runner:
    """Counts fits, reports progress after each, checks ``cancel`` before each, collects rows."""

    total: int
    columns: Sequence[str]
    progress: Progress | None = None
    cancel: CancelCallback | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    keys: list[Any] = field(default_factory=list)   # sort keys of the rows added by put()

    @property
    def done(self) -> int:
        return len(self.rows)

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel():
            raise Cancelled(self.table(), self.done, self.total)

    @contextlib.contextmanager
    def fitting(self) -> Iterator[None]:
        """Around one fit and its evaluation: ``cancel`` is checked inside it too (at every
        :func:`pbr_core.cancel.checkpoint`: each objective evaluation, each prediction batch), and a
        ``Cancelled`` raised inside it comes out carrying the partial table."""
        try:
            with cancel_when(self.cancel):
                yield
        except Cancelled:
            raise Cancelled(self.table(), self.done, self.total) from None

    def add(self, row: dict[str, Any], message: str) -> None:
        self.rows.append(row)
        if self.progress is not None:
            self.progress(self.done, self.total, message)

    def put(self, key: Any, row: dict[str, Any], message: str) -> None:
        """Add a row under a sort key: the table keeps the keys' order whatever order rows arrive in
        (folds fitted in worker processes finish in any order)."""
        pos = bisect.bisect(self.keys, key)
        self.keys.insert(pos, key)
        self.rows.insert(pos, row)
        if self.progress is not None:
            self.progress(self.done, self.total, message)

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=list(self.columns))


OnError = Literal["raise", "warn"]


def guarded(call: Callable[[], Any], on_error: OnError, failure: str) -> tuple[Any, float, str | None]:
    """Run and time ``call()``; returns (result, seconds, error message or None).

    :class:`Cancelled` passes through. Any other exception raises ``RuntimeError(f"{failure}: ...")``
    with ``on_error="raise"``, or with ``on_error="warn"`` becomes a warning ("... its metrics are
    NaN") and the returned error message.
    """
    start = time.perf_counter()
    try:
        result = call()
    except Cancelled:
        raise
    except Exception as exc:  # noqa: BLE001 - reported, or re-raised with context
        message = f"{type(exc).__name__}: {exc}"
        if on_error == "raise":
            raise RuntimeError(f"{failure}: {message}") from exc
        warnings.warn(f"{failure} ({message}); its metrics are NaN.", RuntimeWarning, stacklevel=3)
        return None, time.perf_counter() - start, message
    return result, time.perf_counter() - start, None


def timed_fit(recalibrator: Any, fit_set: Predictions, on_error: OnError, what: str,
              reuse: Any = None, start: Any = None) -> tuple[float, str | None]:
    """Fit (or, given ``reuse``, ``fit_from(reuse, ...)``; given ``start``, ``fit_continued(start, ...)``)
    and time; see :func:`guarded` for errors."""
    def call() -> Any:
        if start is not None:
            return recalibrator.fit_continued(start, fit_set)
        return recalibrator.fit(fit_set) if reuse is None else recalibrator.fit_from(reuse, fit_set)

    _, seconds, error = guarded(call, on_error, f"{what} failed")
    return seconds, error


def iter_folds(n_folds: int) -> Iterable[int]:
    return range(check_int("n_folds", n_folds, 1))


def check_folds(folds: Sequence[int]) -> list[int]:
    """Explicit fold indices (a protocol's ``folds``): non-empty, integers >= 0, no repeats."""
    values = [check_int("folds", f, 0) for f in np.atleast_1d(np.asarray(folds, dtype=object)).tolist()]
    if not values:
        raise ValueError("Expected at least one fold index in `folds`, but got none.")
    if len(set(values)) != len(values):
        raise ValueError(f"Fold indices are listed more than once in `folds`: {values}.")
    return values


def fold_label(fold: int, folds: Sequence[int]) -> str:
    """How progress names fold index ``fold`` of a run over ``folds``: "fold 2/10" for the usual
    folds 0 .. n-1, "fold 9 (2 of 3 in this run)" for explicit ones (counted from 1, as people do)."""
    if list(folds) == list(range(len(folds))):
        return f"fold {fold + 1}/{len(folds)}"
    return f"fold {fold + 1} ({list(folds).index(fold) + 1} of {len(folds)} in this run)"
