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
