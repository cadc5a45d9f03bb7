"""What a recalibration is measured with: the one table of metrics, and the test metrics themselves.

:data:`METRICS` holds every column the protocols' tables report (their name, their label, how one
value is written and which direction is better), as torchmetrics' metric classes carry
``higher_is_better``: the summaries' ``best`` flags, the CLI's choices and columns, the dashboard's
tables, figures and report read it, and nothing else lists metrics. :func:`evaluation_metrics` is the
test measurement every protocol, the alpha selection and every front end make (paper Section 6:
ECE with B = floor(n_te^(1/3)), accuracy, NLL and Brier score); :func:`reliability_table` the per-bin
numbers of the same ECE.

Adding a metric to the recalibration tables: a :class:`Metric` row here, and its value in
:func:`evaluation_metrics` (for a test metric) or the protocol's row (for a protocol column).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

from pbr_core.bounds import optimal_n_bins
from pbr_core.metrics import (BINARY_TARGET, accuracy, confidence_and_outcome, ece, ece_inputs, reliability_diagram,
                             target_brier_nll)

__all__ = ["CV_SCORES", "EVALUATION_METRICS", "METRICS", "Metric", "EceChange", "ece_change_shown", "ece_rise_shown", "evaluation_metrics",
           "reliability_table", "measured_ece"]


@dataclass(frozen=True)
class Metric:
    """One column of the protocols' tables.

    Attributes
    ----------
    name : str
        The column's name in the tables (``ece``, ``fit_seconds``).
    label : str
        Its name for people: table headers, figure titles, the command line.
    fmt : str
        How one value is written (a ``format`` specification, e.g. ".4f").
    better : {"lower", "higher"}
        Which direction of the mean is the better one (the summaries' ``best`` flag).
    words : str
        Its name inside a sentence ("accuracy"; the label where that reads the same).
    """

    name: str
    label: str
    fmt: str
    better: Literal["lower", "higher"]
    words: str = ""

    @property
    def higher_is_better(self) -> bool:
        return self.better == "higher"

    @property
    def in_words(self) -> str:
        return self.words or self.label

    def format(self, value: Any) -> str:
        """``value`` written as this metric's values are (an en dash for a missing one)."""
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return "–"
        return format(value, self.fmt)


#: Every column the protocols report, in the order the summaries list them (:func:`pbr_core.experiments.summarize`).
METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("ece", "ECE", ".4f", "lower"),
    Metric("accuracy", "Accuracy", ".4f", "higher", words="accuracy"),
    Metric("nll", "NLL", ".4f", "lower"),
    Metric("brier", "Brier score", ".4f", "lower"),
    Metric("kl", "KL", ".4g", "lower"),
    Metric("gap", "ECE gap", ".4f", "lower"),
    Metric("ece_re", "ECE (recalibration set)", ".4f", "lower"),
    Metric("ece_te", "ECE (test subset)", ".4f", "lower"),
    Metric("bound", "Corollary 1 bound", ".4f", "lower"),
    Metric("fit_seconds", "Fit time (s)", ".2f", "lower"),
    Metric("predict_seconds", "Prediction time (s)", ".3f", "lower"),
)}

#: The test metrics of every protocol, in the tables' order: :func:`evaluation_metrics`' values.
EVALUATION_METRICS: tuple[str, ...] = ("ece", "accuracy", "nll", "brier")

#: The held-out scores an alpha selection can minimise (:func:`pbr_core.alpha_selection.select_alpha`):
#: the test metrics where lower is better, the paper's ECE first.
CV_SCORES: tuple[str, ...] = ("ece", "brier", "nll")


def measured_ece(probs: np.ndarray, labels: np.ndarray, kind: str, binary_ece: str = BINARY_TARGET.default, *,
             n_bins: int | None = None) -> float:
    """The ECE a protocol reports for predictions of ``kind`` (``Predictions.kind``): the top label
    (paper Eq. 2), or p(y=1) for binary data with ``binary_ece="positive"`` (Appendix A;
    :meth:`BINARY_TARGET.measured <pbr_core.metrics.BinaryTargetChoice.measured>`), with
    B = floor(n^(1/3)) bins unless ``n_bins`` is given."""
    target = BINARY_TARGET.measured(kind, binary_ece)
    return ece(probs, labels, n_bins=optimal_n_bins(labels.shape[0]) if n_bins is None else n_bins, binary_target=target)


def measured_calibration_test(probs: np.ndarray, labels: np.ndarray, kind: str,
                              binary_ece: str = BINARY_TARGET.default, row_sums_as_written: np.ndarray | None = None):
    """The test of calibration (:func:`pbr_core.significance.calibration_test`: exact Monte Carlo
    p-values where the rows carry little information) of what :func:`measured_ece` measures: p(y=1)
    against y, or the top label's confidence against correctness. It needs no bins, and it is what
    says whether the rows show miscalibration beyond chance, which an ECE (or a change of ECE) on
    a few hundred rows cannot.

    ``row_sums_as_written``: the file's own probabilities' row sums before the loader renormalised them
    (:attr:`pbr_core.predictions.Predictions.row_sums_as_written`), so that a score of exactly 1 that the
    file's rounding made is tested within its rounding; only for the file's own probabilities (a
    recalibration's are not the file's)."""
    from pbr_core.significance import calibration_test

    target = BINARY_TARGET.measured(kind, binary_ece)
    conf, outcome = confidence_and_outcome(*ece_inputs(probs, labels, target))
    written = None if row_sums_as_written is None else conf * np.asarray(row_sums_as_written, dtype=np.float64)
    return calibration_test(conf, outcome, written=written)


#: What the test rows show of a recalibration's change of ECE (:func:`ece_change_shown`).
EceChange = Literal["worse", "better"]


def ece_change_shown(before: np.ndarray, after: np.ndarray, labels: np.ndarray, kind: str,
                     binary_ece: str = BINARY_TARGET.default, *, level: float = 0.95, n_boot: int | None = None,
                     seed: int = 0) -> EceChange | None:
    """Whether the rows ``labels`` show the predictions ``after`` (a recalibration) worse or better
    calibrated than ``before`` (the uncalibrated model) beyond the noise of the two ECEs on these rows;
    None when they cannot tell.

    Both are measured as :func:`measured_ece` measures them (the same rows, the same B =
    floor(n^(1/3)) bins), through the two estimates of the binned calibration error CE_B that bracket
    it (:func:`pbr_core.metrics.split_estimates`): the split estimate, whose mean is at most CE_B, and
    the plug-in ECE, whose mean is at least CE_B. "worse": the split estimate of ``after`` exceeds the
    plug-in ECE of ``before`` by more than z (two-sided ``level``) times the standard deviation of that
    difference over paired bootstrap resamples of the rows (:func:`pbr_core.metrics.split_differences`);
    "better": the same with the two swapped. In expectation each difference is at most the true
    difference of CE_B, so a fit that is in truth no worse is rarely called worse, and one in truth no
    better rarely called better (the same rule both ways: a page that doubted only a rise let every fall
    read as a gain).

    Why not ``after > before``: on 150 test rows a temperature scaling fitted on 150 rows had a true
    calibration error of 0.020 against the uncalibrated model's 0.034, yet its ECE was the larger in
    84 of 200 simulated files (33 of 200 where the truth was 0.023 against 0.077);
    tests/test_claims_small_n.py counts how often this rule calls a fit worse, or better, wrongly.
    """
    from statistics import NormalDist

    from pbr_core.metrics import default_n_boot, split_differences

    target = BINARY_TARGET.measured(kind, binary_ece)
    n = int(np.asarray(labels).shape[0])
    B, reps = optimal_n_bins(n), default_n_boot(n) if n_boot is None else int(n_boot)
    z = NormalDist().inv_cdf(0.5 + level / 2)
    # at most one is positive: their sum is split - ECE of the one plus split - ECE of the other, <= 0
    rise, fall = split_differences(after, before, labels, n_bins=B, n_boot=reps, seed=seed, binary_target=target)
    if rise[0] > z * rise[1]:
        return "worse"
    return "better" if fall[0] > z * fall[1] else None


def ece_rise_shown(before: np.ndarray, after: np.ndarray, labels: np.ndarray, kind: str,
                   binary_ece: str = BINARY_TARGET.default, *, level: float = 0.95, n_boot: int | None = None,
                   seed: int = 0) -> bool:
    """Whether the rows show ``after`` worse calibrated than ``before`` beyond the noise of the ECE
    (:func:`ece_change_shown` is "worse")."""
    return ece_change_shown(before, after, labels, kind, binary_ece, level=level, n_boot=n_boot,
                            seed=seed) == "worse"


def evaluation_metrics(probs: np.ndarray, labels: np.ndarray, kind: str,
                       binary_ece: str = BINARY_TARGET.default) -> dict[str, float]:
    """ECE with B = floor(n_te^(1/3)) (paper Section 6), accuracy, NLL and Brier of one evaluation set.

    ``kind`` is ``Predictions.kind`` ("binary" or "multiclass"); for binary data ``binary_ece``
    picks the ECE of p(y=1) ("positive", the default: :data:`pbr_core.metrics.BINARY_TARGET`'s, the
    binary ECE of paper Appendix A) or of the top label ("top_label": the paper's tables, KITTI
    included, report it, as Wenger et al. do). The NLL and Brier score are those of what the ECE
    measures (:func:`pbr_core.metrics.target_brier_nll`): of p(y=1) against y with "positive" (the
    Brier score is then half the two-class sum), the multiclass ones of the vector otherwise (the paper's).
    Returns ``{"n_bins", "ece", "accuracy", "nll", "brier", "nll_infinite_rows"}`` (:data:`EVALUATION_METRICS`,
    B, and the rows that make the NLL infinite, :func:`pbr_core.metrics.nll_infinite_rows`: above 0, ``nll``
    is a number set by the floor and the comparison's tables say "infinite").
    """
    n_bins = optimal_n_bins(labels.shape[0])
    scores = target_brier_nll(probs, labels, BINARY_TARGET.measured(kind, binary_ece))
    return {
        "n_bins": n_bins,
        "ece": measured_ece(probs, labels, kind, binary_ece, n_bins=n_bins),
        "accuracy": accuracy(probs, labels),
        "nll": scores["nll"],
        "brier": scores["brier"],
        "nll_infinite_rows": scores["nll_infinite_rows"],
    }


def reliability_table(probs: np.ndarray, labels: np.ndarray, kind: str, binary_ece: str = BINARY_TARGET.default,
                      n_bins: int | None = None) -> pd.DataFrame:
    """Per-bin statistics (:func:`pbr_core.reliability_diagram`) of what :func:`measured_ece` measures, at
    B = floor(n^(1/3)) unless ``n_bins`` is given: the reliability diagram beside a protocol's ECE."""
    return reliability_diagram(probs, labels, n_bins=n_bins or optimal_n_bins(labels.shape[0]),
                               binary_target=BINARY_TARGET.measured(kind, binary_ece))
