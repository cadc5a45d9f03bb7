"""A probability file with a corrupted cell (negative, or above 1) while every row still sums to 1:
an error naming the cell in every format, in memory and streamed, never a silent softmax as logits;
real logit files are never taken for such probabilities; input_type='logits' is respected.

Data: the real KITTI random-forest class probabilities (sample_data), one entry of one row moved
below 0 with the row's sum kept at 1, and the real CIFAR logits."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core import Predictions, PredictionsError, load_predictions
from pbr_core.predictions import rows_sum_to_one, softmax

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_data"
TABLE_ROW = "(data row, header excluded)"
ARRAY_ROW = "(0-based array index)"


def _corrupt(p: np.ndarray, row: int, to: float = -0.05) -> tuple[np.ndarray, int]:
    """``p`` with the smallest entry of ``row`` set to ``to`` and the difference given to the row's
    largest entry (the row still sums to 1); returns the copy and the corrupted column."""
    p = p.copy()
    col, top = int(np.argmin(p[row])), int(np.argmax(p[row]))
    p[row, top] += p[row, col] - to
    p[row, col] = to
    return p, col


@pytest.fixture(scope="module")
def kitti() -> tuple[pd.DataFrame, list[str], int, int]:
    """The real 8-class KITTI probabilities with row 17 (a row whose top class has < 0.8) corrupted."""
    df = pd.read_csv(SAMPLES / "kitti_multiclass_random_forest.csv")
    cols = [c for c in df.columns if c != "label"]
    p = df[cols].to_numpy(dtype=np.float64)
    row = int(np.flatnonzero(p.max(axis=1) < 0.8)[17])
    bad, col = _corrupt(p, row)
    assert np.allclose(bad.sum(axis=1), 1.0) and bad.max() <= 1 and np.count_nonzero(bad < 0) == 1
    out = df.copy()
    out[cols] = bad
    return out, cols, row, col


def _bytes(df: pd.DataFrame, cols: list[str], fmt: str) -> bytes:
    buf = io.BytesIO()
    p, y = df[cols].to_numpy(), df["label"].to_numpy()
    if fmt == "csv":
        return df.to_csv(index=False).encode()
    if fmt == "parquet":
        df.to_parquet(buf, index=False)
    elif fmt == "json":
        return df.to_json(orient="records").encode()
    elif fmt == "jsonl":  # one vector of class probabilities per record
        return "".join(json.dumps({"probs": r.tolist(), "label": int(v)}) + "\n" for r, v in zip(p, y)).encode()
    elif fmt == "xlsx":
        df.to_excel(buf, index=False)
    elif fmt == "npz":
        np.savez(buf, probs=p, labels=y)
    elif fmt == "npz_named_logits":  # mislabelled: rows that sum to 1 are probabilities whatever the name
        np.savez(buf, logits=p, labels=y)
    elif fmt == "npy":
        np.save(buf, np.column_stack([p, y]))
    return buf.getvalue()


SUFFIX = {"npz_named_logits": "npz"}


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json", "jsonl", "xlsx", "npz", "npz_named_logits", "npy"])
def test_a_negative_probability_is_an_error_naming_the_cell_in_every_format(kitti, fmt, tmp_path):
    df, cols, row, col = kitti
    data = _bytes(df, cols, fmt)
    name = f"kitti.{SUFFIX.get(fmt, fmt)}"
    path = tmp_path / name
    path.write_bytes(data)
    for source in (path, data):  # from a path, and in memory (an upload's bytes)
        with pytest.raises(PredictionsError) as info:
            load_predictions(source, name=None if isinstance(source, Path) else name)
        message = str(info.value)
        assert message.startswith(f"{name}: negative probability -0.05 at row "), message
        if fmt in ("npz", "npz_named_logits", "npy"):
            assert f"row {row} {ARRAY_ROW}, column {col} " in message, message
        else:  # tables count data rows from 1 and name the column
            shown = repr(cols[col]) if fmt != "jsonl" else repr(str(col))
            assert f"row {row + 1} {TABLE_ROW}, column {shown} " in message, message
        assert "(1 value is outside [0, 1])" in message
        assert "Every row sums to 1, so the columns hold probabilities, not logits." in message
        assert "input_type='logits'" in message


def test_in_memory_arrays_and_a_value_above_one(kitti):
    df, cols, row, col = kitti
    p, y = df[cols].to_numpy(), df["label"].to_numpy()
    with pytest.raises(PredictionsError, match=rf"negative probability -0.05 at row {row}, column {col} "):
        Predictions.from_arrays(p, y)
    # A cell above 1 in a row summing to 1 comes with a negative one: both are counted, the first named.
    clean = pd.read_csv(SAMPLES / "kitti_multiclass_random_forest.csv")[cols].to_numpy()
    top = int(np.argmax(clean[row]))
    high = clean.copy()
    high[row] = 0.0
    high[row, top], high[row, (top + 1) % len(cols)] = 1.25, -0.25
    with pytest.raises(PredictionsError, match=r"negative probability -0.25 at row .*2 values are outside"):
        Predictions.from_arrays(high, y)
    # Told "probabilities" (rows not necessarily summing to 1), a value above 1 is named by its cell too.
    over = clean.copy()
    over[row, top] = 1.5
    with pytest.raises(PredictionsError, match=rf"probability above 1 \(1.5\) at row {row}, column {top} "):
        Predictions.from_arrays(over, y, input_type="probabilities")


def test_binary_probabilities_in_two_columns(kitti):
    pos = pbr_core.load_predictions(SAMPLES / "kitti_random_forest.csv")
    p = pos.probs.copy()
    p[5] = [1.02, -0.02]  # one row of a two-column file: the negative is named
    with pytest.raises(PredictionsError, match=r"negative probability -0.02 at row 5, column 1 .*2 values"):
        Predictions.from_arrays(p, pos.labels)


def test_the_user_saying_logits_is_respected(kitti):
    df, cols, row, col = kitti
    data = _bytes(df, cols, "csv")
    preds = load_predictions(data, name="kitti.csv", input_type="logits")
    assert preds.input_type == "logits"
    np.testing.assert_allclose(preds.logits, df[cols].to_numpy())
    np.testing.assert_allclose(preds.probs, softmax(df[cols].to_numpy()))


@pytest.mark.parametrize("name", ["cifar10_resnet110", "cifar100_densenet121"])
def test_real_logits_are_never_taken_for_probabilities(name, tmp_path):
    """The CIFAR logits are centred (every row sums to ~0), others are not: none sums to 1 row after row."""
    z = np.load(SAMPLES / f"{name}.npz")
    logits, labels = z["logits"].astype(np.float64), z["labels"]
    for shifted in (logits, logits + 1.0, logits - logits.min(axis=1, keepdims=True)):  # centred, shifted, >= 0
        assert not rows_sum_to_one(shifted)
        assert Predictions.from_arrays(shifted, labels).input_type == "logits"
    # Written as a table and as an NPZ array named "scores": read as logits by inspection.
    frame = pd.DataFrame(logits[:2000], columns=[f"logit_{k}" for k in range(logits.shape[1])])
    frame["label"] = labels[:2000]
    frame.to_parquet(tmp_path / "z.parquet", index=False)
    np.savez(tmp_path / "z.npz", scores=logits, labels=labels)
    assert load_predictions(tmp_path / "z.parquet").input_type == "logits"
    assert load_predictions(tmp_path / "z.npz").input_type == "logits"
    assert load_predictions(SAMPLES / f"{name}.npz").input_type == "logits"


def test_a_table_with_a_feature_column_beside_the_corrupted_block(kitti):
    """A float feature outside [0, 1] next to the probabilities: the block (with its bad column) is
    still found, the feature kept as metadata, and the cell named."""
    df, cols, row, col = kitti
    wide = df.copy()
    wide.insert(0, "balance", np.linspace(-3.0, 250.0, len(df)))
    with pytest.raises(PredictionsError) as info:
        load_predictions(wide.to_csv(index=False).encode(), name="wide.csv")
    assert f"negative probability -0.05 at row {row + 1} {TABLE_ROW}, column {cols[col]!r}" in str(info.value)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
@pytest.mark.parametrize("where", ["first batch", "later row group"])
def test_streamed_datasets_name_the_cell(kitti, fmt, where, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    import pbr_core.stream as ps

    df, cols, row, col = kitti
    clean = pd.read_csv(SAMPLES / "kitti_multiclass_random_forest.csv")
    if where == "later row group":  # the first 1000 rows clean: the columns are detected on them
        bad_row = 1000 + row
        p, col = _corrupt(clean[cols].to_numpy(dtype=np.float64), bad_row)
        df = clean.copy()
        df[cols] = p
    else:
        bad_row = row
    path = tmp_path / f"stream.{fmt}"
    if fmt == "parquet":
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path, row_group_size=500)
    else:
        df.to_csv(path, index=False)
    with pytest.raises(PredictionsError) as info:
        ps.compute_statistics(ps.open_dataset(str(path)), n_boot=1)
    message = str(info.value)
    assert f"negative probability -0.05 at " in message and f", column {cols[col]!r} " in message, message
    if fmt == "parquet" and where == "later row group":
        assert f"row group {bad_row // 500 + 1}, row {bad_row + 1} of the file" in message, message
    else:
        assert f"row {bad_row + 1} {TABLE_ROW}" in message, message


def test_the_data_page_shows_the_error_in_plain_words(kitti):
    from streamlit.testing.v1 import AppTest

    from dashboard import texts

    df, cols, row, col = kitti
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=60)
    at.run()
    at.file_uploader(key="data_upload").upload("kitti_bad.csv", df.to_csv(index=False).encode(), "text/csv").run()
    assert not at.exception, at.exception
    assert at.error, "no error box"
    shown = at.error[0].value
    assert "Could not load **kitti_bad.csv**" in shown
    assert f"negative probability -0.05 at row {row + 1} {TABLE_ROW}, column {cols[col]!r}" in shown
    assert "Every row sums to 1" in shown and "The score columns hold" in shown  # the page's control
    assert "input_type" not in shown and "=" not in shown.split("Every row")[1]  # no Python advice
    assert texts.RENORMALISE_HINT not in shown  # renormalising does not fix a negative probability
    assert texts.COLUMNS_HINT not in shown  # nor does choosing other columns
    assert at.session_state["pbr_loaded"].file_name != "kitti_bad.csv" and "still in use" in shown
