"""The Data page's error box for two exports of audit 3: an R export whose float covariate (bmi) makes
the score columns ambiguous (A5: the page says so and which control to use; choosing the score column
finds the Yes/No outcome by its values), and a file of rounded probabilities (C3: only the hint about
renormalising, not one about choosing the label column)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from test_loader_named_scores import r_medical_csv  # noqa: E402

import dashboard.texts as texts  # noqa: E402


def _upload(at, name: str, data: bytes) -> None:
    at.file_uploader(key="data_upload").upload(name, data, "text/csv").run()
    assert not at.exception, at.exception


def test_an_r_export_names_the_score_ambiguity_and_loads_once_the_score_is_chosen(at, tmp_path):
    path = r_medical_csv(tmp_path / "r_medical.csv", n=800)
    _upload(at, "r_medical.csv", path.read_bytes())
    message = at.error[0].value
    assert "the score columns are ambiguous" in message and "bmi" in message
    assert ("name it as the only score column (the *Score columns* under **Columns and reading options**)"
            in message)
    assert "score_columns" not in message and "could be the label" not in message
    # Audit 4: only the score columns' hint (naming the label alone would still fail), and the verbs agree.
    assert texts.SCORE_COLUMNS_HINT in message and texts.COLUMNS_HINT not in message
    assert "'risk_30d' stays inside" in message and "'bmi' does not" in message
    at.multiselect(key="data_score_columns").set_value(["risk_30d"])
    at.button(key="data_apply").click().run()
    assert not at.exception and not at.error
    preds = at.session_state["pbr_loaded"].preds
    assert dict(preds.column_roles)["death_30d"] == "label"
    df = pd.read_csv(path)
    np.testing.assert_array_equal(preds.labels, (df["death_30d"] == "Yes").to_numpy().astype(int))


def test_rounded_probabilities_get_only_the_renormalise_hint(at):
    rng = np.random.default_rng(3)
    p = rng.dirichlet([2, 2, 2], 600)
    df = pd.DataFrame(np.round(p, 3), columns=["neg", "neu", "pos"])
    df["sentiment"] = np.array(["neg", "neu", "pos"])[[rng.choice(3, p=row) for row in p]]
    _upload(at, "sentiment.csv", df.to_csv(index=False).encode())
    message = at.error[0].value
    assert "rounded" in message
    assert texts.RENORMALISE_HINT in message
    assert texts.COLUMNS_HINT not in message and message.count("Columns and reading options") <= 2
    # Audit 4: the rounding is the whole problem, so no "The score columns are ...; name the right ones".
    assert "name the right ones" not in message and "The score columns are" not in message


def test_a_doubled_file_gets_the_copies_note_on_the_data_page(at):
    """Audit 9b, finding 3: every row twice (a join that doubled the file) is said among the loader's notes,
    and nothing is dropped."""
    rng = np.random.default_rng(4)
    p = rng.beta(2, 5, 150)
    df = pd.DataFrame({"p_churn": p, "churn": (rng.random(150) < p).astype(int), "plan": rng.choice(["a", "b"], 150)})
    df = df.loc[np.repeat(df.index, 2)]
    _upload(at, "joined.csv", df.to_csv(index=False).encode())
    assert not at.error
    notes = [i.value for i in at.info if "What the loader decided" in i.value]
    assert notes and "150 of the 300 rows (50 %) are exact copies of another row" in notes[0]
    assert "remove them and load the file again" in notes[0]
    assert at.session_state["pbr_loaded"].preds.n == 300
