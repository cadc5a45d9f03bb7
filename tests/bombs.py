"""Small files that expand into very large ones ("bombs"), built on the fly for the tests of the
loader's read limits (tests/test_read_limits.py) and for benchmarks/bench_bombs.py.

Every builder takes the size the file expands to (rows, or bytes of one cell) and writes a file that
is a tiny fraction of it: repeated rows and long runs of one letter compress about 1000:1. The tests
build them a few MB large, with the limits scaled down to match; the benchmark builds them at the
issue's sizes (hundreds of MB decompressed). Nothing here imports the code under test.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from pathlib import Path

import numpy as np

#: One data row of the CSV bombs: a binary p(y=1) and its label, 6 bytes a row.
CSV_ROW = b"0.5,1\n"
JSONL_ROW = b'{"p": 0.5, "label": 1}\n'
_CHUNK = 1 << 20


def _gzip_repeated(out, header: bytes, unit: bytes, total: int, tail: bytes = b"") -> int:
    """Write ``header``, then ``unit`` repeated to ``total`` bytes, then ``tail``, as one gzip stream
    (one member, so that the size field in its trailer is the only one); returns the bytes written
    before compression."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    out.write(comp.compress(header))
    reps = max(1, _CHUNK // len(unit))
    block = unit * reps
    written = 0
    while written + len(block) <= total:
        out.write(comp.compress(block))
        written += len(block)
    rest = (total - written) // len(unit)
    out.write(comp.compress(unit * rest))
    written += rest * len(unit)
    out.write(comp.compress(tail))
    out.write(comp.flush())
    return len(header) + written + len(tail)


def csv_gz_rows(path: Path, rows: int) -> Path:
    """A ``.csv.gz`` of ``rows`` identical rows (``p,label``): 6 bytes a row decompressed."""
    with open(path, "wb") as f:
        _gzip_repeated(f, b"p,label\n", CSV_ROW, rows * len(CSV_ROW))
    return path


def csv_gz_wide_rows(path: Path, rows: int, classes: int = 10) -> Path:
    """A ``.csv.gz`` of ``rows`` identical rows of ``classes`` probabilities 1/classes and the label 0."""
    header = (",".join(f"p_{k}" for k in range(classes)) + ",label\n").encode()
    row = (",".join([f"{1 / classes:g}"] * classes) + ",0\n").encode()
    with open(path, "wb") as f:
        _gzip_repeated(f, header, row, rows * len(row))
    return path


def jsonl_gz_rows(path: Path, rows: int) -> Path:
    """A ``.jsonl.gz`` of ``rows`` identical records ``{"p": 0.5, "label": 1}``."""
    with open(path, "wb") as f:
        _gzip_repeated(f, b"", JSONL_ROW, rows * len(JSONL_ROW))
    return path


def jsonl_gz_no_label(path: Path, rows: int) -> Path:
    """A ``.jsonl.gz`` of ``rows`` identical records without a label (``{"p": 0.5, "x": 1}``): a file
    that fails to load, after it has been read."""
    with open(path, "wb") as f:
        _gzip_repeated(f, b"", b'{"p": 0.5, "x": 1}\n', rows * 19)
    return path


def csv_gz_cell(path: Path, cell_bytes: int) -> Path:
    """A ``.csv.gz`` of three rows whose first ``note`` cell holds ``cell_bytes`` letters."""
    with open(path, "wb") as f:
        comp = zlib.compressobj(9, zlib.DEFLATED, 31)
        f.write(comp.compress(b"p,label,note\n0.5,1,"))
        block = b"a" * _CHUNK
        left = cell_bytes
        while left > 0:
            f.write(comp.compress(block[:min(left, _CHUNK)]))
            left -= _CHUNK
        f.write(comp.compress(b"\n0.25,0,x\n0.75,1,y\n"))
        f.write(comp.flush())
    return path


def npz_rows(path: Path, rows: int, classes: int = 10) -> Path:
    """An NPZ (compressed) with ``probs`` of shape (rows, classes), all 1/classes, and ``labels``
    all 0: members whose declared sizes are ``rows * classes * 8`` and ``rows * 8`` bytes."""
    header_probs = _npy_header(np.float64, (rows, classes))
    header_labels = _npy_header(np.int64, (rows,))
    value = np.full(_CHUNK // 8, 1.0 / classes).tobytes()
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, header, unit, total in (("probs.npy", header_probs, value, rows * classes * 8),
                                          ("labels.npy", header_labels, bytes(_CHUNK), rows * 8)):
            with z.open(name, "w", force_zip64=True) as m:
                m.write(header)
                left = total
                while left > 0:
                    m.write(unit[:min(left, len(unit))])
                    left -= len(unit)
    return path


def _npy_header(dtype, shape: tuple[int, ...]) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": np.dtype(dtype).str, "fortran_order": False,
                                               "shape": shape})
    return buf.getvalue()  # the magic string, then the header


def parquet_row_group(path: Path, rows: int) -> Path:
    """A Parquet file of ``rows`` identical rows (``p``, ``label``) in ONE row group."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("p", pa.float64()), ("label", pa.int64())])
    batch = min(rows, 1 << 20)
    part = pa.record_batch([pa.array(np.full(batch, 0.5)), pa.array(np.ones(batch, dtype=np.int64))],
                           schema=schema)
    with pq.ParquetWriter(path, schema, compression="zstd") as w:
        # write_batch with row_group_size=rows keeps every batch in the one row group
        left = rows
        batches = []
        while left > 0:
            n = min(left, batch)
            batches.append(part.slice(0, n))
            left -= n
        w.write_table(pa.Table.from_batches(batches, schema=schema), row_group_size=rows)
    return path


def xlsx_cell(path: Path, cell_bytes: int) -> Path:
    """A workbook whose one shared string (cell C2) is ``cell_bytes`` letters long; columns p, label, note."""
    parts = {
        "[Content_Types].xml": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.'
            'spreadsheetml.sheet.main+xml"/>'
            '<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-'
            'officedocument.spreadsheetml.worksheet+xml"/>'
            '<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-'
            'officedocument.spreadsheetml.sharedStrings+xml"/></Types>'),
        "_rels/.rels": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
            'officeDocument" Target="xl/workbook.xml"/></Relationships>'),
        "xl/workbook.xml": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
            'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
            '<sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>'),
        "xl/_rels/workbook.xml.rels": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
            'worksheet" Target="worksheets/sheet1.xml"/>'
            '<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
            'sharedStrings" Target="sharedStrings.xml"/></Relationships>'),
        "xl/worksheets/sheet1.xml": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
            '<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c><c r="C1" t="s"><v>2</v></c></row>'
            '<row r="2"><c r="A2"><v>0.5</v></c><c r="B2"><v>1</v></c><c r="C2" t="s"><v>3</v></c></row>'
            '<row r="3"><c r="A3"><v>0.25</v></c><c r="B3"><v>0</v></c><c r="C3" t="s"><v>4</v></c></row>'
            '</sheetData></worksheet>'),
    }
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, text in parts.items():
            z.writestr(name, text)
        with z.open("xl/sharedStrings.xml", "w", force_zip64=True) as m:
            m.write(b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
                    b'<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="5" uniqueCount="5">'
                    b"<si><t>p</t></si><si><t>label</t></si><si><t>note</t></si><si><t>")
            block = b"a" * _CHUNK
            left = cell_bytes
            while left > 0:
                m.write(block[:min(left, _CHUNK)])
                left -= _CHUNK
            m.write(b"</t></si><si><t>x</t></si></sst>")
    return path


def truncated_npy(path: Path, rows: int, keep: float = 0.5) -> Path:
    """An NPY of shape (rows, 3) whose data is cut after ``keep`` of its bytes (a copy interrupted)."""
    arr = np.tile(np.array([[0.25, 0.75, 1.0]]), (rows, 1))
    buf = io.BytesIO()
    np.save(buf, arr)
    data = buf.getvalue()
    header = len(data) - arr.nbytes
    path.write_bytes(data[:header + int(arr.nbytes * keep)])
    return path


# ------------------------------------------------------------------------------ audit 12c: expansion at read time
# Files well within every byte and cell limit whose reading expanded: one-hot scores (the rounding check's
# temporaries), a score vector of many classes in one cell, long text cells, many text columns.
def npz_one_hot(path: Path, rows: int, classes: int = 1000) -> Path:
    """An NPZ of ``rows`` one-hot probability rows of ``classes`` classes (class 0) and labels 0."""
    probs = np.zeros((rows, classes))
    probs[:, 0] = 1.0
    with open(path, "wb") as f:  # a file object: numpy adds ".npz" to a path without it
        np.savez_compressed(f, probs=probs, labels=np.zeros(rows, dtype=np.int64))
    return path


def csv_gz_one_hot_wide(path: Path, classes: int, rows: int = 2000) -> Path:
    """A ``.csv.gz`` of ``rows`` rows of ``classes`` one-hot score columns (class 0) and the label 0."""
    header = (",".join(f"p{k}" for k in range(classes)) + ",label\n").encode()
    row = ("1," + ",".join(["0"] * (classes - 1)) + ",0\n").encode()
    with open(path, "wb") as f:
        _gzip_repeated(f, header, row, rows * len(row))
    return path


def csv_gz_score_vectors(path: Path, classes: int, rows: int = 200) -> Path:
    """A ``.csv.gz`` with a ``probs`` column of one-hot vectors of ``classes`` scores ("[1 0 0 ...]")."""
    row = ('"[1 ' + " ".join(["0"] * (classes - 1)) + ']",0\n').encode()
    with open(path, "wb") as f:
        _gzip_repeated(f, b"probs,label\n", row, rows * len(row))
    return path


def parquet_score_vectors(path: Path, classes: int, rows: int = 100) -> Path:
    """A Parquet file with a list<double> ``probs`` column of one-hot vectors of ``classes`` scores."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    one = np.zeros(classes)
    one[0] = 1.0
    values = pa.array(np.tile(one, rows))
    probs = pa.ListArray.from_arrays(pa.array(np.arange(0, rows * classes + 1, classes, dtype=np.int32)), values)
    pq.write_table(pa.table({"probs": probs, "label": pa.array(np.zeros(rows, dtype=np.int64))}), path)
    return path


def csv_gz_long_text(path: Path, rows: int, cell: int = 900_000) -> Path:
    """A ``.csv.gz`` of ``rows`` rows, each with a distinct text cell of ``cell`` bytes (under the cell limit)."""
    pad = b"x" * cell
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        f.write(comp.compress(b"confidence,correct,note\n"))
        for i in range(rows):
            f.write(comp.compress(f"0.{(i * 7) % 1000:03d},{i % 2},{i}".encode() + pad + b"\n"))
        f.write(comp.flush())
    return path


def parquet_long_text(path: Path, rows: int, cell: int = 900_000) -> Path:
    """A Parquet file of ``rows`` rows, each with a distinct text note of ``cell`` bytes (under the cell
    limit): a few MB on disk, compressed, for hundreds of MB of text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pad = "x" * (cell - 12)
    notes = pa.array([f"{i:012d}{pad}" for i in range(rows)])
    conf = pa.array([(i * 7 % 1000) / 1000 for i in range(rows)])
    pq.write_table(pa.table({"confidence": conf, "correct": pa.array([i % 2 for i in range(rows)]), "note": notes}),
                   path, compression="zstd")
    return path


def csv_gz_text_columns(path: Path, columns: int, rows: int = 200) -> Path:
    """A ``.csv.gz`` of a confidence, a 0/1 outcome and ``columns`` one-letter text columns."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        f.write(comp.compress(("confidence,correct," + ",".join(f"m{c}" for c in range(columns)) + "\n").encode()))
        for i in range(rows):
            cells = ",".join("a" if (i + c) % 2 else "b" for c in range(columns))
            f.write(comp.compress(f"0.{(i * 7) % 1000:03d},{i % 2},{cells}\n".encode()))
        f.write(comp.flush())
    return path


BUILDERS = {
    "csv.gz rows": (csv_gz_rows, "data.csv.gz"),
    "csv.gz wide rows": (csv_gz_wide_rows, "wide.csv.gz"),
    "jsonl.gz rows": (jsonl_gz_rows, "data.jsonl.gz"),
    "jsonl.gz no label": (jsonl_gz_no_label, "nolabel.jsonl.gz"),
    "npz rows": (npz_rows, "data.npz"),
    "parquet row group": (parquet_row_group, "data.parquet"),
    "csv.gz cell": (csv_gz_cell, "cell.csv.gz"),
    "xlsx cell": (xlsx_cell, "cell.xlsx"),
    "npz one-hot": (npz_one_hot, "onehot.npz"),
    "csv.gz one-hot wide": (csv_gz_one_hot_wide, "onehot_wide.csv.gz"),
    "csv.gz score vectors": (csv_gz_score_vectors, "vectors.csv.gz"),
    "parquet score vectors": (parquet_score_vectors, "vectors.parquet"),
    "csv.gz long text": (csv_gz_long_text, "longtext.csv.gz"),
    "csv.gz text columns": (csv_gz_text_columns, "textcols.csv.gz"),
    "parquet long text": (parquet_long_text, "longtext.parquet"),
}

