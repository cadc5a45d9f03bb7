"""Scores written as percentages ("31.1" for 0.311), read as probabilities when the user says so
(``load_predictions(..., percent=True)``, ``--percent``, the Data page's "scores are percentages").

Only on request: a column of numbers in [0, 100] may as well be logits or a count, so the loader
never divides by 100 on its own (it says "percentages?" in its error instead). What is divided is
said in a note, with the first value before and after.

A column whose every cell carries a % sign ("93.3%", "93,3%" in a file of decimal commas, "100 %")
says so itself: :func:`signed_percent_columns` reads it as fractions before the columns' roles are
decided, whatever role it then gets (score, confidence), with a note; the option is then not needed.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np
import pandas as pd

from pbr_core.loading._roles import _name_shape
from pbr_core.loading._source import _Source

#: A cell written as a percentage with the decimal mark ``{d}``: "92%", "92.5 %", "-3%", ".5%".
_PERCENT_CELL = r"\s*-?(?:\d+(?:{d}\d*)?|{d}\d+)\s*%\s*"

#: The note on a column written with % signs, read as fractions.
SIGNED_NOTE = ("Column {column!r} is written as percentages ({cell}): read as fractions of 1 ({value:.4g}).")

#: The note on scores read as percentages.
PERCENT_NOTE = ("Read {what} as percentages, as asked: divided by 100 ({before:.6g} -> {after:.6g} in the first "
                "row).")


def from_percent(values: np.ndarray, columns: Sequence[str], src: _Source, notes: list[str],
                 kind: str = "score") -> np.ndarray:
    """``values`` / 100 (in place when it is float64), after checking that they are percentages: all
    within [0, 100] and not all within [0, 1] (fractions already: dividing would make every row sum to
    1/100). ``columns`` (``kind`` columns: "score", "confidence") names them in messages; the note
    goes to ``notes``."""
    v = np.asarray(values, dtype=np.float64)
    what = f"the {kind} column{'s' if len(columns) > 1 else ''} {', '.join(repr(c) for c in list(columns)[:4])}" \
        + (f" and {len(columns) - 4} more" if len(columns) > 4 else "")
    finite = np.isfinite(v)
    if finite.any():
        outside = finite & ((v < 0) | (v > 100))
        if outside.any():
            r = int(np.flatnonzero(outside.any(axis=1) if v.ndim == 2 else outside)[0])
            value = (v[r][outside[r]][0] if v.ndim == 2 else v[r])
            raise src.error(f"{what} hold {value:.10g} at row {r + 1} (data row, header excluded): percentages lie between 0 and 100 "
                            "(asked to read the scores as percentages).")
        if np.nanmax(v) <= 1:
            raise src.error(f"every value of {what} lies between 0 and 1: these are fractions already, not "
                            "percentages. Read them without the percentages option.")
    first = float(v.flat[0]) if v.size else 0.0
    v = np.divide(v, 100.0, out=v if v is values and v.flags.writeable else None)
    notes.append(PERCENT_NOTE.format(what=what, before=first, after=first / 100))
    return v


def percent_columns(df: pd.DataFrame, candidates: Sequence[str], several: bool = False) -> list[str]:
    """The numeric columns among ``candidates`` that are scores in percent: every value within
    [0, 100], no empty cell, and, for more than one column, all of them summing to 100 on every
    row (within the rounding of each to a whole number); failing that, the columns named alike
    (``p_0`` .. ``p_9`` beside a ``region``) when they do. [] when none are; with ``several``, also
    [] for a single column (a block of classes is asked for)."""
    cols = [c for c in candidates if pd.api.types.is_numeric_dtype(df[c].dtype)
            and not pd.api.types.is_bool_dtype(df[c].dtype)]
    if _is_percent_block(df, cols, several):
        return cols
    shapes: dict[str, list[str]] = {}
    for c in cols:
        shape = _name_shape(c)
        if shape is not None:
            shapes.setdefault(shape, []).append(c)
    family = max(shapes.values(), key=len, default=[])
    return family if len(family) >= 2 and _is_percent_block(df, family, True) else []


def _is_percent_block(df: pd.DataFrame, cols: Sequence[str], several: bool) -> bool:
    if not cols or (several and len(cols) < 2):
        return False
    v = df[list(cols)].to_numpy(dtype=np.float64)
    if np.isnan(v).any() or v.min() < 0 or v.max() > 100 or v.max() <= 1:
        return False
    return len(cols) == 1 or bool(np.all(np.abs(v.sum(axis=1) - 100) <= min(0.5 * len(cols), 5.0)))


def percent_cells(series: pd.Series, decimal: str = ".") -> np.ndarray | None:
    """The column's values as fractions of 1 when every cell that is not empty is written as a
    percentage ("92%" -> 0.92; "92,5%" -> 0.925 where ``decimal`` is ","), else None (numbers,
    text, or percentages mixed with plain numbers: a column half in percent is not guessed at)."""
    if pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
        return None
    present = series.notna().to_numpy()
    if not present.any():
        return None
    # Every text column of every file comes here: one cell that cannot match (every match ends in "%")
    # settles most of them before the whole column is decoded and matched.
    first = series.iloc[int(present.argmax())]
    if not (first.decode("latin-1") if isinstance(first, bytes) else str(first)).rstrip().endswith("%"):
        return None
    text = series.astype(object).map(lambda v: v.decode("latin-1") if isinstance(v, bytes) else v)
    cells = text[present].astype(str)
    if not cells.str.fullmatch(_PERCENT_CELL.format(d=re.escape(decimal))).all():
        return None
    numbers = cells.str.replace("%", "", regex=False).str.strip()
    if decimal != ".":
        numbers = numbers.str.replace(decimal, ".", regex=False)
    out = np.full(len(series), np.nan)
    out[present] = numbers.astype(np.float64).to_numpy() / 100.0
    return out


def signed_percent_columns(df: pd.DataFrame, decimal: str, notes: list[str],
                           columns: Sequence[str] | None = None) -> list[str]:
    """Replace (in ``df``) every column written with % signs on all its cells by its fractions, with a
    note each, before the roles are decided: detection then sees the probabilities they are (a score
    "93,3%" of an Excel export, a confidence "87%"). ``columns``: those to look at (default: all).
    Returns the columns so read."""
    done = []
    for c in (df.columns if columns is None else columns):
        values = percent_cells(df[c], decimal)   # None for numbers and booleans too
        if values is None:
            continue
        first = int(np.flatnonzero(~np.isnan(values))[0])
        cell = str(df[c].iloc[first]).strip()
        df[c] = values
        notes.append(SIGNED_NOTE.format(column=str(c), cell=cell, value=values[first]))
        done.append(str(c))
    return done
