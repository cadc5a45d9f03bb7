"""Excel workbooks (``.xlsx``): the predictions of a spreadsheet audit.

The first worksheet that holds data is read (the workbook's other sheets, e.g. a summary or a
chart, are named in the notes); its first row is the header, as in a CSV file. Cells formatted as
percentages hold fractions (0.87), so they are read as the probabilities they are. Formulas are
read as the values Excel last computed (a workbook saved by another program may hold none: such
cells are empty, which the loader reports by column).
"""

from __future__ import annotations

import pandas as pd

from pbr_core.loading._source import _Options, _Source, _too_many_rows


def read_excel_frame(src: _Source, max_rows: int | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The first non-empty worksheet as a DataFrame, and the notes on which sheet was read."""
    try:
        import openpyxl  # noqa: F401  (pandas' engine for .xlsx)
    except ImportError:
        raise src.error("reading Excel workbooks needs the openpyxl package (pip install openpyxl); or save the "
                        "sheet as CSV.") from None
    try:
        sheets = pd.read_excel(src.reader_arg(), sheet_name=None, engine="openpyxl")
    except Exception as exc:  # noqa: BLE001 - a damaged workbook is the caller's input
        raise src.error(f"could not read the Excel workbook (damaged, or not an .xlsx file?): "
                        f"{type(exc).__name__}: {exc}") from None
    filled = [(name, df) for name, df in sheets.items() if not df.dropna(how="all").empty]
    if not filled:
        raise src.error(f"the workbook's {len(sheets)} sheet(s) hold no data rows.")
    name, df = filled[0]
    notes = []
    skip = _title_rows(df)
    if skip is not None:  # a report: a title (and blank rows) above the header
        header = [str(v).strip() if pd.notna(v) else "" for v in df.iloc[skip]]
        df = df.iloc[skip + 1:].reset_index(drop=True)
        df.columns = header
        df = df.infer_objects()
        notes.append(f"The sheet starts with {skip + 1} row(s) above the header (a title?): the header is row "
                     f"{skip + 2} of the sheet.")
    if len(sheets) > 1:
        others = ", ".join(repr(n) for n in sheets if n != name)
        notes.append(f"Read the sheet {name!r} of the workbook (the first with data); the other sheet(s) {others} "
                     "were not read.")
    if max_rows is not None and len(df) > max_rows:
        raise _too_many_rows(src, len(df), max_rows)
    return df, notes


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
    from pbr_core.loading._tables import _from_table

    df, notes = read_excel_frame(src, opts.max_rows)
    return _from_table(df, src, opts, notes)
