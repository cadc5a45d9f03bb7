"""The memory-lean CSV path gives the same numbers and the same table as before.

The loader now reads CSV with Arrow using the column types of the first block (instead of
``pd.read_csv(engine="pyarrow")``, whose type inference keeps every parsed block until the end),
converts the table to pandas without copying the numbers, fills the score block without a second full-size temporary and lets
``Predictions.from_arrays(copy=False)`` normalise it in place (benchmarks/bench_loading.py,
benchmarks/RESULTS_memory.md). The references here are pandas' own pyarrow engine (the table), a
plain Python parse of the file with ``csv`` and ``float`` (the numbers) and the formulas themselves.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import io

import numpy as np
import pandas as pd
import pytest

from pbr_core import Predictions, load_predictions
from pbr_core.loading import _tables, save_predictions
from pbr_core.loading._source import _resolve_source
from pbr_core.predictions import softmax


def _frame(data: bytes, sep: str = ",", compression: str | None = None, encoding: str = "utf-8") -> pd.DataFrame:
    return _tables._read_csv_frame(_resolve_source(data, "t.csv"), sep, compression, encoding)


def _pandas(data: bytes, sep: str = ",", compression: str | None = None, encoding: str = "utf-8") -> pd.DataFrame:
    """What the loader read before: pandas' pyarrow engine, with the loader's options."""
    return pd.read_csv(io.BytesIO(data), engine="pyarrow", sep=sep, compression=compression, encoding=encoding,
                       skip_blank_lines=False)


def _same_table(ours: pd.DataFrame, ref: pd.DataFrame) -> None:
    """Equal frames; the one intended difference: dates are Arrow dates, pandas gives ``datetime.date``
    objects (the same values, ~10x the memory)."""
    ours = ours.copy()
    for c in ours.columns:
        if isinstance(ours[c].dtype, pd.ArrowDtype) and "date32" in str(ours[c].dtype):
            assert ref[c].dtype == object
            ours[c] = pd.Series([None if v is pd.NA else v for v in ours[c].tolist()], dtype=object)
            assert all(v is None or isinstance(v, dt.date) for v in ours[c])
    pd.testing.assert_frame_equal(ours, ref, check_dtype=True)


MIXED = (
    "p_cat,p_dog,label,id,segment,day,when,flag,note,n\n"
    "0.25,0.75,1,100,north,2024-01-02,2024-01-02 10:00:00,true,NA,1\n"
    "0.5,0.5,0,101,\"south, east\",2024-02-03,2024-02-03 11:30:00,false,,\n"
    "\"0.125\",0.875,1,102,null,2024-03-04,2024-03-04 12:00:00,TRUE,n/a,3\n"
    "\n"
    "1e-05,0.99999,1,103,N/A,,2024-03-05 00:00:00,False,-nan,4\n"
)


@pytest.mark.parametrize("text, sep", [
    (MIXED, ","),
    (MIXED.replace(",", ";"), ";"),
    ("a\tb\tlabel\n0.5\t0.5\t1\n0.25\t0.75\t0\n", "\t"),
    ("\ufeffa,b,label\n0.5,0.5,1\n", ","),                      # byte-order mark
    ("a,b,label,empty\n0.5,0.5,1,\n0.25,0.75,0,\n", ","),       # a column of empty cells: float64
    ("a,,label\n0.5,0,1\n0.25,1,0\n", ","),                    # an unnamed column
    ("a,b,label\n0.5,0.5,1\n0.25,0.75,0\n\n\n", ","),          # blank lines at the end
])
@pytest.mark.parametrize("block", [None, 64])
def test_the_reader_reads_what_pandas_reads(monkeypatch, text, sep, block):
    if block:  # the path of big files: types from a first block smaller than the file
        monkeypatch.setattr(_tables, "STREAM_BLOCK_BYTES", block)
    data = text.encode()
    _same_table(_frame(data, sep), _pandas(data, sep))


@pytest.mark.parametrize("block", [None, 64])
def test_gzip_and_latin1_read_what_pandas_reads(monkeypatch, block):
    if block:
        monkeypatch.setattr(_tables, "STREAM_BLOCK_BYTES", block)
    data = "a,b,label,town\n0.5,0.5,1,Zürich\n0.25,0.75,0,Köln\n".encode("latin-1")
    _same_table(_frame(data, encoding="latin-1"), _pandas(data, encoding="latin-1"))
    packed = gzip.compress(MIXED.encode())
    _same_table(_frame(packed, compression="gzip"), _pandas(packed, compression="gzip"))


@pytest.mark.parametrize("late, whole", [
    ("0.5", True),  # whole numbers first, a decimal later: int64 -> float64
    ("abc", True),  # numbers first, text later: -> string
    ("", False),    # a missing value fits any type (the column becomes float64 with NaN, as in pandas)
])
def test_a_type_change_after_the_first_block_reads_the_file_whole(monkeypatch, late, whole):
    """The reader takes its types from the first block; a later block that does not fit
    them must give the table the whole-file reader (and pandas) gives, not an error or other types."""
    monkeypatch.setattr(_tables, "STREAM_BLOCK_BYTES", 64)
    calls = []
    real = _tables._read_csv_whole
    monkeypatch.setattr(_tables, "_read_csv_whole", lambda *a: calls.append("whole") or real(*a))
    rows = [f"0.{i % 9 + 1},0.{9 - i % 9},{i % 2},{i}" for i in range(200)]
    rows[150] = rows[150].rsplit(",", 1)[0] + "," + late
    data = ("a,b,label,code\n" + "\n".join(rows) + "\n").encode()
    typed = []
    real_typed = _tables._read_csv_typed
    monkeypatch.setattr(_tables, "_read_csv_typed", lambda *a: typed.append(1) or real_typed(*a))
    _same_table(_frame(data), _pandas(data))
    assert typed == [1] and calls == (["whole"] if whole else [])


def test_a_column_empty_in_the_first_block_then_text(monkeypatch):
    monkeypatch.setattr(_tables, "STREAM_BLOCK_BYTES", 64)
    rows = [f"0.25,0.75,1,{'' if i < 150 else 'note'}" for i in range(200)]
    data = ("a,b,label,remark\n" + "\n".join(rows) + "\n").encode()
    _same_table(_frame(data), _pandas(data))


# ------------------------------------------------------------------------ the numbers of a load
def _python_reference(data: bytes, score_cols: list[str], label: str) -> tuple[np.ndarray, np.ndarray]:
    """Scores and labels parsed by Python's csv module and float(): no pandas, no Arrow."""
    rows = list(csv.DictReader(io.StringIO(data.decode())))
    scores = np.array([[float(r[c]) for c in score_cols] for r in rows])
    labels = np.array([int(r[label]) for r in rows])
    return scores, labels


def _export(n: int, k: int, seed: int, logits: bool = False) -> bytes:
    rng = np.random.default_rng(seed)
    cols = [f"p_{j}" for j in range(k)]
    values = rng.normal(0, 3, size=(n, k)) if logits else rng.dirichlet(np.full(k, 0.3), size=n)
    df = pd.DataFrame({c: [float(f"{v:.9g}") for v in values[:, j]] for j, c in enumerate(cols)})
    df["label"] = rng.integers(0, k, n)
    df["id"] = np.arange(n) + 10_000
    df["segment"] = rng.choice(["north", "south", "online"], n)
    df["date"] = (np.datetime64("2024-01-01") + rng.integers(0, 365, n)).astype("datetime64[D]").astype(str)
    return df.to_csv(index=False, float_format="%.9g").encode()


@pytest.mark.parametrize("logits", [False, True])
def test_a_load_gives_the_numbers_of_the_formulas_on_a_plain_python_parse(logits):
    data = _export(3000, 10, seed=1, logits=logits)
    preds = load_predictions(data, format="csv", name="export.csv")
    scores, labels = _python_reference(data, [f"p_{j}" for j in range(10)], "label")
    np.testing.assert_array_equal(preds.labels, labels)
    if logits:
        assert preds.input_type == "logits"
        np.testing.assert_array_equal(preds.logits, scores)
        z = scores - scores.max(axis=1, keepdims=True)
        expected = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    else:
        expected = scores / scores.sum(axis=1)[:, None]
    np.testing.assert_array_equal(preds.probs, expected)  # bit for bit
    np.testing.assert_array_equal(preds.confidence, expected.max(axis=1))
    np.testing.assert_array_equal(preds.predicted, expected.argmax(axis=1))
    assert preds.probs.flags.c_contiguous and preds.probs.flags.owndata


def test_metadata_keeps_its_values_and_dates_stay_dates(tmp_path):
    data = _export(500, 4, seed=2)
    preds = load_predictions(data, format="csv", name="export.csv")
    ref = pd.read_csv(io.BytesIO(data))
    assert preds.metadata.columns.tolist() == ["id", "segment", "date"]
    assert preds.metadata["id"].tolist() == ref["id"].tolist()
    assert preds.metadata["segment"].tolist() == ref["segment"].tolist()
    # Arrow dates, 4 bytes a row, whose values are the datetime.date objects pandas' reader gave.
    assert isinstance(preds.metadata["date"].dtype, pd.ArrowDtype)
    assert preds.metadata["date"].tolist() == [dt.date.fromisoformat(d) for d in ref["date"]]
    assert dict(preds.column_roles)["date"] == "metadata"
    # Written back as the same text, and read back as the same values.
    path = tmp_path / "back.csv"
    save_predictions(preds, path_or_buffer=path)
    assert pd.read_csv(path)["date"].tolist() == ref["date"].tolist()
    back = load_predictions(path)
    np.testing.assert_allclose(back.probs, preds.probs, rtol=0, atol=1e-15)  # renormalised once more
    assert back.metadata["date"].tolist() == preds.metadata["date"].tolist()
    assert preds.subset([3, 1]).metadata["date"].tolist() == [preds.metadata["date"][3], preds.metadata["date"][1]]


def test_parquet_dates_are_arrow_dates_with_the_same_values(tmp_path):
    df = pd.DataFrame({"a": [0.25, 0.5], "b": [0.75, 0.5], "label": [1, 0],
                       "day": [dt.date(2024, 1, 2), dt.date(2024, 5, 6)]})
    path = tmp_path / "d.parquet"
    df.to_parquet(path, index=False)
    preds = load_predictions(path)
    assert preds.metadata["day"].tolist() == df["day"].tolist()


# ------------------------------------------------------------------------ from_arrays(copy=...)
@pytest.mark.parametrize("kind", ["probabilities", "logits", "renormalise"])
def test_from_arrays_copy_false_gives_the_same_values(kind):
    rng = np.random.default_rng(5)
    if kind == "logits":
        s = rng.normal(0, 2, size=(400, 6))
    else:
        s = rng.dirichlet(np.ones(6), size=400)
        if kind == "renormalise":
            s = s * rng.uniform(0.9, 1.1, size=(400, 1))
    y = rng.integers(0, 6, 400)
    kw = dict(renormalize=kind == "renormalise")
    given = s.copy()
    kept = Predictions.from_arrays(given, y, **kw)
    np.testing.assert_array_equal(given, s)  # copy=True (default) never touches the input...
    assert not np.shares_memory(kept.probs, given)  # ...nor keeps it
    if kept.logits is not None:
        assert not np.shares_memory(kept.logits, given)
    handed = s.copy()
    fast = Predictions.from_arrays(handed, y, copy=False, **kw)
    for name in ("probs", "logits", "confidence", "predicted", "labels"):
        a, b = getattr(kept, name), getattr(fast, name)
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(a, b)
    assert kept.notes == fast.notes and kept.input_type == fast.input_type
    # copy=False keeps the handed-over block instead of allocating another one.
    assert np.shares_memory(fast.logits if kind == "logits" else fast.probs, handed)


def test_from_arrays_copy_false_leaves_read_only_and_other_dtypes_alone():
    s = np.array([[0.2, 0.8], [0.6, 0.4]])
    s.flags.writeable = False
    preds = Predictions.from_arrays(s, [1, 0], copy=False)
    np.testing.assert_array_equal(s, [[0.2, 0.8], [0.6, 0.4]])
    assert not np.shares_memory(preds.probs, s)
    f32 = np.array([[0.25, 0.75], [0.5, 0.5]], dtype=np.float32)
    preds = Predictions.from_arrays(f32, [1, 0], copy=False)
    assert f32.dtype == np.float32 and preds.probs.dtype == np.float64


def test_softmax_in_place_is_the_formula():
    rng = np.random.default_rng(7)
    z = rng.normal(0, 30, size=(200, 9))
    before = z.copy()
    shifted = z - z.max(axis=1, keepdims=True)
    np.testing.assert_array_equal(softmax(z), np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True))
    np.testing.assert_array_equal(z, before)  # the input is not modified
