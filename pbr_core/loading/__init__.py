"""Reading prediction files (CSV, TSV, Parquet, Excel, JSON, JSON Lines, NPZ, NPY) into a validated :class:`Predictions`.

Accepted formats
----------------
CSV / TSV (``.csv``, ``.tsv``, also gzip-compressed ``.csv.gz`` / ``.tsv.gz``) and Parquet (``.parquet``, ``.pq``)
    A table with one header line. One column holds the true label; it is found by name
    (case-insensitive: ``label``, ``labels``, ``y``, ``y_true``, ``target``, ``true_label``, ``class``)
    or named with ``label_column=``. Every other column is a score column: one per class, its
    header is the class name, and it holds probabilities or logits (decided by inspection, see
    :func:`pbr_core.predictions.detect_input_type`, or forced with ``input_type=``). Labels are
    integers 0..K-1 (position of the class column) or class names equal to the headers.

    * Binary: a single score column is p(y=1); labels are 0/1 or exactly two class names. Class 1
      is the class the column's header names (``churn``, ``p_churn``, ``churn_prob``, ``P(churn)``,
      in any case), else the "yes" of a pair such as no/yes, false/true or negative/positive;
      with other names the file does not say which class the score is for, which is an error
      (a guess would invert every metric). The choice is recorded in ``Predictions.notes``.
    * Top-label only: a ``confidence`` (or ``conf`` / ``max_prob``) column, a ``predicted``
      (or ``prediction`` / ``pred`` / ``predicted_label``) column and a label column. Enough for
      ECE and reliability diagrams, not for recalibration.

    * Scores as a vector in one cell (a Parquet list column, ``[0.1, 0.7, 0.2]`` in a CSV cell, a
      JSON array): one column of K numbers per row, named like scores (``probs``, ``logits``...)
      or holding probability vectors, is read as the scores of classes 0..K-1.

    A leading unnamed column holding 0..n-1 (a pandas index written by ``to_csv()``) is dropped.
Excel (``.xlsx``)
    The first worksheet with data, its first row the header; then as CSV above.
JSON (``.json``) and JSON Lines (``.jsonl``, ``.ndjson``), also gzip-compressed
    Records read as the rows of a table, with the same columns as above: an array of objects, one
    object per line, an object of equal-length column arrays, or an object holding one array of
    objects (``{"samples": [...]}``). Nested objects become ``parent.child`` columns.
NPZ (``.npz``)
    Arrays ``logits`` or ``probs`` / ``probabilities`` / ``scores`` of shape (n, K) (or (n,) for
    binary p(y=1)), ``labels`` or ``y`` of shape (n,) (or the array named by ``label_column``),
    and optionally ``class_names`` (a unicode array of length K). Other arrays (e.g. ``logits_val``) are ignored and listed in the notes.
NPY (``.npy``)
    One 2-D numeric array of shape (n, K + 1): the first K columns are the scores and the
    LAST column is the integer label.

Row numbers in error messages
-----------------------------
Tables (CSV, TSV, Parquet): ``row 17 (data row, header excluded)``, i.e. counted from 1 at the first
line under the header (a spreadsheet shows the same row as row 18, its row 1 being the header).
Arrays (NPZ, NPY): ``row 16 (0-based array index)``, i.e. ``array[16]``. Every message says which.

Read limits
-----------
Every read is bounded before anything is parsed (:mod:`pbr_core.loading._limits`): the content once
decompressed (1 GiB), the memory the read is estimated to take (2 GiB) and the longest text cell
(1 MiB), from what the file declares (a gzip trailer, the members of a ZIP, a Parquet footer, an NPY
header) or a counting pass that stops at the limit. A file over a limit raises
:class:`ReadLimitError` saying how large it really is; CSV / TSV and Parquet files can then be read
streamed (:mod:`pbr_core.stream`). ``limits=`` or the environment variables
``PBR_CALIB_MAX_READ_BYTES``, ``PBR_CALIB_MAX_READ_MEMORY``, ``PBR_CALIB_MAX_CELL_BYTES`` change them.

Safety
------
Nothing is ever unpickled (``allow_pickle=False`` everywhere); object arrays are refused. Every
problem with the input raises :class:`~pbr_core.predictions.PredictionsError` (a ``ValueError``)
whose message starts with the file name.

Layout
------
``_source`` (names, formats, sources, options), ``_tables`` (CSV / TSV, Parquet, table -> values),
``_numpy`` (NPZ, NPY), ``writing`` (:func:`save_predictions`, :func:`template_csv`); this module
holds :func:`load_predictions`, which picks the reader.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Sequence

import numpy as np

from pbr_core.loading import _source
from pbr_core.loading._errors import plain_read_error
from pbr_core.loading._limits import ReadLimitError, ReadLimits, default_limits
from pbr_core.loading._roles import FIT_ROWS_COLUMN, ColumnChoice, column_list
from pbr_core.loading._numpy import _load_numpy
from pbr_core.loading._duplicates import duplicate_note
from pbr_core.loading._excel import _load_excel, read_excel_frame
from pbr_core.loading._json import _load_json, read_json_frame
from pbr_core.loading._source import (
    ACCEPTED_SUFFIXES,
    CONFIDENCE_COLUMN_NAMES,
    CORRECT_COLUMN_NAMES,
    LABEL_COLUMN_NAMES,
    PREDICTED_COLUMN_NAMES,
    Source,
    _Options,
    _Source,
    _resolve_format,
    _resolve_source,
)
from pbr_core.loading._tables import _csv_header, _is_unnamed, _load_csv, _load_parquet
from pbr_core.loading.dialect import DIALECT_ATTR, csv_dialect, percent_columns_as_written
from pbr_core.loading.writing import save_predictions, template_csv
from pbr_core.predictions import DEFAULT_SUM_TOLERANCE, InputType, Predictions, PredictionsError

__all__ = [
    "FIT_ROWS_COLUMN",
    "ACCEPTED_SUFFIXES",
    "ReadLimitError",
    "ReadLimits",
    "default_limits",
    "read_columns",
    "read_as_written",
    "read_csv_text",
    "read_table",
    "CONFIDENCE_COLUMN_NAMES",
    "CORRECT_COLUMN_NAMES",
    "LABEL_COLUMN_NAMES",
    "PREDICTED_COLUMN_NAMES",
    "load_predictions",
    "save_predictions",
    "template_csv",
]

# Public as before, though not in __all__: the NPZ array names and the format type alias.
NPZ_SCORE_KEYS = _source.NPZ_SCORE_KEYS
NPZ_LABEL_KEYS = _source.NPZ_LABEL_KEYS
FileFormat = _source.FileFormat


# ------------------------------------------------------------------------------------ public API
def _positive_class(value: object) -> str | None:
    """``positive_class`` as text (a form's empty choice: None, the file decides)."""
    return None if value is None or not str(value).strip() else str(value)


def load_predictions(
    source: Source,
    *,
    format: str | None = None,
    label_column: str | None = None,
    score_columns: str | Sequence[str] | None = None,
    group_columns: str | Sequence[str] | None = None,
    ignore_columns: str | Sequence[str] | None = None,
    input_type: InputType = "auto",
    renormalize: bool = False,
    tolerance: float = DEFAULT_SUM_TOLERANCE,
    max_rows: int | None = None,
    name: str | None = None,
    percent: bool = False,
    positive_class: str | None = None,
    require_labels: bool = True,
    limits: ReadLimits | None = None,
) -> Predictions:
    """Read a prediction file into a validated :class:`Predictions`.

    Parameters
    ----------
    source : str, path-like, bytes or binary file object
        A path, or the raw bytes of a file (an upload), or an object with ``read()`` (e.g.
        Streamlit's ``UploadedFile``, whose ``name`` is used for the format and the messages).
    format : {"csv", "tsv", "csv.gz", "tsv.gz", "parquet", "json", "jsonl", "xlsx", "npz", "npy"}, optional
        Overrides the file name's suffix. Bytes with neither a format nor a name are sniffed. JSON:
        an array of records, one record per line (JSON Lines, ``.jsonl``), or an object of
        equal-length columns; nested objects become ``parent.child`` columns.
    label_column : str, optional
        Header of the label column of a table, when it is not one of :data:`LABEL_COLUMN_NAMES`
        (for an NPZ archive: the name of the labels array).
    score_columns : list of str or comma-separated str, optional
        The columns that hold the class scores, in class order (for an NPZ archive: the one scores
        array). Every other column is then kept as metadata. Default: detected (see
        :mod:`pbr_core.loading._roles`: text, dates, id-like columns and whole numbers outside [0, 1]
        are never read as scores; ambiguous score columns are an error that asks to name them).
    group_columns : list of str or comma-separated str, optional
        Columns kept for calibration by group (``Predictions.metadata``); never scores.
    ignore_columns : list of str or comma-separated str, optional
        Columns dropped when reading (noted as ignored).
    input_type : {"auto", "probabilities", "logits"}
        "auto" decides by inspection and records why in ``notes``.
    renormalize : bool
        Divide probability rows that do not sum to 1 (beyond ``tolerance``) by their sum, instead
        of raising.
    tolerance : float
        How far a probability row's sum may be from 1.
    percent : bool
        The score columns (or the confidence column) hold percentages, 0 to 100 ("31.1" for 0.311):
        divided by 100, with a note. Never decided by the loader itself (numbers in [0, 100] may be
        logits); values outside [0, 100], or all inside [0, 1] (fractions already), are an error.
        Tables only (CSV, TSV, Excel, Parquet, JSON); not with ``input_type="logits"``. A column whose
        every cell is written with a % sign ("93.3%", "93,3%" in a file of decimal commas) is read as
        fractions without this option, with a note.
    positive_class : str, optional
        For one score column beside labels written as two class names: the class the score is the
        probability of (class 1), when the file does not say it (``approval_score`` beside
        approved/denied; a header such as ``p_approved`` or a pair such as no/yes says it). Must be
        one of the label's values; with labels of one name only, another name is class 0.
    max_rows : int, optional
        Refuse files with more rows than this (checked before the data is parsed where the format
        allows). None: no limit.
    name : str, optional
        File name to show in messages (and whose suffix gives the format for bytes).
    require_labels : bool
        True (default): a missing label column is an error. False: a table without a label column
        (every column a class score) or an NPZ without a labels array loads with
        ``has_labels=False``, e.g. to apply a fitted recalibrator to new, unlabelled predictions.
        NPY files always carry the label in their last column.
    limits : ReadLimits, optional
        Bounds on the read: the decompressed content, the memory the read will take, the longest
        text cell (see "Read limits" in the module docstring). Default: :func:`default_limits`
        (1 GiB, 2 GiB and 1 MiB, or the environment variables that override them);
        ``ReadLimits.none()`` for no bound.

    Returns
    -------
    Predictions

    Raises
    ------
    PredictionsError
        For every problem with the input; the message starts with the file name and says what is
        wrong and where (column, row; see the module docstring for how rows are numbered).
    ReadLimitError
        (a ``PredictionsError``) For a file over ``limits``; says how large the file really is and
        whether it can be read streamed (:mod:`pbr_core.stream`) instead.

    Examples
    --------
    >>> import pbr_core
    >>> preds = pbr_core.load_predictions(pbr_core.loading.template_csv().encode(), format="csv")
    >>> preds.kind, preds.n_classes
    ('multiclass', 3)
    """
    table = in_memory_table(source)
    src = _Source(name or f"{type(source).__name__}") if table is not None else _resolve_source(source, name)
    if input_type not in ("auto", "probabilities", "logits"):
        raise src.error(f"input_type must be 'auto', 'probabilities' or 'logits', but got {input_type!r}.")
    if percent and input_type == "logits":
        raise src.error("percentages are probabilities written out of 100: they cannot be read as logits "
                        "(percent=True with input_type='logits').")
    if max_rows is not None and (isinstance(max_rows, bool) or not isinstance(max_rows, (int, np.integer)) or max_rows < 1):
        raise src.error(f"max_rows must be a positive integer or None, but got {max_rows!r}.")
    if label_column is not None and not str(label_column).strip():
        label_column = None  # an empty text box in a form means "find it by name"
    try:
        columns = ColumnChoice(
            label=None if label_column is None else str(label_column).strip(),
            scores=column_list(score_columns, "score_columns") or None,
            groups=column_list(group_columns, "group_columns") or (),
            ignore=column_list(ignore_columns, "ignore_columns") or (),
        )
    except TypeError as exc:
        raise src.error(str(exc)) from None
    limits = _limits_or_default(src, limits)
    opts = _Options(columns, input_type, renormalize, float(tolerance), max_rows, bool(require_labels), limits=limits,
                    percent=bool(percent), positive_class=_positive_class(positive_class))
    if table is not None:  # a DataFrame or Arrow table in memory: the roles and notes of a file's table
        with _as_input_error(src, "table", "read the"):
            preds = _load_in_memory(table, src, opts)
        return _with_one_class_note(preds)
    head, fmt = _head_and_format(src, format)
    if not head.strip():
        raise src.error("the file is empty (no header and no data rows)." if not head
                        else "the file is empty (only blank lines).")
    with _as_input_error(src, fmt):
        if fmt in ("csv", "tsv"):
            preds = _load_csv(src, fmt, head, opts)
        elif fmt == "parquet":
            preds = _load_parquet(src, head, opts)
        elif fmt in ("json", "jsonl"):
            preds = _load_json(src, fmt, head, opts)
        elif fmt == "xlsx":
            preds = _load_excel(src, opts)
        else:
            if percent:
                raise src.error("the percentages option reads the columns of a table; an NPZ / NPY file holds "
                                "arrays: save them divided by 100.")
            preds = _load_numpy(src, fmt, head, opts)
    return _with_one_class_note(preds)


def _with_one_class_note(preds: Predictions) -> Predictions:
    """The notes on labels of one class only, on scores that are the same on every row, on scores of 0
    or 1 that may be roundings and on rows that are exact copies of another row (every path of
    :func:`load_predictions`, files and tables in memory, ends here)."""
    only = preds.only_label()
    if only is not None:
        preds = dataclasses.replace(preds, notes=(*preds.notes, ONE_CLASS_NOTE.format(name=only)))
    else:
        absent = unlabelled_classes_note(preds)
        if absent:
            preds = dataclasses.replace(preds, notes=(*preds.notes, absent))
    unpredicted = unpredicted_classes_note(preds)
    if unpredicted:
        preds = dataclasses.replace(preds, notes=(*preds.notes, unpredicted))
    same = constant_score(preds)
    if same is not None:
        preds = dataclasses.replace(preds, notes=(*preds.notes, CONSTANT_SCORE_NOTE.format(what=same)))
    rounded = _rounding_note(preds)
    if rounded:
        preds = dataclasses.replace(preds, notes=(*preds.notes, rounded))
    copies = duplicate_note(preds)
    if copies:
        preds = dataclasses.replace(preds, notes=(*preds.notes, copies))
    return preds


def _rounding_note(preds: Predictions) -> str:
    """The note when scores of exactly 0 or 1 may be the file's rounding (:func:`pbr_core.resolution.rounding_note`):
    "Confidences are written with one decimal of a percent: values of 100.0% stand for anything from 99.95% ..."."""
    from pbr_core.resolution import rounding_note

    if preds.probs is None and preds.confidence is None:
        return ""
    # as written: a renormalised 3-decimal file is off its grid, but its "1.000" still stands for 0.9995 up
    # (row_scale: rows scaled block by block; preds.as_written would copy the whole score table)
    values = preds.probs if preds.probs is not None else preds.confidence
    scale = preds.row_sums_as_written if preds.probs is not None else None
    # Read as percentages (asked for, or written with a % sign): both notes say so.
    percent_text = any(" as percentages" in n for n in preds.notes)
    return rounding_note(values, "Confidences" if preds.probs is None else "Probabilities", percent_text,
                         row_scale=scale)


def unlabelled_classes_note(preds: Predictions) -> str:
    """A note naming the classes that no row's label is (with their mean and largest predicted
    probability), or "" when every class is some row's label. Their outcome is 0 on every row, so
    these rows can show only over-prediction of them (a user audit: a class 'fish' with mean p .034
    and up to .917 went unmentioned)."""
    if preds.probs is None or not preds.has_labels or preds.n_classes < 3:
        return ""  # binary: one class only has its own note (ONE_CLASS_NOTE)
    counts = np.bincount(preds.labels, minlength=preds.n_classes)
    absent = np.flatnonzero(counts == 0)
    if absent.size == 0:
        return ""
    names = [str(n) for n in preds.class_names]
    shown = [f"{names[k]!r} (mean predicted probability {preds.probs[:, k].mean():.3f}, at most "
             f"{preds.probs[:, k].max():.3f})" for k in absent[:5]]
    more = f" and {absent.size - 5} more" if absent.size > 5 else ""
    one = absent.size == 1
    return (f"{'One class is' if one else f'{absent.size} classes are'} never the true label of any row: "
            f"{', '.join(shown)}{more}. Every probability the model gives {'it' if one else 'them'} went to an "
            "outcome that did not happen in these rows, so the file can show only that the model over-predicts "
            f"{'it' if one else 'them'}, never that it under-predicts. Check that the file is not a filtered export.")


def unpredicted_classes_note(preds: Predictions) -> str:
    """A note naming the classes that get probability exactly 0 on every row yet are some rows' true
    class (with how many), or "". The model cannot predict them: its log loss is infinite on those
    rows, the only other trace of it (audit 8: KITTI's 'pedestrian', 0 on all 9,090 rows, the true class
    of 234). A class that is merely never the top class gets no note: a calibrated model whose
    probability of a rare class never exceeds the others' never makes it the top class either."""
    if preds.probs is None or not preds.has_labels:
        return ""
    counts = np.bincount(preds.labels, minlength=preds.n_classes)
    never = np.flatnonzero((preds.probs.max(axis=0) == 0) & (counts > 0))  # a (K,) max: no (n, K) temporary
    if never.size == 0:
        return ""
    names = [str(n) for n in preds.class_names] if preds.class_names else [str(k) for k in range(preds.n_classes)]
    one = never.size == 1
    if one:
        k = int(never[0])
        rows = f"{counts[k]:,} row{'s' if counts[k] != 1 else ''}"
        return (f"Class {names[k]!r} gets probability 0 on every row, yet is the true class of {rows}: the model "
                f"cannot predict it (its NLL is infinite on {'those rows' if counts[k] != 1 else 'that row'}).")
    shown = ", ".join(f"{names[k]!r} ({counts[k]:,} row{'s' if counts[k] != 1 else ''})" for k in never[:5])
    more = f" and {never.size - 5} more" if never.size > 5 else ""
    return (f"{never.size} classes get probability 0 on every row, yet are the true class of some rows: {shown}{more}. "
            "The model cannot predict them (its NLL is infinite on those rows).")


def constant_score(preds: Predictions) -> str | None:
    """What every row's score is (``"0.3"``, ``"the same probabilities (0.2, 0.5, 0.3)"``) when it is
    the same on every row of two or more, else None."""
    if preds.n < 2:
        return None
    if preds.probs is not None:
        first = preds.probs[0]
        # Each class's smallest and largest value: no (n, K) temporary on the load path (a 10^6 x 100
        # file would allocate 100 MB of booleans for ``probs == first``); the scores are finite here.
        if not (np.array_equal(preds.probs.min(axis=0), first) and np.array_equal(preds.probs.max(axis=0), first)):
            return None
        if preds.kind == "binary":
            return f"p(y=1) = {first[1]:.6g}"
        shown = ", ".join(f"{v:.4g}" for v in first[:5]) + (", ..." if first.size > 5 else "")
        return f"the same probabilities ({shown})"
    c = preds.confidence
    return f"confidence {c[0]:.6g}" if c is not None and np.all(c == c[0]) else None


def in_memory_table(source: object):
    """``source`` as an Arrow table when it is a table in memory (a pandas DataFrame, a pyarrow Table
    or RecordBatch, a polars DataFrame: polars is recognised by its module, never imported), else None.

    A pandas index that carries information (named, or not the default 0..n-1) becomes a column, as
    ``reset_index`` would make it; the default index is dropped, as a CSV written without it."""
    module = type(source).__module__.split(".")[0]
    if module == "pandas":
        import pandas as pd
        import pyarrow as pa

        if not isinstance(source, pd.DataFrame):
            return None

        df = source
        if df.index.name is not None or not isinstance(df.index, pd.RangeIndex) or \
                not df.index.equals(pd.RangeIndex(len(df))):
            df = df.reset_index()
        try:
            return _Owned(pa.Table.from_pandas(df, preserve_index=False))
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise PredictionsError(f"DataFrame: a column could not be read as one type: {exc}") from None
    if module == "pyarrow":
        import pyarrow as pa

        if isinstance(source, pa.RecordBatch):
            return pa.Table.from_batches([source])
        if isinstance(source, pa.Table):
            return source
    if module == "polars" and hasattr(source, "to_arrow"):
        return source.to_arrow()
    return None


@dataclasses.dataclass
class _Owned:
    """An Arrow table made here (from a pandas DataFrame): it may be consumed while converted."""

    table: object


def _load_in_memory(table, src: _Source, opts) -> Predictions:
    from pbr_core.loading._source import _too_many_rows
    from pbr_core.loading._tables import _arrow_frame, _from_table

    owned = isinstance(table, _Owned)
    table = table.table if owned else table
    if opts.max_rows is not None and table.num_rows > opts.max_rows:
        raise _too_many_rows(src, table.num_rows, opts.max_rows)
    src.seen["columns"] = [str(c) for c in table.column_names]
    # the caller's own table (pyarrow, polars) is converted without being consumed
    df = _arrow_frame(table) if owned else _arrow_frame(table, consume=False)
    return _from_table(df, src, opts, [])


#: The note on a file whose rows all have the same true label.
#: The note on a file whose score is the same on every row (a constant model, or a column filled by mistake).
CONSTANT_SCORE_NOTE = ("Every row has the same score ({what}): the file cannot show how calibration varies with the "
                       "score. The reliability diagram has a single bin, the ECE only compares that one score with "
                       "the overall rate, and ranking measures (the AUC) mean nothing. Check that the score column "
                       "is the model's output.")
ONE_CLASS_NOTE = ("Every row's true label is the same class ({name!r}): calibration is measured against that one "
                  "outcome only, and a recalibrator fitted on these rows learns to predict only that class. Check "
                  "that the file is not a filtered export.")


def _head_and_format(src: _Source, format: str | None) -> tuple[bytes, FileFormat]:
    """The first bytes of the source and its format (from the hint, the name or the bytes)."""
    try:
        head = src.head()
    except OSError as exc:
        raise src.error(f"could not read the file: {exc}") from exc
    return head, _resolve_format(src, format, head)


@contextlib.contextmanager
def _as_input_error(src: _Source, fmt: str, doing: str = "read the file as"):
    """Malformed input never escapes as another exception type: it becomes the loader's own error."""
    try:
        yield
    except PredictionsError as exc:
        _with_columns(exc, src)
        raise
    except Exception as exc:  # noqa: BLE001 - a broken file is the caller's input; MemoryError too (a file
        # that expands past the memory left): the server goes on, the user reads what to do (_errors)
        raise _with_columns(src.error(plain_read_error(exc, doing, fmt)), src) from exc


def _with_columns(exc: PredictionsError, src: _Source) -> PredictionsError:
    """``exc`` with ``exc.columns``: the file's column (or array) names when the reader got as far as
    reading them, else None; a front end offers them to name the roles without reading the file again.
    Also ``exc.undecided_classes``: (label column, (name, name), score column) when the read stopped at
    not knowing which of a binary label's two names the score is the probability of, else None."""
    if getattr(exc, "columns", None) is None:
        exc.columns = src.seen.get("columns")
    if getattr(exc, "undecided_classes", None) is None:
        # (label column, its two names, the score column) when the file does not say which name the
        # score is the probability of: a front end offers the names (positive_class=)
        exc.undecided_classes = src.seen.get("undecided_classes")
    return exc


def _limits_or_default(src: _Source, limits: ReadLimits | None) -> ReadLimits:
    if limits is None:
        return default_limits()
    if not isinstance(limits, ReadLimits):
        raise src.error(f"limits must be a ReadLimits, but got {type(limits).__name__}.")
    return limits


def read_columns(source: Source, *, format: str | None = None, name: str | None = None,
                 limits: ReadLimits | None = None) -> list[str]:
    """The column names of a table (the header of a CSV / TSV, the schema of a Parquet file), or
    the array names of an NPZ archive; an NPY file has none. Reads only the header, so it is cheap
    for big files: a front end uses it to offer the file's columns for the column roles of
    :func:`load_predictions`. (JSON and Excel files have no header to read alone: they are read
    whole, within ``limits``, as by :func:`load_predictions`.)

    Raises
    ------
    PredictionsError
        When the file cannot be read or is not one of the accepted formats.
    """
    src = _resolve_source(source, name)
    head, fmt = _head_and_format(src, format)
    limits = _limits_or_default(src, limits)
    with _as_input_error(src, fmt, "read the columns of the"):
        if fmt in ("csv", "tsv"):
            return [c for c in _csv_header(src, fmt, head).columns if c]
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return [c for c in pq.ParquetFile(src.reader_arg()).schema_arrow.names if not _is_unnamed(c)]
        if fmt in ("json", "jsonl"):
            return [str(c) for c in read_json_frame(src, fmt, head, limits=limits).columns]
        if fmt == "xlsx":
            return [str(c) for c in read_excel_frame(src, limits=limits)[0].columns]
        if fmt == "npz" and head.startswith(b"PK"):
            with np.load(src.reader_arg(), allow_pickle=False) as npz:
                return list(npz.files)
        return []


def read_table(source: Source, *, format: str | None = None, name: str | None = None,
               limits: ReadLimits | None = None) -> "pd.DataFrame":
    """A CSV / TSV / Parquet file as a DataFrame, read exactly as :func:`load_predictions` reads it
    (encoding, separator, decimal comma, the same ``limits``; a saved row index 0..n-1 dropped), without
    deciding any column's role: for tables that are not predictions yet, e.g. scores to map with
    :func:`pbr_core.scores.map_scores`.

    Raises
    ------
    PredictionsError
        For a file that cannot be read, or that is not a table (NPZ / NPY).
    """
    import pandas as pd

    from pbr_core.loading._tables import (_check_cells, _decoded_dictionaries, _read_csv_frame, check_csv_size,
                                          read_parquet_table)

    src = _resolve_source(source, name)
    head, fmt = _head_and_format(src, format)
    limits = _limits_or_default(src, limits)
    with _as_input_error(src, fmt):
        if fmt in ("csv", "tsv"):
            header = _csv_header(src, fmt, head)
            check_csv_size(src, header, limits)
            df = _read_csv_frame(src, header.sep, header.compression, header.encoding, header.decimal)
            if len(df.columns) == len(header.columns):
                df.columns = header.columns
        elif fmt == "parquet":
            df = _decoded_dictionaries(read_parquet_table(src, limits)).to_pandas()
        elif fmt in ("json", "jsonl"):
            df = read_json_frame(src, fmt, head, limits=limits)
        elif fmt == "xlsx":
            df = read_excel_frame(src, limits=limits)[0]
        else:
            raise src.error(f"a {fmt.upper()} file holds arrays, not a table of named columns.")
        _check_cells(df, src, limits.max_cell_bytes)
    df.columns = [str(c).strip() for c in df.columns]
    for c in [c for c in df.columns if _is_unnamed(c)]:
        values = df[c]
        if pd.api.types.is_integer_dtype(values.dtype) and np.array_equal(values.to_numpy(), np.arange(len(df))):
            df = df.drop(columns=c)
    return df


def read_csv_text(source: Source, columns: Sequence[str], n_rows: int, *, format: str | None = None,
                  name: str | None = None) -> "pd.DataFrame | None":
    """The ``columns`` of a CSV / TSV file as the text written in them, for the ``n_rows`` data rows
    that :func:`load_predictions` read; None for a file of another format, or when none of ``columns``
    is in the file's header. Names not in it (``row index``, which the loader names) are left out.

    The loader reads numbers as numbers: a ZIP code 01234 becomes 1234, an account 000789 becomes 789,
    1.50 becomes 1.5. A file written back from loaded predictions (``pbr-calib apply``) takes these
    columns instead (:func:`save_predictions`' ``as_written``), so that every column it does not
    change is as it was. The header is read as the loader reads it (separator, encoding, compression);
    every cell is text, an empty cell the empty text. ``attrs["decimal"]`` is the file's decimal mark.

    Raises
    ------
    PredictionsError
        The file cannot be read again, or it holds other than ``n_rows`` data
        rows (beyond empty rows at the end, which the loader leaves out too).
    """
    import pandas as pd

    src = _resolve_source(source, name)
    head, fmt = _head_and_format(src, format)
    if fmt not in ("csv", "tsv"):
        return None
    with _as_input_error(src, fmt):
        header = _csv_header(src, fmt, head)
        columns = [c for c in dict.fromkeys(columns) if c in header.columns]
        if not columns:  # only names the loader gave (a saved index's 'row index'): nothing written to read
            return None
        positions = [header.columns.index(c) for c in columns]
        df = pd.read_csv(src.reader_arg(), sep=header.sep, compression=header.compression, encoding=header.encoding,
                         usecols=positions, dtype=str, keep_default_na=False, na_filter=False, engine="c",
                         skip_blank_lines=True)
    # usecols keeps the file's order: back to the order asked, under the loader's (stripped) names
    df.columns = [header.columns[i] for i in sorted(positions)]
    df = df[list(columns)]
    if len(df) > n_rows and (df.iloc[n_rows:] == "").all(axis=None):
        df = df.iloc[:n_rows]  # empty rows at the end (",,,"): left out by the loader as well
    if len(df) != n_rows:
        raise src.error(f"read again as text, the file has {len(df):,} data rows, not the {n_rows:,} read before "
                        "(did it change?).")
    df = df.reset_index(drop=True)
    df.attrs["decimal"] = header.decimal  # how its numbers are written (0,25 in a ';' export): numbers_as_written
    # How the file is written (separator, decimal mark, byte-order mark, line ends): a file written back
    # from it (save_predictions' as_written) is written the same way (audit 12a).
    df.attrs[DIALECT_ATTR] = csv_dialect(head, header.sep, header.decimal, header.encoding, header.compression)
    return df


def read_as_written(source: Source, preds: Predictions, columns: Sequence[str], *,
                    name: str | None = None) -> "pd.DataFrame | None":
    """What a file written back from ``preds`` (loaded from the CSV ``source``) needs to be written as
    the file was (:func:`save_predictions`' ``as_written``): the ``columns`` as the text written in
    them (:func:`read_csv_text`), and in ``attrs`` the file's dialect (:class:`~pbr_core.loading.dialect.CsvDialect`:
    separator, decimal mark, byte-order mark, line ends) with the score columns that held percentages
    (read here as text, then left out). None for a file of another format. ``pbr-calib apply`` and the
    dashboard's download both read it so: one rule for both.
    """
    scores = preds.columns_with_role("score") if preds.probs is not None else []
    text = read_csv_text(source, list(columns) + [c for c in scores if c not in columns], preds.n, name=name)
    if text is None:
        return None
    dialect = text.attrs[DIALECT_ATTR]
    percent = percent_columns_as_written(text, preds, dialect.decimal)
    kept = text[[c for c in text.columns if c in columns]]
    kept.attrs[DIALECT_ATTR] = dataclasses.replace(dialect, percent=percent)
    return kept
