"""Calibration metrics: the paper's binned ECE and friends, vectorised.

Conventions (paper Section 2.2, Eq. 2 and Appendix A):

* Uniform-width bins I_1 = (0, 1/B], I_2 = (1/B, 2/B], ..., I_B = ((B-1)/B, 1]. A confidence of
  exactly 0 (possible only for binary p(y=1)) is put in I_1. Boundaries are i/B computed in float64.
  (torchmetrics uses [a, b) bins on ``linspace`` edges plus an extra bin holding exactly 1.0, and
  its multiclass path bins and sums in float32, which drifts by ~1e-3 at n = 1e6;
  scikit-learn's ``calibration_curve`` uses (a, b] like us since 1.5 but drops empty bins; netcal
  uses ``histogramdd``'s [a, b) with the last bin closed. All agree away from bin edges.)
* ``probs`` of shape (n, K) -> top-label metrics: confidence max_k p_k, outcome 1[argmax_k p_k = y].
* ``probs`` of shape (n,) -> binary metrics on p(y=1) with outcome y in {0, 1} (Appendix A). The
  same path gives the top-label ECE of top-label-only data: pass (confidence, correct).
* Empty bins contribute 0.

Nothing here loops in Python over samples or over B; large inputs are processed in row chunks so
the temporary memory stays bounded.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, Iterable, Literal, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:  # pandas (~0.4 CPU s) is imported by the one function that builds a table
    import pandas as pd

from pbr_core.bounds import optimal_n_bins, optimal_n_bins_per_axis

__all__ = [
    "accuracy",
    "assign_bins",
    "bin_boundaries",
    "bin_index",
    "BINARY_TARGET",
    "BinaryTarget",
    "BinaryTargetChoice",
    "brier_score",
    "brier_terms",
    "calibration_summary",
    "classwise_ece",
    "confidence_and_outcome",
    "DEFAULT_BINARY_TARGET",
    "default_n_boot",
    "ece",
    "ece_inputs",
    "ece_bootstrap_ci",
    "ece_curve",
    "ece_k",
    "mce",
    "NLL_EPS",
    "nll",
    "nll_terms",
    "nll_infinite_rows",
    "nll_shown",
    "reliability_diagram",
    "target_brier_nll",
    "top_label_confidence",
    "TopLabelConfidence",
]

#: Elements per temporary array in chunked code paths (32 MB of float64).
_CHUNK = 1 << 22

#: What the ECE of binary data measures: "top_label", the confidence of the predicted class (Eq. 2,
#: the paper's tables), or "positive", p(y=1) against y (the binary ECE of Appendix A). How each
#: choice turns into metric inputs is :func:`ece_inputs`, here only.
BinaryTarget = Literal["positive", "top_label"]


@dataclass(frozen=True)
class BinaryTargetChoice:
    """The choice of the ECE on binary data, decided once for every front end: its values, the words
    that name each wherever such an ECE is shown, and the app's default.

    Pages, the report, ``pbr-calib`` and the protocols read :data:`BINARY_TARGET` (this class's one
    value): :attr:`default` as their default, :meth:`measured` for what a number of data of some kind
    measures, :attr:`words` to say which ECE it is.
    """

    values: tuple[str, ...]
    words: Mapping[str, str]
    default: str

    def check(self, value: str, name: str = "binary_target") -> str:
        """``value`` if it is one of :attr:`values`, else a ``ValueError`` naming the argument ``name``."""
        if value not in self.values:
            raise ValueError(f"Expected argument `{name}` to be 'positive' or 'top_label', but got {value!r}.")
        return value

    def measured(self, kind: str, choice: str) -> BinaryTarget:
        """What the ECE of predictions of ``kind`` (``Predictions.kind``) measures under ``choice``:
        "positive" (p(y=1)) for binary data with that choice, "top_label" for everything else
        (multiclass data, binary data with "top_label", a file of top-label confidences)."""
        return "positive" if kind == "binary" and choice == "positive" else "top_label"


#: The app's ECE on binary data and its words. p(y=1) by default: the dashboard's sidebar and every
#: page, the HTML report, ``pbr-calib evaluate / compare / fit --select-alpha`` and the experiment
#: protocols' defaults read it, so the same binary file shows the same test ECE everywhere; p(y=1) is
#: what a binary model predicts and what its users read. The paper's tables use the top label: the
#: reproduction scripts pass :data:`pbr_core.paper.PAPER_BINARY_ECE`, so their tables do not depend
#: on this default.
BINARY_TARGET = BinaryTargetChoice(
    values=("positive", "top_label"),
    words={
        "positive": "ECE of p(y=1) (the binary ECE of the paper's Appendix A)",
        "top_label": "top-label ECE (confidence of the predicted class), as in the paper's tables",
    },
    default="positive",
)

#: :attr:`BINARY_TARGET.default <BinaryTargetChoice.default>`, under the name the API documents.
DEFAULT_BINARY_TARGET: BinaryTarget = BINARY_TARGET.default  # type: ignore[assignment]


class TopLabelConfidence(np.ndarray):
    """Top-label confidences, as :meth:`Predictions.metric_inputs() <pbr_core.Predictions.metric_inputs>`
    returns them for data without probability vectors (a top-label or (confidence, correct) file).

    A plain 1-D array is binary p(y=1) to the metrics, whose accuracy predicts class 1 where p > 0.5;
    a confidence is the probability that the prediction was right, so its accuracy is the share of
    right predictions. :func:`accuracy` and :func:`calibration_summary` read this mark as
    ``top_label_only=True`` (audit 10a: ``calibration_summary(*preds.metric_inputs())['accuracy']`` on
    the bundled LLM records gave 0.7269, the share of right answers being 0.7201); every other metric is
    the same number either way. Arithmetic on it gives a plain array (``1 - c`` is not a confidence);
    a slice of it stays marked.
    """

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        plain = lambda a: a.view(np.ndarray) if isinstance(a, TopLabelConfidence) else a  # noqa: E731
        if "out" in kwargs:
            kwargs["out"] = tuple(plain(o) for o in kwargs["out"])
        return getattr(ufunc, method)(*map(plain, inputs), **kwargs)


def top_label_confidence(confidence: np.ndarray) -> TopLabelConfidence:
    """``confidence`` (1-D) marked as top-label confidences (:class:`TopLabelConfidence`), not p(y=1)."""
    return np.asarray(confidence, dtype=np.float64).view(TopLabelConfidence)


#: Whether the warning of :func:`_binary_columns` was given in this process (it is given once, by
#: whichever metric first gets a two-column array without ``binary_target``).
_TWO_COLUMN_WARNED = False

#: What each metric computes from a two-column (binary) ``probs`` without ``binary_target`` (the
#: warning's words): every one of them reads it as the top label, so the interval, the curve and the
#: bars of an ECE measure the same thing as the ECE beside them (review 11 finding 5: an interval
#: of the top label, (0.0009, 0.0123), beside the ECE of p(y=1), 0.0186, on KITTI xgboost).
_TWO_COLUMN_MEANS = {
    "ece": "this is the top-label ECE",
    "mce": "this is the top-label MCE",
    "ece_curve": "these are top-label ECEs",
    "ece_bootstrap_ci": "this is an interval of the top-label ECE",
    "split_estimates": "these are estimates of the top-label ECE",
    "split_differences": "these are estimates of the top-label ECE",
    "reliability_diagram": "these are the top label's bins",
    "calibration_summary": "this is the top-label ECE",
    "ece_equal_mass": "this is the top-label ECE with equal-mass bins",
    "reliability_equal_mass": "these are the top label's equal-mass bins",
    "ece_debiased": "this is the top label's debiased ECE",
    "smooth_ece": "this is the top label's smooth ECE",
    "smooth_reliability": "this is the top label's smoothed curve",
}
#: The two-column Brier score's words (:func:`brier_score`'s warning, and :func:`calibration_summary`'s).
_TWO_COLUMN_BRIER = ("its Brier score sums the squared errors of both columns (twice scikit-learn's "
                     "brier_score_loss)")


def _binary_columns(probs: Any, binary_target: BinaryTarget | None, name: str) -> Any:
    """``probs`` as the binned metrics of this module measure it (:data:`_TWO_COLUMN_MEANS`, and
    :func:`brier_score`): a two-column (binary) matrix with ``binary_target="positive"`` becomes
    p(y=1); with None it stays the top label, as these functions have always measured it (the paper's
    Eq. 2; their results are pinned against netcal's and torchmetrics'), and a warning, once per
    process whichever of them gets such an array first, says so. The app measures p(y=1) of binary
    data (plot.reliability, pbr-calib evaluate, the dashboard; :data:`BINARY_TARGET`): audit 10a set
    ``calibration_summary(preds.probs, ...)`` (top label, ECE 0.018) beside the reliability diagram of
    the same array (p(y=1), 0.098) and found no word of the difference."""
    global _TWO_COLUMN_WARNED
    if binary_target is not None:
        check_binary_target(binary_target)
        return ece_inputs(probs, None, binary_target)[0]
    if np.ndim(probs) == 2 and np.shape(probs)[1] == 2 and not _TWO_COLUMN_WARNED:
        _TWO_COLUMN_WARNED = True
        # brier_score of a 1-D p(y=1) is the two-class sum too: only the keyword gives p(y=1) alone there
        one_d = "" if name == "brier_score" else " (or the 1-D p(y=1): preds.p_positive)"
        if name == "brier_score":
            what = (f"{_TWO_COLUMN_BRIER}, not the Brier score of p(y=1) alone (scikit-learn's) that pbr-calib "
                    "evaluate and the dashboard show for binary data")
        else:
            brier = f", and {_TWO_COLUMN_BRIER}" if name == "calibration_summary" else ""
            what = (f"{_TWO_COLUMN_MEANS[name]} (the confidence of the predicted class, the paper's Eq. 2), not the "
                    "ECE of p(y=1) that pbr_core.plot.reliability, pbr-calib evaluate and the dashboard show for "
                    f"binary data{brier}")
        warnings.warn(
            f"{name}: `probs` has two columns (binary data), so {what}. Pass binary_target='positive'{one_d} "
            "for that, to this and to every other metric of pbr_core "
            "(ece, mce, ece_curve, ece_bootstrap_ci, reliability_diagram, brier_score, calibration_summary, and "
            "pbr_core.estimators' ece_equal_mass, reliability_equal_mass, ece_debiased, smooth_ece, smooth_reliability); "
            "binary_target='top_label' keeps this and says nothing. (This warning is shown once.)",
            UserWarning, stacklevel=3)
    return probs


# --------------------------------------------------------------------------- validation
def _check_n_bins(n_bins: int, name: str = "n_bins") -> int:
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"Expected argument `{name}` to be an integer larger than 0, but got {n_bins!r}.")
    return int(n_bins)


def _check_level(level: float) -> float:
    if not isinstance(level, (int, float, np.floating)) or not 0 < level < 1:
        raise ValueError(f"Expected argument `level` to be a float in (0, 1), but got {level!r}.")
    return float(level)


def _check_probs(probs: np.ndarray) -> np.ndarray:
    if probs is None:  # Predictions.probs of top-label files: audit 9a's "got shape ()" named nothing
        raise ValueError("`probs` is None: these predictions have no probability vectors (a top-label or "
                         "(confidence, correct) file). Pass `*preds.metric_inputs()` (the confidence and whether "
                         "the prediction was right), e.g. `ece(*preds.metric_inputs())`.")
    try:
        p = np.asarray(probs, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"Expected `probs` to hold numbers, but converting it to float failed: {err}") from None
    if p.ndim not in (1, 2):
        raise ValueError(f"Expected `probs` of shape (n, K) or (n,), but got shape {p.shape}.")
    if p.shape[0] == 0:
        raise ValueError("Expected at least one prediction, but got an empty array.")
    if p.ndim == 2 and p.shape[1] == 0:
        raise ValueError("Expected `probs` of shape (n, K) with K >= 1, but got K = 0.")
    # Two reductions instead of three boolean temporaries: min/max propagate NaN, so one test
    # catches NaN, inf and out-of-range values; the slow checks only run to word the message.
    lo, hi = p.min(), p.max()
    if not (lo >= 0.0 and hi <= 1.0):
        if not np.all(np.isfinite(p)):
            raise ValueError("`probs` contains NaN or infinite values.")
        raise ValueError("`probs` has values outside [0, 1].")
    return p


def _check_labels(labels: np.ndarray, n: int) -> np.ndarray:
    y = np.asarray(labels)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"Expected `labels` of shape ({n},), but got shape {y.shape}.")
    if y.dtype.kind not in "biuf":
        raise ValueError(f"Expected `labels` to hold integer class indices, but got dtype {y.dtype}.")
    if y.dtype.kind == "f":
        if not np.all(np.isfinite(y)):
            raise ValueError("`labels` contains NaN or infinite values.")
        if np.any(y != np.round(y)):
            raise ValueError("Expected `labels` to hold integer class indices, but got non-integer values.")
    return y


def _validated(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Checked float64 ``probs`` ((n,) or (n, K)) and int64 ``labels``; every public metric starts here."""
    p = _check_probs(probs)
    y = _check_labels(labels, p.shape[0])
    # Labels are whole numbers by now, so a min/max pair decides the range without temporaries.
    lo, hi = y.min(), y.max()
    if p.ndim == 1:
        if lo < 0 or hi > 1:
            raise ValueError("A 1-D `probs` is binary p(y=1), so `labels` must be 0 or 1.")
    elif lo < 0 or hi >= p.shape[1]:
        raise ValueError(f"`labels` has values outside 0..{p.shape[1] - 1}.")
    return p, y.astype(np.int64, copy=False)


def _conf_out(p: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if p.ndim == 1:
        return p, y.astype(np.float64)
    pred = p.argmax(axis=1)
    return p[np.arange(p.shape[0]), pred], (pred == y).astype(np.float64)


def _as_matrix(p: np.ndarray) -> np.ndarray:
    """A 1-D p(y=1) as the two-column probability matrix [1 - p, p]; 2-D input unchanged."""
    return np.column_stack([1.0 - p, p]) if p.ndim == 1 else p


def confidence_and_outcome(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two per-sample numbers every binned metric needs.

    Returns ``(confidence, outcome)``: for (n, K) input the top-label confidence and 1[correct];
    for (n,) input p(y=1) itself and the 0/1 label. Raises ``ValueError`` naming the problem for
    bad shapes, NaN/inf, values outside [0, 1] and labels that are not valid class indices.
    """
    return _conf_out(*_validated(probs, labels))


def check_binary_target(target: str, name: str = "binary_target") -> str:
    """:meth:`BINARY_TARGET.check <BinaryTargetChoice.check>`: ``target``, or a ``ValueError`` naming ``name``."""
    return BINARY_TARGET.check(target, name)


def ece_inputs(probs: np.ndarray, labels: np.ndarray, target: BinaryTarget) -> tuple[np.ndarray, np.ndarray]:
    """The ``(probs, labels)`` the binned metrics take for the chosen :data:`BinaryTarget`.

    Binary probabilities (shape (n, 2)) with ``target="positive"`` become p(y=1) = ``probs[:, 1]``
    (Appendix A); everything else, a 1-D p(y=1) included, is returned unchanged (the top label,
    Eq. 2). No copy is made and nothing is validated here: the metrics validate.
    """
    if target == "positive" and np.ndim(probs) == 2 and np.shape(probs)[1] == 2:
        # a nested list or a DataFrame has no [:, 1]: the column of its array
        return (probs if isinstance(probs, np.ndarray) else np.asarray(probs))[:, 1], labels
    return probs, labels


def _probs_labels(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Validated (n, K) probabilities and int64 labels; a 1-D p(y=1) becomes [1 - p, p]."""
    p, y = _validated(probs, labels)
    return _as_matrix(p), y


# --------------------------------------------------------------------------- binning
def bin_boundaries(n_bins: int) -> np.ndarray:
    """Right edges 1/B, 2/B, ..., 1 of the uniform-width bins (float64)."""
    n_bins = _check_n_bins(n_bins)
    return np.arange(1, n_bins + 1, dtype=np.float64) / n_bins


def assign_bins(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """0-based bin of each value for sorted ``edges``, bins right-closed as in Eq. 2.

    Bin j is (e_{j-1}, e_j]; values at or below the first edge go to bin 0. ``edges`` may be the
    inner edges (B - 1 of them) or the upper edges (B, the last one 1): for values in [0, 1] both
    give the same bins. The one rule for every binning of the package with edges other than the
    uniform i/B (equal-mass bins, histogram binning's and BBQ's saved maps, streamed cells).
    """
    return np.searchsorted(edges, values, side="left")


def bin_index(confidence: np.ndarray, n_bins: int) -> np.ndarray:
    """0-based bin of each value: i such that i/B < c <= (i+1)/B (c = 0 -> 0), paper Eq. 2.

    Computed as ceil(c B) - 1 and then corrected by one comparison with each neighbouring edge,
    so the result equals ``assign_bins(c, bin_boundaries(B))`` exactly (float rounding of c B can
    be off by one right at an edge) at about a third of its cost on large arrays.
    """
    edges = bin_boundaries(n_bins)
    B = edges.size
    c = np.asarray(confidence, dtype=np.float64)
    t = c * B
    np.ceil(t, out=t)
    idx = t.astype(np.intp)
    del t
    idx -= 1
    np.clip(idx, 0, B - 1, out=idx)
    idx += c > edges[idx]
    np.minimum(idx, B - 1, out=idx)
    lower = np.concatenate([[-1.0], edges[:-1]])
    idx -= c <= lower[idx]
    return idx


def _bin_sums(confidence: np.ndarray, outcome: np.ndarray, n_bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    idx = bin_index(confidence, n_bins)
    count = np.bincount(idx, minlength=n_bins).astype(np.float64)
    sum_conf = np.bincount(idx, weights=confidence, minlength=n_bins)
    sum_out = np.bincount(idx, weights=outcome, minlength=n_bins)
    return count, sum_conf, sum_out


def _resolve_n_bins(n_bins: int | None, n: int) -> int:
    return optimal_n_bins(n) if n_bins is None else _check_n_bins(n_bins)


def _ece_from_sums(sum_gap: np.ndarray, n: int) -> float:
    # sum_i (|I_i|/n) |mean conf - mean outcome| = sum_i |sum conf - sum outcome| / n.
    return float(np.abs(sum_gap).sum() / n)


# --------------------------------------------------------------------------- top-label / binary
def ece(probs: np.ndarray, labels: np.ndarray, n_bins: int | None = None, *,
        binary_target: BinaryTarget | None = None) -> float:
    """Expected calibration error with uniform-width binning (paper Eq. 2).

    ECE = sum_i (|I_i| / n) * |mean confidence in I_i - accuracy in I_i|.

    Parameters
    ----------
    probs : array of shape (n, K) or (n,)
        Class probabilities (top-label ECE) or binary p(y=1) (binary ECE, Appendix A).
    labels : array of shape (n,)
        True labels.
    n_bins : int or None
        Number of bins B; None uses the paper's optimum floor(n^(1/3)) (Theorem 1).
    binary_target : {"positive", "top_label"} or None
        What a two-column (binary) ``probs`` measures: "positive", p(y=1) (what
        ``pbr_core.plot.reliability``, ``pbr-calib evaluate`` and the dashboard show); "top_label",
        the confidence of the predicted class. None: the top label, with a warning (once) that says
        so. No effect on other shapes.

    Examples
    --------
    >>> import numpy as np, pbr_core
    >>> round(pbr_core.ece(np.array([0.9, 0.8, 0.3]), np.array([1, 1, 0]), n_bins=2), 4)
    0.2
    """
    conf, out = confidence_and_outcome(_binary_columns(probs, binary_target, "ece"), labels)
    B = _resolve_n_bins(n_bins, conf.shape[0])
    sum_gap = np.bincount(bin_index(conf, B), weights=conf - out, minlength=B)
    return _ece_from_sums(sum_gap, conf.shape[0])


def mce(probs: np.ndarray, labels: np.ndarray, n_bins: int | None = None, *,
        binary_target: BinaryTarget | None = None) -> float:
    """Maximum calibration error: the largest |confidence - accuracy| over non-empty bins.

    Same bins and inputs (``binary_target`` included) as :func:`ece`; MCE >= ECE always (a maximum
    bounds a weighted mean).
    """
    conf, out = confidence_and_outcome(_binary_columns(probs, binary_target, "mce"), labels)
    B = _resolve_n_bins(n_bins, conf.shape[0])
    count, sum_conf, sum_out = _bin_sums(conf, out, B)
    nz = count > 0
    return float(np.max(np.abs(sum_conf[nz] - sum_out[nz]) / count[nz]))


def _check_bin_list(n_bins: Iterable[int]) -> np.ndarray:
    if isinstance(n_bins, (int, np.integer)):
        raise ValueError(
            f"Expected argument `n_bins` to be an iterable of integers such as range(1, 201), but got {n_bins!r}."
        )
    Bs = np.asarray(list(n_bins))
    if Bs.size == 0:
        return np.zeros(0, dtype=np.int64)
    if Bs.ndim != 1 or Bs.dtype.kind not in "iu":
        raise ValueError(f"Expected every `n_bins` to be an integer larger than 0, but got {Bs!r}.")
    if Bs.min() < 1:
        raise ValueError(f"Expected every `n_bins` to be an integer larger than 0, but got {int(Bs.min())}.")
    return Bs.astype(np.int64)


def ece_curve(probs: np.ndarray, labels: np.ndarray, n_bins: Iterable[int] = range(1, 201), *,
              binary_target: BinaryTarget | None = None) -> np.ndarray:
    """ECE (paper Eq. 2) for every B in ``n_bins`` in one vectorised pass.

    The outcome is 0 or 1, so the rows split into "outcome 1" and "outcome 0". Each part's
    confidences are sorted once (a plain sort, several times cheaper than an argsort) and summed
    cumulatively (c - 1 for outcome 1, c for outcome 0); one ``searchsorted`` per part finds every
    bin edge of every B, and ``np.add.reduceat`` sums the per-bin |gaps|. Cost O(n log n +
    sum(B) log n); no Python loop over samples or over B (the B values are only split into groups
    when sum(B) is in the millions, to bound memory). ``result[j]`` equals
    ``ece(probs, labels, n_bins[j])`` up to float rounding of the cumulative sums (~1e-15).
    ``binary_target``: what a two-column (binary) ``probs`` measures, as in :func:`ece` (None: the top
    label, with the one-time warning).
    """
    conf, out = confidence_and_outcome(_binary_columns(probs, binary_target, "ece_curve"), labels)
    Bs = _check_bin_list(n_bins)
    if Bs.size == 0:
        return np.zeros(0)
    n = conf.shape[0]
    hit = out == 1.0
    parts = []
    for values, shift in ((conf[hit], 1.0), (conf[~hit], 0.0)):
        values.sort()
        parts.append((values, np.concatenate([[0.0], np.cumsum(values - shift)])))
    del conf, out, hit
    result = np.empty(Bs.size)
    cum_B = np.cumsum(Bs)
    start = 0
    while start < Bs.size:
        base = cum_B[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(cum_B, base + _CHUNK, side="right")))
        result[start:stop] = _curve_group(parts, Bs[start:stop], n)
        start = stop
    return result


def _curve_group(parts: list[tuple[np.ndarray, np.ndarray]], Bs: np.ndarray, n: int) -> np.ndarray:
    # All right edges of all B, concatenated: for B, edges k/B for k = 1..B (same float as bin_boundaries).
    reps = np.repeat(Bs, Bs)
    starts = np.concatenate([[0], np.cumsum(Bs)[:-1]])
    last = np.cumsum(Bs) - 1
    k = np.arange(reps.size) - np.repeat(starts, Bs) + 1
    edges = k / reps.astype(np.float64)
    gaps = np.zeros(edges.size)
    for sorted_conf, cum in parts:
        # Rows with c <= edge. c = 0 falls in the first bin, consistent with bin_index; the last
        # edge of every B is 1.0 and takes everything left, so the last bin is closed.
        upto = np.searchsorted(sorted_conf, edges, side="right")
        upto[last] = sorted_conf.size
        lower = np.empty_like(upto)
        lower[1:] = upto[:-1]
        lower[starts] = 0
        gaps += cum[upto] - cum[lower]
    return np.add.reduceat(np.abs(gaps), starts) / n


# --------------------------------------------------------------------------- multiclass
def _row_chunks(n: int, width: int) -> Iterable[slice]:
    step = max(1, _CHUNK // max(width, 1))
    for s in range(0, n, step):
        yield slice(s, min(n, s + step))


def classwise_ece(
    probs: np.ndarray, labels: np.ndarray, n_bins: int | None = None, reduce: bool = True
) -> float | np.ndarray:
    """Classwise ECE: the binned ECE of p_k against 1[y = k] for each class k, averaged over k.

    Each class uses the same uniform bins as :func:`ece` (paper Eq. 2 applied to the binary
    problem "is it class k", Appendix A). For a 1-D binary p(y=1) the two classes are [1 - p, p].

    Parameters
    ----------
    probs : array of shape (n, K) or (n,)
    labels : array of shape (n,)
    n_bins : int or None
        B; None uses floor(n^(1/3)).
    reduce : bool
        True returns the mean over classes (float); False the per-class values, shape (K,).

    Examples
    --------
    >>> import numpy as np
    >>> round(classwise_ece(np.array([[0.8, 0.2], [0.3, 0.7]]), np.array([0, 0]), n_bins=2), 4)
    0.45
    """
    p, y = _probs_labels(probs, labels)
    n, K = p.shape
    B = _resolve_n_bins(n_bins, n)
    offsets = np.arange(K, dtype=np.intp) * B
    sums = np.zeros(K * B)
    for rows in _row_chunks(n, K):
        pc = p[rows]
        idx = bin_index(pc, B)
        idx += offsets
        resid = pc.copy()
        resid[np.arange(pc.shape[0]), y[rows]] -= 1.0
        sums += np.bincount(idx.ravel(), weights=resid.ravel(), minlength=K * B)
    per_class = np.abs(sums.reshape(K, B)).sum(axis=1) / n
    return float(per_class.mean()) if reduce else per_class


def _check_classes(classes: Sequence[int] | None, K: int) -> np.ndarray:
    if classes is None:
        return np.arange(K)
    c = np.asarray(classes)
    if c.ndim != 1 or c.size == 0 or c.dtype.kind not in "iu":
        raise ValueError(f"Expected argument `classes` to be a non-empty list of class indices, but got {classes!r}.")
    if np.any((c < 0) | (c >= K)):
        raise ValueError(f"Expected every entry of `classes` in 0..{K - 1}, but got {classes!r}.")
    if np.unique(c).size != c.size:
        raise ValueError(f"Expected the entries of `classes` to be distinct, but got {classes!r}.")
    return c.astype(np.intp)


def ece_k(
    probs: np.ndarray,
    labels: np.ndarray,
    n_bins_per_axis: int | None = None,
    classes: Sequence[int] | None = None,
) -> float:
    """ECE_K: binned estimate of CE_K = E ||P(Y | f(X)) - f(X)||_1 (paper Eq. ece_def_K, Theorem 3).

    Each probability axis is cut into B' uniform bins ((a, b] as in Eq. 2), giving B = B'^K
    regions of [0, 1]^K. Only occupied regions matter, so regions are identified by hashing the
    per-axis bin indices (at most n distinct), never by enumerating all B'^K of them:

        ECE_K = sum_regions (|I_i| / n) * || mean p in I_i - mean one-hot in I_i ||_1.

    Parameters
    ----------
    probs : array of shape (n, K) or (n,)
        Class probabilities (a 1-D binary p(y=1) is treated as [1 - p, p]).
    labels : array of shape (n,)
    n_bins_per_axis : int or None
        B'. None uses floor(n^(1/(K'+2))), the rate-optimal choice after Theorem 3.
    classes : sequence of int or None
        The "any K' classes" variant (Appendix C.8): only these coordinates are binned and enter
        the L1 distance. None uses all K classes.

    Warns
    -----
    UserWarning
        When B'^K' > n: most regions then hold at most one sample and the estimate mostly
        measures noise rather than miscalibration (the curse of dimensionality of Theorem 3).

    Examples
    --------
    >>> import numpy as np
    >>> round(ece_k(np.array([[0.8, 0.2], [0.3, 0.7]]), np.array([0, 1]), n_bins_per_axis=1), 4)
    0.1
    """
    p, y = _probs_labels(probs, labels)
    n, K = p.shape
    cols = _check_classes(classes, K)
    Kp = cols.size
    Bp = optimal_n_bins_per_axis(n, Kp) if n_bins_per_axis is None else _check_n_bins(n_bins_per_axis, "n_bins_per_axis")
    log10_regions = Kp * math.log10(Bp)
    if log10_regions > math.log10(n):
        warnings.warn(
            f"ECE_K with {Bp} bins per axis over {Kp} class{'es' if Kp != 1 else ''} has {Bp}^{Kp} "
            f"(about 10^{log10_regions:.1f}) "
            f"regions but only {n} samples, so most regions hold at most one sample and the estimate "
            f"mostly measures noise, not miscalibration. Use fewer bins per axis "
            f"(floor(n^(1/(K'+2))) = {optimal_n_bins_per_axis(n, Kp)}) or fewer classes (`classes=[...]`).",
            UserWarning,
            stacklevel=2,
        )
    region = _occupied_regions(p, cols, Bp, exact_keys=log10_regions < 18.0)
    R = int(region.max()) + 1
    sums = np.zeros(R * Kp)
    axis = np.arange(Kp)
    for rows in _row_chunks(n, Kp):
        resid = p[rows][:, cols]
        resid -= y[rows, None] == cols[None, :]
        flat = region[rows, None] * Kp + axis
        sums += np.bincount(flat.ravel(), weights=resid.ravel(), minlength=R * Kp)
    return float(np.abs(sums).sum() / n)


def _occupied_regions(p: np.ndarray, cols: np.ndarray, n_bins_per_axis: int, exact_keys: bool) -> np.ndarray:
    """Region number 0..R-1 of every row (R <= n occupied regions of the B'^K' grid).

    With ``exact_keys`` (B'^K' < 1e18 fits int64) a row's key is the mixed-radix number of its
    per-axis bin indices; otherwise rows of the index matrix are deduplicated with np.unique.
    """
    n = p.shape[0]
    Bp = n_bins_per_axis
    keys = np.empty(n, dtype=np.int64) if exact_keys else np.empty((n, cols.size), dtype=np.int64)
    for rows in _row_chunks(n, cols.size):
        idx = bin_index(p[rows][:, cols], Bp)
        if exact_keys:
            key = np.zeros(idx.shape[0], dtype=np.int64)
            for j in range(cols.size):  # a loop over axes, not samples
                key *= Bp
                key += idx[:, j]
            keys[rows] = key
        else:
            keys[rows] = idx
    _, region = np.unique(keys, axis=None if exact_keys else 0, return_inverse=True)
    return region.ravel()


# --------------------------------------------------------------------------- uncertainty
def _bootstrap_bin_sums(keys: np.ndarray, gap: np.ndarray, n_keys: int, n_boot: int,
                        rng: np.random.Generator) -> np.ndarray:
    """Per-key sums of ``gap`` over ``n_boot`` resamples (with replacement) of the rows: (n_boot, n_keys).

    A key is a row's bin (or bin and half, see :func:`ece_bootstrap_ci`), held fixed. A block of m
    replicates draws an (m, s) index matrix, gathers key and gap, offsets replicate r's keys by
    r*n_keys and does one ``bincount``; rows are drawn in slices of s so that m*s <= _CHUNK
    (bounded memory for any n). Cost O(n * n_boot).
    """
    n = keys.shape[0]
    sums = np.zeros((n_boot, n_keys))
    m = max(1, min(n_boot, _CHUNK // n))
    s = min(n, _CHUNK // m)
    for r0 in range(0, n_boot, m):
        mm = min(m, n_boot - r0)
        offsets = (np.arange(mm, dtype=np.intp) * n_keys)[:, None]
        block = np.zeros(mm * n_keys)
        for c0 in range(0, n, s):
            draw = rng.integers(0, n, size=(mm, min(s, n - c0)))
            k = keys[draw]
            k += offsets
            block += np.bincount(k.ravel(), weights=gap[draw].ravel(), minlength=mm * n_keys)
        sums[r0:r0 + mm] = block.reshape(mm, n_keys)
    return sums


def _bootstrap_eces(idx: np.ndarray, gap: np.ndarray, n_bins: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """ECE of ``n_boot`` resamples (with replacement) of the rows, bins held fixed. Cost O(n * n_boot)."""
    return np.abs(_bootstrap_bin_sums(idx, gap, n_bins, n_boot, rng)).sum(axis=1) / idx.shape[0]


def _check_n_boot(n_boot: int) -> int:
    return _check_n_bins(n_boot, "n_boot")


def _random_halves(n: int, rng: np.random.Generator) -> np.ndarray:
    """0/1 half of every row: a random split, independent of the data, into ceil(n/2) and floor(n/2) rows."""
    return (rng.permutation(n) < n // 2).astype(np.intp)


def _split_statistics(a: np.ndarray, b: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Plug-in ECE and split-sample ECE from the per-bin gap sums ``a``, ``b`` of the two halves (last axis: bins).

    plug-in = sum_b |a_b + b_b| / n;  split = sum_b (sign(a_b) b_b + sign(b_b) a_b) / n.
    Per bin the split term equals the plug-in term when the halves agree in sign and is below it
    otherwise, so split <= plug-in always.
    """
    plug_in = np.abs(a + b).sum(axis=-1) / n
    split = (np.sign(a) * b + np.sign(b) * a).sum(axis=-1) / n
    return plug_in, split


@dataclass(frozen=True)
class SplitEstimates:
    """The two estimates of CE_B that bracket it (see :func:`ece_bootstrap_ci`) and their bootstrap
    standard deviations: ``ece`` (plug-in, biased upward) and ``split`` (whose mean is at most CE_B,
    and exactly 0 for a calibrated model of any size: a bias-corrected estimate)."""

    ece: float
    split: float
    sd_ece: float
    sd_split: float

    def interval(self, level: float) -> tuple[float, float]:
        """[split - z sd(split*), plug-in + z sd(plug-in*)] cut to [0, 1]."""
        z = NormalDist().inv_cdf(0.5 + level / 2)  # stdlib: importing scipy.stats costs seconds
        return float(max(0.0, self.split - z * self.sd_split)), float(min(1.0, self.ece + z * self.sd_ece))


#: Below this many outcomes of either kind in a bin, :func:`outcome_noise` takes the rate from the
#: count's 95 % Wilson interval: the normal approximation of a count is skewed below about 30 of each (with
#: 10, --require-below 0.0095 passed 7 % of files whose true CE_B was 0.010, 20 outcomes in one bin;
#: with 30, 4.3 %; the interval 1.1 % wider at 1,000 rows, unchanged at 10,000).
FEW_OUTCOMES = 30


def outcome_noise(count: np.ndarray, s_out: np.ndarray) -> np.ndarray:
    """Per bin, the variance that outcome noise alone gives the bin's gap sum: m r (1 - r), with r the
    bin's outcome rate plus two outcomes of each kind ((k + 2) / (m + 4), Agresti and Coull's: never 0
    or 1, and about k / m once a bin has tens of outcomes of each kind); in a bin with fewer than
    :data:`FEW_OUTCOMES` outcomes of either kind, the rate in the count's 95 % Wilson interval nearest
    1/2 (the largest variance the count allows: 0 of 200 may be a rate of 1.9 %).

    Why: resampling rows cannot see the noise of outcomes that all came out the same. In a bin where
    every outcome is 0 (rare events, a handful of rows) every resample has rate 0, so the bootstrap
    standard deviation holds only the spread of the confidences (audit 9b: 10 calibrated rows from
    Adult failed ``--fail-above 0.02`` in 9.8 % of files, the interval's lower end above the true 0
    in 23 %; with scores near 0.1 % and 500 rows, 30 % and 60 %; ``--require-below`` passed files
    above their limit in up to 73 %). Where the bootstrap sees a bin's outcome noise, its variance is
    about this already and nothing is added. ``count``, ``s_out``: each bin's rows and outcomes."""
    m = np.asarray(count, dtype=np.float64)
    k = np.clip(np.asarray(s_out, dtype=np.float64), 0.0, m)
    # the statistics module's normal quantile: scipy (which _wilson takes it from) costs 0.4 s to import
    low, high = _wilson_bounds(k, m, NormalDist().inv_cdf(0.975))
    few = np.minimum(k, m - k) < FEW_OUTCOMES
    r = np.where(few, np.clip(0.5, low, high), (k + 2.0) / (m + 4.0))
    return np.where(m > 0, m * r * (1.0 - r), 0.0)  # an empty bin: no noise (its Wilson bounds are NaN)


def split_estimates_from_sums(a: np.ndarray, b: np.ndarray, boot_a: np.ndarray, boot_b: np.ndarray, n: int,
                              boot_n: np.ndarray | None = None, noise: np.ndarray | None = None) -> SplitEstimates:
    """:class:`SplitEstimates` from the per-bin gap sums of the two halves; ``boot_*`` are (n_boot, B)
    sums; ``boot_n`` (n_boot,): each replicate's number of rows where it is not n (Poisson bootstrap);
    ``noise`` (B,): :func:`outcome_noise` of each bin. Where a bin's bootstrap variance falls short
    of its outcome noise, the shortfall is added to both estimates' variances (each bin's sum enters
    both with a slope of about +-1), so a bin of identical outcomes counts its outcomes' noise."""
    ece_hat, split = _split_statistics(a, b, n)
    ece_reps, split_reps = _split_statistics(boot_a, boot_b, n if boot_n is None else np.maximum(boot_n, 1.0))
    sd_ece, sd_split = float(ece_reps.std()), float(split_reps.std())
    if noise is not None:
        shortfall = float(np.maximum(np.asarray(noise) - (boot_a + boot_b).var(axis=0), 0.0).sum()) / float(n) ** 2
        sd_ece, sd_split = float(np.sqrt(sd_ece ** 2 + shortfall)), float(np.sqrt(sd_split ** 2 + shortfall))
    return SplitEstimates(float(ece_hat), float(split), sd_ece, sd_split)


def _split_interval(a: np.ndarray, b: np.ndarray, boot_a: np.ndarray, boot_b: np.ndarray, n: int,
                    level: float, boot_n: np.ndarray | None = None, noise: np.ndarray | None = None) -> tuple[float, float]:
    """The interval of :func:`ece_bootstrap_ci` from sums (see :func:`split_estimates_from_sums`)."""
    return split_estimates_from_sums(a, b, boot_a, boot_b, n, boot_n, noise).interval(level)


def _split_sums(idx: np.ndarray, conf: np.ndarray, out: np.ndarray, n_bins: int, n_boot: int,
                seed: int | None) -> SplitEstimates:
    rng = np.random.default_rng(seed)
    gap = conf - out
    keys = idx + n_bins * _random_halves(idx.shape[0], rng)
    sums = np.bincount(keys, weights=gap, minlength=2 * n_bins)
    reps = _bootstrap_bin_sums(keys, gap, 2 * n_bins, n_boot, rng)
    noise = outcome_noise(np.bincount(idx, minlength=n_bins), np.bincount(idx, weights=out, minlength=n_bins))
    return split_estimates_from_sums(sums[:n_bins], sums[n_bins:], reps[:, :n_bins], reps[:, n_bins:], idx.shape[0],
                                     noise=noise)


def _split_replicates(probs: np.ndarray, labels: np.ndarray, B: int, n_boot: int, seed: int | None, n_halves: int,
                      binary_target: BinaryTarget | None) -> tuple[np.ndarray, np.ndarray, float]:
    """(plug-in, split averaged over ``n_halves`` random halvings) of the rows (entry 0) and of ``n_boot``
    resamples (entries 1..), and the outcome-noise shortfall of the variance (see
    :func:`split_estimates_from_sums`). The halvings and the resampled rows depend only on n, ``n_boot``
    and ``seed``: two calls on the same rows with the same seed resample the same rows, so their
    replicates pair up."""
    conf, out = confidence_and_outcome(_binary_columns(probs, binary_target, "split_differences"), labels)
    idx, n = bin_index(conf, B), conf.shape[0]
    gap = conf - out
    plug_ins, splits = [], []
    for k in range(n_halves):
        keys = idx + B * _random_halves(n, np.random.default_rng([seed or 0, k]))
        sums = np.bincount(keys, weights=gap, minlength=2 * B)
        reps = _bootstrap_bin_sums(keys, gap, 2 * B, n_boot, np.random.default_rng([seed or 0, n_halves]))
        plug_in, split = _split_statistics(np.vstack([sums[:B], reps[:, :B]]), np.vstack([sums[B:], reps[:, B:]]), n)
        plug_ins.append(plug_in)
        splits.append(split)
    noise = outcome_noise(np.bincount(idx, minlength=B), np.bincount(idx, weights=out, minlength=B))
    shortfall = float(np.maximum(noise - (reps[:, :B] + reps[:, B:]).var(axis=0), 0.0).sum()) / float(n) ** 2
    return plug_ins[0], np.mean(splits, axis=0), shortfall


def split_differences(first: np.ndarray, second: np.ndarray, labels: np.ndarray, n_bins: int | None = None,
                      n_boot: int = 1000, seed: int | None = 0, *, binary_target: BinaryTarget | None = None
                      ) -> tuple[tuple[float, float], tuple[float, float]]:
    """(split(first) - ECE(second), its sd) and (split(second) - ECE(first), its sd): the split estimate
    of one prediction's CE_B minus the plug-in ECE of the other on the same rows and bins, and the
    standard deviation of that difference over paired bootstrap resamples (the same rows drawn for
    both; its variance topped up by both predictions' outcome-noise shortfall).

    Why this difference: E[split(a)] <= CE_B(a) and E[ECE(b)] >= CE_B(b) (see
    :func:`ece_bootstrap_ci`), so in expectation it is at most CE_B(a) - CE_B(b): a test that it
    is above 0 rarely says the one is worse calibrated when it is not. Why paired: both are
    measured on the same rows, so their noise is shared; the sd of the difference of paired replicates
    counts that, where the root sum of the two variances does not. The split estimate is averaged over
    up to 8 random halvings (each has a mean at most CE_B, so their mean too): one halving's noise made
    it the larger part of the sd (0.027 against the ECE's 0.015 on 750 rows), and a drop of the ECE from
    0.10 to 0.03 was shown in 12 of 100 simulated files, 29 with 8 halvings. Fewer halvings on large
    files (n x n_boot x halvings kept near 2e7 draws), where the sd is small anyway.
    """
    n_boot = _check_n_boot(n_boot)
    n = int(np.asarray(labels).shape[0])
    B = _resolve_n_bins(n_bins, n)
    halves = int(np.clip(2e7 // max(n * n_boot, 1), 1, 8))
    ece_1, split_1, short_1 = _split_replicates(first, labels, B, n_boot, seed, halves, binary_target)
    ece_2, split_2, short_2 = _split_replicates(second, labels, B, n_boot, seed, halves, binary_target)
    out = []
    for diff in (split_1 - ece_2, split_2 - ece_1):
        out.append((float(diff[0]), float(np.sqrt(diff[1:].var() + short_1 + short_2))))
    return out[0], out[1]


def split_estimates(probs: np.ndarray, labels: np.ndarray, n_bins: int | None = None, n_boot: int = 1000,
                    seed: int | None = 0, *, binary_target: BinaryTarget | None = None) -> SplitEstimates:
    """The plug-in ECE, the split (bias-corrected) estimate and their bootstrap standard deviations, as
    :func:`ece_bootstrap_ci` computes them (same seed, same numbers: its interval is
    ``split_estimates(...).interval(level)``; ``binary_target`` as there)."""
    n_boot = _check_n_boot(n_boot)
    conf, out = confidence_and_outcome(_binary_columns(probs, binary_target, "split_estimates"), labels)
    B = _resolve_n_bins(n_bins, conf.shape[0])
    return _split_sums(bin_index(conf, B), conf, out, B, n_boot, seed)


IntervalMethod = Literal["split"]
#: Why the percentile bootstrap interval is no longer offered (the message of its error).
PERCENTILE_REMOVED = (
    "the percentile bootstrap interval was removed: it is centred on the ECE's upward bias, which resampling "
    "makes larger, so it can exclude both the true binned error and the ECE itself (a calibrated model at "
    "n = 10^6: [0.00249, 0.00374], 0 % coverage). Use the default method='split'.")


def _check_method(method: str) -> str:
    if method == "percentile":
        raise ValueError(PERCENTILE_REMOVED)
    if method != "split":
        raise ValueError(f"Expected argument `method` to be 'split', but got {method!r}.")
    return method


def default_n_boot(n: int) -> int:
    """Bootstrap resamples used by the dashboard and the command line for n rows.

    1000 up to 200,000 rows, then about 2e8 / n (never under 50), so that the O(n * n_boot) cost
    stays near 2e8 resampled rows (seconds) up to 4 million rows and 5e8 at 10 million. Fewer
    resamples only make the bootstrap standard deviations a little noisier (about 1/sqrt(2 n_boot)
    relative error, 10% at 50).
    """
    return int(np.clip(2e8 // max(int(n), 1), 50, 1000))


def ece_bootstrap_ci(
    probs: np.ndarray,
    labels: np.ndarray,
    n_bins: int | None = None,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int | None = 0,
    method: IntervalMethod = "split",
    *,
    binary_target: BinaryTarget | None = None,
) -> tuple[float, float]:
    """Confidence interval at ``level`` for the binned calibration error CE_B (paper Eq. 2, B fixed).

    What it is for. With B bins fixed in advance (None -> floor(n^(1/3))), the ECE estimates

        CE_B = sum_b P(bin b) |E[confidence - outcome | bin b]| = sum_b |h_b|,  h_b = E[(C - Y) 1{C in b}],

    the calibration error the same B bins would show on unlimited data. CE_B <= TCE (Jensen), with
    equality when the model errs in one direction only (over-confident everywhere, say); the rest,
    the binning bias, is what Theorem 1's (1 + L)/B term bounds. The plug-in ECE is biased upward:
    noise in a bin's gap only ever adds to |gap|, by up to ~0.8 standard errors per bin, so for a
    well-calibrated model with many sparse bins the ECE mostly measures noise.

    ``method="split"`` (default). The rows are split at random into two halves with per-bin gap
    sums a_b and b_b. Two estimates bracket CE_B in expectation, exactly and at any n:

    * the plug-in ECE = sum_b |a_b + b_b| / n, with E[ECE] >= CE_B (Jensen);
    * the split estimate sum_b (sign(a_b) b_b + sign(b_b) a_b) / n: the halves are independent,
      so E[sign(a_b) b_b] = E[sign(a_b)] E[b_b] <= |E[b_b]|, hence E[split] <= CE_B. In a bin whose
      miscalibration is clear the halves agree in sign and the two estimates coincide; in a bin
      that holds only noise the split term averages 0.

    The interval is [split - z sd*, ECE + z sd*] (z the normal quantile of ``level``, sd* the
    standard deviation of each estimate over ``n_boot`` bootstrap resamples of the rows, halves and
    bins held fixed, its variance topped up by the outcome noise of any bin where the resamples
    cannot see it: :func:`outcome_noise`, e.g. a bin whose outcomes all came out 0), cut to [0, 1]. Each end errs on its own side with probability at most about
    (1 - level)/2, so the coverage of CE_B is at least about ``level``: close to it when the ECE is
    dominated by real miscalibration, above it when it is dominated by noise. It always contains
    the plug-in ECE and reaches further below it than above when sparse bins inflate the ECE.
    The simulation in benchmarks/bench_interval.py (RESULTS_interval.md) measures the coverage.

    The percentile bootstrap (the quantiles of the bootstrap ECEs, the former default) is no longer
    offered: it is centred on a biased value that resampling makes more biased, so it can exclude
    both CE_B and the ECE itself (0% coverage of a calibrated model's CE_B = 0 in the benchmark);
    ``method="percentile"`` raises a ``ValueError`` that says so.

    Cost O(n * n_boot) in vectorised chunks of bounded memory: a few seconds per 1e8 draws
    (n * n_boot) on one core, so pass a smaller ``n_boot`` for tens of millions of rows
    (:func:`default_n_boot`).

    Parameters
    ----------
    probs, labels
        As for :func:`ece`.
    n_bins : int or None
        B; None uses floor(n^(1/3)).
    n_boot : int
        Bootstrap resamples.
    level : float
        Confidence level in (0, 1).
    seed : int or None
        Seeds the random split and the resamples (same seed, same interval).
    method : {"split"}
    binary_target : {"positive", "top_label"} or None
        What a two-column (binary) ``probs`` measures, as in :func:`ece`: pass the same value to both,
        so that the interval is one of the ECE it is shown with ("positive": p(y=1), as ``pbr-calib
        evaluate`` and the dashboard; None: the top label, with the one-time warning).

    Returns
    -------
    (low, high) : tuple of float

    References
    ----------
    Kumar, Liang & Ma, "Verified uncertainty calibration", NeurIPS 2019 (the plug-in's upward bias
    and a debiased estimator; the benchmark compares it with this interval).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> c = rng.uniform(0.5, 1, 2000); y = (rng.uniform(size=2000) < c - 0.1).astype(int)
    >>> lo, hi = ece_bootstrap_ci(c, y, n_bins=10, n_boot=200)
    >>> bool(lo <= ece(c, y, n_bins=10) <= hi)
    True
    """
    level = _check_level(level)
    n_boot = _check_n_boot(n_boot)
    method = _check_method(method)
    conf, out = confidence_and_outcome(_binary_columns(probs, binary_target, "ece_bootstrap_ci"), labels)
    B = _resolve_n_bins(n_bins, conf.shape[0])
    return _split_sums(bin_index(conf, B), conf, out, B, n_boot, seed).interval(level)


def _wilson(successes: np.ndarray, count: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    # ndtri is the standard normal quantile that scipy.stats.norm.ppf returns (the same float); it
    # comes without importing scipy.stats, which costs a fresh dashboard server ~0.6 s on its first page.
    from scipy.special import ndtri

    return _wilson_bounds(successes, count, ndtri(0.5 + level / 2))


def _wilson_bounds(successes: np.ndarray, count: np.ndarray, z: float) -> tuple[np.ndarray, np.ndarray]:
    """Wilson's interval of ``successes`` of ``count`` at the normal quantile ``z`` (NaN where count is 0)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        p = successes / count
        denom = 1 + z**2 / count
        centre = (p + z**2 / (2 * count)) / denom
        half = z * np.sqrt(p * (1 - p) / count + z**2 / (4 * count**2)) / denom
    return centre - half, centre + half


def _clopper_pearson(successes: np.ndarray, count: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Clopper and Pearson's (exact) interval of ``successes`` of ``count`` at ``level`` (NaN where count
    is 0): the beta quantiles of the binomial tails, [0, .] at 0 successes and [., 1] at all of them.

    Why it and not Wilson's for a bar's whisker: Wilson's interval holds a rate near x / n at its level
    on average, but it dips at a few expected events (its lower end at x = 1 is about 0.18 / n, so a
    true rate below that is missed whenever one event occurs: at most 84 % at n q = 0.18). Audit 10b
    measured its whisker on Adult moved to a mean of 0.1 % at 919 / 1,000 = 91.9 % [90.0, 93.5] of
    bars (150 rows). Clopper-Pearson's coverage is at least its level at every rate (binomial; a bin's
    Poisson-binomial count is no more spread, Hoeffding 1956); the price is a 2-6 % longer whisker
    where the bar holds tens of events or more."""
    # betaincinv is scipy.stats.beta.ppf (the same float) without importing scipy.stats (see _wilson)
    from scipy.special import betaincinv

    a = (1.0 - level) / 2.0
    x, m = np.broadcast_arrays(np.asarray(successes, dtype=np.float64), np.asarray(count, dtype=np.float64))
    x = np.clip(x, 0.0, np.maximum(m, 0.0))   # a sum of 0/1 outcomes read back as 2.9999999 or 3.0000001
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(x > 0, betaincinv(np.maximum(x, 1e-300), m - x + 1.0, a), 0.0)
        high = np.where(x < m, betaincinv(x + 1.0, np.maximum(m - x, 1e-300), 1.0 - a), 1.0)
    empty = ~(m > 0)
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


#: The whisker rules :func:`reliability_diagram` knows: Clopper-Pearson's (the default since audit 10b)
#: and Wilson's (the whisker before it, kept for a caller that asks for it).
WHISKER_INTERVALS = ("clopper-pearson", "wilson")


def _whisker(successes: np.ndarray, count: np.ndarray, level: float,
             interval: str = "clopper-pearson") -> tuple[np.ndarray, np.ndarray]:
    if interval not in WHISKER_INTERVALS:
        raise ValueError(f"Expected argument `interval` to be one of {WHISKER_INTERVALS}, but got {interval!r}.")
    return (_clopper_pearson if interval == "clopper-pearson" else _wilson)(successes, count, level)


def reliability_diagram(
    probs: np.ndarray,
    labels: np.ndarray,
    n_bins: int | None = None,
    level: float = 0.95,
    interval: Literal["clopper-pearson", "wilson"] = "clopper-pearson",
    band_level: float = 0.9,
    *,
    binary_target: BinaryTarget | None = None,
) -> pd.DataFrame:
    """Per-bin statistics of a reliability diagram (bins of paper Eq. 2).

    Columns: ``bin`` (1-based), ``lower``, ``upper`` (edges), ``count``, ``mean_confidence``,
    ``accuracy`` (binary input: frequency of y = 1), ``gap`` (accuracy - mean confidence),
    ``weight`` (count / n), ``ci_low``, ``ci_high``: a Clopper-Pearson (exact) interval at ``level``
    for the bin's true frequency, per bin (it holds it at least ``level`` of the time at every rate,
    also at a few expected events, where Wilson's interval, ``interval="wilson"``, the default before
    audit 10b, held a bar of 150 rows with scores near 0.1 % at 91.9 %), and ``band_low``, ``band_high``: the **consistency band** at ``band_level``,
    where the bin's observed frequency falls at least that often if the model is calibrated
    (:func:`pbr_core.significance.consistency_band`; Broecker & Smith 2007): a calibrated bin lies
    outside it at most 1 - ``band_level`` of the time, so one bar outside is no evidence by itself
    (:func:`pbr_core.significance.bins_outside_p` counts them). Empty bins have count 0 and NaN statistics (scikit-learn's
    ``calibration_curve`` drops them instead). ``binary_target``: what a two-column (binary) ``probs``
    measures, as in :func:`ece` ("positive": the bars of p(y=1), as ``pbr_core.plot.reliability`` draws
    them; None: the top label's, with the one-time warning).
    """
    if interval not in WHISKER_INTERVALS:
        raise ValueError(f"Expected argument `interval` to be one of {WHISKER_INTERVALS}, but got {interval!r}.")
    level = _check_level(level)
    conf, out = confidence_and_outcome(_binary_columns(probs, binary_target, "reliability_diagram"), labels)
    B = _resolve_n_bins(n_bins, conf.shape[0])
    count, sum_conf, sum_out = _bin_sums(conf, out, B)
    return reliability_table(count, sum_conf, sum_out, conf.shape[0], level, _check_level(band_level), interval)


def reliability_table(count: np.ndarray, sum_conf: np.ndarray, sum_out: np.ndarray, n: int, level: float,
                      band_level: float = 0.9, interval: str = "clopper-pearson") -> pd.DataFrame:
    """The :func:`reliability_diagram` table from the per-bin count, sum of confidence and sum of
    outcome of B uniform bins (``n``: the rows the weights are shares of); streamed statistics build
    it from their sums, so a file in memory and a stream give the same table. ``interval``: the
    whisker's rule (:data:`WHISKER_INTERVALS`)."""
    from pbr_core.significance import consistency_band

    B = count.size
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = sum_conf / count
        acc = sum_out / count
    lo, hi = _whisker(sum_out, count, level, interval)
    band_lo, band_hi = consistency_band(count, sum_conf, band_level)
    edges = bin_boundaries(B)
    import pandas as pd

    return pd.DataFrame({
        "bin": np.arange(1, B + 1),
        "lower": np.concatenate([[0.0], edges[:-1]]),
        "upper": edges,
        "count": np.asarray(count).astype(np.int64),
        "mean_confidence": mean_conf,
        "accuracy": acc,
        "gap": acc - mean_conf,
        "weight": count / n,
        "ci_low": lo,
        "ci_high": hi,
        "band_low": band_lo,
        "band_high": band_hi,
    })


# --------------------------------------------------------------------------- proper scores
def _accuracy(p2: np.ndarray, y: np.ndarray) -> float:
    return float((p2.argmax(axis=1) == y).mean())


def _brier(p2: np.ndarray, y: np.ndarray) -> float:
    rows = np.arange(p2.shape[0])
    sq = (p2**2).sum(axis=1)
    # ||e_y - p||^2 = ||p||^2 - 2 p_y + 1, without an (n, K) one-hot temporary.
    return float((sq - 2.0 * p2[rows, y] + 1.0).mean())


#: Default floor of the true-class probability in :func:`nll`: float64 machine epsilon (2.2e-16,
#: -log = 36.04), scikit-learn's ``log_loss`` convention since version 1.3.
NLL_EPS = float(np.finfo(np.float64).eps)


def _check_eps(eps: float) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating, np.integer)) or not (0.0 < eps < 1.0):
        raise ValueError(f"Expected argument `eps` to be a number in (0, 1), but got {eps!r}.")
    return float(eps)


def _nll(p2: np.ndarray, y: np.ndarray, eps: float = NLL_EPS) -> float:
    py = p2[np.arange(p2.shape[0]), y]
    return float(-np.log(np.clip(py, eps, None)).mean())


def accuracy(probs: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of samples whose argmax equals the label (binary p(y=1): predicts 1 iff p > 0.5).

    A tie p = 0.5 predicts class 0, like ``argmax([1 - p, p])`` and torchmetrics' threshold rule.
    Top-label confidences marked as such (:class:`TopLabelConfidence`, what
    ``preds.metric_inputs()`` returns for data without probability vectors) with ``labels`` =
    1[correct]: the share of right predictions, mean(labels).
    """
    if isinstance(probs, TopLabelConfidence):
        return float(_validated(probs, labels)[1].mean())
    return _accuracy(*_probs_labels(probs, labels))


def brier_score(probs: np.ndarray, labels: np.ndarray, *, binary_target: BinaryTarget | None = None) -> float:
    """Multiclass Brier score mean_n ||e_y - p_n||_2^2 (the Brier term of the paper's PBR objective, Eq. eq_vi_obj3).

    A 1-D binary input is expanded to the two-column vector [1-p, p], so the value is twice the
    scikit-learn ``brier_score_loss`` on the same data.

    ``binary_target`` says what binary data scores, as the ``brier`` of :func:`calibration_summary`
    and :func:`target_brier_nll` do: "positive" scores p(y=1) alone, mean (p_1 - y)^2 (scikit-learn's
    ``brier_score_loss``, what ``pbr-calib evaluate`` and the dashboard show), of a two-column
    ``probs`` or of a 1-D p(y=1) (a 1-D ``probs`` is p(y=1) by this module's convention, so
    "positive" means the same number for both); "top_label" keeps the multiclass score above (the
    paper's protocol), of either shape; None keeps it too, and a two-column ``probs`` then gets the
    one-time warning of the other metrics. No effect on multiclass data.

    Examples
    --------
    >>> p = np.array([[0.8, 0.2], [0.3, 0.7]])
    >>> [round(brier_score(p, [0, 1], binary_target=t), 3) for t in ("top_label", "positive")]
    [0.13, 0.065]
    """
    if binary_target is not None:
        check_binary_target(binary_target)
        if binary_target == "positive" and (np.ndim(probs) == 1 or (np.ndim(probs) == 2 and np.shape(probs)[1] == 2)):
            # the binned metrics' 1-D convention (brier_terms): p against y, not the two-class sum
            return float(_brier_terms(*_validated(_binary_columns(probs, "positive", "brier_score"), labels)).mean())
    else:
        _binary_columns(probs, None, "brier_score")   # the one-time warning, where two columns
    return _brier(*_probs_labels(probs, labels))


def nll(probs: np.ndarray, labels: np.ndarray, *, eps: float = NLL_EPS) -> float:
    """Negative log-likelihood (cross entropy) -mean_n log max(p_{n, y_n}, eps).

    ``eps`` floors the true-class probability so that one row with p = 0 costs -log(eps) instead of
    infinity. The default, float64 machine epsilon (2.2e-16, at most 36.04 nats per row), is
    scikit-learn's ``log_loss`` convention; ``eps=1e-15`` gives older scikit-learn's and pycalib's.
    Recalibrators that output exact zeros (isotonic regression, histogram binning) pay this cost on
    every wrong row they are certain about, so their NLL depends on ``eps``.
    """
    eps = _check_eps(eps)
    return _nll(*_probs_labels(probs, labels), eps)


def brier_terms(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per-row Brier terms of what the binned metrics measure on these inputs.

    A 1-D ``probs`` is one probability per row against a 0/1 outcome: binary p(y=1) against y
    (Appendix A), or a top-label confidence against whether the prediction was right (a
    (confidence, correct) file): the term is (p - y)^2, whose mean is the Brier score of that
    probability (scikit-learn's ``brier_score_loss``). An (n, K) ``probs`` gives the multiclass term
    ||e_y - p||^2 of :func:`brier_score` (the Brier term of the paper's PBR objective). Mergeable:
    streamed statistics add these terms batch by batch.
    """
    return _brier_terms(*_validated(probs, labels))


def _brier_terms(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    if p.ndim == 1:
        return (p - y) ** 2
    return (p**2).sum(axis=1) - 2.0 * p[np.arange(p.shape[0]), y] + 1.0


def nll_terms(probs: np.ndarray, labels: np.ndarray, *, eps: float = NLL_EPS) -> np.ndarray:
    """Per-row negative log-likelihood of what the binned metrics measure (see :func:`brier_terms`).

    1-D ``probs``: the Bernoulli NLL -log max(p, eps) where y = 1 and -log max(1 - p, eps) where
    y = 0; (n, K): -log max(p_{n, y_n}, eps), the terms of :func:`nll`.
    """
    eps = _check_eps(eps)
    return _nll_terms(*_validated(probs, labels), eps)


def _nll_terms(p: np.ndarray, y: np.ndarray, eps: float = NLL_EPS) -> np.ndarray:
    py = np.where(y == 1, p, 1.0 - p) if p.ndim == 1 else p[np.arange(p.shape[0]), y]
    return -np.log(np.clip(py, eps, None))


def nll_infinite_rows(probs: np.ndarray, labels: np.ndarray) -> int:
    """How many rows give what happened a probability of 0 (a score of exactly 0 or 1 that was wrong,
    or one within the floor ``NLL_EPS`` = 2.2e-16 of it), as :func:`nll_terms` measures it: each makes the
    NLL infinite as the library reads it.

    A probability below the floor counts as 0: :func:`nll` would charge it the floor's 36.04 nats, not
    its own (-log 4.9e-308 = 708), so a mean over it is set by the floor, and double precision cannot
    write it on the other side (p(y=1) = 1 - 1e-20 is stored as exactly 1). The Compare page, the
    ``compare`` command and the report treat a fold with such a row as infinite, as this count does.

    :func:`nll`, :func:`nll_terms` and the ``nll`` of :func:`calibration_summary` floor such a row at
    ``eps`` (scikit-learn's ``log_loss`` convention: 36.04 nats a row at the default), so their value
    is then set by the floor, not by the data: 28 such rows of 3,000 add 0.34 to the mean. Where this
    count is above 0, say that the NLL is infinite (the dashboard, the CLI and the report do) and
    compare no change of NLL computed from the floored value.
    """
    return _nll_infinite_rows(*_validated(probs, labels))


def nll_shown(value: float, infinite_rows: int) -> str:
    """The NLL as a person should read it: "infinite (N rows ...)" where rows make it so, else 4 decimals."""
    if infinite_rows:
        return (f"infinite ({infinite_rows:,} row{'s' if infinite_rows != 1 else ''} gave what happened a "
                f"probability of 0 (or below {NLL_EPS:.1e}); {value:.4f} with it floored at {NLL_EPS:.1e})")
    return f"{value:.4f}"


def _nll_infinite_rows(p: np.ndarray, y: np.ndarray) -> int:
    # Below the floor counts as 0: its NLL term would be set by the floor, not by the data (PBR's 4.9e-308
    # cost 36 nats, not its 708, a user audit), and the other side cannot hold it: p(y=1) = 1 - 1e-20
    # is stored as exactly 1, so a wrong row at 1e-20 from 1 reads as 0 whichever way it was written.
    py = np.where(y == 1, p, 1.0 - p) if p.ndim == 1 else p[np.arange(p.shape[0]), y]
    return int(np.count_nonzero(py < NLL_EPS))


def target_brier_nll(probs: np.ndarray, labels: np.ndarray, target: BinaryTarget = DEFAULT_BINARY_TARGET, *,
                     eps: float = NLL_EPS) -> dict[str, float]:
    """Brier score and NLL of what the ECE measures, for the chosen :data:`BinaryTarget`.

    The proper scores shown next to an ECE must score the same probability the ECE bins:

    * binary data with ``target="positive"`` (a (n, 2) matrix, or a 1-D p(y=1)): p(y=1) against y,
      Brier mean (p - y)^2 and the Bernoulli NLL. The multiclass Brier score of the same rows is
      twice this Brier (it sums the squared errors of both classes); the NLL is the same number.
    * a 1-D ``probs`` of top-label confidences with ``labels`` = 1[correct] (a (confidence, correct)
      file): the confidence against correctness, in the same way.
    * multiclass data, and binary data with ``target="top_label"`` (the paper's protocol): the
      multiclass Brier score and NLL of the probability vector (:func:`brier_score`, :func:`nll`).

    Returns ``{"brier": ..., "nll": ..., "nll_infinite_rows": ...}``: ``nll`` floored at ``eps``;
    ``nll_infinite_rows`` (:func:`nll_infinite_rows`) above 0 means the NLL itself is infinite.

    Examples
    --------
    >>> p = np.array([[0.8, 0.2], [0.3, 0.7]])
    >>> round(target_brier_nll(p, [0, 1])["brier"], 3), round(brier_score(p, [0, 1], binary_target="top_label"), 3)
    (0.065, 0.13)
    """
    check_binary_target(target, "target")
    p, y = ece_inputs(probs, labels, target)
    return {"brier": float(brier_terms(p, y).mean()), "nll": float(nll_terms(p, y, eps=eps).mean()),
            "nll_infinite_rows": nll_infinite_rows(p, y)}


def calibration_summary(
    probs: np.ndarray,
    labels: np.ndarray,
    n_bins: int | None = None,
    *,
    top_label_only: bool = False,
    binary_target: BinaryTarget | None = None,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int | None = 0,
    ci_method: IntervalMethod = "split",
) -> dict[str, float | int | str]:
    """The numbers on the dashboard's metric cards, from one validation and one binning.

    Parameters
    ----------
    probs : array of shape (n, K) or (n,)
        Class probabilities, binary p(y=1), or (with ``top_label_only``) top-label confidences.
    labels : array of shape (n,)
        True labels, or (with ``top_label_only``) 1[prediction correct].
    n_bins : int or None
        B for ECE and MCE; None uses floor(n^(1/3)) (Theorem 1).
    top_label_only : bool
        The input is (confidence, correct) of top-label-only data. Then ``accuracy`` is
        mean(correct). Implied by confidences marked as such (:class:`TopLabelConfidence`: what
        ``preds.metric_inputs()`` returns for data without probability vectors), so
        ``calibration_summary(*preds.metric_inputs())`` is right for every kind of data.
    binary_target : {"positive", "top_label"} or None
        What a two-column (binary) ``probs`` measures, as in :func:`ece`: "positive" gives the ECE,
        MCE, Brier score (scikit-learn's ``brier_score_loss``) and NLL of p(y=1), as ``pbr-calib
        evaluate`` and the dashboard report binary data; None (the top label) warns once.

    ``brier`` and ``nll`` score what the ECE measures (:func:`brier_terms`, :func:`nll_terms`): a
    1-D ``probs`` (binary p(y=1), or top-label confidences against correctness) gives mean (p - y)^2
    and the Bernoulli NLL; an (n, K) matrix the multiclass Brier score and NLL.
    n_boot, level, seed, ci_method
        Passed to the interval of the ECE (``method`` of :func:`ece_bootstrap_ci`): an interval
        for the binned calibration error CE_B at these B bins.

    Returns
    -------
    dict
        ``ece``, ``ece_ci_low``, ``ece_ci_high``, ``ci_level``, ``ci_method``, ``mce``, ``brier``,
        ``nll``, ``nll_infinite_rows``, ``accuracy``, ``n``, ``n_bins``. ``nll`` floors the
        probability of what happened at :data:`NLL_EPS` (scikit-learn's convention, finite and
        JSON-safe); ``nll_infinite_rows`` counts the rows where that probability is exactly 0
        (:func:`nll_infinite_rows`): above 0, the NLL is infinite and ``nll`` is a number set by the
        floor, to be shown as infinite (the dashboard, the CLI and the report do).
    """
    level = _check_level(level)
    n_boot = _check_n_boot(n_boot)
    ci_method = _check_method(ci_method)
    top_label_only = top_label_only or isinstance(probs, TopLabelConfidence)
    p, y = _validated(_binary_columns(probs, binary_target, "calibration_summary"), labels)
    if top_label_only and p.ndim != 1:
        raise ValueError(
            f"Expected 1-D confidences with `top_label_only=True`, but got `probs` of shape {p.shape}."
        )
    conf, out = _conf_out(p, y)
    n = conf.shape[0]
    B = _resolve_n_bins(n_bins, n)
    idx = bin_index(conf, B)
    gap = conf - out
    count = np.bincount(idx, minlength=B)
    sum_gap = np.bincount(idx, weights=gap, minlength=B)
    nz = count > 0
    lo, hi = _split_sums(idx, conf, out, B, n_boot, seed).interval(level)
    p2 = _as_matrix(p)
    acc = float(out.mean()) if top_label_only else _accuracy(p2, y)
    return CalibrationSummary({
        "ece": _ece_from_sums(sum_gap, n),
        "ece_ci_low": float(lo),
        "ece_ci_high": float(hi),
        "ci_level": level,
        "ci_method": ci_method,
        "mce": float(np.max(np.abs(sum_gap[nz]) / count[nz])),
        # What the ECE measures: 1-D p against y (not the two-class sum of [1 - p, p]), or the vector.
        "brier": float(_brier_terms(p, y).mean()),
        "nll": float(_nll_terms(p, y).mean()),
        "nll_infinite_rows": _nll_infinite_rows(p, y),
        "accuracy": acc,
        "n": int(n),
        "n_bins": int(B),
    })


class CalibrationSummary(dict):
    """The dict :func:`calibration_summary` returns, shown as a table in a notebook."""

    def _repr_html_(self) -> str:
        from pbr_core import _html

        level = self.get("ci_level", 0.95)
        rows = [(f"ECE (B = {self['n_bins']})", self["ece"]),
                (f"ECE {level:.0%} interval", f"{self['ece_ci_low']:.4f} to {self['ece_ci_high']:.4f}"),
                ("MCE", self["mce"]), ("Brier score", self["brier"]),
                ("NLL", nll_shown(self["nll"], self.get("nll_infinite_rows", 0))),
                ("accuracy", f"{self['accuracy']:.2%}"), ("rows", f"{self['n']:,}")]
        return _html.key_values("Calibration summary", rows)
