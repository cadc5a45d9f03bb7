"""Read limits: how large a file may be once decompressed, how much memory reading it may take, and
how long one text cell may be.

Why: a small compressed file can expand a thousand times (a 2 MB ``.csv.gz`` of 1 GiB of short rows,
an NPZ or a workbook whose ZIP members declare gigabytes), and reading it whole takes a server down
for every session. So every reader checks, before it parses anything, what the file declares or what
a cheap counting pass finds (decompressed bytes, rows, the members of a ZIP, a Parquet file's rows,
the longest line), and the counting pass itself stops as soon as a limit is passed. A file over a
limit raises :class:`ReadLimitError`, whose message says how large the file really is and what to
do (read it streamed, or raise the limit).

The limits (:class:`ReadLimits`; defaults below, each overridable by an environment variable or by
``limits=`` of :func:`pbr_core.load_predictions`):

``max_bytes`` (``PBR_CALIB_MAX_READ_BYTES``, default 1 GiB)
    The content read into memory: a CSV / JSON file's text after decompression, the sum of the
    members of an NPZ archive or an Excel workbook as they declare them, a Parquet file as Arrow holds it.
``max_memory`` (``PBR_CALIB_MAX_READ_MEMORY``, default 2 GiB)
    The memory the read is estimated to take (:func:`table_memory`): the parsed table and the
    predictions built from it. A 300 MB CSV of 1.85 M rows x 14 columns is estimated at 0.74 GiB
    (measured: 0.51 GiB above the file's bytes, benchmarks/RESULTS_memory.md), a 256 MiB ``.csv.gz`` of
    44.7 M short rows at 3.25 GiB (measured: 3.16 GiB, benchmarks/RESULTS_bombs.md). A CSV's long text
    cells count at their parsed cost (:func:`text_table_memory`), a score vector in one cell at its
    rows x classes (``_vectors.check_vector_size``, at most :data:`MAX_VECTOR_CLASSES` classes). Every
    size in these messages is in powers of 1024 (GB meaning GiB).
``max_cell_bytes`` (``PBR_CALIB_MAX_CELL_BYTES``, default 1 MiB)
    The longest text cell. Long enough for a vector of 20,000 class scores written in one cell,
    far beyond any id, group value or class name; a page that shows a 300 MB cell fails.

Values are bytes, or a number with a unit (``512MB``, ``4GiB``: powers of 1024 either way); ``0``
or ``none`` switches a limit off.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from pbr_core.predictions import PredictionsError

__all__ = ["ReadLimits", "ReadLimitError", "default_limits", "table_memory", "format_bytes"]

#: Default of :attr:`ReadLimits.max_bytes`.
MAX_READ_BYTES = 1 << 30
#: Default of :attr:`ReadLimits.max_memory`.
MAX_READ_MEMORY = 2 << 30
#: Default of :attr:`ReadLimits.max_cell_bytes`.
MAX_CELL_BYTES = 1 << 20

#: The most classes a vector of scores in one cell may hold: the cell limit's docstring promises a vector of
#: 20,000 class scores; a 1 MiB cell holds up to ~500,000 one-digit scores, which became 500,000 columns
#: (audit 12c: a 79 KB .csv.gz of 200 rows x 200,000 scores ran 227 s, then ran out of memory).
MAX_VECTOR_CLASSES = 20_000

ENV_MAX_BYTES = "PBR_CALIB_MAX_READ_BYTES"
ENV_MAX_MEMORY = "PBR_CALIB_MAX_READ_MEMORY"
ENV_MAX_CELL = "PBR_CALIB_MAX_CELL_BYTES"

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}


def parse_size(text: str) -> int | None:
    """Bytes from ``"1073741824"``, ``"512MB"``, ``"1.5 GiB"`` (powers of 1024); None for ``0`` / ``none``
    / ``off`` (no limit).

    Raises
    ------
    ValueError
        For text that is neither.
    """
    t = str(text).strip().lower()
    if t in ("0", "none", "off", "no", "unlimited"):
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-z]*)", t)
    if m is None or m.group(2) not in _UNITS:
        raise ValueError(f"expected a size such as 1073741824, 512MB or 2GiB, but got {text!r}")
    value = int(float(m.group(1)) * _UNITS[m.group(2)])
    return value if value > 0 else None


def format_bytes(n: float) -> str:
    """``1.02 GB``, ``286 MB``, ``4.3 KB``: three significant digits (so that a size just over a limit
    does not read as the limit), in powers of 1024, as the limits are written."""
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:,.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"
    return f"{int(n)} bytes"


@dataclass(frozen=True)
class ReadLimits:
    """Bounds on one read (see the module docstring); None switches a bound off."""

    max_bytes: int | None = MAX_READ_BYTES
    max_memory: int | None = MAX_READ_MEMORY
    max_cell_bytes: int | None = MAX_CELL_BYTES

    @classmethod
    def none(cls) -> "ReadLimits":
        """No bound at all (for code that has checked the file already)."""
        return cls(None, None, None)


def default_limits() -> ReadLimits:
    """The limits in force: the defaults, or the environment variables that override them (read at
    every call, so that a server's administrator and the tests can set them)."""
    return ReadLimits(max_bytes=env_size(ENV_MAX_BYTES, MAX_READ_BYTES),
                      max_memory=env_size(ENV_MAX_MEMORY, MAX_READ_MEMORY),
                      max_cell_bytes=env_size(ENV_MAX_CELL, MAX_CELL_BYTES))


def env_size(name: str, default: int | None) -> int | None:
    """``$name`` as a size (:func:`parse_size`: ``512MB``, ``2GiB``; ``0`` or ``none``: None, no limit),
    ``default`` when unset or empty.

    Raises
    ------
    PredictionsError
        Text that is no size, naming the variable.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return parse_size(raw)
    except ValueError as exc:
        raise PredictionsError(f"environment variable {name}: {exc}") from None


def table_memory(rows: int, columns: int, text_bytes: int = 0) -> int:
    """Estimated peak memory of reading a table of ``rows`` x ``columns`` (plus ``text_bytes`` of text
    kept as it is) into :class:`~pbr_core.predictions.Predictions`.

    Per row: 8 bytes a cell in the parsed table, as much again for the score block built from it (at
    most every column), and 40 bytes for the confidence, predicted class, label, the binary
    expansion of p(y=1) and the parser's row bookkeeping. Checked against real reads in
    benchmarks/RESULTS_bombs.md (a CSV of two columns and 44.7 M rows: 3.25 GiB estimated, 3.16 GiB
    measured).
    """
    return int(rows) * (16 * int(columns) + 40) + int(text_bytes)


#: Bytes of text a number's cell takes at most in a CSV: 17 significant digits, a sign, a point, an
#: exponent and the separator ("-1.2345678901234567e-300,"). Text beyond that many bytes a cell is text
#: kept as text (a note, an id, a long label): :func:`text_table_memory`.
NUMBER_CELL_BYTES = 26
#: Peak memory of a CSV's text cells as parsed, per byte of that text: Arrow's parsed column, its
#: conversion to Python strings and the loader's checks of them at once. Measured (load_predictions of
#: a .csv.gz of rows with a 900 KB text cell each, peak VmHWM above the imports): 100 rows (86 MB of
#: text) 7.6 times the text, 300 rows 7.8 times (6.2 times kept after the load); audit 12c: 1,000 rows
#: 6.8 times.
TEXT_PEAK_FACTOR = 8


def text_table_memory(rows: int, columns: int, n_bytes: int) -> int:
    """:func:`table_memory` of a CSV of ``n_bytes`` of text, with the text that its numbers cannot
    explain (more than :data:`NUMBER_CELL_BYTES` a cell: long text cells) counted at its parsed cost
    (:data:`TEXT_PEAK_FACTOR`) instead of once. A table of numbers, or of short ids and labels, is
    estimated as before; a 886 KB .csv.gz of 1,000 rows of 900 KB notes, estimated at 0.9 GB, peaked at
    6.1 GB (audit 12c)."""
    excess = max(0, int(n_bytes) - NUMBER_CELL_BYTES * int(rows) * int(columns))
    return table_memory(rows, columns, n_bytes) + (TEXT_PEAK_FACTOR - 1) * excess


#: Bytes a text cell of a Parquet file costs beyond its characters once read: Arrow's offset, and the
#: loader's checks of the column. A Parquet file of 1,000,000 rows with two short id columns (13 MB of
#: text) peaked at 242 MB above the imports (2026-11-29), estimated at 111 MB with its text counted once,
#: 249 MB now.
TEXT_CELL_BYTES = 72
#: Peak memory per byte of a Parquet file's text once decoded, for text repeated from row to row (a
#: Parquet dictionary): the decoded column and the loader's checks of it. 100,000 rows of one
#: 1,000-character note (95 MB decoded) peaked at 226 MB (2.4 times) above the imports (2026-11-29).
PARQUET_TEXT_FACTOR = 2.5


def parquet_text_memory(rows: int, text_columns: int, text_bytes: int, distinct_bytes: int | None = None) -> int:
    """The memory the text of a Parquet file takes once read, for :func:`table_memory`'s ``text_bytes``:
    ``text_bytes`` decoded in ``text_columns`` columns, of which ``distinct_bytes`` (default: all) are
    distinct values. Every decoded byte at :data:`PARQUET_TEXT_FACTOR`, every cell at
    :data:`TEXT_CELL_BYTES`, and the distinct long text at the parsed cost of a CSV's
    (:data:`TEXT_PEAK_FACTOR`, :func:`text_table_memory`). Measured above the imports (2026-11-29): 100,000
    distinct 1,000-character notes (95 MB) peaked at 768 MB (estimated at 753 MB; 95 MB with the text
    counted once, as before); 100 rows of 900 KB notes at 547 MB (688 MB; 86 MB before)."""
    cells = int(rows) * int(text_columns)
    distinct = int(text_bytes) if distinct_bytes is None else int(distinct_bytes)
    excess = max(0, distinct - NUMBER_CELL_BYTES * cells)
    return int(PARQUET_TEXT_FACTOR * int(text_bytes) + (TEXT_PEAK_FACTOR - PARQUET_TEXT_FACTOR) * excess
               + TEXT_CELL_BYTES * cells)


class ReadLimitError(PredictionsError):
    """A file over one of the read limits; ``PredictionsError`` (a ``ValueError``) like every input problem.

    Attributes
    ----------
    kind : {"bytes", "memory", "cell"}
        Which limit: the decompressed content, the estimated memory, or one text cell.
    size : int
        What the file holds (bytes, or estimated bytes of memory), at least; a count that stopped at
        the limit is a lower bound (``at_least``).
    limit : int
        The limit passed.
    rows : int or None
        Data rows, when known.
    streamable : bool
        The format can be read in a stream (CSV / TSV, also gzip-compressed, and Parquet): a front
        end may read it with :mod:`pbr_core.stream` instead (statistics of every row and a sample).
    finding : str
        What was found, in words, without the file name and the advice (a front end adds its own).
    """

    def __init__(self, message: str, *, kind: str, size: int, limit: int, rows: int | None = None,
                 streamable: bool = False, at_least: bool = False, finding: str = "") -> None:
        super().__init__(message)
        self.kind, self.size, self.limit, self.rows = kind, int(size), int(limit), rows
        self.streamable, self.at_least, self.finding = bool(streamable), bool(at_least), finding


#: What the message advises, by whether the file could be read streamed.
_STREAM_ADVICE = ("read it streamed instead (pbr_core.stream.open_dataset(path), or pbr-calib evaluate FILE "
                  "--stream: the statistics of every row in bounded memory)")
_OTHER_ADVICE = ("convert it to Parquet or CSV, which can be read streamed (pbr_core.stream.open_dataset, "
                 "pbr-calib evaluate FILE --stream), or use a sample of its rows")
_RAISE_ADVICE = "or raise the limit ({env}, or limits= of load_predictions) if this machine has the memory"


def limit_error(name: str, *, kind: str, size: int, limit: int, what: str, rows: int | None = None,
                streamable: bool = False, at_least: bool = False) -> ReadLimitError:
    """The :class:`ReadLimitError` for file ``name``: ``what`` says what was measured, in words
    (e.g. ``"the text, once decompressed,"``)."""
    env = {"bytes": ENV_MAX_BYTES, "memory": ENV_MAX_MEMORY, "cell": ENV_MAX_CELL}[kind]
    size_text = ("more than " if at_least else "") + format_bytes(size)
    row_text = f" ({rows:,} data rows)" if rows is not None else ""
    advice = _STREAM_ADVICE if streamable else _OTHER_ADVICE
    if kind == "cell":
        finding = f"{what} holds {size_text} of text, more than the limit of {format_bytes(limit)} for one cell"
        advice_text = f"remove or shorten that column, {_RAISE_ADVICE.format(env=env)}"
    else:
        limit_text = "read into memory" if kind == "bytes" else "of memory for one read"
        finding = (f"{what} {'is' if kind == 'bytes' else 'would take about'} {size_text}{row_text}, more than the "
                   f"limit of {format_bytes(limit)} {limit_text}")
        advice_text = f"{advice}, {_RAISE_ADVICE.format(env=env)}"
    return ReadLimitError(f"{name}: {finding}; {advice_text}.", kind=kind, size=size, limit=limit, rows=rows,
                          streamable=streamable, at_least=at_least, finding=finding)


# ------------------------------------------------------------------------------ counting passes
@dataclass(frozen=True)
class TextScan:
    """What one counting pass over a text file found (the text after decompression)."""

    n_bytes: int
    data_rows: int       # lines after the header, trailing blank lines excluded
    longest_line: int    # bytes of the longest line, its newline excluded
    longest_at: int      # its line number in the file, from 1


_SCAN_CHUNK = 4 << 20


def scan_text(stream, name: str, max_bytes: int | None, *, streamable: bool, compressed: bool) -> TextScan:
    """Count the bytes, lines and the longest line of ``stream`` (binary, read to its end in 4 MiB
    chunks at C speed: bytes.count for the lines, numpy for the line lengths), stopping with a
    :class:`ReadLimitError` as soon as more than ``max_bytes`` were read."""
    import numpy as np

    total = newlines = longest = longest_at = 0
    run = 0  # bytes of the line that the previous chunks ended in
    last = b""
    while chunk := stream.read(_SCAN_CHUNK):
        total += len(chunk)
        if max_bytes is not None and total > max_bytes:
            what = "the text, once decompressed," if compressed else "the file"
            raise limit_error(name, kind="bytes", size=total, limit=max_bytes, what=what, streamable=streamable,
                              at_least=True)
        at = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10)
        if at.size:
            lengths = np.diff(at, prepend=-1) - 1
            lengths[0] += run
            i = int(lengths.argmax())
            if lengths[i] > longest:
                longest, longest_at = int(lengths[i]), newlines + i + 1
            run = len(chunk) - int(at[-1]) - 1
        else:
            run += len(chunk)
        if run > longest:
            longest, longest_at = run, newlines + int(at.size) + 1
        newlines += int(at.size)
        last = chunk
    trailing_blank = last[len(last.rstrip()):].count(b"\n")
    lines = newlines - trailing_blank + (1 if last.strip() else 0)
    return TextScan(total, max(lines - 1, 0), longest, longest_at)


def gzip_declared_size(head_and_tail: bytes) -> int | None:
    """The size a gzip file says its content has (the last 4 bytes, ISIZE: modulo 2^32, and of the
    last member only, so a hint to refuse early, never a reason to accept)."""
    if len(head_and_tail) < 4:
        return None
    return int.from_bytes(head_and_tail[-4:], "little")


def longest_text_run(stream, stop: int = 60) -> int:
    """The longest run of bytes without a ``<`` in an XML stream: at least as long as its longest
    text (a text holds no raw ``<``). Read in 4 MiB chunks; numpy finds the markup."""
    import numpy as np

    longest = run = 0
    while chunk := stream.read(_SCAN_CHUNK):
        at = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == stop)
        if at.size:
            gaps = np.diff(at, prepend=-1) - 1
            gaps[0] += run
            longest = max(longest, int(gaps.max()))
            run = len(chunk) - int(at[-1]) - 1
        else:
            run += len(chunk)
        longest = max(longest, run)
    return longest
