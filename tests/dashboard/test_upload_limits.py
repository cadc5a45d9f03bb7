"""Uploads over the read limits on the Data page, and the parse cache shared by every session (issue 34).

The bombs (tests/bombs.py) are a few MB once decompressed; the server's limits are scaled down to
match through the administrator's environment variables (PBR_CALIB_MAX_READ_MEMORY, ...), which
the app reads at every load. Peak memory at the issue's sizes is measured by
benchmarks/bench_bombs.py, not here.
"""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import bombs
import pbr_core
from dashboard import load_cache, state
from dashboard.load_cache import SharedLoads, predictions_nbytes

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def small_limits(monkeypatch):
    """The server's read limits scaled down 64 times (1 GiB, 2 GiB, 1 MiB by default), the cell limit
    512 times: the default sample (10,000 x 100 logits) still loads."""
    monkeypatch.setenv("PBR_CALIB_MAX_READ_BYTES", "16MB")
    monkeypatch.setenv("PBR_CALIB_MAX_READ_MEMORY", "32MB")
    monkeypatch.setenv("PBR_CALIB_MAX_CELL_BYTES", "2KB")


@pytest.fixture
def app(small_limits):
    load_cache.SHARED.clear()
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


def _upload(at: AppTest, path: Path) -> None:
    at.file_uploader(key="data_upload").upload(path.name, path.read_bytes(), "application/octet-stream").run()
    assert not at.exception, at.exception


def _error(at: AppTest) -> str:
    assert len(at.error) == 1, [e.value for e in at.error]
    return at.error[0].value


def test_a_row_bomb_is_refused_with_its_real_size_and_the_data_before_stays(app, monkeypatch, tmp_path):
    monkeypatch.setenv("PBR_CALIB_UPLOAD_STREAM_ROWS", "100000")
    before = app.session_state["pbr_loaded"].name
    _upload(app, bombs.csv_gz_rows(tmp_path / "rows.csv.gz", 1_000_000))  # 6 MB of text in 8 KB
    text = _error(app)
    assert text.startswith("Could not load **rows.csv.gz**: it is too large to read in memory (its 8.58 KB expand to "
                           "5.72 MB of text; reading them would take about 74.4 MB (1,000,000 data rows), more than the "
                           "limit of 32 MB of memory for one read), and it holds 1,000,000 rows, more than the "
                           "100,000 this server reads from an upload even in a stream.")
    assert "pbr_core" not in text and "PBR_CALIB" not in text  # no programmer's advice on the page
    assert app.session_state["pbr_loaded"].name == before


def test_a_csv_too_large_for_memory_is_read_in_a_stream(app, tmp_path):
    """Within the stream's row limit, the upload takes the server dataset's path: the statistics of
    every row, a sample for the pages that need rows; the numbers are those of the whole file."""
    rng = np.random.default_rng(0)
    p = np.round(rng.random(600_000), 6)
    y = (rng.random(600_000) < p).astype(int)
    path = tmp_path / "big.csv.gz"
    import gzip

    path.write_bytes(gzip.compress(("p,label\n" + "".join(f"{a},{b}\n" for a, b in zip(p, y))).encode()))
    _upload(app, path)
    assert not app.error, [e.value for e in app.error]
    loaded = app.session_state["pbr_loaded"]
    assert loaded.origin == "upload" and loaded.stream is not None and loaded.stream.n_total == 600_000
    assert any("read in a stream (too large for memory)" in c.value for c in app.sidebar.caption)
    whole = pbr_core.load_predictions(path, limits=pbr_core.loading.ReadLimits.none())
    stats = loaded.stream.stats["pos"]
    assert abs(stats.ece() - pbr_core.ece(whole.p_positive, whole.labels, n_bins=stats.config.n_bins)) < 1e-12
    app.switch_page("views/reliability.py").run()
    assert not app.exception, app.exception
    temp = Path(loaded.stream.files[0])
    assert temp.exists()
    del loaded
    app.switch_page("views/data.py").run()
    app.selectbox(key="data_sample").select(state.list_samples()[0]).run()  # another file: the stream's goes
    app.run()  # Streamlit keeps the previous run's state until the next run
    gc.collect()
    assert not temp.exists()


def test_one_huge_cell_is_refused_and_named(app, tmp_path):
    _upload(app, bombs.csv_gz_cell(tmp_path / "cell.csv.gz", 1 << 20))
    text = _error(app)
    assert text.startswith("Could not load **cell.csv.gz**: line 2 of the file (3 columns) holds 1 MB of text, more "
                           "than the limit of 2 KB for one cell. Remove or shorten that column")


@pytest.mark.parametrize("builder, name, words", [
    (bombs.jsonl_gz_rows, "rows.jsonl.gz", "Files that large are read only in a stream, which works for CSV and "
                                           "Parquet files"),
    (bombs.npz_rows, "rows.npz", "the archive's arrays, once decompressed"),
    (bombs.xlsx_cell, "cell.xlsx", "a cell of the workbook (xl/sharedStrings.xml) holds"),
])
def test_other_bombs_get_a_message_never_an_exception(app, tmp_path, builder, name, words):
    _upload(app, builder(tmp_path / name, 500_000))
    assert words in _error(app)


def test_a_failed_upload_is_parsed_once_and_its_columns_offered(app, monkeypatch):
    calls = []
    real = pbr_core.load_predictions
    monkeypatch.setattr(state.pbr_core, "load_predictions", lambda *a, **k: calls.append(1) or real(*a, **k))
    data = b'{"score": 0.5, "segment": "a"}\n{"score": 0.25, "segment": "b"}\n'
    app.file_uploader(key="data_upload").upload("run.jsonl", data, "application/json").run()
    assert app.error and calls == [1]
    assert app.session_state["pbr_load_error"]["columns"] == ["score", "segment"]


# ------------------------------------------------------------------------------ the shared cache
class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Holder:
    """Stands for a session's Loaded object (held weakly by the cache)."""


def _preds(n: int) -> pbr_core.Predictions:
    rng = np.random.default_rng(n)
    return pbr_core.Predictions.from_arrays(rng.random(n), rng.integers(0, 2, n))


def test_an_upload_leaves_the_cache_when_no_session_holds_it():
    cache = SharedLoads(max_entries=8, max_bytes=10 << 20, ttl_s=100, clock=_Clock())
    preds = _preds(1000)
    cache.put("upload", preds, keep_unheld=False)
    a, b = _Holder(), _Holder()
    cache.hold("upload", a)
    cache.hold("upload", b)
    assert cache.get("upload") is preds
    del a
    gc.collect()
    assert cache.get("upload") is preds  # b still holds it
    del b
    gc.collect()
    assert cache.prune() == ["upload"] and cache.get("upload") is None


def test_a_sample_stays_unheld_until_its_time_is_up():
    clock = _Clock()
    cache = SharedLoads(max_entries=8, max_bytes=10 << 20, ttl_s=100, clock=clock)
    cache.put("sample", _preds(1000), keep_unheld=True)
    clock.now = 99
    assert cache.get("sample") is not None  # a use: its time starts again
    clock.now = 198
    assert cache.prune() == []
    clock.now = 200
    assert cache.prune() == ["sample"]


def test_unheld_entries_are_bounded_in_number_and_bytes():
    size = predictions_nbytes(_preds(1000))
    cache = SharedLoads(max_entries=3, max_bytes=int(2.5 * size), ttl_s=1e9, clock=_Clock())
    for i in range(4):
        cache.put(f"s{i}", _preds(1000), keep_unheld=True)
    cache.prune()
    assert cache.stats()["entries"] == 2 and cache.get("s3") is not None and cache.get("s0") is None
    held = _Holder()
    big = _preds(5000)  # larger than max_bytes: never cached
    assert not cache.put("big", big, keep_unheld=False)
    cache.put("held", _preds(1000), keep_unheld=False)
    cache.hold("held", held)
    cache.prune()
    assert cache.get("held") is not None  # a held entry costs the cache nothing: it is not counted
    assert cache.stats()["unheld_bytes"] <= cache.max_bytes


def test_the_app_frees_an_upload_when_its_session_moves_on(app, tmp_path):
    path = tmp_path / "small.csv"
    path.write_bytes((ROOT / "sample_data" / "kitti_random_forest.csv").read_bytes())
    _upload(app, path)
    key = app.session_state["pbr_loaded"].key
    assert load_cache.SHARED.get(key) is not None
    app.selectbox(key="data_sample").select(state.list_samples()[0]).run()
    app.run()  # Streamlit keeps the previous run's state until the next run
    gc.collect()
    load_cache.SHARED.prune()
    assert load_cache.SHARED.get(key) is None


def test_a_parquet_text_bomb_is_not_streamed(app, tmp_path):
    """Too many rows for memory, and one 1,500-character text on every row: stored once (the file's
    dictionary), decoded a batch at a time it would be 262,144 x 1,500 bytes, over the memory limit."""
    import pandas as pd

    n = 400_000
    path = tmp_path / "texts.parquet"
    pd.DataFrame({"p": np.full(n, 0.5), "label": np.ones(n, dtype=int), "note": ["n" * 1500] * n}).to_parquet(
        path, index=False)
    assert path.stat().st_size < 1 << 20
    import tempfile

    temp = Path(tempfile.gettempdir())
    before = set(temp.glob("pbr-calib-upload-*"))
    _upload(app, path)
    text = _error(app)
    assert text.startswith("Could not load **texts.parquet**: it is too large to read in memory, and even in a stream "
                           "its text columns hold 1,500 bytes or more in a row; reading 262,144 rows at a time would take "
                           "about 375 MB")
    assert set(temp.glob("pbr-calib-upload-*")) == before  # its temporary copy is gone


def test_the_widest_text_row_of_a_parquet_file(tmp_path):
    import pandas as pd

    from pbr_core.loading._tables import parquet_widest_text_row

    df = pd.DataFrame({"a": ["x", "yyy", None, "zz"], "b": ["1", "22", "4444", None], "p": [0.1, 0.2, 0.3, 0.4]})
    df.to_parquet(tmp_path / "t.parquet", index=False, row_group_size=2)
    assert parquet_widest_text_row(str(tmp_path / "t.parquet")) == max(1 + 1, 3 + 2, 0 + 4, 2 + 0)
    assert parquet_widest_text_row(str(tmp_path / "t.parquet")) == 5


def test_distinct_long_text_is_refused_from_the_parquet_footer_without_decoding_it(tmp_path, monkeypatch):
    """300 distinct notes of 900 KB in a 17 KB file: the text a row holds on average (the footer's) is over
    what a streamed batch may hold, so the stream is refused without decoding the notes (which peaked at
    1.27 GB, benchmarks/RESULTS_bombs.md); a file whose rows are short on average is still read to the end."""
    import pyarrow.parquet as pq

    from pbr_core.loading._tables import parquet_widest_text_row

    path = bombs.parquet_long_text(tmp_path / "notes.parquet", 30)
    assert path.stat().st_size < 100_000
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", lambda *a, **k: pytest.fail("the notes were decoded"))
    assert parquet_widest_text_row(str(path), stop_at=8_192) >= 900_000
    monkeypatch.undo()
    assert parquet_widest_text_row(str(path)) == 900_000  # without a bound: the exact widest row
    # a short-text file is read to its widest row, past the average
    import pandas as pd

    short = tmp_path / "short.parquet"
    pd.DataFrame({"p": [0.5] * 100, "note": ["a"] * 99 + ["b" * 5_000]}).to_parquet(short, index=False)
    assert parquet_widest_text_row(str(short), stop_at=8_192) == 5_000
