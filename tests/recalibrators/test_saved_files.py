"""Damaged and hostile recalibrator files: each is refused with RecalibratorFileError naming the file.

The shared suite (test_common.py, ``test_every_damaged_field_is_refused``) damages every field of
every method's state in the same generic ways; these are the specific cases of the issue and the
checks that need a value of the right type but the wrong meaning (a negative temperature, unsorted
thresholds, weights that do not sum to 1, a GP whose K_uu has no Cholesky factor).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from pbr_core.recalibrators import (
    BBQ,
    BetaCalibration,
    HistogramBinning,
    IsotonicCalibration,
    Recalibrator,
    RecalibratorFileError,
    TemperatureScaling,
    VectorScaling,
    load_recalibrator,
)
from pbr_core.recalibrators.base import _decode


@pytest.fixture(scope="module")
def logits_labels(small_multiclass):
    return small_multiclass


@pytest.fixture(scope="module")
def temperature_doc(logits_labels) -> dict:
    X, y = logits_labels
    return TemperatureScaling().fit(X, y).to_dict()


def _load(tmp_path, doc_or_text, name: str = "model.json") -> Recalibrator:
    path = tmp_path / name
    if isinstance(doc_or_text, (bytes, str)):
        path.write_bytes(doc_or_text if isinstance(doc_or_text, bytes) else doc_or_text.encode())
    else:
        path.write_text(json.dumps(doc_or_text))
    return load_recalibrator(path)


def _refused(tmp_path, doc_or_text, *fragments: str) -> str:
    """Load must fail with the project's error; the message starts with the path and holds ``fragments``."""
    with pytest.raises(RecalibratorFileError) as info:
        _load(tmp_path, doc_or_text)
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'model.json'}: "), message
    for fragment in fragments:
        assert fragment in message, message
    assert isinstance(info.value, ValueError)  # code that caught ValueError keeps working
    assert info.value.__cause__ is None or not isinstance(info.value.__cause__, RecursionError)
    return message


# ---------------------------------------------------------------------- the cases of the issue
@pytest.mark.parametrize("temperature,shown", [(-1.5, "-1.5"), (0, "0"), (0.0, "0.0"), (-0.0, "-0.0")])
def test_a_temperature_that_is_not_above_zero_is_refused(tmp_path, temperature_doc, temperature, shown):
    doc = {**temperature_doc, "state": {"temperature": temperature}}
    _refused(tmp_path, doc, "Damaged 'temperature' recalibrator file: state.temperature must be a finite number "
                            f"above 0, but the file holds {shown}.")


def test_a_negative_temperature_used_to_load_and_reverse_the_ranking(tmp_path, temperature_doc, logits_labels):
    """What the check prevents: with T = -1.5 softmax(z / T) ranks the classes backwards."""
    X, y = logits_labels
    broken = TemperatureScaling()
    broken.n_classes_, broken.input_type_, broken.temperature_ = 10, "logits", -1.5
    assert (broken.predict_proba(X).argmax(axis=1) == y).mean() < 0.01
    _refused(tmp_path, {**temperature_doc, "state": {"temperature": -1.5}}, "state.temperature")


def test_deeply_nested_json_is_refused_not_a_recursion_error(tmp_path):
    _refused(tmp_path, "[" * 100_000, "not a JSON recalibrator file", "nested too deeply")
    _refused(tmp_path, '{"a":' * 50_000, "nested too deeply")


def test_nesting_that_json_accepts_but_no_recalibrator_has_is_refused(tmp_path, temperature_doc):
    deep: object = 1.0
    for _ in range(200):  # below Python's recursion limit: json.loads accepts it
        deep = {"x": deep}
    _refused(tmp_path, {**temperature_doc, "state": {"temperature": deep}}, "nested more than 64 levels deep")
    _refused(tmp_path, {**temperature_doc, "state": {"temperature": {"__ndarray__": [[[[[[1.0]]]]]] * 2, "dtype":
                                                                      "float64", "shape": [2]}}}, "state.temperature")


@pytest.mark.parametrize("dtype", ["object", "O", "complex128", "<U5", "datetime64[s]", "no-such-dtype", 7, None])
def test_an_array_of_a_non_numeric_or_bogus_dtype_is_refused(tmp_path, logits_labels, dtype):
    X, y = logits_labels
    doc = VectorScaling().fit(X, y).to_dict()
    doc["state"]["scale"]["dtype"] = dtype
    _refused(tmp_path, doc, "state.scale must be an array of numbers, but its dtype is")


@pytest.mark.parametrize("data,shape,fragment", [
    ([1.0] * 9, [10], "holds 9 numbers, but its shape (10,) needs 10"),      # truncated
    ([[1.0, 2.0], [3.0]], [3], "rows differ in length"),                       # ragged
    (["1.0"] * 10, [10], "must hold only numbers, but holds text"),           # numbers as text
    ([1.0] * 9 + [None], [10], "must hold only numbers, but holds null"),     # a hole
    ([1.0] * 9 + [{"a": 1}], [10], "must hold only numbers, but holds a group of fields"),
    ([1.0] * 10, "10", "list of whole numbers"),                                # a shape that is not a list
    ([1.0] * 10, [10.5], "list of whole numbers"),
    ([1.0] * 10, [-10], "list of whole numbers"),
    ([1.0] * 10, [10**12], "needs 1000000000000"),                              # no huge allocation
    (1.0, [10], "holds 1 numbers, but its shape (10,) needs 10"),
    ("abc", [10], "must be a list of numbers, but the file holds the text \"abc\""),
])
def test_a_damaged_array_encoding_is_refused(tmp_path, logits_labels, data, shape, fragment):
    X, y = logits_labels
    doc = VectorScaling().fit(X, y).to_dict()
    doc["state"]["bias"] = {"__ndarray__": data, "dtype": "float64", "shape": shape}
    _refused(tmp_path, doc, "state.bias", fragment)


def test_an_integer_dtype_must_hold_integers(tmp_path):
    with pytest.raises(ValueError, match="has dtype \"int64\" but holds numbers that are not of that type"):
        _decode({"a": {"__ndarray__": [1.5, 2.0], "dtype": "int64", "shape": [2]}})
    np.testing.assert_array_equal(_decode({"__ndarray__": [1, 2], "dtype": "int64", "shape": [2]}), [1, 2])


# ---------------------------------------------------------------------- the format version
@pytest.mark.parametrize("version,fragment", [
    ("1", 'the "format_version" field must be the number 1, but the file holds the text "1"'),
    (True, 'the "format_version" field must be the number 1, but the file holds true'),
    (None, 'the "format_version" field must be the number 1, but the file holds null'),
    (2, "has format version 2, but this version of pbr-calib reads version 1"),
    (1.5, "has format version 1.5, but this version of pbr-calib reads version 1"),
])
def test_the_format_version_message_shows_what_the_file_holds(tmp_path, temperature_doc, version, fragment):
    """It used to say "has format version 1, but ... reads version 1" for the text "1"."""
    message = _refused(tmp_path, {**temperature_doc, "format_version": version}, fragment)
    assert "format version 1, but" not in message


def test_format_version_1_0_is_version_1(tmp_path, temperature_doc):
    # JSON does not distinguish 1 from 1.0 (a tool that rewrites the file may write either).
    assert _load(tmp_path, {**temperature_doc, "format_version": 1.0}).to_dict() == temperature_doc


def test_a_missing_format_version_is_named(tmp_path, temperature_doc):
    doc = {k: v for k, v in temperature_doc.items() if k != "format_version"}
    _refused(tmp_path, doc, 'the file has no "format_version" field')


# ---------------------------------------------------------------------- the envelope
@pytest.mark.parametrize("change,fragment", [
    ({"method": ["temperature"]}, 'the "method" field must name a recalibration method, but the file holds a list'),
    ({"method": None}, 'the "method" field must name a recalibration method, but the file holds null'),
    ({"method": "nope"}, "Unknown recalibration method 'nope' in file; known: ["),
    ({"n_classes": 1}, "n_classes must be a finite number of at least 2, but the file holds 1"),
    ({"n_classes": 10.5}, "n_classes must be a whole number, but the file holds 10.5"),
    ({"n_classes": "10"}, 'n_classes must be a number, but the file holds the text "10"'),
    ({"n_classes": 10.0}, "n_classes must be a whole number written without a decimal point (10, as pbr-calib "
                          "writes it), but the file holds 10.0"),
    ({"note": "hi"}, 'the file holds a field named "note", which a recalibrator file does not have'),
    ({"input_type": "auto"}, 'input_type must be one of "probabilities", "logits", but the file holds the text "auto"'),
    ({"params": {"min_temperature": -1.0}}, "its parameters are invalid: Expected 0 < `min_temperature`"),
    ({"params": {"min_temperature": "small"}}, "its parameters are invalid: Expected 0 < `min_temperature`"),
    ({"params": {"temperature": 2.0}}, "params holds ['temperature'], which TemperatureScaling does not take"),
    ({"params": [1, 2]}, "params must be a group of named fields, but the file holds a list of 2 items"),
    ({"state": {"temperature": True}}, "state.temperature must be a number, but the file holds true"),
    ({"state": {}}, 'state has no "temperature" field'),
    ({"class_names": ["a", "b"]}, '"class_names" must be 10 distinct names'),
    ({"class_names": "abc"}, '"class_names" must be 10 distinct names'),
])
def test_the_envelope_is_checked(tmp_path, temperature_doc, change, fragment):
    _refused(tmp_path, {**temperature_doc, **change}, fragment)


def test_not_an_object_or_not_json_at_all(tmp_path, temperature_doc):
    _refused(tmp_path, "[1, 2]", "Not a pbr-calib recalibrator file")
    _refused(tmp_path, json.dumps(temperature_doc)[:-20], "not a JSON recalibrator file")  # a truncated download
    _refused(tmp_path, b"\xff\xfe\x00garbage", "not a JSON recalibrator file")
    _refused(tmp_path, "1" * 5000, "not a JSON recalibrator file")  # int() refuses > 4300 digits


def test_a_utf8_byte_order_mark_is_accepted(tmp_path, temperature_doc):
    assert _load(tmp_path, b"\xef\xbb\xbf" + json.dumps(temperature_doc).encode()).to_dict() == temperature_doc


def test_from_dict_and_loads_name_their_source(temperature_doc):
    bad = {**temperature_doc, "state": {"temperature": -1.0}}
    with pytest.raises(RecalibratorFileError, match=r"^upload\.json: Damaged"):
        Recalibrator.loads(json.dumps(bad), source="upload.json")
    with pytest.raises(RecalibratorFileError, match=r"^recalibrator data: Damaged"):
        Recalibrator.from_dict(bad)


# ---------------------------------------------------------------------- per-family meaning
@pytest.fixture(scope="module")
def binary(small_binary):
    return small_binary


def test_beta_coefficients_a_and_b_must_not_be_negative(tmp_path, binary):
    doc = BetaCalibration().fit(*binary).to_dict()
    doc["state"]["maps"][0]["b"] = -0.5
    _refused(tmp_path, doc, "state.maps[0].b must be a finite number of at least 0, but the file holds -0.5")


def test_isotonic_thresholds_must_be_sorted_probabilities_of_equal_length(tmp_path, binary):
    doc = IsotonicCalibration().fit(*binary).to_dict()
    m = doc["state"]["maps"][0]
    y = m["y_thresholds"]["__ndarray__"]
    _refused(tmp_path, _with_map(doc, y_thresholds=_enc(y[::-1])), "state.maps[0].y_thresholds must be sorted")
    _refused(tmp_path, _with_map(doc, y_thresholds=_enc([1.5] * len(y))),
             "state.maps[0].y_thresholds must hold finite numbers between 0 and 1, but holds 1.5 at position 0")
    _refused(tmp_path, _with_map(doc, y_thresholds=_enc(y[:-1])),
             f"state.maps[0].y_thresholds must have {len(y)} entries (the length of state.maps[0].X_thresholds)")
    _refused(tmp_path, _with_map(doc, X_thresholds=_enc([]), y_thresholds=_enc([])),
             "state.maps[0].X_thresholds must hold at least 1 number, but is empty")


def test_histogram_values_are_probabilities_one_per_bin(tmp_path, binary):
    doc = HistogramBinning(n_bins=5).fit(*binary).to_dict()
    _refused(tmp_path, _with_map(doc, values=_enc([0.1, 0.2, -0.3, 0.4, 0.5])),
             "state.maps[0].values must hold finite numbers between 0 and 1, but holds -0.3 at position 2")
    _refused(tmp_path, _with_map(doc, edges=_enc([0.2, 0.4, 0.6, 1.2])), "state.maps[0].edges must hold finite numbers")
    multiclass = {**doc, "n_classes": 3, "params": {**doc["params"], "multiclass": "one_vs_all"}}
    _refused(tmp_path, multiclass, "state.maps must be a list of 3 maps (one per class), but the file holds a list of 1 item")
    two = {**doc, "n_classes": 3, "state": {"maps": doc["state"]["maps"] * 2}}  # top-label: one map
    _refused(tmp_path, two, "state.maps must be a list of 1 map (of the top label's probability)")


def test_bbq_weights_must_sum_to_one_and_bin_counts_be_whole(tmp_path, binary):
    doc = BBQ().fit(*binary).to_dict()
    m = doc["state"]["maps"][0]
    w = np.asarray(m["weights"]["__ndarray__"])
    _refused(tmp_path, _with_map(doc, weights=_enc((w * 0.5).tolist())), "state.maps[0].weights must sum to 1")
    bins = np.asarray(m["n_bins"]["__ndarray__"])
    _refused(tmp_path, _with_map(doc, n_bins=_enc((bins + 0.5).tolist())), "state.maps[0].n_bins must hold whole numbers")


def _enc(values: list) -> dict:
    return {"__ndarray__": list(values), "dtype": "float64", "shape": [len(values)]}


def _with_map(doc: dict, **fields) -> dict:
    maps = [dict(m) for m in doc["state"]["maps"]]
    maps[0].update(fields)
    return {**doc, "state": {**doc["state"], "maps": maps}}


# ---------------------------------------------------------------------- the GP family
@pytest.fixture(scope="module")
def gp_doc(small_multiclass) -> dict:
    from pbr_core.recalibrators.gp import PBR

    X, y = small_multiclass
    return PBR(max_iter=5, n_mc=5, n_predict_samples=5, random_state=0).fit(X[:200], y[:200]).to_dict()


def _with_gp(doc: dict, **params) -> dict:
    gp = {**doc["state"]["gp"]}
    for name, value in params.items():
        gp[name] = {**gp[name], "__ndarray__": value}
    return {**doc, "state": {**doc["state"], "gp": gp}}


RAW_NOISE = "covar_module.kernels.1.raw_noise"
RAW_SCALE = "covar_module.kernels.0.raw_outputscale"
INDUCING = "variational_strategy.inducing_points"


def test_gp_hyperparameters_must_come_out_positive(tmp_path, gp_doc):
    _refused(tmp_path, _with_gp(gp_doc, **{RAW_SCALE: -1000.0}),
             f"state.gp.{RAW_SCALE} makes the GP's outputscale 0.0, but it must be a finite number above 0")


def test_a_gp_whose_inducing_covariance_has_no_cholesky_factor_is_refused(tmp_path, gp_doc):
    m = len(gp_doc["state"]["gp"][INDUCING]["__ndarray__"])
    same_points = {INDUCING: [[0.5]] * m, RAW_NOISE: [-700.0]}  # K_uu = s^2 11^T + ~1e-304 I
    doc = _with_gp(gp_doc, **same_points)
    doc["state"]["jitter"] = 1e-300
    _refused(tmp_path, doc, "give an inducing-point covariance that is not positive definite")


def test_gp_parameters_missing_or_extra_and_kinds_that_disagree(tmp_path, gp_doc):
    gp = {k: v for k, v in gp_doc["state"]["gp"].items() if k != RAW_NOISE}
    _refused(tmp_path, {**gp_doc, "state": {**gp_doc["state"], "gp": gp}},
             f"state.gp must hold the parameters of a mean_field GP, but lacks ['{RAW_NOISE}']")
    _refused(tmp_path, {**gp_doc, "params": {**gp_doc["params"], "variational": "cholesky"}},
             "state.gp must hold the parameters of a cholesky GP")
    _refused(tmp_path, {**gp_doc, "input_type": "probabilities"},
             'state.input_kind is "logits", but a GP fitted on probabilities')
    _refused(tmp_path, {**gp_doc, "state": {**gp_doc["state"], "kl": -0.5}}, "state.kl must be a KL divergence")
    report = {**gp_doc["state"]["fit_report"], "warnings": "none"}
    _refused(tmp_path, {**gp_doc, "state": {**gp_doc["state"], "fit_report": report}},
             "state.fit_report.warnings must be a list of texts")


def test_a_gp_fitted_on_a_gpu_still_loads_on_a_cpu_machine(tmp_path, gp_doc):
    """Parameters are checked for their values, not for this machine: device="cuda" is no damage."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA")
    doc = {**gp_doc, "params": {**gp_doc["params"], "device": "cuda"}}
    assert _load(tmp_path, doc).device == "cuda"
    _refused(tmp_path, {**gp_doc, "params": {**gp_doc["params"], "device": "tpu"}},
             "params.device must be 'auto', 'cpu', 'cuda' or 'cuda:N', but the file holds the text \"tpu\"")


# ---------------------------------------------------------------------- classes matched by name
def _named(z, y, names):
    from pbr_core.predictions import Predictions

    return Predictions.from_arrays(z, y, input_type="logits", class_names=names)


def test_a_file_whose_class_columns_come_in_another_order_gets_each_class_its_own_parameters(tmp_path):
    """A vector-scaling fit saved and applied to the same predictions with the class columns in
    another order gave each class another class's scale (ECE .0195 became .0468 on a file in the
    wild): the saved file now names the classes, and prediction matches them by name."""
    rng = np.random.default_rng(3)
    z = rng.normal(0, 2, size=(300, 3)) * np.array([3.0, 1.0, 0.5])
    y = np.array([rng.choice(3, p=np.exp(r) / np.exp(r).sum()) for r in z / 2])
    names = ("zebra", "apple", "mango")
    rec = VectorScaling().fit(_named(z, y, names))
    path = rec.save(tmp_path / "vs.json")
    assert json.loads(path.read_text())["class_names"] == list(names)
    loaded = load_recalibrator(path)
    assert loaded.class_names_ == names
    order = [2, 0, 1]  # mango, zebra, apple
    inv = np.argsort(order)
    same = loaded.predict_proba(_named(z, y, names))
    moved = loaded.predict_proba(_named(z[:, order], inv[y], tuple(names[i] for i in order)))
    np.testing.assert_allclose(moved, same[:, order], rtol=0, atol=1e-12)
    # by position (what it did) the classes' probabilities differ
    assert np.abs(loaded.predict_proba(z[:, order], input_type="logits") - same[:, order]).max() > 0.05
    with pytest.raises(ValueError, match=r"name the classes \['zebra', 'apple', 'pear'\].*fitted on"):
        loaded.predict_proba(_named(z, y, ("zebra", "apple", "pear")))


def test_class_names_that_differ_only_in_case_are_the_same_classes(tmp_path):
    """Audit 10a: a recalibrator fitted on 'no' / 'yes' applied to 0/1 labels (by position) but refused
    'NO' / 'YES'. Names equal but for case are matched, in any order, with a warning; names that
    case-folding would merge ('a' and 'A' as two classes) are never matched this way."""
    import warnings

    from pbr_core.recalibrators.base import case_matched

    rng = np.random.default_rng(4)
    z = rng.normal(0, 2, size=(300, 3)) * np.array([3.0, 1.0, 0.5])
    y = np.array([rng.choice(3, p=np.exp(r) / np.exp(r).sum()) for r in z / 2])
    names = ("zebra", "apple", "mango")
    loaded = load_recalibrator(VectorScaling().fit(_named(z, y, names)).save(tmp_path / "vs.json"))
    same = loaded.predict_proba(_named(z, y, names))
    order = [2, 0, 1]
    shouted = _named(z[:, order], np.argsort(order)[y], ("MANGO", "Zebra", "APPLE"))
    assert loaded.classes_matched_by_case(shouted) == {"MANGO": "mango", "Zebra": "zebra", "APPLE": "apple"}
    assert loaded.classes_matched_by_case(_named(z, y, names)) is None
    with pytest.warns(UserWarning, match=r"name the classes \['MANGO', 'Zebra', 'APPLE'\] and the recalibrator was "
                                         r"fitted on \['zebra', 'apple', 'mango'\]: matched ignoring case \('MANGO' as "
                                         r"'mango', 'Zebra' as 'zebra', 'APPLE' as 'apple'\)"):
        moved = loaded.predict_proba(shouted)
    np.testing.assert_allclose(moved, same[:, order], rtol=0, atol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded.predict_proba(_named(z, y, names))   # the same names: no warning
    with pytest.raises(ValueError, match="name the classes"):
        loaded.predict_proba(_named(z, y, ("ZEBRA", "APPLE", "pear")))
    assert case_matched(("A", "b"), ("a", "A")) is None and case_matched(("a", "A"), ("a", "b")) is None
    assert case_matched(("NO", "YES"), ("no", "yes")) == {"NO": "no", "YES": "yes"}


def test_apply_matches_labels_that_differ_only_in_case(tmp_path, capsys):
    """The CLI end to end (audit 10a's churn files): fitted on no/yes, applied to NO/YES, the same
    probabilities as on no/yes, one warning."""
    from pbr_core.cli import main

    rng = np.random.default_rng(0)
    p = rng.uniform(0.02, 0.98, 1200)
    churn = np.where(rng.uniform(size=1200) < p ** 1.5, "yes", "no")
    frame = pd.DataFrame({"p_churn": p, "churn": churn})
    frame.iloc[:600].to_csv(tmp_path / "fit.csv", index=False)
    frame.iloc[600:].to_csv(tmp_path / "lower.csv", index=False)
    frame.iloc[600:].assign(churn=lambda f: f["churn"].str.upper()).to_csv(tmp_path / "upper.csv", index=False)
    assert main(["fit", str(tmp_path / "fit.csv"), "--method", "platt", "--out", str(tmp_path / "m.json"),
                 "--quiet"]) == 0
    capsys.readouterr()
    assert main(["apply", str(tmp_path / "m.json"), str(tmp_path / "lower.csv"), "--out", str(tmp_path / "a.csv")]) == 0
    lower = capsys.readouterr()
    assert main(["apply", str(tmp_path / "m.json"), str(tmp_path / "upper.csv"), "--out", str(tmp_path / "b.csv")]) == 0
    upper = capsys.readouterr()
    assert upper.out.splitlines()[0].replace("upper.csv", "lower.csv") == lower.out.splitlines()[0]   # the same ECEs
    assert upper.err.count("matched ignoring case ('NO' as 'no', 'YES' as 'yes')") == 1
    np.testing.assert_array_equal(pd.read_csv(tmp_path / "a.csv")["p_churn"], pd.read_csv(tmp_path / "b.csv")["p_churn"])


def test_files_without_class_names_and_unnamed_data_are_matched_by_position(tmp_path, logits_labels):
    X, y = logits_labels
    rec = TemperatureScaling().fit(X, y)  # arrays: classes "0".."K-1", no names to save
    doc = rec.to_dict()
    assert doc["class_names"] is None
    old = {k: v for k, v in doc.items() if k != "class_names"}  # a file from before the field
    loaded = _load(tmp_path, old)
    assert loaded.class_names_ is None
    np.testing.assert_allclose(loaded.predict_proba(X), rec.predict_proba(X))


# ---------------------------------------------------------------------- work a file may demand (issue 34)
def test_a_gp_file_demanding_1e8_prediction_draws_is_refused_before_any_work(tmp_path, gp_doc):
    """The issue's file: n_predict_samples = 10**8 took 63 s and 15.7 GB to predict ONE row."""
    from pbr_core.recalibrators._params import MAX_PREDICT_SAMPLES

    doc = {**gp_doc, "params": {**gp_doc["params"], "n_predict_samples": 10**8}}
    _refused(tmp_path, doc, f"params.n_predict_samples must be an integer from 1 to {MAX_PREDICT_SAMPLES}, but the "
                            "file holds 100000000.")
    at_bound = _load(tmp_path, {**gp_doc, "params": {**gp_doc["params"], "n_predict_samples": MAX_PREDICT_SAMPLES}})
    assert at_bound.n_predict_samples == MAX_PREDICT_SAMPLES


@pytest.mark.parametrize("name,value,fragment", [
    ("n_inducing", 10**6, "params.n_inducing must be an integer from 1 to 1000, but the file holds 1000000"),
    ("max_iter", 10**9, "params.max_iter must be an integer from 1 to 100000"),
    ("n_mc", 10**7, "params.n_mc must be an integer from 1 to 10000 or 'auto'"),
    ("mc_classes", 10**9, "params.mc_classes must be an integer from 2 to 1000000, 'auto' or 'all'"),
    ("n_predict_samples", 1e3, "params.n_predict_samples must be an integer from 1 to 10000, but the file holds 1000.0"),
])
def test_size_parameters_of_a_gp_file_are_bounded(tmp_path, gp_doc, name, value, fragment):
    _refused(tmp_path, {**gp_doc, "params": {**gp_doc["params"], name: value}}, fragment)


def test_histogram_bins_and_scaling_iterations_are_bounded(tmp_path, binary, logits_labels):
    doc = HistogramBinning(n_bins=5).fit(*binary).to_dict()
    _refused(tmp_path, {**doc, "params": {**doc["params"], "n_bins": 10**9}}, "params.n_bins must be an integer from 1 to 10000 or None")
    doc = VectorScaling().fit(*logits_labels).to_dict()
    _refused(tmp_path, {**doc, "params": {**doc["params"], "max_iter": 10**9}}, "params.max_iter must be an integer from 1 to 100000")


def test_inducing_points_must_be_as_many_as_params_n_inducing(tmp_path, gp_doc):
    """K_uu is M x M: M comes from params.n_inducing (bounded), never from the array's length alone."""
    zu = gp_doc["state"]["gp"][INDUCING]
    grown = {**zu, "__ndarray__": zu["__ndarray__"] + [[9.0]], "shape": [len(zu["__ndarray__"]) + 1, 1]}
    doc = {**gp_doc, "state": {**gp_doc["state"], "gp": {**gp_doc["state"]["gp"], INDUCING: grown}}}
    _refused(tmp_path, doc, f"state.gp.{INDUCING} must have shape (10, 1) (params.n_inducing is 10), but has shape (11, 1)")


STDDEV = "variational_strategy._variational_distribution._variational_stddev"
CHOLESKY = "variational_strategy._variational_distribution.chol_variational_covar"


@pytest.mark.parametrize("bad", [-0.5, 0.0])
def test_a_variational_standard_deviation_at_or_below_zero_is_refused(tmp_path, gp_doc, bad):
    s = list(gp_doc["state"]["gp"][STDDEV]["__ndarray__"])
    s[3] = bad
    _refused(tmp_path, _with_gp(gp_doc, **{STDDEV: s}),
             f"state.gp.{STDDEV} must hold numbers above 0 (the variational standard deviations, which pbr-calib "
             f"saves positive), but holds {bad!r}")


def test_a_fit_whose_scales_came_out_negative_saves_them_positive_and_predicts_the_same(tmp_path, small_multiclass):
    """q depends on s^2 (mean field) and C C^T (Cholesky) only: an unconstrained optimiser may end with a
    negative s or diagonal of C. The saved file holds them positive, and predicts bit for bit the same."""
    import torch

    from pbr_core.recalibrators.gp import PBR

    X, y = small_multiclass
    for variational, name in (("mean_field", STDDEV), ("cholesky", CHOLESKY)):
        rec = PBR(max_iter=5, n_mc=5, n_predict_samples=5, random_state=0, variational=variational).fit(X[:200], y[:200])
        dist = rec.model_.variational_strategy._variational_distribution
        with torch.no_grad():
            if variational == "mean_field":
                dist._variational_stddev[:4].neg_()
            else:
                dist.chol_variational_covar[:, 1].neg_()  # column 1: its diagonal entry turns negative
        before = rec.predict_proba(X[200:260])
        saved = rec.to_dict()["state"]["gp"][name]["__ndarray__"]
        diagonal = np.diagonal(np.asarray(saved)) if variational == "cholesky" else np.asarray(saved)
        assert (diagonal > 0).all()
        loaded = load_recalibrator(rec.save(tmp_path / f"{variational}.json"))
        np.testing.assert_array_equal(loaded.predict_proba(X[200:260]), before)
        if variational == "cholesky":
            c = np.asarray(saved)
            c[2, 2] = -c[2, 2]
            doc = _with_gp(rec.to_dict(), **{CHOLESKY: c.tolist()})
            _refused(tmp_path, doc, f"state.gp.{CHOLESKY} must hold numbers above 0 (the variational Cholesky "
                                    "factor's diagonal")


@pytest.mark.parametrize("change,fragment", [
    ({"device": "x" * 65}, "state.fit_report.device must name a device in at most 64 characters"),
    ({"stop_reason": "y" * 2001}, "state.fit_report.stop_reason must be a text of at most 2,000 characters, but holds 2,001"),
    ({"warnings": ["z" * 5000]}, "state.fit_report.warnings[0] must be a text of at most 2,000 characters"),
    ({"prior": {"a": {"b": {"c": 1}}}}, "state.fit_report.prior.a.b nests deeper than a record of a fit does"),
    ({"iterations": 60.0}, "state.fit_report.iterations must be a whole number written without a decimal point"),
])
def test_the_fit_report_is_a_record_of_bounded_texts(tmp_path, gp_doc, change, fragment):
    report = {**gp_doc["state"]["fit_report"], **change}
    _refused(tmp_path, {**gp_doc, "state": {**gp_doc["state"], "fit_report": report}}, fragment)


def test_markup_in_the_fit_report_is_the_pages_business_not_damage(tmp_path, gp_doc):
    """A device name with markdown loads (it is text); the dashboard shows it as text (tests/dashboard)."""
    report = {**gp_doc["state"]["fit_report"], "device": "![x](http://127.0.0.1:9/x.png)"}
    assert _load(tmp_path, {**gp_doc, "state": {**gp_doc["state"], "fit_report": report}}).fit_report_["device"] \
        == "![x](http://127.0.0.1:9/x.png)"


@pytest.mark.parametrize("name,value,fragment", [
    ("n", float("inf"), "state.bounds.n must be a finite number of at least 0, but the file holds infinity"),
    ("n", 300.5, "state.bounds.n must be a whole number"),
    ("corollary1", float("nan"), "state.bounds.corollary1 must be a finite number, but the file holds NaN"),
    ("kl", float("-inf"), "state.bounds.kl must be a finite number"),
])
def test_the_bounds_record_holds_finite_numbers_and_whole_counts(tmp_path, gp_doc, name, value, fragment):
    """The Fit & apply page reads bounds.n as the rows a saved GP was fitted on: int(inf) crashed it."""
    doc = {**gp_doc, "state": {**gp_doc["state"], "bounds": {**gp_doc["state"]["bounds"], name: value}}}
    _refused(tmp_path, doc, fragment)


# ---------------------------------------------------------------------- files that are not files, or too large
def test_a_fifo_a_device_or_a_folder_is_refused_without_reading(tmp_path):
    """/dev/zero would be read forever and a FIFO would block the reader: both are refused on sight."""
    import os

    os.mkfifo(tmp_path / "fifo.json")
    for path in ("/dev/zero", tmp_path / "fifo.json", tmp_path):
        with pytest.raises(RecalibratorFileError, match="not a regular file; a recalibrator is a JSON file"):
            load_recalibrator(path)


def test_a_file_over_the_size_bound_is_refused_before_it_is_parsed(tmp_path, temperature_doc, monkeypatch):
    from pbr_core.recalibrators import base

    text = json.dumps(temperature_doc)
    monkeypatch.setattr(base, "MAX_FILE_BYTES", len(text) - 1)  # the bound scaled to this small file
    path = tmp_path / "big.json"
    path.write_text(text)
    for load in (lambda: load_recalibrator(path), lambda: Recalibrator.loads(text.encode(), source="big.json")):
        with pytest.raises(RecalibratorFileError, match="larger than 0 MiB; a recalibrator file written by pbr-calib"):
            load()
    monkeypatch.setattr(base, "MAX_FILE_BYTES", len(text))
    assert load_recalibrator(path).to_dict() == temperature_doc
