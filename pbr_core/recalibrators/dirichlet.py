"""Dirichlet calibration with ODIR regularisation (Kull et al., 2019).

Dirichlet calibration is multinomial logistic regression on the log-probabilities:
``q = softmax(W ln p + b)``. It is matrix scaling applied to ``ln p`` instead of the logits, which
makes it a map of probability vectors (the same for any logits of the same p) and gives it the
interpretation of the paper: the class-conditional distributions of p are Dirichlet.

The fit is the authors' ``dirichletcal`` objective (``FullDirichletCalibrator`` with
``reg_norm=True, ref_row=False``): the off-diagonal and intercept regulariser (ODIR) of the paper,
Sec. 4,

    mean NLL + lambda / (K (K - 1)) sum_{i != j} W_ij^2 + mu / K sum_j b_j^2

on the full W. The diagonal is not penalised, so strong regularisation leaves a per-class scaling
of ln p (vector scaling on the log-probabilities). ``dirichletcal``'s default ``ref_row=True``
first subtracts the last class's row; its strong-penalty limit then drops ln p_K from every class's
score, which on CIFAR-100 made the fit far worse than the model (test ECE .19 against .05), so the
paper's plain form is used. Solved by L-BFGS on analytic gradients in float64 (``dirichletcal``
uses Newton's method for K <= 36 and scipy's L-BFGS beyond; tests/recalibrators/test_dirichlet.py
compares the two).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pbr_core._special import log_softmax, softmax

from pbr_core.predictions import Predictions
from pbr_core.recalibrators import _state
from pbr_core.recalibrators._params import (
    FINITE_NON_NEGATIVE,
    MAX_ITERATIONS,
    POSITIVE_NUMBER,
    Constraint,
    int_range,
    or_none,
)
from pbr_core.recalibrators.base import Recalibrator, register
from pbr_core.recalibrators.scaling import fit_penalised_matrix
from pbr_core.recalibrators.temperature import input_smoothing, read_input_smoothing, smoothed_scores

#: The smallest probability whose log is taken when the input holds no exact zero (float64's smallest
#: normal number, as ``dirichletcal``'s ``clip_for_log``).
TINY = np.finfo(np.float64).tiny


def dirichlet_features(preds: Predictions, smoothing: float) -> np.ndarray:
    """ln p of every class: log_softmax of the logits, or ln of the probabilities (mixed with the
    uniform distribution, weight ``smoothing``, when they hold exact zeros; clipped at float64's
    smallest normal number, as ``dirichletcal``'s ``clip_for_log``, otherwise)."""
    if preds.logits is not None:
        return log_softmax(np.asarray(preds.logits, dtype=np.float64), axis=1)
    if smoothing > 0.0:
        return smoothed_scores(preds, smoothing)
    return np.log(np.clip(preds.probs, TINY, 1.0))


def default_penalty(n_classes: int) -> float:
    """The default lambda and mu: 1 up to 10 classes, K (K - 1) / 90 beyond (110 at K = 100).

    ODIR's lambda weighs the mean squared off-diagonal entry of W, so at a fixed lambda the penalty
    on each of the K (K - 1) entries shrinks as K grows while their number grows as K^2. From
    K = 10 on the default keeps the per-entry weight lambda / (K (K - 1)) at its K = 10 value, 1 / 90
    (mu scaled by the same factor). Measured on the bundled CIFAR-100 DenseNet-121 (5000 rows to fit,
    5000 to test; uncalibrated NLL .9535): lambda = mu = 1 overfits (the shared data's DenseNet-121:
    1.4044 against .9831), 110 gives .9037 (better than SMS, .9432, and matrix scaling, .9324), 10^4
    gives .9390. Up to K = 10, where the references are pinned, the default stays 1.
    """
    return max(1.0, n_classes * (n_classes - 1) / 90.0)


@register
class DirichletCalibration(Recalibrator):
    """Dirichlet calibration, ``q = softmax(W ln p + b)``, with the ODIR regulariser.

    Parameters
    ----------
    reg_lambda : float or None
        lambda >= 0, the weight of the mean squared off-diagonal entry of W; None (default):
        :func:`default_penalty` of the number of classes (1 up to 10 classes, K (K - 1) / 90 beyond).
    reg_mu : float or None
        mu >= 0, the weight of the mean squared intercept; None (default): the same as lambda's.
    max_iter : int
        L-BFGS iterations at most.
    tol : float
        L-BFGS projected-gradient tolerance.

    Attributes
    ----------
    weights_ : ndarray of shape (K, K)
        W.
    bias_ : ndarray of shape (K,)
        b.

    Notes
    -----
    The defaults lambda = mu = 1 (in the normalised form above, up to K = 10) suit K = 10: on the CIFAR-10
    ResNet-110 of the shared data (5000 validation rows to fit, 10000 test rows) the test NLL goes
    from .2044 to .1991 (lambda = 0.1: .1896; 10: .2239). With K = 100 and 1000 rows (10100
    parameters) Dirichlet calibration overfits at lambda = 1 and 10^4 (test NLL .98 uncalibrated,
    2.26 and 1.28; the default 110 was not measured there); Kull et al. choose lambda and mu by
    cross-validation over powers of ten, as ``probmetrics``' "dircal-cv" does.
    With 5000 rows lambda = mu = 1 overfits at K = 100 (CIFAR-100 DenseNet-121 of the shared data:
    1.4044 against .9831 uncalibrated, benchmarks/RESULTS_ranked.md), while lambda = mu = 10^4 does
    not (the bundled CIFAR-100 file, 5000 rows to fit and 5000 to test: .9390 against .9535), and the
    default for K > 10, lambda = mu = K (K - 1) / 90 (110 at K = 100, :func:`default_penalty`), gives
    .9037; on the four CIFAR-100 networks of the shared data .9428, 1.0469, .9463, .8064 against
    .9831, 1.1072, .9963, .8462 uncalibrated (benchmarks/RESULTS_ranked_dirichlet.md). One fit at
    K = 100 takes ~18 s with one BLAS thread here, so inner cross-validation over a grid of lambdas
    (dirichletcal's practice) would take minutes: it is not the default.

    References
    ----------
    .. [1] M. Kull, M. Perello-Nieto, M. Kängsepp, T. Silva Filho, H. Song and P. Flach. Beyond
       temperature scaling: obtaining well-calibrated multiclass probabilities with Dirichlet
       calibration. NeurIPS 2019; code: ``dirichletcal``.

    Examples
    --------
    >>> import numpy as np
    >>> from pbr_core.recalibrators import DirichletCalibration
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 3, 500)
    >>> logits = 4.0 * np.eye(3)[labels] + rng.normal(0, 2.0, (500, 3))
    >>> DirichletCalibration().fit(logits, labels).weights_.shape
    (3, 3)
    """

    method: ClassVar[str] = "dirichlet"
    label: ClassVar[str] = "Dirichlet calibration (ODIR)"
    class_power: ClassVar[int] = 2  # a K x K matrix
    uses: ClassVar[str] = "probs"
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "reg_lambda": or_none(FINITE_NON_NEGATIVE), "reg_mu": or_none(FINITE_NON_NEGATIVE),
        "max_iter": int_range(1, MAX_ITERATIONS), "tol": POSITIVE_NUMBER}

    def __init__(self, reg_lambda: float | None = None, reg_mu: float | None = None, max_iter: int = 2000,
                 tol: float = 1e-7) -> None:
        self.reg_lambda = reg_lambda
        self.reg_mu = reg_mu
        self.max_iter = max_iter
        self.tol = tol

    def _fit(self, preds: Predictions) -> None:
        self.input_smoothing_ = input_smoothing(preds)  # exact zeros: see temperature.input_smoothing
        X = dirichlet_features(preds, self.input_smoothing_)
        y = preds.labels
        K = X.shape[1]
        # ln p reaches -700 for hard zeros and -30 for confident networks: the fit is matrix scaling's on
        # ln p, which rescales it (fit_penalised_matrix); the penalty is the normalised ODIR one.
        reg_lambda = default_penalty(K) if self.reg_lambda is None else float(self.reg_lambda)
        reg_mu = default_penalty(K) if self.reg_mu is None else float(self.reg_mu)
        self.weights_, self.bias_ = fit_penalised_matrix(X, y, reg_lambda / (K * (K - 1)), reg_mu / K,
                                                         "Dirichlet calibration", self.max_iter, self.tol)

    def _predict_proba(self, preds: Predictions) -> np.ndarray:
        return softmax(dirichlet_features(preds, self.input_smoothing_) @ self.weights_.T + self.bias_, axis=1)

    def _get_state(self) -> dict[str, Any]:
        return {"weights": self.weights_, "bias": self.bias_, "input_smoothing": self.input_smoothing_}

    def _set_state(self, state: dict[str, Any]) -> None:
        K, fields = self.n_classes_, _state.Fields(state, "state")
        self.weights_ = fields.array("weights", (K, K), shape_note=f"(for {K} classes)")
        self.bias_ = fields.array("bias", (K,), shape_note=f"(one per class, {K} classes)")
        self.input_smoothing_ = fields.number("input_smoothing", low=0.0, high=0.5)
