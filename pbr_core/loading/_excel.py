"""Excel workbooks (``.xlsx``): the predictions of a spreadsheet audit.

The first worksheet that reads as predictions is read (sheets of notes or a summary before it are
passed over; all the workbook's other sheets are named in the notes); its first row is the header,
as in a CSV file, or the first row below a title. Cells formatted as
percentages hold fractions (0.87), so they are read as the probabilities they are. Formulas are
read as the values Excel last computed (a workbook saved by another program may hold none: such
cells are empty, which the loader reports by column).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pandas as pd

from pbr_core.loading._limits import ReadLimits, format_bytes, limit_error, longest_text_run
from pbr_core.loading._source import _Options, _Source, _too_many_rows


#: A workbook's sheets (their XML, as the ZIP declares it) take about this many times their size in
#: memory once read into tables (openpyxl's cells, then pandas' lists of Python objects): 22 MB of
#: sheet XML (40,000 rows x 13 columns) took 58 MB.
XLSX_SHEET_FACTOR = 4
#: The shared strings take more: each text is parsed, kept by openpyxl and copied into the table (one
#: 200 MB shared string took 1.9 GB; benchmarks/RESULTS_bombs.md).
XLSX_SHARED_STRINGS_FACTOR = 10


def check_workbook(src: _Source, limits: ReadLimits) -> None:
    """Refuse a workbook before it is opened when its parts, as the ZIP declares them (Python's
    zipfile never decompresses a member past its declared size), are over ``limits``: the sum of
    all parts against ``max_bytes``, any text in the sheets and shared strings longer than
    ``max_cell_bytes`` (one pass over the parts larger than that: the message then names the cell's
    problem, not only its memory), and their size against ``max_memory``."""
    import zipfile

    try:
        with src.open() as raw, zipfile.ZipFile(raw) as z:
            parts = z.infolist()
            declared = sum(p.file_size for p in parts)
            if limits.max_bytes is not None and declared > limits.max_bytes:
                raise limit_error(src.name, kind="bytes", size=declared, limit=limits.max_bytes,
                                  what=f"the workbook, once decompressed (as its {len(parts)} parts declare),")
            sheets = [p for p in parts if p.filename.startswith("xl/") and p.filename.endswith(".xml")
                      and ("worksheets/" in p.filename or "sharedStrings" in p.filename)]
            if limits.max_cell_bytes is not None:
                for part in sheets:
                    if part.file_size > limits.max_cell_bytes:
                        with z.open(part) as f:
                            longest = longest_text_run(f)
                        if longest > limits.max_cell_bytes:
                            raise limit_error(src.name, kind="cell", size=longest, limit=limits.max_cell_bytes,
                                              what=f"a cell of the workbook ({part.filename})")
            estimate = sum(p.file_size * (XLSX_SHARED_STRINGS_FACTOR if "sharedStrings" in p.filename
                                          else XLSX_SHEET_FACTOR) for p in sheets)
            if limits.max_memory is not None and estimate > limits.max_memory:
                raise limit_error(src.name, kind="memory", size=estimate, limit=limits.max_memory,
                                  what=f"its sheets hold {format_bytes(sum(p.file_size for p in sheets))} of XML; "
                                       "reading them")
    except zipfile.BadZipFile:
        return  # not a workbook: openpyxl names the problem


def _excel_sheets(src: _Source, limits: ReadLimits | None = None
                  ) -> tuple[list[str], list[tuple[str, pd.DataFrame, list[str]]]]:
    """The names of all the workbook's sheets, and every worksheet that holds data, in the
    workbook's order: (name, table, notes), the table's header found below a title where there is one."""
    try:
        import openpyxl  # noqa: F401  (pandas' engine for .xlsx)
    except ImportError:
        raise src.error("reading Excel workbooks needs the openpyxl package (pip install openpyxl); or save the "
                        "sheet as CSV.") from None
    check_workbook(src, limits or ReadLimits.none())
    try:
        sheets = pd.read_excel(src.reader_arg(), sheet_name=None, engine="openpyxl")
    except Exception as exc:  # noqa: BLE001 - a damaged workbook is the caller's input
        raise src.error(f"could not read the Excel workbook (damaged, or not an .xlsx file?): "
                        f"{type(exc).__name__}: {exc}") from None
    filled = [(name, df) for name, df in sheets.items() if not df.dropna(how="all").empty]
    if not filled:
        raise src.error(f"the workbook's {len(sheets)} sheet(s) hold no data rows.")
    out = []
    for name, df in filled:
        notes = []
        skip = _title_rows(df)
        if skip is not None:  # a report: a title (and blank rows) above the header
            header = [str(v).strip() if pd.notna(v) else "" for v in df.iloc[skip]]
            df = df.iloc[skip + 1:].reset_index(drop=True)
            df.columns = header
            df = df.infer_objects()
            notes.append(f"The sheet starts with {skip + 1} row(s) above the header (a title?): the header is row "
                         f"{skip + 2} of the sheet.")
        out.append((str(name), df, notes))
    return [str(n) for n in sheets], out


def _largest(sheets: Sequence[tuple[str, pd.DataFrame, list[str]]]) -> tuple[str, pd.DataFrame, list[str]]:
    """The sheet most likely to hold the predictions: the one with the most cells (the first of equal ones)."""
    return max(sheets, key=lambda sheet: sheet[1].size)


def _sheet_note(names: Sequence[str], name: str, why: str, passed_over: Sequence[str] = ()) -> str | None:
    """Which of the workbook's sheets ``names`` was read and why, which were tried before it, and
    that the others were not read; None for a one-sheet workbook."""
    if len(names) == 1:
        return None
    tried = f"; {', '.join(repr(n) for n in passed_over)} before it hold{'s' if len(passed_over) == 1 else ''} none" \
        if passed_over else ""
    rest = [n for n in names if n != name and n not in passed_over]
    unread = f"; the other sheet(s) {', '.join(repr(n) for n in rest)} were not read" if rest else ""
    return f"Read the sheet {name!r} of the workbook ({why}{tried}){unread}."


def read_excel_frame(src: _Source, max_rows: int | None = None,
                     limits: ReadLimits | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The worksheet most likely to hold the predictions (:func:`_largest`) as a DataFrame, and the
    notes on which sheet was read; within ``limits``."""
    names, sheets = _excel_sheets(src, limits)
    name, df, notes = _largest(sheets)
    if max_rows is not None and len(df) > max_rows:
        raise _too_many_rows(src, len(df), max_rows)
    note = _sheet_note(names, name, "the largest")
    return df, [*notes, *([note] if note else [])]


def _title_rows(df: pd.DataFrame) -> int | None:
    """Where the real header is when the sheet's first row is a title: pandas named most columns
    "Unnamed: k" and a later row (of the first 20) holds text in every column that has data. The
    row index in ``df`` (whose first row was taken as the header), or None."""
    unnamed = sum(str(c).startswith("Unnamed:") for c in df.columns)
    if unnamed < max(1, len(df.columns) // 2):
        return None
    used = df.notna().any(axis=0).to_numpy()
    for i in range(min(20, len(df))):
        row = df.iloc[i]
        cells = row[used]
        if cells.notna().all() and all(isinstance(v, str) for v in cells):
            return i
    return None


def _load_excel(src: _Source, opts: _Options):
    """The first worksheet, in the workbook's order, that reads as predictions (a sheet of notes or a
    summary before it is passed over, and named in the notes); when none does, the error of the
    sheet with the most cells, which names that sheet."""
    from pbr_core.loading._tables import _from_table
    from pbr_core.predictions import PredictionsError

    names, sheets = _excel_sheets(src, opts.limits)
    src.seen["columns"] = [str(c) for c in _largest(sheets)[1].columns]  # what read_columns lists
    errors: dict[str, PredictionsError] = {}
    for name, df, notes in sheets:
        if opts.max_rows is not None and len(df) > opts.max_rows:
            raise _too_many_rows(src, len(df), opts.max_rows)
        try:
            preds = _from_table(df, src, opts, list(notes))
        except PredictionsError as exc:
            if len(sheets) == 1:
                raise
            errors[name] = exc
            continue
        note = _sheet_note(names, name, "the first that holds predictions", list(errors))
        return replace(preds, notes=(note, *preds.notes)) if note else preds
    name = _largest(sheets)[0]
    message = str(errors[name]).removeprefix(f"{src.name}: ")
    raise src.error(f"no sheet of the workbook reads as predictions. The sheet {name!r} (the largest): {message}")
