"""Scores that are not probabilities: a monotone map fitted on part of the rows, the rest audited
(pbr_core.scores, pbr-calib evaluate --map-scores). Data: UCI Adult predictions turned into risk
deciles and margins, as a scorecard exports them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core import PredictionsError
from pbr_core.loading import read_table
from pbr_core.scores import map_scores

SAMPLES = Path(__file__).resolve().parents[1] / "sample_data"


@pytest.fixture(scope="module")
def scorecard() -> pd.DataFrame:
    t = read_table(SAMPLES / "adult_gradient_boosting.csv.gz")
    p = t.pop("p_gt50k").to_numpy()
    t["risk_decile"] = pd.qcut(p, 10, labels=False) + 1                   # 1..10
    t["margin"] = -np.log(p / (1 - p))                                      # higher margin: LESS likely
    return t


def test_read_table_reads_like_the_loader(scorecard):
    t = read_table(SAMPLES / "adult_gradient_boosting.csv.gz")
    preds = pbr_core.load_predictions(SAMPLES / "adult_gradient_boosting.csv.gz")
    np.testing.assert_array_equal(t["p_gt50k"].to_numpy(), preds.p_positive)
    assert list(t.columns)[-2:] == ["p_gt50k", "label"]
    with pytest.raises(PredictionsError, match="holds arrays, not a table"):
        read_table(SAMPLES / "cifar10_resnet110.npz")


def test_a_decile_is_mapped_on_part_of_the_rows_and_the_rest_audited(scorecard):
    from sklearn.isotonic import IsotonicRegression

    m = map_scores(scorecard, "risk_decile", "label", share=0.3, seed=4)
    n = len(scorecard)
    assert set(m.fit_rows) | set(m.audit_rows) == set(range(n)) and not set(m.fit_rows) & set(m.audit_rows)
    assert m.fit_rows.size == round(0.3 * n) and m.increasing
    iso = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip")
    iso.fit(scorecard["risk_decile"].to_numpy()[m.fit_rows], scorecard["label"].to_numpy()[m.fit_rows])
    np.testing.assert_allclose(m.preds.p_positive, iso.predict(scorecard["risk_decile"].to_numpy()[m.audit_rows]))
    np.testing.assert_array_equal(m.preds.labels, scorecard["label"].to_numpy()[m.audit_rows])
    assert m.preds.metadata["risk_decile"].tolist() == scorecard["risk_decile"].iloc[m.audit_rows].tolist()
    assert "not how calibrated the raw scores are" in " ".join(m.preds.notes)
    assert pbr_core.ece(m.preds.p_positive, m.preds.labels) < 0.03   # deciles of a calibrated model map well


def test_a_decreasing_margin_with_a_logistic_curve(scorecard):
    m = map_scores(scorecard, "margin", "label", method="logistic")
    assert not m.increasing
    order = np.argsort(scorecard["margin"].to_numpy()[m.audit_rows])
    assert np.all(np.diff(m.preds.p_positive[order]) <= 1e-12)   # monotone, decreasing in the margin
    assert pbr_core.ece(m.preds.p_positive, m.preds.labels) < 0.05


def test_what_cannot_be_mapped_is_said(scorecard):
    with pytest.raises(PredictionsError, match="exactly two values"):
        map_scores(scorecard, "risk_decile", "race")
    bad = scorecard.assign(risk_decile=scorecard["risk_decile"].astype(str))
    bad.loc[7, "risk_decile"] = "high"
    with pytest.raises(PredictionsError, match="'high' at row 8"):
        map_scores(bad, "risk_decile", "label")
    with pytest.raises(PredictionsError, match="'nope' is not a column"):
        map_scores(scorecard, "nope", "label")


def test_cli_evaluate_map_scores(scorecard, tmp_path, capsys):
    import json

    from pbr_core.cli import main

    path = tmp_path / "scorecard.csv"
    scorecard.to_csv(path, index=False)
    assert main(["evaluate", str(path), "--map-scores", "risk_decile", "--label-column", "label",
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    m = map_scores(scorecard, "risk_decile", "label")
    assert out["n"] == m.preds.n and out["ece"] == pytest.approx(pbr_core.ece(m.preds.p_positive, m.preds.labels))
    assert any("holds scores, not probabilities" in n for n in out["notes"])
    assert main(["evaluate", str(path), "--map-scores", "risk_decile"]) == 2   # needs the label column


# ---------------------------------------------------------------- identifiers are never scores to map
def test_an_identifier_is_refused_as_the_score(scorecard):
    """person_id (by its name) and a row number (distinct consecutive whole numbers, whatever its name)
    are refused with a message; a credit score of whole numbers and a 'risk_index' of fractions are not."""
    from pbr_core.scores import identifier_reason

    t = scorecard.assign(person_id=np.arange(1, len(scorecard) + 1), n=np.arange(len(scorecard))[::-1],
                         credit=np.round(300 + 550 * scorecard["risk_decile"] / 10).astype(int),
                         risk_index=scorecard["margin"])
    with pytest.raises(PredictionsError, match=r"'person_id' is an identifier, by its name, not a score: a map "
                                               r"from it to p\(label\) would fit row numbers"):
        map_scores(t, "person_id", "label")
    with pytest.raises(PredictionsError, match=r"'n' is an identifier: a different whole number on every row, 0 to "):
        map_scores(t, "n", "label")
    with pytest.raises(PredictionsError, match="the score and the outcome are the same column"):
        map_scores(t, "label", "label")
    assert identifier_reason(t["credit"], "credit") is None and identifier_reason(t["risk_index"], "risk_index") is None
    assert map_scores(t, "credit", "label").preds.n == map_scores(t, "risk_index", "label").preds.n


def test_the_columns_offered_for_the_map_are_the_score_and_the_outcome(scorecard):
    """A recidivism-style export (person_id, race, sex, age, decile_score, two_year_recid): the loader
    names every column in its error; the score offered is decile_score, never the id, the outcome
    the one 0/1 column."""
    from pbr_core.scores import suggest_map_columns

    t = scorecard.rename(columns={"label": "two_year_recid", "risk_decile": "decile_score"})
    t.insert(0, "person_id", np.arange(1, len(t) + 1))
    t = t[["person_id", "race", "sex", "age", "decile_score", "two_year_recid"]]
    with pytest.raises(PredictionsError) as err:
        pbr_core.load_predictions(t.to_csv(index=False).encode(), format="csv")
    message = str(err.value)
    assert "no label column and no score columns" in message and "'person_id': an identifier" in message
    about = [c for c in t.columns if f"'{c}'" in message]
    assert about[0] == "person_id"
    assert suggest_map_columns(t, about) == ("decile_score", "two_year_recid")
    assert suggest_map_columns(t) == ("decile_score", "two_year_recid")
    assert suggest_map_columns(t[["person_id", "two_year_recid"]]) == (None, "two_year_recid")


def test_a_label_of_many_values_is_refused_with_examples_in_natural_order():
    """Audit 13, item 1: the refusal listed '0', '1', '10', '11' (text order) for a label of 100 classes."""
    from pbr_core.scores import map_scores

    t = pd.DataFrame({"score": np.linspace(0, 1, 200), "label": np.arange(200) % 100})
    with pytest.raises(PredictionsError, match=r"holds 100: \['0', '1', '2', '3', '4', '5'\]"):
        map_scores(t, "score", "label")


def test_the_map_is_never_offered_a_split_an_id_a_count_or_an_outcome_of_many_values():
    """A multiclass file's columns: id, fold, age (whole numbers), the class names (7 values). No score
    and no outcome is offered; a score named like one (decile_score, whole numbers) still is."""
    from pbr_core.scores import outcome_candidates, suggest_map_columns

    rng = np.random.default_rng(0)
    n = 140
    t = pd.DataFrame({"id": np.arange(n) + 1000, "fold": np.arange(n) % 5, "age": rng.integers(18, 90, n),
                      "year": 2018 + np.arange(n) % 3, "label": np.array(list("abcdefg"))[np.arange(n) % 7]})
    assert suggest_map_columns(t) == (None, None) and outcome_candidates(t) == []
    t["decile_score"] = rng.integers(1, 11, n)
    t["recid"] = rng.integers(0, 2, n)
    assert suggest_map_columns(t, ["age", "decile_score"]) == ("decile_score", "recid")
    assert outcome_candidates(t) == ["recid"]


def test_the_error_for_a_file_of_scores_on_another_scale_names_the_one_outcome_by_its_values():
    """Audit 13, item 6: a COMPAS-like export (decile_score, two_year_recid 0/1) was refused with every
    other column listed as metadata and the outcome left out. The message now names it and the map;
    with two 0/1 columns it names neither (which one is the outcome is the user's choice)."""
    rng = np.random.default_rng(0)
    n = 120
    t = pd.DataFrame({"person_id": np.arange(n) + 1003, "sex": rng.choice(["Male", "Female"], n),
                      "age": rng.integers(18, 70, n), "decile_score": rng.integers(1, 11, n),
                      "two_year_recid": rng.integers(0, 2, n)})
    with pytest.raises(PredictionsError) as err:
        pbr_core.load_predictions(t.to_csv(index=False).encode(), format="csv")
    message = str(err.value)
    assert ("The column 'two_year_recid' holds only 0 and 1: if it is the outcome" in message
            and "pbr_core.scores.map_scores; --map-scores" in message), message
    t["violent_recid"] = rng.choice(["yes", "no"], n)
    with pytest.raises(PredictionsError) as err:
        pbr_core.load_predictions(t.to_csv(index=False).encode(), format="csv")
    assert "holds only" not in str(err.value)
    with pytest.raises(PredictionsError) as err:
        pbr_core.load_predictions(t.drop(columns="two_year_recid").to_csv(index=False).encode(), format="csv")
    assert "The column 'violent_recid' holds only 'no' and 'yes': if it is the outcome" in str(err.value)


@pytest.mark.parametrize("column, method", [("risk_decile", "isotonic"), ("margin", "logistic"),
                                            ("margin", "isotonic")])
def test_the_saved_map_turns_new_scores_into_the_audit_rows_probabilities(scorecard, column, method):
    """Audit 14, finding A: a recalibrator fitted on mapped scores takes probabilities, so the model's new
    scores need the same map; the saved map (through JSON) gives the audit rows' p(y=1) again, and for a
    decile it is the pooled fit-row frequency of y = 1 per decile (checked by hand where those rise)."""
    import json

    from pbr_core.scores import apply_score_map

    m = map_scores(scorecard, column, "label", method=method)
    saved = json.loads(json.dumps(m.score_map))
    scores = scorecard[column].to_numpy(dtype=float)
    np.testing.assert_allclose(apply_score_map(saved, scores[m.audit_rows]), m.preds.p_positive, rtol=0, atol=1e-12)
    assert m.preds.score_map == m.score_map and saved["score_column"] == column
    if column == "risk_decile":
        y = scorecard["label"].to_numpy()[m.fit_rows]
        freq = pd.Series(y).groupby(scores[m.fit_rows]).mean()
        assert freq.is_monotonic_increasing  # no pooling: isotonic regression is each decile's frequency
        np.testing.assert_allclose(apply_score_map(saved, freq.index.to_numpy()), freq.to_numpy(), atol=1e-12)
    with pytest.raises(ValueError, match="score map saved by pbr-calib"):
        apply_score_map({"method": "isotonic"}, scores)
