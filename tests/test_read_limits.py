"""Read limits: small files that expand into large ones are refused before they are parsed, with a
message that says how large they really are and what to do (pbr_core/loading/_limits.py).

The bombs (tests/bombs.py) are built here a few MB large, with the limits scaled down to match, so
that each test takes a fraction of a second; benchmarks/bench_bombs.py reads them at the issue's
sizes (hundreds of MB) and records the memory (benchmarks/RESULTS_bombs.md). Where a limit must
act *before* the expensive step, that step is replaced by one that fails the test if it is reached.
"""

from __future__ import annotations

import gzip
import io
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bombs
import pbr_core
from pbr_core import PredictionsError, load_predictions
from pbr_core.loading import ReadLimitError, ReadLimits, _limits, _tables, default_limits, read_columns, read_table

KB = 1 << 10
MB = 1 << 20
#: Limits scaled down about 500 times from the defaults (1 GiB, 2 GiB, 1 MiB).
SMALL = ReadLimits(max_bytes=2 * MB, max_memory=4 * MB, max_cell_bytes=2 * KB)


def _never(*args, **kwargs):
    raise AssertionError("the file was parsed although a limit should have refused it first")


# ------------------------------------------------------------------------------ the limits themselves
def test_defaults_and_environment(monkeypatch):
    for env in (_limits.ENV_MAX_BYTES, _limits.ENV_MAX_MEMORY, _limits.ENV_MAX_CELL):
        monkeypatch.delenv(env, raising=False)
    assert default_limits() == ReadLimits(1 << 30, 2 << 30, 1 << 20)
    monkeypatch.setenv(_limits.ENV_MAX_MEMORY, "512MB")
    monkeypatch.setenv(_limits.ENV_MAX_CELL, "none")
    assert default_limits() == ReadLimits(1 << 30, 512 << 20, None)
    monkeypatch.setenv(_limits.ENV_MAX_BYTES, "lots")
    with pytest.raises(PredictionsError, match="PBR_CALIB_MAX_READ_BYTES: expected a size"):
        default_limits()


@pytest.mark.parametrize("text, value", [("1073741824", 1 << 30), ("512MB", 512 << 20), ("1.5 GiB", 3 << 29),
                                         ("64k", 64 << 10), ("0", None), ("off", None)])
def test_parse_size(text, value):
    assert _limits.parse_size(text) == value


def test_the_environment_reaches_load_predictions(monkeypatch, tmp_path):
    path = bombs.csv_gz_rows(tmp_path / "rows.csv.gz", 200_000)
    monkeypatch.setenv(_limits.ENV_MAX_MEMORY, "4MB")
    with pytest.raises(ReadLimitError, match="PBR_CALIB_MAX_READ_MEMORY"):
        load_predictions(path)
    monkeypatch.setenv(_limits.ENV_MAX_MEMORY, "none")
    assert load_predictions(path).n == 200_000


def test_the_bundled_samples_are_far_within_the_default_limits():
    """Real files: every bundled sample reads with the defaults (sample_data/ holds files up to 15 MB)."""
    root = Path(__file__).resolve().parents[1] / "sample_data"
    for path in sorted(root.iterdir()):
        if path.name.lower().endswith(pbr_core.loading.ACCEPTED_SUFFIXES):
            load_predictions(path)


@pytest.mark.parametrize("chunk", [7, 64, 4 << 20])
def test_the_counting_pass_against_python(monkeypatch, chunk):
    """Rows and the longest line, also when a line spans the pass's chunks."""
    monkeypatch.setattr(_limits, "_SCAN_CHUNK", chunk)
    rng = np.random.default_rng(0)
    lines = ["a,b"] + ["x" * int(rng.integers(0, 40)) for _ in range(300)] + ["y" * 97] + ["z"] * 5
    for tail in ("\n", "", "\n\n\n"):
        text = ("\n".join(lines) + tail).encode()
        scan = _limits.scan_text(io.BytesIO(text), "t", None, streamable=True, compressed=False)
        assert scan.n_bytes == len(text)
        assert scan.data_rows == len(lines) - 1
        lengths = [len(line) for line in text.split(b"\n")]
        assert scan.longest_line == max(lengths) == 97
        assert scan.longest_at == lengths.index(97) + 1


# ------------------------------------------------------------------------------ row bombs
def test_a_csv_gz_row_bomb_is_refused_with_its_real_size(monkeypatch, tmp_path):
    path = bombs.csv_gz_rows(tmp_path / "rows.csv.gz", 500_000)  # 3 MB of text in 4 KB
    assert path.stat().st_size < 10 * KB
    monkeypatch.setattr(_tables, "_read_csv_frame", _never)
    with pytest.raises(ReadLimitError) as info:
        load_predictions(path, limits=ReadLimits(max_bytes=8 * MB, max_memory=4 * MB, max_cell_bytes=2 * KB))
    err = info.value
    assert err.kind == "memory" and err.rows == 500_000 and err.streamable
    assert err.size == _limits.table_memory(500_000, 2, 500_000 * 6 + 8)
    msg = str(err)
    assert msg.startswith("rows.csv.gz: its ")
    assert "expand to 2.86 MB of text" in msg and "(500,000 data rows)" in msg
    assert "more than the limit of 4 MB" in msg and "--stream" in msg and "PBR_CALIB_MAX_READ_MEMORY" in msg


def test_the_counting_pass_stops_at_the_byte_limit(monkeypatch, tmp_path):
    """A gzip file whose trailer understates its size (a forged or multi-member file) is decompressed
    only up to the limit (one more chunk at most), never to its end."""
    path = bombs.csv_gz_rows(tmp_path / "rows.csv.gz", 2_000_000)  # 12 MB
    data = bytearray(path.read_bytes())
    data[-4:] = (1000).to_bytes(4, "little")  # ISIZE: "1000 bytes"
    path.write_bytes(bytes(data))
    read = []
    real_open = gzip.open

    def counting_open(raw):
        f = real_open(raw)
        real_read = f.read
        f.read = lambda n=-1: read.append(n) or real_read(n)
        return f

    monkeypatch.setattr(_tables.gzip, "open", counting_open)
    monkeypatch.setattr(_tables, "_read_csv_frame", _never)
    with pytest.raises(ReadLimitError) as info:
        load_predictions(path, limits=SMALL)
    assert info.value.kind == "bytes" and info.value.at_least
    assert "is more than 4 MB, more than the limit of 2 MB" in str(info.value)
    assert sum(n for n in read if n > 0) <= SMALL.max_bytes + _limits._SCAN_CHUNK


def test_a_gzip_that_declares_too_much_is_refused_without_decompressing(monkeypatch, tmp_path):
    path = bombs.csv_gz_rows(tmp_path / "rows.csv.gz", 1_000_000)  # declares 6 MB
    monkeypatch.setattr(_limits, "scan_text", _never)
    monkeypatch.setattr(_tables, "scan_text", _never)
    with pytest.raises(ReadLimitError, match=r"the text, once decompressed \(as the gzip file declares; .* compressed\), "
                                             r"is 5.72 MB, more than the limit of 2 MB read into memory"):
        load_predictions(path, limits=SMALL)


def test_the_same_rows_under_the_limits_load(tmp_path):
    path = bombs.csv_gz_rows(tmp_path / "rows.csv.gz", 20_000)
    preds = load_predictions(path, limits=SMALL)
    assert preds.n == 20_000 and preds.kind == "binary"
    assert load_predictions(bombs.csv_gz_rows(tmp_path / "more.csv.gz", 500_000), limits=ReadLimits.none()).n == 500_000


def test_an_uncompressed_csv_is_counted_only_when_it_could_be_too_large(monkeypatch):
    small = b"p,label\n" + b"0.5,1\n" * 10
    monkeypatch.setattr(_tables, "scan_text", _never)
    assert load_predictions(small, format="csv", limits=SMALL).n == 10
    monkeypatch.undo()
    big = b"p,label\n" + b"0.5,1\n" * 300_000
    with pytest.raises(ReadLimitError, match=r"its 1.72 MB of text hold 300,000 rows; reading them would take"):
        load_predictions(big, name="big.csv", limits=SMALL)


def test_a_jsonl_gz_row_bomb(monkeypatch, tmp_path):
    path = bombs.jsonl_gz_rows(tmp_path / "rows.jsonl.gz", 100_000)  # 2.3 MB of records
    monkeypatch.setattr(pbr_core.loading._json, "_lines_frame", _never)
    with pytest.raises(ReadLimitError) as info:
        load_predictions(path, limits=ReadLimits(max_bytes=8 * MB, max_memory=4 * MB, max_cell_bytes=2 * KB))
    assert info.value.kind == "memory"
    assert "its 2.19 MB of text; its 100,001 lines would take about" in str(info.value)
    with pytest.raises(ReadLimitError, match="is 2.19 MB, more than the limit of 1 MB read into memory"):
        load_predictions(path, limits=ReadLimits(max_bytes=1 * MB))


def test_json_lines_read_batch_by_batch_give_the_table_of_one_batch(monkeypatch):
    """The batches of JSON Lines make the table that one json_normalize of every record makes, also
    when a field appears late, changes type or is nested."""
    rng = np.random.default_rng(3)
    records = []
    for i in range(250):
        r = {"p": float(rng.random()), "label": int(rng.integers(0, 2)), "meta": {"fold": i % 3}}
        if i > 100:
            r["note"] = "late"
        if i == 200:
            r["label"] = 1.0
        records.append(r)
    text = "\n".join(pd.Series(records).map(lambda r: __import__("json").dumps(r))).encode()
    monkeypatch.setattr(pbr_core.loading._json, "JSONL_BATCH_RECORDS", 7)
    src = pbr_core.loading._source._resolve_source(text, "r.jsonl")
    ours = pbr_core.loading._json.read_json_frame(src, "jsonl", text[:100])
    pd.testing.assert_frame_equal(ours, pd.json_normalize(records))


def test_an_npz_whose_members_declare_too_much(monkeypatch, tmp_path):
    path = bombs.npz_rows(tmp_path / "rows.npz", 100_000)  # 8 MB of probabilities in a few KB
    assert path.stat().st_size < 20 * KB
    monkeypatch.setattr(np, "load", _never)
    with pytest.raises(ReadLimitError, match=r"the archive's arrays, once decompressed \(as its 2 member\(s\) declare\), "
                                             r"is 8.39 MB, more than the limit of 2 MB"):
        load_predictions(path, limits=SMALL)
    with pytest.raises(ReadLimitError, match=r"its arrays of 8.39 MB; reading them would take about 27.5 MB \(100,000 data "
                                             r"rows\), more than the limit of 4 MB"):
        load_predictions(path, limits=ReadLimits(max_bytes=None, max_memory=4 * MB))


def test_an_npz_member_whose_header_declares_more_than_it_holds(tmp_path):
    path = tmp_path / "forged.npz"
    header = bombs._npy_header(np.float64, (10**9, 10))  # 80 GB declared
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("probs.npy", header + bytes(80))
        z.writestr("labels.npy", bombs._npy_header(np.int64, (10,)) + bytes(80))
    with pytest.raises(PredictionsError, match=r"array 'probs' is damaged: its header declares shape \(1000000000, 10\) "
                                               r"\(74.5 GB of float64\), but the member holds 80 bytes"):
        load_predictions(path, limits=ReadLimits.none())


def test_a_parquet_file_with_one_huge_row_group(monkeypatch, tmp_path):
    import pyarrow.parquet as pq

    path = bombs.parquet_row_group(tmp_path / "rows.parquet", 500_000)
    assert path.stat().st_size < 20 * KB and pq.ParquetFile(path).metadata.num_row_groups == 1
    monkeypatch.setattr(pq.ParquetFile, "read", _never)
    with pytest.raises(ReadLimitError) as info:
        load_predictions(path, limits=SMALL)
    assert info.value.kind == "memory" and info.value.rows == 500_000 and info.value.streamable
    assert "its 500,000 rows of 2 columns; reading them would take about 34.3 MB" in str(info.value)


def test_parquet_text_repeated_on_every_row_is_measured_before_it_is_decoded(monkeypatch, tmp_path):
    """One 1,000-character text on each of 10,000 rows: 10 KB as the file stores it (a dictionary), 10 MB decoded."""
    import pyarrow.compute as pc

    df = pd.DataFrame({"p": np.full(10_000, 0.5), "label": np.ones(10_000, dtype=int), "note": ["n" * 1000] * 10_000})
    path = tmp_path / "text.parquet"
    df.to_parquet(path, index=False)
    casts = []
    real_cast = pc.cast
    monkeypatch.setattr(pc, "cast", lambda *a, **k: casts.append(1) or real_cast(*a, **k))
    # 2.5 x 9.54 MB decoded + 72 bytes a cell + 88 bytes a row (_limits.parquet_text_memory, table_memory)
    assert 2.5 * 10_000_000 + 72 * 10_000 + 88 * 10_000 == pytest.approx(25.4 * MB, rel=0.002)
    with pytest.raises(ReadLimitError, match=r"with 9.54 MB of text; reading them would take about 25.4 MB"):
        load_predictions(path, limits=ReadLimits(max_memory=4 * MB))
    assert casts == []  # refused before the text was decoded
    with pytest.raises(ReadLimitError, match=r"column 'note' at row 1 \(data row, header excluded\) holds 1000 bytes of "
                                             r"text, more than the limit of 999 bytes for one cell"):
        load_predictions(path, limits=ReadLimits(max_cell_bytes=999))
    preds = load_predictions(path, limits=ReadLimits(max_memory=26 * MB))
    assert preds.metadata["note"].tolist() == df["note"].tolist()  # decoded as a plain read gives it
    assert str(preds.metadata["note"].dtype) == str(pd.read_parquet(path)["note"].dtype)


def test_parquet_text_is_counted_at_what_reading_it_costs_not_once(tmp_path):
    """Distinct long notes cost about 8 times their text once read (100,000 notes of 1,000 characters, 95 MB:
    768 MB; benchmarks/RESULTS_bombs.md), and each text cell its own bytes: counted once, as a Parquet file's
    text was, 50 notes of 200 KB (9.5 MB) passed a 20 MB limit and a million short ids were estimated at
    less than half their cost (audit 12c's 'Parquet text counted once')."""
    from pbr_core.loading._limits import parquet_text_memory

    rng = np.random.default_rng(0)
    notes = pd.DataFrame({"p": np.full(50, 0.5), "label": np.ones(50, dtype=int),
                          "note": ["".join(rng.choice(list("abcdefgh"), 200_000)) for _ in range(50)]})
    path = tmp_path / "notes.parquet"
    notes.to_parquet(path, index=False)
    text = 50 * 200_000
    # distinct text: 2.5 x all of it, 5.5 x what a number's 26 bytes a cell cannot explain, 72 bytes a cell
    expected = 2.5 * text + 5.5 * (text - 26 * 50) + 72 * 50 + 50 * (16 * 3 + 40)
    assert parquet_text_memory(50, 1, text) + 50 * (16 * 3 + 40) == pytest.approx(expected, abs=1)
    with pytest.raises(ReadLimitError) as info:
        load_predictions(path, limits=ReadLimits(max_memory=20 * MB))
    assert info.value.kind == "memory" and info.value.streamable
    assert info.value.size >= 7.9 * text  # counted once it was ~1.0 x the text
    assert load_predictions(path, limits=ReadLimits(max_memory=int(8.1 * text))).n == 50
    # short ids: the cells' own cost, not just their characters
    assert parquet_text_memory(1_000_000, 2, 13_000_000) >= 13_000_000 + 64 * 2_000_000


# ------------------------------------------------------------------------------ one huge cell
def test_a_csv_gz_with_one_huge_cell_is_refused_before_it_is_parsed(monkeypatch, tmp_path):
    path = bombs.csv_gz_cell(tmp_path / "cell.csv.gz", 1 * MB)
    monkeypatch.setattr(_tables, "_read_csv_frame", _never)
    with pytest.raises(ReadLimitError) as info:
        load_predictions(path, limits=SMALL)
    assert info.value.kind == "cell"
    assert str(info.value).startswith("cell.csv.gz: line 2 of the file (3 columns) holds 1 MB of text, more than "
                                      "the limit of 2 KB for one cell; remove or shorten that column")


def test_a_long_cell_split_over_lines_is_found_after_parsing(tmp_path):
    """Quoted newlines keep every line short: the table itself is checked, and the cell named."""
    text = "p,label,note\n0.5,1,ok\n0.25,0,\"" + "\n".join(["x" * 60] * 100) + "\"\n"
    with pytest.raises(ReadLimitError, match=r"column 'note' at row 2 \(data row, header excluded\) holds 5.96 KB"):
        load_predictions(text.encode(), name="lines.csv", limits=SMALL)
    assert load_predictions(text.encode(), name="lines.csv", limits=ReadLimits(max_cell_bytes=10 * KB)).n == 2


def test_an_xlsx_with_one_huge_shared_string(monkeypatch, tmp_path):
    path = bombs.xlsx_cell(tmp_path / "cell.xlsx", 1 * MB)
    assert path.stat().st_size < 10 * KB
    monkeypatch.setattr(pd, "read_excel", _never)
    with pytest.raises(ReadLimitError, match=r"a cell of the workbook \(xl/sharedStrings.xml\) holds 1 MB of text"):
        load_predictions(path, limits=SMALL)
    with pytest.raises(ReadLimitError, match=r"the workbook, once decompressed \(as its 6 parts declare\), is 1 MB"):
        load_predictions(path, limits=ReadLimits(max_bytes=512 * KB))
    with pytest.raises(ReadLimitError, match=r"its sheets hold 1 MB of XML; reading them would take about 10 MB"):
        load_predictions(path, limits=ReadLimits(max_memory=4 * MB, max_cell_bytes=None))


def test_a_jsonl_cell_over_the_limit_names_its_column_and_row():
    text = b'{"p": 0.5, "label": 1, "note": "ok"}\n{"p": 0.5, "label": 0, "note": "' + b"y" * 5000 + b'"}\n'
    with pytest.raises(ReadLimitError, match=r"column 'note' at row 2 \(data row, header excluded\) holds 4.88 KB"):
        load_predictions(text, name="r.jsonl", limits=SMALL)


def test_read_table_and_read_columns_keep_the_limits(tmp_path):
    path = bombs.csv_gz_rows(tmp_path / "rows.csv.gz", 500_000)
    with pytest.raises(ReadLimitError):
        read_table(path, limits=SMALL)
    assert read_columns(path, limits=SMALL) == ["p", "label"]  # the header only
    jsonl = bombs.jsonl_gz_rows(tmp_path / "rows.jsonl.gz", 500_000)
    with pytest.raises(ReadLimitError):
        read_columns(jsonl, limits=SMALL)


# ------------------------------------------------------------------------------ NPY, parse once
def test_a_truncated_npy_names_what_is_missing_and_is_never_memory_mapped(monkeypatch, tmp_path):
    path = bombs.truncated_npy(tmp_path / "cut.npy", 1000)
    with pytest.raises(PredictionsError, match=r"cut.npy: the file is truncated: its header declares an array of "
                                               r"shape \(1000, 3\) \(23.4 KB of float64\), but only 11.7 KB follow"):
        load_predictions(path)
    whole = tmp_path / "whole.npy"
    np.save(whole, np.tile([[0.25, 0.75, 1.0]], (50, 1)))
    calls = []
    real = np.load
    monkeypatch.setattr(np, "load", lambda *a, **k: calls.append(k.get("mmap_mode")) or real(*a, **k))
    assert load_predictions(whole).n == 50
    assert calls and all(mode is None for mode in calls)


def test_a_failed_load_carries_the_columns_it_read(tmp_path):
    """The dashboard offers a failed file's columns: the error carries them, so the file is not read twice."""
    with pytest.raises(PredictionsError) as info:
        load_predictions(b'{"p": 0.5, "x": "a"}\n{"p": 0.25, "x": "b"}\n', name="r.jsonl")
    assert info.value.columns == ["p", "x"]
    with pytest.raises(PredictionsError) as info:
        load_predictions(b"a,b,c\n0.5,0.5,zz\n", name="t.csv")
    assert info.value.columns == ["a", "b", "c"]
    with pytest.raises(ReadLimitError) as info:
        load_predictions(bombs.csv_gz_rows(tmp_path / "rows.csv.gz", 500_000), limits=SMALL)
    assert info.value.columns == ["p", "label"]  # the header was read before the limit refused the rows


def test_a_streamed_dataset_refuses_a_cell_over_the_limit_in_its_batch(monkeypatch, tmp_path):
    """The streamed path reads a bounded number of rows at a time, so only the cell limit applies to it:
    a group value of 300 MB would fail the page that shows it."""
    import pbr_core.stream as ps

    monkeypatch.setenv(_limits.ENV_MAX_CELL, "2KB")
    df = pd.DataFrame({"p": [0.5, 0.25, 0.75], "label": [1, 0, 1], "segment": ["a", "s" * 5000, "b"]})
    df.to_parquet(tmp_path / "cells.parquet", index=False)
    ds = ps.open_dataset(tmp_path / "cells.parquet", group_columns="segment")
    with pytest.raises(ReadLimitError, match=r"cells.parquet \(first batch, used to detect the columns\): column "
                                             r"'segment' at row 2 \(data row, header excluded\) holds 4.88 KB of text"):
        list(ds.predictions(ds.units()[0], groups=["segment"]))
