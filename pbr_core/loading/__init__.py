"""Reading prediction files (CSV, TSV, Parquet, NPZ, NPY) into a validated :class:`Predictions`.

Accepted formats
----------------
CSV / TSV (``.csv``, ``.tsv``, also gzip-compressed ``.csv.gz`` / ``.tsv.gz``) and Parquet (``.parquet``, ``.pq``)
    A table with one header line. One column holds the true label; it is found by name
    (case-insensitive: ``label``, ``labels``, ``y``, ``y_true``, ``target``, ``true_label``, ``class``)
    or named with ``label_column=``. Every other column is a score column: one per class, its
    header is the class name, and it holds probabilities or logits (decided by inspection, see
    :func:`pbr_core.predictions.detect_input_type`, or forced with ``input_type=``). Labels are
    integers 0..K-1 (position of the class column) or class names equal to the headers.

    * Binary: a single score column is p(y=1); labels are 0/1 or exactly two class names (the
      column's header names the positive class when it is one of them, else the names are
      mapped in sorted order; the choice is recorded in ``Predictions.notes``).
    * Top-label only: a ``confidence`` (or ``conf`` / ``max_prob``) column, a ``predicted``
      (or ``prediction`` / ``pred`` / ``predicted_label``) column and a label column. Enough for
      ECE and reliability diagrams, not for recalibration.

    A leading unnamed column holding 0..n-1 (a pandas index written by ``to_csv()``) is dropped.
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

Safety
------
Nothing is ever unpickled (``allow_pickle=False`` everywhere); object arrays are refused. Every
problem with the input raises :class:`~pbr_core.predictions.PredictionsError` (a ``ValueError``)
whose message starts with the file name.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Literal, Sequence, Union

import numpy as np
import pandas as pd

from pbr_core.predictions import (
    DEFAULT_SUM_TOLERANCE,
    InputType,
    Predictions,
    PredictionsError,
    looks_like_probabilities,
)

__all__ = [
    "ACCEPTED_SUFFIXES",
    "CONFIDENCE_COLUMN_NAMES",
    "LABEL_COLUMN_NAMES",
    "PREDICTED_COLUMN_NAMES",
    "load_predictions",
    "save_predictions",
    "template_csv",
]

Source = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, IO[bytes]]
FileFormat = Literal["csv", "tsv", "parquet", "npz", "npy"]

#: Header names (compared case-insensitively) that mark the true-label column of a table.
LABEL_COLUMN_NAMES = ("label", "labels", "y", "y_true", "target", "true_label", "class")
#: Header names of the confidence column of a top-label-only table.
CONFIDENCE_COLUMN_NAMES = ("confidence", "conf", "max_prob")
#: Header names of the predicted-label column of a top-label-only table.
PREDICTED_COLUMN_NAMES = ("predicted", "prediction", "pred", "predicted_label")
NPZ_SCORE_KEYS = ("logits", "probs", "probabilities", "scores")
NPZ_LABEL_KEYS = ("labels", "y")

# suffix or format hint -> format; compression of CSV/TSV is read from the bytes themselves.
_FORMATS: dict[str, FileFormat] = {
    "csv": "csv", "csv.gz": "csv", "tsv": "tsv", "tsv.gz": "tsv",
    "parquet": "parquet", "pq": "parquet", "npz": "npz", "npy": "npy",
}
ACCEPTED_SUFFIXES = tuple("." + s for s in _FORMATS)

_MAGIC = (  # (prefix, what it is), for formats sniffed from the first bytes
    (b"PAR1", "a Parquet file"),
    (b"\x93NUMPY", "an NPY file"),
    (b"PK\x03\x04", "a ZIP archive (an NPZ file, an Excel .xlsx workbook, ...)"),
    (b"PK\x05\x06", "an empty ZIP archive"),
    (b"\x1f\x8b", "gzip-compressed data"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"%PDF", "a PDF document"),
    (b"\xd0\xcf\x11\xe0", "an old Excel .xls / Office document"),
)
_SNIFF_BYTES = 8192


# ---------------------------------------------------------------------------------------- sources
@dataclass(frozen=True)
class _Source:
    """Where the bytes are: a path on disk, or bytes in memory. ``name`` prefixes every message."""

    name: str
    path: Path | None = None
    data: bytes | None = None
    file_name: str | None = None  # whose suffix gives the format; None for anonymous bytes

    def open(self) -> IO[bytes]:
        return open(self.path, "rb") if self.path is not None else io.BytesIO(self.data)

    def size(self) -> int:
        return self.path.stat().st_size if self.path is not None else len(self.data)

    def head(self, n: int = _SNIFF_BYTES) -> bytes:
        with self.open() as f:
            return f.read(n)

    def reader_arg(self) -> str | IO[bytes]:
        """What to hand to pandas / pyarrow: the path (fast, memory-mapped) or a fresh buffer."""
        return str(self.path) if self.path is not None else io.BytesIO(self.data)

    def error(self, message: str) -> PredictionsError:
        return PredictionsError(f"{self.name}: {message}")


def _resolve_source(source: Source, name: str | None) -> _Source:
    if isinstance(source, (str, os.PathLike)):
        if isinstance(source, str) and "\n" in source:
            raise PredictionsError(
                f"{name or 'input'}: a str is read as a file path, but this one holds several lines; "
                "pass the file's contents as bytes (e.g. text.encode()) with format='csv'."
            )
        path = Path(source)
        shown = name or path.name or str(path)
        try:
            exists, is_file = path.exists(), path.is_file()
        except OSError as exc:  # e.g. a name too long for the file system
            raise PredictionsError(f"{shown}: cannot open {str(path)[:200]!r}: {exc.strerror or exc}") from exc
        if not exists:
            raise PredictionsError(f"{shown}: file not found: {path}")
        if not is_file:
            raise PredictionsError(f"{shown}: not a file: {path}")
        return _Source(shown, path=path, file_name=name or path.name)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _Source(name or "uploaded data", data=bytes(source), file_name=name)
    if hasattr(source, "read"):
        given = name or getattr(source, "name", None)
        given = Path(given).name if isinstance(given, (str, os.PathLike)) and str(given) else None
        shown = given or "uploaded data"
        try:  # BytesIO and Streamlit's UploadedFile hold everything: take it whatever the position
            data = source.getvalue() if hasattr(source, "getvalue") else source.read()
        except Exception as exc:  # a closed or broken stream is the caller's input too
            raise PredictionsError(f"{shown}: could not read the uploaded data: {exc}") from exc
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise PredictionsError(f"{shown}: the file object returned {type(data).__name__}, not bytes.")
        return _Source(shown, data=bytes(data), file_name=given)
    raise PredictionsError(
        f"{name or 'input'}: expected a path, bytes or a binary file object, but got {type(source).__name__}."
    )


def _suffix_format(file_name: str) -> tuple[str, FileFormat | None]:
    """(suffix as written, format or None) for a file name; '' when it has no suffix."""
    lower = file_name.lower()
    for key in sorted(_FORMATS, key=len, reverse=True):
        if lower.endswith("." + key):
            return file_name[-len(key) - 1:], _FORMATS[key]
    suffixes = Path(file_name).suffixes
    if not suffixes:
        return "", None
    return ("".join(suffixes[-2:]) if suffixes[-1].lower() in (".gz", ".bz2", ".zip", ".xz") else suffixes[-1]), None


def _describe(head: bytes) -> str | None:
    for prefix, what in _MAGIC:
        if head.startswith(prefix):
            return what
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "Python pickle data"
    return None


def _resolve_format(src: _Source, format: str | None, head: bytes) -> FileFormat:
    accepted = ", ".join(ACCEPTED_SUFFIXES)
    if format is not None:
        key = str(format).lower().lstrip(".")
        if key not in _FORMATS:
            raise src.error(f"unknown format {format!r}; accepted formats: {', '.join(_FORMATS)}.")
        return _FORMATS[key]
    if src.file_name is not None:
        suffix, fmt = _suffix_format(src.file_name)
        if fmt is not None:
            return fmt
        if src.path is not None or suffix:
            raise src.error(
                f"unsupported file type {suffix or '(no suffix)'!r}; accepted: {accepted} "
                "(or pass format='csv' etc.)."
            )
    # Bytes with no hint: the first bytes usually say what they are.
    sniffed = {b"PAR1": "parquet", b"\x93NUMPY": "npy", b"PK\x03\x04": "npz", b"\x1f\x8b": "csv"}
    for prefix, fmt in sniffed.items():
        if head.startswith(prefix):
            return fmt  # type: ignore[return-value]
    if _looks_like_text(head):
        return "csv"
    raise src.error(
        f"cannot tell the file format ({_describe(head) or 'binary data'}); pass format= or a file name "
        f"ending in one of {accepted}."
    )


def _looks_like_text(head: bytes) -> bool:
    """No NUL bytes and (almost) no control characters: UTF-8 or a legacy 8-bit encoding."""
    if not head:
        return True
    if b"\x00" in head:
        return False
    controls = sum(head.count(bytes([c])) for c in range(32) if c not in (9, 10, 12, 13))
    return controls <= len(head) // 100


# ------------------------------------------------------------------------------------ public API
def load_predictions(
    source: Source,
    *,
    format: str | None = None,
    label_column: str | None = None,
    input_type: InputType = "auto",
    renormalize: bool = False,
    tolerance: float = DEFAULT_SUM_TOLERANCE,
    max_rows: int | None = None,
    name: str | None = None,
    require_labels: bool = True,
) -> Predictions:
    """Read a prediction file into a validated :class:`Predictions`.

    Parameters
    ----------
    source : str, path-like, bytes or binary file object
        A path, or the raw bytes of a file (an upload), or an object with ``read()`` (e.g.
        Streamlit's ``UploadedFile``, whose ``name`` is used for the format and the messages).
    format : {"csv", "tsv", "csv.gz", "tsv.gz", "parquet", "npz", "npy"}, optional
        Overrides the file name's suffix. Bytes with neither a format nor a name are sniffed.
    label_column : str, optional
        Header of the label column of a table, when it is not one of :data:`LABEL_COLUMN_NAMES`
        (for an NPZ archive: the name of the labels array).
    input_type : {"auto", "probabilities", "logits"}
        "auto" decides by inspection and records why in ``notes``.
    renormalize : bool
        Divide probability rows that do not sum to 1 (beyond ``tolerance``) by their sum, instead
        of raising.
    tolerance : float
        How far a probability row's sum may be from 1.
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

    Returns
    -------
    Predictions

    Raises
    ------
    PredictionsError
        For every problem with the input; the message starts with the file name and says what is
        wrong and where (column, row; see the module docstring for how rows are numbered).

    Examples
    --------
    >>> import pbr_core
    >>> preds = pbr_core.load_predictions(pbr_core.loading.template_csv().encode(), format="csv")
    >>> preds.kind, preds.n_classes
    ('multiclass', 3)
    """
    src = _resolve_source(source, name)
    if input_type not in ("auto", "probabilities", "logits"):
        raise src.error(f"input_type must be 'auto', 'probabilities' or 'logits', but got {input_type!r}.")
    if max_rows is not None and (isinstance(max_rows, bool) or not isinstance(max_rows, (int, np.integer)) or max_rows < 1):
        raise src.error(f"max_rows must be a positive integer or None, but got {max_rows!r}.")
    if label_column is not None and not str(label_column).strip():
        label_column = None  # an empty text box in a form means "find it by name"
    opts = _Options(label_column, input_type, renormalize, float(tolerance), max_rows, bool(require_labels))
    try:
        head = src.head()
    except OSError as exc:
        raise src.error(f"could not read the file: {exc}") from exc
    fmt = _resolve_format(src, format, head)
    if not head.strip():
        raise src.error("the file is empty (no header and no data rows)." if not head
                        else "the file is empty (only blank lines).")
    try:
        if fmt in ("csv", "tsv"):
            return _load_csv(src, fmt, head, opts)
        if fmt == "parquet":
            return _load_parquet(src, head, opts)
        return _load_numpy(src, fmt, head, opts)
    except PredictionsError:
        raise
    except MemoryError:
        raise
    except Exception as exc:  # malformed input must never escape as another exception type
        raise src.error(f"could not read the file as {fmt.upper()}: {type(exc).__name__}: {exc}") from exc


@dataclass(frozen=True)
class _Options:
    label_column: str | None
    input_type: InputType
    renormalize: bool
    tolerance: float
    max_rows: int | None
    require_labels: bool = True


def _too_many_rows(src: _Source, n: int, max_rows: int) -> PredictionsError:
    return src.error(
        f"the file has {n:,} data rows, more than the limit of {max_rows:,} rows; use a smaller file "
        "(e.g. a random sample of the rows)."
    )


# ------------------------------------------------------------------------------------ CSV / TSV
def _load_csv(src: _Source, fmt: FileFormat, head: bytes, opts: _Options) -> Predictions:
    notes: list[str] = []
    compression = None
    header_bytes_max = 1 << 20  # a header with 1000 class names is ~20 kB
    if head.startswith(b"\x1f\x8b"):
        compression = "gzip"
        try:
            with gzip.open(src.open()) as f:
                head = f.read(header_bytes_max)
        except (OSError, EOFError) as exc:
            raise src.error(f"the file looks gzip-compressed but cannot be decompressed: {exc}") from exc
        if not head.strip():
            raise src.error("the file is empty (no header and no data rows).")
    what = _describe(head)
    if what is not None or not _looks_like_text(head):
        raise src.error(f"this is not a {fmt.upper()} text file: it looks like {what or 'binary data'}.")
    if compression is None and b"\n" not in head and len(head) == _SNIFF_BYTES:
        head = src.head(header_bytes_max)

    encoding = "utf-8"
    header_bytes = head.split(b"\n", 1)[0]
    try:
        header_line = header_bytes.decode("utf-8-sig")
    except UnicodeDecodeError:
        # Spreadsheet exports on Windows are often cp1252; latin-1 reads every byte sequence.
        encoding = "latin-1"
        header_line = header_bytes.decode("latin-1")
        warnings.warn(f"{src.name}: the header is not UTF-8; read the file as Latin-1.", stacklevel=3)
        notes.append("The file is not UTF-8: read it as Latin-1.")
    header_line = header_line.rstrip("\r")
    sep = "\t" if fmt == "tsv" else ","
    if fmt == "csv" and "," not in header_line:
        for other, label in (("\t", "tabs"), (";", "semicolons")):
            if other in header_line:
                sep = other
                notes.append(f"The header has no commas: columns are separated by {label}.")
                break
    raw_header = [h.strip() for h in next(csv.reader([header_line], delimiter=sep), [])]
    dup = sorted({h for h in raw_header if h and raw_header.count(h) > 1})
    if dup:
        raise src.error(f"duplicate column header(s) {_names(dup)}: every column needs its own name.")

    if opts.max_rows is not None:
        # Each data row takes at least one byte per column (separators and newline), so small
        # files need no counting pass.
        if compression is not None or src.size() // max(len(raw_header), 1) > opts.max_rows:
            n = _count_data_rows(src, compression)
            if n > opts.max_rows:
                raise _too_many_rows(src, n, opts.max_rows)

    df = _read_csv_frame(src, sep, compression, encoding)
    if len(df.columns) == len(raw_header):
        df.columns = raw_header
    return _from_table(df, src, opts, notes)


def _count_data_rows(src: _Source, compression: str | None) -> int:
    """Lines after the header, trailing blank lines excluded; C-speed counting in 4 MiB chunks."""
    newlines, last = 0, b""
    with src.open() as raw:
        f = gzip.open(raw) if compression == "gzip" else raw
        while chunk := f.read(1 << 22):
            newlines += chunk.count(b"\n")
            last = chunk
    trailing_blank = last[len(last.rstrip()):].count(b"\n")
    lines = newlines - trailing_blank + (1 if last.strip() else 0)
    return max(lines - 1, 0)


def _read_csv_frame(src: _Source, sep: str, compression: str | None, encoding: str) -> pd.DataFrame:
    # Blank lines are kept (as all-missing rows) so that row numbers match the file's lines.
    kw = dict(sep=sep, compression=compression, encoding=encoding, skip_blank_lines=False)
    try:
        return pd.read_csv(src.reader_arg(), engine="pyarrow", **kw)
    except Exception:  # pyarrow's messages do not say where; the C engine's do
        pass
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # mixed-type columns are diagnosed later, per column
            return pd.read_csv(src.reader_arg(), engine="c", low_memory=False, **kw)
    except pd.errors.EmptyDataError as exc:
        raise src.error("the file is empty (no header and no data rows).") from exc
    except pd.errors.ParserError as exc:
        m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(exc))
        if m:
            expected, line, saw = (int(g) for g in m.groups())
            raise src.error(
                f"{_table_row(line - 2)} has {saw} fields but the header has {expected} columns "
                f"(line {line} of the file)."
            ) from exc
        raise src.error(f"could not parse the file as CSV: {_first_line(exc)}") from exc
    except UnicodeDecodeError as exc:
        raise src.error(f"the file is not valid UTF-8 text (byte {exc.start}: {exc.reason}).") from exc


# ------------------------------------------------------------------------------------ Parquet
def _load_parquet(src: _Source, head: bytes, opts: _Options) -> Predictions:
    import pyarrow.parquet as pq

    if not head.startswith(b"PAR1"):
        raise src.error(f"this is not a Parquet file: it looks like {_describe(head) or 'something else'}.")
    try:
        pf = pq.ParquetFile(src.reader_arg())
        n = pf.metadata.num_rows
        if opts.max_rows is not None and n > opts.max_rows:
            raise _too_many_rows(src, n, opts.max_rows)
        df = pf.read().to_pandas()
    except PredictionsError:
        raise
    except Exception as exc:
        raise src.error(f"could not read the Parquet file (truncated or corrupt?): {_first_line(exc)}") from exc
    return _from_table(df, src, opts, [])


# ------------------------------------------------------------------------------ table -> values
def _table_row(i: int) -> str:
    return f"row {i + 1} (data row, header excluded)"


def _array_row(i: int) -> str:
    return f"row {i} (0-based array index)"


def _names(items: Sequence[object], limit: int = 12) -> str:
    shown = ", ".join(repr(str(x)) for x in list(items)[:limit])
    return shown + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _is_unnamed(header: str) -> bool:
    return header == "" or re.fullmatch(r"Unnamed: \d+|__index_level_\d+__", header) is not None


def _find_column(columns: Sequence[str], candidates: Sequence[str], what: str, src: _Source) -> str | None:
    found = [c for c in columns if c.lower() in candidates]
    if len(found) > 1:
        raise src.error(f"several columns could be the {what} column: {_names(found)}; keep only one.")
    return found[0] if found else None


def _label_column(columns: Sequence[str], wanted: str | None, src: _Source, required: bool = True) -> str | None:
    if wanted is not None:
        if wanted in columns:
            return wanted
        ci = [c for c in columns if c.lower() == str(wanted).strip().lower()]
        if len(ci) == 1:
            return ci[0]
        raise src.error(f"label_column {wanted!r} is not a column; the columns are {_names(columns)}.")
    found = [c for c in columns if c.lower() in LABEL_COLUMN_NAMES]
    if len(found) > 1:
        raise src.error(
            f"ambiguous label column: {_names(found)} could each be the label; keep one, or pass label_column=."
        )
    if not found and not required:
        return None
    if not found:
        hint = ""
        if columns and all(_is_number(c) for c in columns):
            hint = " The first line looks like data: add a header line (class names, then 'label')."
        raise src.error(
            f"no label column: name it one of {', '.join(LABEL_COLUMN_NAMES)} (any case), or pass "
            f"label_column=. The columns are {_names(columns)}.{hint}"
        )
    return found[0]


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _is_plain_numeric(dtype) -> bool:
    return pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)


def _float_column(series: pd.Series, column: str, src: _Source) -> np.ndarray:
    """The column as float64 (NaN where missing); non-numeric cells are an error naming the first."""
    dtype = series.dtype
    if _is_plain_numeric(dtype):
        return series.to_numpy(dtype=np.float64, na_value=np.nan)
    values = series.astype(object)
    if pd.api.types.is_bool_dtype(dtype):
        coerced = pd.Series(np.nan, index=series.index)  # true/false are not scores
    else:
        coerced = pd.to_numeric(values, errors="coerce")
    bad = coerced.isna().to_numpy() & values.notna().to_numpy()
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise src.error(
            f"non-numeric value {_cell(values.iloc[r])} in column {column!r} at {_table_row(r)} "
            f"({int(bad.sum()):,} non-numeric cell(s) in this column)."
        )
    return coerced.to_numpy(dtype=np.float64, na_value=np.nan)


def _cell(value: object) -> str:
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    text = str(value)
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _check_finite(values: np.ndarray, columns: Sequence[str], src: _Source) -> None:
    bad = ~np.isfinite(values)
    if not bad.any():
        return
    r = int(np.flatnonzero(bad.any(axis=1))[0])
    j = int(np.flatnonzero(bad[r])[0])
    what = "missing value (empty cell or NaN)" if np.isnan(values[r, j]) else f"infinite value ({values[r, j]:g})"
    raise src.error(f"{what} in column {columns[j]!r} at {_table_row(r)}.")


def _label_values(series: pd.Series, column: str, src: _Source) -> tuple[str, np.ndarray]:
    """("numbers", numeric array) or ("names", str array) for a label-like column; no missing cells."""
    missing = series.isna().to_numpy()
    if missing.any():
        raise src.error(f"missing value in column {column!r} at {_table_row(int(np.flatnonzero(missing)[0]))}.")
    if pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
        return "numbers", series.to_numpy()
    values = series.astype(object)
    coerced = pd.to_numeric(values, errors="coerce")
    if coerced.notna().all():  # quoted numbers, or numbers with stray spaces
        return "numbers", coerced.to_numpy()
    if pd.api.types.is_string_dtype(series.dtype) and not pd.api.types.is_object_dtype(series.dtype):
        names = series.str.strip()
    else:  # object columns (rare: e.g. undecodable bytes from the CSV reader) go value by value
        names = values.map(lambda v: v.decode("latin-1") if isinstance(v, bytes) else str(v)).str.strip()
    return "names", names.to_numpy(dtype=object).astype(str)


def _codes(names: np.ndarray, classes: Sequence[str], column: str, src: _Source, why: str) -> np.ndarray:
    codes = pd.Index(list(classes)).get_indexer(names).astype(np.int64)
    bad = codes < 0
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise src.error(
            f"{column!r} value {_cell(names[r])} at {_table_row(r)} is not one of the classes "
            f"{_names(classes)}; {why}"
        )
    return codes


def _from_table(df: pd.DataFrame, src: _Source, opts: _Options, notes: list[str]) -> Predictions:
    columns = [str(c).strip() for c in df.columns]
    dup = sorted({c for c in columns if columns.count(c) > 1})
    if dup:
        raise src.error(f"duplicate column header(s) {_names(dup)}: every column needs its own name.")
    df = df.set_axis(columns, axis=1)
    if df.shape[1] == 0:
        raise src.error("the file is empty (no columns).")

    # Blank lines at the end are harmless; inside the data they are an error (row numbers must
    # keep matching the file, so they are not silently skipped).
    empty = df.isna().all(axis=1).to_numpy()
    if empty.any():
        keep = np.flatnonzero(~empty)
        n_keep = int(keep[-1]) + 1 if keep.size else 0
        if empty[:n_keep].any():
            raise src.error(f"{_table_row(int(np.flatnonzero(empty[:n_keep])[0]))} is empty.")
        df = df.iloc[:n_keep]
    if len(df) == 0:
        raise src.error(f"the file is empty: a header ({_names(columns)}) but no data rows.")

    for c in [c for c in columns if _is_unnamed(c)]:
        values = df[c]
        if pd.api.types.is_integer_dtype(values.dtype) and np.array_equal(values.to_numpy(), np.arange(len(df))):
            df = df.drop(columns=c)
            notes.append("Dropped an unnamed column holding 0, 1, 2, ... (a saved row index).")
            warnings.warn(f"{src.name}: dropped an unnamed column holding the row index 0..n-1.", stacklevel=4)
        else:
            raise src.error(
                f"column {columns.index(c) + 1} has no header; every column needs one (a class name, or the label)."
            )
    columns = list(df.columns)

    label = _label_column(columns, opts.label_column, src, opts.require_labels)
    conf = _find_column(columns, CONFIDENCE_COLUMN_NAMES, "confidence", src)
    pred = _find_column(columns, PREDICTED_COLUMN_NAMES, "predicted-label", src)
    if label is None:
        if conf is not None and pred is not None:
            raise src.error("top-label-only data (confidence, predicted) needs a label column; there is none.")
        return _unlabelled_table(df, columns, src, opts, notes)
    if conf is not None and pred is not None and label not in (conf, pred):
        return _top_label_table(df, label, conf, pred, src, opts, notes)

    score_cols = [c for c in columns if c != label]
    if not score_cols:
        raise src.error(f"no score columns: the only column is the label {label!r}; add one column per class.")
    scores = _score_block(df, score_cols, src)

    kind, y = _label_values(df[label], label, src)
    class_names: list[str] | None = list(score_cols)
    if len(score_cols) == 1:
        class_names = None
        if kind == "names":
            y, class_names = _binary_names(y, score_cols[0], label, src, notes)
        scores = scores[:, 0]
    elif kind == "names":
        y = _codes(y, score_cols, label, src, "class-name labels must equal a score column's header.")
    else:
        y = _labels_by_integer_header(y, score_cols, label, src, notes)

    return _validated(
        lambda: Predictions.from_arrays(
            scores, y, input_type=opts.input_type, class_names=class_names, renormalize=opts.renormalize,
            tolerance=opts.tolerance, source=src.name, notes=notes,
        ),
        _table_row, score_cols,
    )


def _score_block(df: pd.DataFrame, score_cols: list[str], src: _Source) -> np.ndarray:
    for c in score_cols:  # per-column conversion only where a column is not plainly numeric
        if not _is_plain_numeric(df[c].dtype):
            df[c] = _float_column(df[c], c, src)
    # The readers hand back one consolidated float block: this is a view or one copy, no Python loop.
    scores = np.ascontiguousarray(df[score_cols].to_numpy(dtype=np.float64, na_value=np.nan))
    _check_finite(scores, score_cols, src)
    return scores


def _unlabelled_table(df: pd.DataFrame, columns: list[str], src: _Source, opts: _Options, notes: list[str]) -> Predictions:
    """A table of class scores only (require_labels=False): every column is a class."""
    scores = _score_block(df, columns, src)
    notes.append("No label column: every column was read as a class score.")
    return _validated(
        lambda: Predictions.from_arrays(
            scores[:, 0] if len(columns) == 1 else scores, None, input_type=opts.input_type,
            class_names=None if len(columns) == 1 else columns, renormalize=opts.renormalize,
            tolerance=opts.tolerance, source=src.name, notes=notes,
        ),
        _table_row, columns,
    )


def _binary_names(y: np.ndarray, header: str, label: str, src: _Source, notes: list[str]) -> tuple[np.ndarray, list[str]]:
    names = sorted(pd.unique(y).tolist())  # hashing in C: fine for millions of rows
    if len(names) != 2:
        raise src.error(
            f"one score column means binary data, so the labels must be 0/1 or exactly two class names, "
            f"but column {label!r} holds {len(names)} distinct name(s): {_names(names, 6)}."
        )
    if header in names:
        negative, positive = [n for n in names if n != header][0], header
        notes.append(f"Binary labels: {positive!r} is class 1 (the score column's header), {negative!r} is class 0.")
    else:
        negative, positive = names
        notes.append(
            f"Binary labels mapped in sorted order: {negative!r} -> 0, {positive!r} -> 1; the score column "
            f"{header!r} is read as p({positive})."
        )
    return (y == positive).astype(np.int64), [negative, positive]


def _labels_by_integer_header(y: np.ndarray, headers: list[str], label: str, src: _Source, notes: list[str]) -> np.ndarray:
    """Integer labels index the score columns, unless the headers are themselves integers in
    another order (e.g. 1..K): then a label names its column, as a spreadsheet user means it."""
    try:
        as_ints = [int(h) for h in headers]
    except ValueError:
        return y
    if as_ints == list(range(len(headers))) or len(set(as_ints)) != len(as_ints):
        return y
    yf = np.asarray(y, dtype=np.float64)
    if not np.all(np.isfinite(yf) & (yf == np.round(yf))):
        return y  # from_arrays explains what is wrong with the labels
    idx = pd.Index(as_ints).get_indexer(yf.astype(np.int64))
    bad = idx < 0
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise src.error(
            f"label {int(yf[r])} at {_table_row(r)} is not one of the class columns {_names(headers)} "
            "(the headers are integers, so labels are matched to them by value)."
        )
    notes.append(f"The score column headers are integers ({_names(headers, 5)}): labels were matched to headers by value.")
    return idx.astype(np.int64)


def _top_label_table(df, label, conf, pred, src, opts, notes) -> Predictions:
    extra = [c for c in df.columns if c not in (label, conf, pred)]
    if extra:
        raise src.error(
            f"a top-label file ({conf!r}, {pred!r}, {label!r}) must have no other columns, but it also has "
            f"{_names(extra)}. For full probability vectors, drop the {conf!r} and {pred!r} columns."
        )
    if opts.input_type == "logits":
        raise src.error(f"top-label column {conf!r} holds a confidence in [0, 1]; it cannot be read as logits.")
    c = _float_column(df[conf], conf, src)
    _check_finite(c[:, None], [conf], src)
    kind_p, p = _label_values(df[pred], pred, src)
    kind_y, y = _label_values(df[label], label, src)
    names: list[str] = []
    if kind_p != kind_y:
        raise src.error(
            f"column {pred!r} and column {label!r} must both hold class numbers or both class names, but "
            f"{(pred if kind_p == 'names' else label)!r} holds names."
        )
    if kind_p == "names":
        names = sorted(set(pd.unique(p).tolist()) | set(pd.unique(y).tolist()))
        p = _codes(p, names, pred, src, "")
        y = _codes(y, names, label, src, "")
        notes.append(f"Class names sorted into ids 0..{len(names) - 1}: {_names(names, 6)}.")
    return _validated(
        lambda: Predictions.from_top_label(c, p, y, class_names=names, source=src.name, notes=notes),
        _table_row, [conf],
    )


def _validated(build: Callable[[], Predictions], row: Callable[[int], str], columns: Sequence[str] | None) -> Predictions:
    """Run Predictions' own validation, rewriting its 0-based array rows in this file's terms."""
    try:
        return build()
    except PredictionsError as exc:
        message = re.sub(r"\brow (\d+)\b", lambda m: row(int(m.group(1))), str(exc))
        if columns is not None:
            message = re.sub(
                r"\bcolumn (\d+)\b",
                lambda m: f"column {columns[int(m.group(1))]!r}" if int(m.group(1)) < len(columns) else m.group(0),
                message,
            )
        if "ask to renormalise" in message:
            message += (" With load_predictions: pass renormalize=True to divide each row by its sum, or "
                        "input_type='logits' if the columns are logits.")
        raise PredictionsError(message) from None


# ---------------------------------------------------------------------------------- NPZ / NPY
def _load_numpy(src: _Source, fmt: FileFormat, head: bytes, opts: _Options) -> Predictions:
    notes: list[str] = []
    what = _describe(head)
    if head.startswith(b"\x93NUMPY"):
        if fmt == "npz":
            notes.append("The .npz file is really a single NPY array: read it as NPY.")
        return _load_npy(src, opts, notes)
    if head.startswith(b"PK"):
        if fmt == "npy":
            notes.append("The .npy file is really an NPZ archive: read it as NPZ.")
        return _load_npz(src, opts, notes)
    if what == "Python pickle data" or head[:1] == b"\x80":
        raise src.error("pickled data is not accepted (it could run code); save arrays with numpy.save / numpy.savez.")
    raise src.error(f"this is not an {fmt.upper()} file: it looks like {what or 'something else'}.")


def _numpy_error(src: _Source, exc: Exception, what: str) -> PredictionsError:
    text = str(exc)
    if "allow_pickle" in text or "pickled" in text or "Python objects" in text or "Object arrays" in text:
        return src.error(f"{what}: pickled object arrays are not accepted; store numbers (and class names as a unicode array).")
    return src.error(f"could not read {what} (truncated or corrupt?): {_first_line(exc)}")


def _npz_array(src: _Source, npz, key: str) -> np.ndarray:
    try:
        arr = npz[key]
    except Exception as exc:
        raise _numpy_error(src, exc, f"array {key!r}") from exc
    if not isinstance(arr, np.ndarray):
        raise src.error(f"member {key!r} of the archive is not a NumPy array.")
    if arr.dtype.hasobject:
        raise src.error(f"array {key!r}: pickled object arrays are not accepted.")
    return arr


def _load_npz(src: _Source, opts: _Options, notes: list[str]) -> Predictions:
    try:
        npz = np.load(src.reader_arg(), allow_pickle=False)
    except Exception as exc:
        raise _numpy_error(src, exc, "the NPZ archive") from exc
    if not hasattr(npz, "files"):
        raise src.error("this is not an NPZ archive.")
    with npz:
        present = {k.lower(): k for k in npz.files}
        prefer = {"logits": ("logits",), "probabilities": ("probs", "probabilities", "scores")}.get(opts.input_type, ())
        score_keys = [present[k] for k in (*prefer, *NPZ_SCORE_KEYS) if k in present]
        wanted = (opts.label_column.lower(),) if opts.label_column is not None else NPZ_LABEL_KEYS
        label_keys = [present[k] for k in wanted if k in present]
        if not score_keys or (not label_keys and opts.require_labels):
            missing = []
            if not score_keys:
                missing.append(f"scores ({' or '.join(NPZ_SCORE_KEYS)})")
            if not label_keys:
                missing.append(f"labels ({' or '.join(repr(k) if opts.label_column else k for k in wanted)})")
            raise src.error(
                f"missing array(s): {'; '.join(missing)}. The archive holds: {_names(sorted(npz.files)) or 'nothing'}."
            )
        score_key, label_key = score_keys[0], (label_keys[0] if label_keys else None)
        labels = _npz_array(src, npz, label_key) if label_key is not None else None
        if opts.max_rows is not None and labels is not None and labels.ndim >= 1 and labels.shape[0] > opts.max_rows:
            raise _too_many_rows(src, labels.shape[0], opts.max_rows)
        scores = _npz_array(src, npz, score_key)
        if opts.max_rows is not None and scores.ndim >= 1 and scores.shape[0] > opts.max_rows:
            raise _too_many_rows(src, scores.shape[0], opts.max_rows)
        class_names = None
        names_key = present.get("class_names")
        if names_key is not None:
            arr = _npz_array(src, npz, names_key)
            if arr.dtype.kind == "S":
                arr = np.char.decode(arr, "utf-8", errors="replace")
            if arr.ndim != 1:
                raise src.error(f"array {names_key!r} must be 1-D (one name per class), but has shape {arr.shape}.")
            class_names = [str(v) for v in arr.tolist()]
        used = {score_key, label_key, names_key}
        ignored = sorted(k for k in npz.files if k not in used)
    notes.append(f"Read arrays {score_key!r} (scores) and {label_key!r} (labels)." if label_key is not None
                 else f"Read array {score_key!r} (scores); the archive has no labels.")
    if ignored:
        notes.append(f"Ignored other arrays in the archive: {_names(ignored)}.")
    input_type = opts.input_type
    if (input_type == "auto" and score_key.lower() == "logits" and np.issubdtype(scores.dtype, np.number)
            and scores.ndim == 2 and not looks_like_probabilities(scores, opts.tolerance)):
        # The archive says "logits": trust it when the values do not look like probabilities
        # (inspection alone would call e.g. small logits in [0, 1] broken probabilities).
        input_type = "logits"
        notes.append(f"Read array {score_key!r} as logits, as its name says.")
    return _validated(
        lambda: Predictions.from_arrays(
            scores, labels, input_type=input_type, class_names=class_names, renormalize=opts.renormalize,
            tolerance=opts.tolerance, source=src.name, notes=notes,
        ),
        _array_row, None,
    )


def _load_npy(src: _Source, opts: _Options, notes: list[str]) -> Predictions:
    try:  # a path is memory-mapped, so max_rows is checked before anything is read
        arr = (np.load(src.path, mmap_mode="r", allow_pickle=False) if src.path is not None
               else np.load(src.reader_arg(), allow_pickle=False))
    except Exception as exc:
        raise _numpy_error(src, exc, "the NPY array") from exc
    if arr.dtype.hasobject:
        raise src.error("pickled object arrays are not accepted.")
    if arr.dtype.names is not None or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise src.error(f"the array must be numeric, but its dtype is {arr.dtype}.")
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise src.error(
            f"expected a 2-D array of shape (n, K + 1): K score columns, then the integer label in the last "
            f"column; but got shape {arr.shape}."
        )
    if opts.max_rows is not None and arr.shape[0] > opts.max_rows:
        raise _too_many_rows(src, arr.shape[0], opts.max_rows)
    scores = np.asarray(arr[:, :-1])
    labels = np.asarray(arr[:, -1])
    notes.append(f"NPY array of shape {arr.shape}: the last column is the label, the other {arr.shape[1] - 1} are scores.")
    return _validated(
        lambda: Predictions.from_arrays(
            scores, labels, input_type=opts.input_type, renormalize=opts.renormalize,
            tolerance=opts.tolerance, source=src.name, notes=notes,
        ),
        _array_row, None,
    )


# ------------------------------------------------------------------------------------ writing
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


def save_predictions(
    preds_or_probs: Predictions | np.ndarray,
    labels: np.ndarray | Sequence[int] | None = None,
    path_or_buffer: str | os.PathLike[str] | IO[bytes] | None = None,
    format: Literal["csv", "parquet"] | None = None,
    class_names: Sequence[str] | None = None,
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
        Integer labels; defaults to ``preds_or_probs.labels`` for a Predictions value.
    path_or_buffer : str, path-like or binary file object, optional
        Where to write; None returns the bytes (e.g. for a download button).
    format : {"csv", "parquet"}, optional
        Default: from the path's suffix (``.parquet`` / ``.pq`` -> Parquet), else CSV.
    class_names : sequence of str, optional
        Column headers; default: the Predictions' class names, else "0".."K-1".

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

    if preds.probs is None:
        names = list(preds.class_names)
        as_name = (lambda a: np.asarray(names, dtype=object)[a]) if names else (lambda a: a)
        df = pd.DataFrame({"confidence": preds.confidence, "predicted": as_name(preds.predicted),
                           "label": as_name(preds.labels)})
    else:
        names = [str(n) for n in preds.class_names]
        _check_writable_names(names)
        df = pd.DataFrame(preds.probs, columns=names)
        if preds.has_labels:
            df["label"] = preds.labels.astype(np.int64)

    buf = io.BytesIO()
    if format == "csv":
        buf.write(df.to_csv(index=False, lineterminator="\n").encode("utf-8"))
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
