"""How a CSV file was written (its *dialect*), so that a file written back from it reads as it did.

A European spreadsheet exports ``;``-separated rows with decimal commas, a UTF-8 byte-order mark and
Windows (CRLF) line ends; written back comma-separated with decimal points, the same spreadsheet
opens it as one column (audit 12a). :func:`csv_dialect` reads the dialect of a file,
:func:`percent_columns_as_written` which of its probability columns held percentages (``93,3%``,
or ``93,3`` read with the percentages option), and :class:`CsvDialect` carries both to
:func:`~pbr_core.loading.save_predictions` (through ``as_written``'s ``attrs``), which writes the
download in that dialect: the calibrated probabilities with the file's decimal mark, as
percentages in a column that held percentages (``84,55%`` for 0.8455), so that the file reads back
as the upload did. ``pbr-calib apply`` and the dashboard's download use this one rule.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from pbr_core.predictions import Predictions

__all__ = ["CsvDialect", "csv_dialect", "percent_columns_as_written", "percent_text"]

#: The key of ``DataFrame.attrs`` under which :func:`~pbr_core.loading.read_csv_text` keeps the dialect.
DIALECT_ATTR = "dialect"
_BOM = b"\xef\xbb\xbf"
_SEPARATOR_WORDS = {",": "comma-separated", ";": "semicolon-separated", "\t": "tab-separated"}


@dataclass(frozen=True)
class CsvDialect:
    """How a CSV file is written: separator, decimal mark, byte-order mark, line ends, encoding, and
    which probability columns hold percentages. The defaults are the project's standard CSV."""

    sep: str = ","
    decimal: str = "."
    bom: bool = False
    line_end: str = "\n"
    encoding: str = "utf-8"
    #: Probability columns written as percentages: column -> "%" (``84,55%``) or "" (``84,55``, no sign).
    percent: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, frame: "pd.DataFrame | None") -> "CsvDialect":
        """The dialect ``frame`` was read in (its ``attrs``), the standard one when it says none."""
        found = None if frame is None else frame.attrs.get(DIALECT_ATTR)
        return found if isinstance(found, cls) else cls()

    def encode(self, text: str) -> bytes:
        """``text`` in the file's encoding, with its byte-order mark. A Latin-1 file's own cells are
        Latin-1; should a header not be (none is: the added columns are ASCII), UTF-8 with a byte-order
        mark keeps every character, and spreadsheets read it."""
        try:
            data = text.encode(self.encoding)
        except UnicodeEncodeError:
            return _BOM + text.encode("utf-8")
        return (_BOM if self.bom and self.encoding == "utf-8" else b"") + data

    def words(self) -> str:
        """The dialect in words: ``semicolon-separated, decimal commas, UTF-8 with a byte-order mark,
        CRLF (Windows) line ends``."""
        parts = [_SEPARATOR_WORDS.get(self.sep, f"separated by {self.sep!r}"),
                 "decimal commas" if self.decimal == "," else "'.' decimal points",
                 ("UTF-8 with a byte-order mark" if self.bom else "UTF-8") if self.encoding == "utf-8" else "Latin-1",
                 "CRLF (Windows) line ends" if self.line_end == "\r\n" else "LF line ends"]
        return ", ".join(parts)

    def percent_words(self) -> str:
        """Which columns get percentages, in words ("" when none do)."""
        if not self.percent:
            return ""
        shown = ", ".join(repr(c) for c in list(self.percent)[:5]) + (", ..." if len(self.percent) > 5 else "")
        signed = "%" in self.percent.values()
        example = percent_text(np.array([0.8455]), self.decimal, signed)[0]
        return (f"{shown} held percentages: the calibrated probabilities are written there as percentages too "
                f"(0.8455 as {example}), as your file wrote them, so the file reads back the same"
                + ("" if signed else " with the percentages option"))


def csv_dialect(head: bytes, sep: str, decimal: str, encoding: str, compression: str | None) -> CsvDialect:
    """The dialect of a CSV file whose first bytes are ``head`` and whose header the loader read with
    ``sep``, ``decimal`` and ``encoding`` (``_csv_header``): adds its byte-order mark and the line end
    of its header line (a gzip file's, once decompressed)."""
    if compression == "gzip":  # only the head of the file is here: what of it decompresses
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 1 << 16)
        except zlib.error:
            head = b""
    first = head.split(b"\n", 1)
    crlf = len(first) == 2 and first[0].endswith(b"\r")
    return CsvDialect(sep=sep, decimal=decimal, bom=head.startswith(_BOM), line_end="\r\n" if crlf else "\n",
                      encoding="utf-8" if encoding == "utf-8" else "latin-1")


def percent_columns_as_written(text: "pd.DataFrame", preds: "Predictions", decimal: str) -> dict[str, str]:
    """Which score columns of ``preds`` (loaded as probabilities, under the file's headers) hold
    percentages as written in ``text`` (their cells as text, :func:`~pbr_core.loading.read_csv_text`):
    column -> "%" where every cell carries a percent sign, "" where none does.

    A column holds percentages when its numbers, as written, are 100 times the probabilities the
    loader read from them (before it renormalised any row: ``Predictions.as_written``), whatever
    made the loader read them so (the percentages option, a percent sign). Fractions (0.933 read
    as 0.933) are not; a column mixing signs and bare numbers is written as fractions.
    """
    if preds.probs is None or preds.input_type != "probabilities":
        return {}
    scores = preds.columns_with_role("score")
    k = preds.probs.shape[1]
    classes = list(range(k)) if len(scores) == k else [1] if len(scores) == 1 and k == 2 else []
    if not classes:
        return {}
    loaded = preds.as_written(preds.probs)
    found: dict[str, str] = {}
    for column, j in zip(scores, classes):
        if column in text.columns:
            style = _percent_style(text[column].to_numpy(dtype=object), loaded[:, j], decimal)
            if style is not None:
                found[column] = style
    return found


def _percent_style(cells: np.ndarray, loaded: np.ndarray, decimal: str, whole: bool = True) -> str | None:
    """"%" or "" when the ``cells`` are 100 times the ``loaded`` probabilities (with or without a
    percent sign on every cell), None otherwise. The first rows decide most columns (fractions are
    not 100 times themselves), so a file of many score columns is not parsed whole; a head of zeros
    (0 is 100 times 0) is left to the whole column (``whole``: at least one value not 0)."""
    head = min(len(cells), 20)
    if head == 0 or (head < len(cells) and _percent_style(cells[:head], loaded[:head], decimal, False) is None):
        return None
    import pandas as pd

    text = pd.Series(cells, dtype=object).astype(str).str.strip()
    signed = text.str.endswith("%").to_numpy(dtype=bool)
    if 0 < signed.sum() < len(text):
        return None
    bare = text.str[:-1].str.rstrip() if signed.all() else text
    # The file's decimal mark, or a point (a column the export left with points: the loader reads both)
    point = f"[{re.escape(decimal)}.]"
    if not bare.str.fullmatch(rf"[+-]?(?:\d+(?:{point}\d*)?|{point}\d+)(?:[eE][+-]?\d+)?").all():
        return None
    values = bare.str.replace(decimal, ".", regex=False).astype(np.float64).to_numpy()
    if (whole and not np.any(values != 0)) or not np.allclose(values, 100.0 * loaded, rtol=1e-6, atol=1e-9):
        return None
    return "%" if signed.all() else ""


def percent_text(values: np.ndarray, decimal: str, sign: bool) -> list[str]:
    """Probabilities as percentages written with ``decimal`` (``84,55%`` for 0.8455): 12 significant
    digits, never an exponent (a spreadsheet reads ``1e-10%`` as text), the noise of multiplying by
    100 (84.55000000000001) left out; a percentage read back and divided by 100 is the probability
    to within 1e-12 of itself."""
    tail = "%" if sign else ""
    out = []
    for v in np.asarray(values, dtype=np.float64) * 100.0:
        if not np.isfinite(v):
            out.append("")
            continue
        s = np.format_float_positional(v, precision=12, unique=True, fractional=False, trim="-")
        out.append((s.replace(".", decimal) if decimal != "." else s) + tail)
    return out
