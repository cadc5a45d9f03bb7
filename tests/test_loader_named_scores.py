"""A probability beside a covariate outside [0, 1] (an R ``write.csv`` export of a medical risk model, as
/tmp/audit3/f1_r_medical.csv): the loader names the real obstacle (which columns are the scores) and
what to choose; once the score column is named, every other column is metadata and the outcome written
Yes/No is found by its values, as in any one-score file (audit 3, A5)."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pbr_core import PredictionsError, load_predictions

ROOT = Path(__file__).resolve().parents[1]


def r_medical_csv(path: Path, n: int = 1500, seed: int = 2024) -> Path:
    """An R export like f1: row names under an empty quoted header, quoted headers and text, NA cells,
    a float covariate bmi (about 10 to 45), the risk and the outcome Yes/No drawn from it (calibrated)."""
    rng = np.random.default_rng(seed)
    age = rng.integers(30, 90, n)
    sex = rng.choice(["F", "M"], n)
    bmi = np.round(rng.normal(27, 5, n), 1)
    risk = np.round(1 / (1 + np.exp(-(-6 + 0.06 * age + 0.3 * (sex == "M") + rng.normal(0, 0.3, n)))), 4)
    y = rng.random(n) < risk
    df = pd.DataFrame({"patient_id": [f"P{100000 + i}" for i in range(n)], "age": age, "sex": sex, "bmi": bmi,
                       "smoker": rng.choice(["yes", "no"], n, p=[.2, .8]), "risk_30d": risk,
                       "death_30d": np.where(y, "Yes", "No")})
    df.loc[rng.choice(n, 40, replace=False), "bmi"] = np.nan
    df.loc[rng.choice(n, 20, replace=False), "smoker"] = np.nan
    df.index = np.arange(1, n + 1).astype(str)
    df.to_csv(path, quoting=csv.QUOTE_NONNUMERIC, na_rep="NA", index_label="")
    return path


@pytest.fixture()
def medical(tmp_path) -> Path:
    return r_medical_csv(tmp_path / "r_medical.csv")


def _load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the dropped row-names column
        return load_predictions(path, **kw)


def test_with_defaults_the_error_names_the_score_ambiguity_and_what_to_choose(medical):
    with pytest.raises(PredictionsError) as exc:
        _load(medical)
    message = str(exc.value)
    assert "the score columns are ambiguous" in message and "'bmi'" in message
    assert "name it as the only score column (score_columns=['risk_30d'])" in message
    # not the label's fault: no list of two-valued columns, no "no label column"
    assert "no label column" not in message and "could be the label" not in message
    # naming the label alone still meets the same obstacle, said the same way (without the label part)
    with pytest.raises(PredictionsError, match=r"score columns are ambiguous.*score_columns=\['risk_30d'\]\): the "
                                               r"other columns are then kept as metadata\.$"):
        _load(medical, label_column="death_30d")


def test_a_named_score_column_finds_the_yes_no_outcome_by_its_values(medical):
    preds = _load(medical, score_columns=["risk_30d"])
    roles = dict(preds.column_roles)
    assert roles["death_30d"] == "label" and roles["risk_30d"] == "score"
    assert all(roles[c] == "metadata" for c in ("patient_id", "age", "sex", "bmi", "smoker"))
    label_note = next(n for n in preds.notes if n.startswith("Label column:"))
    assert "'No' and 'Yes' beside the one score column 'risk_30d'" in label_note
    df = pd.read_csv(medical)
    np.testing.assert_array_equal(preds.labels, (df["death_30d"] == "Yes").to_numpy().astype(int))
    np.testing.assert_allclose(preds.p_positive, df["risk_30d"].to_numpy(), rtol=0, atol=0)
    # the same as naming both
    both = _load(medical, score_columns=["risk_30d"], label_column="death_30d")
    np.testing.assert_array_equal(both.labels, preds.labels)


def test_a_named_score_column_never_lets_another_column_be_blamed(medical, tmp_path):
    """Without an outcome the error is about the label and the named score, never about 'bmi' (which the
    loader used to call a score column and offer to divide by 100)."""
    df = pd.read_csv(medical).drop(columns=["death_30d"])
    path = tmp_path / "no_outcome.csv"
    df.to_csv(path, index=False)
    with pytest.raises(PredictionsError) as exc:
        _load(path, score_columns=["risk_30d"])
    message = str(exc.value)
    assert "no label column" in message
    assert "'bmi' holds values" not in message and "percent" not in message


def test_the_command_line_says_which_option_to_give(medical):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = lambda *a: subprocess.run([sys.executable, "-m", "pbr_core.cli", "evaluate", str(medical), *a],
                                    capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    proc = run()
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "name it as the only score column (--score-columns risk_30d)" in proc.stderr
    assert "score_columns" not in proc.stderr
    proc = run("--score-columns", "risk_30d")
    assert proc.returncode == 0, proc.stderr[-2000:]
    # The key column's width follows the longest key (it grew with the new keys): read the rows as key, value.
    assert re.search(r"^kind +binary$", proc.stdout, re.M) and re.search(r"^n +1500$", proc.stdout, re.M)
