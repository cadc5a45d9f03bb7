"""Scores that are not probabilities (a risk decile, a margin, a credit score): the honest route.

The calibration metrics need probabilities, so such a column is refused by them. What can be
audited is whether the score *can* be turned into calibrated probabilities: :func:`map_scores`
fits a monotone map from the score to a probability (isotonic regression, or a logistic curve) on
a random share of the rows and applies it to the other rows, which are then audited as ordinary
binary predictions. Every number measured on them is out of sample for the map; the rows used to
fit it are left out and counted in the notes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import pandas as pd

from pbr_core.predictions import Predictions, PredictionsError

Method = Literal["isotonic", "logistic"]

__all__ = ["MappedScores", "map_scores"]


@dataclass(frozen=True)
class MappedScores:
    """The audit rows as binary predictions, and how they were made."""

    preds: Predictions          # the audit rows: p(y=1) from the map, labels, metadata (the score kept)
    fit_rows: np.ndarray        # positions (in the input) of the rows the map was fitted on
    audit_rows: np.ndarray      # positions of the rows in ``preds``
    method: Method
    increasing: bool            # the map's direction (a higher score means a higher probability)
    thresholds: np.ndarray      # the map on a grid of scores: (score, probability) pairs, for plots
    probabilities: np.ndarray


def _binary_labels(values: pd.Series, column: str, positive: str | None, source: str) -> tuple[np.ndarray, str]:
    v = values.dropna()
    if len(v) != len(values):
        r = int(np.flatnonzero(values.isna().to_numpy())[0])
        raise PredictionsError(f"{source}: missing value in column {column!r} at row {r + 1} (data row).")
    distinct = sorted(pd.unique(values.astype(str)).tolist())
    if len(distinct) != 2:
        raise PredictionsError(f"{source}: the label column {column!r} must hold exactly two values for scores to be "
                               f"mapped to p(y=1), but it holds {len(distinct)}: {distinct[:6]}.")
    if positive is None:
        positive = "1" if distinct == ["0", "1"] else ("True" if distinct == ["False", "True"] else distinct[1])
    if positive not in distinct:
        raise PredictionsError(f"{source}: {positive!r} is not a value of {column!r} ({distinct}).")
    return (values.astype(str) == positive).to_numpy().astype(np.int64), positive


def map_scores(frame: pd.DataFrame, score_column: str, label_column: str, *, share: float = 0.3,
               method: Method = "isotonic", seed: int = 0, positive: str | None = None,
               source: str = "data") -> MappedScores:
    """Fit a monotone map score -> p(y=1) on ``share`` of the rows and audit the others with it.

    Parameters
    ----------
    frame : DataFrame
        The table (e.g. :func:`pbr_core.loading.read_table`); its other columns become the audit
        rows' metadata.
    score_column, label_column : str
        The score (any real numbers: a decile, a margin) and the binary outcome (0/1, true/false or
        two names; ``positive`` names the one that counts as y = 1, default the larger / later one).
    share : float
        The share of rows, drawn at random (``seed``), used to fit the map; in (0, 1).
    method : {"isotonic", "logistic"}
        Isotonic regression (a step function: no shape assumed, suits few distinct scores such as
        deciles) or a logistic curve in the score (Platt's smooth S-shape, suits margins). The
        direction is taken from the fitting rows (Spearman correlation of score and outcome).

    Returns
    -------
    MappedScores
    """
    from scipy.stats import spearmanr
    from sklearn.isotonic import IsotonicRegression
    from sklearn.linear_model import LogisticRegression

    for c in (score_column, label_column):
        if c not in frame.columns:
            raise PredictionsError(f"{source}: {c!r} is not a column; the columns are {list(frame.columns)[:12]}.")
    if not 0 < float(share) < 1:
        raise ValueError(f"Expected argument `share` to be between 0 and 1, but got {share!r}.")
    if method not in ("isotonic", "logistic"):
        raise ValueError(f"Expected argument `method` to be 'isotonic' or 'logistic', but got {method!r}.")
    scores = pd.to_numeric(frame[score_column], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(scores)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise PredictionsError(f"{source}: column {score_column!r} holds {frame[score_column].iloc[r]!r} at row {r + 1} "
                               "(data row): the scores must be numbers.")
    y, positive = _binary_labels(frame[label_column], label_column, positive, source)
    n = len(frame)
    n_fit = int(round(share * n))
    if n_fit < 10 or n - n_fit < 10:
        raise PredictionsError(f"{source}: {n} rows are too few to fit a map on {share:.0%} of them and audit the "
                               "rest (at least 10 rows each).")
    perm = np.random.default_rng(seed).permutation(n)
    fit_rows, audit_rows = np.sort(perm[:n_fit]), np.sort(perm[n_fit:])
    rho = spearmanr(scores[fit_rows], y[fit_rows]).statistic
    increasing = not (np.isfinite(rho) and rho < 0)
    grid = np.unique(np.quantile(scores, np.linspace(0, 1, 201)))
    if method == "isotonic":
        iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=increasing, out_of_bounds="clip")
        iso.fit(scores[fit_rows], y[fit_rows])
        p_audit, p_grid = iso.predict(scores[audit_rows]), iso.predict(grid)
    else:
        mu, sd = scores[fit_rows].mean(), scores[fit_rows].std() or 1.0
        lr = LogisticRegression(C=1e6).fit(((scores[fit_rows] - mu) / sd)[:, None], y[fit_rows])
        p_audit = lr.predict_proba(((scores[audit_rows] - mu) / sd)[:, None])[:, 1]
        p_grid = lr.predict_proba(((grid - mu) / sd)[:, None])[:, 1]
    meta = frame.drop(columns=[label_column]).iloc[audit_rows].reset_index(drop=True)
    notes = [
        f"The column {score_column!r} holds scores, not probabilities: a monotone map "
        f"({'isotonic regression' if method == 'isotonic' else 'a logistic curve'}, "
        f"{'increasing' if increasing else 'decreasing'}) was fitted on {n_fit:,} random rows ({share:.0%}, "
        f"seed {seed}) and turns the scores of the other {n - n_fit:,} rows into p({label_column} = {positive}).",
        "Everything measured here is on those other rows: it says how well these scores can be turned into "
        "calibrated probabilities on new rows, not how calibrated the raw scores are (they are not probabilities).",
    ]
    preds = Predictions.from_arrays(np.clip(p_audit, 0.0, 1.0), y[audit_rows], input_type="probabilities",
                                    class_names=("not " + positive, positive) if positive not in ("1", "True")
                                    else ("0", "1"), source=source, notes=notes)
    roles = tuple((c, "metadata") for c in meta.columns if c != score_column) + ((score_column, "metadata"),)
    preds = replace(preds, metadata=meta, column_roles=((label_column, "label"),) + roles)
    return MappedScores(preds=preds, fit_rows=fit_rows, audit_rows=audit_rows, method=method, increasing=increasing,
                        thresholds=grid, probabilities=p_grid)
