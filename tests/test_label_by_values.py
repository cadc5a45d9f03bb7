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


def test_labels_not_required_still_keep_a_label_found_by_its_values_and_named_labels_are_unchanged(kitti):
    """Applying a recalibrator (labels not required) to a file that has its outcome: found as fit and
    evaluate find it (pbr-calib apply then measures ECE); where that would need asking, read unlabelled."""
    df = kitti.rename(columns={"label": "won"})
    applied = load_predictions(_csv(df), format="csv", require_labels=False)
    assert applied.has_labels and dict(applied.column_roles)["won"] == "label"
    np.testing.assert_array_equal(applied.labels, kitti["label"].to_numpy())
    two = df.assign(won2=df["won"])   # two columns that could each be the label: asked when required
    with pytest.raises(PredictionsError, match="could each be the label"):
        load_predictions(_csv(two), format="csv")
    unlabelled = load_predictions(_csv(two), format="csv", require_labels=False)
    assert not unlabelled.has_labels and dict(unlabelled.column_roles)["won"] == "metadata"
    named = load_predictions(_csv(df.assign(label=df["won"])), format="csv")
    assert dict(named.column_roles)["label"] == "label" and dict(named.column_roles)["won"] == "metadata"


# ---------------------------------------------------------------- scores as they will be read (audit files)
def _election(rng, n: int = 400) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """An election forecast export (as /tmp/audit/f2_election.csv): race ids, a branch, p_dem written as
    percentages without a % sign (76.2), and the 0/1 outcome drawn from those probabilities."""
    p = rng.beta(0.7, 0.7, n)
    won = (rng.random(n) < p).astype(int)
    df = pd.DataFrame({"race_id": [f"AZ-SEN-{2018 + 2 * (i % 3)}-{i}" for i in range(n)],
                       "branch": rng.choice(["Senate", "House", "Governor"], n), "p_dem": np.round(p * 100, 1),
                       "won": won})
    return df, np.round(p * 100, 1) / 100, won


def _fraud(rng, n: int = 400) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """A fraud model's export (as /tmp/audit/f8_logits.csv): ids, one log-odds column, and the outcome
    written True/False, drawn from the logistic of the log-odds."""
    x = np.round(rng.normal(0, 2.5, n), 4)
    y = (rng.random(n) < 1 / (1 + np.exp(-x))).astype(int)
    return pd.DataFrame({"txn_id": [f"T{i}" for i in range(n)], "fraud_logit": x,
                         "is_fraud": np.where(y == 1, "True", "False")}), x, y


def test_an_outcome_beside_percentages_is_found_once_they_are_read_as_percentages(tmp_path):
    df, p, won = _election(np.random.default_rng(11))
    path = tmp_path / "election.csv"
    df.to_csv(path, index=False)
    preds = load_predictions(path, percent=True)
    assert dict(preds.column_roles)["won"] == "label" and "'won' (not named as a label" in _label_note(preds)
    np.testing.assert_array_equal(preds.labels, won)
    np.testing.assert_allclose(preds.p_positive, p, rtol=0, atol=1e-12)
    # Without the option the label cannot be matched to scores up to 100: the message names the
    # candidate and the option that would find it.
    with pytest.raises(PredictionsError) as exc:
        load_predictions(path)
    message = str(exc.value)
    assert "Column with two values, which could be the label: 'won'." in message
    assert "Read them as percentages (percent=True)" in message and "input_type='logits'" not in message
    # Still unambiguous: a second outcome-like column is asked about, naming both.
    with pytest.raises(PredictionsError, match="'won', 'called' could each be the label"):
        load_predictions(_csv(df.assign(called=won)), format="csv", percent=True)


def test_whole_number_percentages_find_the_outcome_too(tmp_path):
    df, _, won = _election(np.random.default_rng(12))
    df["p_dem"] = np.round(df["p_dem"]).astype(int)
    preds = load_predictions(_csv(df), format="csv", percent=True)
    assert dict(preds.column_roles)["won"] == "label"
    np.testing.assert_allclose(preds.p_positive, df["p_dem"].to_numpy() / 100, rtol=0, atol=1e-12)


def test_a_true_false_outcome_beside_log_odds_is_found_when_they_are_read_as_logits(tmp_path):
    df, x, y = _fraud(np.random.default_rng(13))
    path = tmp_path / "fraud.csv"
    df.to_csv(path, index=False)
    preds = load_predictions(path, input_type="logits")
    assert dict(preds.column_roles)["is_fraud"] == "label"
    assert "'False' and 'True' beside the one score column 'fraud_logit'" in _label_note(preds)
    # which value is class 1 is said, as for a label column named as such
    assert ("Binary labels: 'True' is class 1 and 'False' class 0; the score column 'fraud_logit' is read as the "
            "log-odds of True.") in preds.notes
    np.testing.assert_array_equal(preds.labels, y)
    np.testing.assert_allclose(preds.p_positive, 1 / (1 + np.exp(-x)), rtol=1e-12, atol=1e-15)
    named = load_predictions(path, input_type="logits", label_column="is_fraud")
    np.testing.assert_array_equal(named.labels, y)
    with pytest.raises(PredictionsError) as exc:
        load_predictions(path)
    message = str(exc.value)
    assert "Column with two values, which could be the label: 'is_fraud'." in message
    assert "load the columns as logits (input_type='logits')." in message and "percent=True" not in message


def test_two_class_names_beside_a_score_named_after_one_map_as_for_a_named_label():
    """'churned'/'stayed' beside p_churned: the value the score column's header names is class 1, the
    rule (and note) of a label column named as such."""
    rng = np.random.default_rng(14)
    p = rng.uniform(0.05, 0.95, 300)
    y = (rng.random(300) < p).astype(int)
    df = pd.DataFrame({"p_churned": p, "status": np.where(y == 1, "churned", "stayed")})
    found = load_predictions(_csv(df), format="csv")
    named = load_predictions(_csv(df), format="csv", label_column="status")
    assert dict(found.column_roles)["status"] == "label"
    np.testing.assert_array_equal(found.labels, y)
    np.testing.assert_array_equal(named.labels, y)
    binary_note = [n for n in named.notes if n.startswith("Binary labels:")]
    assert binary_note and binary_note[0] in found.notes


def test_simulated_unrelated_true_false_columns_beside_log_odds_are_rarely_taken():
    """Known truth, for log-odds (no [0, 1] range to check, only the ranks): outcomes drawn from the
    logistic of the scores are found in every file; True/False columns drawn independently are taken
    with probability ~0.0013 each (0.13 of 100 expected; 3 or more would be p < 0.0004)."""
    rng = np.random.default_rng(15)
    taken = found = 0
    for _ in range(100):
        x = rng.normal(0, 2, 300)
        outcome = np.where(rng.random(300) < 1 / (1 + np.exp(-x)), "True", "False")
        unrelated = np.where(rng.random(300) < 0.3, "True", "False")
        try:
            load_predictions(_csv(pd.DataFrame({"margin": x, "other": unrelated})), format="csv", input_type="logits")
            taken += 1
        except PredictionsError as exc:
            assert "no label column" in str(exc)
        preds = load_predictions(_csv(pd.DataFrame({"margin": x, "flagged_later": outcome})), format="csv",
                                 input_type="logits")
        found += dict(preds.column_roles).get("flagged_later") == "label"
    assert taken <= 2 and found == 100
