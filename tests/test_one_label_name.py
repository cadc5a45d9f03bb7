"""Binary labels written as names, with one name only (a day without fraud: every label 'no'), in
memory and streamed (audit 10a, finding 4: refused even with --label-column, and a streamed folder
worked or failed by which file came first).

Decided: a word of a known pair (no/yes, false/true, negative/positive..., case-insensitive: the
vocabulary that decides which of two names is class 1) is read as its class, with a note; so is a
name beside a score column whose header names the other class (audit 12a: 'legit' only beside
p_fraud is class 0); any other single name is an error that says how to write the labels. A stream whose first rows hold one name
reads the label column further until the other appears, and decides the two as one file would."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core.cli import EXIT_BAD_INPUT, EXIT_OK, main
from pbr_core.predictions import PredictionsError
from pbr_core.stream import compute_statistics, evaluate_dataset, open_dataset


def _day(n: int, seed: int, rate: float | None = None, yes: str = "yes", no: str = "no") -> pd.DataFrame:
    """Churn scores with outcomes drawn from them (``rate`` 0: a day with no churn at all)."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.01, 0.6, n)
    y = rng.uniform(size=n) < (p if rate is None else rate)
    return pd.DataFrame({"customer_id": np.arange(n) + 1000 * seed, "p_churn": p, "churn": np.where(y, yes, no)})


def _ece(df: pd.DataFrame, yes: str = "yes") -> float:
    return pbr_core.ece(df["p_churn"].to_numpy(), (df["churn"] == yes).to_numpy().astype(int))


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


# ------------------------------------------------------------------------------------------ in memory
@pytest.mark.parametrize("word, names, k", [("no", ("no", "yes"), 0), ("No", ("No", "Yes"), 0),
                                            ("NO", ("NO", "YES"), 0), ("yes", ("no", "yes"), 1),
                                            ("n", ("n", "y"), 0), ("Positive", ("Negative", "Positive"), 1)])
def test_one_known_word_is_read_as_its_class(word, names, k) -> None:
    df = _day(300, 1, rate=0.0, no=word, yes=word)
    preds = pbr_core.load_predictions(df.to_csv(index=False).encode(), format="csv", name="day.csv")
    assert preds.class_names == names
    np.testing.assert_array_equal(preds.labels, k)
    assert any(f"one class name only, {word!r}" in n for n in preds.notes)
    y = np.full(300, k)
    assert pbr_core.ece(preds.p_positive, preds.labels) == pytest.approx(pbr_core.ece(df["p_churn"].to_numpy(), y))


def test_a_score_column_named_after_the_one_word_makes_it_class_1() -> None:
    """'p_no' beside labels all 'no' is p(no): 'no' is class 1, as with both names present."""
    df = pd.DataFrame({"p_no": [0.8, 0.9, 0.7], "label": ["no", "no", "no"]})
    preds = pbr_core.load_predictions(df)
    assert preds.class_names == ("yes", "no") and preds.labels.tolist() == [1, 1, 1]


def test_a_file_of_no_only_through_the_cli_with_and_without_label_column(capsys, tmp_path) -> None:
    df = _day(882, 2, rate=0.0)
    path = tmp_path / "only_no.csv"
    df.to_csv(path, index=False)
    for extra in ((), ("--label-column", "churn")):
        code, out, err = _run(capsys, "evaluate", path, "--format", "json", *extra)
        assert code == EXIT_OK, err
        t = json.loads(out)
        assert t["n"] == 882 and t["ece"] == pytest.approx(_ece(df), abs=1e-12)


def test_an_unknown_single_name_is_a_clear_error() -> None:
    # p_fraud names class 1: 'legit', another name, is class 0 (before audit 12a: this error)
    df = pd.DataFrame({"p_fraud": [0.1, 0.2, 0.05], "label": ["legit"] * 3})
    preds = pbr_core.load_predictions(df)
    assert preds.class_names == ("legit", "fraud") and preds.labels.tolist() == [0, 0, 0]
    assert any("holds one class name only, 'legit': read as class 0" in n for n in preds.notes)
    # a header that names no class: one name alone says nothing
    with pytest.raises(PredictionsError) as info:
        pbr_core.load_predictions(df.rename(columns={"p_fraud": "score"}))
    message = str(info.value)
    assert "holds one class name only, 'legit'" in message
    assert "Write the labels as 0/1" in message and "no/yes" in message
    df["label"] = "fraud"  # the class the score names: the other's name is still unknown
    with pytest.raises(PredictionsError, match="the file does not name the other class"):
        pbr_core.load_predictions(df)


# ------------------------------------------------------------------------------------------ streamed
def test_a_folder_whose_first_day_is_all_no(capsys, tmp_path) -> None:
    """Day 0 without churn, day 1 with both: the same numbers in either order, equal to the rows in memory."""
    quiet, busy = _day(453, 3, rate=0.0), _day(900, 4)
    both = pd.concat([quiet, busy], ignore_index=True)
    results = []
    for order in ((quiet, busy), (busy, quiet)):
        folder = tmp_path / f"logs{len(results)}"
        folder.mkdir()
        for i, day in enumerate(order):
            day.to_csv(folder / f"day{i}.csv", index=False)
        code, out, err = _run(capsys, "evaluate", folder, "--format", "json", "--quiet")
        assert code == EXIT_OK, err
        results.append(json.loads(out))
    for t in results:
        assert t["n"] == len(both) and t["ece"] == pytest.approx(_ece(both), abs=1e-12)
    assert any("hold only 'no'" in n and "day1.csv" in n for n in results[0]["notes"])


def test_a_stream_whose_first_batch_is_all_no(tmp_path) -> None:
    """One file sorted by its outcome, read in batches of 100 rows: the first 400 rows are all 'no'."""
    df = pd.concat([_day(400, 5, rate=0.0), _day(600, 6)], ignore_index=True)
    path = tmp_path / "sorted.csv"
    df.to_csv(path, index=False)
    ds = open_dataset(path, batch_rows=100)
    assert ds.layout().class_names == ("no", "yes")
    report = evaluate_dataset(ds, compute_statistics(ds, n_boot=10))
    assert report["n"] == 1000 and report["ece"] == pytest.approx(_ece(df), abs=1e-12)


def test_a_stream_of_one_name_throughout(capsys, tmp_path) -> None:
    df = _day(500, 7, rate=0.0)
    df.to_csv(tmp_path / "quiet.csv", index=False)
    code, out, err = _run(capsys, "evaluate", tmp_path / "quiet.csv", "--stream", "--format", "json", "--quiet")
    assert code == EXIT_OK, err
    assert json.loads(out)["ece"] == pytest.approx(_ece(df), abs=1e-12)
    df["churn"] = "stayed"  # p_churn names class 1, churn: 'stayed' is class 0 (audit 12a), as in memory
    df.to_csv(tmp_path / "quiet.csv", index=False)
    code, out, err = _run(capsys, "evaluate", tmp_path / "quiet.csv", "--stream", "--format", "json", "--quiet")
    assert code == EXIT_OK, err
    assert json.loads(out)["ece"] == pytest.approx(_ece(df, yes="churn"), abs=1e-12)
    df["churn"] = "churned"  # a form of the class the header names, perhaps: not read as its opposite
    df.to_csv(tmp_path / "quiet.csv", index=False)
    code, _, err = _run(capsys, "evaluate", tmp_path / "quiet.csv", "--stream", "--quiet")
    assert code == EXIT_BAD_INPUT
    assert "every row of the dataset" in err and "holds one class name only, 'churned'" in err


def test_streamed_names_outside_the_vocabulary_are_settled_by_the_score_column(tmp_path) -> None:
    """'legit' alone first, then 'churn' too: p_churn names class 1, as in memory."""
    quiet, busy = _day(300, 8, rate=0.0, no="legit"), _day(300, 9, no="legit", yes="churn")
    quiet.to_parquet(tmp_path / "a.parquet")
    busy.to_parquet(tmp_path / "b.parquet")
    ds = open_dataset(tmp_path)
    assert ds.layout().class_names == ("legit", "churn")
    both = pd.concat([quiet, busy], ignore_index=True)
    report = evaluate_dataset(ds, compute_statistics(ds, n_boot=10))
    assert report["ece"] == pytest.approx(_ece(both, yes="churn"), abs=1e-12)
    busy["churn"] = busy["churn"].replace("churn", "left")  # two names, neither named by the score column
    busy.to_parquet(tmp_path / "b.parquet")
    with pytest.raises(PredictionsError) as info:
        open_dataset(tmp_path).layout()
    assert "hold only 'legit'" in str(info.value) and "b.parquet" in str(info.value)
    assert "does not say which class" in str(info.value)


def test_fit_sample_and_folder_apply_with_a_quiet_first_day(capsys, tmp_path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    _day(453, 10, rate=0.0).to_csv(folder / "day0.csv", index=False)
    _day(900, 11).to_csv(folder / "day1.csv", index=False)
    model = tmp_path / "platt.json"
    code, _, err = _run(capsys, "fit", folder, "--sample", "1000", "--method", "platt", "--out", model)
    assert code == EXIT_OK, err
    code, _, err = _run(capsys, "apply", model, folder, "--out", tmp_path / "out")
    assert code == EXIT_OK, err
    out = pd.read_parquet(tmp_path / "out" / "day0.parquet")
    assert len(out) == 453 and (out["churn"] == "no").all()
