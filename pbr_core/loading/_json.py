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

from pbr_core.loading._limits import ReadLimits, format_bytes, gzip_declared_size, limit_error, table_memory
from pbr_core.loading._source import FileFormat, _Options, _Source, _too_many_rows


def _bytes(src: _Source, head: bytes, limits: ReadLimits) -> bytes:
    """The file's content, decompressed, never more than ``limits.max_bytes`` of it: a gzip file is
    decompressed up to one byte past the limit, and refused there."""
    compressed = head.startswith(b"\x1f\x8b")
    cap = limits.max_bytes
    if not compressed:
        if cap is not None and src.size() > cap:
            raise limit_error(src.name, kind="bytes", size=src.size(), limit=cap, what="the file")
        with src.open() as f:
            return f.read()
    declared = gzip_declared_size(src.tail(4))
    if cap is not None and declared is not None and declared > cap:
        raise limit_error(src.name, kind="bytes", size=declared, limit=cap,
                          what=f"the text, once decompressed (as the gzip file declares; {format_bytes(src.size())} "
                               "compressed),")
    try:
        with src.open() as raw, gzip.open(raw) as f:
            data = f.read() if cap is None else f.read(cap + 1)
    except (OSError, EOFError) as exc:
        raise src.error(f"the gzip-compressed file is damaged or truncated: {exc}") from None
    if cap is not None and len(data) > cap:
        raise limit_error(src.name, kind="bytes", size=len(data), limit=cap, at_least=True,
                          what="the text, once decompressed,")
    return data


def _utf8(data: bytes, src: _Source) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise src.error(f"a JSON file must be UTF-8 text, but byte {exc.start} is not UTF-8.") from None


def _where(exc: json.JSONDecodeError, line_offset: int = 0) -> str:
    return f"line {exc.lineno + line_offset}, column {exc.colno}: {exc.msg}"


#: JSON Lines are turned into a table this many records at a time: the Python objects of one
#: batch (a few hundred bytes a record) are freed before the next is parsed, so that the read
#: holds the table and one batch, not every record as a dict (a 200 MB file of short records
#: took 4.9 GB that way; benchmarks/RESULTS_bombs.md).
JSONL_BATCH_RECORDS = 100_000


def _line_spans(data: bytes):
    """(line number from 1, line) for every line of ``data`` that is not blank, without a list of them."""
    start, number, end_all = 0, 0, len(data)
    while start < end_all:
        end = data.find(b"\n", start)
        if end < 0:
            end = end_all
        number += 1
        line = data[start:end]
        start = end + 1
        if line.strip():
            yield number, line


def _lines_frame(data: bytes, src: _Source, max_rows: int | None = None) -> pd.DataFrame:
    """JSON Lines as a table (nested objects flattened), built batch by batch; each batch's lines are
    parsed by one ``json.loads`` of them joined as an array (C speed, ~10 times faster than a call a
    line), and line by line only when that fails, to name the line."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    frames: list[pd.DataFrame] = []
    batch: list[tuple[int, bytes]] = []
    total = 0

    def flush() -> None:
        nonlocal total
        try:
            records = json.loads(b"[" + b",".join(line for _, line in batch) + b"]")
        except (json.JSONDecodeError, UnicodeDecodeError):
            records = None
        if records is None or len(records) != len(batch):  # a line with two values: find it line by line
            records = [_one_line(number, line, src) for number, line in batch]
        for i, record in enumerate(records):
            if not isinstance(record, dict):
                raise src.error(f"record {total + i + 1} is a {type(record).__name__}, not an object with named "
                                "fields ({\"label\": ..., ...}); every record must name its fields.")
        total += len(records)
        frames.append(pd.json_normalize(records))
        batch.clear()

    for number, line in _line_spans(data):
        batch.append((number, line))
        if max_rows is not None and total + len(batch) > max_rows:
            raise _too_many_rows(src, sum(1 for _ in _line_spans(data)), max_rows)
        if len(batch) >= JSONL_BATCH_RECORDS:
            flush()
    if batch:
        flush()
    if not frames:
        raise src.error("the file holds no records (no data rows).")
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def _one_line(number: int, line: bytes, src: _Source):
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise src.error(f"not valid JSON Lines: {_where(exc, number - 1)} (each line must hold one JSON object).") from None
    except UnicodeDecodeError as exc:
        raise src.error(f"a JSON file must be UTF-8 text, but line {number} is not UTF-8 ({exc.reason}).") from None


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


#: A JSON document (not JSON Lines) is parsed whole into Python objects: estimated at this many
#: bytes per byte of text plus :data:`JSON_OBJECT_BYTES` per object (per ``{``). Measured: 89 MB of
#: records of 13 fields took 725 MB (estimate 873 MB); 7.2 MB of records of 2 fields, 154 MB (178 MB).
JSON_DOCUMENT_BYTES_FACTOR = 8
JSON_OBJECT_BYTES = 400


def read_json_frame(src: _Source, fmt: FileFormat, head: bytes, max_rows: int | None = None,
                    limits: ReadLimits | None = None) -> pd.DataFrame:
    """The records of a JSON / JSON Lines file as a DataFrame (nested objects flattened), within ``limits``."""
    limits = limits or ReadLimits.none()
    data = _bytes(src, head, limits)
    if not data.strip():
        raise src.error("the file is empty.")
    lines = fmt == "jsonl" or _is_lines(data)
    if not lines:
        estimate = JSON_DOCUMENT_BYTES_FACTOR * len(data) + JSON_OBJECT_BYTES * data.count(b"{")
        _check_memory(src, limits, len(data), estimate, "parsing the document")
        text = _utf8(data, src)
        try:
            rows = _records(json.loads(text), src)
        except json.JSONDecodeError as exc:
            if exc.msg != "Extra data":
                hint = ("" if text.lstrip()[:1] in ("{", "[") else
                        " A JSON file starts with { or [: is it another format (e.g. CSV) under a .json name?")
                raise src.error(f"not valid JSON: {_where(exc)}.{hint}") from None
            lines = True  # one object per line under a .json name
        del text
    if lines:
        _check_lines_memory(src, limits, data)
        df = _lines_frame(data, src, max_rows)
        src.seen["columns"] = [str(c) for c in df.columns]
        return df
    if len(rows) == 0:
        raise src.error("the file holds no records (no data rows).")
    if max_rows is not None and len(rows) > max_rows:
        raise _too_many_rows(src, len(rows), max_rows)
    if isinstance(rows, pd.DataFrame):
        src.seen["columns"] = [str(c) for c in rows.columns]
        return rows
    bad = next((i for i, r in enumerate(rows) if not isinstance(r, dict)), None)
    if bad is not None:
        raise src.error(f"record {bad + 1} is a {type(rows[bad]).__name__}, not an object with named fields "
                        "({\"label\": ..., ...}); every record must name its fields.")
    df = pd.json_normalize(rows)
    src.seen["columns"] = [str(c) for c in df.columns]
    return df


def _is_lines(data: bytes) -> bool:
    """A .json file that holds one object per line: its first line is a whole JSON value and another
    line follows (what parsing it as one document would call "Extra data")."""
    spans = _line_spans(data)
    first, second = next(spans, None), next(spans, None)
    if first is None or second is None:
        return False
    try:
        json.loads(first[1])
    except (ValueError, UnicodeDecodeError):
        return False
    return True


def _check_lines_memory(src: _Source, limits: ReadLimits, data: bytes) -> None:
    """JSON Lines: the table of one row per record, with the fields of the first record as columns,
    and the text (an upper bound of the strings), within ``limits.max_memory``."""
    if limits.max_memory is None:
        return
    records = data.count(b"\n") + 1
    first = next(_line_spans(data), (0, b"{}"))[1]
    try:
        fields = max(len(pd.json_normalize(json.loads(first)).columns), 1)
    except (ValueError, TypeError, UnicodeDecodeError, NotImplementedError):
        fields = 1  # the parse names the problem
    # A batch of dicts (~300 bytes a record) on top, and the concatenation of the batches.
    estimate = table_memory(records, 3 * fields, len(data)) + min(records, JSONL_BATCH_RECORDS) * 300
    _check_memory(src, limits, len(data), estimate, f"its {records:,} lines")


def _check_memory(src: _Source, limits: ReadLimits, n_bytes: int, estimate: int, what: str) -> None:
    if limits.max_memory is not None and estimate > limits.max_memory:
        raise limit_error(src.name, kind="memory", size=estimate, limit=limits.max_memory,
                          what=f"its {format_bytes(n_bytes)} of text; {what}")


def _load_json(src: _Source, fmt: FileFormat, head: bytes, opts: _Options):
    from pbr_core.loading._tables import _from_table

    df = read_json_frame(src, fmt, head, opts.max_rows, opts.limits)
    return _from_table(df, src, opts, [])
