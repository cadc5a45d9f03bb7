"""A saved pandas index (audit 8's optdigits_predict_proba.csv: sklearn's predict_proba of a shuffled
test split saved with ``to_csv()``, an unnamed first column of distinct whole numbers) is the rows' ids:
it is kept as the metadata column 'row index' and written back first by the dashboard's "Calibrated
predictions (CSV)" download and ``pbr-calib apply``, so the calibrated rows join back to the source
(they were written as ``0,...,9,y_true`` without it)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core.cli import EXIT_OK, main

N, K = 600, 10


@pytest.fixture(scope="module")
def proba_csv() -> bytes:
    """predict_proba of a shuffled split: columns 0..9 and y_true, the index a permutation of 0..1796."""
    rng = np.random.default_rng(80)
    logits = rng.normal(size=(N, K)) * 2
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = np.array([rng.choice(K, p=row) for row in p])
    df = pd.DataFrame(p, columns=[str(k) for k in range(K)], index=rng.permutation(1797)[:N])
    df["y_true"] = y
    return df.to_csv().encode()


def _index_of(data: bytes) -> np.ndarray:
    return pd.read_csv(io.BytesIO(data), index_col=0).index.to_numpy()


def test_the_index_is_kept_as_metadata_with_a_note(proba_csv):
    preds = pbr_core.load_predictions(proba_csv, format="csv")
    assert preds.column_roles[0] == ("row index", "metadata") and preds.n_classes == K
    np.testing.assert_array_equal(preds.metadata["row index"].to_numpy(), _index_of(proba_csv))
    note = next(n for n in preds.notes if "saved row index" in n)
    assert note.startswith("Kept an unnamed first column") and "'row index'" in note and "Dropped" not in note


def test_the_dashboard_download_writes_it_back_first(proba_csv):
    from dashboard import runs

    preds = pbr_core.load_predictions(proba_csv, format="csv")
    result = runs.run_ship(preds, runs.FitSettings(method="temperature", holdout=0.3), runs.NullReporter())
    data = result.calibrated_csv()
    head = data.decode().splitlines()[0].split(",")
    assert head[0] == "row index" and head[1:K + 2] == [*map(str, range(K)), "y_true"]
    np.testing.assert_array_equal(_index_of(data), _index_of(proba_csv))
    back = pbr_core.load_predictions(data, format="csv")  # reads back with the index as metadata again
    np.testing.assert_array_equal(back.metadata["row index"].to_numpy(), _index_of(proba_csv))


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_cli_apply_writes_it_back_first(proba_csv, tmp_path, capsys, suffix):
    data, model, out = tmp_path / "optdigits.csv", tmp_path / "t.json", tmp_path / f"calibrated{suffix}"
    data.write_bytes(proba_csv)
    assert main(["fit", str(data), "--method", "temperature", "--out", str(model)]) == EXIT_OK
    assert main(["apply", str(model), str(data), "--out", str(out)]) == EXIT_OK
    capsys.readouterr()
    written = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
    assert list(written.columns)[:2] == ["row index", "0"]
    np.testing.assert_array_equal(written["row index"].to_numpy(), _index_of(proba_csv))


def _ids_parquet(path, name: str | None) -> pd.DataFrame:
    """A frame indexed by transaction ids, saved with ``to_parquet()``: pandas stores the index as a column."""
    rng = np.random.default_rng(81)
    p = rng.uniform(size=300)
    df = pd.DataFrame({"fraud_score": p, "is_fraud": (rng.uniform(size=300) < p).astype(int),
                       "region": rng.choice(["north", "south"], size=300)},
                      index=pd.Index([f"tx{i:05d}" for i in rng.permutation(300)], name=name))
    df.to_parquet(path)
    return df


@pytest.mark.parametrize("name", ["txn", None])
def test_a_parquet_index_is_kept_as_metadata(tmp_path, name):
    """Before, ``to_parquet()``'s stored index was silently dropped (the ids gone from every download)."""
    df = _ids_parquet(tmp_path / "tx.parquet", name)
    preds = pbr_core.load_predictions(tmp_path / "tx.parquet")
    column = name or "index"  # as a loaded DataFrame's unnamed index (reset_index's name)
    assert column in preds.metadata.columns and preds.n == 300
    assert preds.metadata[column].tolist() == df.index.tolist()
    np.testing.assert_allclose(preds.probs[:, 1], df["fraud_score"].to_numpy())


def test_a_parquet_range_index_stays_dropped(tmp_path):
    rng = np.random.default_rng(82)
    p = rng.uniform(size=100)
    pd.DataFrame({"score": p, "label": (rng.uniform(size=100) < p).astype(int)}).iloc[20:].to_parquet(tmp_path / "r.parquet")
    preds = pbr_core.load_predictions(tmp_path / "r.parquet")  # RangeIndex(20, 100): metadata only, no ids
    assert preds.metadata is None and preds.n == 80


def test_a_parquet_index_can_be_grouped_by_when_streamed(tmp_path, capsys):
    """The streamed reader sees the stored index too (before: "group column 'txn' is not a column")."""
    import json

    rng = np.random.default_rng(83)
    p = rng.uniform(size=300)
    pd.DataFrame({"score": p, "label": (rng.uniform(size=300) < p).astype(int)},
                 index=pd.Index([f"shop{i % 3}" for i in range(300)], name="shop")).to_parquet(tmp_path / "s.parquet")
    outs = []
    for stream in (["--stream"], []):
        assert main(["evaluate", str(tmp_path / "s.parquet"), *stream, "--by", "shop", "--format", "json"]) == EXIT_OK
        outs.append(json.loads(capsys.readouterr().out)["groups"])
    streamed, whole = outs
    assert streamed["by"] == whole["by"] == ["shop"]
    assert sorted(g["n"] for g in streamed["rows"]) == sorted(g["n"] for g in whole["rows"]) == [100, 100, 100]


def test_a_parquet_index_named_like_a_column_is_left_out(tmp_path):
    """Review 10: set_index('txn', drop=False).to_parquet() stores 'txn' twice (column and index); the file
    was refused with "duplicate column header(s) 'txn'" although its columns are unique."""
    rng = np.random.default_rng(84)
    p = rng.uniform(size=120)
    frame = pd.DataFrame({"txn": [f"t{i}" for i in range(120)], "score": p, "label": (rng.random(120) < p).astype(int)})
    frame.set_index("txn", drop=False).to_parquet(tmp_path / "both.parquet")
    preds = pbr_core.load_predictions(tmp_path / "both.parquet")
    assert preds.n == 120 and list(preds.metadata.columns) == ["txn"]
    assert preds.metadata["txn"].tolist() == frame["txn"].tolist()
