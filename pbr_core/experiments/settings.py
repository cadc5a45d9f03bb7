"""The typed settings of each recalibration study: what a front end fills in, checked here.

Every front end (the dashboard's recalibration pages, ``pbr-calib``, the scripts) builds one of these
frozen values and hands it to its run (:mod:`pbr_core.experiments.runs`); none re-decides a method
fact, a metric, a default or a check:

* a settings value checks itself when it is made (``ValueError`` naming the argument, the pattern of
  the recalibrators' parameters) and :meth:`check` checks it against the data (the smallest test set
  whose ECE says anything, :data:`~pbr_core.experiments.MIN_TEST_ROWS`: :class:`SmallTestSetError`,
  to which a front end adds what to change in its own words);
* method facts come from the registry (:func:`~pbr_core.recalibrators.accepted_params`,
  :func:`~pbr_core.recalibrators.takes`, :func:`~pbr_core.recalibrators.gp_method`), the ECE on binary
  data from :data:`pbr_core.metrics.BINARY_TARGET`, the paper's grid from :mod:`pbr_core.paper`;
* per-method parameters are kept hashable (``((method, ((name, value), ...)), ...)``), so a settings
  value can key a cache.

=====================  ==================================================  ===========================
settings               study                                               run
=====================  ==================================================  ===========================
:class:`PBRSettings`   one PBR / GP fit on a fold, tested on the rest      :func:`~.runs.run_pbr`
:class:`CompareSettings` recalibrators side by side over folds (Table 1)   :func:`~.runs.run_compare`
:class:`SweepSettings` test ECE against n_re (Figure 3)                    :func:`~.runs.run_sweep`
:class:`KLGapSettings` KL against the ECE gap (Figure 2)                   :func:`~.runs.run_kl_gap`
:class:`FitSettings`   one recalibrator to take away, part held out        :func:`~.runs.run_fit`
:class:`GroupGapSettings` does recalibration close the gaps between groups :func:`~.runs.run_group_gaps`
=====================  ==================================================  ===========================
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from pbr_core.evaluation import CV_SCORES
from pbr_core.experiments._protocol import (MIN_TEST_ROWS, SmallTestSetError, check_fit_rows, check_test_rows,
                                            small_file_problem, split_indices)
from pbr_core.metrics import BINARY_TARGET
from pbr_core.paper import PAPER_ALPHAS
from pbr_core.parallel import N_JOBS_WORDS, is_n_jobs
from pbr_core.recalibrators import accepted_params, get_recalibrator, gp_method, method_class, method_family, takes

__all__ = [
    "HOLDOUT_MAX",
    "HOLDOUT_STEP",
    "CompareSettings",
    "FitSettings",
    "GroupGapSettings",
    "KLGapSettings",
    "MethodParams",
    "PBRSettings",
    "SweepSettings",
    "default_holdout_percent",
    "method_settings",
    "min_holdout_percent",
    "params_of",
]

#: Per-method parameters, hashable: ``((method, ((name, value), ...)), ...)``.
MethodParams = tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]


# ---------------------------------------------------------------------------- checks
def _int(name: str, value: Any, low: int, high: int | None = None) -> int:
    if (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low
            or (high is not None and value > high)):
        words = f"an integer of at least {low}" if high is None else f"an integer from {low} to {high}"
        raise ValueError(f"Expected argument `{name}` to be {words}, but got {value!r}.")
    return int(value)


def _number(name: str, value: Any, low: float, high: float | None = None, *, open_low: bool = False,
            open_high: bool = False) -> float:
    ok = (not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
          and math.isfinite(value) and (value > low if open_low else value >= low)
          and (high is None or (value < high if open_high else value <= high)))
    if not ok:
        lo, hi = ("(" if open_low else "["), (")" if open_high else "]")
        words = f"a finite number >= {low:g}" if high is None else f"a number in {lo}{low:g}, {high:g}{hi}"
        raise ValueError(f"Expected argument `{name}` to be {words}, but got {value!r}.")
    return float(value)


def _alphas(name: str, values: Sequence[float]) -> None:
    if not len(values) or any(isinstance(a, bool) or not isinstance(a, (int, float, np.integer, np.floating))
                               or not math.isfinite(a) or a < 0 for a in values):
        raise ValueError(f"Expected argument `{name}` to be a non-empty list of finite numbers >= 0, but got "
                         f"{list(values)!r}.")


def _check_common(s: Any) -> None:
    """The checks every study shares: the split seed, the binary ECE, the worker processes."""
    _int("seed", s.seed, 0)
    BINARY_TARGET.check(s.binary_ece, "binary_ece")
    if hasattr(s, "n_jobs") and not is_n_jobs(s.n_jobs):
        raise ValueError(f"Expected argument `n_jobs` to be {N_JOBS_WORDS}, but got {s.n_jobs!r}.")


def method_settings(method: str, alpha: float | None = None, max_iter: int | None = None) -> dict[str, Any]:
    """``method``'s settings from a front end's two shared controls: the PBR methods' alpha (unless None)
    and the optimisers' iteration budget (where the method has one; None: its default)."""
    params = accepted_params(method, max_iter=max_iter)
    if alpha is not None and takes(method, "alpha"):
        params["alpha"] = alpha
    return params


def params_of(params: Mapping[str, Mapping[str, Any]]) -> MethodParams:
    """Per-method parameters as :data:`MethodParams` (methods without any left out)."""
    return tuple((m, tuple(sorted(p.items()))) for m, p in params.items() if p)


# ---------------------------------------------------------------------------- one PBR fit
@dataclass(frozen=True)
class PBRSettings:
    """One PBR (or GP calibration) fit on fold 0's recalibration rows, tested on the rest, with its
    bounds; alpha fixed, or chosen by cross-validation inside the recalibration rows (``alpha=None``:
    :class:`~pbr_core.recalibrators.PBRCV` over ``alpha_grid``, ``cv_folds`` folds, ``cv_score``)."""

    objective: str = "pbr"               # "pbr", "pbr_total" or "gp" (GP calibration: no alpha)
    mean_approx: bool = False
    alpha: float | None = 0.5            # None: choose automatically on the recalibration data
    alpha_grid: tuple[float, ...] = PAPER_ALPHAS
    cv_folds: int = 5
    cv_score: str = "ece"
    n_re: int = 1000
    seed: int = 0
    eps: float = 0.05
    lipschitz: float = 1.0
    max_iter: int | None = None
    binary_ece: str = BINARY_TARGET.default
    prior_split: float = 0.0             # > 0: share of the n_re rows that choose the prior (bounds valid as stated)
    n_jobs: int = 1                      # automatic alpha: folds fitted at once, in worker processes

    def __post_init__(self) -> None:
        gp_method(self.objective, bool(self.mean_approx))  # ValueError naming an objective without a method
        _check_common(self)
        _int("n_re", self.n_re, 2)
        if self.alpha is not None:
            _number("alpha", self.alpha, 0.0)
        _alphas("alpha_grid", self.alpha_grid)
        _int("cv_folds", self.cv_folds, 2)
        if self.cv_score not in CV_SCORES:
            raise ValueError(f"Expected argument `cv_score` to be 'ece', 'brier' or 'nll', but got {self.cv_score!r}.")
        _number("eps", self.eps, 0.0, 1.0, open_low=True, open_high=True)
        _number("lipschitz", self.lipschitz, 0.0)
        if self.max_iter is not None:
            _int("max_iter", self.max_iter, 1)
        _number("prior_split", self.prior_split, 0.0, 0.9)

    @property
    def method(self) -> str:
        """The registered method fitted: ``gp_method(objective, mean_approx)``."""
        return gp_method(self.objective, self.mean_approx)

    @property
    def uses_alpha(self) -> bool:
        """Whether the method has an alpha (the registry says; GP calibration has none)."""
        return takes(self.method, "alpha")

    @property
    def auto_alpha(self) -> bool:
        """Alpha is chosen by cross-validation inside the recalibration rows."""
        return self.uses_alpha and self.alpha is None

    @property
    def n_fits(self) -> int:
        """Model fits of the run: 1, or every (alpha, fold) of the selection and the final fit."""
        return len(self.alpha_grid) * self.cv_folds + 1 if self.auto_alpha else 1

    def params(self) -> dict[str, Any]:
        """The method's parameters but alpha: the iteration budget and the prior split where it takes them."""
        return accepted_params(self.method, max_iter=self.max_iter, prior_split=self.prior_split or None)

    def recalibrator(self) -> Any:
        """The unfitted recalibrator of the run: the method at ``alpha``, or a PBRCV wrapping it."""
        params = self.params()
        if not self.auto_alpha:
            if self.uses_alpha:
                params["alpha"] = self.alpha
            return get_recalibrator(self.method, **params)
        from pbr_core.recalibrators import PBRCV

        return PBRCV(get_recalibrator(self.method, **params), alphas=list(self.alpha_grid), cv=self.cv_folds,
                     scoring=self.cv_score, cv_seed=self.seed, binary_ece=self.binary_ece, n_jobs=self.n_jobs)

    def n_fit(self, n: int) -> int:
        """The recalibration rows of a file of ``n`` rows (fold 0's split, as :func:`compare` makes it)."""
        return int(split_indices(n, self.n_re, fold=0, seed=self.seed)[0].shape[0])

    def check(self, n: int, what_to_do: str = "", fit_todo: str = "") -> None:
        """:class:`SmallTestSetError` when a file of ``n`` rows is too small for a measured fit, or its
        recalibration part or its test part is (``fit_todo`` / ``what_to_do`` added to the message:
        :func:`_check_split`); ``ValueError`` when ``n_re`` leaves no row to test on."""
        if self.n_re >= n:
            raise ValueError(f"Expected `n_re` smaller than the number of rows ({n}), but got n_re={self.n_re}.")
        _check_split(n, self.n_re, n - self.n_re, what_to_do, fit_todo)


def _check_split(n: int, n_re: int, n_te: int, what_to_do: str, fit_todo: str) -> None:
    """The front ends' rule for a measured split (``pbr_core.experiments.MIN_FIT_ROWS``): a file below
    ``MIN_MEASURED_ROWS`` rows is refused with its own sentence (what to do: more rows; no n_re can
    help), then a recalibration set below ``MIN_FIT_ROWS`` (``fit_todo``), then a test set below
    ``MIN_TEST_ROWS`` (``what_to_do``)."""
    problem = small_file_problem(n)
    if problem is not None:
        raise SmallTestSetError(problem)
    check_fit_rows(n_re, fit_todo)
    check_test_rows(n_te, what_to_do)


# ---------------------------------------------------------------------------- comparison
@dataclass(frozen=True)
class CompareSettings:
    """Recalibrators fitted on the same random splits and tested on the rest (paper Table 1)."""

    methods: tuple[str, ...] = ("uncalibrated", "temperature")
    n_re: int = 1000
    n_folds: int = 10
    seed: int = 0
    n_te: int | None = None              # test rows per fold; None: all rows not used to fit
    diagrams: bool = True                # keep each method's reliability table on fold 1's test set
    binary_ece: str = BINARY_TARGET.default
    params: MethodParams = ()
    n_jobs: int = 1                      # folds fitted at once, in worker processes
    on_error: str = "warn"               # a failing fit: NaN metrics and its error ("warn"), or raise

    def __post_init__(self) -> None:
        _check_common(self)
        if not self.methods:
            raise ValueError("Expected at least one method in `methods`, but got none.")
        for m in self.methods:
            method_class(m)  # an unknown name is named, with the registered ones
        _int("n_re", self.n_re, 2)
        _int("n_folds", self.n_folds, 1)
        if self.n_te is not None:
            _int("n_te", self.n_te, 1)
        if self.on_error not in ("warn", "raise"):
            raise ValueError(f"Expected argument `on_error` to be 'warn' or 'raise', but got {self.on_error!r}.")

    @classmethod
    def of(cls, methods: Sequence[str], n_re: int, n_folds: int, seed: int = 0, *, alpha: float = 0.5,
           max_iter: int | None = None, **settings: Any) -> "CompareSettings":
        """Settings with each method's parameters from the shared controls (:func:`method_settings`)."""
        return cls(methods=tuple(methods), n_re=int(n_re), n_folds=int(n_folds), seed=int(seed),
                   params=params_of({m: method_settings(m, alpha, max_iter) for m in methods}), **settings)

    def method_params(self) -> dict[str, dict[str, Any]]:
        return {m: dict(p) for m, p in self.params}

    def fits_per_fold(self) -> tuple[int, int]:
        """(fits, of which GP fits) per fold: methods with the same ``Recalibrator.fit_key`` (e.g.
        ``pbr`` and ``pbr_app`` with the same settings) share one fit in ``compare``; alpha by
        cross-validation (``pbr_cv``) counts every fit of its selection (``Recalibrator.n_fits``)."""
        params = self.method_params()
        fits: dict[Any, tuple[str, int]] = {}
        for m in self.methods:
            rec = get_recalibrator(m, **dict(params.get(m) or {}))
            key = rec.fit_key()
            fits.setdefault(("own", m) if key is None else key, (m, rec.n_fits()))
        return (sum(n for _, n in fits.values()), sum(n for m, n in fits.values() if method_family(m) == "gp"))

    @property
    def planned(self) -> int:
        """Rows of the table: one per (fold, method)."""
        return self.n_folds * len(self.methods)

    @property
    def heavy(self) -> bool:
        """Whether a GP method is compared (slow, may use the GPU)."""
        return any(method_family(m) == "gp" for m in self.methods)

    def test_rows(self, n: int) -> int:
        return n - self.n_re if self.n_te is None else int(self.n_te)

    def check(self, n: int, what_to_do: str = "", fit_todo: str = "") -> None:
        """:class:`SmallTestSetError` when a file of ``n`` rows is too small for a measured comparison, or a
        fold's recalibration set or test set is (:func:`_check_split`)."""
        _check_split(n, self.n_re, self.test_rows(n), what_to_do, fit_todo)


@dataclass(frozen=True)
class SweepSettings:
    """Test ECE against the recalibration set size n_re (paper Figure 3)."""

    methods: tuple[str, ...] = ("uncalibrated", "temperature")
    n_re_values: tuple[int, ...] = (10, 50, 100, 250, 500, 1000)
    n_folds: int = 3
    seed: int = 0
    binary_ece: str = BINARY_TARGET.default
    params: MethodParams = ()

    def __post_init__(self) -> None:
        _check_common(self)
        for m in self.methods:
            method_class(m)
        if not self.n_re_values:
            raise ValueError("Expected at least one value in `n_re_values`, but got none.")
        for v in self.n_re_values:
            _int("n_re_values", v, 2)
        _int("n_folds", self.n_folds, 1)

    @classmethod
    def of(cls, methods: Sequence[str], n_re_values: Sequence[int], n_folds: int, seed: int = 0, *,
           alpha: float = 0.5, max_iter: int | None = None, **settings: Any) -> "SweepSettings":
        """Settings with the n_re values in increasing order and each method's parameters from the
        shared controls (:func:`method_settings`), as :meth:`CompareSettings.of`."""
        return cls(methods=tuple(methods), n_re_values=tuple(sorted(int(v) for v in n_re_values)),
                   n_folds=int(n_folds), seed=int(seed),
                   params=params_of({m: method_settings(m, alpha, max_iter) for m in methods}), **settings)

    @property
    def planned(self) -> int:
        return self.n_folds * len(set(self.n_re_values)) * len(self.methods)


@dataclass(frozen=True)
class KLGapSettings:
    """KL against the ECE generalisation gap over alpha (paper Section 6.1, Figure 2)."""

    objective: str = "pbr"               # a registered method that takes alpha
    alphas: tuple[float, ...] = PAPER_ALPHAS
    n_re: int = 1000
    n_folds: int = 10
    seed: int = 0
    eps: float = 0.05
    max_iter: int | None = None
    binary_ece: str = BINARY_TARGET.default
    n_jobs: int = 1                      # folds fitted at once, in worker processes
    batched: bool = False                # every fit in one batch on the GPU (Adam; kl_vs_ece_gap(batched=True))

    def __post_init__(self) -> None:
        _check_common(self)
        if not takes(self.objective, "alpha"):
            raise ValueError(f"Expected argument `objective` to be a method with an alpha, but got {self.objective!r}.")
        _alphas("alphas", self.alphas)
        _int("n_re", self.n_re, 2)
        _int("n_folds", self.n_folds, 1)
        _number("eps", self.eps, 0.0, 1.0, open_low=True, open_high=True)
        if self.max_iter is not None:
            _int("max_iter", self.max_iter, 1)

    def params(self) -> dict[str, Any]:
        """The method's parameters but alpha (a batched study is Adam: the batch's optimiser)."""
        return accepted_params(self.objective, max_iter=self.max_iter, optimizer="adam" if self.batched else None)

    @property
    def planned(self) -> int:
        return len(self.alphas) * self.n_folds

    def check(self, n: int, what_to_do: str = "") -> None:
        """:class:`SmallTestSetError` when the study's test subset (n_re rows) is too small."""
        check_test_rows(self.n_re, what_to_do)


# ---------------------------------------------------------------------------- one recalibrator to take away
#: A front end's holdout control: its step and largest value, in percent.
HOLDOUT_STEP, HOLDOUT_MAX = 5, 50


@dataclass(frozen=True)
class FitSettings:
    """Fit one recalibrator to take away: on every row, or with a share of rows held out to check it."""

    method: str = "temperature"
    alpha: float | None = None           # the PBR methods' alpha; None: the method's default
    holdout: float = 0.2                 # share of the rows held out to check the fit; 0: fit on every row
    seed: int = 0
    max_iter: int | None = None
    binary_ece: str = BINARY_TARGET.default

    def __post_init__(self) -> None:
        _check_common(self)
        method_class(self.method)
        if self.alpha is not None:
            _number("alpha", self.alpha, 0.0)
        _number("holdout", self.holdout, 0.0, 1.0, open_high=True)
        if self.max_iter is not None:
            _int("max_iter", self.max_iter, 1)

    def params(self) -> dict[str, Any]:
        return method_settings(self.method, self.alpha, self.max_iter)

    def split(self, n: int) -> tuple[int, int]:
        """(rows to fit on, rows held out) for a file of n rows; at least 2 to fit, 1 held out if any."""
        held = 0 if self.holdout <= 0 else min(max(1, int(round(self.holdout * n))), n - 2)
        return n - held, held

    def check(self, n: int, what_to_do: str = "") -> None:
        """:class:`SmallTestSetError` when the held-out rows are too few to measure the fit (nothing held
        out: measured on the rows it was fitted on, which a front end says)."""
        held = self.split(n)[1]
        if held:
            check_test_rows(held, what_to_do)


def min_holdout_percent(n: int) -> int | None:
    """The smallest share held out (a multiple of :data:`HOLDOUT_STEP` %, at most :data:`HOLDOUT_MAX` %)
    whose rows reach :data:`~pbr_core.experiments.MIN_TEST_ROWS` in a file of ``n`` rows; None when none does."""
    for percent in range(HOLDOUT_STEP, HOLDOUT_MAX + 1, HOLDOUT_STEP):
        if FitSettings(holdout=percent / 100).split(n)[1] >= MIN_TEST_ROWS:
            return percent
    return None


def default_holdout_percent(n: int) -> int:
    """The share held out a front end proposes: 20 %, or the smallest share that holds out
    ``MIN_TEST_ROWS`` rows when 20 % does not (30 % of a 504-row file: 151 rows), or 0 % (fit on every
    row, measured on them, said so) when no share up to 50 % does."""
    least = min_holdout_percent(n)
    return 0 if least is None else max(20, least)


# ---------------------------------------------------------------------------- groups
@dataclass(frozen=True)
class GroupGapSettings:
    """Does recalibration close the gaps between groups? One method, one grouping, the splits of Compare."""

    method: str = "temperature"
    by: tuple[str, ...] = ()
    n_re: int = 1000
    n_folds: int = 5
    seed: int = 0
    binary_ece: str = BINARY_TARGET.default
    params: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        _check_common(self)
        method_class(self.method)
        _int("n_re", self.n_re, 1)
        _int("n_folds", self.n_folds, 1)

    @classmethod
    def of(cls, method: str, by: Sequence[str], n_re: int, n_folds: int, seed: int = 0, *,
           alpha: float | None = 0.5, max_iter: int | None = None, **settings: Any) -> "GroupGapSettings":
        """Settings with the method's parameters from the shared controls (:func:`method_settings`), as
        :meth:`CompareSettings.of`; ``alpha=None``: the method's own default."""
        return cls(method=method, by=tuple(by), n_re=int(n_re), n_folds=int(n_folds), seed=int(seed),
                   params=tuple(sorted(method_settings(method, alpha, max_iter).items())), **settings)

    def check(self, n: int, what_to_do: str = "") -> None:
        check_test_rows(n - self.n_re, what_to_do)
