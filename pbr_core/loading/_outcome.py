"""The label column found by its values, when no column is named like one.

Real exports name the outcome after what it is (``won``, ``two_year_recid``, ``diagnosis``), not
``label``. When no column has a label's name, a column is taken for the label only when its values
can be nothing else and it is the only such column:

* two values 0 and 1 (or true/false, no/yes...) beside the one score column of a binary file;
* text whose every value is the header of one of the score columns (the class names);
* whole numbers in 0..K-1 beside K score columns (class ids).

Two more checks keep other columns out: a label must agree with the scores more than chance would
(a fold number 0..9 beside 10 classes does not), and it must not be the model's own decision (a 0/1
column that a threshold on the score reproduces, a class column equal to the argmax on every row;
a perfect model's labels look the same, so such a column is named in the message, not taken).
When several columns pass, the loader asks which one is the label instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from pbr_core.loading._roles import (BINARY_NAME_PAIRS, DECISION_WORDS, Roles, _short, detect_scores, metadata_by_name,
                                     name_words, profile_columns, strip_prefix)
from pbr_core.loading._source import _Source
from pbr_core.predictions import PredictionsError

#: How far (in standard errors) a candidate's agreement with the scores must exceed chance: a column
#: unrelated to the scores passes with probability ~0.13 % (one-sided normal tail at 3).
MIN_Z = 3.0


@dataclass(frozen=True)
class _Fit:
    column: str
    why: str
    decision: bool = False    # reproduced exactly by the scores: the model's decision (or a perfect model)


def label_by_values(df: pd.DataFrame, columns: Sequence[str], src: _Source, renormalize: bool = False
                    ) -> tuple[str, str] | None:
    """(column, why) of the one column of ``columns`` whose values make it the label, or None.

    Raises the loader's error when several columns could each be the label (the user names it).
    """
    if len(df) == 0 or len(columns) < 2:
        return None
    trial = Roles()
    try:  # the score columns as they would be found without a label (a 0/1 column stays out of them)
        detect_scores(df, columns, src, trial, renormalize)
    except PredictionsError:
        return None  # the score columns themselves are unclear: nothing to match a label against
    scores = trial.scores
    if not scores or all(p.flag for p in profile_columns(df, scores)):
        # Nothing holds probabilities or logits (a lone 0/1 column is the outcome more likely than a
        # score): that, not the label's name, is what the user must fix.
        raise _no_scores(trial, src)
    classlike = [p.name for p in profile_columns(df, [c for c in columns if c not in scores])
                 if (p.kind in ("text", "bool") or (p.kind == "number" and p.whole and not p.missing))
                 and not metadata_by_name(p.name) and not set(name_words(p.name)) & DECISION_WORDS]
    if not classlike:
        return None
    x = df[scores].to_numpy(dtype=np.float64, na_value=np.nan)
    if not np.isfinite(x).all():
        return None
    fits = [f for c in classlike if (f := _fit(df[c], c, scores, x)) is not None]
    good = [f for f in fits if not f.decision]
    if len(good) == 1:
        return good[0].column, f"not named as a label, taken for its values: {good[0].why}"
    if len(good) > 1:
        raise src.error(
            f"no column is named as the label, and {_short([f.column for f in good])} could each be the label by "
            f"their values ({'; '.join(f'{f.column!r}: {f.why}' for f in good)}). Say which column holds the true "
            "labels (label_column=).")
    decisions = [f for f in fits if f.decision]
    if decisions:
        f = decisions[0]
        raise src.error(
            f"no column is named as the label. {f.column!r} could be it by its values, but the scores reproduce it "
            f"on every row ({f.why}): the model's own decision, or the labels of a perfect model? If it holds the "
            "true labels, say so (label_column=).")
    return None


def _fit(series: pd.Series, column: str, scores: list[str], x: np.ndarray) -> _Fit | None:
    """How ``column`` fits as the label of the score block ``x``; None when it cannot be the label."""
    if series.isna().any():
        return None
    if len(scores) == 1:
        y = _zero_one(series)
        return None if y is None else _binary_fit(column, scores[0], x[:, 0], y)
    codes, how = _class_codes(series, scores)
    if codes is None or np.unique(codes).size < 2:
        return None
    k = len(scores)
    pred = np.argmax(x, axis=1)
    n = len(codes)
    agree = float(np.mean(pred == codes))
    chance = float(np.dot(np.bincount(pred, minlength=k), np.bincount(codes, minlength=k))) / n ** 2
    if agree >= 1.0:
        return _Fit(column, f"{how}, equal to the highest-scoring class on all {n:,} rows", decision=True)
    if not 0 < chance < 1 or (agree - chance) / np.sqrt(chance * (1 - chance) / n) <= MIN_Z:
        return None  # no better than chance: a fold, a batch or a code that happens to fit
    return _Fit(column, f"{how}; the highest-scoring class matches it on {agree:.0%} of the rows")


def _zero_one(series: pd.Series) -> np.ndarray | None:
    """0/1 for a column of two values whose class 1 is known (0/1, true/false, no/yes...), else None."""
    if pd.api.types.is_bool_dtype(series.dtype):
        y = series.to_numpy(dtype=np.int64)
    else:
        numbers = pd.to_numeric(series, errors="coerce")
        if numbers.notna().all():
            y = numbers.to_numpy(dtype=np.float64)
            if not np.isin(y, (0.0, 1.0)).all():
                return None
        else:
            text = series.astype(str).str.strip().str.lower()
            values = set(text.unique()[:3])
            pair = next(((no, yes) for no, yes in BINARY_NAME_PAIRS if values == {no, yes}), None)
            if pair is None:
                return None
            y = (text == pair[1]).to_numpy()
    y = np.asarray(y, dtype=np.int64)
    return y if 0 < y.sum() < y.size else None


def _binary_fit(column: str, score: str, p: np.ndarray, y: np.ndarray) -> _Fit | None:
    """A 0/1 column beside p(y=1): its 1s must get higher scores than its 0s, beyond chance (the
    Mann-Whitney AUC against its standard error under no relation), but not every 1 above every 0."""
    if np.any(p < 0) or np.any(p > 1):
        return None  # not p(y=1): the loader's own messages say what the column is
    ones, zeros = p[y == 1], p[y == 0]
    n1, n0 = ones.size, zeros.size
    what = f"0 and 1 beside the one score column {score!r}"
    if zeros.max() < ones.min():
        return _Fit(column, f"{what}, which a threshold on the score reproduces on every row", decision=True)
    ranks = pd.Series(p).rank().to_numpy()
    auc = (ranks[y == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0)
    se = np.sqrt((n1 + n0 + 1) / (12.0 * n1 * n0))
    if (auc - 0.5) / se <= MIN_Z:
        return None
    return _Fit(column, f"{what}, whose 1s get the higher scores (AUC {auc:.2f})")


def _class_codes(series: pd.Series, headers: list[str]) -> tuple[np.ndarray | None, str]:
    """The class index of every row, for class names equal to the score columns' headers (also
    without their common prefix, or ignoring case) or whole numbers in 0..K-1; (None, "") otherwise."""
    k = len(headers)
    numbers = pd.to_numeric(series, errors="coerce") if not pd.api.types.is_bool_dtype(series.dtype) else None
    if numbers is not None and numbers.notna().all():
        v = numbers.to_numpy(dtype=np.float64)
        if np.all(v == np.round(v)) and v.min() >= 0 and v.max() <= k - 1:
            return v.astype(np.int64), f"whole numbers in 0..{k - 1} beside {k} score columns"
        return None, ""
    text = series.astype(str).str.strip()
    for names in (list(headers), strip_prefix(headers)):
        if names is None:
            continue
        for fold in (False, True):
            keys = [str(h).casefold() for h in names] if fold else [str(h) for h in names]
            if len(set(keys)) != k:
                continue
            codes = pd.Index(keys).get_indexer(text.str.casefold() if fold else text)
            if (codes >= 0).all():
                return codes.astype(np.int64), f"every value the name of a score column ({_short(names, 4)})"
    return None, ""


def _no_scores(trial: Roles, src: _Source) -> PredictionsError:
    kept = "; ".join(f"{c!r}: {trial.reasons.get(c, 'metadata')}" for c in trial.metadata[:8])
    return src.error(
        "no label column and no score columns: no column is named like a label, and no column holds "
        "probabilities or logits" + (f" (kept as metadata: {kept})" if kept else "")
        + ". A prediction file needs the model's probabilities or logits, one column per class (or p(y=1)), and "
        "the true labels (label_column=).")
