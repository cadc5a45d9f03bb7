"""Columns that restate the outcome: every value of the column holds a single outcome on these rows.

A file often carries, beside the predictions, a column derived from the outcome itself: an LLM
benchmark's ``grade`` ("Correct" / "Wrong", of which ``correct`` is defined), a "status" written after
the fact, the label spelt in words. Grouping or slicing by such a column is grouping by the outcome:
every group is right all the time or never, so every group is miscalibrated by construction (as
grouping by the true class is, :data:`pbr_core.groups.TRUE_CLASS_REFUSED`), and a slice search finds
them first. :func:`outcome_columns` says which columns of a :class:`~pbr_core.predictions.Predictions`'
metadata do this, so that the slice search leaves them out and the groups warn.

The rule
--------
A column restates an outcome (the label of binary data, whether the prediction was right, or the
class of multiclass data) when, cutting the column into its values (and, for a number with more than
:data:`MAX_NUMERIC_VALUES` values, also into the slice search's quintile bands: either cut suffices):

* every value with at least :data:`MIN_VALUE_ROWS` rows holds a single outcome (smaller values are not
  judged: a value of 3 rows says nothing on its own);
* those values hold at least :data:`COVER` of the rows (nearly all);
* at least two different outcomes occur across them (a column whose every value is "right" on a file
  right everywhere says nothing);
* and this purity is not what the predictions themselves would give by chance: if the outcomes were
  drawn from the predictions (calibrated), every judged value would be pure with probability
  prod_v [prod_i p_i + prod_i (1 - p_i)] (for classes: prod_v sum_k prod_i p_ik), and the column is
  flagged only when that probability is below :data:`CHANCE` (1e-6). Whether a value is judged
  depends on its row count only, never on outcomes, so on calibrated predictions a column is flagged
  for a given outcome with probability at most :data:`CHANCE`, whatever its values' sizes. Without
  this condition, a column of small values on confident predictions (an LLM right 97 % of the time,
  values of 10-20 rows) is pure by chance: ``tests/test_outcome_columns.py`` measures how often.

In memory, :func:`outcome_columns` applies the rule to every row; a streamed grouping by one column
applies it to the sums its pass keeps per value (:func:`restating_from_sums`: the values only, not the
quintile bands, and the outcome the groups measure only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from pbr_core.predictions import Predictions

__all__ = ["CHANCE", "COVER", "MIN_VALUE_ROWS", "OutcomeColumn", "outcome_columns", "restates_words",
           "group_warning", "restating_from_sums"]

#: A value with fewer rows is not judged (it neither shows nor spoils the rule).
MIN_VALUE_ROWS = 10
#: The judged values must hold at least this share of the rows.
COVER = 0.95
#: The chance, were the predictions calibrated, that every judged value would be pure: flagged below it.
CHANCE = 1e-6
#: A number with more values is also cut into quintile bands (as :mod:`pbr_core.slices._plan` does).
MAX_NUMERIC_VALUES = 10
N_BANDS = 5
#: Clip probabilities this far from 0 and 1 before taking logs (a confidence of exactly 1 that went wrong).
_EPS = 1e-12


@dataclass(frozen=True)
class OutcomeColumn:
    """A column that restates an outcome on these rows (see the module docstring)."""

    column: str
    outcome: str          # "the label", "whether the prediction was right", "the class"
    cut: str              # "values" or "quintile bands"
    n_values: int         # values judged (each with MIN_VALUE_ROWS rows or more)
    covered: float        # share of the rows they hold
    log10_chance: float   # log10 of the chance of such purity were the predictions calibrated
    outcomes: dict[str, str]  # each judged value -> its one outcome, in words (at most 20)

    @property
    def why(self) -> str:
        """Why the slice search leaves the column out (the CLI's and the JSON's words)."""
        return restates_words(self)


def _outcomes(preds: Predictions) -> list[tuple[str, np.ndarray, np.ndarray, tuple[str, ...]]]:
    """(what, outcome per row as ints 0..K-1, log-probabilities (n, K) of each outcome under the
    predictions, names of the outcomes) of every outcome the file's claims rest on."""
    out = []
    correct = np.asarray(preds.correct, dtype=np.intp) if preds.kind != "top_label" else None
    if preds.kind == "top_label":
        conf, corr = preds.metric_inputs()
        conf = np.clip(np.asarray(conf, dtype=np.float64), _EPS, 1 - _EPS)
        correct = np.asarray(corr, dtype=np.intp)
        out.append(("whether the prediction was right", correct, np.log(np.stack([1 - conf, conf], axis=1)),
                    ("wrong", "right")))
        return out
    probs = np.clip(np.asarray(preds.probs, dtype=np.float64), _EPS, 1.0)
    names = tuple(str(c) for c in (preds.class_names or range(probs.shape[1])))
    what = "the label" if preds.kind == "binary" else "the class"
    out.append((what, np.asarray(preds.labels, dtype=np.intp), np.log(probs), names))
    conf = np.clip(probs.max(axis=1), _EPS, 1 - _EPS)
    out.append(("whether the prediction was right", correct, np.log(np.stack([1 - conf, conf], axis=1)),
                ("wrong", "right")))
    return out


class _Words:
    """Each code's value in words, made only for the values a result names (a float column of 10^5
    distinct values would otherwise cost 10^5 strings a column: review 10 measured 15 s for 50 such
    columns of 200,000 rows, on every Groups page render)."""

    def __init__(self, uniques) -> None:
        self.uniques = uniques

    def __len__(self) -> int:
        return len(self.uniques)

    def __getitem__(self, i: int) -> str:
        u = self.uniques[i]
        return "(missing)" if pd.isna(u) else str(u)


def _cuts(col: pd.Series) -> list[tuple[str, np.ndarray, "_Words | list[str]"]]:
    """(how, each row's code, each code's value in words) of a column: its values, and for a number
    with many values its quintile bands too. The values are not a cut worth judging when they are too
    many to cover :data:`COVER` of the rows with values of :data:`MIN_VALUE_ROWS` rows (at most n / 10
    such values, and the other values at most 1 - COVER of the rows)."""
    n = len(col)
    cuts: list = []
    distinct = col.nunique(dropna=False)
    if distinct <= n / MIN_VALUE_ROWS + (1 - COVER) * n:
        codes, uniques = pd.factorize(col, use_na_sentinel=False)
        cuts.append(("values", codes.astype(np.intp), _Words(uniques)))
    uniques_n = distinct - int(col.isna().any())
    if pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype) \
            and uniques_n > MAX_NUMERIC_VALUES:
        x = col.to_numpy(dtype=np.float64, na_value=np.nan)
        ok = np.isfinite(x)
        if ok.any():
            v = np.sort(x[ok])
            qs = np.quantile(v, np.arange(1, N_BANDS) / N_BANDS, method="inverted_cdf")
            edges = np.unique(qs[qs > v[0]])
            band = np.searchsorted(edges, np.where(ok, x, 0.0), side="right").astype(np.intp)
            band[~ok] = edges.size + 1
            bounds = [v[0], *edges.tolist(), v[-1]]
            bw = [f"{bounds[k]:.4g} to {bounds[k + 1]:.4g}" for k in range(edges.size + 1)] + ["(missing)"]
            cuts.append(("quintile bands", band, bw))
    return cuts


def _check(codes: np.ndarray, words: list[str], y: np.ndarray, logp: np.ndarray, names: tuple[str, ...]
           ) -> tuple[int, float, float, dict[str, str]] | None:
    """(values judged, share covered, log10 chance, value -> outcome) when the cut restates ``y``."""
    L = len(words)
    counts = np.bincount(codes, minlength=L)
    judged = counts >= MIN_VALUE_ROWS
    if not judged.any() or counts[judged].sum() < COVER * y.size:
        return None
    first = np.full(L, -1, dtype=np.intp)
    first[codes[::-1]] = y[::-1]           # some row's outcome of each value (the first one)
    mixed = np.bincount(codes, weights=(y != first[codes]).astype(np.float64), minlength=L) > 0
    per_class = np.stack([np.bincount(codes, weights=logp[:, k], minlength=L) for k in range(logp.shape[1])], axis=1)
    return _judge(counts, first, mixed, per_class, words, names)


def _judge(counts: np.ndarray, first: np.ndarray, mixed: np.ndarray, per_class: np.ndarray, words,
           names: tuple[str, ...]) -> tuple[int, float, float, dict[str, str]] | None:
    """The rule of the module docstring on each value's sums: its rows (``counts``), one of its
    outcomes (``first``), whether its rows hold another (``mixed``), and the sum over its rows of the
    log-probability of each outcome (``per_class``, (L, K))."""
    n = int(counts.sum())
    judged = counts >= MIN_VALUE_ROWS
    if not judged.any() or counts[judged].sum() < COVER * n:
        return None
    if np.any(mixed & judged) or np.unique(first[judged]).size < 2:
        return None
    # log P(every judged value pure | outcomes drawn from the predictions)
    log_pure = np.logaddexp.reduce(per_class[judged], axis=1)
    log10_chance = float(log_pure.sum() / np.log(10))
    if not log10_chance < np.log10(CHANCE):
        return None
    idx = np.flatnonzero(judged)
    idx = idx[np.argsort(-counts[idx], kind="stable")][:20]
    return (int(judged.sum()), float(counts[judged].sum() / n), log10_chance,
            {words[i]: names[first[i]] for i in idx})


def restating_from_sums(column: str, values: Sequence[str], counts: np.ndarray, outcomes: np.ndarray,
                        log_probs: np.ndarray, outcome: str, names: tuple[str, str]) -> OutcomeColumn | None:
    """:func:`outcome_columns`' rule for one column from per-value sums, as a streamed pass keeps them
    (:class:`pbr_core.stream.GroupStatistics`): no row is needed.

    Parameters
    ----------
    column : str
        The column's name.
    values : sequence of str
        Its values (the groups), in the order of the arrays.
    counts, outcomes : array (L,)
        Each value's rows, and the sum of their 0/1 outcomes.
    log_probs : array (2, L)
        Each value's sum over its rows of log P(outcome 0) and of log P(outcome 1) under the predictions
        (probabilities clipped as :func:`outcome_columns` clips them).
    outcome : str
        What the 0/1 outcome is ("the label", "whether the prediction was right").
    names : (str, str)
        The outcomes 0 and 1 in words.

    Returns
    -------
    OutcomeColumn or None
        What the column restates (``cut`` "values"), or None.
    """
    counts = np.asarray(counts, dtype=np.int64)
    outcomes = np.asarray(outcomes, dtype=np.float64)
    first = (outcomes > 0).astype(np.intp)           # all 1 when pure at 1, all 0 when pure at 0
    mixed = (outcomes > 0) & (outcomes < counts)
    hit = _judge(counts, first, mixed, np.asarray(log_probs, dtype=np.float64).T, list(map(str, values)), names)
    return None if hit is None else OutcomeColumn(str(column), outcome, "values", *hit)


def outcome_columns(preds: Predictions, columns: Sequence[str] | str | None = None) -> dict[str, OutcomeColumn]:
    """The columns of ``preds.metadata`` whose values each hold a single outcome on these rows.

    Parameters
    ----------
    preds : Predictions
        With labels (without them nothing is flagged).
    columns : str or list of str, optional
        The columns to look at (default: every column of the metadata).

    Returns
    -------
    dict of str to OutcomeColumn
        Column name -> what it restates, in the metadata's order; empty when none does.

    Examples
    --------
    >>> import numpy as np, pandas as pd, pbr_core
    >>> rng = np.random.default_rng(0)
    >>> conf = rng.uniform(0.5, 1, 400)
    >>> correct = (rng.uniform(size=400) < conf).astype(int)
    >>> preds = pbr_core.load_predictions(pd.DataFrame({
    ...     "confidence": conf, "correct": correct, "model": rng.choice(["a", "b"], 400),
    ...     "grade": np.where(correct == 1, "Correct", "Wrong")}))
    >>> list(outcome_columns(preds))
    ['grade']
    """
    meta = preds.metadata
    if meta is None or meta.shape[1] == 0 or not preds.has_labels or preds.n == 0:
        return {}
    names = list(meta.columns) if columns is None else [columns] if isinstance(columns, str) else list(columns)
    names = [c for c in names if c in meta.columns]
    if not names:
        return {}
    found: dict[str, OutcomeColumn] = {}
    outcomes = _outcomes(preds)
    for name in names:
        col = meta[name]
        for how, codes, words in _cuts(col):
            for what, y, logp, onames in outcomes:
                hit = _check(codes, words, y, logp, onames)
                if hit is not None:
                    found[str(name)] = OutcomeColumn(str(name), what, how, *hit)
                    break
            if str(name) in found:
                break
    return found


def _chance_words(log10_chance: float) -> str:
    return "below 1e-300" if log10_chance < -300 else f"about 1e{int(np.floor(log10_chance))}"


def _cut_words(found: OutcomeColumn) -> str:
    return "each of its values" if found.cut == "values" else "each of its quintile bands"


def restates_words(found: OutcomeColumn) -> str:
    """Why the slice search leaves the column out, in words (after "left out 'grade': ")."""
    return (f"{_cut_words(found)} has a single outcome ({found.outcome}; {found.n_values} value"
            f"{'s' if found.n_values != 1 else ''} of {MIN_VALUE_ROWS} rows or more, {found.covered:.0%} of the "
            f"rows), so it restates the outcome; slices by it would be miscalibrated by construction (chance of "
            f"such purity were the predictions calibrated: {_chance_words(found.log10_chance)})")


def group_warning(found: OutcomeColumn) -> str:
    """The warning a grouping by the column carries (CLI text and JSON, notebooks)."""
    return (f"warning: {found.column!r} restates the outcome: {_cut_words(found)} has a single outcome ({found.outcome}) on these "
            f"rows, so its groups are miscalibrated by construction (a group that is always right or always "
            f"wrong cannot match any confidence short of 100 % or 0 %); their tests and gaps say nothing about the "
            f"model. Group by a column known before the outcome (a segment, a model, a date).")
