"""Audit 12a (a new user's files): percentages written with a % sign in a score column, also with
a decimal comma ("93,3%" in a ';' Excel export); a text label beside a score named after one of its
values (p_approved beside approved/denied); the class a score is the probability of, said by the user
(positive_class=, --positive-class); labels of one name beside a header that names the other class.

The files are built here as the audit's recipe built them (/tmp/audit12a/make_files.py), smaller."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pbr_core import PredictionsError, load_predictions
from pbr_core.cli import main as cli_main


def _credit(n: int = 600, seed: int = 7) -> pd.DataFrame:
    """A credit file: approval probability (0.1 % steps), outcome drawn from it, an amount, an age."""
    rng = np.random.default_rng(seed)
    p = np.round(rng.beta(1.2, 2.5, n), 3)
    return pd.DataFrame({
        "application_id": [f"{i:07d}" for i in rng.choice(10 ** 6, n, replace=False)],
        "region": rng.choice(["Nord", "Süd", "Île-de-France"], n),
        "loan_amount": np.round(rng.uniform(500, 50000, n), 2),
        "age": rng.integers(18, 80, n),
        "approval_score": p,
        "decision": np.where(rng.random(n) < p, "approved", "denied"),
    })


def _excel_csv(df: pd.DataFrame, score: str = "approval_score", pct: bool = True) -> bytes:
    """As Excel writes it in a European locale: ';', decimal comma, '93,3%', BOM, CRLF, empty rows."""
    d = df.copy()
    if pct:
        d[score] = d[score].map(lambda v: f"{100 * v:.1f}".replace(".", ",") + "%")
    else:
        d[score] = d[score].map(lambda v: f"{v:.3f}".replace(".", ","))
    d["loan_amount"] = d["loan_amount"].map(lambda v: f"{v:.2f}".replace(".", ","))
    text = d.to_csv(sep=";", index=False, lineterminator="\r\n") + "\r\n" + ";" * (d.shape[1] - 1) + "\r\n\r\n"
    return text.encode("utf-8-sig")


def _plain_csv(df: pd.DataFrame, score: str = "approval_score") -> bytes:
    d = df.assign(**{score: df[score].map(lambda v: f"{100 * v:.1f}%")})
    return d.to_csv(index=False).encode()


def _truth(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The scores as fractions rounded as the file writes them (0.1 of a percent), and the outcome."""
    return np.round(df["approval_score"].to_numpy() * 1000) / 1000, (df["decision"] == "approved").to_numpy(int)


# ---------------------------------------------------------------------------------- item 1: % signs
def test_an_excel_export_with_percent_scores_loads_by_detection_and_as_named():
    df = _credit()
    p, y = _truth(df)
    for kw in ({"positive_class": "approved"},
               {"positive_class": "approved", "label_column": "decision", "score_columns": ["approval_score"]}):
        preds = load_predictions(_excel_csv(df), format="csv", name="credit_excel.csv", **kw)
        assert preds.n == len(df) and preds.class_names == ("denied", "approved")
        np.testing.assert_allclose(preds.p_positive, p, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(preds.labels, y)
        assert dict(preds.column_roles)["loan_amount"] == "metadata"
        first = _excel_csv(df).decode("utf-8-sig").split("\r\n")[1].split(";")[4]
        assert (f"Column 'approval_score' is written as percentages ({first}): read as fractions of 1 "
                f"({p[0]:.4g}).") in preds.notes


def test_a_plain_csv_with_percent_scores_is_found_without_naming_anything():
    df = _credit().assign(approved=lambda d: np.where(d["decision"] == "approved", "Yes", "No")).drop(
        columns="decision")
    p = np.round(df["approval_score"].to_numpy() * 1000) / 1000
    preds = load_predictions(_plain_csv(df), format="csv")
    roles = dict(preds.column_roles)
    assert roles["approval_score"] == "score" and roles["approved"] == "label" and roles["loan_amount"] == "metadata"
    np.testing.assert_allclose(preds.p_positive, p, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(preds.labels, (df["approved"] == "Yes").to_numpy(int))
    # named: the same numbers (before: "could not convert string to float: '0.0%'")
    named = load_predictions(_plain_csv(df), format="csv", score_columns=["approval_score"])
    np.testing.assert_allclose(named.p_positive, p, rtol=0, atol=1e-12)


def test_the_percentages_option_on_a_file_with_percent_signs_divides_once():
    df = _credit(200)
    preds = load_predictions(_plain_csv(df), format="csv", percent=True, positive_class="approved")
    np.testing.assert_allclose(preds.p_positive, _truth(df)[0], rtol=0, atol=1e-12)
    assert any("not applied again to 'approval_score'" in n for n in preds.notes)


def test_a_confidence_in_percent_with_a_decimal_comma():
    rng = np.random.default_rng(3)
    conf = np.round(rng.uniform(0.2, 1.0, 300), 3)
    correct = rng.random(300) < conf
    df = pd.DataFrame({"question_idx": np.arange(300), "model": "LLaMA-13B",
                       "verbal_confidence": [f"{100 * c:.1f}".replace(".", ",") + "%" for c in conf],
                       "correct": np.where(correct, "Yes", "No")})
    data = df.to_csv(sep=";", index=False).encode("utf-8-sig")
    preds = load_predictions(data, format="csv")
    assert preds.kind == "top_label"
    np.testing.assert_allclose(preds.confidence, conf, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(preds.correct, correct.astype(int))
    assert any(n.startswith("Column 'verbal_confidence' is written as percentages (") for n in preds.notes)


def test_percentages_mixed_with_numbers_or_written_with_the_other_decimal_mark_are_not_guessed():
    base = b"p_approved,label\n"
    with pytest.raises(PredictionsError):  # half of the column in percent: not read by guess
        load_predictions(base + b"40%,1\n0.3,0\n55%,1\n0.2,0\n", format="csv")
    # "40,5%" in a comma-separated file is quoted text with a comma: not taken for a decimal comma
    with pytest.raises(PredictionsError):
        load_predictions(base + b'"40,5%",1\n"30,1%",0\n"55,0%",1\n"20,2%",0\n', format="csv")


def test_a_covariate_beside_a_named_probability_keeps_the_old_question_when_it_could_be_log_odds():
    rng = np.random.default_rng(0)
    n = 300
    p = rng.uniform(0, 1, n)
    y = (rng.random(n) < p).astype(int)
    text = pd.DataFrame({"p_default": p, "balance_ratio": np.linspace(0.5, 3.7, n), "label": y}).to_csv(index=False)
    with pytest.raises(PredictionsError, match="ambiguous"):
        load_predictions(text.encode(), format="csv")
    text = pd.DataFrame({"p_default": p, "loan_amount": np.linspace(500, 5000, n), "label": y}).to_csv(index=False)
    preds = load_predictions(text.encode(), format="csv")
    assert dict(preds.column_roles)["loan_amount"] == "metadata"
    np.testing.assert_allclose(preds.p_positive, p, rtol=0, atol=1e-15)


# ---------------------------------------------------------------------- item 2: the class of the score
def test_a_decision_column_holding_the_class_the_score_is_named_after_is_the_label():
    df = _credit().rename(columns={"approval_score": "p_approved"})
    preds = load_predictions(df[["p_approved", "decision"]].to_csv(index=False).encode(), format="csv")
    assert dict(preds.column_roles) == {"p_approved": "score", "decision": "label"}
    assert preds.class_names == ("denied", "approved")
    np.testing.assert_array_equal(preds.labels, (df["decision"] == "approved").to_numpy(int))
    assert ("Binary labels: 'approved' is class 1 (named by the score column 'p_approved'), 'denied' is class 0."
            in preds.notes)
    # the model's own decision (a threshold on the score) is still never taken
    own = df.assign(decision=np.where(df["p_approved"] >= 0.5, "approved", "denied"))
    with pytest.raises(PredictionsError, match="the scores reproduce it on every row"):
        load_predictions(own[["p_approved", "decision"]].to_csv(index=False).encode(), format="csv")
    # a 'predicted' column is the model's output: not the label, whatever it holds
    pred = df.rename(columns={"decision": "predicted_decision"})[["p_approved", "predicted_decision"]]
    with pytest.raises(PredictionsError, match="no label column"):
        load_predictions(pred.to_csv(index=False).encode(), format="csv")


def test_the_user_says_which_class_the_score_is_the_probability_of():
    df = _credit(300)
    data = df[["approval_score", "decision"]].to_csv(index=False).encode()
    with pytest.raises(PredictionsError, match=r"Column 'decision' holds two names, 'approved' and 'denied', but "
                                               r"the file does not say which class 'approval_score' is the "
                                               r"probability of: say which \(positive_class='approved' or "):
        load_predictions(data, format="csv")
    with pytest.raises(PredictionsError, match=r"Say which \(positive_class='denied' or positive_class='approved'\)"):
        load_predictions(data, format="csv", label_column="decision")
    p, y = _truth(df)
    for positive, ones in (("approved", y), ("denied", 1 - y)):
        # (p(denied) is contradicted by the outcomes: not found by its values, taken when named)
        named = {} if positive == "approved" else {"label_column": "decision"}
        preds = load_predictions(data, format="csv", positive_class=positive, **named)
        np.testing.assert_array_equal(preds.labels, ones)
        assert preds.class_names[1] == positive
        assert any(n.startswith(f"Binary labels: '{positive}' is class 1 (as asked") for n in preds.notes)
    np.testing.assert_allclose(load_predictions(data, format="csv", positive_class="approved").p_positive, p,
                               rtol=0, atol=1e-12)
    with pytest.raises(PredictionsError, match=r"positive_class='maybe' is not one of the values"):
        load_predictions(data, format="csv", label_column="decision", positive_class="maybe")


def test_the_cli_takes_the_positive_class(tmp_path, capsys):
    df = _credit(300)
    path = tmp_path / "credit.csv"
    path.write_bytes(_excel_csv(df))
    assert cli_main(["evaluate", str(path)]) != 0
    err = capsys.readouterr().err
    assert "--positive-class" in err
    assert cli_main(["evaluate", str(path), "--positive-class", "approved", "--format", "json"]) == 0
    out = capsys.readouterr().out
    p, y = _truth(df)
    import json
    report = json.loads(out)
    assert report["n"] == 300
    assert report["brier"] == pytest.approx(np.mean((p - y) ** 2), abs=1e-12)  # computed here, independently


# ------------------------------------------------------------------------- item 3: one outcome only
def test_labels_of_one_name_beside_a_header_that_names_the_other_class():
    df = _credit(300).rename(columns={"approval_score": "p_approved"})
    denied = df[df["decision"] == "denied"]
    preds = load_predictions(denied[["p_approved", "decision"]].to_csv(index=False).encode(), format="csv",
                             label_column="decision")
    assert preds.class_names == ("denied", "approved") and not preds.labels.any()
    assert any("holds one class name only, 'denied': read as class 0" in n for n in preds.notes)
    # a name that may be a form of the header's class is still refused (approval / approved)
    only = denied.assign(decision="approval")[["p_approved", "decision"]]
    with pytest.raises(PredictionsError, match="one class name only"):
        load_predictions(only.to_csv(index=False).encode(), format="csv", label_column="decision")
    # and so is a name beside a header that names no class
    plain = denied.rename(columns={"p_approved": "score"})[["score", "decision"]]
    with pytest.raises(PredictionsError, match="one class name only"):
        load_predictions(plain.to_csv(index=False).encode(), format="csv", label_column="decision")
    # the user may say it: then the other name is class 0 too
    asked = load_predictions(plain.to_csv(index=False).encode(), format="csv", label_column="decision",
                             positive_class="approved")
    assert asked.class_names == ("denied", "approved") and not asked.labels.any()


# ------------------------------------------------------------------- item 4: a download read back
def test_the_downloads_used_for_fit_column_is_never_taken_for_the_label():
    """An old calibrated download: used_for_fit (True / False) beside the real outcome. Where the fit
    rows were not drawn at random (the first rows of a drifting log), its True rows also get higher
    scores, and both columns could be the label by their values: the loader asked which. Its name
    says what it is: metadata."""
    rng = np.random.default_rng(5)
    n = 600
    p = np.clip(np.linspace(0.7, 0.3, n) + rng.normal(0, 0.15, n), 0.02, 0.98)   # scores drift down the file
    y = (rng.random(n) < p).astype(int)
    used = np.arange(n) < 300                                # fitted on the first half
    df = pd.DataFrame({"calibrated_p": p, "won": y, "used_for_fit": used})
    preds = load_predictions(df.to_csv(index=False).encode(), format="csv")
    roles = dict(preds.column_roles)
    assert roles["won"] == "label" and roles["used_for_fit"] == "metadata"
    np.testing.assert_array_equal(preds.labels, y)
    np.testing.assert_array_equal(preds.metadata["used_for_fit"].to_numpy(), used)
    # without the real outcome it is not offered as the label either
    with pytest.raises(PredictionsError) as info:
        load_predictions(df.drop(columns="won").to_csv(index=False).encode(), format="csv")
    assert "used_for_fit" not in str(info.value).split("The columns are")[0]


def test_a_percent_column_kept_beside_the_predictions_keeps_its_cells_as_written():
    df = _credit(300).assign(interest_rate=lambda d: [f"{r:.1f}%" for r in np.linspace(2.5, 9.5, len(d))])
    data = df.assign(approval_score=df["approval_score"].map(lambda v: f"{100 * v:.1f}%")).to_csv(index=False).encode()
    preds = load_predictions(data, format="csv", score_columns=["approval_score"], positive_class="approved")
    assert dict(preds.column_roles)["interest_rate"] == "metadata"
    assert preds.metadata["interest_rate"].tolist() == df["interest_rate"].tolist()   # "2.5%", not 0.025
    assert not any("'interest_rate' is written as percentages" in n for n in preds.notes)
    np.testing.assert_allclose(preds.p_positive, _truth(df)[0], rtol=0, atol=1e-12)


def test_a_streamed_excel_export_reads_its_percentages_as_the_file_loaded_whole(tmp_path, capsys):
    import json

    df = _credit(300)
    path = tmp_path / "credit.csv"
    path.write_bytes(_excel_csv(df))
    results = []
    for extra in ((), ("--stream",)):
        assert cli_main(["evaluate", str(path), "--positive-class", "approved", "--format", "json", "--quiet",
                         *extra]) == 0
        results.append(json.loads(capsys.readouterr().out))
    p, y = _truth(df)
    for report in results:
        assert report["n"] == 300 and report["brier"] == pytest.approx(np.mean((p - y) ** 2), abs=1e-12)
