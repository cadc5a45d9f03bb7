"""Where the bytes come from and what format they are in: the public column and array names
(LABEL_COLUMN_NAMES, CONFIDENCE_COLUMN_NAMES, PREDICTED_COLUMN_NAMES, NPZ_SCORE_KEYS, NPZ_LABEL_KEYS),
the accepted suffixes, the type aliases Source and FileFormat, the :class:`_Source` wrapper (a path or
bytes, and the name that prefixes every message), turning a path / bytes / file object into one,
deciding the format from the hint, the suffix or the first bytes, and the options and row limit
shared by every reader.
"""

from __future__ import annotations

import io
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal, Union

from pbr_core.loading._limits import ReadLimits
from pbr_core.predictions import InputType, PredictionsError

Source = Union[str, os.PathLike[str], bytes, bytearray, memoryview, IO[bytes]]
FileFormat = Literal["csv", "tsv", "parquet", "json", "jsonl", "xlsx", "npz", "npy"]

#: Header names (compared case-insensitively) that mark the true-label column of a table.
LABEL_COLUMN_NAMES = ("label", "labels", "y", "y_true", "target", "true_label", "class", "true_class", "true_labels",
                      "ground_truth", "groundtruth", "truth", "actual", "y_test", "gold", "gold_label", "outcome",
                      "gt", "gt_label", "actual_label", "target_label", "label_true", "true_y", "ytrue", "y_actual")
#: Header names of the confidence column of a top-label-only table.
CONFIDENCE_COLUMN_NAMES = ("confidence", "conf", "max_prob", "confidence_score", "model_confidence",
                           "verbalized_confidence", "stated_confidence", "p_correct", "prob_correct")
#: Header names of the predicted-label column of a top-label-only table.
PREDICTED_COLUMN_NAMES = ("predicted", "prediction", "pred", "predicted_label", "pred_label", "predicted_class",
                          "pred_class", "y_pred", "model_label", "output_label", "predicted_labels")
#: Header names of the column that says whether a top-label prediction was right (0/1, true/false),
#: for (confidence, correct) records such as LLM evaluations.
CORRECT_COLUMN_NAMES = ("correct", "is_correct", "correctness")
NPZ_SCORE_KEYS = ("logits", "probs", "probabilities", "scores")
#: More names of the scores array, taken only when the array holds floats of shape (n, K) or (n,)
#: (a ``preds`` array of class ids is not scores).
NPZ_FLOAT_SCORE_KEYS = ("outputs", "y_prob", "y_proba", "proba", "y_score", "y_pred", "preds", "predictions")
NPZ_LABEL_KEYS = ("labels", "y", "targets", "target", "y_true", "label", "gt", "ground_truth")

# suffix or format hint -> format; compression of CSV/TSV is read from the bytes themselves.
_FORMATS: dict[str, FileFormat] = {
    "csv": "csv", "csv.gz": "csv", "tsv": "tsv", "tsv.gz": "tsv",
    "parquet": "parquet", "pq": "parquet", "json": "json", "json.gz": "json", "jsonl": "jsonl", "jsonl.gz": "jsonl",
    "ndjson": "jsonl", "ndjson.gz": "jsonl", "xlsx": "xlsx", "xlsm": "xlsx", "npz": "npz", "npy": "npy",
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
    #: What a reader learnt on the way, for the caller of a read that failed: "columns" (the
    #: file's column or array names, once read), so that they need not be read a second time.
    seen: dict = field(default_factory=dict, compare=False, repr=False)

    def open(self) -> IO[bytes]:
        return open(self.path, "rb") if self.path is not None else io.BytesIO(self.data)

    def size(self) -> int:
        return self.path.stat().st_size if self.path is not None else len(self.data)

    def head(self, n: int = _SNIFF_BYTES) -> bytes:
        with self.open() as f:
            return f.read(n)

    def tail(self, n: int) -> bytes:
        """The last ``n`` bytes (fewer for a shorter file)."""
        if self.path is None:
            return self.data[-n:]
        with self.open() as f:
            f.seek(max(self.size() - n, 0))
            return f.read(n)

    def reader_arg(self) -> str | IO[bytes]:
        """What to hand to pandas / pyarrow: the path (fast, memory-mapped) or a fresh buffer."""
        return str(self.path) if self.path is not None else io.BytesIO(self.data)

    def arrow_stream(self):
        """An Arrow input stream over the bytes without copying them (uploads run to hundreds of MB)."""
        import pyarrow as pa

        return pa.OSFile(str(self.path)) if self.path is not None else pa.BufferReader(self.data)

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
        shown = shorten(name or path.name or str(path))
        try:
            mode = path.stat().st_mode
        except (FileNotFoundError, NotADirectoryError):
            raise PredictionsError(f"{shown}: file not found: {shorten(str(path))}") from None
        except OSError as exc:  # e.g. a name too long for the file system
            raise PredictionsError(f"{shown}: cannot open {shorten(str(path))!r}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(mode):
            # Only regular files are read: a FIFO waits for a writer forever, /dev/zero never ends.
            raise PredictionsError(f"{shown}: {special_file_kind(mode)}, not a file: {shorten(str(path))}")
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


def table_row(i: int) -> str:
    """How a message names data row ``i`` (0-based) of a table."""
    return f"row {i + 1} (data row, header excluded)"


def shorten(text: str, keep: int = 120) -> str:
    """A name or path for a message: a longer one (a 5,000-character argument) by its start and end."""
    return text if len(text) <= keep else f"{text[:keep // 2]}...{text[-keep // 2:]} ({len(text):,} characters)"


def special_file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words (from its ``st_mode``)."""
    for test, words in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                        (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "a special file"


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
            old_excel = (" An old Excel .xls workbook: save it as .xlsx or CSV (File > Save As)."
                         if suffix.lower() in (".xls", ".ods") else "")
            raise src.error(
                f"unsupported file type {suffix or '(no suffix)'!r}; accepted: {accepted} "
                f"(or pass format='csv' etc.).{old_excel}"
            )
    # Bytes with no hint: the first bytes usually say what they are.
    sniffed = {b"PAR1": "parquet", b"\x93NUMPY": "npy", b"PK\x03\x04": "npz", b"\x1f\x8b": "csv"}
    for prefix, fmt in sniffed.items():
        if head.startswith(prefix):
            return fmt  # type: ignore[return-value]
    if head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"["):  # no CSV header starts with a brace
        return "json"
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


# ------------------------------------------------------------------------------ options, limits
@dataclass(frozen=True)
class ColumnChoice:
    """Roles named by the user (None / empty: detect)."""

    label: str | None = None
    scores: tuple[str, ...] | None = None
    groups: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    #: A top-label layout already decided (the later batches of a streamed dataset): the confidence
    #: and predicted-class columns, used as they are instead of being found again.
    confidence: str | None = None
    predicted: str | None = None


@dataclass(frozen=True)
class _Options:
    columns: ColumnChoice
    input_type: InputType
    renormalize: bool
    tolerance: float
    max_rows: int | None
    require_labels: bool = True
    #: (class 0, class 1) of binary data whose labels are class names, when already known (a later
    #: batch of a streamed dataset, which may hold only one of the two names).
    binary_names: tuple[str, str] | None = None
    #: Binary labels with one name only may be read by that name's meaning (no/yes...); False for a
    #: stream's first rows, whose later rows may hold the other name (they settle the classes then).
    one_label_name: bool = True
    #: The scores (or the confidence) are percentages: divided by 100 (:mod:`pbr_core.loading._percent`).
    percent: bool = False
    #: The class a lone score column is the probability of, among a binary label's two names
    #: (``positive_class=``), when the file does not say it (``approval_score`` beside approved/denied).
    positive_class: str | None = None
    #: Bounds on the read (:mod:`pbr_core.loading._limits`); none for the batches of a streamed
    #: dataset, whose size the stream bounds.
    limits: ReadLimits = ReadLimits.none()

    @property
    def label_column(self) -> str | None:
        return self.columns.label


def _too_many_rows(src: _Source, n: int, max_rows: int) -> PredictionsError:
    return src.error(
        f"the file has {n:,} data rows, more than the limit of {max_rows:,} rows; use a smaller file "
        "(e.g. a random sample of the rows)."
    )
