"""Tests for pbr_core.loading: every format from a path, from bytes and from a file object; every
documented error with its message (file name first, then what and where); real sample files;
property tests (round trips, logits detection, garbage never raises anything but PredictionsError)."""

from __future__ import annotations

import glob
import gzip
import io
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pbr_core import Predictions, PredictionsError, load_predictions
from pbr_core.loading import ACCEPTED_SUFFIXES, save_predictions, template_csv

ROOT = Path(__file__).resolve().parents[1]
SHARED_PREDICTIONS = ROOT.parent / "shared" / "data" / "predictions"
ROW = "(data row, header excluded)"
FORMATS = ["csv", "csv.gz", "tsv", "tsv.gz", "parquet", "npz", "npy"]
FUZZ = pytest.mark.filterwarnings("ignore::UserWarning")
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------------------- helpers
def encode(fmt: str, scores: np.ndarray, labels, names=None) -> bytes:
    """The bytes of a prediction file in ``fmt`` (the way a user would write it)."""
    scores = np.asarray(scores)
    names = list(names) if names is not None else [f"c{k}" for k in range(scores.shape[1])]
    if fmt in ("npz",):
        buf = io.BytesIO()
        np.savez(buf, probs=scores, labels=np.asarray(labels), class_names=np.array(names))
        return buf.getvalue()
    if fmt == "npy":
        buf = io.BytesIO()
        np.save(buf, np.column_stack([scores, np.asarray(labels, dtype=np.float64)]))
        return buf.getvalue()
    df = pd.DataFrame(scores, columns=names)
    df["label"] = labels
    if fmt == "parquet":
        buf = io.BytesIO()
        df.to_parquet(buf, index=False)
        return buf.getvalue()
    text = df.to_csv(index=False, sep="\t" if fmt.startswith("tsv") else ",").encode()
    return gzip.compress(text) if fmt.endswith(".gz") else text


def csv_bytes(text: str) -> bytes:
    return text.encode()


def error_of(data, name: str = "f.csv", **kw) -> str:
    """Load ``data`` (bytes, or a path) and return the PredictionsError message; checks that it starts with the name."""
    with pytest.raises(PredictionsError) as info:
        if isinstance(data, (bytes, bytearray)):
            load_predictions(data, name=name, **kw)
        else:
            load_predictions(data, **kw)
    message = str(info.value)
    assert message.startswith(Path(name).name if isinstance(data, (bytes, bytearray)) else Path(data).name), message
    return message


def must_contain(message: str, *parts: str) -> None:
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"


@pytest.fixture(scope="module")
def probs3() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(3), size=20)
    y = rng.integers(0, 3, size=20)
    return p, y


# ---------------------------------------------------------------------------------- round trips
@pytest.mark.parametrize("via", ["path", "bytes", "filelike"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip_each_format(fmt, via, probs3, tmp_path):
    p, y = probs3
    data = encode(fmt, p, y, ["cat", "dog", "bird"])
    if via == "path":
        path = tmp_path / f"preds.{fmt}"
        path.write_bytes(data)
        preds = load_predictions(path)
        assert preds.source == f"preds.{fmt}"
    elif via == "bytes":
        preds = load_predictions(data, format=fmt)
    else:
        f = io.BytesIO(data)
        f.name = f"upload.{fmt}"  # like Streamlit's UploadedFile
        f.read(3)  # the position must not matter
        preds = load_predictions(f)
        assert preds.source == f"upload.{fmt}"
    assert preds.kind == "multiclass" and preds.input_type == "probabilities"
    np.testing.assert_allclose(preds.probs, p, atol=1e-12)
    np.testing.assert_array_equal(preds.labels, y)
    assert preds.logits is None
    if fmt != "npy":  # NPY has no place for class names
        assert preds.class_names == ("cat", "dog", "bird")


@pytest.mark.parametrize("fmt", ["csv", "parquet", "npz", "npy"])
def test_logits_detected_and_input_type_override(fmt):
    rng = np.random.default_rng(2)
    z = rng.normal(0, 3, size=(30, 4))
    y = rng.integers(0, 4, size=30)
    preds = load_predictions(encode(fmt, z, y), format=fmt)
    assert preds.input_type == "logits"
    np.testing.assert_allclose(preds.logits, z)
    np.testing.assert_allclose(preds.probs.sum(axis=1), 1.0)
    assert any("logits" in n for n in preds.notes)
    message = error_of(encode(fmt, z, y), name=f"z.{fmt}", input_type="probabilities")
    must_contain(message, "negative probability")


def test_probabilities_read_as_logits_when_asked(probs3):
    p, y = probs3
    preds = load_predictions(encode("csv", p, y), format="csv", input_type="logits")
    assert preds.input_type == "logits"
    np.testing.assert_allclose(preds.logits, p)


def test_unknown_format_for_bytes_is_sniffed(probs3):
    p, y = probs3
    for fmt in ["csv", "csv.gz", "parquet", "npz", "npy"]:
        preds = load_predictions(encode(fmt, p, y))  # neither format nor name
        np.testing.assert_allclose(preds.probs, p, atol=1e-12)
        assert preds.source == "uploaded data"


def test_format_argument_beats_suffix(probs3, tmp_path):
    p, y = probs3
    path = tmp_path / "preds.data"
    path.write_bytes(encode("parquet", p, y))
    assert load_predictions(path, format="parquet").n == len(y)
    assert load_predictions(path, format=".PARQUET").n == len(y)


def test_numpy_formats_tolerate_the_wrong_suffix(probs3):
    p, y = probs3
    preds = load_predictions(encode("npy", p, y), name="really_npy.npz")
    assert preds.n == len(y) and any("really a single NPY array" in n for n in preds.notes)
    preds = load_predictions(encode("npz", p, y), name="really_npz.npy")
    assert preds.n == len(y) and any("really an NPZ archive" in n for n in preds.notes)


def test_plain_csv_named_gz_and_gz_named_csv(probs3):
    p, y = probs3
    assert load_predictions(encode("csv.gz", p, y), name="f.csv").n == len(y)
    assert load_predictions(encode("csv", p, y), name="f.csv.gz").n == len(y)


# ------------------------------------------------------------------------------ real sample data
@pytest.mark.parametrize("path", sorted(glob.glob(str(ROOT / "sample_data" / "*.npz"))), ids=lambda p: Path(p).name)
def test_bundled_npz_samples_load_from_path_and_bytes(path):
    raw = np.load(path, allow_pickle=False)
    for preds in (load_predictions(path), load_predictions(Path(path).read_bytes(), name=Path(path).name)):
        assert preds.kind == "multiclass" and preds.input_type == "logits"
        assert preds.n == raw["labels"].shape[0] and preds.n_classes == raw["logits"].shape[1]
        np.testing.assert_array_equal(preds.labels, raw["labels"])
        np.testing.assert_allclose(preds.logits, raw["logits"].astype(np.float64))


def test_all_bundled_samples_load():
    files = [f for f in glob.glob(str(ROOT / "sample_data" / "*")) if Path(f).suffix in {".csv", ".parquet", ".npz", ".npy", ".gz"}]
    assert files
    for f in files:
        preds = load_predictions(f)
        assert preds.n > 0, f


@pytest.mark.skipif(not SHARED_PREDICTIONS.is_dir(), reason="shared prediction files not present")
def test_shared_prediction_files_use_logits_and_labels():
    files = sorted(SHARED_PREDICTIONS.glob("*.npz"))[:3]
    for f in files:
        preds = load_predictions(f)
        raw = np.load(f, allow_pickle=False)
        np.testing.assert_array_equal(preds.labels, raw["labels"])
        assert preds.n == raw["labels"].shape[0]  # not the _val split
        assert any("logits_val" in n for n in preds.notes)


# -------------------------------------------------------------------------------- class names
def test_class_name_labels_follow_the_header_order():
    preds = load_predictions(csv_bytes("cat,dog,bird,label\n0.7,0.2,0.1,cat\n0.1,0.1,0.8,bird\n0.2,0.7,0.1, dog\n"), format="csv")
    np.testing.assert_array_equal(preds.labels, [0, 2, 1])
    assert preds.class_names == ("cat", "dog", "bird")


def test_class_name_label_not_a_header():
    message = error_of(csv_bytes("cat,dog,label\n0.5,0.5,cat\n0.5,0.5,dog\n0.5,0.5,cow\n"))
    must_contain(message, "'cow'", f"row 3 {ROW}", "'cat', 'dog'", "'label'")


def test_binary_class_names_header_is_positive():
    preds = load_predictions(csv_bytes("cat,label\n0.9,cat\n0.2,dog\n"), format="csv")
    assert preds.kind == "binary" and preds.class_names == ("dog", "cat")
    np.testing.assert_array_equal(preds.labels, [1, 0])
    np.testing.assert_allclose(preds.p_positive, [0.9, 0.2])
    assert any("'cat' is class 1" in n for n in preds.notes)


@pytest.mark.parametrize("header", ["p_churn", "prob_Churn", "churn_prob", "Churn probability", "P(churn)",
                                    "p(y=churn)", "CHURN"])
def test_binary_class_names_a_score_header_that_names_a_class_makes_it_class_1(header):
    # 'churn' sorts before 'stay': reading p_churn as p(stay) inverted every metric (found on a file
    # in the wild: accuracy .363 instead of .637).
    preds = load_predictions(csv_bytes(f"{header},label\n0.9,churn\n0.2,stay\n0.3,stay\n"), format="csv")
    assert preds.class_names == ("stay", "churn")
    np.testing.assert_array_equal(preds.labels, [1, 0, 0])
    np.testing.assert_allclose(preds.p_positive, [0.9, 0.2, 0.3])
    assert preds.accuracy == 1.0
    assert any("'churn' is class 1" in n and header in n for n in preds.notes)


@pytest.mark.parametrize("no, yes", [("no", "yes"), ("N", "Y"), ("negative", "positive"), ("fail", "pass"),
                                     ("neg", "pos"), ("incorrect", "correct")])
def test_binary_class_names_of_a_yes_no_pair_need_no_header(no, yes):
    preds = load_predictions(csv_bytes(f"score,label\n0.9,{yes}\n0.2,{no}\n"), format="csv")
    assert preds.class_names == (no, yes)
    np.testing.assert_array_equal(preds.labels, [1, 0])
    assert any(f"{yes!r} is class 1" in n and f"p({yes})" in n for n in preds.notes)


def test_binary_class_names_that_the_header_does_not_name_are_an_error_not_a_guess():
    message = error_of(csv_bytes("prob,target\n0.9,stay\n0.2,churn\n"))
    must_contain(message, "'prob'", "'churn'", "'stay'", "which class", "'p_stay'", "0/1")


@pytest.mark.parametrize("labels, words", [(["a", "b", "c"], ("binary", "3 distinct")),
                                           # one name only, not a word of a known pair (audit 10a): what to write
                                           (["a", "a", "a"], ("one class name only, 'a'", "0/1", "no/yes"))])
def test_binary_class_names_need_exactly_two(labels, words):
    text = "score,label\n" + "".join(f"0.5,{v}\n" for v in labels)
    must_contain(error_of(csv_bytes(text)), *words)


def test_integer_headers_match_labels_by_value():
    preds = load_predictions(csv_bytes("1,2,3,label\n0.7,0.2,0.1,1\n0.1,0.1,0.8,3\n"), format="csv")
    np.testing.assert_array_equal(preds.labels, [0, 2])
    must_contain(error_of(csv_bytes("1,2,3,label\n0.7,0.2,0.1,1\n0.1,0.1,0.8,0\n")), "label 0", f"row 2 {ROW}")


def test_integer_labels_index_named_columns():
    preds = load_predictions(csv_bytes("cat,dog,label\n0.7,0.3,1\n"), format="csv")
    np.testing.assert_array_equal(preds.labels, [1])
    assert preds.kind == "binary" and preds.class_names == ("cat", "dog")


def test_label_column_found_case_insensitively_and_by_argument():
    assert load_predictions(csv_bytes("a,b,Y_True\n0.5,0.5,1\n"), format="csv").labels.tolist() == [1]
    preds = load_predictions(csv_bytes("a,b,truth\n0.5,0.5,1\n"), format="csv", label_column="TRUTH")
    assert preds.labels.tolist() == [1] and preds.class_names == ("a", "b")
    must_contain(error_of(csv_bytes("a,b,truth\n0.5,0.5,1\n"), label_column="gold"), "'gold'", "'truth'")
    assert load_predictions(csv_bytes("a,b,y\n0.5,0.5,1\n"), format="csv", label_column=" ").labels.tolist() == [1]


# -------------------------------------------------------------------------------- top-label only
def test_top_label_with_class_names():
    preds = load_predictions(csv_bytes("Confidence,pred,label\n0.9,cat,cat\n0.6,dog,cat\n0.7,bird,bird\n"), format="csv")
    assert preds.kind == "top_label" and not preds.can_recalibrate
    assert preds.class_names == ("bird", "cat", "dog")
    np.testing.assert_array_equal(preds.predicted, [1, 2, 0])
    np.testing.assert_array_equal(preds.labels, [1, 1, 0])
    np.testing.assert_allclose(preds.accuracy, 2 / 3)


def test_top_label_with_integers_and_errors():
    preds = load_predictions(csv_bytes("max_prob,predicted_label,y\n0.9,3,3\n0.6,1,2\n"), format="csv")
    assert preds.kind == "top_label" and preds.labels.tolist() == [3, 2]
    must_contain(error_of(csv_bytes("conf,pred,label\n0.9,1,1\n1.5,1,1\n")), "confidence 1.5", f"row 2 {ROW}")
    must_contain(error_of(csv_bytes("conf,pred,label\n0.9,1,1\n,1,1\n")), "missing", "'conf'", f"row 2 {ROW}")
    must_contain(error_of(csv_bytes("conf,pred,label\n0.9,cat,1\n")), "'pred'", "names")
    # Other columns of a top-label file are kept next to it, as metadata.
    preds = load_predictions(csv_bytes("conf,pred,label,extra\n0.9,1,1,0\n"), format="csv")
    assert preds.kind == "top_label" and preds.metadata["extra"].tolist() == [0]
    assert dict(preds.column_roles) == {"conf": "confidence", "pred": "predicted", "label": "label", "extra": "metadata"}
    must_contain(error_of(csv_bytes("conf,pred,label\n0.9,1,1\n"), input_type="logits"), "logits")
    must_contain(error_of(csv_bytes("conf,confidence,pred,label\n0.9,0.9,1,1\n")), "'conf', 'confidence'")


# ----------------------------------------------------------------------------- table errors
@pytest.mark.parametrize("data, parts", [
    (b"", ["empty"]),
    (b"\n\n  \n", ["empty"]),
    (b"a,b,label\n", ["empty", "no data rows"]),
    (b"a,b,label\n\n\n", ["empty", "no data rows"]),
    (b"a,b,label\n0.5,0.5,0\n0.5,0.5,1\n0.4,abc,1\n", ["non-numeric", "'abc'", "column 'b'", f"row 3 {ROW}"]),
    (b"a,b,label\n0.5,0.5,0\n0.5,,1\n", ["missing value", "column 'b'", f"row 2 {ROW}"]),
    (b"a,b,label\n0.5,NaN,0\n", ["missing value", "column 'b'", f"row 1 {ROW}"]),
    (b"a,b,label\n0.5,0.5,0\n-inf,0.5,1\n", ["infinite", "column 'a'", f"row 2 {ROW}"]),
    (b"a,b,label\n0.5,0.5,0\n0.5,0.5,\n", ["missing value", "column 'label'", f"row 2 {ROW}"]),
    (b"a,b,label\n0.5,0.5,0\n0.5,0.5,2\n", ["label 2", f"row 2 {ROW}", "outside the classes 0..1"]),
    (b"a,b,label\n0.5,0.5,0\n0.5,0.5,-1\n", ["label -1", f"row 2 {ROW}"]),
    (b"# exported by tool v2\n# model: churn\np_churn,churn\n0.2,0\n",
     ["has 2 fields but the header has 1", "starts with a comment line", "delete the comment lines above the header"]),
    (b"a,b,label\n0.5,0.5,0.5\n", ["not a whole number", f"row 1 {ROW}"]),
    (b"a,b\n0.5,0.5\n", ["no label column", "'a', 'b'"]),
    (b"0.5,0.2,0.3,1\n0.1,0.1,0.8,2\n", ["no label column", "looks like data"]),
    (b"a,b,label,target\n0.5,0.5,1,1\n", ["ambiguous label column", "'label', 'target'", "label_column="]),
    (b"a,b,Label,label\n0.5,0.5,1,1\n", ["ambiguous label column", "'Label', 'label'"]),
    (b"a,a,label\n0.5,0.5,1\n", ["duplicate column", "'a'"]),
    (b"label\n1\n", ["no score columns"]),
    (b"p,label\n0.3,0\n0.7,2\n", ["labels must be 0 or 1", f"row 2 {ROW}", "label 2"]),
    (b"p,label\n0.3,0\n1.7,1\n", ["p(y=1) in [0, 1]", f"row 2 {ROW}"]),
    (b"a,b,label\n0.5,0.5,0\n0.5,0.5,1,9\n", [f"row 2 {ROW}", "4 fields", "3 columns"]),
    (b"a,b,label\n0.5,0.5,0\n\n0.5,0.5,1\n", [f"row 2 {ROW}", "empty"]),
    (b"a,,label\n0.5,0.5,0\n0.5,0.5,1\n", ["column 2 has no header"]),
    (b"a,b,label\n0.5,0.5,0\n0.5,0.5,1\n0.4,true,1\n", ["non-numeric", "'true'", "column 'b'", f"row 3 {ROW}"]),
])
def test_table_errors_name_the_problem_and_place(data, parts):
    must_contain(error_of(data, name="my preds.csv"), *parts)


def test_rows_not_summing_to_one():
    text = csv_bytes("a,b,c,label\n0.2,0.3,0.5,0\n0.2,0.3,0.4,1\n0.1,0.1,0.1,2\n")
    message = error_of(text)
    must_contain(message, f"row 2 {ROW}", "sum to 0.9", "2 rows", "renormalize=True", "input_type='logits'")
    preds = load_predictions(text, format="csv", renormalize=True)
    np.testing.assert_allclose(preds.probs.sum(axis=1), 1.0)
    np.testing.assert_allclose(preds.probs[2], [1 / 3] * 3)
    assert preds.input_type == "probabilities" and any("Renormalised 2 rows" in n for n in preds.notes)
    # tiny float drift within the tolerance is accepted silently
    assert load_predictions(csv_bytes("a,b,label\n0.5,0.5004,0\n"), format="csv").probs.sum() == pytest.approx(1.0)
    # ... and a looser tolerance can be asked for
    assert load_predictions(text, format="csv", tolerance=0.8).n == 3


def test_negative_probability_when_forced():
    message = error_of(csv_bytes("a,b,label\n0.5,0.5,0\n1.2,-0.2,1\n"), input_type="probabilities")
    must_contain(message, "negative probability", f"row 2 {ROW}")


def test_blank_lines_at_the_end_are_ignored():
    preds = load_predictions(csv_bytes("a,b,label\r\n0.5,0.5,0\r\n0.4,0.6,1\r\n\r\n\r\n"), format="csv")
    assert preds.n == 2


@pytest.mark.parametrize("index", [[0, 1, 2], [2, 0, 1], [1, 2, 3], [17, 4, 9]])
def test_saved_pandas_index_is_kept_as_metadata(index):
    # to_csv() after df.sample() or of a filtered frame writes an index that is not 0..n-1; it is the
    # rows' ids (audit 8: results must join back to the source), so it is kept, not dropped.
    rows = "".join(f"{i},{a},{1 - a},{y}\n" for i, a, y in zip(index, (0.5, 0.4, 0.9), (0, 1, 0)))
    preds = load_predictions(csv_bytes(",a,b,label\n" + rows), format="csv")
    assert preds.class_names == ("a", "b") and any("saved row index" in n for n in preds.notes)
    assert preds.column_roles[0] == ("row index", "metadata")
    assert preds.metadata["row index"].tolist() == index
    np.testing.assert_allclose(preds.probs[:, 0], [0.5, 0.4, 0.9])


def test_spreadsheet_trailing_empty_columns_are_dropped_with_a_note():
    # Excel's CSV export: a separator (or several) after the last column on every line
    text = csv_bytes("p,label,,\r\n0.3,0,,\r\n0.8,1,,\r\n")
    preds = load_predictions(text, format="csv")
    np.testing.assert_allclose(preds.p_positive, [0.3, 0.8])
    assert any("Dropped 2 empty column(s) without a header" in n for n in preds.notes)


def test_an_unnamed_column_with_data_can_be_ignored_by_its_positional_name():
    text = csv_bytes("a,,label\n0.5,x,0\n0.4,y,1\n")
    must_contain(error_of(text), "column 2 has no header", "ignore_columns='Unnamed: 1'")
    preds = load_predictions(text, format="csv", ignore_columns="Unnamed: 1")
    np.testing.assert_allclose(preds.p_positive, [0.5, 0.4])


def test_other_separators_bom_and_latin1():
    preds = load_predictions(csv_bytes("a;b;label\n0.5;0.5;0\n"), format="csv")
    assert preds.class_names == ("a", "b") and any("semicolons" in n for n in preds.notes)
    preds = load_predictions(csv_bytes("a\tb\tlabel\n0.5\t0.5\t1\n"), format="csv")
    assert preds.class_names == ("a", "b")
    assert load_predictions(b"\xef\xbb\xbfa,b,label\n0.5,0.5,1\n", format="csv").class_names == ("a", "b")
    with pytest.warns(UserWarning, match="Latin-1"):
        preds = load_predictions(b"caf\xe9,th\xe9,label\n0.5,0.5,1\n", format="csv")
    assert preds.class_names == ("café", "thé")


def test_long_header_of_many_classes(tmp_path):
    rng = np.random.default_rng(5)
    names = [f"imagenet_class_{k:04d}" for k in range(1000)]  # header > 20 kB
    z = rng.normal(size=(3, 1000))
    data = encode("csv", z, [0, 999, 5], names)
    preds = load_predictions(data, format="csv")
    assert preds.class_names == tuple(names) and preds.labels.tolist() == [0, 999, 5]
    names[500] = names[3]
    must_contain(error_of(encode("csv", z, [0, 1, 2], names)), "duplicate column", repr(names[3]))


def test_quoted_numbers_and_spaces_are_numbers():
    preds = load_predictions(csv_bytes('"a","b","label"\n"0.5", 0.5 ,"1"\n'), format="csv")
    np.testing.assert_allclose(preds.probs, [[0.5, 0.5]])
    assert preds.labels.tolist() == [1]


def test_parquet_errors_use_the_same_row_numbers(tmp_path):
    df = pd.DataFrame({"a": [0.5, 0.5, 0.5], "b": ["0.5", "0.5", "x"], "label": [0, 1, 1]})
    path = tmp_path / "p.parquet"
    df.to_parquet(path)
    must_contain(error_of(path), "non-numeric", "'x'", "column 'b'", f"row 3 {ROW}")
    df = pd.DataFrame({"a": [0.5, 0.5], "b": [0.5, np.nan], "label": pd.array([0, None], dtype="Int64")})
    df.to_parquet(path)
    must_contain(error_of(path), "missing value", "column 'b'", f"row 2 {ROW}")
    df = pd.DataFrame({"cat": [0.5, 0.5], "dog": [0.5, 0.5], "label": pd.Categorical(["cat", "dog"])})
    df.to_parquet(path)
    assert load_predictions(path).labels.tolist() == [0, 1]


# ---------------------------------------------------------------------------- file-level errors
def test_missing_file_and_directory(tmp_path):
    must_contain(error_of(tmp_path / "nope.csv"), "not found")
    (tmp_path / "d.csv").mkdir()
    must_contain(error_of(tmp_path / "d.csv"), "not a file")


@pytest.mark.parametrize("name", ["preds.xls", "preds", "preds.xml.gz"])
def test_unsupported_suffix_names_it_and_the_accepted_ones(name, tmp_path):
    path = tmp_path / name
    path.write_bytes(b"a,b,label\n0.5,0.5,1\n")
    message = error_of(path)
    must_contain(message, "unsupported file type", *ACCEPTED_SUFFIXES)
    if "." in name:
        must_contain(message, repr(name[name.index("."):]))


def test_bad_arguments():
    data = b"a,b,label\n0.5,0.5,1\n"
    must_contain(error_of(data, format="xls"), "unknown format 'xls'")
    must_contain(error_of(data, input_type="probs"), "input_type")
    must_contain(error_of(data, max_rows=0), "max_rows")
    with pytest.raises(PredictionsError, match="expected a path, bytes"):
        load_predictions(12345)
    with pytest.raises(PredictionsError, match="pass the file's contents as bytes"):
        load_predictions("a,b,label\n0.5,0.5,1\n")
    with pytest.raises(PredictionsError, match="cannot open|not found"):
        load_predictions("x" * 5000 + ".csv")


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10" + bytes(range(256))


@pytest.mark.parametrize("name, parts", [
    ("image.csv", ["not a CSV text file", "PNG image"]),
    ("image.tsv", ["not a TSV text file", "PNG image"]),
    ("image.parquet", ["not a Parquet file", "PNG image"]),
    ("image.npz", ["not an NPZ file", "PNG image"]),
    ("image.npy", ["not an NPY file", "PNG image"]),
    ("image.csv.gz", ["not a CSV text file", "PNG image"]),
])
def test_renamed_image(name, parts, tmp_path):
    path = tmp_path / name
    path.write_bytes(PNG)
    must_contain(error_of(path), *parts)
    must_contain(error_of(PNG, name=name), *parts)


def test_unrecognisable_bytes_without_a_name():
    must_contain(error_of(PNG, name="uploaded data"), "cannot tell the file format", "PNG")


def test_truncated_and_corrupt_binary_files(probs3):
    p, y = probs3
    pq = encode("parquet", p, y)
    must_contain(error_of(pq[: len(pq) // 2], name="t.parquet"), "Parquet", "truncated or corrupt")
    must_contain(error_of(b"PAR1" + b"\x00" * 50 + b"PAR1", name="t.parquet"), "Parquet")
    npz = encode("npz", p, y)
    must_contain(error_of(npz[: len(npz) // 2], name="t.npz"), "t.npz:")
    must_contain(error_of(encode("npy", p, y)[:70], name="t.npy"), "t.npy:")
    must_contain(error_of(gzip.compress(b"a,b,label\n0.5,0.5,1\n")[:-12], name="t.csv.gz"), "gzip")
    must_contain(error_of(b"\x80\x04\x95garbage", name="t.npy"), "pickled data is not accepted")


def test_zip_that_is_not_an_npz():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("readme.txt", "hello")
        zf.writestr("labels.npy", "not an array")
    message = error_of(buf.getvalue(), name="z.npz")
    must_contain(message, "missing array(s)", "scores (logits or probs", "'labels', 'readme.txt'")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("logits.npy", "not an array")
        zf.writestr("labels.npy", "not an array")
    must_contain(error_of(buf.getvalue(), name="z.npz"), "not a NumPy array")


# --------------------------------------------------------------------------------- NPZ / NPY
def npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def test_npz_keys_and_class_names():
    z = np.array([[2.0, -1.0], [0.0, 3.0]])
    preds = load_predictions(npz_bytes(logits=z, y=np.array([0, 1]), class_names=np.array(["no", "yes"])), name="a.npz")
    assert preds.class_names == ("no", "yes") and preds.input_type == "logits"
    preds = load_predictions(npz_bytes(scores=z, labels=np.array([0, 1]), class_names=np.array([b"no", b"yes"])), name="a.npz")
    assert preds.class_names == ("no", "yes")
    p = np.array([[0.2, 0.8], [0.6, 0.4]])
    preds = load_predictions(npz_bytes(probabilities=p, labels=np.array([1, 0])), name="a.npz")
    np.testing.assert_allclose(preds.probs, p)
    # both logits and probabilities: logits by default, probabilities when asked
    both = npz_bytes(logits=z, probs=p, labels=np.array([1, 0]))
    assert load_predictions(both, name="a.npz").input_type == "logits"
    np.testing.assert_allclose(load_predictions(both, name="a.npz", input_type="probabilities").probs, p)
    # binary p(y=1) as a 1-D array
    preds = load_predictions(npz_bytes(probs=np.array([0.1, 0.9]), labels=np.array([0, 1])), name="a.npz")
    assert preds.kind == "binary"


def test_npz_errors():
    z = np.zeros((3, 2))
    must_contain(error_of(npz_bytes(logit=z, labels=np.arange(3) % 2), name="a.npz"), "missing", "'labels', 'logit'")
    must_contain(error_of(npz_bytes(logits=z, truth=np.arange(3) % 2), name="a.npz"), "labels (labels or y or", "'truth'")
    assert load_predictions(npz_bytes(logits=z, truth=np.arange(3) % 2), name="a.npz", label_column="Truth").n == 3
    assert load_predictions(npz_bytes(logits=z, target=np.arange(3) % 2), name="a.npz").n == 3  # a known name
    must_contain(error_of(npz_bytes(logits=z, labels=np.arange(3) % 2), name="a.npz", label_column="gold"), "'gold'")
    must_contain(error_of(npz_bytes(logits=z, labels=np.array([0, 1])), name="a.npz"), "mismatched lengths", "3 rows", "2 labels")
    must_contain(error_of(npz_bytes(logits=z, labels=np.array([0, 1, 5])), name="a.npz"),
                 "label 5", "row 2 (0-based array index)")
    must_contain(error_of(npz_bytes(logits=z, labels=np.zeros((3, 2))), name="a.npz"), "shape (n,)")
    must_contain(error_of(npz_bytes(logits=z, labels=np.arange(3) % 2, class_names=np.array(["a", "b", "c"])), name="a.npz"),
                 "3 class names for 2 score columns")
    must_contain(error_of(npz_bytes(logits=np.array([[0.0, np.nan]]), labels=np.array([0])), name="a.npz"),
                 "NaN", "row 0 (0-based array index)")
    must_contain(error_of(npz_bytes(logits=np.zeros((0, 2)), labels=np.zeros(0)), name="a.npz"), "empty")


def test_npz_logits_key_is_trusted_unless_values_look_like_probabilities():
    small = np.array([[0.0, 0.0], [0.3, 0.1]])  # logits inside [0, 1]: inspection alone would refuse them
    preds = load_predictions(npz_bytes(logits=small, labels=np.array([0, 1])), name="a.npz")
    assert preds.input_type == "logits" and any("as its name says" in n for n in preds.notes)
    probs = np.array([[0.2, 0.8], [0.6, 0.4]])  # softmax outputs stored under the wrong name
    assert load_predictions(npz_bytes(logits=probs, labels=np.array([0, 1])), name="a.npz").input_type == "probabilities"
    message = error_of(npz_bytes(probs=small, labels=np.array([0, 1])), name="a.npz")
    must_contain(message, "row 0 (0-based array index)", "sum to 0", "renormalize=True")


def test_npz_pickled_object_arrays_are_refused():
    buf = io.BytesIO()
    np.savez(buf, logits=np.zeros((2, 2)), labels=np.array([0, 1]), class_names=np.array(["a", None], dtype=object))
    must_contain(error_of(buf.getvalue(), name="o.npz"), "pickled object arrays are not accepted", "'class_names'")
    buf = io.BytesIO()
    np.savez(buf, logits=np.array([[1, 2], [3, 4]], dtype=object), labels=np.array([0, 1]))
    must_contain(error_of(buf.getvalue(), name="o.npz"), "pickled object arrays are not accepted")
    buf = io.BytesIO()  # a fallback name of the scores ('preds'), whose dtype decides whether it is scores
    np.savez(buf, preds=np.array([{"p": 0.2}, {"p": 0.7}], dtype=object), labels=np.array([0, 1]))
    must_contain(error_of(buf.getvalue(), name="o.npz"), "pickled object arrays are not accepted", "'preds'")


def test_npy_layout_and_errors(tmp_path):
    arr = np.array([[0.2, 0.8, 1], [0.7, 0.3, 0]])
    path = tmp_path / "a.npy"
    np.save(path, arr)
    preds = load_predictions(path)
    np.testing.assert_allclose(preds.probs, arr[:, :2])
    assert preds.labels.tolist() == [1, 0] and any("last column is the label" in n for n in preds.notes)
    np.save(path, np.array([0.1, 0.2]))
    must_contain(error_of(path), "2-D", "shape (2,)")
    np.save(path, np.array([[0.2, 0.8, 0.5]]))
    must_contain(error_of(path), "not a whole number", "row 0 (0-based array index)")
    np.save(path, np.array([["a", "b"]]))
    must_contain(error_of(path), "numeric")
    np.save(path, np.array([[1, None]], dtype=object), allow_pickle=True)
    must_contain(error_of(path), "pickled object arrays are not accepted")
    must_contain(error_of(path.read_bytes(), name="a.npy"), "pickled object arrays are not accepted")


# -------------------------------------------------------------------------------- max_rows
@pytest.mark.parametrize("fmt", FORMATS)
def test_max_rows(fmt, tmp_path):
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(2), size=50)
    y = rng.integers(0, 2, size=50)
    data = encode(fmt, p, y)
    path = tmp_path / f"big.{fmt}"
    path.write_bytes(data)
    for source in (path, data):
        with pytest.raises(PredictionsError) as info:
            load_predictions(source, format=fmt, max_rows=20)
        must_contain(str(info.value), "50 data rows", "limit of 20 rows")
        assert load_predictions(source, format=fmt, max_rows=50).n == 50


def test_max_rows_counts_a_last_line_without_newline():
    text = b"a,b,label\n0.5,0.5,0\n0.5,0.5,1"
    must_contain(error_of(text, max_rows=1), "2 data rows")
    assert load_predictions(text + b"\n\n\n", format="csv", max_rows=2).n == 2


def test_csv_is_read_once_with_the_types_of_its_first_block(monkeypatch):
    """Well-formed CSVs take the fast path (no Python loop, no second parse)."""
    from pbr_core.loading import _tables

    calls = []

    def spy(name, real):
        def wrapped(*args, **kw):
            calls.append(name)
            return real(*args, **kw)
        return wrapped

    monkeypatch.setattr(pd, "read_csv", spy("pandas", pd.read_csv))
    monkeypatch.setattr(_tables, "_read_csv_typed", spy("typed", _tables._read_csv_typed))
    monkeypatch.setattr(_tables, "_read_csv_whole", spy("whole", _tables._read_csv_whole))
    rng = np.random.default_rng(4)
    p = rng.dirichlet(np.ones(10), size=5_000)
    y = rng.integers(0, 10, size=5_000)
    data = encode("csv", p, y)
    data = data[:-1] + b"\n0.1,0.1,0.1,0.1,0.1,0.1,0.1,0.1,0.1,oops,3\n"
    message = error_of(data, max_rows=10**6)
    must_contain(message, "'oops'", "column 'c9'", f"row 5001 {ROW}")
    assert calls == ["typed"]


# --------------------------------------------------------------------------- template & saving
@pytest.mark.parametrize("kind, expected", [("multiclass", "multiclass"), ("binary", "binary"), ("top_label", "top_label")])
def test_template_reads_back(kind, expected, tmp_path):
    text = template_csv(kind, n_rows=7)
    assert text == template_csv(kind, n_rows=7)  # deterministic
    assert len(text.strip().splitlines()) == 8
    preds = load_predictions(text.encode(), name=f"template_{kind}.csv")
    assert preds.kind == expected and preds.n == 7
    (tmp_path / "t.csv").write_text(text)
    assert load_predictions(tmp_path / "t.csv").kind == expected


def test_template_bad_arguments():
    with pytest.raises(ValueError, match="kind"):
        template_csv("images")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n_rows"):
        template_csv(n_rows=0)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_save_predictions_round_trip(fmt, probs3, tmp_path):
    p, y = probs3
    preds = Predictions.from_arrays(p, y, class_names=["cat", "dog", "bird"])
    path = tmp_path / f"out.{fmt}"
    assert save_predictions(preds, None, path) is None  # format from the suffix
    back = load_predictions(path)
    np.testing.assert_array_equal(back.probs, preds.probs)  # exact: CSV floats are written round-trip
    np.testing.assert_array_equal(back.labels, y)
    assert back.class_names == ("cat", "dog", "bird")
    data = save_predictions(p, y, format=fmt)
    assert isinstance(data, bytes)
    back = load_predictions(data, format=fmt)
    assert back.class_names == ("0", "1", "2") and np.array_equal(back.labels, y)
    buf = io.BytesIO()
    save_predictions(p, y, buf, format=fmt, class_names=["a", "b", "c"])
    assert load_predictions(buf.getvalue(), format=fmt).class_names == ("a", "b", "c")


def test_save_binary_and_top_label():
    preds = Predictions.from_arrays(np.array([0.2, 0.9]), np.array([0, 1]))
    back = load_predictions(save_predictions(preds), format="csv")
    assert back.kind == "binary" and np.allclose(back.p_positive, [0.2, 0.9])
    top = load_predictions(csv_bytes(template_csv("top_label")), format="csv")
    back = load_predictions(save_predictions(top), format="csv")
    assert back.kind == "top_label" and back.class_names == top.class_names
    np.testing.assert_array_equal(back.predicted, top.predicted)
    np.testing.assert_array_equal(back.confidence, top.confidence)


def test_save_rejects_unreadable_names_and_bad_input():
    p = np.array([[0.5, 0.5]])
    with pytest.raises(PredictionsError, match="label column"):
        save_predictions(p, [0], class_names=["Label", "b"])
    with pytest.raises(PredictionsError, match="duplicate"):
        save_predictions(p, [0], class_names=["a", "a"])
    with pytest.raises(PredictionsError, match="labels are required"):
        save_predictions(p)
    with pytest.raises(PredictionsError, match="format"):
        save_predictions(p, [0], format="xlsx")  # type: ignore[arg-type]
    with pytest.raises(PredictionsError, match="sum to"):
        save_predictions(np.array([[0.5, 0.2]]), [0])


# -------------------------------------------------------------------------------- properties
@st.composite
def prob_matrices(draw):
    n = draw(st.integers(1, 25))
    k = draw(st.integers(2, 6))
    raw = draw(hnp.arrays(np.float64, (n, k), elements=st.floats(1e-6, 1.0)))
    probs = raw / raw.sum(axis=1, keepdims=True)
    labels = draw(hnp.arrays(np.int64, (n,), elements=st.integers(0, k - 1)))
    return probs, labels


@FAST
@given(data=prob_matrices(), fmt=st.sampled_from(["csv", "tsv.gz", "parquet", "npz", "npy"]))
def test_property_valid_probabilities_round_trip(data, fmt):
    probs, labels = data
    preds = load_predictions(encode(fmt, probs, labels), format=fmt)
    assert preds.input_type == "probabilities"
    np.testing.assert_allclose(preds.probs, probs, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(preds.labels, labels)


@FAST
@given(
    z=hnp.arrays(np.float64, st.tuples(st.integers(1, 20), st.integers(2, 6)), elements=st.floats(-30, 30)),
    fmt=st.sampled_from(["csv", "npz"]),
)
def test_property_values_outside_unit_interval_are_logits(z, fmt):
    z = z.copy()
    z[0, 0] = 1.5 if z[0, 0] >= 0 else -1.5  # at least one value outside [0, 1]
    labels = np.arange(z.shape[0]) % z.shape[1]
    preds = load_predictions(encode(fmt, z, labels), format=fmt)
    assert preds.input_type == "logits"
    np.testing.assert_allclose(preds.logits, z)
    np.testing.assert_allclose(preds.probs.sum(axis=1), 1.0)


def _only_predictions_error(data: bytes, **kw) -> None:
    try:  # warnings (e.g. "not UTF-8") are fine: only the exception type matters here
        preds = load_predictions(data, **kw)
    except PredictionsError as exc:
        assert str(exc).startswith(kw.get("name") or "uploaded data")
    else:
        assert isinstance(preds, Predictions)


@FUZZ
@FAST
@given(data=st.binary(max_size=600), fmt=st.sampled_from([None, "csv", "tsv", "parquet", "npz", "npy"]))
def test_property_garbage_bytes_only_raise_predictions_error(data, fmt):
    _only_predictions_error(data, format=fmt)


_VALID = {fmt: encode(fmt, np.array([[0.25, 0.75], [0.6, 0.4], [0.1, 0.9]]), [1, 0, 1]) for fmt in ["csv.gz", "parquet", "npz", "npy"]}


@FUZZ
@FAST
@given(
    fmt=st.sampled_from(sorted(_VALID)),
    cut=st.integers(0, 10_000),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
)
def test_property_damaged_files_only_raise_predictions_error(fmt, cut, flips):
    data = bytearray(_VALID[fmt])
    for pos, value in flips:
        data[pos % len(data)] = value
    _only_predictions_error(bytes(data[: max(1, cut % (len(data) + 1))]), name=f"damaged.{fmt}")


_TOKENS = st.sampled_from(["a", "b", "label", "y", "conf", "pred", ",", ",", ";", "\t", "\n", "\n", "\r\n", '"',
                           "0.5", "1", "0", "-3", "nan", "inf", "", " ", "cat", "1e309", "é", "\x00"])


@FUZZ
@FAST
@given(tokens=st.lists(_TOKENS, max_size=60))
def test_property_csv_like_text_only_raises_predictions_error(tokens):
    _only_predictions_error("".join(tokens).encode("utf-8"), name="fuzz.csv")


# ---------------------------------------------------------------- unlabelled files (require_labels=False)


def test_unlabelled_table_loads_only_when_asked(tmp_path):
    path = tmp_path / "new_data.csv"
    path.write_text("cat,dog,bird\n0.2,0.5,0.3\n0.7,0.2,0.1\n")
    with pytest.raises(PredictionsError, match="no label column"):
        load_predictions(path)
    preds = load_predictions(path, require_labels=False)
    assert not preds.has_labels
    assert preds.class_names == ("cat", "dog", "bird")
    np.testing.assert_allclose(preds.probs, [[0.2, 0.5, 0.3], [0.7, 0.2, 0.1]])
    assert any("No label column" in n for n in preds.notes)
    # Written back without a label column, and still unlabelled when read again.
    out = tmp_path / "calibrated.csv"
    save_predictions(preds, path_or_buffer=out)
    assert out.read_text().splitlines()[0] == "cat,dog,bird"
    assert not load_predictions(out, require_labels=False).has_labels
    # A labelled file read with require_labels=False keeps its labels.
    labelled = tmp_path / "labelled.csv"
    labelled.write_text("cat,dog,label\n0.2,0.8,1\n0.6,0.4,0\n")
    got = load_predictions(labelled, require_labels=False)
    assert got.has_labels and got.labels.tolist() == [1, 0]


def test_unlabelled_npz_and_bad_values_still_named(tmp_path):
    path = tmp_path / "logits_only.npz"
    np.savez(path, logits=np.array([[2.0, -1.0, 0.5], [0.0, 3.0, 1.0]]))
    preds = load_predictions(path, require_labels=False)
    assert not preds.has_labels and preds.input_type == "logits"
    with pytest.raises(PredictionsError, match="missing array"):
        load_predictions(path)
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n0.5,0.5\n0.5,oops\n")
    with pytest.raises(PredictionsError, match=r"'oops' in column 'b' at row 2"):
        load_predictions(bad, require_labels=False)


def test_save_predictions_writes_extra_columns_after_the_label():
    from pbr_core.loading import save_predictions

    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])
    data = save_predictions(probs, [0, 1, 1], class_names=["cat", "dog"],
                            extra_columns={"row_id": np.array([7, 8, 9]), "used_for_fit": [True, False, True]})
    lines = data.decode().splitlines()
    assert lines[0] == "cat,dog,label,row_id,used_for_fit"
    assert lines[1] == "0.9,0.1,0,7,True"
    with pytest.raises(PredictionsError, match="extra column 'row_id' has shape"):
        save_predictions(probs, [0, 1, 1], extra_columns={"row_id": [1, 2]})
    with pytest.raises(PredictionsError, match="clashes"):
        save_predictions(probs, [0, 1, 1], class_names=["cat", "dog"], extra_columns={"cat": [1, 2, 3]})


def test_a_decimal_comma_is_found_beyond_a_first_row_of_whole_numbers():
    text = csv_bytes("a;b;c;label\n1;0;0;0\n0,25;0,5;0,25;1\n0,1;0,1;0,8;2\n")
    preds = load_predictions(text, format="csv")
    np.testing.assert_allclose(preds.probs, [[1, 0, 0], [0.25, 0.5, 0.25], [0.1, 0.1, 0.8]])
    assert any("decimal comma" in n for n in preds.notes)


def test_quoted_decimal_commas_in_a_comma_separated_file_are_named():
    message = error_of(csv_bytes('p,label\n"0,41",0\n"0,21",1\n"0,8",1\n'))
    must_contain(message, "no score columns", "'p'", "decimal comma", "semicolons")


def test_rows_off_one_name_the_columns_read_as_scores():
    # a feature in [0, 1] next to a binary p is read as a second class score: the sum error says so
    message = error_of(csv_bytes("p,age_scaled,label\n0.3,0.2,0\n0.9,0.7,1\n"))
    must_contain(message, "sum to 0.5", "The score columns are 'p', 'age_scaled'", "score_columns=")


def test_rows_off_by_rounding_alone_do_not_ask_to_name_other_score_columns():
    # audit 4 (f3_sentiment.csv): three probabilities rounded to 3 decimals are the right columns
    message = error_of(csv_bytes("neg,neu,pos,label\n0.33,0.33,0.33,0\n0.2,0.3,0.5,1\n0.1,0.1,0.8,2\n"))
    must_contain(message, "rounded when the file was written", "renormalize=True")
    assert "name the right ones" not in message and "The score columns are" not in message


@pytest.mark.parametrize("header", ["verbalized_confidence", "Model_Confidence", "p_correct"])
def test_confidence_correct_records_under_other_common_confidence_names(header):
    preds = load_predictions(csv_bytes(f"{header},correct\n0.9,1\n0.6,0\n0.7,true\n"), format="csv")
    assert preds.kind == "top_label"
    np.testing.assert_allclose(preds.confidence, [0.9, 0.6, 0.7])
    np.testing.assert_array_equal(preds.correct, [True, False, True])


def test_a_correct_column_without_a_named_confidence_says_so():
    # it used to say "no label column", which is not what is missing
    message = error_of(csv_bytes("certainty,correct\n0.9,1\n0.6,0\n"))
    must_contain(message, "'correct'", "no column is named as its confidence", "rename", "'certainty'")


# ---------------------------------------------------------------- files from the wild: how big a problem is, what cannot be shown


def test_missing_scores_and_labels_are_counted_in_one_message(tmp_path):
    """12 rows without a score and 7 without a label (as /tmp/audit/f9a_missing.csv): the message says
    how many rows miss each, how many in all and the first few rows, not only the first one; nothing is
    dropped on its own."""
    rng = np.random.default_rng(9)
    n = 300
    p, y = rng.uniform(0.05, 0.95, n), rng.integers(0, 2, n).astype(float)
    no_score, no_label = rng.choice(n, 12, replace=False), rng.choice(n, 7, replace=False)
    p[no_score], y[no_label] = np.nan, np.nan
    path = tmp_path / "churn.csv"
    pd.DataFrame({"row": np.arange(n), "p_churn": p, "churn": y, "segment": rng.choice(["A", "B"], n)}).to_csv(
        path, index=False)
    rows = np.union1d(no_score, no_label)
    message = error_of(path)
    must_contain(message, "12 rows without a score (column 'p_churn')", "7 rows without a label (column 'churn')",
                 f"{rows.size} rows in all, of 300 rows", f"rows {', '.join(str(r + 1) for r in rows[:5])} and "
                 f"{rows.size - 5} more (data rows, header excluded)")
    # labels alone, and a top-label file's confidence with its predicted class
    only_labels = pd.DataFrame({"p_churn": rng.uniform(size=n), "churn": y})
    must_contain(error_of(only_labels.to_csv(index=False).encode()), "7 rows without a label (column 'churn')")
    top = pd.DataFrame({"confidence": np.where(np.arange(n) % 50 == 0, np.nan, 0.8), "predicted": ["a", "b"] * 150,
                        "label": ["a"] * 300})
    must_contain(error_of(top.to_csv(index=False).encode()), "6 rows without a confidence (column 'confidence')")


def test_scores_equal_on_every_row_are_said_to_show_nothing_of_how_calibration_varies(tmp_path):
    rng = np.random.default_rng(10)
    path = tmp_path / "constant.csv"
    pd.DataFrame({"p_churn": np.full(300, 0.3), "churn": rng.binomial(1, 0.3, 300)}).to_csv(path, index=False)
    note = [n for n in load_predictions(path).notes if n.startswith("Every row has the same score")]
    assert note == ["Every row has the same score (p(y=1) = 0.3): the file cannot show how calibration varies with "
                    "the score. The reliability diagram has a single bin, the ECE only compares that one score with "
                    "the overall rate, and ranking measures (the AUC) mean nothing. Check that the score column is "
                    "the model's output."]
    multiclass = pd.DataFrame({"a": [0.2] * 4, "b": [0.5] * 4, "c": [0.3] * 4, "label": [0, 1, 2, 1]})
    assert any(n.startswith("Every row has the same score (the same probabilities (0.2, 0.5, 0.3))")
               for n in load_predictions(multiclass.to_csv(index=False).encode(), format="csv").notes)
    varied = pd.DataFrame({"p": [0.3, 0.3, 0.31], "label": [0, 1, 0]})
    assert not any(n.startswith("Every row has the same score")
                   for n in load_predictions(varied.to_csv(index=False).encode(), format="csv").notes)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_true_false_labels_say_which_is_class_1_as_yes_no_labels_do(tmp_path, fmt):
    """True/False labels (read as booleans) beside one score column: the note says 'True' is class 1, as
    it says 'yes' is class 1 for yes/no labels."""
    df = pd.DataFrame({"p": [0.1, 0.8, 0.3, 0.7], "label": [False, True, False, True]})
    path = tmp_path / f"f.{fmt}"
    df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path)
    preds = load_predictions(path)
    assert preds.labels.tolist() == [0, 1, 0, 1]
    assert ("Binary labels: 'True' is class 1 and 'False' class 0; the score column 'p' is read as p(True)."
            in preds.notes)
    yes_no = load_predictions(df.assign(label=df["label"].map({False: "no", True: "yes"})).to_csv(index=False).encode(),
                              format="csv")
    assert "Binary labels: 'yes' is class 1 and 'no' class 0; the score column 'p' is read as p(yes)." in yes_no.notes
