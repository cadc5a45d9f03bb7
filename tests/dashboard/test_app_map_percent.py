"""The Data page with exports a new user brings: scores that are not probabilities (the map starts
from the column the error was about, never an identifier, which is refused), percentages without a
% sign (a reading option), an outcome named after what it is (found by its values, said in the notes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pbr_core

ROOT = Path(__file__).resolve().parents[2]


def _upload(at, name: str, df: pd.DataFrame) -> None:
    at.file_uploader(key="data_upload").upload(name, df.to_csv(index=False).encode(), "text/csv").run()
    assert not at.exception, at.exception


def _infos(at) -> str:
    return "\n".join(str(i.value) for i in at.info)


@pytest.fixture(scope="module")
def recidivism() -> pd.DataFrame:
    """A risk score export: an id, demographic columns, a decile score 1..10 and the 0/1 outcome (real UCI
    Adult model outputs turned into deciles)."""
    from pbr_core.loading import read_table

    t = read_table(ROOT / "sample_data" / "adult_gradient_boosting.csv.gz")
    t["decile_score"] = pd.qcut(t.pop("p_gt50k").to_numpy(), 10, labels=False) + 1
    t.insert(0, "person_id", np.arange(1, len(t) + 1))
    return t.rename(columns={"label": "two_year_recid"})[["person_id", "race", "sex", "decile_score",
                                                           "two_year_recid"]]


def test_the_map_starts_from_the_score_and_refuses_an_identifier(at, recidivism):
    _upload(at, "compas.csv", recidivism)
    assert at.error and "no score columns" in at.error[0].value
    assert at.selectbox(key="data_map_score").value == "decile_score"
    assert at.selectbox(key="data_map_label").value == "two_year_recid"
    at.selectbox(key="data_map_score").set_value("person_id")
    at.button(key="data_map").click().run()
    assert at.error and "'person_id' is an identifier, by its name, not a score" in at.error[0].value
    assert "pbr_loaded" not in at.session_state or "mapped" not in at.session_state["pbr_loaded"].name
    at.selectbox(key="data_map_score").set_value("decile_score")
    at.button(key="data_map").click().run()
    assert not at.exception and not at.error
    assert "decile_score mapped to probabilities" in at.session_state["pbr_loaded"].name


def _read_as_percent(at):
    """Tick *Scores are percentages*, read the upload again; the loaded predictions (no error)."""
    at.checkbox(key="data_percent").check()
    at.button(key="data_apply").click().run()
    assert not at.exception and not at.error
    return at.session_state["pbr_loaded"].preds


def test_percentages_are_a_reading_option(at):
    kitti = pd.read_csv(ROOT / "sample_data" / "kitti_random_forest.csv")
    _upload(at, "forecasts.csv", kitti.assign(p_positive=kitti["p_positive"] * 100))
    message = at.error[0].value
    assert "tick *Scores are percentages* under **Columns and reading options**" in message
    assert "divide them by 100" not in message and "percent=True" not in message
    preds = _read_as_percent(at)
    np.testing.assert_allclose(preds.p_positive, kitti["p_positive"].to_numpy(), rtol=0, atol=1e-12)
    assert "as percentages, as asked: divided by 100" in _infos(at)


def test_an_outcome_named_won_is_found_and_said(at):
    kitti = pd.read_csv(ROOT / "sample_data" / "kitti_random_forest.csv")
    _upload(at, "forecasts.csv", kitti.rename(columns={"label": "won", "p_positive": "p_dem"}))
    assert not at.error
    assert "Label column: 'won' (not named as a label, taken for its values" in _infos(at)
    at.switch_page("views/reliability.py").run()
    ece = pbr_core.ece(kitti["p_positive"].to_numpy(), kitti["label"].to_numpy())
    assert any(m.value == f"{ece:.4f}" for m in at.metric if m.label == "ECE")


def test_an_outcome_beside_percentages_is_found_once_they_are_ticked(at):
    """An election forecast (as /tmp/audit/f2_election.csv): p_dem in percent without a % sign, the outcome
    'won'. The error names 'won' as a candidate and offers the page's option in its words; ticked, the
    file reads with 'won' as the label."""
    rng = np.random.default_rng(21)
    p = rng.beta(0.7, 0.7, 400)
    df = pd.DataFrame({"race_id": [f"AZ-SEN-2022-{i}" for i in range(400)], "branch": rng.choice(["Senate", "House"], 400),
                       "p_dem": np.round(p * 100, 1), "won": (rng.random(400) < p).astype(int)})
    _upload(at, "election.csv", df)
    message = at.error[0].value
    assert "could be the label: 'won'" in message
    assert "Tick *Scores are percentages* under **Columns and reading options**" in message
    assert "percent=True" not in message and "label_column=" not in message
    preds = _read_as_percent(at)
    assert dict(preds.column_roles)["won"] == "label"
    np.testing.assert_array_equal(preds.labels, df["won"].to_numpy())
    assert "Label column: 'won' (not named as a label, taken for its values" in _infos(at)


def test_a_true_false_outcome_beside_log_odds_is_found_once_they_are_read_as_logits(at):
    """A fraud model's log-odds with the outcome written True/False (as /tmp/audit/f8_logits.csv): the error
    offers 'The score columns hold: logits'; chosen, 'is_fraud' is the label, 'True' is said to be class 1,
    and the summary says the one column went through the logistic function, not a softmax."""
    rng = np.random.default_rng(22)
    x = np.round(rng.normal(0, 2.5, 400), 4)
    y = rng.random(400) < 1 / (1 + np.exp(-x))
    df = pd.DataFrame({"txn_id": [f"T{i}" for i in range(400)], "fraud_logit": x,
                       "is_fraud": np.where(y, "True", "False")})
    _upload(at, "fraud.csv", df)
    message = at.error[0].value
    assert "could be the label: 'is_fraud'" in message
    assert "set *The score columns hold* to logits under **Columns and reading options**" in message
    assert "input_type" not in message
    at.selectbox(key="data_input_type").set_value("logits")
    at.button(key="data_apply").click().run()
    assert not at.exception and not at.error
    preds = at.session_state["pbr_loaded"].preds
    assert dict(preds.column_roles)["is_fraud"] == "label" and preds.labels.tolist() == y.astype(int).tolist()
    assert "'True' is class 1 and 'False' class 0" in _infos(at)
    said = "\n".join(str(m.value) for m in at.markdown)
    assert "read as **the log-odds of class 1** (turned into a probability with the logistic function" in said
    assert "softmax" not in said


def _multiclass_with_ids(k: int = 5, n: int = 300, seed: int = 3) -> pd.DataFrame:
    """A multiclass export as a new user brings it: an id, a fold, an age (whole numbers), one probability
    column per class and the label (k classes)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * 2
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    df = pd.DataFrame({"id": np.arange(50_000, 50_000 + n), "fold": np.arange(n) % 5,
                       "age": rng.integers(18, 90, size=n)})
    for j in range(k):
        df[f"p_{j}"] = p[:, j].round(6)
    df["label"] = [int(rng.choice(k, p=row)) for row in p]
    return df


def _map_note(at) -> str:
    return _infos(at)


def test_the_map_offers_no_split_id_or_count_and_no_outcome_of_many_values(at):
    """Audit 13, item 1: a multiclass file that loaded fine opened the map on Score = 'fold' and Outcome =
    'label' (5 classes); the button then failed. Now both boxes are empty, one sentence says why and the
    button is off."""
    _upload(at, "multiclass.csv", _multiclass_with_ids())
    assert not at.error and at.session_state["pbr_loaded"].preds.n_classes == 5
    assert at.selectbox(key="data_map_score").value is None
    assert at.selectbox(key="data_map_label").value is None
    assert "already loaded as the model's predictions for its 5 classes" in _map_note(at)
    assert at.button(key="data_map").disabled


def test_a_failed_file_without_a_two_valued_outcome_offers_no_outcome(at):
    """A file of scores on another scale whose only label-like column has 7 values (a diagnosis): the
    score offered is the score, never the fold, the id or the age; no outcome; the button is off."""
    df = _multiclass_with_ids(k=7)
    df = df.drop(columns=[f"p_{j}" for j in range(7)]).assign(
        risk_score=np.random.default_rng(1).normal(size=len(df)) * 10)
    df["diagnosis"] = np.array(list("abcdefg"))[df.pop("label")]
    _upload(at, "scores.csv", df)
    assert at.error
    assert at.selectbox(key="data_map_score").value == "risk_score"
    assert at.selectbox(key="data_map_label").value is None
    assert "No column of this file holds exactly two values" in _map_note(at)
    assert at.button(key="data_map").disabled


def test_a_box_left_empty_is_asked_for_not_read_without_the_map(at):
    """Two columns of two values: the outcome is the user's choice; pressing the button without it asks
    for it and loads nothing else."""
    df = _multiclass_with_ids(k=2).drop(columns=["p_0", "p_1", "label"])
    rng = np.random.default_rng(2)
    df["risk_score"] = rng.normal(size=len(df))
    df["sex"] = rng.choice(["F", "M"], size=len(df))
    df["reoffended"] = rng.integers(0, 2, size=len(df)).astype(str).astype(object)
    df["reoffended"] = df["reoffended"].map({"0": "no", "1": "yes"})
    _upload(at, "two.csv", df)
    assert at.selectbox(key="data_map_score").value == "risk_score"
    assert at.selectbox(key="data_map_label").value is None
    assert "Several columns hold two values" in _map_note(at) and not at.button(key="data_map").disabled
    at.button(key="data_map").click().run()
    assert any("Choose the score column and the outcome column first" in w.value for w in at.warning)
    at.selectbox(key="data_map_label").set_value("reoffended")
    at.button(key="data_map").click().run()
    assert not at.exception and "risk_score mapped to probabilities" in at.session_state["pbr_loaded"].name


def test_the_error_names_the_outcome_and_the_map_panel(at, recidivism):
    """Audit 13, item 6: the red box named every other column and left out 'two_year_recid'."""
    _upload(at, "compas.csv", recidivism)
    box = at.error[0].value
    assert "The column 'two_year_recid' holds only 0 and 1: if it is the outcome" in box, box
    assert "open *My scores are not probabilities* below **Columns and reading options**" in box
    assert "pbr_core" not in box and box.count("My scores are not probabilities") == 1
