"""Recalibrated predictions keep the user's column names (issue 35: a binary file's download read
``0, 1, label`` instead of ``p_dem, won``): save_predictions(headers_from=...), the dashboard's
download and ``pbr-calib apply``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core.cli import EXIT_OK, main
from pbr_core.loading import save_predictions
from pbr_core.recalibrators import get_recalibrator

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def forecasts_csv() -> bytes:
    """504 random rows of the real KITTI random-forest p(y=1), laid out like the audit's election
    forecasts: a text id, the probability, the outcome, under their own names."""
    frame = pd.read_csv(ROOT / "sample_data" / "kitti_random_forest.csv")
    rows = np.sort(np.random.default_rng(0).choice(len(frame), size=504, replace=False))
    return pd.DataFrame({"race_id": [f"race {i}" for i in range(504)], "p_dem": frame["p_positive"].to_numpy()[rows],
                         "won": frame["label"].to_numpy()[rows]}).to_csv(index=False).encode()


def test_a_binary_download_keeps_p_dem_and_won_and_reads_back(forecasts_csv):
    preds = pbr_core.load_predictions(forecasts_csv, format="csv", label_column="won")
    rec = get_recalibrator("platt").fit(preds)
    probs = rec.predict_proba(preds)
    out = save_predictions(preds.with_probs(probs), headers_from=preds, extra_columns={"used_for_fit": np.ones(504, bool)})
    frame = pd.read_csv(pd.io.common.BytesIO(out))
    assert list(frame.columns) == ["race_id", "p_dem", "won", "used_for_fit"]  # the file's names and order
    np.testing.assert_allclose(frame["p_dem"], probs[:, 1], rtol=0, atol=1e-15)
    assert (frame["won"] == preds.labels).all()
    back = pbr_core.load_predictions(out, format="csv", label_column="won")
    assert back.kind == "binary" and dict(back.column_roles)["p_dem"] == "score"
    np.testing.assert_allclose(back.p_positive, probs[:, 1], rtol=0, atol=1e-15)
    # Without headers_from: the class names and 'label', as before.
    assert save_predictions(preds.with_probs(probs)).decode().splitlines()[0] == "0,1,label,race_id"


def test_multiclass_probability_headers_are_kept_and_logit_headers_are_not():
    frame = pd.read_csv(ROOT / "sample_data" / "kitti_multiclass_random_forest.csv").head(400)
    scores = [c for c in frame.columns if c.startswith("class_")]
    renamed = frame.rename(columns={c: f"P({c[6:]})" for c in scores}).rename(columns={"label": "truth"})
    preds = pbr_core.load_predictions(renamed.to_csv(index=False).encode(), format="csv", label_column="truth")
    out = save_predictions(preds.with_probs(preds.probs), headers_from=preds).decode().splitlines()[0]
    assert out.split(",") == list(renamed.columns)
    # Logits: the written numbers are probabilities now, so the logit headers are not reused.
    logits = pd.DataFrame(np.log(np.clip(preds.probs, 1e-9, None)), columns=[f"logit_{k}" for k in range(preds.n_classes)])
    logits["truth"] = preds.labels
    lp = pbr_core.load_predictions(logits.to_csv(index=False).encode(), format="csv", label_column="truth",
                                   input_type="logits")
    head = save_predictions(lp.with_probs(lp.probs), headers_from=lp).decode().splitlines()[0].split(",")
    assert head[-1] == "truth" and not any(h.startswith("logit_") for h in head)


def test_the_dashboard_download_and_cli_apply_keep_the_names(forecasts_csv, tmp_path, capsys):
    from dashboard import runs

    preds = pbr_core.load_predictions(forecasts_csv, format="csv", label_column="won")
    result = runs.run_ship(preds, runs.FitSettings(method="platt", holdout=0.3), runs.NullReporter())
    assert result.calibrated_csv().decode().splitlines()[0] == "race_id,p_dem,won,used_for_fit"
    data, model, out = tmp_path / "forecasts.csv", tmp_path / "platt.json", tmp_path / "calibrated.csv"
    data.write_bytes(forecasts_csv)
    assert main(["fit", str(data), "--method", "platt", "--label-column", "won", "--out", str(model)]) == EXIT_OK
    assert main(["apply", str(model), str(data), "--label-column", "won", "--out", str(out)]) == EXIT_OK
    capsys.readouterr()
    assert out.read_text().splitlines()[0] == "race_id,p_dem,won"


def test_a_binary_log_odds_column_is_written_as_one_p_column_in_its_place(forecasts_csv):
    """The audit's fraud file (txn_id, fraud_logit, is_fraud): its download read ``txn_id,0,1,is_fraud``,
    the logit column gone and two anonymous columns in its place. Now one ``p_<class 1>`` column
    where the logit column was, which reads back as the binary file's p(y=1)."""
    frame = pd.read_csv(pd.io.common.BytesIO(forecasts_csv))
    p = np.clip(frame["p_dem"].to_numpy(), 1e-6, 1 - 1e-6)
    logits = pd.DataFrame({"txn_id": [f"T{i}" for i in range(len(p))], "fraud_logit": np.log(p / (1 - p)),
                           "is_fraud": frame["won"]})
    preds = pbr_core.load_predictions(logits.to_csv(index=False).encode(), format="csv", label_column="is_fraud",
                                      input_type="logits")
    probs = get_recalibrator("temperature").fit(preds).predict_proba(preds)
    out = save_predictions(preds.with_probs(probs), headers_from=preds, extra_columns={"used_for_fit": np.ones(len(p), bool)})
    name = f"p_{preds.class_names[1]}"
    back = pd.read_csv(pd.io.common.BytesIO(out))
    assert list(back.columns) == ["txn_id", name, "is_fraud", "used_for_fit"]
    np.testing.assert_allclose(back[name], probs[:, 1], rtol=0, atol=1e-15)
    again = pbr_core.load_predictions(out, format="csv", label_column="is_fraud")
    assert again.kind == "binary" and again.input_type == "probabilities"
    np.testing.assert_allclose(again.p_positive, probs[:, 1], rtol=0, atol=1e-15)


@pytest.mark.parametrize("input_type", ["probabilities", "logits"])
def test_true_false_labels_are_written_back_as_true_false(forecasts_csv, tmp_path, capsys, input_type):
    """A binary file whose outcome is true/false (read as booleans): the class names are False/True, so
    the downloads and ``pbr-calib apply`` write the label back as False/True (not 0/1) and a log-odds
    column's p(y=1) as ``p_True`` (not ``p_1``), as the README promises for labels written as names;
    the written file reads back with the same labels and classes (a user audit)."""
    frame = pd.read_csv(pd.io.common.BytesIO(forecasts_csv))
    p = np.clip(frame["p_dem"].to_numpy(), 1e-6, 1 - 1e-6)
    score = np.log(p / (1 - p)) if input_type == "logits" else p
    table = pd.DataFrame({"txn_id": [f"T{i}" for i in range(len(p))], "fraud_score": score,
                          "is_fraud": frame["won"].astype(bool)})
    data = table.to_csv(index=False).encode()
    preds = pbr_core.load_predictions(data, format="csv", input_type=input_type)
    assert preds.class_names == ("False", "True") and preds.labels_as_names
    np.testing.assert_array_equal(preds.labels, table["is_fraud"].to_numpy().astype(int))
    probs = get_recalibrator("temperature").fit(preds).predict_proba(preds)
    out = save_predictions(preds.with_probs(probs), headers_from=preds)
    back = pd.read_csv(pd.io.common.BytesIO(out))
    name = "p_True" if input_type == "logits" else "fraud_score"
    assert list(back.columns) == ["txn_id", name, "is_fraud"]
    assert back["is_fraud"].dtype == bool and (back["is_fraud"] == table["is_fraud"]).all()
    again = pbr_core.load_predictions(out, format="csv")
    assert again.class_names == ("False", "True")
    np.testing.assert_array_equal(again.labels, preds.labels)
    np.testing.assert_allclose(again.p_positive, probs[:, 1], rtol=0, atol=1e-15)
    # The streamed apply of the CLI keeps the label's values too.
    src, model, written = tmp_path / "fraud.csv", tmp_path / "t.json", tmp_path / "out.csv"
    src.write_bytes(data)
    kind = ["--input-type", input_type]
    assert main(["fit", str(src), "--method", "temperature", *kind, "--out", str(model)]) == EXIT_OK
    assert main(["apply", str(model), str(src), *kind, "--out", str(written)]) == EXIT_OK
    capsys.readouterr()
    applied = pd.read_csv(written)
    assert (applied["is_fraud"] == table["is_fraud"]).all()
