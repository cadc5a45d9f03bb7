"""Column roles: which column of a table is the label, which are the scores, which are kept as
metadata (ids, folds, codes, text segments, dates) and which are ignored.

Real exports carry more than predictions. A column that is not a score must never become one
silently (a numeric id read as one more class turns an ECE of 0.10 into 0.90), and a text column
must not get the whole file refused. The rules, in order:

1. Roles the user names (``label_column``, ``score_columns``, ``group_columns``,
   ``ignore_columns``) are taken as given; every other column is then kept as metadata.
2. The label column is found by name (:data:`LABEL_COLUMN_NAMES`); a top-label-only file by its
   ``confidence`` and ``predicted`` columns (when no probability columns are there).
3. Without named score columns, each remaining column is profiled:

   * text, dates and true/false -> metadata (never a score);
   * a name that says id, index, fold, split, seed, date, time or weight -> metadata;
   * whole numbers with any value outside [0, 1] (ids, fold numbers, codes, counts, years) -> metadata;
   * whole numbers that are all 0 or 1 -> a score only if the probability rows need it to sum to 1;
   * other numbers -> scores.

   When the score candidates mix columns inside [0, 1] with columns outside it, the columns whose
   rows sum to 1 are the probabilities and the rest are metadata; when no such block exists, the
   loader says the score columns are ambiguous and asks to name them, instead of guessing.

Every decision is written into the notes (one line per role, with the reason).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal, Sequence

import numpy as np
import pandas as pd

from pbr_core.predictions import BINARY_NAME_PAIRS, UNIT_SLACK, PredictionsError  # the pairs: beside Predictions, which reads them too
from pbr_core.loading._source import (
    CONFIDENCE_COLUMN_NAMES,
    LABEL_COLUMN_NAMES,
    PREDICTED_COLUMN_NAMES,
    ColumnChoice,
    _Source,
)

Role = Literal["label", "score", "confidence", "predicted", "correct", "group", "metadata", "ignored"]

#: Last word of a column name (snake_case or camelCase) that marks an identifier, a data split, a
#: time or a weight, with the reason given in the notes: such numeric columns are metadata, never scores.
METADATA_NAME_WORDS: dict[str, str] = {
    **dict.fromkeys(("id", "ids", "idx", "index", "uuid", "guid", "key", "row", "rownum"), "an identifier"),
    **dict.fromkeys(("fold", "folds", "split", "partition", "seed", "subset"), "a data split"),
    **dict.fromkeys(("date", "time", "timestamp", "datetime", "ts", "at"), "a date or time"),
    **dict.fromkeys(("weight", "weights"), "a weight"),
    # what a run logs per record next to its predictions
    **dict.fromkeys(("loss", "losses", "entropy", "uncertainty", "latency", "duration", "elapsed", "runtime",
                     "nll", "variance", "std", "temperature"),  # not "margin": a binary model's score may be one
                    "a per-record measurement"),
}
#: Whole names that are metadata whatever their last word.
#: The column in which the calibrated downloads (the dashboard's, ``pbr-calib apply``'s where it knows
#: them) mark the rows the recalibrator was fitted on (True / False). Read back as metadata by its name,
#: never as the label: its two values beside one score column would otherwise be a candidate.
FIT_ROWS_COLUMN = "used_for_fit"

METADATA_NAMES = {FIT_ROWS_COLUMN: "the rows a recalibrator was fitted on (a calibrated download's own column)",
                  "row_number": "an identifier", "row_index": "an identifier", "sample": "an identifier",
                  "set": "a data split",
                  # per-record scores of an evaluation harness (lm-evaluation-harness: acc, acc_norm)
                  # ("acc" and "pass" are not among them: class names too, UCI car's unacc/acc/good/vgood)
                  **dict.fromkeys(("acc_norm", "exact_match", "f1", "bleu", "rouge", "rouge_l", "rougel", "bleurt",
                                   "pass_at_1"), "a per-record evaluation metric"),
                  # A unit of time alone names a time; as the last word it need not ("hours_per_week").
                  **dict.fromkeys(("year", "month", "week", "day", "hour", "minute", "epoch"), "a date or time")}

#: Rows of a probability block must sum to 1 within this tolerance to count as one when columns are
#: picked (the loader's own sum check, with the user's tolerance, comes later).
_BLOCK_TOLERANCE = 1e-3
_TEXT_SAMPLE = 2000
#: A number written with a decimal comma ("0,25", "-1,5e-3").
DECIMAL_COMMA_NUMBER = r"-?\d*,\d+(?:e-?\d+)?"
_DATE_RE = re.compile(r"^\s*(\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4})([ T]\d{1,2}:\d{2}.*)?\s*$")
_TRUE_FALSE = frozenset({"true", "false", "yes", "no", "t", "f"})


# ------------------------------------------------------------------------------ what the user named
def column_list(value: str | Sequence[str] | None, what: str) -> tuple[str, ...] | None:
    """Normalise a user's column list: None, a comma-separated string or a sequence of names."""
    if value is None:
        return None
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
    else:
        try:
            items = [str(v).strip() for v in value]
        except TypeError:
            raise TypeError(f"{what} must be a list of column names, but got {type(value).__name__}.") from None
    items = [v for v in items if v]
    return tuple(dict.fromkeys(items))


# ------------------------------------------------------------------------------ the decision
@dataclass
class Roles:
    """Which column plays which part; ``reasons`` says why a column was kept as metadata (or, for a
    label column found by something other than its name, why it is the label)."""

    label: str | None = None
    scores: list[str] = field(default_factory=list)
    confidence: str | None = None
    predicted: str | None = None
    correct: str | None = None
    groups: list[str] = field(default_factory=list)
    metadata: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)   # kept column -> "text" | "date" | "number" | "bool"

    @property
    def top_label(self) -> bool:
        return self.confidence is not None

    def kept(self) -> list[str]:
        """Columns kept next to the predictions (groups first, then the other metadata)."""
        return [*self.groups, *self.metadata]

    def table(self, columns: Sequence[str]) -> tuple[tuple[str, Role], ...]:
        """(column, role) for every column, in file order."""
        role: dict[str, Role] = {c: "score" for c in self.scores}
        role.update({c: "group" for c in self.groups})
        role.update({c: "metadata" for c in self.metadata})
        role.update({c: "ignored" for c in self.ignored})
        if self.label is not None:
            role[self.label] = "label"
        if self.confidence is not None:
            role[self.confidence] = "confidence"
        if self.predicted is not None:
            role[self.predicted] = "predicted"
        if self.correct is not None:
            role[self.correct] = "correct"
        return tuple((c, role[c]) for c in columns if c in role)

    def notes(self) -> list[str]:
        """One plain line per role: what each column was used as, and why where it was decided."""
        out = []
        if self.label is not None:
            why = self.reasons.get(self.label)
            out.append(f"Label column: {self.label!r}{f' ({why})' if why else ''}.")
        if self.top_label:
            why = self.reasons.get(self.confidence)
            other = (f"whether it was right {self.correct!r}" if self.correct is not None
                     else f"predicted class {self.predicted!r}")
            out.append(f"Top-label columns: confidence {self.confidence!r}{f' ({why})' if why else ''}, {other}.")
        if self.scores:
            out.append(f"Score columns ({len(self.scores)}): {_short(self.scores)}.")
        if self.groups:
            out.append(f"Group columns (kept for analysis by group): {_short(self.groups)}.")
        if self.metadata:
            by_reason: dict[str, list[str]] = {}
            for c in self.metadata:
                by_reason.setdefault(self.reasons.get(c, "not a score"), []).append(c)
            parts = [f"{_short(cols)} ({why})" for why, cols in by_reason.items()]
            out.append("Kept as metadata, not scores: " + "; ".join(parts) + ".")
        if self.ignored:
            out.append(f"Ignored (as asked): {_short(self.ignored)}.")
        return out


def _short(cols: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(repr(str(c)) for c in list(cols)[:limit])
    return shown + (f", ... ({len(cols) - limit} more)" if len(cols) > limit else "")


def name_words(name: str) -> list[str]:
    """'customerId' -> ['customer', 'id']; 'Sample Weight' -> ['sample', 'weight']."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", str(name).strip())
    return [w for w in re.split(r"[^0-9a-zA-Z]+", spaced.lower()) if w]


def interval_of(name: str, columns: Sequence[str]) -> str | None:
    """The column ``name`` is one end of an interval around, or None: ``<column>_low`` and
    ``<column>_high`` both present next to ``<column>`` (the interval columns that
    :func:`~pbr_core.loading.save_predictions` writes beside a probability column)."""
    for suffix in ("_low", "_high"):
        if name.endswith(suffix) and len(name) > len(suffix):
            stem = name[: -len(suffix)]
            if stem in columns and f"{stem}_low" in columns and f"{stem}_high" in columns:
                return stem
    return None


def metadata_by_name(name: str) -> str | None:
    """What a column's name says it is (e.g. "an identifier" for ``customerId``), or None."""
    words = name_words(name)
    if not words:
        return None
    return METADATA_NAMES.get("_".join(words)) or METADATA_NAME_WORDS.get(words[-1])


def resolve(columns: Sequence[str], wanted: str, what: str, src: _Source,
            present: frozenset[str] | None = None) -> str:
    """The column the user means by ``wanted`` (exact, else the one case-insensitive match).
    ``present``: ``columns`` as a set, for many look-ups (a list is searched a name at a time: the
    20,000 class columns of a score vector took 1.6 s, 200,000 about 160 s; audit 12c)."""
    if wanted in (present if present is not None else columns):
        return wanted
    ci = [c for c in columns if c.lower() == str(wanted).strip().lower()]
    if len(ci) == 1:
        return ci[0]
    raise src.error(f"{what} {wanted!r} is not a column; the columns are {_short(columns)}.")


def named_roles(columns: Sequence[str], choice: ColumnChoice, src: _Source) -> Roles:
    """The roles the user named, checked: every name exists and no column has two roles."""
    roles = Roles()
    taken: dict[str, str] = {}
    present = frozenset(columns)

    def take(col: str, role: str) -> None:
        if col in taken and taken[col] != role:
            raise src.error(f"column {col!r} was named both as {taken[col]} and as {role}; give it one role.")
        taken[col] = role

    if choice.label:
        roles.label = resolve(columns, choice.label, "label column", src, present)
        take(roles.label, "the label")
    for c in choice.scores or ():
        col = resolve(columns, c, "score column", src, present)
        take(col, "a score column")
        roles.scores.append(col)
    for c in choice.groups:
        col = resolve(columns, c, "group column", src, present)
        take(col, "a group column")
        roles.groups.append(col)
    for c in choice.ignore:
        col = resolve(columns, c, "column to ignore", src, present)
        take(col, "a column to ignore")
        roles.ignored.append(col)
    roles.scores = list(dict.fromkeys(roles.scores))
    return roles


def find_by_name(columns: Sequence[str], candidates: Sequence[str], what: str, src: _Source,
                 option: str = "") -> str | None:
    """The one column whose name is one of ``candidates`` (any case), None, or an error if several are."""
    found = [c for c in columns if c.strip().lower() in candidates]
    if len(found) > 1:
        name = what.replace(" column", "")
        raise src.error(f"ambiguous {what}: {_short(found)} could each be the {name}; keep one"
                        + (f", or name the {what} ({option})." if option else "."))
    return found[0] if found else None


# ------------------------------------------------------------------------------ column profiles
@dataclass
class Profile:
    """What a column holds, read from its values (numbers are parsed once and kept)."""

    name: str
    kind: Literal["number", "text", "date", "bool"]
    values: np.ndarray | None = None      # float64 with NaN for missing, for kind "number"
    integer_typed: bool = False           # stored as integers (a float column never is)
    whole: bool = False                   # every value a whole number
    unit: bool = False                    # every value in [0, 1]
    missing: bool = False                 # some cells empty
    bad_cells: int = 0                    # non-numeric cells in a mostly numeric column
    decimal_comma: bool = False           # text that reads as numbers written with a decimal comma

    @property
    def flag(self) -> bool:
        """Integers that are all 0 or 1: a yes/no column, or (rarely) hard 0/1 probabilities."""
        return self.kind == "number" and self.integer_typed and self.unit


def profile(series: pd.Series, name: str) -> Profile:
    """The profile of one column (see :func:`profile_columns` for many at once)."""
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return Profile(name, "bool")
    if pd.api.types.is_datetime64_any_dtype(dtype) or isinstance(dtype, pd.PeriodDtype):
        return Profile(name, "date")
    if pd.api.types.is_numeric_dtype(dtype):
        return _numeric_profiles([name], series.to_numpy(dtype=np.float64, na_value=np.nan)[:, None],
                                 pd.api.types.is_integer_dtype(dtype))[0]
    # The first values present decide text or numbers; the whole column becomes Python objects only
    # for a column of numbers with some text (a text column of millions of rows never does).
    first = np.flatnonzero(series.notna().to_numpy())[:_TEXT_SAMPLE]
    if first.size == 0:
        return _numeric_profiles([name], np.full((len(series), 1), np.nan), False)[0]
    sample = series.iloc[first].astype(object)
    texts = [v.decode("latin-1") if isinstance(v, bytes) else str(v) for v in sample.tolist()]
    if float(pd.to_numeric(pd.Series(texts, dtype=object), errors="coerce").notna().mean()) < 0.5:
        return _text_profile(name, texts)
    values = series.astype(object)
    coerced = pd.to_numeric(values, errors="coerce")
    prof = _numeric_profiles([name], coerced.to_numpy(dtype=np.float64, na_value=np.nan)[:, None],
                             pd.api.types.is_integer_dtype(coerced.dtype))[0]
    prof.bad_cells = int((coerced.isna() & values.notna()).sum())
    return prof


_DECIMAL_COMMA_RE = re.compile(DECIMAL_COMMA_NUMBER, re.IGNORECASE)


def _text_profile(name: str, texts: list[str]) -> Profile:
    """The profile of a column whose sample ``texts`` are mostly not numbers: yes/no words, dates, numbers
    with a decimal comma, or text. In plain Python on the sample: pandas' string methods cost ~1.5 ms a
    column in overhead (200 rows x 20,000 text columns took 35 CPU s to load; audit 12c)."""
    stripped = [t.strip() for t in texts]
    lowered = set(list(dict.fromkeys(t.lower() for t in stripped))[:10])  # the first 10 distinct, as unique()
    if lowered <= _TRUE_FALSE:
        return Profile(name, "bool")
    if np.mean([_DATE_RE.match(t) is not None for t in texts]) > 0.9:
        return Profile(name, "date")
    comma = np.mean([_DECIMAL_COMMA_RE.fullmatch(t) is not None for t in stripped]) > 0.9
    return Profile(name, "text", decimal_comma=bool(comma))


def profile_columns(df: pd.DataFrame, names: Sequence[str]) -> list[Profile]:
    """Profiles of ``names``, in order; plain numeric columns in column blocks (a file with 50,000
    class columns must not pay pandas' per-column overhead 50,000 times)."""
    dtypes = dict(zip(df.columns, df.dtypes))  # a dict: Series lookups cost ~20 us each
    numeric = [c for c in names if pd.api.types.is_numeric_dtype(dtypes[c]) and not pd.api.types.is_bool_dtype(dtypes[c])]
    out: dict[str, Profile] = {}
    step = max(1, (1 << 22) // max(len(df), 1))  # ~32 MB of float64 per block
    for integer in (True, False):
        cols = [c for c in numeric if pd.api.types.is_integer_dtype(dtypes[c]) == integer]
        for i in range(0, len(cols), step):
            block = cols[i:i + step]
            for p in _numeric_profiles(block, df[block].to_numpy(dtype=np.float64, na_value=np.nan), integer):
                p.values = None  # read again from the frame when needed (no second copy of the scores)
                out[p.name] = p
    return [out[c] if c in out else profile(df[c], c) for c in names]


def _numeric_profiles(names: Sequence[str], v: np.ndarray, integer_typed: bool) -> list[Profile]:
    finite = np.isfinite(v)
    with np.errstate(invalid="ignore"):
        whole = np.all((v == np.round(v)) | ~finite, axis=0) & finite.any(axis=0)
        # (within float rounding of [0, 1]: the loader clips such probabilities, UNIT_SLACK)
        unit = np.all(((v >= -UNIT_SLACK) & (v <= 1 + UNIT_SLACK)) | ~finite, axis=0)
    missing = np.isnan(v).any(axis=0)
    return [Profile(name, "number", values=v[:, j], integer_typed=integer_typed, whole=bool(whole[j]),
                    unit=bool(unit[j]), missing=bool(missing[j])) for j, name in enumerate(names)]


# ------------------------------------------------------------------------------ detecting scores
def _blocks(df: pd.DataFrame, profiles: Sequence[Profile]):
    """(profiles, values) in column blocks of ~32 MB: sums over thousands of columns stay vectorised."""
    step = max(1, (1 << 22) // max(len(df), 1))
    for i in range(0, len(profiles), step):
        part = list(profiles[i:i + step])
        if all(p.values is None for p in part):
            values = df[[p.name for p in part]].to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            values = np.column_stack([p.values if p.values is not None else
                                      df[p.name].to_numpy(dtype=np.float64, na_value=np.nan) for p in part])
        yield part, values


def _row_sums(df: pd.DataFrame, profiles: Sequence[Profile]) -> np.ndarray:
    total = np.zeros(len(df))
    for _, values in _blocks(df, profiles):
        total += values.sum(axis=1)
    return total


def _sums_to_one(df: pd.DataFrame, profiles: Sequence[Profile], unit_only: bool = True) -> bool:
    if len(profiles) < 2 or not all((p.unit or not unit_only) and p.kind == "number" for p in profiles):
        return False
    total = _row_sums(df, profiles)
    ok = np.abs(total - 1.0) <= _BLOCK_TOLERANCE
    return bool(np.all(ok | np.isnan(total)))


#: From this many rows on, values say more than names: a logit column does not stay inside [0, 1]
#: and logits are not all whole numbers. Smaller files keep the simple rule (values outside [0, 1]
#: anywhere -> logits), as a handful of rows cannot tell.
MANY_ROWS = 50


def detect_scores(df: pd.DataFrame, names: Sequence[str], src: _Source, roles: Roles,
                  renormalize: bool = False, named_score: str | None = None) -> None:
    """Fill ``roles.scores`` and ``roles.metadata`` from the values of the unassigned columns ``names``.
    ``named_score``: a column whose header names the label column as what it is the probability of
    (``p_fraud`` next to ``fraud``); when it stays inside [0, 1] and the values alone do not make a
    probability block, it is the score of a binary file and the other columns are metadata."""
    profiles = profile_columns(df, names)
    many = len(df) >= MANY_ROWS
    candidates: list[Profile] = []
    flags: list[Profile] = []
    for p in profiles:
        if p.decimal_comma:
            _keep(roles, p, "text: numbers with a decimal comma (0,25) in a comma-separated file? Save it with "
                            "decimal points, or with semicolons between the columns")
        elif p.kind != "number":
            _keep(roles, p, {"text": "text", "date": "dates", "bool": "true/false values"}[p.kind])
        elif metadata_by_name(p.name):
            _keep(roles, p, f"{metadata_by_name(p.name)}, by its name")
        elif interval_of(p.name, names):
            _keep(roles, p, "one end of the interval around the probability column it is named after (a Venn-Abers "
                            "predictor's (p0, p1), as pbr-calib apply writes it)")
        elif p.whole and not p.unit and (p.integer_typed or p.missing or many):
            _keep(roles, p, "whole numbers outside [0, 1]: an id, a code or a count"
                  + (", with some text" if p.bad_cells else ""))
        elif p.flag:
            flags.append(p)
        else:
            candidates.append(p)

    if not candidates and not flags:
        return
    unit = [p for p in candidates if p.unit]
    outside = [p for p in candidates if not p.unit]
    named = next((p for p in unit if p.name == named_score), None)
    chosen: list[Profile]
    left_out: str | None = None  # why the other columns are not scores, where their names decided it
    if (named is not None and len(candidates) + len(flags) > 1
            and not _sums_to_one(df, _in_order(profiles, unit + flags))):
        chosen = [named]  # p_fraud next to fraud: an amount, a rate, a yes/no column are not its classes
        left_out = f"not a score: {named_score!r} is the probability of {roles.label!r}, by its name"
    elif not outside:
        extra = _one_too_many(df, candidates + flags)
        if len(candidates) + len(flags) == 1:
            chosen = candidates + flags
        elif _sums_to_one(df, _in_order(profiles, candidates + flags)):
            chosen = candidates + flags
        elif flags and (len(candidates) == 1 or _sums_to_one(df, candidates)):
            chosen = candidates  # p(y=1), or a probability block, next to yes/no columns
        elif extra is not None:
            chosen = [p for p in candidates + flags if p is not extra]
        elif flags and not candidates:
            raise _ambiguous(src, flags, "each holds only 0 and 1, and their rows do not sum to 1")
        elif flags and not renormalize:
            raise _ambiguous(src, candidates + flags,
                             f"their rows do not sum to 1, and {_short([p.name for p in flags])} hold only 0 and 1 "
                             "(a yes/no column or a score?)")
        else:
            chosen = candidates + flags  # probabilities that do not sum to 1: the sum check says so
    elif unit and _sums_to_one(df, unit):
        chosen = unit  # a probability block, plus numbers outside [0, 1] that cannot belong to it
    elif (block := _corrupted_block(df, profiles, unit + flags, outside)) is not None:
        chosen = block  # probabilities with a cell outside [0, 1]: the loader names it
    elif (lone := _lone_named_probability(df, unit, outside)) is not None:
        chosen = [lone]  # approval_score (93.3%) beside a loan_amount: p(y=1) and a covariate, by their names
        left_out = (f"not a score: outside [0, 1], and not named as one, while {lone.name!r} is named as a "
                    "probability and stays inside [0, 1]")
    elif unit and many:
        inside = [p.name for p in unit]
        raise MixedScoresError(_ambiguous(src, candidates,
                         f"{_short(inside)} {'stays' if len(inside) == 1 else 'stay'} inside [0, 1] (probabilities?) "
                         f"while {_short([p.name for p in outside])} {'does' if len(outside) == 1 else 'do'} not "
                         "(logits, or something else?), and no set of "
                         "them sums to 1 per row").args[0]
            # what to choose in the common case: p(y=1) beside a covariate (an R export's bmi, an amount)
            + f" If {_short(inside)} {'holds' if len(inside) == 1 else 'hold'} the model's probabilities, name "
              f"{'it as the only score column' if len(inside) == 1 else 'them as the score columns'} "
              f"(score_columns={list(inside)!r}): the other columns are then kept as metadata"
              + (", and a label column is found by its values." if roles.label is None else "."))
    else:
        chosen = candidates  # logits (some values outside [0, 1])
        family = _name_family(candidates)
        if family is not None and len(family) < len(candidates):
            chosen = family  # logit_0 .. logit_9, and a 'conf_gap' that is named otherwise
            left_out = f"not named like the score columns ({_short([q.name for q in family], 3)})"
    chosen_names = {p.name for p in chosen}
    for p in candidates + flags:
        if p.name not in chosen_names:
            why = left_out or ("holds only 0 and 1 and is not part of the probability rows" if p.flag else
                               "in [0, 1], but the other columns' rows sum to 1 without it" if p.unit else
                               "outside [0, 1] while the other score columns are probabilities summing to 1")
            _keep(roles, p, why)
    roles.scores = [p.name for p in profiles if p.name in chosen_names]


#: Words of a header that name a probability (``approval_score``, ``p_approved``, ``default_prob``).
PROBABILITY_WORDS = frozenset(("p", "prob", "probs", "proba", "probability", "score"))

#: Words of a header that name a number outside [0, 1] as a model's output (log-odds, a margin).
OUTPUT_WORDS = frozenset(("logit", "logits", "log", "margin", "logodds", "odds", "decision", "raw", "z"))


#: A number beyond this in size is no model's log-odds (p within 4e-44 of 0 or 1): an amount, a count.
NO_LOG_ODDS = 100.0


def _lone_named_probability(df: pd.DataFrame, unit: Sequence[Profile], outside: Sequence[Profile]) -> Profile | None:
    """The one column inside [0, 1] named as a probability, beside numbers outside [0, 1] of which none
    is named as a score or a model's output and each reaches beyond any log-odds (a ``loan_amount`` of
    504 to 49,993, an ``income``): the score of a binary file, the others its covariates. None
    otherwise (``p`` beside ``logit_p``, or beside a ratio of 0.5 to 3.7: the user says which)."""
    named = [p for p in unit if set(name_words(p.name)) & PROBABILITY_WORDS]
    if len(unit) != 1 or len(named) != 1 or not outside:
        return None
    if any(set(name_words(p.name)) & (PROBABILITY_WORDS | OUTPUT_WORDS) for p in outside):
        return None
    if not all(np.nanmax(np.abs(pd.to_numeric(df[p.name], errors="coerce").to_numpy(dtype=np.float64,
                                                                                    na_value=np.nan)))
               > NO_LOG_ODDS for p in outside):
        return None  # a balance_ratio of 0.5 to 3.7 may be log-odds: the user says which
    return named[0]


def _name_shape(name: str) -> str | None:
    """What a class's score column's header looks like apart from the class: digits as '#'
    (``logit_3`` -> ``logit_#``, ``7`` -> ``#``), else the part before the last separator
    (``p_cat`` -> ``p_*``); None for a plain word (``margin``, ``cat``)."""
    text = str(name).strip().lower()
    if re.search(r"\d", text):
        return re.sub(r"\d+", "#", text)
    m = re.fullmatch(r"(.+[_\-. ])[^_\-. ]+", text)
    return m.group(1) + "*" if m else None


def _name_family(profiles: Sequence[Profile]) -> list[Profile] | None:
    """The columns named alike (:func:`_name_shape`), when one shape is shared by at least two
    columns and by more than half of all: the class scores of ``logit_0`` .. ``logit_9`` beside a
    ``conf_gap``; None when no shape stands out (``cat``, ``dog``, ``bird``; or ImageNet's
    thousand names, of which 'brown bear' and 'brown shark' share a shape by chance)."""
    shapes: dict[str, list[Profile]] = {}
    for p in profiles:
        shape = _name_shape(p.name)
        if shape is not None:
            shapes.setdefault(shape, []).append(p)
    family = max(shapes.values(), key=len, default=[])
    return family if len(family) >= 2 and 2 * len(family) > len(profiles) else None


def _one_too_many(df: pd.DataFrame, profiles: Sequence[Profile]) -> Profile | None:
    """The one column without which the others' rows sum to 1 (e.g. a stored confidence or an
    uncertainty next to the class probabilities), or None when there is not exactly one."""
    if len(profiles) < 3 or not all(p.unit for p in profiles):
        return None
    total = _row_sums(df, profiles)
    fits = []
    for part, values in _blocks(df, profiles):
        ok = np.all(np.abs(total[:, None] - values - 1.0) <= _BLOCK_TOLERANCE, axis=0)
        fits += [p for p, good in zip(part, ok) if good]
    return fits[0] if len(fits) == 1 else None


#: Up to this many columns outside [0, 1] are each tried as the one corrupted column of a probability
#: block (each try sums the block once).
_CORRUPTED_TRIES = 8


def _corrupted_block(df: pd.DataFrame, profiles: Sequence[Profile], inside: Sequence[Profile],
                     outside: Sequence[Profile]) -> list[Profile] | None:
    """The columns of a probability block with corrupted cells: ``inside`` (columns in [0, 1]) with
    all of ``outside``, or with one of them, when every row sums to 1; None when no such block.

    Rows that sum to 1 make probabilities even where a cell is negative or above 1 (the loader then
    refuses the file naming that cell, instead of reading the columns as logits or calling them
    ambiguous); logits do not sum to 1 row after row (:func:`pbr_core.predictions.rows_sum_to_one`).
    """
    tries = [list(outside)]
    if 1 < len(outside) <= _CORRUPTED_TRIES:
        tries += [[o] for o in outside]
    for extra in tries:
        block = _in_order(profiles, [*inside, *extra])
        if _sums_to_one(df, block, unit_only=False) and not np.all(np.isnan(_row_sums(df, block))):
            return block
    return None


def _in_order(profiles: Sequence[Profile], chosen: Sequence[Profile]) -> list[Profile]:
    names = {p.name for p in chosen}
    return [p for p in profiles if p.name in names]


def _keep(roles: Roles, p: Profile, why: str) -> None:
    roles.metadata.append(p.name)
    roles.reasons[p.name] = why
    roles.kinds[p.name] = p.kind


class MixedScoresError(PredictionsError):
    """Score candidates inside [0, 1] beside others outside it, no set summing to 1 (a probability
    beside a covariate such as a BMI, or logits beside a rate): which are the scores is the user's
    choice, and nothing else about the file (its label) can be decided before it."""


def _ambiguous(src: _Source, profiles: Sequence[Profile], why: str):
    return src.error(
        f"the score columns are ambiguous: {_short([p.name for p in profiles])} could be scores, but {why}. "
        "Name the score columns (score_columns=), or the columns that are not scores as columns to ignore "
        "(ignore_columns=)."
    )


def duplicates(names: Sequence[str]) -> list[str]:
    """Names that occur more than once (linear time: wide files have tens of thousands of columns)."""
    return sorted(n for n, k in Counter(names).items() if k > 1 and n)



#: Endings that mark a column as the probability of the class it names (``churn_prob``).
SCORE_SUFFIXES = ("_probability", "_proba", "_prob", "_score", "_pred", "_p", " probability", " prob")


#: ``p(churn)``, ``prob(y = 1)``: the class a probability column names, inside the brackets (lower case).
_P_OF = re.compile(r"p(?:rob)?\s*\(\s*(?:y\s*=\s*)?(.+?)\s*\)")


def _named_forms(header: str) -> set[str]:
    """What a score column's header may name, lower case: the header itself, and without a known
    prefix (``p_churn``, ``prob_default``) or ending (``churn_prob``), or inside ``p(churn)``."""
    h = header.strip().lower()
    forms = {h}
    forms.update(h[len(x):] for x in SCORE_PREFIXES if h.startswith(x) and len(h) > len(x))
    forms.update(h[:-len(x)] for x in SCORE_SUFFIXES if h.endswith(x) and len(h) > len(x))
    m = _P_OF.fullmatch(h)
    if m:
        forms.add(m.group(1))
    return forms


#: Prefixes and endings of a label column's header around the outcome it names (``is_fraud``,
#: ``churn_flag``, ``y_default``): stripped when matching the label to the score column named after it
#: (``fraud_score``, ``p_churn``, ``default_prob``), and from a score's header (``p_is_fraud``).
LABEL_PREFIXES = ("is_", "has_", "had_", "was_", "did_", "will_", "label_", "y_", "target_", "true_", "actual_")
LABEL_SUFFIXES = ("_flag", "_label", "_ind", "_indicator", "_target", "_outcome", "_yn", "_true", "_actual")
#: What is left of such a header that names no outcome (``y_true`` -> ``y``, ``true_label`` -> ``true``):
#: never matched, or ``y_true`` would be the outcome of ``y_prob`` and ``y_pred`` alike.
_NO_STEM = frozenset(LABEL_COLUMN_NAMES) | {"true", "false", "yes", "no", "0", "1", "pos", "neg", "positive",
                                             "negative", "flag", "value", "pred", "prob", "score"}


def _outcome_stems(form: str) -> set[str]:
    """``form`` (lower case) and what it names without a label prefix or ending (``is_fraud`` -> ``fraud``)."""
    stems = {form}
    stems.update(form[len(x):] for x in LABEL_PREFIXES if form.startswith(x) and len(form) > len(x))
    stems.update(form[:-len(x)] for x in LABEL_SUFFIXES if form.endswith(x) and len(form) > len(x))
    return {s for s in stems if s == form or s not in _NO_STEM}


def names_outcome(score: str) -> tuple[set[str], set[str]]:
    """(exact, loose): the outcomes a score column's header names. ``exact`` are the label headers it
    names as such (:func:`_named_forms` less the header itself: ``fraud`` for ``p_fraud``); ``loose``
    also without a label prefix or ending (``fraud`` for ``p_is_fraud``), matched to a label's
    :func:`_outcome_stems` (``is_fraud``, ``fraud_flag``) only where no exact match decides."""
    exact = _named_forms(score) - {score.strip().lower()}
    return exact, {stem for form in exact for stem in _outcome_stems(form)}


def score_named_after(label: str, columns: Sequence[str]) -> str | None:
    """The one column of ``columns`` whose header names ``label`` as what it is the probability of:
    ``p_fraud``, ``fraud_prob``, ``p(fraud)`` beside ``fraud`` first; failing that, with the label's
    ``is_``/``has_``/``_flag``... (:data:`LABEL_PREFIXES`, :data:`LABEL_SUFFIXES`) set aside:
    ``fraud_score`` beside ``is_fraud``. None where none, or two at the same step, qualify."""
    want = label.strip().lower()
    stems = _outcome_stems(want)
    named = [(c, *names_outcome(c)) for c in columns if c.strip().lower() != want]
    for hits in ([c for c, exact, _ in named if want in exact], [c for c, _, loose in named if loose & stems]):
        if hits:
            return hits[0] if len(hits) == 1 else None
    return None


def _named_class(header: str, names: Sequence[str]) -> str | None:
    """The one class of ``names`` that a score column's header names (:func:`_named_forms`, compared
    case-insensitively); None where it names none (or, ambiguously, both)."""
    forms = _named_forms(header)
    hits = [n for n in names if str(n).strip().lower() in forms]
    return hits[0] if len(hits) == 1 else None


def header_class(header: str) -> str | None:
    """The class a lone score column's header names, as written there (``p_approved`` -> ``approved``,
    ``churn_prob`` -> ``churn``, ``p(fraud)`` -> ``fraud``); None for a header that names no class
    (``score``, ``p``, ``prediction``) or names it in two ways. Only a probability's prefix or ending
    counts: ``risk_score`` need not be the probability of a class "risk"."""
    h = header.strip()
    low = h.lower()
    found = {h[len(x):] for x in SCORE_PREFIXES if _of_probability(x) and low.startswith(x) and len(h) > len(x)}
    found |= {h[:-len(x)] for x in SCORE_SUFFIXES if _of_probability(x) and low.endswith(x) and len(h) > len(x)}
    m = _P_OF.fullmatch(low)
    if m:
        found.add(h[m.start(1):m.end(1)])
    found = {f.strip(" _-.") for f in found} - {""}
    return next(iter(found)) if len(found) == 1 and not re.fullmatch(r"\d+", next(iter(found))) else None


def _of_probability(affix: str) -> bool:
    """A score prefix or ending that says "probability of" (``p_``, ``_prob``), not ``score_``, ``logit_``."""
    return bool(re.fullmatch(r"[ _]?(p|prob|probs|proba|probability|probabilities|pred_prob|pred_proba)[ _]?",
                             affix))


def other_class_by_header(name: str, header: str) -> str | None:
    """Class 1, for binary labels that hold one name only, ``name``, which is not the class the score
    column's header names (``denied`` beside ``p_approved``): that class (``approved``), and ``name``
    is class 0. None when the header names no class, or one that ``name`` may be a form of
    (``approval_score`` beside ``approved``: a shared start, or one inside the other), which would
    read a class as its own opposite."""
    named = header_class(header)
    if named is None:
        return None
    a, b = named.casefold(), str(name).strip().casefold()
    if a in b or b in a or os.path.commonprefix([a, b]).__len__() >= 4:
        return None
    return named


def binary_classes(names: Sequence[object], header: str) -> tuple[object, object, str | None] | None:
    """(class 0, class 1, how) of binary labels written as the two values ``names`` beside the one
    score column ``header``: the class the header names (``how`` says so), else the "yes" of a pair
    such as no/yes or false/true (:data:`BINARY_NAME_PAIRS`; ``how`` None); None when the values do
    not say which is class 1. The one rule for a label column named as such and for one found by its
    values (:mod:`pbr_core.loading._outcome`)."""
    if len(names) != 2:
        return None
    named = header if header in names else _named_class(header, names)
    if named is not None:
        negative = [n for n in names if n != named][0]
        return negative, named, ("the score column's header" if header == named
                                 else f"named by the score column {header!r}")
    lower = {str(n).strip().lower(): n for n in names}
    for no, yes in BINARY_NAME_PAIRS:
        if set(lower) == {no, yes}:
            return lower[no], lower[yes], None
    return None


def one_binary_class(name: str, header: str) -> tuple[str, str, str | None] | None:
    """(class 0, class 1, how) of binary labels whose only value is ``name`` (a day without fraud: every
    label 'no'), where ``name`` is a word of :data:`BINARY_NAME_PAIRS` (case-insensitive): the pair is
    completed by its other word, written in the same case ('No' -> 'Yes', 'N' -> 'Y'), and decided as
    :func:`binary_classes` decides two names (the class the score column names, else the "yes" of the
    pair). None for any other value: one name alone does not say which class it is."""
    word = str(name).strip().lower()
    other = next((b if word == a else a for a, b in BINARY_NAME_PAIRS if word in (a, b)), None)
    if other is None:
        return None
    text = str(name).strip()
    if text.isupper():
        other = other.upper()
    elif text[:1].isupper():
        other = other.capitalize()
    return binary_classes([name, other], header)


def binary_classes_note(negative: object, positive: object, how: str | None, header: str,
                        logits: bool = False) -> str:
    """The note that says which of two label values is class 1 (:func:`binary_classes`); ``logits``:
    the score column holds the log-odds of class 1."""
    if how is not None:
        return f"Binary labels: {positive!r} is class 1 ({how}), {negative!r} is class 0."
    read = f"the log-odds of {positive}" if logits else f"p({positive})"
    return (f"Binary labels: {positive!r} is class 1 and {negative!r} class 0; the score column {header!r} is read "
            f"as {read}.")


#: Words in a column's name that mark the model's own output (a decision, a prediction), never the truth.
DECISION_WORDS = frozenset(("pred", "preds", "prediction", "predictions", "predicted", "yhat", "hat", "decision",
                             "guess", "score", "scores", "prob", "probs", "proba", "probability", "conf",
                             "confidence", "correct"))

#: Prefixes that mark score columns (``p_cat``, ``prob_0``, ``logit_A``); stripped for the class names.
SCORE_PREFIXES = ("probability_", "probabilities_", "pred_prob_", "pred_proba_", "proba_", "probs_", "prob_",
                  "y_pred_", "yhat_", "pred_", "p_", "scores_", "score_", "logits_", "logit_", "logprobs_",
                  "logprob_", "log_probs_", "log_prob_", "logp_")


def strip_prefix(headers: Sequence[str]) -> list[str] | None:
    """The class names in score columns' headers without their shared prefix (``prob_cat``, ``prob_dog``
    -> ``cat``, ``dog``; ``probs.cat`` -> ``cat``), or None when no known prefix is shared."""
    common = os.path.commonprefix(list(headers))
    parent = common[:common.rindex(".")] if "." in common else ""
    if parent and re.fullmatch(r"[A-Za-z_][A-Za-z_.]*", parent):
        # a JSON object of scores, flattened: probs.cat, probs.dog -> cat, dog ("prob_E11.9" is no such thing)
        names = [h[len(parent) + 1:] for h in headers]
        if all(names) and len(set(names)) == len(names):
            return strip_prefix(names) or names
    for prefix in SCORE_PREFIXES:
        if all(h.lower().startswith(prefix) and len(h) > len(prefix) for h in headers):
            names = [h[len(prefix):] for h in headers]
            if len(set(names)) == len(names):
                return names
    return None
