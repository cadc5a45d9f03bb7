"""The loader's note on rows that are exact copies of another row (audit 9b, finding 3: every row twice made a
calibrated model read as miscalibrated in 17-18 % of files, the MCB in 40-82 %, with no warning).

Known truth both ways: doubled calibrated files get the note at every size; independent rows never
(real files of real models, their own repeats included; a 10-tree forest's and rounded exports' scores;
draws with replacement from a file, which repeat rows by chance; the chance bound's worst case)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pbr_core import Predictions
from pbr_core.cli import main
from pbr_core.loading import load_predictions
from pbr_core.loading._duplicates import MIN_SHARE, chance_share, duplicate_rows

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted(p for p in (ROOT / "sample_data").iterdir() if p.suffix != ".md")
P_ADULT = pd.read_csv(ROOT / "sample_data" / "adult_gradient_boosting.csv.gz")["p_gt50k"].to_numpy()


def _note(preds: Predictions) -> str | None:
    return next((n for n in preds.notes if "exact copies of another row" in n), None)


def _doubled(rng, n: int) -> pd.DataFrame:
    p = P_ADULT[rng.integers(0, P_ADULT.size, n // 2)]
    df = pd.DataFrame({"p_gt50k": p, "label": (rng.random(p.size) < p).astype(int)})
    return df.loc[np.repeat(df.index, 2)].reset_index(drop=True)


@pytest.mark.parametrize("n", [20, 80, 500, 2000])
def test_a_doubled_calibrated_file_gets_the_note(n):
    """Audit 9b's cell dup2 (a join that doubled the file), read as CSV bytes as a user's file is."""
    rng = np.random.default_rng(n)
    for _ in range(5):
        preds = load_predictions(_doubled(rng, n).to_csv(index=False).encode(), format="csv")
        note = _note(preds)
        assert note is not None, preds.notes
        copies = int(note.split(" of the ")[0].replace(",", ""))  # the model's own repeats come on top
        assert copies >= n // 2 and f" of the {n:,} rows (" in note and "are exact copies of another row" in note
        assert "count each row as a separate case" in note and "look miscalibrated" in note
        assert "remove them" in note and "real separate case" in note and "leave them" in note
        assert "Nothing was removed" in note and preds.n == n  # said, not done


def test_every_loader_path_says_it():
    """A DataFrame in memory, Parquet, JSON Lines and NPZ arrays: all end in the same notes."""
    df = _doubled(np.random.default_rng(0), 400)
    df["city"] = np.repeat(np.random.default_rng(1).choice(["Lyon", "Oslo", None], 200), 2)
    assert _note(load_predictions(df)) is not None
    buf = io.BytesIO()
    df.to_parquet(buf)
    assert _note(load_predictions(buf.getvalue(), format="parquet")) is not None
    assert _note(load_predictions(df.to_json(orient="records", lines=True).encode(), format="jsonl")) is not None
    buf = io.BytesIO()
    np.savez(buf, probs=df["p_gt50k"].to_numpy(), labels=df["label"].to_numpy())
    assert _note(load_predictions(buf.getvalue(), format="npz")) is not None


def test_a_column_that_differs_makes_rows_no_copies():
    """Same scores and labels, but an id or a date per row: separate cases, no note."""
    df = _doubled(np.random.default_rng(2), 400)
    df["row_id"] = [f"r{i}" for i in range(len(df))]
    assert _note(load_predictions(df)) is None
    d = duplicate_rows(load_predictions(df.drop(columns="row_id")))
    assert (d.copies, d.notable) == (200, True)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_the_real_sample_files_get_no_note(path):
    """Real models' files, whose own repeats are many (a random forest's 9,090 KITTI rows hold 8,864 copies
    of another row, the Adult file 182 with its 10 other columns) but of the shape chance gives."""
    preds = load_predictions(path)
    assert _note(preds) is None
    rng = np.random.default_rng(5)
    # draws with replacement: independent rows that repeat by chance, more so at 2,000 of 9,090
    for n in (20, 500, 2000):
        assert not any(duplicate_rows(preds.subset(rng.integers(0, preds.n, n))).notable for _ in range(20))


def test_tree_and_rounded_scores_get_no_note():
    """Scores that repeat by design, with no other column to tell rows apart: a 10-tree forest (steps of
    0.1), 1- and 2-decimal exports, sklearn's 10-tree forest. Measured while choosing the rule: 0 notes in
    200 files each at 20, 80, 500 and 2,000 rows of each kind."""
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(6)
    for n in (20, 80, 500, 2000):
        for _ in range(20):
            p = P_ADULT[rng.integers(0, P_ADULT.size, n)]
            y = (rng.random(n) < p).astype(int)
            for q in (np.round(p, 1), np.round(p, 2), np.round(p * 10) / 10):
                assert not duplicate_rows(Predictions.from_arrays(q, y, input_type="probabilities")).notable
    X = rng.normal(size=(3000, 3)).round(1)
    y = (rng.random(3000) < 1 / (1 + np.exp(-X[:, 0]))).astype(int)
    forest = RandomForestClassifier(n_estimators=10, random_state=0).fit(X[:1000], y[:1000])
    preds = Predictions.from_estimator(forest, X[1000:], y[1000:])
    d = duplicate_rows(preds)
    assert d.copies > 1000 and not d.notable, d


def test_the_chance_bound_holds_at_its_worst_case():
    """Rows drawn from m values equally often, at the rate where chance comes nearest the bound
    (sqrt(k (k + 1)) per value): the note stays rare (measured: 1 of 4,500 files of 20-20,000 rows at
    rates 1, 2.45 and 4; here 0 of 300)."""
    rng = np.random.default_rng(7)
    assert chance_share(2) == pytest.approx(0.6124, abs=1e-4)
    notes = 0
    for lam in (6 ** 0.5, 12 ** 0.5):
        for n in (20, 200, 2000):
            m = max(2, round(n / lam))
            for _ in range(50):
                p = (rng.integers(0, m, n) + 0.5) / m
                notes += duplicate_rows(Predictions.from_arrays(p, np.zeros(n, int), input_type="probabilities")).notable
    assert notes <= 2


def test_a_few_copies_are_not_notable():
    """Under MIN_SHARE of the rows copied: no note (their effect on the tests is small)."""
    rng = np.random.default_rng(8)
    p = rng.random(1000)
    y = (rng.random(1000) < p).astype(int)
    k = int(MIN_SHARE * 1000) - 10
    preds = Predictions.from_arrays(np.r_[p, p[:k]], np.r_[y, y[:k]], input_type="probabilities")
    d = duplicate_rows(preds)
    assert d.copies == k and not d.notable


def test_evaluate_lists_it_under_how_the_file_was_read(tmp_path, capsys):
    path = tmp_path / "joined.csv"
    _doubled(np.random.default_rng(9), 300).to_csv(path, index=False)
    assert main(["evaluate", str(path)]) == 0
    text = capsys.readouterr().out
    assert "how the file was read:" in text
    assert "of the 300 rows (50 %) are exact copies of another row" in text.split("how the file was read:")[1]
    assert main(["evaluate", str(path), "--format", "json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("of the 300 rows (50 %) are exact copies of another row" in n for n in notes)


def test_a_list_valued_column_loads_and_its_copies_are_still_counted(tmp_path):
    """Review 10: a column of lists (an LLM export's 'choices') made the row hash raise, and every load of
    such a file failed (DataFrame, JSON Lines, Parquet), copies or not."""
    import pandas as pd

    import pbr_core

    frame = pd.DataFrame({"p": [0.2, 0.2, 0.7], "label": [0, 0, 1], "tags": [["a"], ["a", "b"], ["b"]]})
    assert pbr_core.load_predictions(frame).n == 3
    frame.to_json(tmp_path / "records.jsonl", orient="records", lines=True)
    frame.to_parquet(tmp_path / "records.parquet")
    for name in ("records.jsonl", "records.parquet"):
        assert pbr_core.load_predictions(tmp_path / name).n == 3
    rng = np.random.default_rng(4)
    p = rng.uniform(size=300)
    one = pd.DataFrame({"p": p, "label": (rng.random(300) < p).astype(int),
                        "tags": [[f"t{i % 7}", f"u{i % 5}"] for i in range(300)]})
    doubled = pbr_core.load_predictions(pd.concat([one, one], ignore_index=True))
    assert any("exact copies of another row" in note for note in doubled.notes)
    assert not any("exact copies" in note for note in pbr_core.load_predictions(one).notes)
