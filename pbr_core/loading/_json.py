"""JSON and JSON Lines: evaluation records as LLM harnesses and web services write them.

Accepted shapes (each record becomes a row; nested objects are flattened into ``parent.child``
columns; a list of numbers stays one cell, which :mod:`pbr_core.loading._vectors` can read as the
scores of the classes):

* JSON Lines (``.jsonl``, ``.ndjson``): one object per line; blank lines are skipped.
* JSON (``.json``): an array of objects; an object of equal-length arrays (one per column; a
  single value fills its column); pandas' ``to_json`` in any orient (``columns``, the default,
  ``index``, ``split``, ``records``, ``table``); or an object with exactly one array of objects (``{"samples": [...]}``, the rest is the file's header).
  A ``.json`` file that holds one object per line is read as JSON Lines.

Both may be gzip-compressed (``.json.gz``, ``.jsonl.gz``).
"""

from __future__ import annotations

import gzip
import json

import pandas as pd

from pbr_core.loading._source import FileFormat, _Options, _Source, _too_many_rows


def _text(src: _Source, head: bytes) -> str:
    with src.open() as f:
        data = f.read()
    if head.startswith(b"\x1f\x8b"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise src.error(f"the gzip-compressed file is damaged or truncated: {exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise src.error(f"a JSON file must be UTF-8 text, but byte {exc.start} is not UTF-8.") from None


def _where(exc: json.JSONDecodeError, line_offset: int = 0) -> str:
    return f"line {exc.lineno + line_offset}, column {exc.colno}: {exc.msg}"


def _lines(text: str, src: _Source) -> list:
    records = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise src.error(f"not valid JSON Lines: {_where(exc, i - 1)} (each line must hold one JSON object).") from None
    return records


def _records(value, src: _Source) -> list | pd.DataFrame:
    """The rows of a parsed .json document: a list of records, or the table itself where the
    document is laid out by column (pandas' orients other than ``records``)."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        if isinstance(value.get("columns"), list) and isinstance(value.get("data"), list):
            return pd.DataFrame(value["data"], columns=value["columns"])  # pandas' to_json(orient="split")
        if value and all(isinstance(v, dict) for v in value.values()):
            # pandas' to_json() default (orient="columns": {column: {row: value}}) or orient="index"
            # ({row: {column: value}}, its outer keys the row labels 0, 1, 2...)
            rows_outside = all(str(k).lstrip("-").isdigit() for k in value)
            return pd.DataFrame.from_dict(value, orient="index" if rows_outside else "columns").reset_index(drop=True)
        lists = {k: v for k, v in value.items() if isinstance(v, list)}
        tables = [k for k, v in lists.items() if v and all(isinstance(r, dict) for r in v)]
        if len(tables) == 1:
            return lists[tables[0]]  # {"samples": [{...}, ...], "config": ...}
        scalars = all(not isinstance(v, (list, dict)) for k, v in value.items() if k not in lists)
        if not tables and lists and scalars and len({len(v) for v in lists.values()}) == 1:
            return pd.DataFrame(value)  # {"column": [...], ..., "model": "x"}: a scalar field fills its column
        what = (f"several arrays of records ({', '.join(repr(t) for t in tables[:5])})" if tables
                else "no array of records")
        raise src.error(f"the JSON object holds {what}; expected an array of records ([{{...}}, ...]), one "
                        "record per line (JSON Lines), or an object of equal-length columns.")
    raise src.error(f"the JSON document is a single {type(value).__name__}, not a table of records.")


def read_json_frame(src: _Source, fmt: FileFormat, head: bytes, max_rows: int | None = None) -> pd.DataFrame:
    """The records of a JSON / JSON Lines file as a DataFrame (nested objects flattened)."""
    text = _text(src, head)
    if not text.strip():
        raise src.error("the file is empty.")
    if fmt == "jsonl":
        rows = _lines(text, src)
    else:
        try:
            rows = _records(json.loads(text), src)
        except json.JSONDecodeError as exc:
            if exc.msg != "Extra data":
                hint = ("" if text.lstrip()[:1] in ("{", "[") else
                        " A JSON file starts with { or [: is it another format (e.g. CSV) under a .json name?")
                raise src.error(f"not valid JSON: {_where(exc)}.{hint}") from None
            rows = _lines(text, src)  # one object per line under a .json name
    if len(rows) == 0:
        raise src.error("the file holds no records (no data rows).")
    if max_rows is not None and len(rows) > max_rows:
        raise _too_many_rows(src, len(rows), max_rows)
    if isinstance(rows, pd.DataFrame):
        return rows
    bad = next((i for i, r in enumerate(rows) if not isinstance(r, dict)), None)
    if bad is not None:
        raise src.error(f"record {bad + 1} is a {type(rows[bad]).__name__}, not an object with named fields "
                        "({\"label\": ..., ...}); every record must name its fields.")
    return pd.json_normalize(rows)


def _load_json(src: _Source, fmt: FileFormat, head: bytes, opts: _Options):
    from pbr_core.loading._tables import _from_table

    df = read_json_frame(src, fmt, head, opts.max_rows)
    return _from_table(df, src, opts, [])
