"""Score vectors in one cell: ``probs = [0.1, 0.7, 0.2]`` per row, as Parquet list columns, JSON
records and CSV files written from a DataFrame with a list column hold them.

:func:`expand_score_vectors` replaces such a column by one column per class (named ``0``..``K-1``,
so the labels index them), when the column is the scores: named as the score columns, or named like
scores (``probs``, ``logits``, ``scores``...), or float vectors in a file with no other float column,
or probability vectors under a name with a score word (``predictions``). Float vectors named as
features (``embedding``, ``hidden_state``) are never guessed to be the scores. Other vector columns
(token ids, tags, intervals) are left as they are: metadata.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Sequence

import numpy as np
import pandas as pd

from pbr_core.loading._limits import MAX_VECTOR_CLASSES, ReadLimits, limit_error, table_memory
from pbr_core.loading._roles import metadata_by_name, name_words
from pbr_core.loading._source import LABEL_COLUMN_NAMES, ColumnChoice, _Source, table_row

#: Names of a score-vector column (compared in lower case, on the last part of the name, so that
#: ``class_probs`` and the JSON field ``output.logits`` count, ``score_ci`` and ``top2_pred`` do not).
SCORE_VECTOR_NAMES = ("probs", "prob", "probabilities", "probability", "proba", "pred_proba", "predict_proba",
                      "logits", "logit", "scores", "score", "softmax")
#: Words inside a column's name that make a column of float vectors a candidate for the scores
#: (``predictions``, ``model_output``), decided then with the other columns like any score column.
SCORE_WORDS = ("prob", "logit", "score", "softmax", "pred", "output")
#: Words in a column's name that say its vectors are a model's features, not its scores (an
#: embedding, a hidden layer): such a column is never taken for the scores by guess, only when named
#: as the scores (score_columns=). Read as scores, a 64-number embedding beside labels 0..9 became
#: 64-class "logits", with no error.
FEATURE_WORDS = frozenset({"embedding", "embeddings", "embed", "emb", "feature", "features", "feat", "feats",
                           "hidden", "latent", "representation", "representations", "repr", "activation",
                           "activations", "penultimate", "encoding", "encodings"})
_BRACKETED = re.compile(r"^\s*(\[.*\]|\(.*\))\s*$", re.S)
_SPLIT = re.compile(r"[,;\s]+")
_SAMPLE = 50


def _spark_vector(cell: dict) -> list[float] | None:
    """A Spark ML vector as Parquet stores it: {type: 1, values} (dense) or {type: 0, size, indices, values}."""
    values = cell.get("values")
    if values is None:
        return None
    if cell.get("type") == 0 and cell.get("size") is not None:  # sparse
        dense = np.zeros(int(cell["size"]))
        dense[np.asarray(cell.get("indices"), dtype=np.int64)] = np.asarray(values, dtype=np.float64)
        return dense.tolist()
    return list(values)


def _cell_vector(cell, kind: str) -> np.ndarray | None:
    """One cell as a 1-D float array, or None where it is not a list of numbers."""
    try:
        if kind == "spark":
            cell = _spark_vector(cell)
        elif kind in ("labelled", "labelled_sorted"):  # [{"label": "POSITIVE", "score": 0.9}, ...]
            cell = [d["score"] for d in cell]
        if kind == "text":
            inner = cell.strip()[1:-1].strip()
            row = np.asarray([float(x) for x in _SPLIT.split(inner) if x] if inner else [], dtype=np.float64)
        else:
            row = np.asarray(cell, dtype=np.float64)
    except (TypeError, ValueError, AttributeError, IndexError, KeyError):
        return None
    return row if row.ndim == 1 else None


def _kind(values: pd.Series) -> str | None:
    """'array' (lists / arrays in the cells) or 'text' ("[...]" strings) from the first cells, else None."""
    sample = values.iloc[:_SAMPLE].tolist()
    if sample and all(isinstance(v, dict) and "values" in v for v in sample):
        return "spark"
    if sample and all(isinstance(v, (list, tuple, np.ndarray)) and len(v) and all(
            isinstance(d, dict) and "label" in d and "score" in d for d in v) for v in sample):
        return "labelled"
    if sample and all(isinstance(v, (list, tuple, np.ndarray)) for v in sample):
        return "array"
    if sample and all(isinstance(v, str) and _BRACKETED.match(v) for v in sample):
        return "text"
    return None


def _uniform(values: pd.Series, kind: str) -> bool:
    """Whether the first cells are all lists of the same number (>= 2) of numbers, not all whole
    (class ids such as a top-2 prediction [3, 1] are not scores)."""
    rows = [_cell_vector(v, kind) for v in values.iloc[:_SAMPLE].tolist()]
    if any(r is None for r in rows) or len({r.size for r in rows}) != 1 or rows[0].size < 2:
        return False
    head = np.vstack(rows)
    return bool(np.isfinite(head).all() and np.any(head != np.round(head)))


def check_vector_size(k: int, rows: int, other_columns: int, column: str, src: _Source,
                      limits: ReadLimits | None) -> None:
    """Refuse a score vector of ``k`` classes before its (rows, k) matrix is built: more classes than
    :data:`MAX_VECTOR_CLASSES`, or a table (its ``other_columns`` and the k new ones) whose read takes more
    memory than ``limits`` allows (:func:`table_memory`: the vector column was counted as one column)."""
    if k > MAX_VECTOR_CLASSES:
        raise src.error(f"column {column!r} holds {k:,} scores per row: this file has {k:,} classes; at most "
                        f"{MAX_VECTOR_CLASSES:,} can be read. Check that the column holds one score per class.")
    if limits is None or limits.max_memory is None:
        return
    estimate = table_memory(rows, other_columns + k)
    if estimate > limits.max_memory:
        raise limit_error(src.name, kind="memory", size=estimate, limit=limits.max_memory, rows=rows,
                          what=f"its {rows:,} rows of {k:,} scores each (in column {column!r}), once spread into "
                               "one column per class,")


def _matrix(values: pd.Series, kind: str, column: str, src: _Source, *, other_columns: int = 0,
            limits: ReadLimits | None = None) -> np.ndarray:
    """The whole column as an (n, K) matrix; a row that is not K numbers is an error naming it. K is
    checked against the limits (:func:`check_vector_size`) from the first row, before the matrix is made."""
    cells = values.tolist()
    first = _cell_vector(cells[0], kind)
    if first is None or first.size < 2:
        raise src.error(f"column {column!r} is named as the scores, but its first row holds {str(cells[0])[:60]!r}, "
                        "not a list of one number per class.")
    check_vector_size(first.size, len(cells), other_columns, column, src, limits)
    m = np.empty((len(cells), first.size), dtype=np.float64)
    for i, cell in enumerate(cells):
        row = None if cell is None or (isinstance(cell, float) and np.isnan(cell)) else _cell_vector(cell, kind)
        if row is None:
            raise src.error(f"column {column!r} holds a vector of {first.size} scores per row, but {table_row(i)} "
                            f"holds {str(cell)[:60]!r}.")
        if row.size != first.size:
            raise src.error(f"column {column!r} holds {first.size} scores per row, but {table_row(i)} holds "
                            f"{row.size}: every row needs one score per class.")
        m[i] = row
    return m


def _named_like_scores(column: str) -> bool:
    return re.split(r"[._\s-]+", column.strip().lower())[-1] in SCORE_VECTOR_NAMES or \
        column.strip().lower() in SCORE_VECTOR_NAMES


def _named_like_features(column: str) -> str | None:
    """The word of ``column``'s name that says it holds features (:data:`FEATURE_WORDS`), or None."""
    return next((w for w in name_words(column) if w in FEATURE_WORDS), None)


def _probability_vectors(values: pd.Series, kind: str) -> bool:
    head = np.vstack([_cell_vector(v, kind) for v in values.iloc[:_SAMPLE].tolist()])
    return bool(np.all((head >= 0) & (head <= 1)) and np.allclose(head.sum(axis=1), 1.0, atol=1e-4))


def _other_scores(df: pd.DataFrame, column: str, choice: ColumnChoice) -> bool:
    """Whether other columns could be the scores: float columns besides ``column``, the label (by
    the user's choice or its name) and columns whose names say they are metadata (a weight, a date)."""
    return any(c != column and c != choice.label and pd.api.types.is_float_dtype(df[c].dtype)
               and c.strip().lower() not in LABEL_COLUMN_NAMES and not metadata_by_name(c) for c in df.columns)


def expand_score_vectors(df: pd.DataFrame, choice: ColumnChoice, src: _Source, notes: list[str],
                         limits: ReadLimits | None = None) -> tuple[pd.DataFrame, ColumnChoice, dict[str, list[str]]]:
    """The frame with a score-vector column replaced by one column per class, the column choice
    with that column's name replaced by the new ones, and {vector column: its new columns}.

    A column of lists is the scores when it is named as the score column or named like scores
    (:data:`SCORE_VECTOR_NAMES`). A column of float vectors is expanded too, with the scores then
    decided among all the columns, when no other column could be the scores (no other float
    column: :func:`_other_scores`), or when it has a score word in its name (:data:`SCORE_WORDS`:
    ``predictions``, ``model_output``) and holds probability vectors; never when its name says it holds
    features (:data:`FEATURE_WORDS`: a file whose only float vectors are such a column is an error
    saying so). Columns are decided on their
    first cells; the chosen column is converted whole (a row of it that is not K numbers is an
    error naming it), once K passes :func:`check_vector_size` under ``limits``."""
    named = set(choice.scores or ())
    found: dict[str, str] = {}
    candidates: set[str] = set()  # expanded, but the scores are still decided among all columns
    features: list[tuple[str, str, str]] = []  # float vectors named as features (column, kind, word): never guessed
    for c in df.columns:
        dtype = df[c].dtype
        if not (pd.api.types.is_object_dtype(dtype) or isinstance(dtype, pd.StringDtype)) or c == choice.label \
                or c in choice.ignore or c in choice.groups:
            continue
        if choice.scores is not None and c not in named:
            continue
        kind = _kind(df[c])
        if kind is None:
            continue
        if c in named or _named_like_scores(c) or kind == "labelled":  # the scores: a bad row is an error
            found[c] = kind
        elif _uniform(df[c], kind):
            word = _named_like_features(c)
            if word is not None:
                features.append((c, kind, word))
            elif not _other_scores(df, c, choice) or (
                    any(w in c.lower() for w in SCORE_WORDS) and _probability_vectors(df[c], kind)):
                found[c] = kind
                candidates.add(c)
    if not found:
        alone = [f for f in features if not _other_scores(df, f[0], choice)]
        if alone:  # the file's only vectors of numbers are named as features: no scores to read
            c, kind, word = alone[0]
            size = _cell_vector(df[c].iloc[0], kind).size
            raise src.error(
                f"column {c!r} holds {size} numbers per row, but its name ({word!r}) says they "
                "are a model's features (an embedding or a hidden layer), not its predictions; the file has no "
                "other scores. A calibration check needs the model's predicted probabilities or logits, one per "
                "class. If this column does hold them, name it as the score column (score_columns=).")
        return df, choice, {}
    if len(found) > 1:
        raise src.error(f"columns {', '.join(repr(c) for c in found)} each hold a vector of scores per row; say "
                        "which holds the scores (score_columns=).")
    column, kind = next(iter(found.items()))
    if kind == "labelled":
        check_vector_size(len(df[column].iloc[0]), len(df), df.shape[1] - 1, column, src, limits)
        df, column, kind = _by_label(df, column, src)
    m = _matrix(df[column], kind, column, src, other_columns=df.shape[1] - 1, limits=limits)
    k = m.shape[1]
    names = [str(i) for i in range(k)] if kind != "labelled_sorted" else [str(d["label"]) for d in df[column].iloc[0]]
    if set(names) & set(map(str, df.columns)):
        names = [f"{column}_{i}" for i in range(k)]
    at = list(df.columns).index(column)
    block = pd.DataFrame(m, columns=names, index=df.index)
    out = pd.concat([df.iloc[:, :at], block, df.iloc[:, at + 1:]], axis=1)
    if choice.scores is not None or column not in candidates:  # named as, or named like, the scores
        scores: list[str] = []
        for c in choice.scores or (column,):  # the vector is the scores: other columns are not candidates
            scores.extend(names if c == column else [c])
        choice = replace(choice, scores=tuple(scores))
    if kind == "labelled_sorted":
        notes.append(f"Column {column!r} holds a score per class, each with its class's name: read as the scores "
                     f"of the classes {', '.join(repr(x) for x in names[:6])}{'...' if k > 6 else ''}.")
    else:
        notes.append(f"Column {column!r} holds {k} numbers per row: read as the scores of classes 0..{k - 1}, in "
                     "that order.")
    return out, choice, {column: names}


def _by_label(df: pd.DataFrame, column: str, src: _Source) -> tuple[pd.DataFrame, str, str]:
    """A column of [{label, score}, ...] lists (a text-classification pipeline with every class's
    score, sorted by score) with each row's scores put in one class order, the first row's labels
    sorted; a row with other labels is an error naming it."""
    first = sorted(str(d["label"]) for d in df[column].iloc[0])
    order = {name: i for i, name in enumerate(first)}
    rows = []
    for i, cell in enumerate(df[column].tolist()):
        try:
            scores = {str(d["label"]): d["score"] for d in cell}
        except (TypeError, KeyError):
            scores = None
        if scores is None or set(scores) != set(order):
            raise src.error(f"column {column!r} holds a score per class with its label ({', '.join(first[:6])}), but "
                            f"{table_row(i)} holds {str(cell)[:80]!r}.")
        rows.append([{"label": name, "score": scores[name]} for name in first])
    out = df.copy(deep=False)
    out[column] = rows
    return out, column, "labelled_sorted"


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
