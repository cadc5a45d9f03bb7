"""The label column found by its values, when no column is named like one.

Real exports name the outcome after what it is (``won``, ``two_year_recid``, ``diagnosis``), not
``label``. When no column has a label's name, a column is taken for the label only when its values
can be nothing else and it is the only such column:

* two values 0 and 1 beside the one score column of a binary file, or two values whose class 1 is
  known by the rule of a label column named as such (true/false, no/yes..., or the class the score
  column's header names: :func:`~pbr_core.loading._roles.binary_classes`);
* text whose every value is the header of one of the score columns (the class names);
* whole numbers in 0..K-1 beside K score columns (class ids).

Two more checks keep other columns out: a label must agree with the scores more than chance would
(a fold number 0..9 beside 10 classes does not), and it must not be the model's own decision (a 0/1
column that a threshold on the score reproduces, a class column equal to the argmax on every row;
a perfect model's labels look the same, so such a column is named in the message, not taken).
When several columns pass, the loader asks which one is the label instead of guessing.

The scores are matched as they will be read: divided by 100 when the user says they are percentages
(a ``p_dem`` of 76.2), and any real number when they are logits (the log-odds of class 1). When no
column is found, :func:`no_label_hint` names the two-valued columns that could be the label and, for
scores outside [0, 1], the reading option that would let one be found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from pbr_core.loading._percent import percent_columns
from pbr_core.loading._roles import (DECISION_WORDS, MixedScoresError, Roles, _short, binary_classes, detect_scores, metadata_by_name,
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


def _trial_scores(df: pd.DataFrame, columns: Sequence[str], src: _Source, renormalize: bool,
                  percent: bool, named: Sequence[str] | None = None,
                  ask: bool = False) -> tuple[Roles, list[str]] | None:
    """The score columns as they would be found without a label (a 0/1 column stays out of them),
    with whole-number percentages taken as the loader takes them when asked; None when they are
    unclear (the loader's own detection then says why). ``named``: the score columns the user named
    (then they are the scores, and every column of ``columns`` may be the label). ``ask``: raise the
    detection's error when columns inside [0, 1] stand beside others outside it
    (:class:`~pbr_core.loading._roles.MixedScoresError`): that, not the label, is what the user must
    settle first (naming the label would only bring that error)."""
    trial = Roles()
    if named is not None:
        return trial, list(named)
    try:
        detect_scores(df, columns, src, trial, renormalize)
    except MixedScoresError:
        if ask:
            raise
        return None
    except PredictionsError:
        return None
    scores = list(trial.scores)
    if percent and (not scores or all(p.flag for p in profile_columns(df, scores))):
        # 76 for 0.76: kept as counts until read as percentages (and a lone 0/1 column taken for the score)
        scores = percent_columns(df, [c for c in trial.metadata
                                      if trial.reasons.get(c, "").startswith("whole numbers outside")]) or scores
    return trial, scores


def _as_read(x: np.ndarray, percent: bool) -> np.ndarray | None:
    """The score block as the loader will read it: divided by 100 for percentages (None when they
    cannot be: the loader's percent check names the value)."""
    if not percent:
        return x
    if x.min() < 0 or x.max() > 100 or x.max() <= 1:
        return None
    return x / 100.0


def label_by_values(df: pd.DataFrame, columns: Sequence[str], src: _Source, renormalize: bool = False,
                    percent: bool = False, input_type: str = "auto", ask: bool = True,
                    scores: Sequence[str] | None = None, positive: str | None = None) -> tuple[str, str] | None:
    """(column, why) of the one column of ``columns`` whose values make it the label, or None.

    ``percent`` and ``input_type`` are the reading options: the scores are matched as they will be
    read. ``scores``: the score columns the user named (not in ``columns``); the label is then
    matched to them, every other column being metadata, instead of to scores detected among
    ``columns``. ``positive``: the class the one score column is the probability of, as the user said
    (``positive_class``). Raises the loader's error when several columns could each be the label (the user
    names it), or when the score columns are ambiguous (:class:`MixedScoresError`), unless ``ask`` is
    False (labels not required: None, the file is read without labels).
    """
    if len(df) == 0 or len(columns) < (1 if scores is not None else 2):
        return None
    found = _trial_scores(df, columns, src, renormalize, percent, named=scores, ask=ask)
    if found is None:
        return None  # the score columns themselves are unclear: nothing to match a label against
    named = scores is not None
    trial, scores = found
    if not named and (not scores or all(p.flag for p in profile_columns(df, scores))):
        if not ask:
            return None
        # Nothing holds probabilities or logits (a lone 0/1 column is the outcome more likely than a
        # score): that, not the label's name, is what the user must fix.
        raise _no_scores(trial, src, _outcome_by_values(df, columns))
    classlike = [p.name for p in profile_columns(df, [c for c in columns if c not in scores])
                 if (p.kind in ("text", "bool") or (p.kind == "number" and p.whole and not p.missing))
                 and not metadata_by_name(p.name)
                 and (not set(name_words(p.name)) & DECISION_WORDS
                      or _holds_the_named_class(df[p.name], scores, positive))]
    if not classlike:
        return None
    x = df[scores].to_numpy(dtype=np.float64, na_value=np.nan)
    if not np.isfinite(x).all():
        return None
    x = _as_read(x, percent)
    if x is None:
        return None
    fits = [f for c in classlike if (f := _fit(df[c], c, scores, x, input_type == "logits", positive)) is not None]
    good = [f for f in fits if not f.decision]
    if len(good) == 1:
        return good[0].column, f"not named as a label, taken for its values: {good[0].why}"
    if not ask:
        return None
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


def _holds_the_named_class(series: pd.Series, scores: Sequence[str], positive: str | None = None) -> bool:
    """Whether a column named as a decision (``decision``: approved/denied) holds the class that the one
    score column is named after (``p_approved``): then it is that score's outcome by name, and may be
    the label like any other column (the checks of :func:`_fit` still apply: a decision that a
    threshold on the score reproduces is the model's own, named in the message, never taken). So it
    is when it holds the class the user said the score is the probability of (``positive``). Other
    words of the model's output (``predicted``, ``score``) keep a column out."""
    if len(scores) != 1 or set(name_words(str(series.name))) & DECISION_WORDS != {"decision"}:
        return False
    names = series.dropna().astype(str).str.strip().unique()[:3].tolist()
    found = _two_classes(names, scores[0], positive) if len(names) == 2 else None
    return found is not None and found[2] is not None  # class 1 named by the score's header


def _two_classes(names: list, header: str, positive: str | None) -> tuple[object, object, str | None] | None:
    """(class 0, class 1, how) of two label values beside the score column ``header``: as the user said
    (``positive``, one of them), else as the file says (:func:`binary_classes`); None when neither does."""
    if positive is not None:
        hit = [n for n in names if str(n).strip().casefold() == str(positive).strip().casefold()]
        return ([n for n in names if n != hit[0]][0], hit[0], "as asked") if len(hit) == 1 else None
    return binary_classes(names, header)


def _fit(series: pd.Series, column: str, scores: list[str], x: np.ndarray, logits: bool = False,
         positive: str | None = None) -> _Fit | None:
    """How ``column`` fits as the label of the score block ``x``; None when it cannot be the label.
    ``logits``: the one score column holds log-odds (any real number)."""
    if series.isna().any():
        return None
    if len(scores) == 1:
        found = _zero_one(series, scores[0], positive)
        return None if found is None else _binary_fit(column, scores[0], x[:, 0], *found, logits=logits)
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


def _zero_one(series: pd.Series, header: str, positive: str | None = None) -> tuple[np.ndarray, str] | None:
    """(0/1, how they are written) for a column of two values whose class 1 is known beside the score
    column ``header``: 0/1, or two values that the loader maps for a label column named as such
    (:func:`~pbr_core.loading._roles.binary_classes`: true/false, no/yes..., or the class the header
    names); else None."""
    if pd.api.types.is_bool_dtype(series.dtype):
        y, what = series.to_numpy(dtype=np.int64), "'False' and 'True'"
    else:
        numbers = pd.to_numeric(series, errors="coerce")
        if numbers.notna().all():
            y, what = numbers.to_numpy(dtype=np.float64), "0 and 1"
            if not np.isin(y, (0.0, 1.0)).all():
                return None
        else:
            text = series.astype(str).str.strip()
            names = sorted(text.unique()[:3].tolist())
            found = _two_classes(names, header, positive) if len(names) == 2 else None
            if found is None:
                return None
            negative, positive, _ = found
            y, what = (text == positive).to_numpy(), f"{negative!r} and {positive!r}"
    y = np.asarray(y, dtype=np.int64)
    return (y, what) if 0 < y.sum() < y.size else None


def _binary_fit(column: str, score: str, p: np.ndarray, y: np.ndarray, written: str = "0 and 1",
                logits: bool = False) -> _Fit | None:
    """A two-valued column beside p(y=1) (or the log-odds of class 1, ``logits``): its class-1 rows
    must get higher scores than its class-0 rows, beyond chance (the Mann-Whitney AUC against its
    standard error under no relation), but not every one above every other. ``written``: how its
    two values are written, for the reason given."""
    if not logits and (np.any(p < 0) or np.any(p > 1)):
        return None  # not p(y=1): the loader's own messages say what the column is (no_label_hint)
    ones, zeros = p[y == 1], p[y == 0]
    n1, n0 = ones.size, zeros.size
    what = f"{written} beside the one score column {score!r}"
    if zeros.max() < ones.min():
        return _Fit(column, f"{what}, which a threshold on the score reproduces on every row", decision=True)
    ranks = pd.Series(p).rank().to_numpy()
    auc = (ranks[y == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0)
    se = np.sqrt((n1 + n0 + 1) / (12.0 * n1 * n0))
    if (auc - 0.5) / se <= MIN_Z:
        return None
    ones_are = "1s" if written == "0 and 1" else f"{written.split(' and ')[1]} rows"
    return _Fit(column, f"{what}, whose {ones_are} get the higher scores (AUC {auc:.2f})")


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


#: Two values that say yes or no, in the order (no, yes), lower case.
_NO_YES = {frozenset(("false", "true")): ("False", "True"), frozenset(("no", "yes")): ("no", "yes"),
           frozenset(("f", "t")): ("f", "t"), frozenset(("0", "1")): ("0", "1")}


def _outcome_by_values(df: pd.DataFrame, columns: Sequence[str]) -> tuple[str, str] | None:
    """(column, "0 and 1") for the one column of ``columns`` that can be an outcome by its values alone:
    exactly two values, none missing, written 0/1, true/false or yes/no, and no identifier, split or
    date by its name; None when there is no such column or more than one (the user then chooses)."""
    found = []
    for c in columns:
        v = df[c]
        if metadata_by_name(c) or v.isna().any():
            continue
        text = v.astype(str).str.strip()
        if pd.api.types.is_numeric_dtype(v.dtype) and not pd.api.types.is_bool_dtype(v.dtype):
            text = pd.to_numeric(v).map(lambda x: f"{x:g}")
        names = text.unique()[:3].tolist()
        pair = _NO_YES.get(frozenset(n.lower() for n in names)) if len(names) == 2 else None
        if pair is not None:
            no, yes = sorted(names, key=lambda n: n.lower() == pair[1].lower())
            found.append((c, f"{no} and {yes}" if pair[0] == "0" else f"{no!r} and {yes!r}"))
    return found[0] if len(found) == 1 else None


def _no_scores(trial: Roles, src: _Source, outcome: tuple[str, str] | None = None) -> PredictionsError:
    """The error for a file with neither scores nor a label by name; ``outcome``: the one column that can
    be the outcome by its values (:func:`_outcome_by_values`), named with the way to map a score column
    that is on another scale (a decile) against it, since the metadata list leaves it out."""
    kept = "; ".join(f"{c!r}: {trial.reasons.get(c, 'metadata')}" for c in trial.metadata[:8])
    hint = ""
    if outcome is not None:
        column, written = outcome
        hint = (f" The column {column!r} holds only {written}: if it is the outcome, and a column holds the model's "
                "scores on another scale (a risk decile, a margin, a credit score), map those scores to "
                f"probabilities with {column!r} as the outcome (pbr_core.scores.map_scores; --map-scores on the "
                "command line).")
    return src.error(
        "no label column and no score columns: no column is named like a label, and no column holds "
        "probabilities or logits" + (f" (kept as metadata: {kept})" if kept else "") + "." + hint
        + " A prediction file needs the model's probabilities or logits, one column per class (or p(y=1)), and "
        "the true labels (label_column=).")


def _unknown_class_hint(df: pd.DataFrame, columns: Sequence[str], score: str, src: _Source) -> str:
    """For one score column: the columns of two names (approved/denied; not an id, not named as the
    model's output other than ``decision``) that could be its label if the file said which name the
    score is the probability of; the sentence that says how to say it ("" when there are none). One
    such column is recorded in ``src.seen["undecided_classes"]``."""
    named = []
    for c in columns:
        words = set(name_words(c)) & DECISION_WORDS
        if metadata_by_name(c) or (words and words != {"decision"}) or pd.api.types.is_numeric_dtype(df[c].dtype):
            continue
        names = df[c].dropna().astype(str).str.strip().unique()[:3].tolist()
        if len(names) == 2 and binary_classes(names, score) is None:
            named.append((c, sorted(names)))
    if not named:
        return ""
    c, (a, b) = named[0]
    if len(named) == 1:  # for a front end's choice of the class (:func:`pbr_core.loading._with_columns`)
        src.seen["undecided_classes"] = (c, (a, b), score)
    more = f" (also {_short([n for n, _ in named[1:]], 6)})" if len(named) > 1 else ""
    return (f" Column {c!r}{more} holds two names, {a!r} and {b!r}, but the file does not say which class {score!r} "
            f"is the probability of: say which (positive_class={a!r} or positive_class={b!r}), and the label is "
            "then found by its values.")


def no_label_hint(df: pd.DataFrame, columns: Sequence[str], src: _Source, renormalize: bool = False,
                  percent: bool = False, input_type: str = "auto", scores: Sequence[str] | None = None) -> str:
    """What the message for a file without a label column adds: the columns of two values that could
    be the label, and, for one score column outside [0, 1] read as neither percentages nor logits,
    the reading option under which a label could be matched to it ("" when there is nothing to say).
    ``scores``: the score columns the user named (as for :func:`label_by_values`)."""
    found = _trial_scores(df, columns, src, renormalize, percent, named=scores)
    scores = found[1] if found is not None else []
    # Two values a label could hold beside one score column (0/1, true/false, no/yes...; not a column
    # named like an id or the model's own output, which is never taken for the label)
    two = [c for c in columns if c not in scores and df[c].nunique(dropna=True) == 2 and not metadata_by_name(c)
           and not set(name_words(c)) & DECISION_WORDS
           and (len(scores) != 1 or _zero_one(df[c].dropna(), scores[0]) is not None)]
    out = ""
    if two:
        out += f" Column{'s' if len(two) > 1 else ''} with two values, which could be the label: {_short(two, 8)}."
    if len(scores) == 1:
        out += _unknown_class_hint(df, [c for c in columns if c not in scores and c not in two], scores[0], src)
    if len(scores) == 1 and not percent and input_type != "logits":
        x = pd.to_numeric(df[scores[0]], errors="coerce").to_numpy(dtype=np.float64)
        x = x[np.isfinite(x)]
        if x.size and (x.min() < 0 or x.max() > 1):
            where = f"The score column {scores[0]!r} holds values from {x.min():.6g} to {x.max():.6g}, outside [0, 1]"
            if x.min() >= 0 and x.max() <= 100:
                out += (f" {where}: percentages? Read them as percentages (percent=True), and a label can be "
                        "matched to them by its values.")
            else:
                out += (f" {where}: if it holds the log-odds of class 1, load the columns as logits "
                        "(input_type='logits').")
    return out
