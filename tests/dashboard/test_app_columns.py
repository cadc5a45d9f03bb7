"""The Data page with real exports: extra columns are kept, the user says which column is what,
and messages name the page's controls (never Python arguments)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import pbr_core

ROOT = Path(__file__).resolve().parents[2]
PYTHON_ADVICE = ("label_column=", "score_columns=", "ignore_columns=", "renormalize=True", "input_type=")


@pytest.fixture(scope="module")
def export() -> pd.DataFrame:
    """Real CIFAR-10 ResNet-110 predictions (500 rows) exported with an id, a segment, a date and a code."""
    preds = pbr_core.load_predictions(ROOT / "sample_data" / "cifar10_resnet110.npz").subset(np.arange(500))
    rng = np.random.default_rng(1)
    df = pd.DataFrame(preds.probs, columns=[f"p_{c}" for c in preds.class_names])
    df.insert(0, "customer_id", np.arange(7000, 7500))
    df["segment"] = rng.choice(["retail", "business"], 500)
    df["scored_on"] = pd.date_range("2025-01-01", periods=500, freq="D").strftime("%Y-%m-%d")
    df["region_code"] = rng.integers(10, 20, 500)
    df["correct_answer"] = preds.labels
    return df


def _upload(at: AppTest, name: str, df: pd.DataFrame) -> None:
    at.file_uploader(key="data_upload").upload(name, df.to_csv(index=False).encode(), "text/csv").run()
    assert not at.exception, at.exception


def _page_text(at: AppTest) -> str:
    parts = [e.value for e in (*at.error, *at.info, *at.markdown, *at.caption, *at.warning)]
    return "\n".join(str(p) for p in parts)


def test_an_export_with_metadata_loads_with_the_right_numbers(at, export):
    df = export.rename(columns={"correct_answer": "label"})
    _upload(at, "export.csv", df)
    assert not at.error
    loaded = at.session_state["pbr_loaded"]
    assert loaded.preds.n_classes == 10 and loaded.preds.metadata.shape == (500, 4)
    probs = df[[f"p_{k}" for k in range(10)]].to_numpy()
    at.switch_page("views/reliability.py").run()
    ece = pbr_core.ece(probs, df["label"].to_numpy())
    assert any(m.value == f"{ece:.4f}" for m in at.metric if m.label == "ECE")
    at.switch_page("views/data.py").run()
    roles = at.dataframe[0].value  # every column and what it was used as
    assert dict(zip(roles["column"], roles["used as"]))["customer_id"] == "metadata (kept)"
    assert "an identifier" in _page_text(at) and "'segment'" in _page_text(at)


def test_an_unknown_label_name_is_chosen_from_the_files_columns(at, export):
    _upload(at, "truth.csv", export)
    assert at.error and "no label column" in at.error[0].value
    message = at.error[0].value
    assert not any(a in message for a in PYTHON_ADVICE), message
    assert "Columns and reading options" in message and "still in use" in message
    # The options now list the failed file's columns.
    box = at.selectbox(key="data_label_column")
    assert "correct_answer" in box.options and "customer_id" in box.options
    box.set_value("correct_answer")
    at.button(key="data_apply").click().run()
    assert not at.exception and not at.error
    loaded = at.session_state["pbr_loaded"]
    assert loaded.file_name == "truth.csv" and loaded.preds.n_classes == 10
    assert dict(loaded.preds.column_roles)["correct_answer"] == "label"


def test_ambiguous_scores_are_named_on_the_page(at):
    kitti = pbr_core.load_predictions(ROOT / "sample_data" / "kitti_random_forest.csv")
    df = pd.DataFrame({"p_positive": kitti.probs[:300, 1], "balance_ratio": np.linspace(0.5, 3.5, 300),
                       "label": kitti.labels[:300]})
    _upload(at, "ambiguous.csv", df)
    assert at.error and "ambiguous" in at.error[0].value
    assert not any(a in at.error[0].value for a in PYTHON_ADVICE), at.error[0].value
    at.multiselect(key="data_score_columns").set_value(["p_positive"])
    at.button(key="data_apply").click().run()
    assert not at.exception and not at.error
    assert at.session_state["pbr_loaded"].preds.kind == "binary"


def test_the_old_error_goes_when_a_good_file_loads(at, export):
    _upload(at, "truth.csv", export)
    assert at.error
    _upload(at, "good.csv", export.rename(columns={"correct_answer": "label"}))
    assert not at.error
    assert at.session_state["pbr_loaded"].file_name == "good.csv"


def test_notes_on_the_page_name_controls_not_python(at, export):
    df = pd.DataFrame(np.log(export[[f"p_{k}" for k in range(10)]].to_numpy()),
                      columns=[f"logit_{k}" for k in range(10)])
    df["label"] = export["correct_answer"]
    _upload(at, "logits.csv", df)
    assert not at.error
    text = _page_text(at)
    assert "logits" in text and not any(a in text for a in PYTHON_ADVICE), text
    assert "The score columns hold" in text


def test_the_preview_shows_readable_numbers_and_the_metadata(at, export):
    _upload(at, "export.csv", export.rename(columns={"correct_answer": "label"}))
    preview = at.dataframe[-1]
    assert "customer_id" in preview.value.columns and "segment" in preview.value.columns
    # The probabilities are shown with 4 decimals, whatever their size (the column config the page sent).
    import json

    config = json.loads(preview.proto.columns)
    assert config["p(0)"]["type_config"]["format"] == "%.4f"
    assert config["confidence"]["type_config"]["format"] == "%.4f"



def test_scores_that_are_not_probabilities_are_mapped_and_the_rest_audited(at):
    from pbr_core.loading import read_table
    from pbr_core.scores import map_scores

    table = read_table(ROOT / "sample_data" / "adult_gradient_boosting.csv.gz")
    p = table.pop("p_gt50k").to_numpy()
    table["risk_decile"] = pd.qcut(p, 10, labels=False) + 1
    table = table.rename(columns={"label": "high_income"})
    _upload(at, "scorecard.csv", table)
    assert at.error  # no probabilities: the decile is kept as metadata, and there is no label by name
    at.selectbox(key="data_map_score").set_value("risk_decile")
    at.selectbox(key="data_map_label").set_value("high_income")
    at.slider(key="data_map_share").set_value(40)
    at.button(key="data_map").click().run()
    assert not at.exception and not at.error
    loaded = at.session_state["pbr_loaded"]
    ref = map_scores(table, "risk_decile", "high_income", share=0.4)
    assert loaded.preds.n == ref.preds.n and loaded.preds.kind == "binary"
    np.testing.assert_array_equal(loaded.preds.p_positive, ref.preds.p_positive)
    assert "mapped to probabilities" in loaded.name
    assert any("not how calibrated the raw scores are" in i.value for i in at.info)
    at.switch_page("views/reliability.py").run()
    assert not at.exception
    ece = pbr_core.ece(ref.preds.p_positive, ref.preds.labels)
    assert any(m.value == f"{ece:.4f}" for m in at.metric if m.label == "ECE")


def test_a_file_of_one_outcome_gets_a_warning(at, export):
    """Every label the same class (a filtered export): the page warns once, the numbers still load."""
    one = export[export["correct_answer"] == 3].rename(columns={"correct_answer": "label"})
    _upload(at, "only_cats.csv", one)
    assert not at.error
    warnings = [w.value for w in at.warning if "same class" in w.value]
    assert len(warnings) == 1 and "**3**" in warnings[0]
    assert not any("same class" in i.value for i in at.info)
    _upload(at, "all.csv", export.rename(columns={"correct_answer": "label"}))
    assert not any("same class" in w.value for w in at.warning)


def test_the_loader_notes_a_file_of_one_outcome(export):
    one = export[export["correct_answer"] == 3].rename(columns={"correct_answer": "label"})
    preds = pbr_core.load_predictions(one.to_csv(index=False).encode(), format="csv")
    assert preds.only_label() == "3" and any("same class ('3')" in n for n in preds.notes)
    both = pbr_core.load_predictions(export.rename(columns={"correct_answer": "label"}).to_csv(index=False).encode(),
                                     format="csv")
    assert both.only_label() is None and not any("same class" in n for n in both.notes)


def test_a_json_lines_upload_with_a_score_vector_loads(at, export):
    """JSON Lines records with the probabilities as one array per record, as an evaluation harness writes
    them: the page reads one score column per class and the ECE equals the CSV's."""
    import json

    probs = export[[f"p_{k}" for k in range(10)]].to_numpy()
    lines = "\n".join(json.dumps({"meta": {"segment": s}, "probs": [float(x) for x in p], "label": int(y)})
                      for s, p, y in zip(export["segment"], probs, export["correct_answer"]))
    at.file_uploader(key="data_upload").upload("run.jsonl", lines.encode(), "application/json").run()
    assert not at.exception and not at.error
    preds = at.session_state["pbr_loaded"].preds
    assert preds.n_classes == 10 and preds.metadata.columns.tolist() == ["meta.segment"]
    assert "10 numbers per row" in _page_text(at)
    at.switch_page("views/reliability.py").run()
    ece = pbr_core.ece(probs, export["correct_answer"].to_numpy())
    assert any(m.value == f"{ece:.4f}" for m in at.metric if m.label == "ECE")


def test_an_excel_upload_loads(at, export):
    import io

    buf = io.BytesIO()
    export.rename(columns={"correct_answer": "label"}).to_excel(buf, index=False, sheet_name="preds")
    at.file_uploader(key="data_upload").upload(
        "audit.xlsx", buf.getvalue(), "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet").run()
    assert not at.exception and not at.error
    preds = at.session_state["pbr_loaded"].preds
    probs = export[[f"p_{k}" for k in range(10)]].to_numpy()
    np.testing.assert_allclose(preds.probs, probs, rtol=0, atol=1e-15)
    assert "customer_id" in preds.metadata.columns
