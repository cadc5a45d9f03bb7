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
from typing import Literal, Sequence

import numpy as np
import pandas as pd

from pbr_core.predictions import Predictions, PredictionsError
from pbr_core.wording import other_rows

Method = Literal["isotonic", "logistic"]

__all__ = ["MappedScores", "SCORE_MAP_FORMAT", "apply_score_map", "identifier_reason", "map_scores", "natural_order",
           "outcome_candidates", "suggest_map_columns"]

#: The ``format`` of a saved score map (:attr:`MappedScores.score_map`).
SCORE_MAP_FORMAT = "pbr-calib score map"


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
    #: The fitted map as plain JSON-ready numbers (:func:`apply_score_map` applies it): a recalibrator fitted
    #: on the audit rows takes probabilities, and the model's new scores must go through this same map first.
    score_map: dict | None = None


def _binary_labels(values: pd.Series, column: str, positive: str | None, source: str) -> tuple[np.ndarray, str]:
    v = values.dropna()
    if len(v) != len(values):
        r = int(np.flatnonzero(values.isna().to_numpy())[0])
        raise PredictionsError(f"{source}: missing value in column {column!r} at row {r + 1} (data row).")
    distinct = natural_order(pd.unique(values.astype(str)).tolist())
    if len(distinct) != 2:
        raise PredictionsError(f"{source}: the label column {column!r} must hold exactly two values for scores to be "
                               f"mapped to p(y=1), but it holds {len(distinct)}: {distinct[:6]}.")
    if positive is None:
        positive = "1" if distinct == ["0", "1"] else ("True" if distinct == ["False", "True"] else distinct[1])
    if positive not in distinct:
        raise PredictionsError(f"{source}: {positive!r} is not a value of {column!r} ({distinct}).")
    return (values.astype(str) == positive).to_numpy().astype(np.int64), positive


def natural_order(values: Sequence[str]) -> list[str]:
    """``values`` with the numbers first, in numeric order ('2' before '10'), then the other texts in
    alphabetical order: the order a reader expects in a list of examples (text order puts '10' after '1')."""
    def key(v: str) -> tuple[int, float, str]:
        try:
            x = float(v)
        except (TypeError, ValueError):
            return 1, 0.0, str(v)
        return (0, x, str(v)) if np.isfinite(x) else (1, 0.0, str(v))

    return sorted(values, key=key)


#: Words in a column's name that say it holds a model's score (``decile_score``, ``risk``, ``credit_rating``).
_SCORE_WORDS = frozenset(("score", "scores", "risk", "decile", "margin", "rating", "prob", "proba", "probability",
                          "logit", "logits", "odds", "confidence", "propensity", "pred", "prediction"))


def identifier_reason(values: pd.Series | None, name: str) -> str | None:
    """Why a column is an identifier, never a score to map, or None.

    Its name says identifier (``person_id``, ``image_index``: the loader's own rule,
    :func:`pbr_core.loading._roles.metadata_by_name`) and its values are whole numbers, or its values
    are distinct consecutive whole numbers whatever its name (a row number). A score named ``risk_index``
    with fractional values is not one; a credit score (whole numbers, repeated) is not one.
    ``values`` None: by the name alone.
    """
    from pbr_core.loading._roles import metadata_by_name

    if values is None:
        return "an identifier, by its name" if metadata_by_name(name) == "an identifier" else None
    numbers = pd.to_numeric(values, errors="coerce")
    if numbers.isna().any():
        return None  # text: map_scores says the scores must be numbers
    v = numbers.to_numpy(dtype=np.float64)
    if v.size == 0 or not np.all(v == np.round(v)):
        return None
    if metadata_by_name(name) == "an identifier":
        return "an identifier, by its name"
    if v.size >= 3 and np.unique(v).size == v.size and v.max() - v.min() == v.size - 1:
        return f"an identifier: a different whole number on every row, {v.min():.0f} to {v.max():.0f} (a row number)"
    return None


def outcome_candidates(frame: pd.DataFrame) -> list[str]:
    """The columns of ``frame`` that can be the outcome a score predicts: exactly two values, none missing
    (map_scores refuses any other); in the frame's order."""
    return [str(c) for c in frame.columns if frame[c].notna().all() and frame[c].nunique() == 2]


def _whole_numbers(numbers: pd.Series) -> bool:
    v = numbers.to_numpy(dtype=np.float64)
    return bool(np.all(v == np.round(v)))


def suggest_map_columns(frame: pd.DataFrame, about: Sequence[str] = ()) -> tuple[str | None, str | None]:
    """(score column, outcome column) to offer for :func:`map_scores` on ``frame``; None where none fits.

    The outcome: a column of exactly two values (:func:`outcome_candidates`): the one named like a label
    (:data:`pbr_core.loading.LABEL_COLUMN_NAMES`), else the only one, else the only 0/1 one; a label of
    100 classes is no outcome for a map. The score: the first column of ``about`` (the columns a loader
    error was about, in its order) that can be a score, those named like one (:data:`_SCORE_WORDS`)
    first; else the first column named like one; else the first that can. A column can be a score when
    it holds numbers of more than two values, is not the outcome, and is none of what the loader keeps
    as metadata by its name or values: an identifier (:func:`identifier_reason`), a data split, a date
    or time, a weight (``fold``, ``year``: :func:`pbr_core.loading._roles.metadata_by_name`), or whole
    numbers (an id, a code or a count: ``age``) unless named like a score (``decile_score``).
    """
    from pbr_core.loading import LABEL_COLUMN_NAMES
    from pbr_core.loading._roles import metadata_by_name, name_words

    columns = [str(c) for c in frame.columns]
    two = outcome_candidates(frame)
    named_label = [c for c in two if c.strip().lower() in LABEL_COLUMN_NAMES]
    zero_one = [c for c in two if set(pd.to_numeric(frame[c], errors="coerce").tolist()) == {0, 1}]
    outcome = next((found[0] for found in (named_label, two, zero_one) if len(found) == 1), None)
    named = [c for c in columns if set(name_words(c)) & _SCORE_WORDS]

    def can_score(c: str) -> bool:
        values = frame[c]
        numbers = pd.to_numeric(values, errors="coerce")
        if (c == outcome or not numbers.notna().all() or numbers.nunique() <= 2
                or pd.api.types.is_bool_dtype(values.dtype) or metadata_by_name(c)):
            return False
        return identifier_reason(values, c) is None and (c in named or not _whole_numbers(numbers))

    about = [c for c in about if c in columns]
    ordered = [c for c in about if c in named] + about + named + columns
    score = next((c for c in ordered if can_score(c)), None)
    return score, outcome


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

    Raises
    ------
    PredictionsError
        A column that is not there, a score column that is an identifier (:func:`identifier_reason`)
        or not numbers, an outcome of other than two values, too few rows.
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
    why = identifier_reason(frame[score_column], str(score_column))
    if why is not None:
        raise PredictionsError(f"{source}: {score_column!r} is {why}, not a score: a map from it to p({label_column}) "
                               "would fit row numbers. Choose the column that holds the model's scores (a risk "
                               "decile, a margin, a credit score).")
    if score_column == label_column:
        raise PredictionsError(f"{source}: the score and the outcome are the same column ({score_column!r}); choose "
                               "the column of scores and the column of outcomes.")
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
        shape = {"scores": [float(v) for v in iso.X_thresholds_],
                 "probabilities": [float(v) for v in iso.y_thresholds_]}
    else:
        mu, sd = scores[fit_rows].mean(), scores[fit_rows].std() or 1.0
        lr = LogisticRegression(C=1e6).fit(((scores[fit_rows] - mu) / sd)[:, None], y[fit_rows])
        p_audit = lr.predict_proba(((scores[audit_rows] - mu) / sd)[:, None])[:, 1]
        p_grid = lr.predict_proba(((grid - mu) / sd)[:, None])[:, 1]
        slope = float(lr.coef_[0, 0]) / sd  # on the raw score: intercept + slope * score
        shape = {"intercept": float(lr.intercept_[0]) - slope * mu, "slope": slope}
    meta = frame.drop(columns=[label_column]).iloc[audit_rows].reset_index(drop=True)
    notes = [
        f"The column {score_column!r} holds scores, not probabilities: a monotone map "
        f"({'isotonic regression' if method == 'isotonic' else 'a logistic curve'}, "
        f"{'increasing' if increasing else 'decreasing'}) was fitted on {n_fit:,} random rows ({share:.0%}, "
        f"seed {seed}) and turns the scores of {other_rows(n - n_fit)} into p({label_column} = {positive}).",
        "Everything measured here is on those other rows: it says how well these scores can be turned into "
        "calibrated probabilities on new rows, not how calibrated the raw scores are (they are not probabilities).",
    ]
    score_map = {"format": SCORE_MAP_FORMAT, "version": 1, "score_column": str(score_column),
                 "outcome": f"{label_column} = {positive}", "method": method, "increasing": bool(increasing),
                 "fit_rows": n_fit, **shape}
    preds = Predictions.from_arrays(np.clip(p_audit, 0.0, 1.0), y[audit_rows], input_type="probabilities",
                                    class_names=("not " + positive, positive) if positive not in ("1", "True")
                                    else ("0", "1"), source=source, notes=notes)
    roles = tuple((c, "metadata") for c in meta.columns if c != score_column) + ((score_column, "metadata"),)
    preds = replace(preds, metadata=meta, column_roles=((label_column, "label"),) + roles, score_map=score_map)
    return MappedScores(preds=preds, fit_rows=fit_rows, audit_rows=audit_rows, method=method, increasing=increasing,
                        thresholds=grid, probabilities=p_grid, score_map=score_map)


def apply_score_map(score_map: dict, scores) -> np.ndarray:
    """p(y=1) of new scores by a saved map (:attr:`MappedScores.score_map`, or its JSON file read with
    ``json.load``), the same numbers :func:`map_scores` gave the audit rows.

    A recalibrator fitted on mapped scores takes probabilities: the model's new scores (a decile, a margin)
    go through this map first. Isotonic: linear interpolation between the fitted steps, the ends held
    (scikit-learn's ``IsotonicRegression.predict`` with ``out_of_bounds="clip"``); logistic:
    1 / (1 + exp(-(intercept + slope * score))).
    """
    from scipy.special import expit

    if not isinstance(score_map, dict) or score_map.get("format") != SCORE_MAP_FORMAT:
        got = f"format {score_map.get('format')!r}" if isinstance(score_map, dict) else type(score_map).__name__
        raise ValueError(f"Expected a score map saved by pbr-calib (format {SCORE_MAP_FORMAT!r}), but got {got}.")
    s = np.asarray(scores, dtype=np.float64)
    if not np.all(np.isfinite(s)):
        raise ValueError("The scores must be finite numbers; some are missing or infinite.")
    if score_map["method"] == "isotonic":
        x, p = np.asarray(score_map["scores"], float), np.asarray(score_map["probabilities"], float)
        return np.clip(np.interp(s, x, p), 0.0, 1.0) if x.size > 1 else np.full(s.shape, float(p[0]))
    return expit(float(score_map["intercept"]) + float(score_map["slope"]) * s)
