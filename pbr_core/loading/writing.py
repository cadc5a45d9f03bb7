"""Writing: :func:`save_predictions` (probabilities, or a top-label-only value, as a CSV or Parquet
file that :func:`~pbr_core.loading.load_predictions` reads back), :func:`template_csv` (a small
example file for users to copy) and :func:`csv_text`, the one way the project writes a table as CSV.

CSV files are opened in spreadsheets, which run a cell that starts with ``=``, ``+``, ``-`` or ``@``
(or a tab or carriage return) as a formula: a metadata cell ``=HYPERLINK("http://evil/", "x")``
in a user's file became a live link in the downloaded predictions ("CSV injection"). Every CSV the
project writes therefore neutralises such text cells as OWASP advises, with a leading apostrophe
(``'=HYPERLINK(...)``), which a spreadsheet shows as the text itself (:func:`spreadsheet_safe`).
Only text is touched: numeric columns are written as they are (``-0.5`` stays a number), and a
text cell that is a plain number (``-1``, ``+0.5``, ``1e-3``: class names of a binary file) is
not a formula and stays too. ``spreadsheet_safe=False`` (the CLI's ``--raw-csv``) writes the
cells unchanged, for programs that read the file; a neutralised file read back by pbr-calib keeps
the apostrophes. A text cell holding a carriage return is quoted in either case (the rows then end
in CRLF): bare, it would start a new row in a spreadsheet, and its rest a cell of its own.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import IO, Literal, Mapping, Sequence

import numpy as np
import pandas as pd

from pbr_core.loading.dialect import CsvDialect, percent_text
from pbr_core.loading._source import CONFIDENCE_COLUMN_NAMES, LABEL_COLUMN_NAMES, PREDICTED_COLUMN_NAMES
from pbr_core.loading._tables import _is_unnamed, _names
from pbr_core.predictions import Predictions, PredictionsError

__all__ = ["FORMULA_STARTS", "INTERVAL_SUFFIXES", "csv_text", "interval_columns", "probability_columns",
           "numbers_as_written", "save_predictions", "spreadsheet_safe", "template_csv",
           "typed_as_written"]

#: First characters that make a spreadsheet read a cell as a formula (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
#: A text that is a plain decimal number: a spreadsheet reads it as that number, never as a formula.
_PLAIN_NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"


def _safe_text(value: object) -> object:
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not re.fullmatch(_PLAIN_NUMBER, value):
        return "'" + value
    return value


def spreadsheet_safe(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` whose text cells and headers that a spreadsheet would run as a formula start
    with an apostrophe (OWASP's advice for CSV injection; see the module docstring).

    Text cells are those of columns of text (object, string or category dtype) that hold a Python
    string; numbers, also in a column of mixed types, are left as they are.

    Examples
    --------
    >>> df = pd.DataFrame({"id": ["=1+1", "-1", "a-b"], "p": [-0.5, 0.25, 1.0]})
    >>> spreadsheet_safe(df)["id"].tolist(), spreadsheet_safe(df)["p"].tolist()
    (["'=1+1", '-1', 'a-b'], [-0.5, 0.25, 1.0])
    """
    out = df.copy()
    for i in range(out.shape[1]):
        col = out.iloc[:, i]
        if col.dtype != object and not isinstance(col.dtype, (pd.StringDtype, pd.CategoricalDtype)):
            continue
        col = col.astype(object)
        try:
            first = col.str[:1]  # vectorised; NaN for the cells that are not text
        except AttributeError:  # a column of objects none of which is text (pandas refuses .str)
            continue
        risky = first.isin(FORMULA_STARTS).to_numpy(dtype=bool)
        if risky.any():
            col = col.copy()
            col[risky] = [_safe_text(v) for v in col[risky]]  # only the cells that start so
            out.isetitem(i, col)
    out.columns = [_safe_text(c) for c in out.columns]
    return out


def csv_text(df: pd.DataFrame, *, spreadsheet_safe: bool = True, dialect: CsvDialect | None = None) -> str:
    """``df`` as CSV text (no index, "\\n" line ends; "\\r\\n" when a cell holds a carriage return), its formula-like text cells neutralised unless
    ``spreadsheet_safe=False`` (:func:`spreadsheet_safe`). Every CSV the project writes goes through
    here: downloads on the dashboard, the CLI's ``--out`` files, :func:`save_predictions`.
    ``dialect``: the separator, decimal mark (of float columns) and line ends of the file written
    back (:class:`~pbr_core.loading.dialect.CsvDialect`; its encoding and byte-order mark are
    :meth:`~pbr_core.loading.dialect.CsvDialect.encode`'s); default the standard CSV."""
    dialect = dialect or CsvDialect()
    table = _spreadsheet_safe(df) if spreadsheet_safe else df
    # Python's CSV writer quotes a cell holding the line terminator, but not a lone carriage return:
    # written bare, a spreadsheet (and pandas) starts a new row there, and what follows becomes a cell
    # of its own, a formula or not ("a\r=HYPERLINK(...)"). With such a cell the rows end in "\r\n"
    # (as RFC 4180 writes them), which makes the writer quote every cell holding "\r" or "\n".
    crlf = any(_holds_cr(table.iloc[:, i]) for i in range(table.shape[1])) or any(
        isinstance(c, str) and "\r" in c for c in table.columns)
    crlf = crlf or dialect.line_end == "\r\n"
    return table.to_csv(index=False, sep=dialect.sep, decimal=dialect.decimal, lineterminator="\r\n" if crlf else "\n")


def _holds_cr(col: pd.Series) -> bool:
    if col.dtype != object and not isinstance(col.dtype, (pd.StringDtype, pd.CategoricalDtype)):
        return False
    try:
        return bool(col.astype(object).str.contains("\r", regex=False).fillna(False).any())
    except AttributeError:  # no text in the column
        return False


_spreadsheet_safe = spreadsheet_safe  # csv_text's keyword shadows the function's name


def _arrow_text(text):
    """A text column (a pandas Series or a pyarrow array) as a pyarrow string array."""
    import pyarrow as pa

    if isinstance(text, pd.Series):
        return pa.array(text.astype(str).to_numpy(dtype=object), type=pa.string())
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks()
    return text if pa.types.is_string(text.type) else text.cast(pa.string())


def numbers_as_written(text, decimal: str = ".", empty: str = "float") -> str | None:
    """How a CSV column read as the text written in it (:func:`~pbr_core.loading.read_csv_text`; a
    pandas Series or a pyarrow array) can be written into a typed (Parquet) file and read back as what
    was written: ``"int"`` or ``"float"`` where every cell is a missing value (empty, ``NA``...: the
    loader's missing cells, a null) or a plain number that the number gives back, None where the
    column must stay text.

    A number does not give back its text where it drops a leading zero (a ZIP code 01234 or an
    account 000789 is not the number 1234 or 789) or digits a float does not hold (more than 15
    significant digits: an 18-digit id); a cell that is not a number (a date, a code, ``yes``) keeps
    the column text. Trailing zeros (4.50) and the decimal comma of a ``;`` export (``decimal=","``)
    are how a number is written, not part of it: such a column is a number column. An all-empty
    column is ``empty`` (``"float"``, as a CSV reader types it; a caller deciding over several
    batches passes another word, to combine them).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from pbr_core.loading._tables import PANDAS_NA_VALUES

    cells = pc.utf8_trim_whitespace(_arrow_text(text))
    present = cells.filter(pc.invert(pc.is_in(cells, value_set=pa.array(PANDAS_NA_VALUES))))
    present = present.filter(pc.is_valid(present))
    if len(present) == 0:
        return empty
    point = re.escape(decimal)
    number = rf"^[+-]?(?:\d+(?:{point}\d*)?|{point}\d+)(?:[eE][+-]?\d+)?$"
    if not pc.all(pc.match_substring_regex(present, number)).as_py():
        return None
    if pc.any(pc.match_substring_regex(present, r"^[+-]?0\d")).as_py():
        return None
    digits = pc.replace_substring_regex(pc.replace_substring_regex(present, r"[eE].*$", ""), r"[^0-9]", "")
    digits = pc.utf8_rtrim(pc.utf8_ltrim(digits, characters="0"), characters="0")
    if pc.max(pc.utf8_length(digits)).as_py() > 15:
        return None
    whole = pc.all(pc.match_substring_regex(present, r"^[+-]?\d+$")).as_py()
    return "int" if whole and pc.max(pc.utf8_length(present)).as_py() <= 18 else "float"


def typed_as_written(text, decimal: str, kind: str):
    """A text column (a pyarrow array) that :func:`numbers_as_written` found to be ``kind`` (``"int"`` or
    ``"float"``, decided over a whole file) as a pyarrow int64 or float64 array, missing cells null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from pbr_core.loading._tables import PANDAS_NA_VALUES

    cells = pc.utf8_trim_whitespace(_arrow_text(text))
    cells = pc.if_else(pc.is_in(cells, value_set=pa.array(PANDAS_NA_VALUES)), pa.scalar(None, pa.string()), cells)
    if decimal != ".":
        cells = pc.replace_substring(cells, decimal, ".")
    cells = pc.replace_substring_regex(cells, r"^\+", "")  # "+3": a sign Arrow's parser does not take
    return cells.cast(pa.int64() if kind == "int" else pa.float64())


def _check_writable_names(names: Sequence[str]) -> None:
    lower = [n.strip().lower() for n in names]
    if any(not n.strip() or _is_unnamed(n.strip()) for n in names):
        raise PredictionsError("save_predictions: every class needs a non-empty name.")
    if len(set(n.strip() for n in names)) != len(names):
        raise PredictionsError(f"save_predictions: duplicate class names {_names(names)}.")
    clash = [n for n, lo in zip(names, lower) if lo in LABEL_COLUMN_NAMES]
    if clash:
        raise PredictionsError(
            f"save_predictions: class name(s) {_names(clash)} would be read back as the label column; rename them."
        )
    if set(lower) & set(CONFIDENCE_COLUMN_NAMES) and set(lower) & set(PREDICTED_COLUMN_NAMES):
        raise PredictionsError("save_predictions: these class names would be read back as a top-label-only file; rename them.")


def _file_headers(df: pd.DataFrame, preds: Predictions, source: Predictions) -> tuple[pd.DataFrame, dict[str, str]]:
    """``df`` (class-name score columns, ``label``, metadata, extra columns) with the scores and the
    label under the column names of the file ``source`` was read from, in that file's column order
    (see :func:`save_predictions`' ``headers_from``), and the renaming applied (old -> new name)."""
    names = [str(n) for n in preds.class_names]
    scores, labels = source.columns_with_role("score"), source.columns_with_role("label")
    rename: dict[str, str] = {}
    if source.input_type == "probabilities" and scores:
        if len(scores) == len(names):  # one column per class, in class order (the loader's order)
            rename.update(zip(names, scores))
        elif len(scores) == 1 and len(names) == 2:  # a binary file's one p(y=1) column
            df = df.drop(columns=[names[0]])
            rename[names[1]] = scores[0]
    elif scores and len(scores) == 1 and len(names) == 2:
        # A binary file's one log-odds column: its calibrated p(y=1) is a probability, so not under the
        # logit column's name, and not as two columns "0", "1" either (what a user of a fraud_logit /
        # is_fraud file got): one column p_<class 1>, where the logit column was (reads back as p(y=1)).
        df = df.drop(columns=[names[0]])
        rename[names[1]] = f"p_{names[1]}"
    if labels and "label" in df.columns:
        rename["label"] = labels[0]
    taken = set(df.columns) - set(rename)
    if any(new in taken for new in rename.values()):  # a file column of the same name: keep the defaults
        return df, {}
    df = df.rename(columns=rename)
    order: list[str] = []
    for column, role in source.column_roles:
        if column in df.columns:
            order.append(column)
        elif role == "score":  # scores written under the class names (read as logits): where the scores were
            order += [rename.get(n, n) for n in names if rename.get(n, n) in df.columns]
    return df[list(dict.fromkeys(order + list(df.columns)))], rename


def probability_columns(preds: Predictions, headers_from: Predictions | None = None) -> list[str]:
    """The headers under which :func:`save_predictions` writes the probabilities of ``preds`` (with
    the same ``headers_from``), in the written order: the file's own score columns where it keeps
    them (``p_dem``; ``0``..``9``), else the class names (``p_<class 1>`` for a binary log-odds
    column). What ``pbr-calib apply`` says now holds the calibrated probabilities."""
    names = [str(n) for n in preds.class_names]
    if headers_from is None or preds.probs is None:
        return names
    columns = names + (["label"] if preds.has_labels else [])
    if preds.metadata is not None:  # as save_predictions adds them: a clash keeps the defaults
        columns += [str(c) for c in preds.metadata.columns if str(c) not in columns]
    df, rename = _file_headers(pd.DataFrame(columns=columns), preds, headers_from)
    written = {rename.get(n, n) for n in names}
    return [c for c in df.columns if c in written]


#: Suffixes of the interval columns written beside each probability column (:func:`save_predictions`' ``intervals``).
INTERVAL_SUFFIXES = ("_low", "_high")


def interval_columns(column: str) -> tuple[str, str]:
    """The names of the two interval columns written beside the probability column ``column``:
    ``<column>_low`` and ``<column>_high`` (e.g. ``p_dem_low``, ``p_dem_high``)."""
    return f"{column}{INTERVAL_SUFFIXES[0]}", f"{column}{INTERVAL_SUFFIXES[1]}"


def _add_intervals(df: pd.DataFrame, names: Sequence[str], rename: Mapping[str, str], low: np.ndarray,
                   high: np.ndarray) -> pd.DataFrame:
    """``df`` with each written class's interval columns right after its probability column."""
    for k, name in enumerate(names):
        column = rename.get(name, name)
        if column not in df.columns:  # a binary file's p(y=0), not written (its one p(y=1) column is)
            continue
        at = df.columns.get_loc(column) + 1
        for new, values in zip(interval_columns(column), (low[:, k], high[:, k])):
            if new in df.columns:
                raise PredictionsError(f"save_predictions: the interval column {new!r} would replace a column of "
                                       "the same name; rename that column.")
            df.insert(at, new, values)
            at += 1
    return df


def save_predictions(
    preds_or_probs: Predictions | np.ndarray,
    labels: np.ndarray | Sequence[int] | None = None,
    path_or_buffer: str | os.PathLike[str] | IO[bytes] | None = None,
    format: Literal["csv", "parquet"] | None = None,
    class_names: Sequence[str] | None = None,
    extra_columns: Mapping[str, np.ndarray | Sequence] | None = None,
    spreadsheet_safe: bool = True,
    headers_from: Predictions | None = None,
    intervals: tuple[np.ndarray, np.ndarray] | None = None,
    as_written: pd.DataFrame | None = None,
) -> bytes | None:
    """Write (e.g. recalibrated) probabilities as one column per class plus ``label``.

    The file reads back with :func:`load_predictions`. Probabilities only: logits are not written.

    Parameters
    ----------
    preds_or_probs : Predictions or array of shape (n, K) or (n,)
        Probabilities (validated like :meth:`Predictions.from_arrays` with
        ``input_type="probabilities"``), or a Predictions value (its probabilities; a top-label-only
        value is written as ``confidence``, ``predicted``, ``label``).
    labels : array of shape (n,), optional
        Integer labels; defaults to ``preds_or_probs.labels`` for a Predictions value (written as
        class names where the file it was loaded from wrote them so: ``Predictions.labels_as_names``).
    path_or_buffer : str, path-like or binary file object, optional
        Where to write; None returns the bytes (e.g. for a download button).
    format : {"csv", "parquet"}, optional
        Default: from the path's suffix (``.parquet`` / ``.pq`` -> Parquet), else CSV.
    class_names : sequence of str, optional
        Column headers; default: the Predictions' class names, else "0".."K-1".
    extra_columns : mapping of str to array of shape (n,), optional
        More columns written after the scores, the label and the metadata columns of a Predictions
        value (``Predictions.metadata``: ids, groups, dates... are always written back), in order (e.g. an id, or which rows a
        recalibrator was fitted on). Their names must not clash with the other headers.
    headers_from : Predictions, optional
        The predictions as loaded from the user's file (e.g. before recalibration): the scores and
        the label are written under that file's column names and in its column order (its
        ``column_roles``), so a download keeps ``p_dem`` and ``won`` instead of ``0``, ``1`` and
        ``label``. The score columns keep their names when they held probabilities, one per class or
        the one p(y=1) column of a binary file (then only p(y=1) is written); scores read as logits
        are now probabilities and are written under the class names as without this, except a binary
        file's one log-odds column, whose p(y=1) is written as one column ``p_<class 1>`` in its place. The label
        column keeps its name. Columns the file did not have (``extra_columns``) come last.
    intervals : (low, high) arrays of shape (n, K), optional
        An interval around each class's probability (a Venn-Abers predictor's (p0, p1):
        ``predict_interval``), written right after that class's probability column as
        ``<column>_low`` and ``<column>_high`` (:func:`interval_columns`; for a binary file written
        with its one p(y=1) column, that column's only). Probabilities only.
    as_written : DataFrame, optional
        Columns of the input file as the text written in it, one row per row of the predictions
        (:func:`~pbr_core.loading.read_csv_text`): each is written in place of the column of the same
        name (under ``headers_from``'s names), so that a ZIP code 01234 or an account 000789 is not
        written back as the number 1234 or 789. The probability columns are never replaced. A CSV is
        written in the dialect its ``attrs`` carry (:func:`~pbr_core.loading.read_as_written`: the
        input's separator, decimal mark, byte-order mark, line ends and encoding), the probabilities
        with its decimal mark, and as percentages in the style written (``84,55%``) in a column that
        held percentages, so that the file reads back as the input did.
    spreadsheet_safe : bool, default True
        CSV only: text cells and headers that a spreadsheet would run as a formula (starting with
        ``=``, ``+``, ``-``, ``@``, a tab or a carriage return, and not a plain number) are written
        with a leading apostrophe (:func:`spreadsheet_safe`); False writes every cell as it is.
        Numeric columns are never changed.

    Returns
    -------
    bytes or None
        The file's bytes when ``path_or_buffer`` is None.

    Examples
    --------
    >>> import numpy as np
    >>> data = save_predictions(np.array([[0.9, 0.1], [0.2, 0.8]]), [0, 1], class_names=["cat", "dog"])
    >>> data.decode().splitlines()[0]
    'cat,dog,label'
    """
    if format is None:
        is_pq = isinstance(path_or_buffer, (str, os.PathLike)) and str(path_or_buffer).lower().endswith((".parquet", ".pq"))
        format = "parquet" if is_pq else "csv"
    if format not in ("csv", "parquet"):
        raise PredictionsError(f"save_predictions: format must be 'csv' or 'parquet', but got {format!r}.")

    if isinstance(preds_or_probs, Predictions):
        preds = preds_or_probs
        if labels is not None or class_names is not None:
            base = preds.probs if preds.probs is not None else None
            if base is None:
                raise PredictionsError("save_predictions: labels/class_names cannot be replaced for top-label-only data.")
            preds = Predictions.from_arrays(
                base, preds.labels if labels is None else labels, input_type="probabilities",
                class_names=class_names if class_names is not None else preds.class_names, source="save_predictions",
            )
    else:
        if labels is None:
            raise PredictionsError("save_predictions: labels are required when saving a probability array.")
        preds = Predictions.from_arrays(
            preds_or_probs, labels, input_type="probabilities", class_names=class_names, source="save_predictions",
        )

    if preds.probs is None and not preds.has_class_ids:
        df = pd.DataFrame({"confidence": preds.confidence, "correct": preds.correct.astype(np.int64)})
    elif preds.probs is None:
        names = list(preds.class_names)
        as_name = (lambda a: np.asarray(names, dtype=object)[a]) if names else (lambda a: a)
        df = pd.DataFrame({"confidence": preds.confidence, "predicted": as_name(preds.predicted),
                           "label": as_name(preds.labels)})
    else:
        names = [str(n) for n in preds.class_names]
        _check_writable_names(names)
        df = pd.DataFrame(preds.probs, columns=names)
        if preds.has_labels:
            # Labels the file wrote as class names are written back as those names, not as numbers.
            df["label"] = (np.asarray(names, dtype=object)[preds.labels] if preds.labels_as_names
                           else preds.labels.astype(np.int64))

    if preds.metadata is not None:  # ids, groups, dates... stay next to the rows they belong to
        for name in preds.metadata.columns:
            if str(name) not in df.columns:
                df[str(name)] = preds.metadata[name].to_numpy()
    for name, values in (extra_columns or {}).items():
        values = np.asarray(values)
        if values.shape != (preds.n,):
            raise PredictionsError(
                f"save_predictions: extra column {name!r} has shape {values.shape}, but there are {preds.n} rows."
            )
        if str(name) in df.columns:
            raise PredictionsError(f"save_predictions: extra column {name!r} clashes with another column's name.")
        df[str(name)] = values

    rename: dict[str, str] = {}
    if headers_from is not None and preds.probs is not None:
        df, rename = _file_headers(df, preds, headers_from)
    if as_written is not None:
        if len(as_written) != preds.n:
            raise PredictionsError(f"save_predictions: as_written has {len(as_written)} rows, but there are "
                                   f"{preds.n} rows.")
        probabilities = {rename.get(str(n), str(n)) for n in preds.class_names} if preds.probs is not None else set()
        for name in as_written.columns:
            if name in df.columns and name not in probabilities:
                df[name] = as_written[name].to_numpy()
    if intervals is not None:
        if preds.probs is None:
            raise PredictionsError("save_predictions: intervals need probabilities of every class, not top-label-only data.")
        low, high = (np.asarray(a, dtype=np.float64) for a in intervals)
        if low.shape != preds.probs.shape or high.shape != preds.probs.shape:
            raise PredictionsError(f"save_predictions: intervals must have the probabilities' shape {preds.probs.shape}, "
                                   f"but have {low.shape} and {high.shape}.")
        df = _add_intervals(df, [str(n) for n in preds.class_names], rename, low, high)

    buf = io.BytesIO()
    if format == "csv":
        dialect = CsvDialect.of(as_written)  # the input CSV's own dialect (audit 12a), else the standard one
        if dialect.percent and preds.probs is not None:
            df = _as_percentages(df, [rename.get(str(n), str(n)) for n in preds.class_names], dialect)
        buf.write(dialect.encode(csv_text(df, spreadsheet_safe=spreadsheet_safe, dialect=dialect)))
    else:
        df.to_parquet(buf, index=False)
    data = buf.getvalue()
    if path_or_buffer is None:
        return data
    if isinstance(path_or_buffer, (str, os.PathLike)):
        Path(path_or_buffer).write_bytes(data)
    else:
        path_or_buffer.write(data)
    return None


def _as_percentages(df: pd.DataFrame, written: Sequence[str], dialect: CsvDialect) -> pd.DataFrame:
    """``df`` with each probability column (among ``written``) that held percentages in the input file
    (``dialect.percent``), and its interval columns, written as percentages in the same style
    (``84,55%``), so that the file reads back as the input did."""
    df = df.copy()
    for column in written:
        sign = dialect.percent.get(column)
        if sign is None or column not in df.columns:
            continue
        for name in (column, *interval_columns(column)):
            if name in df.columns:
                df[name] = percent_text(df[name].to_numpy(dtype=np.float64), dialect.decimal, sign == "%")
    return df


def template_csv(kind: Literal["multiclass", "binary", "top_label"] = "multiclass", n_rows: int = 5) -> str:
    """A small example CSV (for users to copy) that :func:`load_predictions` reads back.

    Parameters
    ----------
    kind : {"multiclass", "binary", "top_label"}
        "multiclass": one probability column per class (headers are the class names) and a
        ``label`` column holding class names; "binary": a single p(y=1) column and 0/1 labels;
        "top_label": ``confidence``, ``predicted``, ``label``.
    n_rows : int
        Number of data rows.

    Returns
    -------
    str
        CSV text with a header line, deterministic (fixed seed).

    Examples
    --------
    >>> print(template_csv("binary", n_rows=2))  # doctest: +SKIP
    p_positive,label
    0.812,1
    0.250,0
    """
    if kind not in ("multiclass", "binary", "top_label"):
        raise ValueError(f"Expected argument `kind` to be 'multiclass', 'binary' or 'top_label', but got {kind!r}")
    if isinstance(n_rows, bool) or not isinstance(n_rows, (int, np.integer)) or n_rows < 1:
        raise ValueError(f"Expected argument `n_rows` to be an integer larger than 0, but got {n_rows!r}")
    rng = np.random.default_rng(0)
    classes = ["cat", "dog", "bird"]
    # Probabilities in thousandths, so that the written 3-decimal rows sum to exactly 1.
    milli = np.floor(rng.dirichlet([0.6, 0.6, 0.6], size=n_rows) * 1000).astype(int)
    milli[np.arange(n_rows), milli.argmax(axis=1)] += 1000 - milli.sum(axis=1)
    probs = milli / 1000
    truth = np.array([rng.choice(3, p=p) for p in probs])
    if kind == "multiclass":
        lines = [",".join(classes + ["label"])]
        lines += [",".join([f"{v:.3f}" for v in p] + [classes[t]]) for p, t in zip(probs, truth)]
    elif kind == "binary":
        p1 = np.round(rng.uniform(0.02, 0.98, size=n_rows), 3)
        y = (rng.uniform(size=n_rows) < p1).astype(int)
        lines = ["p_positive,label"] + [f"{p:.3f},{t}" for p, t in zip(p1, y)]
    else:
        lines = ["confidence,predicted,label"]
        lines += [f"{p.max():.3f},{classes[int(p.argmax())]},{classes[t]}" for p, t in zip(probs, truth)]
    return "\n".join(lines) + "\n"
