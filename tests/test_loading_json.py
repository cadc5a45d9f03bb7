"""JSON / JSON Lines files, Excel workbooks and score vectors in one cell, as LLM harnesses, web
services, spreadsheets and DataFrames with list columns write them. The records are real: the bundled LLM answers (confidence,
correct, model, dataset) and CIFAR-10 ResNet-110 predictions; every number is pinned against the
same predictions loaded from the bundled CSV / NPZ."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core import PredictionsError, load_predictions
from pbr_core.cli import main as cli_main

SAMPLES = Path(__file__).resolve().parents[1] / "sample_data"


@pytest.fixture(scope="module")
def llm() -> pd.DataFrame:
    return pd.read_csv(SAMPLES / "llm_qa_confidence_correct.csv.gz").iloc[:2000]


@pytest.fixture(scope="module")
def cifar10():
    return load_predictions(SAMPLES / "cifar10_resnet110.npz").subset(np.arange(600))


def _records(df: pd.DataFrame) -> list[dict]:
    return json.loads(df.to_json(orient="records"))


def test_the_shapes_of_json_files_all_read_the_same(llm, tmp_path):
    expected = load_predictions(llm.to_csv(index=False).encode(), format="csv")
    recs = _records(llm)
    files = {
        "lines.jsonl": "\n".join(json.dumps(r) for r in recs) + "\n\n",
        "array.json": json.dumps(recs),
        "columns.json": json.dumps({c: v for c, v in zip(llm.columns, (llm[c].tolist() for c in llm.columns))}),
        "harness.json": json.dumps({"config": {"model": "several"}, "samples": recs}),
        "lines_named.json": "\n".join(json.dumps(r) for r in recs),  # JSON Lines under a .json name
        "lines.ndjson": "\n".join(json.dumps(r) for r in recs),
    }
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text)
        preds = load_predictions(path)
        assert preds.kind == expected.kind and preds.n == expected.n, name
        np.testing.assert_array_equal(preds.confidence, expected.confidence)
        np.testing.assert_array_equal(preds.correct, expected.correct)
        assert preds.metadata.columns.tolist() == expected.metadata.columns.tolist(), name
    gz = tmp_path / "lines.jsonl.gz"
    gz.write_bytes(gzip.compress(files["lines.jsonl"].encode()))
    assert pbr_core.ece(*load_predictions(gz).metric_inputs()) == pytest.approx(
        pbr_core.ece(*expected.metric_inputs()), abs=1e-15)
    # bytes without a name (an upload) are recognised as JSON by their first character
    assert load_predictions(files["array.json"].encode()).n == expected.n


def test_nested_fields_become_columns_to_group_by(llm, tmp_path, capsys):
    recs = [{"doc": {"dataset": r["dataset"], "id": i}, "confidence": r["confidence"], "correct": r["correct"],
             "model": r["model"]} for i, r in enumerate(_records(llm))]
    path = tmp_path / "samples.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs))
    preds = load_predictions(path)
    assert {"doc.dataset", "doc.id", "model"} <= set(preds.metadata.columns)
    assert cli_main(["evaluate", str(path), "--by", "doc.dataset", "--format", "json"]) == 0
    table = json.loads(capsys.readouterr().out)
    by = {r["group"]: r["n"] for r in table["groups"]["rows"]}
    assert by == llm["dataset"].value_counts().to_dict()


@pytest.mark.parametrize("text, message", [
    ('{"confidence": 0.9, "correct": 1}\n{"confidence": 0.8, correct: 0}\n', "line 2, column"),
    ('[{"confidence": 0.9, "correct": 1}, [0.8, 0]]', "record 2 is a list"),
    ('{"a": [{"x": 1}], "b": [{"y": 2}]}', "several arrays of records"),
    ('[]', "no records"),
    ('3.5', "single float"),
    ('[{"confidence": 0.9, "correct": 1', "not valid JSON"),
])
def test_broken_json_is_a_message_that_names_the_problem(text, message, tmp_path):
    path = tmp_path / ("bad.jsonl" if text.count("\n") > 1 else "bad.json")
    path.write_text(text)
    with pytest.raises(PredictionsError, match=message):
        load_predictions(path)


def test_a_score_vector_per_cell_reads_as_one_column_per_class(cifar10, tmp_path):
    """Parquet list columns, JSON arrays and CSV cells written from a DataFrame with a list column."""
    frame = pd.DataFrame({"id": np.arange(cifar10.n), "probs": list(cifar10.probs), "label": cifar10.labels})
    frame.to_parquet(tmp_path / "v.parquet")
    frame.to_csv(tmp_path / "v.csv", index=False)  # numpy's repr: "[2.55e-04 1.88e-04 ...]" over lines
    (tmp_path / "v.jsonl").write_text("\n".join(  # as a harness writes them: json.dumps, full precision
        json.dumps({"logits": [float(x) for x in z], "label": int(y), "segment": "ab"[i % 2]})
        for i, (z, y) in enumerate(zip(cifar10.logits, cifar10.labels))))
    for name, atol in (("v.parquet", 1e-15), ("v.csv", 1e-7), ("v.jsonl", 1e-12)):
        preds = load_predictions(tmp_path / name)
        assert preds.n_classes == 10 and preds.class_names == tuple(str(k) for k in range(10)), name
        np.testing.assert_allclose(preds.probs, cifar10.probs, rtol=0, atol=atol)
        np.testing.assert_array_equal(preds.labels, cifar10.labels)
        roles = dict(preds.column_roles)
        assert roles.get("probs", roles.get("logits")) == "score" and roles["label"] == "label", name
        assert any("numbers per row: read as the scores of classes 0..9" in n for n in preds.notes)
    assert load_predictions(tmp_path / "v.jsonl").input_type == "logits"


def test_a_streamed_folder_reads_the_vector_column_like_the_file(cifar10, tmp_path, capsys):
    folder = tmp_path / "logs"
    folder.mkdir()
    half = cifar10.n // 2
    for i, rows in enumerate((slice(0, half), slice(half, None))):
        pd.DataFrame({"probs": list(cifar10.probs[rows]), "label": cifar10.labels[rows]}).to_parquet(
            folder / f"part{i}.parquet")
    assert cli_main(["evaluate", str(folder), "--format", "json"]) == 0
    streamed = json.loads(capsys.readouterr().out)
    assert streamed["n"] == cifar10.n and streamed["ece"] == pytest.approx(
        pbr_core.ece(cifar10.probs, cifar10.labels), abs=1e-12)


def test_vectors_that_are_not_scores_stay_metadata(cifar10):
    """An embedding next to the score columns is not read as scores; two score vectors are an error
    that asks which one, and naming it settles it."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame(cifar10.probs, columns=[f"c{k}" for k in range(10)])
    df["embedding"] = list(rng.normal(size=(cifar10.n, 8)))
    df["label"] = cifar10.labels
    preds = load_predictions(df.to_parquet())
    assert preds.n_classes == 10 and dict(preds.column_roles)["embedding"] == "metadata"
    both = pd.DataFrame({"probs": list(cifar10.probs), "logits": list(cifar10.logits), "label": cifar10.labels})
    with pytest.raises(PredictionsError, match="'probs', 'logits' each hold a vector"):
        load_predictions(both.to_parquet())
    chosen = load_predictions(both.to_parquet(), score_columns="logits")
    assert chosen.input_type == "logits" and dict(chosen.column_roles)["probs"] == "metadata"
    np.testing.assert_allclose(chosen.probs, cifar10.probs, rtol=0, atol=1e-12)


def test_an_embedding_alone_is_not_read_as_scores(cifar10, tmp_path, capsys):
    """A file whose only vectors of numbers are named as features (an embedding, a hidden layer) has
    no scores: it is refused with a message that says so, not read as K-class logits (a 64-number
    embedding beside labels 0..9 was read as 64 classes); naming the column as the scores reads it,
    and a column of plain name is still read as the scores."""
    rng = np.random.default_rng(1)
    for name in ("embedding", "text_embedding", "clipEmb", "hidden_state", "features"):
        df = pd.DataFrame({"id": np.arange(cifar10.n), "label": cifar10.labels,
                           name: list(rng.normal(size=(cifar10.n, 64)))})
        with pytest.raises(PredictionsError, match=rf"column '{name}' holds 64 numbers per row, but its name .* says "
                                                   r"they are a model's features"):
            load_predictions(df.to_parquet())
    path = tmp_path / "run.jsonl"
    pd.DataFrame({"label": cifar10.labels, "embedding": [list(map(float, r)) for r in cifar10.logits]}).to_json(
        path, orient="records", lines=True, double_precision=15)
    with pytest.raises(PredictionsError, match="says they are a model's features"):
        load_predictions(path)
    assert cli_main(["evaluate", str(path)]) == 3
    assert "(--score-columns)" in capsys.readouterr().err
    named = load_predictions(path, score_columns="embedding")
    np.testing.assert_allclose(named.probs, cifar10.probs, rtol=0, atol=1e-12)
    plain = pd.DataFrame({"label": cifar10.labels, "out": list(cifar10.logits)})
    np.testing.assert_allclose(load_predictions(plain.to_parquet()).probs, cifar10.probs, rtol=0, atol=1e-12)
    tags = pd.DataFrame({"label": cifar10.labels, "features": [["cat", "small"]] * cifar10.n})  # not numbers
    with pytest.raises(PredictionsError, match="no score columns"):
        load_predictions(tags.to_parquet())


def test_a_plain_named_vector_with_far_more_numbers_than_classes_is_refused(cifar10):
    """A vector column taken for the scores by guess (a plain name) is refused when the labels show
    under half of its classes over enough rows (three per class): 64 numbers beside CIFAR-10's 10
    classes; named as the scores it is read, and real scores of a plain name still load."""
    rng = np.random.default_rng(2)
    df = pd.DataFrame({"label": cifar10.labels, "vec": list(rng.normal(size=(cifar10.n, 64)))})
    with pytest.raises(PredictionsError, match=r"column 'vec' holds 64 numbers per row, read as the scores of 64 "
                                               r"classes, but the labels show only 10 classes over 600 rows"):
        load_predictions(df.to_parquet())
    assert load_predictions(df.to_parquet(), score_columns="vec").n_classes == 64
    few = df.iloc[:150]  # fewer than 3 rows per class: too few rows to tell
    assert load_predictions(few.to_parquet()).n_classes == 64
    plain = pd.DataFrame({"label": cifar10.labels, "vec": list(cifar10.logits)})
    np.testing.assert_allclose(load_predictions(plain.to_parquet()).probs, cifar10.probs, rtol=0, atol=1e-12)


def test_ragged_vectors_name_the_row():
    df = pd.DataFrame({"probs": [[0.5, 0.5], [0.2, 0.3, 0.5], [0.1, 0.9]], "label": [0, 1, 1]})
    with pytest.raises(PredictionsError, match=r"holds 2 scores per row, but row 2 .* holds 3"):
        load_predictions(df.to_parquet())


def test_jsonl_in_a_folder_says_how_to_stream_it(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"confidence": 0.9, "correct": 1}\n')
    with pytest.raises(PredictionsError, match="convert them to Parquet"):
        pbr_core.stream.open_dataset(str(folder / "*.jsonl"))


def test_a_csv_under_a_json_name_says_so(tmp_path):
    path = tmp_path / "preds.json"
    path.write_text("a,b,label\n0.5,0.5,1\n")
    with pytest.raises(PredictionsError, match="another format .* under a .json name"):
        load_predictions(path)


def test_a_column_object_with_a_constant_field_and_nested_score_objects(tmp_path):
    """{"label": [...], "score": [...], "model": "x"}: the constant fills its column; scores written as a
    JSON object per record ({"probs": {"cat": .., "dog": ..}}) are named by their fields."""
    path = tmp_path / "cols.json"
    path.write_text(json.dumps({"label": [0, 1, 1, 0], "score": [0.2, 0.9, 0.6, 0.4], "model": "m-7b"}))
    preds = load_predictions(path)
    assert preds.kind == "binary" and preds.metadata["model"].tolist() == ["m-7b"] * 4
    recs = [{"probs": {"cat": p, "dog": 1 - p}, "label": lab} for p, lab in ((0.8, "cat"), (0.3, "dog"), (0.6, "dog"))]
    nested = tmp_path / "nested.jsonl"
    nested.write_text("\n".join(json.dumps(r) for r in recs))
    preds = load_predictions(nested)
    assert preds.class_names == ("cat", "dog") and preds.labels.tolist() == [0, 1, 1]
    np.testing.assert_allclose(preds.probs[:, 0], [0.8, 0.3, 0.6])


def test_lists_that_are_not_the_scores_change_nothing(tmp_path):
    """Regressions found in review: tags, token ids, embeddings with a missing cell, intervals, a
    parenthesised note, the top-2 predicted classes: all metadata next to the real score column,
    whose numbers stay those of the file."""
    rng = np.random.default_rng(0)
    n = 200
    p = rng.uniform(size=n)
    y = (rng.uniform(size=n) < p).astype(int)
    frames = {
        "note": pd.DataFrame({"label": y, "p_1": p, "note": ["(none)"] * n}).to_csv(index=False).encode(),
        "tags_csv": pd.DataFrame({"label": y, "p_1": p, "tags": [str(["a", "b"])] * n}).to_csv(index=False).encode(),
        "score_ci": pd.DataFrame({"label": y, "score": p, "score_ci": ["[0.2, 0.4]"] * n}).to_csv(index=False).encode(),
        "ragged_ids": pd.DataFrame({"label": y, "p_1": p, "ids": [list(range(i % 4 + 1)) for i in range(n)]}).to_parquet(),
        "emb_null": pd.DataFrame({"label": y, "p_1": p, "emb": [[0.1, 0.2, 0.3]] * (n - 1) + [None]}).to_parquet(),
        "tokens_json": json.dumps([{"label": int(a), "score": float(b), "tokens": list(range(i % 5 + 1))}
                                   for i, (a, b) in enumerate(zip(y, p))]).encode(),
        "top2_json": json.dumps([{"label": int(a), "p_1": float(b), "predicted_top2": [1, 0]}
                                 for a, b in zip(y, p)]).encode(),
    }
    for name, data in frames.items():
        preds = load_predictions(data, name=f"{name}.{'parquet' if data[:4] == b'PAR1' else 'json' if data[:1] == b'[' else 'csv'}")
        assert preds.kind == "binary", name
        np.testing.assert_allclose(preds.p_positive, p, rtol=0, atol=1e-15, err_msg=name)
        np.testing.assert_array_equal(preds.labels, y)
        assert [r for _, r in preds.column_roles].count("metadata") == 1, name


def test_every_pandas_orient_and_npz_names(cifar10, tmp_path):
    df = pd.DataFrame(cifar10.probs, columns=[f"c{k}" for k in range(10)]).assign(label=cifar10.labels)
    for orient in ("columns", "index", "split", "records", "table"):
        path = tmp_path / f"{orient}.json"
        df.to_json(path, orient=orient, double_precision=15)
        preds = load_predictions(path)
        np.testing.assert_allclose(preds.probs, cifar10.probs, rtol=0, atol=1e-12, err_msg=orient)
        np.testing.assert_array_equal(preds.labels, cifar10.labels)
    for scores, labels in (("outputs", "targets"), ("y_pred", "y_true"), ("preds", "labels")):
        path = tmp_path / f"{scores}.npz"
        np.savez(path, **{scores: cifar10.probs, labels: cifar10.labels})
        np.testing.assert_allclose(load_predictions(path).probs, cifar10.probs, rtol=0, atol=1e-15)
    ids = tmp_path / "ids.npz"  # integer 'preds' are predicted classes, not scores
    np.savez(ids, preds=cifar10.predicted, labels=cifar10.labels)
    with pytest.raises(PredictionsError, match="missing array"):
        load_predictions(ids)


def test_a_pipelines_scores_for_every_class_and_spark_vectors(kitti_path=SAMPLES / "kitti_random_forest.csv"):
    """[{label, score}, ...] per record (a text-classification pipeline asked for every class, sorted
    by score) and Spark ML vectors ({type, size, indices, values} structs in Parquet)."""
    kitti = load_predictions(kitti_path)
    rows = np.random.default_rng(9).permutation(kitti.n)[:300]
    p1, y = kitti.probs[rows, 1], kitti.labels[rows]
    names = np.array(["NEGATIVE", "POSITIVE"])
    recs = [{"text": f"r{i}", "scores": sorted([{"label": "NEGATIVE", "score": float(1 - p)},
                                                {"label": "POSITIVE", "score": float(p)}], key=lambda d: -d["score"]),
             "label": str(names[t])} for i, (p, t) in enumerate(zip(p1, y))]
    preds = load_predictions("\n".join(json.dumps(r) for r in recs).encode(), name="hf.jsonl")
    assert preds.class_names == ("NEGATIVE", "POSITIVE")
    np.testing.assert_allclose(preds.p_positive, p1, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(preds.labels, y)
    dense = [{"type": 1, "size": None, "indices": None, "values": [float(1 - p), float(p)]} for p in p1]
    sparse = [{"type": 0, "size": 2, "indices": [1], "values": [float(p)]} if p == 1 else d for p, d in zip(p1, dense)]
    for cells in (dense, sparse):
        frame = pd.DataFrame({"label": y.astype(float), "probability": cells, "prediction": (p1 >= 0.5).astype(float)})
        preds = load_predictions(frame.to_parquet())
        np.testing.assert_allclose(preds.p_positive, p1, rtol=0, atol=1e-15)


# ---------------------------------------------------------------------------- Excel workbooks
def test_an_excel_workbook_reads_its_first_sheet_with_data(cifar10, tmp_path, capsys):
    """A spreadsheet audit: an empty first sheet, the predictions (class-name labels, an id, a date),
    a summary sheet. The numbers are those of the NPZ, and the note names the sheet read."""
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    df = pd.DataFrame(cifar10.probs, columns=names)
    df.insert(0, "id", np.arange(cifar10.n))
    df["label"] = [names[k] for k in cifar10.labels]
    df["scored_on"] = pd.date_range("2025-01-01", periods=cifar10.n, freq="h")
    path = tmp_path / "audit.xlsx"
    with pd.ExcelWriter(path) as book:
        pd.DataFrame({"note": []}).to_excel(book, sheet_name="Cover", index=False)
        df.to_excel(book, sheet_name="Predictions", index=False)
        pd.DataFrame({"metric": ["ece"], "value": [0.03]}).to_excel(book, sheet_name="Summary", index=False)
    preds = load_predictions(path)
    assert preds.class_names == tuple(names) and dict(preds.column_roles)["scored_on"] == "metadata"
    np.testing.assert_allclose(preds.probs, cifar10.probs, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(preds.labels, cifar10.labels)
    assert any("sheet 'Predictions'" in n and "'Cover', 'Summary'" in n for n in preds.notes)
    assert pbr_core.loading.read_columns(path)[:2] == ["id", "airplane"]
    assert cli_main(["evaluate", str(path), "--by", "scored_on", "--every", "day", "--format", "json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert table["ece"] == pytest.approx(pbr_core.ece(cifar10.probs, cifar10.labels), abs=1e-12)
    assert sum(r["n"] for r in table["groups"]["rows"]) == cifar10.n


def test_a_workbook_whose_first_sheet_is_a_readme(cifar10, tmp_path):
    """A README sheet (text) before the predictions: it holds none, so the next sheet is read, and
    the note says both. Before, the README's one column gave 'no label column'. When no sheet holds
    predictions, the error is the largest sheet's, naming it."""
    path = tmp_path / "export.xlsx"
    df = pd.DataFrame({"customer_id": np.arange(cifar10.n), "p_churn": cifar10.probs[:, 1],
                       "churn": (cifar10.labels == 1).astype(int)})
    with pd.ExcelWriter(path) as book:
        pd.DataFrame({"About": ["Churn model predictions", "Exported 2026-11-01"]}).to_excel(
            book, sheet_name="README", index=False)
        df.to_excel(book, sheet_name="predictions", index=False)
    preds = load_predictions(path)
    np.testing.assert_allclose(preds.probs[:, 1], cifar10.probs[:, 1], rtol=0, atol=1e-15)
    assert preds.notes[0] == ("Read the sheet 'predictions' of the workbook (the first that holds predictions; "
                              "'README' before it holds none).")
    assert pbr_core.loading.read_columns(path) == ["customer_id", "p_churn", "churn"]
    # (a 0/1 column that the scores do not predict is no label by its values: no sheet reads)
    unrelated = np.random.default_rng(0).integers(0, 2, cifar10.n)
    with pd.ExcelWriter(path) as book:
        pd.DataFrame({"About": ["Churn model predictions"]}).to_excel(book, sheet_name="README", index=False)
        df.assign(churn=unrelated).rename(columns={"churn": "flag", "p_churn": "risk"}).to_excel(
            book, sheet_name="data", index=False)
    with pytest.raises(PredictionsError, match=r"no sheet of the workbook reads as predictions\. The sheet 'data' "
                                               r"\(the largest\): no label column"):
        load_predictions(path)


def test_broken_and_old_workbooks_say_what_to_do(tmp_path):
    fake = tmp_path / "book.xlsx"
    fake.write_bytes(b"PK\x03\x04 not really a workbook")
    with pytest.raises(PredictionsError, match="could not read the Excel workbook"):
        load_predictions(fake)
    old = tmp_path / "book.xls"
    old.write_bytes(b"\xd0\xcf\x11\xe0 old")
    with pytest.raises(PredictionsError, match=r"save it as \.xlsx or CSV"):
        load_predictions(old)
    empty = tmp_path / "empty.xlsx"
    pd.DataFrame({"a": []}).to_excel(empty, index=False)
    with pytest.raises(PredictionsError, match="hold no data rows"):
        load_predictions(empty)


def test_float_vectors_named_as_outputs_are_decided_with_the_other_columns(tmp_path):
    """predictions / outputs vectors with a per-record float (an uncertainty, a loss): the vectors are the
    scores; a list of class ids (top-2) is not; tuples written by Python are vectors too."""
    rng = np.random.default_rng(13)
    n = 200
    p1 = rng.uniform(size=n)
    y = (rng.uniform(size=n) < p1).astype(int)
    recs = [{"label": int(t), "predictions": [float(1 - p), float(p)], "uncertainty": float(rng.uniform())}
            for t, p in zip(y, p1)]
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs))
    np.testing.assert_allclose(load_predictions(path).p_positive, p1, rtol=0, atol=1e-15)
    logits = rng.normal(size=(n, 3))
    labels = rng.integers(0, 3, n)
    path.write_text("\n".join(json.dumps({"label": int(t), "pred": [float(v) for v in z], "loss": 0.5})
                              for t, z in zip(labels, logits)))
    preds = load_predictions(path)
    assert preds.input_type == "logits" and preds.n_classes == 3
    csv_path = tmp_path / "tuples.csv"
    pd.DataFrame({"probs": [str((float(1 - p), float(p))) for p in p1], "label": y}).to_csv(csv_path, index=False)
    np.testing.assert_allclose(load_predictions(csv_path).p_positive, p1, rtol=0, atol=1e-15)


def test_an_excel_report_with_a_title_row(tmp_path):
    rng = np.random.default_rng(14)
    p1 = rng.uniform(size=50)
    y = (rng.uniform(size=50) < p1).astype(int)
    path = tmp_path / "report.xlsx"
    with pd.ExcelWriter(path) as book:
        pd.DataFrame([["Model audit, March"]]).to_excel(book, index=False, header=False, startrow=0)
        pd.DataFrame({"p_1": p1, "label": y}).to_excel(book, index=False, startrow=2)
    preds = load_predictions(path)
    np.testing.assert_allclose(preds.p_positive, p1, rtol=0, atol=1e-15)
    assert any("the header is row 3 of the sheet" in n for n in preds.notes)


def test_verbalized_confidences_in_percent_under_another_name(llm, tmp_path, capsys):
    """LLM records as a harness of elicited confidences writes them: 'Verbal confidence' as "87%"
    strings, 'is_correct' as true/false. The word in the name makes it the confidence, the % sign
    makes it a fraction of 1 (said in a note), and the ECE is that of the bundled records with the
    confidences rounded to the same whole percent; in JSON Lines and in a streamed CSV alike."""
    pct = np.round(llm["confidence"].to_numpy() * 100).astype(int)
    df = pd.DataFrame({"model": llm["model"], "Verbal confidence": [f"{v}%" for v in pct],
                       "is_correct": llm["correct"].astype(bool)})
    reference = pbr_core.ece(pct / 100, llm["correct"].to_numpy().astype(int))
    csv, jsonl = tmp_path / "elicited.csv", tmp_path / "elicited.jsonl"
    df.to_csv(csv, index=False)
    df.to_json(jsonl, orient="records", lines=True)
    for path in (csv, jsonl):
        preds = load_predictions(path)
        assert dict(preds.column_roles) == {"model": "metadata", "Verbal confidence": "confidence",
                                            "is_correct": "correct"}
        np.testing.assert_allclose(preds.confidence, pct / 100)
        assert any("written as percentages" in n and "fractions of 1" in n for n in preds.notes)
        assert any("by the word in its name" in n for n in preds.notes)
        assert pbr_core.ece(preds.confidence, preds.correct.astype(int)) == pytest.approx(reference, abs=1e-12)
    assert cli_main(["evaluate", str(csv), "--stream", "--quiet", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["ece"] == pytest.approx(reference, abs=1e-12)
    # Percentages mixed with plain numbers say nothing sure about either: refused, naming the cell.
    mixed = df.assign(**{"Verbal confidence": [f"{v}%" if i % 2 else f"{v / 100}" for i, v in enumerate(pct)]})
    with pytest.raises(PredictionsError, match="non-numeric value"):
        load_predictions(mixed.to_csv(index=False).encode(), format="csv")
