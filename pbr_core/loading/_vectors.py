"""Score vectors in one cell: ``probs = [0.1, 0.7, 0.2]`` per row, as Parquet list columns, JSON
records and CSV files written from a DataFrame with a list column hold them.

:func:`expand_score_vectors` replaces such a column by one column per class (named ``0``..``K-1``,
so the labels index them), when the column is the scores: named as the score columns, or named like
scores (``probs``, ``logits``, ``scores``...), or holding probability vectors (values in [0, 1],
each summing to 1). Other vector columns (embeddings, token ids) are left as they are: metadata.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np
import pandas as pd

from pbr_core.loading._source import ColumnChoice, _Source

#: Words in a column's name that say it holds the scores (compared in lower case).
SCORE_WORDS = ("prob", "logit", "score", "softmax", "pred", "output")
_BRACKETED = re.compile(r"^\s*[\[(].*[\])]\s*$", re.S)
_SPLIT = re.compile(r"[,;\s]+")
_SAMPLE = 50


def _kind(values: pd.Series) -> str | None:
    """'array' (lists / arrays in the cells), 'text' ("[0.1, 0.9]" strings) or None, from the first values."""
    sample = values.dropna().iloc[:_SAMPLE].tolist()
    if not sample:
        return None
    if all(isinstance(v, (list, tuple, np.ndarray)) for v in sample):
        return "array"
    if all(isinstance(v, str) and _BRACKETED.match(v) for v in sample):
        return "text"
    return None


def _parse_text(cell: str) -> list[float]:
    inner = cell.strip()[1:-1].strip()
    return [float(x) for x in _SPLIT.split(inner) if x] if inner else []


def _matrix(values: pd.Series, kind: str, column: str, src: _Source) -> np.ndarray:
    from pbr_core.loading._tables import _table_row

    rows = []
    width = None
    for i, cell in enumerate(values.tolist()):
        if cell is None or (isinstance(cell, float) and np.isnan(cell)):
            raise src.error(f"column {column!r} holds a vector of scores per row, but {_table_row(i)} has none.")
        try:
            row = np.asarray(_parse_text(cell) if kind == "text" else cell, dtype=np.float64)
        except (TypeError, ValueError):
            raise src.error(f"column {column!r} holds a vector of scores per row, but {_table_row(i)} holds "
                            f"{str(cell)[:60]!r}, which is not a list of numbers.") from None
        if row.ndim != 1:
            raise src.error(f"column {column!r} at {_table_row(i)} holds a nested list; expected one number per class.")
        if width is None:
            width = row.size
        elif row.size != width:
            raise src.error(f"column {column!r} holds {width} scores per row, but {_table_row(i)} holds {row.size}: "
                            "every row needs one score per class.")
        rows.append(row)
    return np.vstack(rows)


def _looks_like_scores(column: str, m: np.ndarray) -> bool:
    if any(w in column.lower() for w in SCORE_WORDS):
        return True
    head = m[:_SAMPLE]
    return bool(np.all((head >= 0) & (head <= 1)) and np.allclose(head.sum(axis=1), 1.0, atol=1e-4))


def expand_score_vectors(df: pd.DataFrame, choice: ColumnChoice, src: _Source,
                         notes: list[str]) -> tuple[pd.DataFrame, ColumnChoice, dict[str, list[str]]]:
    """The frame with a score-vector column replaced by one column per class, the column choice
    with that column's name replaced by the new ones, and {vector column: its new columns}."""
    named = set(choice.scores or ())
    found: dict[str, np.ndarray] = {}
    for c in df.columns:
        dtype = df[c].dtype
        if not (pd.api.types.is_object_dtype(dtype) or isinstance(dtype, pd.StringDtype)) or c == choice.label or c in choice.ignore or c in choice.groups:
            continue
        if choice.scores is not None and c not in named:
            continue
        kind = _kind(df[c])
        if kind is None:
            continue
        m = _matrix(df[c], kind, c, src)
        if m.shape[1] >= 2 and (c in named or _looks_like_scores(c, m)):
            found[c] = m
    if not found:
        return df, choice, {}
    if len(found) > 1:
        raise src.error(f"columns {', '.join(repr(c) for c in found)} each hold a vector of scores per row; say "
                        "which holds the scores (score_columns=).")
    column, m = next(iter(found.items()))
    k = m.shape[1]
    names = [str(i) for i in range(k)]
    if set(names) & set(map(str, df.columns)):
        names = [f"{column}_{i}" for i in range(k)]
    at = list(df.columns).index(column)
    block = pd.DataFrame(m, columns=names, index=df.index)
    out = pd.concat([df.iloc[:, :at], block, df.iloc[:, at + 1:]], axis=1)
    if choice.scores is not None:
        scores: list[str] = []
        for c in choice.scores:
            scores.extend(names if c == column else [c])
        choice = ColumnChoice(label=choice.label, scores=tuple(scores), groups=choice.groups, ignore=choice.ignore)
    notes.append(f"Column {column!r} holds {k} numbers per row: read as the scores of classes 0..{k - 1}, in that order.")
    return out, choice, {column: names}


def collapse_roles(table: Sequence[tuple[str, str]], expanded: dict[str, list[str]]) -> tuple[tuple[str, str], ...]:
    """Column roles with a vector column's class columns back under the file's own column name."""
    if not expanded:
        return tuple(table)
    (column, names), = expanded.items()
    members = set(names)
    out: list[tuple[str, str]] = []
    for c, role in table:
        if c in members:
            if (column, role) not in out:
                out.append((column, role))
        else:
            out.append((c, role))
    return tuple(out)
