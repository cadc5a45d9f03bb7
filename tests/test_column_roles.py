"""Column roles: real exports carry ids, folds, codes, text segments and dates next to the
predictions. None of them may become a score silently (the numbers must equal those of the bare
predictions), none of them may get the file refused, and every decision is in the notes.

The predictions are real (CIFAR-10 ResNet-110 and KITTI random forest from sample_data/); the extra
columns are added the way teams export them.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pbr_core
from pbr_core import PredictionsError, load_predictions
from pbr_core.cli import main as cli_main

SAMPLES = Path(__file__).resolve().parents[1] / "sample_data"


@pytest.fixture(scope="module")
def cifar10():
    return load_predictions(SAMPLES / "cifar10_resnet110.npz")


@pytest.fixture(scope="module")
def kitti():
    return load_predictions(SAMPLES / "kitti_random_forest.csv")


def _export(preds, prefix: str = "", seed: int = 0) -> pd.DataFrame:
    """A team's export of real predictions: id first, scores, then fold, codes, text, dates, a flag, the label."""
    rng = np.random.default_rng(seed)
    n = preds.n
    df = pd.DataFrame(preds.probs, columns=[f"{prefix}{c}" for c in preds.class_names])
    df.insert(0, "id", np.arange(100_001, 100_001 + n))
    df["fold"] = np.arange(n) % 10
    df["race_code"] = rng.integers(1, 6, n)
    df["segment"] = rng.choice(["retail", "business", "public"], n)
    df["created_at"] = pd.date_range("2024-03-01", periods=n, freq="17min").strftime("%Y-%m-%d %H:%M:%S")
    df["split"] = "test"
    df["is_member"] = rng.integers(0, 2, n)
    df["label"] = preds.labels
    return df


def _csv(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode()


# ---------------------------------------------------------------------------- numbers unchanged
@pytest.mark.parametrize("prefix", ["", "p_", "prob_"])
def test_metadata_columns_never_change_the_numbers(cifar10, prefix):
    df = _export(cifar10, prefix)
    preds = load_predictions(_csv(df), format="csv", name="export.csv")
    assert preds.kind == "multiclass" and preds.n_classes == 10
    assert preds.class_names == cifar10.class_names  # the prefix is not part of the class name
    np.testing.assert_allclose(preds.probs, cifar10.probs, atol=1e-15)
    assert pbr_core.ece(preds.probs, preds.labels) == pytest.approx(pbr_core.ece(cifar10.probs, cifar10.labels), abs=1e-15)
    roles = dict(preds.column_roles)
    assert [c for c, r in preds.column_roles if r == "score"] == [f"{prefix}{c}" for c in cifar10.class_names]
    assert {c: roles[c] for c in ("id", "fold", "race_code", "segment", "created_at", "split", "is_member", "label")} == {
        "id": "metadata", "fold": "metadata", "race_code": "metadata", "segment": "metadata",
        "created_at": "metadata", "split": "metadata", "is_member": "metadata", "label": "label"}
    # Kept next to the predictions, row for row.
    assert list(preds.metadata.columns) == ["id", "fold", "race_code", "segment", "created_at", "split", "is_member"]
    assert preds.metadata["id"].tolist()[:3] == [100_001, 100_002, 100_003]
    assert preds.metadata["segment"].tolist() == df["segment"].tolist()
    notes = " ".join(preds.notes)
    assert "'id'" in notes and "an identifier" in notes and "'segment'" in notes and "text" in notes
    assert "'race_code'" in notes and "whole numbers outside [0, 1]" in notes


def test_the_issues_case_an_id_column_is_not_an_eleventh_class(cifar10):
    """Before: an id column made K = 11 and the ECE 0.90 instead of 0.03."""
    df = pd.DataFrame(cifar10.probs, columns=list(cifar10.class_names))
    df["sample_id"] = np.arange(cifar10.n)
    df["label"] = cifar10.labels
    preds = load_predictions(_csv(df), format="csv")
    assert preds.n_classes == 10
    assert pbr_core.ece(preds.probs, preds.labels) < 0.05


def test_a_compas_style_binary_file_with_a_numeric_race_code(kitti):
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"person_id": np.arange(kitti.n), "race": rng.integers(0, 6, kitti.n),
                       "sex": rng.choice(["Male", "Female"], kitti.n), "p_recid": kitti.probs[:, 1],
                       "two_year_recid": kitti.labels})
    preds = load_predictions(_csv(df), format="csv", label_column="two_year_recid")
    assert preds.kind == "binary"
    np.testing.assert_allclose(preds.probs, kitti.probs, atol=1e-15)
    assert dict(preds.column_roles)["race"] == "metadata"
    assert preds.metadata.columns.tolist() == ["person_id", "race", "sex"]


def test_parquet_keeps_its_types(cifar10, tmp_path):
    df = _export(cifar10)
    df["created_at"] = pd.to_datetime(df["created_at"])
    df["segment"] = df["segment"].astype("category")
    df["is_member"] = df["is_member"].astype(bool)
    path = tmp_path / "export.parquet"
    df.to_parquet(path, index=False)
    preds = load_predictions(path)
    assert preds.n_classes == 10 and preds.metadata.shape == (cifar10.n, 7)
    assert pd.api.types.is_datetime64_any_dtype(preds.metadata["created_at"])


def test_subset_keeps_metadata_aligned(cifar10):
    preds = load_predictions(_csv(_export(cifar10)), format="csv")
    sub = preds.subset([5, 2, 9])
    assert sub.metadata["id"].tolist() == [100_006, 100_003, 100_010]
    assert sub.metadata.index.tolist() == [0, 1, 2]


# ---------------------------------------------------------------------------- the other rules
def test_a_stored_confidence_next_to_the_probabilities_is_not_a_class(cifar10):
    df = pd.DataFrame(cifar10.probs[:500], columns=[f"c{k}" for k in range(10)])
    df["doubt"] = 1 - cifar10.probs[:500].max(axis=1)   # in [0, 1], but the rows sum to 1 without it
    df["label"] = cifar10.labels[:500]
    preds = load_predictions(_csv(df), format="csv")
    assert preds.n_classes == 10 and dict(preds.column_roles)["doubt"] == "metadata"
    assert "rows sum to 1 without it" in " ".join(preds.notes)
    named = load_predictions(_csv(df.rename(columns={"doubt": "uncertainty"})), format="csv")
    assert dict(named.column_roles)["uncertainty"] == "metadata"  # by its name


def test_logits_with_ids_and_text(cifar10):
    df = pd.DataFrame(cifar10.logits[:300], columns=[f"logit_{k}" for k in range(10)])
    df.insert(0, "image", [f"img_{i:05d}.png" for i in range(300)])
    df["batch"] = np.arange(300) // 64          # whole numbers outside [0, 1]
    df["label"] = cifar10.labels[:300]
    preds = load_predictions(_csv(df), format="csv")
    assert preds.input_type == "logits" and preds.n_classes == 10
    np.testing.assert_allclose(preds.logits, cifar10.logits[:300].astype(np.float64), rtol=1e-6)


def test_ambiguous_score_columns_are_an_error_that_asks_to_name_them(kitti):
    df = pd.DataFrame({"p_default": kitti.probs[:200, 1],
                       "balance_ratio": np.linspace(0.5, 3.7, 200), "label": kitti.labels[:200]})
    message = _error(_csv(df))
    assert "ambiguous" in message and "'p_default'" in message and "'balance_ratio'" in message
    assert "score_columns" in message
    preds = load_predictions(_csv(df), format="csv", score_columns=["p_default"])
    assert preds.kind == "binary" and dict(preds.column_roles)["balance_ratio"] == "metadata"
    np.testing.assert_allclose(preds.probs, kitti.probs[:200])


def test_yes_no_columns_are_metadata_unless_the_rows_need_them():
    # One-hot (hard) probabilities: the 0/1 columns ARE the probability rows.
    hard = load_predictions(b"a,b,label\n1,0,0\n0,1,1\n1,0,1\n", format="csv")
    assert hard.n_classes == 2 and hard.accuracy == pytest.approx(2 / 3)
    # A probability column plus an integer flag: the flag is metadata.
    soft = load_predictions(b"p,flag,label\n0.2,1,0\n0.9,0,1\n0.4,1,1\n", format="csv")
    assert soft.kind == "binary" and dict(soft.column_roles)["flag"] == "metadata"


def test_true_false_and_date_columns_are_metadata():
    preds = load_predictions(b"a,b,ok,when,label\n0.5,0.5,true,2024-01-01,0\n0.2,0.8,false,2024-01-02,1\n",
                             format="csv")
    assert preds.n_classes == 2
    assert {c: r for c, r in preds.column_roles if r == "metadata"} == {"ok": "metadata", "when": "metadata"}


def test_a_top_label_columns_next_to_full_vectors_are_kept_and_the_vector_is_used():
    text = b"p_A,p_B,p_C,predicted,confidence,correct,target\n0.2,0.5,0.3,1,0.5,1,1\n0.6,0.1,0.3,0,0.6,0,2\n"
    preds = load_predictions(text, format="csv")
    assert preds.kind == "multiclass" and preds.class_names == ("A", "B", "C")
    assert preds.columns_with_role("metadata") == ["predicted", "confidence", "correct"]


# ---------------------------------------------------------------------------- roles named by the user
def test_named_roles(cifar10):
    df = _export(cifar10)
    df["weird_score_name"] = 0.5
    preds = load_predictions(_csv(df), format="csv", score_columns=",".join(cifar10.class_names),
                             group_columns=["segment", "race_code"], ignore_columns=["created_at", "split"])
    roles = dict(preds.column_roles)
    assert roles["segment"] == roles["race_code"] == "group"
    assert roles["created_at"] == roles["split"] == "ignored"
    assert roles["weird_score_name"] == "metadata"
    assert list(preds.metadata.columns) == ["segment", "race_code", "id", "fold", "is_member", "weird_score_name"]
    assert preds.columns_with_role("group") == ["race_code", "segment"]
    assert any("Ignored (as asked): 'created_at', 'split'" in n for n in preds.notes)
    # A label under any name.
    renamed = df.drop(columns="weird_score_name").rename(columns={"label": "ground truth"})
    assert load_predictions(_csv(renamed), format="csv", label_column="Ground Truth").n_classes == 10


@pytest.mark.parametrize("kw, parts", [
    (dict(score_columns=["a", "nope"]), ["score column 'nope' is not a column", "'a', 'b'"]),
    (dict(group_columns="seg", score_columns="a,b"), ["group column 'seg' is not a column"]),
    (dict(score_columns=["a", "b"], ignore_columns=["b"]), ["'b' was named both as a score column and as a column to ignore"]),
    (dict(label_column="g", group_columns=["g"]), ["'g' was named both as the label and as a group column"]),
    (dict(score_columns=["g"]), ["non-numeric value 'x'", "column 'g'"]),
])
def test_named_roles_are_checked(kw, parts):
    message = _error(b"a,b,g,label\n0.5,0.5,x,0\n0.1,0.9,y,1\n", **kw)
    for part in parts:
        assert part in message


def test_label_typo_is_named_where_it_is():
    rows = ["a,b,label"] + [f"0.{i % 9 + 1},0.{9 - i % 9},{i % 2}" for i in range(40)]
    rows[33] = "0.3,0.7,1O"
    message = _error("\n".join(rows).encode())
    assert "'1O'" in message and "row 33 (data row, header excluded)" in message and "not a number" in message


def test_npz_keeps_one_dimensional_arrays_as_metadata(tmp_path):
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(4), size=50)
    path = tmp_path / "llm.npz"
    np.savez(path, probs=probs, labels=rng.integers(0, 4, 50), subject=np.array(["law", "math"] * 25),
             question_idx=np.arange(50), probs_val=probs[:10])
    preds = load_predictions(path, group_columns=["subject"])
    assert preds.metadata.columns.tolist() == ["subject", "question_idx"]
    assert dict(preds.column_roles) == {"probs": "score", "labels": "label", "subject": "group",
                                        "question_idx": "metadata", "probs_val": "ignored"}


def test_wide_files_load_in_linear_time_of_the_header():
    """Thousands of class columns: the duplicate-header check used to be quadratic (49 s of a 60 s
    load at 50,000 columns); benchmarks/bench_loading.py times the 50,000-column file."""
    k = 20_000
    header = ",".join(f"c{j}" for j in range(k)) + ",label\n"
    row = ",".join("0" for _ in range(k - 1)) + ",1,3\n"
    preds = load_predictions((header + row * 3).encode(), format="csv")
    assert preds.n_classes == k


# ---------------------------------------------------------------------------- the CLI
def test_cli_column_options(cifar10, tmp_path, capsys):
    path = tmp_path / "export.csv"
    df = _export(cifar10).rename(columns={"label": "truth"})
    df.to_csv(path, index=False)
    assert cli_main(["evaluate", str(path), "--label-column", "truth", "--group-columns", "segment",
                     "--ignore-columns", "created_at", "--format", "json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["K"] == 10 and out["ece"] == pytest.approx(pbr_core.ece(cifar10.probs, cifar10.labels), abs=1e-12)
    assert out["columns"]["truth"] == "label" and out["columns"]["segment"] == "group"
    assert out["columns"]["created_at"] == "ignored" and out["columns"]["id"] == "metadata"
    assert cli_main(["evaluate", str(path), "--label-column", "truth", "--score-columns", "0,1,nope"]) == 3
    assert "score column 'nope' is not a column" in capsys.readouterr().err


# ---------------------------------------------------------------------------- property
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), k=st.integers(2, 6), n=st.integers(1, 80),
       where=st.integers(0, 6))
def test_property_extra_columns_change_nothing(seed, k, n, where):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(k), size=n)
    labels = rng.integers(0, k, n)
    bare = pd.DataFrame(probs, columns=[f"c{j}" for j in range(k)])
    bare["label"] = labels
    extra = bare.copy()
    extras = {"row_id": np.arange(n) + 7, "fold": np.arange(n) % 5, "group": rng.choice(["x", "y z"], n),
              "code": rng.integers(2, 9, n), "day": pd.date_range("2020-01-01", periods=n).strftime("%Y-%m-%d")}
    for j, (name, values) in enumerate(extras.items()):
        extra.insert(min((where + j) % (k + 2), extra.shape[1]), name, values)
    a = load_predictions(_csv(bare), format="csv")
    b = load_predictions(_csv(extra), format="csv")
    np.testing.assert_array_equal(a.probs, b.probs)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert set(b.metadata.columns) == set(extras)


def _error(data: bytes, **kw) -> str:
    with pytest.raises(PredictionsError) as info:
        load_predictions(io.BytesIO(data), format="csv", name="f.csv", **kw)
    return str(info.value)


def test_apply_keeps_the_metadata_next_to_the_calibrated_rows(cifar10, tmp_path, capsys):
    src = tmp_path / "export.csv"
    _export(cifar10).iloc[:400].to_csv(src, index=False)
    model = tmp_path / "ts.json"
    assert cli_main(["fit", str(src), "--method", "temperature", "--out", str(model)]) == 0
    out = tmp_path / "calibrated.csv"
    assert cli_main(["apply", str(model), str(src), "--out", str(out)]) == 0
    written = pd.read_csv(out)
    # the file's own columns, in its own order (the downloads keep the user's names and places)
    assert written.columns.tolist()[:len(_export(cifar10).columns)] == _export(cifar10).columns.tolist()
    assert written["id"].tolist() == list(range(100_001, 100_401))
    assert written["segment"].tolist() == _export(cifar10).iloc[:400]["segment"].tolist()
    back = load_predictions(out)  # and it reads back with the same roles
    assert back.n_classes == 10 and back.metadata.columns.tolist()[:2] == ["id", "fold"]


# ---------------------------------------------------------------------------- (confidence, correct)
def test_confidence_and_correct_records(tmp_path):
    """LLM evaluations: a confidence per answer and whether it was right, with model and benchmark columns."""
    rng = np.random.default_rng(5)
    n = 400
    conf = rng.uniform(0.25, 1.0, n)
    correct = rng.uniform(size=n) < conf - 0.15
    df = pd.DataFrame({"model": rng.choice(["llama", "mistral"], n), "benchmark": "mmlu",
                       "question_idx": np.arange(n), "confidence": conf, "correct": correct.astype(int),
                       "grade": np.where(correct, "Correct", "Wrong")})
    preds = load_predictions(_csv(df), format="csv")
    assert preds.kind == "top_label" and not preds.has_class_ids and not preds.can_recalibrate
    np.testing.assert_array_equal(preds.correct, correct.astype(float))
    np.testing.assert_allclose(preds.confidence, conf)
    c, y = preds.metric_inputs()
    assert pbr_core.ece(c, y) == pytest.approx(pbr_core.ece(conf, correct.astype(int)), abs=1e-15)
    assert dict(preds.column_roles) == {"model": "metadata", "benchmark": "metadata", "question_idx": "metadata",
                                        "confidence": "confidence", "correct": "correct", "grade": "metadata"}
    # true/false and yes/no work too; anything else is named.
    df["correct"] = np.where(correct, "true", "false")
    assert load_predictions(_csv(df), format="csv").accuracy == pytest.approx(correct.mean())
    df.loc[17, "correct"] = "maybe"
    message = _error(_csv(df))
    assert "'correct' must be 0 or 1" in message and "row 18 (data row, header excluded)" in message
    # Written back as (confidence, correct) and read again.
    path = tmp_path / "back.csv"
    pbr_core.loading.save_predictions(preds, path_or_buffer=path)
    back = load_predictions(path)
    np.testing.assert_array_equal(back.correct, preds.correct)
    assert back.metadata.columns.tolist() == ["model", "benchmark", "question_idx", "grade"]


def test_european_spreadsheet_exports_with_decimal_commas(cifar10):
    df = _export(cifar10).iloc[:300]
    text = df.to_csv(index=False, sep=";", decimal=",")
    preds = load_predictions(text.encode(), format="csv", name="export_de.csv")
    assert preds.n_classes == 10
    np.testing.assert_allclose(preds.probs, cifar10.probs[:300], atol=1e-12)
    assert any("decimal comma" in n for n in preds.notes)


@pytest.mark.parametrize("label_name", ["ground_truth", "actual", "outcome", "y_test", "truth", "gt", "gt_label",
                                        "actual_label", "target_label", "y_actual"])
def test_common_label_names(cifar10, label_name):
    df = _export(cifar10).iloc[:200].rename(columns={"label": label_name})
    assert dict(load_predictions(_csv(df), format="csv").column_roles)[label_name] == "label"


def test_pred_prefixed_scores_with_class_name_labels(cifar10):
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    df = pd.DataFrame(cifar10.probs[:200], columns=[f"pred_{c}" for c in names])
    df["label"] = [names[k] for k in cifar10.labels[:200]]
    preds = load_predictions(_csv(df), format="csv")
    assert preds.class_names == tuple(names)
    np.testing.assert_array_equal(preds.labels, cifar10.labels[:200])


@pytest.mark.parametrize("prefix", ["logit_", ""])
def test_a_statistic_beside_logit_columns_is_not_a_class(cifar10, prefix):
    """Logits logit_0 .. logit_9 (or 0 .. 9) beside per-row statistics named otherwise (a top-2
    gap, a margin): they are metadata, not more classes. Before, 'conf_gap' made eleven classes of
    logits, silently. ('margin' alone is no metadata word: a binary model's score may be its
    margin.)"""
    z = np.log(np.clip(cifar10.probs[:300], 1e-300, None))  # real CIFAR-10 outputs as log-probabilities
    top2 = np.sort(z, axis=1)[:, -2:]
    df = pd.DataFrame(z, columns=[f"{prefix}{k}" for k in range(10)])
    df["conf_gap"], df["margin"], df["label"] = top2[:, 1] - top2[:, 0], 2.0 * (top2[:, 1] - top2[:, 0]), cifar10.labels[:300]
    preds = load_predictions(_csv(df), format="csv")
    assert preds.n_classes == 10 and preds.input_type == "logits"
    np.testing.assert_allclose(preds.probs, cifar10.probs[:300], atol=1e-12)
    roles = dict(preds.column_roles)
    assert roles["conf_gap"] == roles["margin"] == "metadata"
    assert any("'conf_gap', 'margin' (not named like the score columns" in n for n in preds.notes)
    df["nll"] = -np.log(cifar10.probs[np.arange(300), cifar10.labels[:300]])
    assert any("'nll' (a per-record measurement, by its name)" in n
               for n in load_predictions(_csv(df), format="csv").notes)


def test_class_names_that_share_a_word_by_chance_stay_classes(cifar10):
    """Two of ten class names sharing a first word ('brown bear', 'brown shark') are no family of
    score columns: all ten stay classes."""
    names = ["brown bear", "brown shark", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    df = pd.DataFrame(np.log(np.clip(cifar10.probs[:300], 1e-300, None)), columns=names)
    df["label"] = cifar10.labels[:300]
    preds = load_predictions(_csv(df), format="csv")
    assert preds.n_classes == 10 and preds.class_names == tuple(names)


def test_class_name_labels_match_the_headers_ignoring_case(cifar10):
    """Labels 'Cat' beside a column 'cat' (or P_CAT): the same class when case alone differs and
    every label pairs with exactly one column (said in a note); headers equal but for case stay an
    error, as a label could then be either."""
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    for headers, label in ((names, str.capitalize), ([f"P_{c.upper()}" for c in names], str.lower)):
        df = pd.DataFrame(cifar10.probs[:300], columns=headers)
        df["label"] = [label(names[k]) for k in cifar10.labels[:300]]
        preds = load_predictions(_csv(df), format="csv")
        np.testing.assert_array_equal(preds.labels, cifar10.labels[:300])
        assert any("ignoring case" in n for n in preds.notes)
    headers = [*names[:9], "Cat"]  # 'cat' and 'Cat': a label 'CAT' could be either
    df = pd.DataFrame(cifar10.probs[:300], columns=headers)
    df["label"] = ["CAT" if k == 3 else headers[k] for k in cifar10.labels[:300]]
    with pytest.raises(PredictionsError, match="'CAT' .* is not one of the classes"):
        load_predictions(_csv(df), format="csv")


@pytest.mark.parametrize("binary", [False, True])
def test_apply_writes_class_name_labels_back_as_names(cifar10, kitti, tmp_path, binary):
    """A file whose labels are class names gets them back as names from `apply`, not as 0..K-1, and
    the written file reads back to the same classes and labels."""
    if binary:  # one score column named after class 1, labels yes/no
        rows = np.random.default_rng(0).permutation(kitti.n)[:300]
        df = pd.DataFrame({"p_churn": kitti.probs[rows, 1], "churn": np.where(kitti.labels[rows] == 1, "yes", "no")})
        names = ["no", "yes"]
        expected = df["churn"].tolist()
    else:
        names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
        df = pd.DataFrame(cifar10.probs[:300], columns=[f"pred_{c}" for c in names])
        df["label"] = expected = [names[k] for k in cifar10.labels[:300]]
    src = tmp_path / "named.csv"
    df.to_csv(src, index=False)
    model, out = tmp_path / "ts.json", tmp_path / "calibrated.csv"
    assert cli_main(["fit", str(src), "--method", "temperature", "--out", str(model)]) == 0
    assert cli_main(["apply", str(model), str(src), "--out", str(out)]) == 0
    written = pd.read_csv(out)
    assert written.columns.tolist()[:len(df.columns)] == df.columns.tolist()   # the file's own names
    assert written["label" if not binary else "churn"].tolist() == expected
    back, before = load_predictions(out), load_predictions(src)
    assert back.class_names == tuple(names) and back.labels_as_names
    np.testing.assert_array_equal(back.labels, before.labels)
    # numeric labels stay numbers
    assert not load_predictions(_csv(_export(cifar10).iloc[:50])).labels_as_names


@pytest.mark.parametrize("score,label", [("p_churn", "churn"), ("default_prob", "default"), ("P(fraud)", "fraud"),
                                         ("Churn_Score", "churn")])
def test_a_label_named_by_its_score_column(kitti, score, label):
    """A binary export whose label has no usual name but whose score column is named after it
    (p_churn next to churn) is read with that column as the label, and says so."""
    rows = np.random.default_rng(1).permutation(kitti.n)[:300]
    df = pd.DataFrame({"id": np.arange(300), score: kitti.probs[rows, 1], label: kitti.labels[rows],
                       "region": np.where(rows % 2, "north", "south")})
    preds = load_predictions(_csv(df), format="csv")
    assert dict(preds.column_roles) == {"id": "metadata", score: "score", label: "label", "region": "metadata"}
    np.testing.assert_array_equal(preds.labels, kitti.labels[rows])
    assert any(f"the score column {score!r} is named after" in n for n in preds.notes)


@pytest.mark.parametrize("n", [30, 300])
def test_the_score_named_after_the_label_decides_among_other_numeric_columns(kitti, n):
    """p_fraud next to fraud, an amount and a rate: the header ties p_fraud to the label, so it is
    the score of a binary file and the other numbers are metadata. Before, 300 rows were refused as
    ambiguous, and 30 rows (too few for the values to decide) were silently read as three columns
    of logits of a three-class model."""
    rows = np.random.default_rng(3).permutation(kitti.n)[:n]
    df = pd.DataFrame({"txn_id": np.arange(n), "p_fraud": kitti.probs[rows, 1], "fraud": kitti.labels[rows],
                       "amount": np.round(np.random.default_rng(4).gamma(2.0, 40.0, n), 2),
                       "rate": np.random.default_rng(5).uniform(0.01, 0.2, n)})
    preds = load_predictions(_csv(df), format="csv")
    assert dict(preds.column_roles) == {"txn_id": "metadata", "p_fraud": "score", "fraud": "label",
                                        "amount": "metadata", "rate": "metadata"}
    assert preds.n_classes == 2
    np.testing.assert_allclose(preds.probs[:, 1], kitti.probs[rows, 1])
    np.testing.assert_array_equal(preds.labels, kitti.labels[rows])
    assert any("'p_fraud' is the probability of 'fraud', by its name" in note for note in preds.notes)
    # a block of probabilities that sums to 1 is still read as the classes, named score or not
    block = pd.DataFrame({"p_fraud": kitti.probs[rows, 1], "p_ok": kitti.probs[rows, 0], "fraud": kitti.labels[rows]})
    roles = dict(load_predictions(_csv(block), format="csv").column_roles)
    assert roles == {"p_fraud": "score", "p_ok": "score", "fraud": "label"}


def test_a_column_named_by_a_score_but_not_an_outcome_is_not_the_label(kitti):
    """'age' next to 'age_score' holds ages, not two outcomes: still no label column (an error that
    asks for one; without labels required the ages stay metadata)."""
    df = pd.DataFrame({"age_score": kitti.probs[:200, 1], "age": np.arange(20, 220)})
    with pytest.raises(PredictionsError, match="no label column"):
        load_predictions(_csv(df), format="csv")
    unlabelled = load_predictions(_csv(df), format="csv", require_labels=False)
    assert not unlabelled.has_labels and unlabelled.metadata.columns.tolist() == ["age"]


def _pipeline_output(kitti, n: int = 400, multiclass: bool = False) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """A text classifier's output as such pipelines write it: the predicted class and a `score` that is
    the confidence in that class (not p(y=1)), next to the true label. Real KITTI probabilities."""
    rows = np.random.default_rng(2).permutation(kitti.n)[:n]
    p1, y = kitti.probs[rows, 1], kitti.labels[rows]
    pred = (p1 >= 0.5).astype(int)
    conf = np.where(pred == 1, p1, 1 - p1)
    names = np.array(["NEGATIVE", "POSITIVE"])
    df = pd.DataFrame({"text": [f"review {i}" for i in range(n)], "prediction": names[pred], "score": conf,
                       "label": names[y]})
    return df, conf, (pred == y).astype(float)


def test_a_pipelines_prediction_and_score_are_read_as_top_label(kitti):
    """Reading `score` as p(POSITIVE) would be silently wrong (its values are all >= 0.5): the file is
    read as (confidence, predicted, label) and its ECE is the top-label ECE of the real confidences."""
    df, conf, correct = _pipeline_output(kitti)
    preds = load_predictions(_csv(df), format="csv")
    assert preds.kind == "top_label"
    assert dict(preds.column_roles) == {"text": "metadata", "prediction": "predicted", "score": "confidence",
                                        "label": "label"}
    assert any("no threshold on it gives the predicted classes" in n for n in preds.notes)
    assert pbr_core.ece(*preds.metric_inputs()) == pytest.approx(pbr_core.ece(conf, correct), abs=1e-12)


def test_a_binary_probability_with_its_argmax_prediction_stays_binary(kitti):
    """p(y=1) next to the class it predicts (argmax): a binary file as before, the prediction is metadata."""
    rows = np.random.default_rng(3).permutation(kitti.n)[:400]
    df = pd.DataFrame({"prediction": (kitti.probs[rows, 1] >= 0.5).astype(int), "p": kitti.probs[rows, 1],
                       "label": kitti.labels[rows]})
    preds = load_predictions(_csv(df), format="csv")
    assert preds.kind == "binary" and dict(preds.column_roles)["p"] == "score"
    np.testing.assert_allclose(preds.p_positive, kitti.probs[rows, 1], rtol=0, atol=0)


def test_one_score_column_with_many_classes_is_the_predicted_class_confidence(cifar10):
    rows = np.arange(500)
    names = np.array([f"c{k}" for k in range(10)])
    df = pd.DataFrame({"prediction": names[cifar10.predicted[rows]], "score": cifar10.confidence[rows],
                       "label": names[cifar10.labels[rows]]})
    preds = load_predictions(_csv(df), format="csv")
    assert preds.kind == "top_label" and any("cannot hold the probabilities of 10 classes" in n for n in preds.notes)
    assert pbr_core.ece(*preds.metric_inputs()) == pytest.approx(
        pbr_core.ece(cifar10.confidence[rows], cifar10.correct[rows]), abs=1e-12)


def test_the_models_own_outputs_are_never_taken_for_the_label(kitti):
    """y_pred next to y_pred_proba, pred next to pred_prob: the model's decisions, not the truth; no
    label column (an error when labels are required, unlabelled data otherwise)."""
    rows = np.random.default_rng(5).permutation(kitti.n)[:200]
    p1 = kitti.probs[rows, 1]
    for decision, score in (("y_pred", "y_pred_proba"), ("pred", "pred_prob"), ("yhat", "yhat_score")):
        df = pd.DataFrame({decision: (p1 >= 0.5).astype(int), score: p1})
        with pytest.raises(PredictionsError, match="no label column"):
            load_predictions(_csv(df), format="csv")
        assert not load_predictions(_csv(df), format="csv", require_labels=False).has_labels


def test_a_probability_with_a_stricter_threshold_or_a_rounded_prediction_stays_binary(kitti):
    """Every p(y=1) >= 0.5 with a 0.7 threshold: the predicted classes are separated by the score, so
    it is p(y=1), not a confidence; a float 'prediction' (a rounded score) is metadata."""
    rows = np.random.default_rng(6).permutation(kitti.n)[:300]
    p1 = 0.5 + 0.5 * kitti.probs[rows, 1]
    y = kitti.labels[rows]
    for pred in ((p1 > 0.7).astype(int), np.round(p1, 3)):
        preds = load_predictions(_csv(pd.DataFrame({"label": y, "score": p1, "prediction": pred})), format="csv")
        assert preds.kind == "binary"
        np.testing.assert_allclose(preds.p_positive, p1, rtol=0, atol=1e-15)


# ---------------------------------------------------------------------------- exports found by an audit
def _truth_ece(probs: np.ndarray, labels: np.ndarray) -> float:
    return float(pbr_core.ece(probs, labels))


@pytest.mark.parametrize("header", ["class_{}", "p{}", "Class {}", "score_class_{}", "prob_class_{}"])
def test_numbered_class_columns_in_sorted_text_order_match_labels_by_number(header):
    """class_0, class_1, class_10, class_11, class_2...: a pivot or sorted() export; integer labels
    name the class number, not the column's position (matched by position: ECE .41 instead of .03)."""
    cifar100 = load_predictions(SAMPLES / "cifar100_densenet121.npz").subset(np.arange(800))
    keep = np.arange(12)
    rows = np.flatnonzero(np.isin(cifar100.labels, keep))
    probs = cifar100.probs[rows][:, keep]
    probs /= probs.sum(axis=1, keepdims=True)
    labels = cifar100.labels[rows]
    cols = [header.format(k) for k in keep]
    df = pd.DataFrame(probs, columns=cols)[sorted(cols)]
    df["label"] = labels
    preds = load_predictions(_csv(df), format="csv")
    assert preds.kind == "multiclass" and any("matched to the headers' numbers" in n for n in preds.notes)
    assert _truth_ece(preds.probs, preds.labels) == pytest.approx(_truth_ece(probs, labels), abs=1e-12)
    in_order = df[[*cols, "label"]]  # the same columns in numeric order: by position, as always
    assert _truth_ece(*load_predictions(_csv(in_order), format="csv").metric_inputs()) == pytest.approx(
        _truth_ece(probs, labels), abs=1e-12)


def test_percentages_rounded_to_one_decimal_or_whole_numbers_are_named_as_percentages(cifar10):
    names = ["airplane", "automobile", "bird"]
    probs = cifar10.probs[:300, :3] / cifar10.probs[:300, :3].sum(axis=1, keepdims=True)
    for decimals in (1, 0):
        df = pd.DataFrame(np.round(probs * 100, decimals), columns=names)
        df["label"] = [names[k] for k in np.argmax(probs, axis=1)]
        with pytest.raises(PredictionsError, match="look like percentages"):  # whole ones: integer columns
            load_predictions(_csv(df), format="csv")
        with pytest.raises(PredictionsError, match="look like percentages"):
            load_predictions(_csv(df), format="csv", score_columns=names)


def test_a_tab_separated_export_with_decimal_commas(cifar10):
    names = ["airplane", "automobile", "bird"]
    probs = cifar10.probs[:200, :3] / cifar10.probs[:200, :3].sum(axis=1, keepdims=True)
    df = pd.DataFrame(probs, columns=names).assign(label=[names[k] for k in cifar10.labels[:200] % 3])
    text = df.to_csv(index=False, sep="\t", decimal=",").encode()
    for name in ("export.tsv", "export.csv"):
        preds = load_predictions(text, name=name)
        np.testing.assert_allclose(preds.probs, probs, rtol=0, atol=1e-15)


@pytest.mark.parametrize("pred_name", ["pred_label", "predicted_class", "pred_class", "y_pred", "model_label",
                                       "output_label"])
def test_a_pipelines_top1_with_other_names_for_the_predicted_class(kitti, pred_name):
    df, conf, correct = _pipeline_output(kitti)
    preds = load_predictions(_csv(df.rename(columns={"prediction": pred_name})), format="csv")
    assert preds.kind == "top_label" and dict(preds.column_roles)[pred_name] == "predicted"
    assert pbr_core.ece(*preds.metric_inputs()) == pytest.approx(pbr_core.ece(conf, correct), abs=1e-12)


def test_xgboost_style_pred_columns(kitti):
    """label, pred (the probability): pred is the score; with pred_label (0/1) next to it, still."""
    rows = np.random.default_rng(7).permutation(kitti.n)[:300]
    p1, y = kitti.probs[rows, 1], kitti.labels[rows]
    truth = _truth_ece(np.column_stack([1 - p1, p1]), y)
    for df in (pd.DataFrame({"label": y.astype(float), "pred": p1}),
               pd.DataFrame({"label": y, "pred": p1, "pred_label": (p1 >= 0.5).astype(int)}),
               pd.DataFrame({"y": y, "y_pred": p1, "region": np.where(rows % 2, "n", "s")})):
        preds = load_predictions(_csv(df), format="csv")
        assert preds.kind == "binary" and _truth_ece(preds.probs, preds.labels) == pytest.approx(truth, abs=1e-12)


def test_one_score_column_named_after_class_0(kitti):
    rows = np.random.default_rng(8).permutation(kitti.n)[:300]
    p1, y = kitti.probs[rows, 1], kitti.labels[rows]
    for name in ("prob_0", "p_0", "p(y=0)"):
        preds = load_predictions(_csv(pd.DataFrame({name: 1 - p1, "label": y})), format="csv")
        np.testing.assert_allclose(preds.p_positive, p1, rtol=0, atol=1e-12)
        assert any("named after class 0" in n for n in preds.notes)
    assert load_predictions(_csv(pd.DataFrame({"prob_1": p1, "label": y})), format="csv").p_positive[0] == p1[0]


def test_r_caret_predictions_and_log_probabilities(cifar10):
    names = ["airplane", "automobile", "bird"]
    probs = cifar10.probs[:300, :3] / cifar10.probs[:300, :3].sum(axis=1, keepdims=True)
    labels = np.argmax(probs, axis=1)
    caret = pd.DataFrame(probs, columns=names)
    caret.insert(0, "pred", [names[k] for k in labels])
    caret.insert(1, "obs", [names[k] for k in labels])
    caret["rowIndex"] = np.arange(1, 301)
    preds = load_predictions(_csv(caret), format="csv")
    assert dict(preds.column_roles)["obs"] == "label" and preds.class_names == tuple(names)
    logp = pd.DataFrame(np.log(probs), columns=[f"logprob_{c}" for c in names])
    logp["label"] = [names[k] for k in labels]
    preds = load_predictions(_csv(logp), format="csv")
    assert preds.class_names == tuple(names) and preds.input_type == "logits"
    np.testing.assert_allclose(preds.probs, probs, rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------- regressions found in review
def _binary(kitti, n=300, seed=11):
    rows = np.random.default_rng(seed).permutation(kitti.n)[:n]
    return kitti.probs[rows, 1], kitti.labels[rows]


def test_heuristics_leave_ordinary_files_as_they_were(kitti, cifar10):
    p1, y = _binary(kitti)
    # a lone column named '0' (pd.DataFrame(model.predict(X))) is p(y=1), not p(y=0)
    assert load_predictions(_csv(pd.DataFrame({"0": p1, "label": y})), format="csv").p_positive[0] == p1[0]
    # decision words are whole words: 'hate' next to 'p_hate' is the label
    preds = load_predictions(_csv(pd.DataFrame({"p_hate": p1, "hate": y})), format="csv")
    assert dict(preds.column_roles)["hate"] == "label"
    # a float y_pred next to a sample weight: y_pred is the score
    preds = load_predictions(_csv(pd.DataFrame({"y_true": y, "y_pred": p1, "sample_weight": 0.5 + p1})), format="csv")
    np.testing.assert_allclose(preds.p_positive, p1, rtol=0, atol=1e-15)
    # two predicted-class columns beside full score columns are metadata, not an ambiguity
    df = pd.DataFrame(cifar10.probs[:200], columns=[f"c{k}" for k in range(10)])
    df["prediction"], df["pred_class"], df["label"] = cifar10.predicted[:200], cifar10.predicted[:200], cifar10.labels[:200]
    assert load_predictions(_csv(df), format="csv").n_classes == 10
    # class names that are also metric names or numbered codes
    names = ["unacc", "acc", "good", "vgood"]
    probs = cifar10.probs[:200, :4] / cifar10.probs[:200, :4].sum(axis=1, keepdims=True)
    car = pd.DataFrame(probs, columns=names).assign(label=[names[k] for k in np.argmax(probs, axis=1)])
    assert load_predictions(_csv(car), format="csv").class_names == tuple(names)
    synsets = ["n01440764", "n02102040", "n02979186", "n03000684"]
    by_position = pd.DataFrame(probs, columns=synsets).assign(label=np.argmax(probs, axis=1))
    np.testing.assert_array_equal(load_predictions(_csv(by_position), format="csv").labels, np.argmax(probs, axis=1))
    icd = ["E11.9", "E11.65", "E11.22", "I10"]
    codes = pd.DataFrame(probs, columns=[f"prob_{c}" for c in icd]).assign(label=[icd[k] for k in np.argmax(probs, 1)])
    assert load_predictions(_csv(codes), format="csv").class_names == tuple(icd)


def test_pass_fail_binary_keeps_pass_as_class_1(kitti):
    p1, y = _binary(kitti)
    preds = load_predictions(_csv(pd.DataFrame({"p_pass": p1, "label": np.where(y == 1, "pass", "fail")})),
                             format="csv")
    assert preds.class_names == ("fail", "pass")
    np.testing.assert_allclose(preds.p_positive, p1, rtol=0, atol=1e-15)


def test_caret_obs_is_the_label_only_beside_pred(kitti):
    p1, y = _binary(kitti)
    caret = pd.DataFrame({"pred": np.where(p1 >= .5, "yes", "no"), "obs": np.where(y == 1, "yes", "no"),
                          "no": 1 - p1, "yes": p1, "rowIndex": np.arange(1, 301)})
    preds = load_predictions(_csv(caret), format="csv")
    assert dict(preds.column_roles)["obs"] == "label"
    np.testing.assert_array_equal(preds.labels, y)
    other = pd.DataFrame({"obs": np.arange(300), "churn": y, "p_churn": p1})  # obs: an observation number
    assert dict(load_predictions(_csv(other), format="csv").column_roles)["churn"] == "label"
    both = pd.DataFrame({"obs": np.arange(300), "label": y, "p_1": p1})
    assert dict(load_predictions(_csv(both), format="csv").column_roles)["label"] == "label"


def test_top_label_or_binary_by_which_class_the_higher_scores_predict(kitti):
    """0/1 predictions with every score >= 0.5: class 1 predicted for the higher scores is p(y=1) with
    a threshold; class 0 for the higher ones, or the same scores for both, is a confidence."""
    rng = np.random.default_rng(12)
    n = 300
    pred = rng.integers(0, 2, n)
    y = np.where(rng.random(n) < 0.8, pred, 1 - pred)
    high, low = rng.uniform(0.71, 1, n), rng.uniform(0.5, 0.7, n)
    for scores, kind in ((np.where(pred == 1, high, low), "binary"), (np.where(pred == 0, high, low), "top_label"),
                         (rng.uniform(0.5, 1, n), "top_label")):
        df = pd.DataFrame({"label": y, "prediction": pred, "score": scores})
        assert load_predictions(_csv(df), format="csv").kind == kind
    one = pd.DataFrame({"label": y, "prediction": np.r_[0, np.ones(n - 1, int)], "score": rng.uniform(0.5, 1, n)})
    one.loc[0, "score"] = 0.9  # the one class-0 row among the class-1 rows' scores
    assert load_predictions(_csv(one), format="csv").kind == "top_label"


def test_tab_separated_thousands_separators_are_not_decimal_commas(cifar10):
    df = pd.DataFrame(cifar10.logits[:200, :3], columns=["logit_0", "logit_1", "logit_2"])
    df["label"] = cifar10.labels[:200] % 3
    df["n_chars"] = [f"{1000 + 37 * i:,}" for i in range(200)]  # 1,000 ... 8,363
    preds = load_predictions(df.to_csv(index=False, sep="\t").encode(), name="logits.tsv")
    assert preds.n_classes == 3 and dict(preds.column_roles)["n_chars"] == "metadata"
    np.testing.assert_allclose(preds.logits, cifar10.logits[:200, :3], rtol=0, atol=1e-12)
