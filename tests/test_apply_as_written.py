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
    said = _run(capsys, "apply", platt, tmp_path / "in.csv", "--out", tmp_path / "out.csv", *SCORES)
    # audit 12a: written back in the file's own dialect (before: comma-separated, which a European
    # spreadsheet opens as one column), the probabilities with its decimal comma
    out = pd.read_csv(tmp_path / "out.csv", sep=";", dtype=str, keep_default_na=False)
    assert list(out.columns) == HEADER
    assert out["zip"].tolist() == [r[0] for r in rows]
    assert out["price"].tolist() == [r[4] for r in rows]  # "1,50" as written
    # csv.writer ends its rows in CRLF, as the output does
    assert ("(in your file's own format: semicolon-separated, decimal commas, UTF-8, CRLF (Windows) line ends; your "
            "other columns as written; the probabilities as fractions from 0 to 1)") in said
    assert (tmp_path / "out.csv").read_bytes().count(b"\r\n") == len(rows) + 1
    assert "'.' decimal points" not in said
    assert all("." not in p and "," in p for p in out["p_positive"])


def _numbers(cells: list[str], decimal: str = ".") -> list[float]:
    return [float(c.replace(decimal, ".")) if c not in ("", "NA") else np.nan for c in cells]


@pytest.mark.parametrize("sep,decimal", [(",", "."), (";", ",")])
def test_csv_to_parquet_writes_text_only_where_a_number_would_not_give_it_back(capsys, tmp_path, platt, sep,
                                                                                decimal) -> None:
    """Audit 11 finding 4: into Parquet, which is typed, every other column had become text (an amount
    4.50 a string). Only the columns whose numbers lose what was written (the ZIP 01234, the account
    000789) or that are not numbers (a day/month date) are text; the price (1.50, 2.00, 7.0, empty,
    NA) stays a number column, with nulls, as before, also written with decimal commas."""
    rows = [[r[0], r[1], r[2].replace(".", decimal), r[3], r[4].replace(".", decimal), r[5]] for r in _rows()]
    _write(tmp_path / "in.csv", rows, sep=sep)
    out = _run(capsys, "apply", platt, tmp_path / "in.csv", "--out", tmp_path / "out.parquet", *SCORES)
    assert ("('zip', 'account_no', 'day' as text, as the CSV wrote them: as numbers they would lose leading zeros "
            "or digits, or they are not numbers; the other columns keep their types)") in out
    df = pd.read_parquet(tmp_path / "out.parquet")
    assert df["zip"].tolist() == [r[0] for r in rows]
    assert df["account_no"].tolist() == [r[1] for r in rows]
    assert df["day"].tolist() == [r[5] for r in rows]
    assert df["price"].dtype == np.float64
    np.testing.assert_array_equal(df["price"].to_numpy(), _numbers([r[4] for r in rows], decimal))
    assert df["label"].tolist() == [int(r[3]) for r in rows]  # the label keeps its type


def test_which_columns_numbers_give_back() -> None:
    from pbr_core.loading.writing import numbers_as_written

    def kind(cells, decimal="."):
        return numbers_as_written(pd.Series(cells), decimal)

    assert kind(["4.50", "2.00", "7.0", "", "NA"]) == "float"
    assert kind(["1", "-2", "+3", "0"]) == "int"
    assert kind(["0.5", ".5", "1e-3"]) == "float"
    assert kind(["", "NA"]) == "float"  # all missing: a CSV reader's float column
    assert kind(["01234", "10001"]) is None and kind(["000789"]) is None and kind(["-01"]) is None
    assert kind(["1234567890123456789"]) is None  # 19 digits: a float keeps 15 to 17
    assert kind(["123456789012345"]) == "int"
    assert kind(["01/03/2024"]) is None and kind(["yes", "1"]) is None
    assert kind(["11,50", "4,5"], ",") == "float" and kind(["11,50"]) is None


def test_streamed_apply_of_a_csv_folder_keeps_the_text(capsys, tmp_path, platt) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    days = [_rows(150, seed=2), _rows(90, seed=3)]
    for i, rows in enumerate(days):
        _write(folder / f"day{i}.csv", rows)
    # a third day whose accounts have no leading zero: numbers in that day's file (one schema per file)
    days.append([[r[0], str(1000 + i), *r[2:]] for i, r in enumerate(_rows(40, seed=5))])
    _write(folder / "day2.csv", days[2])
    out = _run(capsys, "apply", platt, folder, "--out", tmp_path / "out", *SCORES)
    assert ("in each file, another column is the text written in the CSV file where a cell is not a number or "
            "would lose leading zeros or digits as one, and numbers otherwise") in out
    for i, rows in enumerate(days):
        df = pd.read_parquet(tmp_path / "out" / f"day{i}.parquet")
        assert df["zip"].tolist() == [r[0] for r in rows]
        if i < 2:
            assert df["account_no"].tolist() == [r[1] for r in rows]
        else:
            assert df["account_no"].dtype == np.int64 and df["account_no"].tolist() == [int(r[1]) for r in rows]
        # audit 11: the price (4.50) had become text; a number column stays one, nulls where empty / NA
        assert df["price"].dtype == np.float64
        np.testing.assert_array_equal(df["price"].to_numpy(), _numbers([r[4] for r in rows]))
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
    # decided over the whole file, not batch by batch (one schema for the file's 8 batches)
    np.testing.assert_array_equal(df["price"].to_numpy(), _numbers([r[4] for r in rows]))


def test_read_csv_text_leaves_out_trailing_empty_rows_and_refuses_a_changed_file(tmp_path) -> None:
    path = tmp_path / "in.csv"
    path.write_text("zip,p,label\n01234,0.2,0\n00501,0.7,1\n,,\n")
    text = read_csv_text(path, ["zip", "label", "row index"], 2)
    assert text["zip"].tolist() == ["01234", "00501"] and list(text.columns) == ["zip", "label"]
    with pytest.raises(pbr_core.PredictionsError, match="has 3 data rows, not the 4 read before"):
        read_csv_text(path, ["zip"], 4)
    assert read_csv_text(io.BytesIO(b"PAR1"), ["zip"], 1, format="parquet") is None
