"""Columns that restate the outcome (audit 9a): an LLM file's ``grade`` ("Correct" / "Wrong", of which
``correct`` is made) made every slice Find the slices reported, and ``--by grade`` called its groups
miscalibrated. :func:`pbr_core.outcome_columns.outcome_columns` flags such a column; the slice search
leaves it out and says so; the groups measure it with a warning.

Known truth on real scores: outcomes drawn from the bundled samples' own probabilities (calibrated), a
column made from the drawn outcome (flagged), and ordinary columns that are pure by chance more or less
often (many values of 10 rows, values of 10 rows cut along the score, the predicted class itself).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core import outcome_columns as O
from pbr_core.cli import main
from pbr_core.groups import calibration_by_group, default_group_column
from pbr_core.slices import find_slices

SAMPLES = Path(__file__).resolve().parents[1] / "sample_data"


def plaut_like(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    """A file shaped as audit 9a's Plaut sample: models overconfident by different amounts, a benchmark,
    the confidence, ``correct``, and ``grade`` written from it ("Unparseable" for a few wrong answers)."""
    rng = np.random.default_rng(seed)
    models = np.array(["Mixtral", "Falcon-40b", "Llama-7b", "gpt-4-turbo", "Yi-6b", "Solar"])
    slope = dict(zip(models, [0.4, 0.9, 0.5, 0.8, 0.6, 0.7]))
    model = rng.choice(models, n)
    conf = np.clip(rng.beta(5, 1.2, n), 0.26, 0.999)
    logit = np.log(conf / (1 - conf)) * np.array([slope[m] for m in model])
    correct = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    grade = np.where(correct == 1, "Correct", np.where(rng.random(n) < 0.01, "Unparseable", "Wrong"))
    return pd.DataFrame({"model": model, "dataset": rng.choice(["mmlu", "hellaswag", "winogrande"], n),
                         "grade": grade, "confidence": np.round(conf, 6), "correct": correct})


@pytest.fixture(scope="module")
def plaut_csv(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("plaut") / "llm_plaut_like.csv"
    plaut_like().to_csv(path, index=False)
    return path


def _cli(*argv) -> tuple[int, str]:
    buf, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    assert "Traceback" not in err.getvalue()
    return code, buf.getvalue()


# ------------------------------------------------------------------------------------------ the rule
def test_grade_is_flagged_and_ordinary_columns_are_not(plaut_csv):
    preds = pbr_core.load_predictions(plaut_csv)
    found = O.outcome_columns(preds)
    assert list(found) == ["grade"]
    g = found["grade"]
    assert g.outcome == "whether the prediction was right" and g.cut == "values" and g.covered == 1.0
    assert g.outcomes["Correct"] == "right" and g.outcomes["Wrong"] == "wrong"
    assert "each of its values has a single outcome" in g.why and "restates the outcome" in g.why


@pytest.mark.parametrize("name", ["adult_gradient_boosting.csv.gz", "llm_qa_confidence_correct.csv.gz"])
def test_real_columns_are_not_flagged(name):
    """None of UCI Adult's columns (age, workclass, ..., sex, native_country; the income label is the
    label), nor the LLM sample's model and dataset."""
    preds = pbr_core.load_predictions(SAMPLES / name)
    assert preds.metadata is not None and preds.metadata.shape[1] >= 2
    assert O.outcome_columns(preds) == {}


def test_a_label_in_words_and_a_numeric_copy_are_flagged_on_binary_data():
    adult = pbr_core.load_predictions(SAMPLES / "adult_gradient_boosting.csv.gz")
    meta = adult.metadata.assign(income_words=np.where(adult.labels == 1, ">50K", "<=50K"),
                                 flag=adult.labels.astype(float))
    found = O.outcome_columns(dataclasses.replace(adult, metadata=meta))
    assert set(found) == {"income_words", "flag"}
    assert found["income_words"].outcome == "the label"


def _scores() -> dict[str, tuple[str, np.ndarray]]:
    return {"Adult p(y=1)": ("binary", pbr_core.load_predictions(SAMPLES / "adult_gradient_boosting.csv.gz").p_positive),
            "KITTI XGBoost p(y=1)": ("binary", pbr_core.load_predictions(SAMPLES / "kitti_xgboost.csv").p_positive),
            "LLM confidences": ("top", pbr_core.load_predictions(SAMPLES / "llm_qa_confidence_correct.csv.gz").confidence)}


def _drawn(kind: str, s: np.ndarray, n: int, rng: np.random.Generator) -> pbr_core.Predictions:
    """n rows of real scores, outcomes drawn from them, with a column restating the outcome and three
    ordinary columns: 10-row values at random, 10-row values cut along the score (pure at its ends), and
    the model's own prediction (pure when the model makes no mistake on these rows)."""
    p = s[rng.choice(s.size, n, replace=False)]
    y = (rng.random(n) < p).astype(int)
    along = np.empty(n, dtype=int)
    along[np.argsort(p, kind="stable")] = np.arange(n) // 10
    meta = pd.DataFrame({"random10": rng.integers(0, max(1, n // 10), n).astype(str), "along10": along.astype(str),
                         "prediction": np.where(p > (0.5 if kind == "binary" else 0.9), "yes", "no"),
                         "restating": np.where(y == 1, "A", "B")})
    preds = (pbr_core.Predictions.from_arrays(np.c_[1 - p, p], y) if kind == "binary"
             else pbr_core.Predictions.from_confidence_correct(p, y))
    return dataclasses.replace(preds, metadata=meta)


def _flags(reps: int, sizes: tuple[int, ...], seed: int = 1) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    flags = {"random10": 0, "along10": 0, "prediction": 0, "restating": 0, "files": 0, "restating_1000": 0}
    for kind, s in _scores().values():
        for n in sizes:
            for _ in range(reps):
                found = O.outcome_columns(_drawn(kind, s, n, rng))
                for c in found:
                    flags[c] += 1
                flags["files"] += 1
                flags["restating_1000"] += n == 1000 and "restating" in found
    return flags


def test_calibrated_outcomes_flag_ordinary_columns_almost_never():
    """Outcomes drawn from real scores: the ordinary columns are flagged in none of 360 files (30 to 1,000
    rows; by construction each at most CHANCE = 1e-6 a file), the column made from the outcome in every
    file of 1,000 rows. docs/claims.md row 6b: 0 of 16,000 files for each ordinary column (4 score sets incl. CIFAR-10, 1,000 per
    cell), the restating column in 1,000 of 1,000 at 1,000 rows and 0-100 % below (too few rows of the rarer
    outcome on confident scores)."""
    flags = _flags(30, (30, 100, 300, 1000))
    assert flags["files"] == 360
    assert flags["random10"] == flags["along10"] == flags["prediction"] == 0
    assert flags["restating_1000"] == 90


def test_without_the_chance_condition_a_confident_model_s_prediction_would_be_flagged(monkeypatch):
    """Why the chance condition: on 30 rows of KITTI's confident, calibrated p(y=1), the prediction
    column is pure (no mistake) often, and 'every value one outcome' alone would flag it (measured: 27 of
    200 files; with the condition 0)."""
    monkeypatch.setattr(O, "CHANCE", 1.0 + 1e-9)
    rng = np.random.default_rng(1)
    kind, s = "binary", pbr_core.load_predictions(SAMPLES / "kitti_xgboost.csv").p_positive
    flagged = sum("prediction" in O.outcome_columns(_drawn(kind, s, 30, rng)) for _ in range(100))
    assert flagged >= 5


# ------------------------------------------------------------------------------------------ the front ends
def test_find_slices_leaves_grade_out(plaut_csv):
    preds = pbr_core.load_predictions(plaut_csv)
    report = find_slices(preds)
    assert [f.column for f in report.restating] == ["grade"]
    assert "grade" not in [c for c, _ in report.columns]
    assert not any("grade" in s for s in report.table["slice"])
    # even when named
    assert [f.column for f in find_slices(preds, ["grade", "model"]).restating] == ["grade"]


def test_the_cli_leaves_grade_out_of_the_slices_and_warns_on_its_groups(plaut_csv):
    from pbr_core.schemas import evaluate_schema
    import jsonschema

    code, text = _cli("evaluate", plaut_csv, "--find-slices")
    assert code == 0
    assert ("left out 'grade': each of its values has a single outcome (whether the prediction was right; "
            "3 values of 10 rows or more, 100% of the rows), so it restates the outcome; slices by it would be "
            "miscalibrated by construction") in text
    assert "grade = " not in text
    code, out = _cli("evaluate", plaut_csv, "--find-slices", "--by", "grade", "--format", "json")
    data = json.loads(out)
    validator = jsonschema.Draft202012Validator(evaluate_schema())
    assert not list(validator.iter_errors(data))
    assert [r["column"] for r in data["slices"]["restating"]] == ["grade"]
    assert not any("grade" in s for s in data["slices"]["held_up"])
    assert data["groups"]["warnings"] and "'grade' restates the outcome" in data["groups"]["warnings"][0]
    code, text = _cli("evaluate", plaut_csv, "--by", "grade")
    assert "warning: 'grade' restates the outcome: each of its values has a single outcome" in text
    # once, above the table (audit 10a: it was printed above and again below the groups' statements)
    assert text.count("restates the outcome") == 1
    assert text.index("restates the outcome") < text.index("calibration by grade")
    code, out = _cli("evaluate", plaut_csv, "--by", "model", "--format", "json")
    assert json.loads(out)["groups"]["warnings"] == []


def test_groups_measure_grade_with_a_warning_and_never_open_on_it(plaut_csv):
    preds = pbr_core.load_predictions(plaut_csv)
    report = calibration_by_group(preds, "grade")
    assert len(report.table) == 3 and [f.column for f in report.restating] == ["grade"]
    assert "restates the outcome" in report._repr_html_()
    assert calibration_by_group(preds, "model").restating == []
    # named as the group column and with an audit word in its name: still never the default
    meta = preds.metadata.rename(columns={"grade": "group"})
    assert default_group_column(dataclasses.replace(preds, metadata=meta)) == "model"
