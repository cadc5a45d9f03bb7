"""``pbr-calib apply`` writes every column it does not change as it was (audit 10a, finding 6: ZIP
01234 came back as 1234 and account 000789 as 789, in CSV and Parquet output and in the streamed
apply of a folder, while the command said "every other column is as it was")."""

from __future__ import annotations

import csv
import io

import numpy as np
import pandas as pd
import pytest

from pbr_core.cli import EXIT_OK, main
from pbr_core.loading import read_csv_text
from pbr_core.recalibrators import PlattScaling
import pbr_core

ZIPS = ["01234", "02139", "10001", "00501"]
ACCOUNTS = ["000789", "000790", "000791", "000792"]


def _rows(n: int = 200, seed: int = 0) -> list[list[str]]:
    """Cells as a spreadsheet export writes them: zero-padded ids, a price with a trailing zero, a
    whole number written as 7.0, an empty cell, a 'NA' text, a date in day/month order."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.05, 0.95, n)
    y = (rng.uniform(size=n) < p).astype(int)
    rows = []
    for i in range(n):
        rows.append([ZIPS[i % 4], ACCOUNTS[i % 4] if i % 5 else f"{i:06d}", f"{p[i]:.4f}", str(y[i]),
                     ["1.50", "2.00", "7.0", "", "NA"][i % 5], f"{1 + i % 28:02d}/03/2024"])
    return rows


HEADER = ["zip", "account_no", "p_positive", "label", "price", "day"]
#: The price is a number as well: named, the score column leaves it metadata.
SCORES = ("--score-columns", "p_positive")


def _write(path, rows, sep: str = ",") -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f, delimiter=sep)
        w.writerow(HEADER)
        w.writerows(rows)


@pytest.fixture(scope="module")
def platt(tmp_path_factory):
    rows = _rows(400, seed=1)
    p = np.array([float(r[2]) for r in rows])
    y = np.array([int(r[3]) for r in rows])
    path = tmp_path_factory.mktemp("model") / "platt.json"
    PlattScaling().fit(pbr_core.Predictions.from_predictions(y, p)).save(path)
    return path


def _run(capsys, *argv) -> str:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    return out


def test_csv_to_csv_keeps_every_cell_it_does_not_change(capsys, tmp_path, platt) -> None:
    rows = _rows()
    _write(tmp_path / "in.csv", rows)
    _run(capsys, "apply", platt, tmp_path / "in.csv", "--out", tmp_path / "out.csv", *SCORES)
    with open(tmp_path / "out.csv", newline="") as f:
        written = list(csv.reader(f))
    assert written[0] == HEADER
    for before, after in zip(rows, written[1:]):
        kept = [c for j, c in enumerate(before) if HEADER[j] != "p_positive"]
        assert [c for j, c in enumerate(after) if HEADER[j] != "p_positive"] == kept
        assert float(after[2]) != float(before[2])  # the one column apply changes
    assert len(written) == len(rows) + 1


def test_a_semicolon_decimal_comma_export_keeps_its_cells(capsys, tmp_path, platt) -> None:
    rows = [[r[0], r[1], r[2].replace(".", ","), r[3], r[4].replace(".", ","), r[5]] for r in _rows(60)]
    _write(tmp_path / "in.csv", rows, sep=";")
    _run(capsys, "apply", platt, tmp_path / "in.csv", "--out", tmp_path / "out.csv", *SCORES)
    out = pd.read_csv(tmp_path / "out.csv", dtype=str, keep_default_na=False)
    assert out["zip"].tolist() == [r[0] for r in rows]
    assert out["price"].tolist() == [r[4] for r in rows]  # "1,50" as written, quoted in the comma file


def test_csv_to_parquet_writes_the_other_columns_as_their_text(capsys, tmp_path, platt) -> None:
    rows = _rows()
    _write(tmp_path / "in.csv", rows)
    out = _run(capsys, "apply", platt, tmp_path / "in.csv", "--out", tmp_path / "out.parquet", *SCORES)
    assert "as text, as the CSV wrote them" in out
    df = pd.read_parquet(tmp_path / "out.parquet")
    assert df["zip"].tolist() == [r[0] for r in rows]
    assert df["account_no"].tolist() == [r[1] for r in rows]
    assert df["price"].tolist() == [r[4] for r in rows]
    assert df["label"].tolist() == [int(r[3]) for r in rows]  # the label keeps its type


def test_streamed_apply_of_a_csv_folder_keeps_the_text(capsys, tmp_path, platt) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    days = [_rows(150, seed=2), _rows(90, seed=3)]
    for i, rows in enumerate(days):
        _write(folder / f"day{i}.csv", rows)
    out = _run(capsys, "apply", platt, folder, "--out", tmp_path / "out", *SCORES)
    assert "leading zeros kept" in out
    for i, rows in enumerate(days):
        df = pd.read_parquet(tmp_path / "out" / f"day{i}.parquet")
        assert df["zip"].tolist() == [r[0] for r in rows]
        assert df["account_no"].tolist() == [r[1] for r in rows]
        assert df["price"].tolist() == [r[4] for r in rows]
        assert df["day"].tolist() == [r[5] for r in rows]
        np.testing.assert_allclose(df["p_positive"], [float(r[2]) for r in rows])


def test_streamed_text_rows_follow_small_batches(tmp_path, platt) -> None:
    """Batches of 7 rows: the text reader's rows are cut to the typed reader's counts."""
    from pbr_core.recalibrators import load_recalibrator
    from pbr_core.stream import apply_to_dataset, open_dataset

    rows = _rows(50, seed=4)
    _write(tmp_path / "in.csv", rows)
    written = apply_to_dataset(load_recalibrator(platt), open_dataset(tmp_path / "in.csv", batch_rows=7,
                                                                                score_columns="p_positive"),
                               tmp_path / "out")
    df = pd.read_parquet(written[0])
    assert df["account_no"].tolist() == [r[1] for r in rows]


def test_read_csv_text_leaves_out_trailing_empty_rows_and_refuses_a_changed_file(tmp_path) -> None:
    path = tmp_path / "in.csv"
    path.write_text("zip,p,label\n01234,0.2,0\n00501,0.7,1\n,,\n")
    text = read_csv_text(path, ["zip", "label", "row index"], 2)
    assert text["zip"].tolist() == ["01234", "00501"] and list(text.columns) == ["zip", "label"]
    with pytest.raises(pbr_core.PredictionsError, match="has 3 data rows, not the 4 read before"):
        read_csv_text(path, ["zip"], 4)
    assert read_csv_text(io.BytesIO(b"PAR1"), ["zip"], 1, format="parquet") is None
