"""One recalibrator fitted on one split and tested on the rest, with the paper's bounds for the fit.

The PBR page of the dashboard shows exactly this: fit on the ``n_re`` rows of one fold of
:func:`~pbr_core.experiments.compare` (so its numbers line up with that fold's row of the Compare
table), measure the raw and the recalibrated predictions on the test rows, the ECE on the
recalibration rows, and Corollary 1 and 2 for the fit's KL (:func:`pbr_core.bounds.fit_bounds`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping

import numpy as np

from pbr_core.bounds import BOUND_EPS, BOUND_LIPSCHITZ, fit_bounds, optimal_n_bins
from pbr_core.experiments._protocol import (
    DEFAULT_BINARY_ECE,
    BinaryECE,
    check_predictions,
    evaluation_metrics,
    kl_of,
    split_indices,
    warn_small_test_set,
)
from pbr_core.evaluation import measured_ece
from pbr_core.predictions import Predictions

__all__ = ["HeldOutFit", "fit_and_test"]

Stage = Literal["fit", "predict"]


@dataclass
class HeldOutFit:
    """What :func:`fit_and_test` measured.

    Attributes
    ----------
    recalibrator
        The recalibrator, fitted on ``fit_set``.
    fit_rows, test_rows : numpy.ndarray
        Row indices of the recalibration and test sets in the predictions given.
    fit_set, test_set : Predictions
        Those rows (raw predictions).
    test_probs : numpy.ndarray
        The recalibrated test probabilities.
    before, after : dict
        :func:`~pbr_core.experiments.evaluation_metrics` of the raw and the recalibrated test
        predictions (ECE with B = floor(n_te^(1/3)), accuracy, NLL, Brier).
    ece_re, n_bins_re
        The recalibrated ECE on the rows the bounds are evaluated on (all ``n_re`` recalibration
        rows, or with a GP's ``prior_split`` those the prior did not see), with B = floor(n^(1/3)).
    kl : float
        The fit's KL(q || p); NaN for methods without one.
    bounds : dict
        :func:`pbr_core.bounds.fit_bounds` for those rows and ``kl`` (Corollary 1 and 2); empty
        without a KL.
    n_bound : int
        The rows the bounds and ``ece_re`` are evaluated on.
    bound_prior : {"same_rows", "split"}
        Where the prior came from: fitted on the same rows (bounds approximate) or chosen on other
        rows (``prior_split``; bounds valid as stated).
    fit_report : dict
        The fit's ``fit_report_`` (empty for methods without one).
    """

    recalibrator: Any
    fit_rows: np.ndarray
    test_rows: np.ndarray
    fit_set: Predictions
    test_set: Predictions
    test_probs: np.ndarray
    before: dict[str, float]
    after: dict[str, float]
    ece_re: float
    n_bins_re: int
    kl: float
    bounds: dict[str, float] = field(default_factory=dict)
    fit_report: dict[str, Any] = field(default_factory=dict)
    n_bound: int = 0
    bound_prior: str = "same_rows"


def fit_and_test(preds: Predictions, recalibrator: Any, n_re: int, *, fold: int = 0, seed: int = 0,
                 n_te: int | None = None, binary_ece: BinaryECE = DEFAULT_BINARY_ECE, eps: float = BOUND_EPS,
                 lipschitz: float = BOUND_LIPSCHITZ, on_stage: Callable[[Stage], None] | None = None,
                 fit_params: Mapping[str, Any] | None = None) -> HeldOutFit:
    """Fit ``recalibrator`` on the ``n_re`` recalibration rows of one fold and test it on the rest.

    The split is :func:`~pbr_core.experiments.split_indices` ``(n, n_re, fold=fold, seed=seed,
    n_te=n_te)``, the one :func:`~pbr_core.experiments.compare` uses for that fold, so the test
    metrics equal that fold's row of its table.

    Parameters
    ----------
    preds : Predictions
        Full probability (or logit) vectors and labels.
    recalibrator : Recalibrator
        An unfitted recalibrator (e.g. ``get_recalibrator("pbr", alpha=0.5)`` or a ``PBRCV``).
    n_re : int
        Recalibration set size; the test set is the other rows (or the last ``n_te`` of the fold's
        permutation).
    fold, seed, n_te
        Which split (see :func:`~pbr_core.experiments.split_indices`).
    binary_ece : {"positive", "top_label"}
        Binary data: the ECE of p(y=1) (paper Appendix A; the default, :data:`DEFAULT_BINARY_ECE`)
        or of the top label (the paper's tables).
    eps, lipschitz : float
        The bounds' failure probability and Lipschitz constant L.
    on_stage : callable, optional
        Called with "fit" before the fit and "predict" before the predictions (a front end's
        progress message); progress within them and Stop go through
        :func:`pbr_core.recalibrators.report_progress` and :func:`pbr_core.cancel.cancel_when`.
    fit_params : mapping, optional
        Keyword arguments of the recalibrator's ``fit`` (a ``PBRCV``'s ``progress=``, which hears
        each cross-validation fit).

    Returns
    -------
    HeldOutFit

    Examples
    --------
    >>> import numpy as np, pbr_core
    >>> from pbr_core.experiments import fit_and_test
    >>> from pbr_core.recalibrators import get_recalibrator
    >>> d = np.load("sample_data/cifar10_resnet110.npz")
    >>> preds = pbr_core.Predictions.from_arrays(d["logits"][:600].astype(float), d["labels"][:600])
    >>> h = fit_and_test(preds, get_recalibrator("temperature"), n_re=200)
    >>> h.test_set.n, h.after["ece"] < h.before["ece"], h.bounds
    (400, True, {})
    """
    preds = check_predictions(preds)
    re_idx, te_idx = split_indices(preds.n, n_re, fold=fold, seed=seed, n_te=n_te)
    warn_small_test_set(te_idx.size)  # the PBR page refuses it (MIN_TEST_ROWS)
    fit_set, test_set = preds.subset(re_idx), preds.subset(te_idx)
    if on_stage is not None:
        on_stage("fit")
    recalibrator.fit(fit_set, **dict(fit_params or {}))
    if on_stage is not None:
        on_stage("predict")
    after_te = recalibrator.predict_proba(test_set)
    after_re = recalibrator.predict_proba(fit_set)
    kind = preds.kind
    # The bounds (and the recalibration-set ECE beside them) use the rows the bound is evaluated on:
    # all n_re rows, or with a prior split (``bound_rows_``) only those the prior did not see.
    bound_rows = getattr(recalibrator, "bound_rows_", None)
    bound_set, after_bound = fit_set, after_re
    if bound_rows is not None:
        bound_set, after_bound = fit_set.subset(bound_rows), after_re[bound_rows]
    n_bins_re = optimal_n_bins(bound_set.n)
    kl = kl_of(recalibrator)
    report = getattr(recalibrator, "fit_report_", None)
    return HeldOutFit(
        recalibrator=recalibrator, fit_rows=np.asarray(re_idx), test_rows=np.asarray(te_idx), fit_set=fit_set,
        test_set=test_set, test_probs=after_te,
        before=evaluation_metrics(test_set.probs, test_set.labels, kind, binary_ece),
        after=evaluation_metrics(after_te, test_set.labels, kind, binary_ece),
        ece_re=float(measured_ece(after_bound, bound_set.labels, kind, binary_ece, n_bins=n_bins_re)),
        n_bins_re=n_bins_re, kl=kl,
        bounds={} if math.isnan(kl) else fit_bounds(bound_set.n, kl, eps=eps, lipschitz=lipschitz),
        fit_report=report.to_dict() if hasattr(report, "to_dict") else dict(report or {}),
        n_bound=bound_set.n, bound_prior="split" if bound_rows is not None else "same_rows",
    )
