"""The label column found by its values when no column is named like one (pbr_core/loading/_outcome.py):
`won`, `two_year_recid` (0/1 beside one score column), `diagnosis` (class names equal to the score
columns' headers), class ids 0..K-1 beside K score columns. Real KITTI and CIFAR-10 predictions; the
rate at which an unrelated column is taken, and a real one missed, pinned by simulation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core import PredictionsError, load_predictions

ROOT = Path(__file__).resolve().parents[1]
LESIONS = ["akiec", "bcc", "bkl", "df", "mel", "nv", "vasc", "other"]   # 8 names for KITTI's 8 classes


def _csv(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode()


@pytest.fixture(scope="module")
def kitti() -> pd.DataFrame:
    return pd.read_csv(ROOT / "sample_data" / "kitti_random_forest.csv")


@pytest.fixture(scope="module")
def kitti8() -> pd.DataFrame:
    return pd.read_csv(ROOT / "sample_data" / "kitti_multiclass_random_forest.csv")


def _label_note(preds) -> str:
    return next(n for n in preds.notes if n.startswith("Label column:"))


def test_won_beside_one_score_column_is_the_label(kitti):
    df = kitti.rename(columns={"label": "won", "p_positive": "p_dem"})
    df.insert(0, "race_id", [f"race-{i:05d}" for i in range(len(df))])
    df["branch"] = np.where(np.arange(len(df)) % 3 == 0, "house", "senate")
    preds = load_predictions(_csv(df), format="csv")
    assert preds.kind == "binary" and dict(preds.column_roles)["won"] == "label"
    assert "'won' (not named as a label, taken for its values: 0 and 1 beside the one score column 'p_dem'" \
        in _label_note(preds)
    np.testing.assert_array_equal(preds.labels, kitti["label"].to_numpy())
    assert pbr_core.ece(preds.p_positive, preds.labels) == pytest.approx(
        pbr_core.ece(kitti["p_positive"].to_numpy(), kitti["label"].to_numpy()), abs=1e-12)


def test_two_year_recid_beside_ids_and_race_is_the_label(kitti):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"person_id": np.arange(1, len(kitti) + 1), "race": rng.choice(["A", "B", "C"], len(kitti)),
                       "sex": rng.choice(["Male", "Female"], len(kitti)), "p_recid": kitti["p_positive"],
                       "two_year_recid": kitti["label"]})
    preds = load_predictions(_csv(df), format="csv")
    roles = dict(preds.column_roles)
    assert roles["two_year_recid"] == "label" and roles["p_recid"] == "score" and roles["person_id"] == "metadata"
    # true/false and no/yes outcomes too (their class 1 is known)
    for written in (df["two_year_recid"].map({0: "false", 1: "true"}), df["two_year_recid"].map({0: "no", 1: "yes"})):
        preds = load_predictions(_csv(df.assign(two_year_recid=written)), format="csv")
        np.testing.assert_array_equal(preds.labels, kitti["label"].to_numpy())


def test_a_diagnosis_written_as_class_names_is_the_label(kitti8):
    df = kitti8.rename(columns={f"class_{k}": name for k, name in enumerate(LESIONS)})
    df["diagnosis"] = np.array(LESIONS)[kitti8["label"].to_numpy()]
    df = df.drop(columns="label")
    df.insert(0, "image_id", [f"ISIC_{i:07d}" for i in range(len(df))])
    preds = load_predictions(_csv(df), format="csv")
    assert preds.kind == "multiclass" and preds.class_names == tuple(LESIONS)
    np.testing.assert_array_equal(preds.labels, kitti8["label"].to_numpy())
    assert "every value the name of a score column" in _label_note(preds)
    # written in capitals, or against headers with a prefix ('p_akiec')
    upper = df.assign(diagnosis=df["diagnosis"].str.upper())
    np.testing.assert_array_equal(load_predictions(_csv(upper), format="csv").labels, kitti8["label"].to_numpy())
    prefixed = df.rename(columns={n: f"p_{n}" for n in LESIONS})
    np.testing.assert_array_equal(load_predictions(_csv(prefixed), format="csv").labels, kitti8["label"].to_numpy())


def test_class_ids_beside_k_score_columns_are_the_label_and_a_fold_or_batch_is_not(kitti8):
    n = len(kitti8)
    df = kitti8.rename(columns={"label": "cls"})
    df["fold"] = np.arange(n) % 8           # a data split by name
    df["batch"] = np.arange(n) % 8          # 0..7 as well, but no better than chance against the scores
    preds = load_predictions(_csv(df), format="csv")
    assert dict(preds.column_roles)["cls"] == "label"
    assert "whole numbers in 0..7 beside 8 score columns" in _label_note(preds)
    with pytest.raises(PredictionsError, match="no label column"):
        load_predictions(_csv(df.drop(columns="cls")), format="csv")


def test_an_id_column_0_to_k_minus_1_in_a_small_file_is_never_taken(kitti8):
    """Eight rows, eight classes: an id 0..7 fits the classes' range, but not the scores. In files this
    small the true labels are taken, or (too few rows to tell them from chance, or a perfect fit) asked
    for; the id never."""
    outcomes = []
    for seed in range(10):
        df = kitti8.sample(8, random_state=seed).rename(columns={"label": "cls"}).reset_index(drop=True)
        df.insert(0, "n", np.arange(8)[::-1])   # no id-like name, and reversed: labels by range
        try:
            outcomes.append(dict(load_predictions(_csv(df), format="csv").column_roles)["cls"])
        except PredictionsError as exc:
            assert "'n'" not in str(exc).split("The columns are")[0]
            outcomes.append("asked")
    assert set(outcomes) == {"label", "asked"}


def test_two_columns_that_could_each_be_the_label_are_asked_about(kitti):
    rng = np.random.default_rng(1)
    noisy = np.where(rng.random(len(kitti)) < 0.1, 1 - kitti["label"], kitti["label"])   # a second annotator
    df = kitti.rename(columns={"label": "won"}).assign(called=noisy)
    with pytest.raises(PredictionsError, match=r"'won', 'called' could each be the label by their values.*"
                                               r"Say which column holds the true labels \(label_column=\)"):
        load_predictions(_csv(df), format="csv")
    assert dict(load_predictions(_csv(df), format="csv", label_column="won").column_roles)["called"] == "metadata"


def test_the_models_own_decision_is_not_taken_for_the_label(kitti):
    """A 0/1 column that a threshold on the score reproduces (a 'flagged' column), or a class column
    equal to the argmax on every row: the model's decision; named in the message, not taken."""
    df = pd.DataFrame({"p": kitti["p_positive"], "flagged": (kitti["p_positive"] >= 0.5).astype(int)})
    with pytest.raises(PredictionsError, match="'flagged' could be it by its values, but the scores reproduce it"):
        load_predictions(_csv(df), format="csv")


def test_a_column_named_like_a_decision_or_an_id_is_never_the_label(kitti):
    for name in ("y_pred", "customer_id", "fold", "approved_at"):
        df = pd.DataFrame({"p": kitti["p_positive"], name: kitti["label"]})
        with pytest.raises(PredictionsError, match="no label column"):
            load_predictions(_csv(df), format="csv")


def test_simulated_unrelated_columns_are_rarely_taken_and_real_outcomes_are_found(kitti):
    """Known truth: outcomes drawn from the (real) scores themselves are the label; 0/1 columns drawn
    independently of them are not. 200 files of 300 rows each: an unrelated column passes the
    3-standard-error test with probability ~0.0013 (0.26 of 200 expected; 3 or more would be p < 0.003),
    a real outcome is missed in none."""
    rng = np.random.default_rng(7)
    p_all = kitti["p_positive"].to_numpy()
    taken = found = 0
    for _ in range(200):
        p = p_all[rng.choice(p_all.size, 300, replace=False)]
        outcome = (rng.random(300) < p).astype(int)
        unrelated = (rng.random(300) < 0.3).astype(int)
        try:
            load_predictions(_csv(pd.DataFrame({"risk": p, "other": unrelated})), format="csv")
            taken += 1
        except PredictionsError as exc:
            assert "no label column" in str(exc)
        preds = load_predictions(_csv(pd.DataFrame({"risk": p, "outcome_flag": outcome})), format="csv")
        found += dict(preds.column_roles).get("outcome_flag") == "label"
    assert taken <= 2 and found == 200


def test_unlabelled_files_and_named_labels_are_unchanged(kitti):
    df = kitti.rename(columns={"label": "won"})
    unlabelled = load_predictions(_csv(df), format="csv", require_labels=False)   # applying to new data
    assert not unlabelled.has_labels and dict(unlabelled.column_roles)["won"] == "metadata"
    named = load_predictions(_csv(df.assign(label=df["won"])), format="csv")
    assert dict(named.column_roles)["label"] == "label" and dict(named.column_roles)["won"] == "metadata"
