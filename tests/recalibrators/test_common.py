"""The one test suite every registered recalibrator must pass.

It is parametrised over ``available_methods()``, i.e. over the registry, so a recalibrator joins
by being registered (``@register``) and imported by ``pbr_core.recalibrators``: the GP family
(``pbr_core/recalibrators/gp.py``) needs nothing here. Hooks for a new method:

* ``Recalibrator._test_params()`` (a classmethod) returns parameters for a quick fit;
* ``SLOW`` marks methods whose fits take seconds (``pytest -m "not slow"`` skips them);
* ``ECE_EXPECTATIONS`` says what the test ECE on each real data set must do. A method that is not
  listed must lower the test ECE on the two CIFAR sets (the DenseNet-121 on CIFAR-100 is
  over-confident) and makes no claim on the binary set.

A method with a ``random_state`` parameter is built with ``random_state=0``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Literal

import numpy as np
import pytest

import pbr_core
from pbr_core import Predictions, PredictionsError
from pbr_core.recalibrators import (
    FORMAT_VERSION,
    REGISTRY,
    NotFittedError,
    Recalibrator,
    RecalibratorFileError,
    available_methods,
    get_recalibrator,
    load_recalibrator,
)

Expect = Literal["drops", "unchanged"]

# Platt and beta warn (by design) when targets="auto" falls back to Platt's targets for a class.
pytestmark = [
    pytest.mark.filterwarnings("ignore:.*perfectly separated by p:RuntimeWarning"),
]

#: The binary set the ``binary_split`` fixture serves (see conftest.py).
SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data"
BINARY_NAME = "kitti_rf" if (SAMPLE_DATA / "kitti_random_forest.csv").exists() else "cifar10_correct"

#: Methods whose fits take seconds; their tests carry the ``slow`` mark.
SLOW: set[str] = set()

_OVERFITS = None  # 2K or K^2 + K parameters from ~10 samples per class (K = 100, n = 1000)

#: What the test ECE must do on each data set ("drops": below the uncalibrated ECE; "unchanged":
#: probabilities equal to the input; None: no claim, for the reason in the comment above).
ECE_EXPECTATIONS: dict[str, dict[str, Expect | None]] = {
    "uncalibrated": {"cifar100": "unchanged", "cifar10": "unchanged", "kitti_rf": "unchanged",
                     "cifar10_correct": "unchanged"},
    "temperature": {"cifar100": "drops", "cifar10": "drops", "kitti_rf": "drops", "cifar10_correct": "drops"},
    "vector_scaling": {"cifar100": _OVERFITS, "cifar10": "drops", "kitti_rf": "drops", "cifar10_correct": "drops"},
    "matrix_scaling": {"cifar100": _OVERFITS, "cifar10": "drops", "kitti_rf": "drops", "cifar10_correct": "drops"},
    "platt": {"cifar100": "drops", "cifar10": "drops", "kitti_rf": "drops", "cifar10_correct": "drops"},
    # (multiclass data: one top-label map by default, which 1000 rows feed well; one-vs-all would starve)
    "isotonic": {"cifar100": "drops", "cifar10": "drops", "kitti_rf": "drops", "cifar10_correct": "drops"},
    "histogram_binning": {"cifar100": "drops", "cifar10": "drops", "kitti_rf": "drops", "cifar10_correct": "drops"},
    "beta": {"cifar100": "drops", "cifar10": "drops", "kitti_rf": "drops", "cifar10_correct": "drops"},
    "bbq": {"cifar100": "drops", "cifar10": "drops", "kitti_rf": "drops", "cifar10_correct": "drops"},
    # top-label by default (one predictor on the confidence); one-vs-all, the p1 / (1 - p0 + p1) of ~10 positives
    # per class raised CIFAR-10's test ECE (.0265 -> .0408 on 1000 rows) and starved CIFAR-100
    "venn_abers": {"cifar100": "drops", "cifar10": "drops", "kitti_rf": "drops", "cifar10_correct": "drops"},
    "venn_abers_cross": {"cifar100": "drops", "cifar10": "drops", "kitti_rf": "drops", "cifar10_correct": "drops"},
    "dirichlet": {"cifar100": _OVERFITS, "cifar10": "drops", "kitti_rf": "drops", "cifar10_correct": "drops"},
}
DEFAULT_EXPECTATIONS: dict[str, Expect | None] = {"cifar100": "drops", "cifar10": "drops"}

METHODS = available_methods()


def _param(method: str, *rest: object) -> pytest.param:
    marks = [pytest.mark.slow] if method in SLOW else []
    return pytest.param(method, *rest, marks=marks, id="-".join([method, *map(str, rest)]))


def methods() -> list:
    return [_param(m) for m in METHODS]


def methods_x(*values: str) -> list:
    return [_param(m, v) for m in METHODS for v in values]


#: ``PBR_TEST_GP_PROB_INPUT=log`` (or ``wenger``, the default) runs the whole suite with that GP
#: model on probability inputs (the ``prob_input`` parameter; the binary cases feed probabilities).
GP_PROB_INPUT = os.environ.get("PBR_TEST_GP_PROB_INPUT")


def make(method: str) -> Recalibrator:
    """A fresh recalibrator with its quick test parameters (and a fixed seed where it has one)."""
    cls = REGISTRY[method]
    params = dict(cls._test_params())
    if "random_state" in cls._param_names():
        params.setdefault("random_state", 0)
    if GP_PROB_INPUT and "prob_input" in cls._param_names():
        params["prob_input"] = GP_PROB_INPUT
    return cls(**params)


def data(kind: str, small_multiclass, small_binary) -> tuple[np.ndarray, np.ndarray]:
    return small_multiclass if kind == "multiclass" else small_binary


_FITTED: dict[tuple[str, str], Recalibrator] = {}


@pytest.fixture
def fitted(small_multiclass, small_binary):
    """``fitted(method, kind)``: one recalibrator per (method, kind) fitted on the small data and
    shared by the tests that only read it (GP fits take seconds)."""

    def get(method: str, kind: str) -> Recalibrator:
        key = (method, kind)
        if key not in _FITTED:
            X, y = data(kind, small_multiclass, small_binary)
            rec = make(method)
            assert rec.fit(X, y) is rec and rec.is_fitted
            _FITTED[key] = rec
        return _FITTED[key]

    return get


# ---------------------------------------------------------------------- interface


@pytest.mark.parametrize("method", methods())
def test_registry_factory_and_params(method: str) -> None:
    cls = REGISTRY[method]
    assert cls.method == method
    rec = get_recalibrator(method)
    assert type(rec) is cls and not rec.is_fitted
    params = rec.get_params()
    assert list(params) == cls._param_names()
    assert rec.set_params(**params) is rec and rec.get_params() == params
    assert repr(rec).startswith(cls.__name__ + "(")
    with pytest.raises(ValueError, match="Invalid parameter"):
        rec.set_params(no_such_parameter=1)
    with pytest.raises(ValueError, match="Invalid parameter"):
        get_recalibrator(method, no_such_parameter=1)
    assert cls.__doc__ and "References" in cls.__doc__ or method == "uncalibrated"


def test_unknown_method_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="Unknown recalibration method 'nope'. Available methods:"):
        get_recalibrator("nope")


@pytest.mark.parametrize("method,kind", methods_x("multiclass", "binary"))
def test_predictions_are_probabilities(method: str, kind: str, fitted, small_multiclass, small_binary) -> None:
    X, y = data(kind, small_multiclass, small_binary)
    P = fitted(method, kind).predict_proba(X[100:])
    K = 2 if kind == "binary" else X.shape[1]
    assert P.shape == (X.shape[0] - 100, K) and P.dtype == np.float64
    assert np.all(np.isfinite(P))
    assert np.all((P >= 0) & (P <= 1))
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-9)


@pytest.mark.parametrize("method,kind", methods_x("multiclass", "binary"))
def test_predictions_value_and_arrays_agree(method: str, kind: str, fitted, small_multiclass, small_binary) -> None:
    X, y = data(kind, small_multiclass, small_binary)
    X_before = X.copy()
    a = fitted(method, kind).predict_proba(X)  # fitted on the arrays (X, y)
    preds = Predictions.from_arrays(X, y)
    b = make(method).fit(preds).predict_proba(preds)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(X, X_before)  # inputs are not modified


CIFAR10_NAMES = ["plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


@pytest.mark.parametrize("method", methods())
def test_a_dataframe_is_matched_by_its_column_names(method: str, small_multiclass) -> None:
    # audit 10a finding 3: a DataFrame whose headers name the classes in another order was read by position
    import pandas as pd

    X, y = small_multiclass[0][200:], small_multiclass[1]
    # fitted on other rows: a step map (Venn-Abers, binning) evaluated at its own fit scores jumps on
    # a 1-ulp difference of the softmax taken in another column order
    rec = make(method).fit(Predictions.from_arrays(small_multiclass[0][:200], y[:200], class_names=CIFAR10_NAMES))
    expected = rec.predict_proba(X)   # an array: by position, in the fit's order
    shuffled = CIFAR10_NAMES[::-1]
    frame = pd.DataFrame(X, columns=CIFAR10_NAMES)[shuffled]
    # by name, in the frame's order (equal up to the float rounding of sums taken in another order)
    np.testing.assert_allclose(rec.predict_proba(frame), expected[:, ::-1], rtol=1e-9, atol=1e-15)
    prefixed = frame.rename(columns=lambda c: f"p_{c}")   # as the file loader reads p_cat
    np.testing.assert_allclose(rec.predict_proba(prefixed), expected[:, ::-1], rtol=1e-9, atol=1e-15)
    np.testing.assert_array_equal(rec.predict_proba(pd.DataFrame(X)), expected)   # headers 0..9: by position
    other = pd.DataFrame(X, columns=[f"k{j}" for j in range(10)])
    with pytest.raises(ValueError, match=r"The columns of X are named \['k0'.*fitted on the classes \['plane'"):
        rec.predict_proba(other)
    # fitted on a DataFrame: its headers are the classes (without a shared p_ prefix), matched later
    on_frame = make(method).fit(pd.DataFrame(small_multiclass[0][:200], columns=[f"p_{c}" for c in CIFAR10_NAMES]),
                                y[:200])
    assert on_frame.class_names_ == tuple(CIFAR10_NAMES)
    np.testing.assert_allclose(on_frame.predict_proba(frame), expected[:, ::-1], rtol=1e-9, atol=1e-15)
    assert make(method).fit(pd.DataFrame(small_multiclass[0][:200]), y[:200]).class_names_ is None   # 0..9
    if hasattr(rec, "predict_interval"):
        low, high = rec.predict_interval(frame)
        np.testing.assert_allclose(low, rec.predict_interval(X)[0][:, ::-1], rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("method,kind", methods_x("multiclass", "binary"))
def test_save_load_round_trip_is_exact(method: str, kind: str, fitted, small_multiclass, small_binary, tmp_path) -> None:
    X, y = data(kind, small_multiclass, small_binary)
    rec = fitted(method, kind)
    path = rec.save(tmp_path / "model.json")
    doc = json.loads(path.read_text())
    assert doc["format"] == "pbr-calib-recalibrator" and doc["format_version"] == FORMAT_VERSION
    assert doc["method"] == method and doc["n_classes"] == rec.n_classes_
    json.dumps(rec.to_dict(), allow_nan=False)  # strict JSON: no NaN or infinity in the state
    for loaded in (load_recalibrator(path), type(rec).load(path), Recalibrator.from_dict(doc)):
        assert type(loaded) is type(rec)
        assert _comparable(loaded.get_params()) == _comparable(rec.get_params())
        np.testing.assert_array_equal(loaded.predict_proba(X), rec.predict_proba(X))
        assert loaded.to_dict() == rec.to_dict()


def _comparable(params: dict) -> dict:
    """Parameters to compare: a wrapped estimator (PBRCV's) by its class and its own parameters."""
    return {k: (type(v), v.get_params()) if hasattr(v, "get_params") else v for k, v in params.items()}


@pytest.mark.parametrize("method", methods())
def test_loading_another_method_or_version_fails_clearly(method: str, fitted, tmp_path) -> None:
    doc = fitted(method, "multiclass").to_dict()
    other = next(m for m in METHODS if m != method)
    with pytest.raises(RecalibratorFileError, match=f"holds a '{other}' recalibrator"):
        type(make(method)).from_dict({**doc, "method": other})
    with pytest.raises(RecalibratorFileError, match="format version 99, but this version of pbr-calib reads version 1"):
        load_recalibrator(_write(tmp_path / "v99.json", {**doc, "format_version": 99}))
    with pytest.raises(RecalibratorFileError, match="Unknown recalibration method 'no_such'"):
        Recalibrator.from_dict({**doc, "method": "no_such"})
    with pytest.raises(RecalibratorFileError, match="Not a pbr-calib recalibrator file"):
        load_recalibrator(_write(tmp_path / "other.json", {"hello": 1}))
    with pytest.raises(RecalibratorFileError, match="Damaged"):
        Recalibrator.from_dict({**doc, "state": {}} if doc["state"] else {**doc, "params": {"bogus": 1}})
    (tmp_path / "garbage.json").write_text("not json {")
    with pytest.raises(RecalibratorFileError, match="not a JSON recalibrator file"):
        load_recalibrator(tmp_path / "garbage.json")
    # From bytes (a dashboard upload): the same checks, the message starts with the given source name.
    assert Recalibrator.loads(json.dumps(doc).encode(), source="up.json").to_dict() == doc
    with pytest.raises(RecalibratorFileError, match=r"^up\.json: Not a pbr-calib recalibrator file"):
        Recalibrator.loads(b"[1, 2]", source="up.json")
    with pytest.raises(RecalibratorFileError, match=r"^up\.json: not a JSON recalibrator file"):
        Recalibrator.loads(b"\xff\xfe\x00garbage", source="up.json")


#: Parts of a GP's saved state that are a record of the fit (shown, never used to predict); their
#: numbers may legitimately be NaN (a failed check) and are only type-checked.
_RECORD_FIELDS = ("state.fit_report", "state.bounds")

#: How ``test_every_damaged_field_is_refused`` corrupts one field of a saved state.
ARRAY_DAMAGE = ("nan", "inf", "wrong_shape", "truncated", "dtype_object", "dtype_complex", "dtype_bogus")
NUMBER_DAMAGE = ("nan", "inf", "wrong_shape", "text")
TEXT_DAMAGE = ("bogus_text", "number")


def _state_fields(tree: object, path: str = "state") -> list[tuple[str, tuple, str]]:
    """(path, key path, kind) of every array, number and text in a saved state (records excepted)."""
    if path.startswith(_RECORD_FIELDS):
        return []
    if isinstance(tree, dict) and "__ndarray__" in tree:
        return [(path, (), "array")]
    if isinstance(tree, dict):
        return [(p, (k, *keys), kind) for k, v in tree.items() for p, keys, kind in _state_fields(v, f"{path}.{k}")]
    if isinstance(tree, list):
        return [(p, (i, *keys), kind) for i, v in enumerate(tree) for p, keys, kind in _state_fields(v, f"{path}[{i}]")]
    if isinstance(tree, bool):
        return []
    if isinstance(tree, (int, float)):
        return [(path, (), "number")]
    return [(path, (), "text")] if isinstance(tree, str) else []


def _damaged(value: object, kind: str, damage: str) -> object:
    """``value`` (an encoded array, a number or a text of a saved state) damaged as ``damage`` says."""
    if kind == "text":
        return "no_such_option" if damage == "bogus_text" else 1.0
    if kind == "number":
        return {"nan": float("nan"), "inf": float("inf"), "wrong_shape": [value, value], "text": str(value)}[damage]
    arr = np.asarray(value["__ndarray__"], dtype=np.float64)
    flat = arr.ravel()
    if damage in ("nan", "inf"):
        flat = flat.copy()
        flat[0] = np.nan if damage == "nan" else -np.inf
        return {**value, "__ndarray__": flat.reshape(arr.shape).tolist()}
    if damage == "wrong_shape":  # one row more, consistently encoded: right format, wrong size for the method
        grown = np.concatenate([arr, arr[:1] if arr.size else np.full((1, *arr.shape[1:]), 0.5)]) if arr.ndim else flat.repeat(2)
        return {**value, "__ndarray__": grown.tolist(), "shape": list(grown.shape)}
    if damage == "truncated":  # the last number lost, the shape unchanged
        return {**value, "__ndarray__": flat[:-1].tolist()}
    return {**value, "dtype": {"dtype_object": "object", "dtype_complex": "complex128", "dtype_bogus": "float6.4"}[damage]}


def _replace(tree: object, keys: tuple, new: object) -> object:
    """A copy of ``tree`` with the value at ``keys`` replaced."""
    if not keys:
        return new
    if isinstance(tree, dict):
        return {**tree, keys[0]: _replace(tree[keys[0]], keys[1:], new)}
    return [_replace(v, keys[1:], new) if i == keys[0] else v for i, v in enumerate(tree)]


@pytest.mark.parametrize("method,kind", methods_x("multiclass", "binary"))
def test_every_damaged_field_is_refused(method: str, kind: str, fitted, tmp_path) -> None:
    """Each array, number and text of the saved state, damaged in every way that applies (NaN,
    infinity, wrong shape, truncated array, wrong dtype, wrong type), is refused on load with the
    project's error, a message that starts with the file name and names the field."""
    doc = fitted(method, kind).to_dict()
    fields = _state_fields(doc["state"])
    if method != "uncalibrated":
        assert fields, "a fitted recalibrator saves what it learned"
    path = tmp_path / "damaged_model.json"
    tried = 0
    for where, keys, field_kind in fields:
        value = _get(doc["state"], keys)
        damages = {"array": ARRAY_DAMAGE, "number": NUMBER_DAMAGE, "text": TEXT_DAMAGE}[field_kind]
        for damage in damages:
            if field_kind == "array" and damage in ("nan", "inf", "truncated") and not np.size(value["__ndarray__"]):
                continue  # an empty array (e.g. the edges of a single bin) has no number to spoil
            path.write_text(json.dumps({**doc, "state": _replace(doc["state"], keys, _damaged(value, field_kind, damage))}))
            with pytest.raises(RecalibratorFileError) as info:
                load_recalibrator(path)
            message = str(info.value)
            assert message.startswith(f"{path}: Damaged '{method}' recalibrator file: "), (where, damage, message)
            # The field itself, or (a size that disagrees with a sibling's) its group.
            group = where.rsplit(".", 1)[0] if damage == "wrong_shape" and "." in where[6:] else where
            assert where in message or (group != "state" and group in message), (where, damage, message)
            assert "Traceback" not in message and "Error:" not in message
            tried += 1
    # The envelope of every file: missing fields, a wrong number of classes, an unknown input type.
    envelope = [{k: v for k, v in doc.items() if k != missing} for missing in ("params", "n_classes", "input_type", "state")]
    envelope += [{**doc, "n_classes": bad} for bad in (1, "10", 10.5, True, None)]
    envelope += [{**doc, "input_type": "auto"}, {**doc, "state": [1, 2]}, {**doc, "params": "none"}]
    for bad_doc in envelope:
        path.write_text(json.dumps(bad_doc))
        with pytest.raises(RecalibratorFileError, match=f"^{re.escape(str(path))}: Damaged '{method}' recalibrator file: "):
            load_recalibrator(path)
        tried += 1
    assert tried >= len(envelope) + (0 if method == "uncalibrated" else 4)
    # The undamaged file still loads.
    path.write_text(json.dumps(doc))
    assert load_recalibrator(path).to_dict() == doc


def _groups(tree: object, keys: tuple = ()) -> list[tuple]:
    """The key path of every group (JSON object) in a saved state, array encodings included."""
    if isinstance(tree, dict):
        return [keys] + [p for k, v in tree.items() if k != "__ndarray__" for p in _groups(v, (*keys, k))]
    if isinstance(tree, list):
        return [p for i, v in enumerate(tree) for p in _groups(v, (*keys, i))]
    return []


@pytest.mark.parametrize("method,kind", methods_x("multiclass"))
def test_every_extra_field_is_refused(method: str, kind: str, fitted, tmp_path) -> None:
    """A field pbr-calib does not write, at the top of the file or in any group of its state (an
    array's encoding included; records of the fit excepted), is refused and named, not passed over
    (issue 34)."""
    doc = fitted(method, kind).to_dict()
    path = tmp_path / "extra_field.json"
    cases = [(doc | {"comment": "hi"}, ("the file holds a field named \"comment\"",))]
    for keys in _groups(doc["state"]):
        group = _get(doc["state"], keys)
        where = "state" + "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys)
        if where.startswith(_RECORD_FIELDS):
            continue  # a record's fields differ between versions; it is type-checked (test_saved_files.py)
        # the group and the field are named (the GP's own parameter check words it its own way)
        cases.append(({**doc, "state": _replace(doc["state"], keys, {**group, "extra": 1})}, (f"{where} ", "extra")))
    for bad_doc, fragments in cases:
        path.write_text(json.dumps(bad_doc))
        with pytest.raises(RecalibratorFileError) as info:
            load_recalibrator(path)
        assert str(info.value).startswith(f"{path}: Damaged '{method}' recalibrator file: "), str(info.value)
        assert all(f in str(info.value) for f in fragments), (fragments, str(info.value))
    assert len(cases) >= (1 if method == "uncalibrated" else 2)


#: Parameters without an upper bound, and why none is needed: none sets an amount of work.
NOT_A_SIZE = {
    "random_state": "a seed", "cv_seed": "a seed",
    "n_jobs": "worker processes, at most one per fit to run (parallel.run_chains takes the smaller)",
    "alpha": "a weight of the KL term", "bias_reg": "a penalty weight", "off_diagonal_reg": "a penalty weight",
    "tol": "a tolerance", "n_prime": "a prior's strength",
    "bin_range_factor": "BBQ tries at most n / 5 bin counts whatever it is",
    "min_temperature": "a bound of the search", "max_temperature": "a bound of the search",
    "lambda_intercept": "a penalty weight", "lambda_diagonal": "a penalty weight",
    "lambda_off_diagonal": "a penalty weight", "reg_lambda": "a penalty weight", "reg_mu": "a penalty weight",
    "rho": "an exponent of a penalty's growth with K", "tau": "an exponent of a penalty's decay with n",
}


@pytest.mark.parametrize("method", methods())
def test_every_size_like_parameter_has_an_upper_bound(method: str, fitted, tmp_path) -> None:
    """Every parameter that takes a number declares an upper bound (or is listed in NOT_A_SIZE
    with the reason), and a saved file over the bound is refused on load (issue 34: a file with
    n_predict_samples = 10**8 took 63 s and 15.7 GB to predict one row)."""
    cls = REGISTRY[method]
    doc = fitted(method, "multiclass").to_dict()
    for name, constraint in cls._parameter_constraints.items():
        if name in NOT_A_SIZE or not any(constraint.test(v) for v in (1, 2, 5, 100)):
            continue
        assert not constraint.test(10**12), f"{method}.{name} accepts 10**12: declare its upper bound"
        if name in doc["params"]:
            with pytest.raises(RecalibratorFileError, match=f"params.{name} must be .*, but the file holds 1000000000000"):
                Recalibrator.from_dict({**doc, "params": {**doc["params"], name: 10**12}})


def _get(tree: object, keys: tuple) -> object:
    for k in keys:
        tree = tree[k]
    return tree


def _write(path, doc):
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("method,kind", methods_x("multiclass", "binary"))
def test_deterministic(method: str, kind: str, fitted, small_multiclass, small_binary) -> None:
    X, y = data(kind, small_multiclass, small_binary)
    a = fitted(method, kind)
    b = make(method).fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    assert a.to_dict() == b.to_dict()
    # fit_from: a shared fit (GP family) or a plain refit (the others) predicts exactly the same
    c = make(method).fit_from(a, X, y)
    assert c.is_fitted and c is not a
    np.testing.assert_array_equal(a.predict_proba(X), c.predict_proba(X))


# ---------------------------------------------------------------------- errors


@pytest.mark.parametrize("method", methods())
def test_unfitted_use_raises_not_fitted(method: str, small_multiclass, tmp_path) -> None:
    X, _ = small_multiclass
    rec = make(method)
    with pytest.raises(NotFittedError, match="not fitted yet"):
        rec.predict_proba(X)
    with pytest.raises(NotFittedError):
        rec.save(tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("method", methods())
def test_bad_input_is_a_clear_error(method: str, small_multiclass) -> None:
    X, y = small_multiclass
    rec = make(method)
    with pytest.raises(PredictionsError, match="shape"):
        rec.fit(X[:, :, None], y)
    with pytest.raises(PredictionsError, match="mismatched lengths"):
        rec.fit(X, y[:-1])
    with pytest.raises(PredictionsError, match="labels of shape"):
        rec.fit(X, y[:, None])
    with pytest.raises(PredictionsError, match="outside the classes 0..9"):
        rec.fit(X, np.where(np.arange(y.size) == 7, 10, y))
    with pytest.raises(PredictionsError, match="label -1 at row 3"):
        rec.fit(X, np.where(np.arange(y.size) == 3, -1, y))
    bad = X.copy()
    bad[5, 2] = np.nan
    with pytest.raises(PredictionsError, match="row 5, column 2"):
        rec.fit(bad, y)
    with pytest.raises(PredictionsError, match="empty"):
        rec.fit(X[:0], y[:0])
    with pytest.raises(ValueError, match="either inside the Predictions value or as y"):
        rec.fit(Predictions.from_arrays(X, y), y)
    with pytest.raises(ValueError, match="labels must be 0 or 1"):
        rec.fit(np.full(y.size, 0.5), y)
    assert not rec.is_fitted


@pytest.mark.parametrize("method", methods())
def test_top_label_only_input_is_refused(method: str, fitted, small_multiclass) -> None:
    X, y = small_multiclass
    full = Predictions.from_arrays(X, y)
    top = Predictions.from_top_label(full.confidence, full.predicted, full.labels)
    with pytest.raises(PredictionsError, match="Top-label-only data .* cannot be recalibrated"):
        make(method).fit(top)
    with pytest.raises(PredictionsError, match="Top-label-only"):
        fitted(method, "multiclass").predict_proba(top)


@pytest.mark.parametrize("method", methods())
def test_wrong_number_of_classes_at_predict(method: str, fitted, small_multiclass) -> None:
    X, _ = small_multiclass
    rec = fitted(method, "multiclass")
    with pytest.raises(ValueError, match="Expected predictions with 10 classes .* but got 9"):
        rec.predict_proba(X[:, :9])
    with pytest.raises(ValueError, match="Expected predictions with 10 classes .* but got 2"):
        rec.predict_proba(np.full(4, 0.3))


# ---------------------------------------------------------------------- real data


def ece_cases() -> list:
    cases = []
    for m in METHODS:
        table = ECE_EXPECTATIONS.get(m, DEFAULT_EXPECTATIONS)
        for dataset in ("cifar100", "cifar10", "binary"):
            if table.get(BINARY_NAME if dataset == "binary" else dataset):
                cases.append(_param(m, dataset))
    return cases


@pytest.mark.parametrize("method,dataset", ece_cases())
def test_test_ece_on_real_data(method: str, dataset: str, request) -> None:
    """Fit on 1000 rows of a real model's predictions, evaluate on the rest (B = floor(n^(1/3)))."""
    split = request.getfixturevalue(f"{dataset}_split")
    expect = ECE_EXPECTATIONS.get(method, DEFAULT_EXPECTATIONS)[split.name]
    rec = make(method).fit(split.fit)
    P = rec.predict_proba(split.test)
    if split.test.kind == "binary":  # binary ECE on p(y=1) (paper, Appendix A)
        before = pbr_core.ece(split.test.probs[:, 1], split.test.labels)
        after = pbr_core.ece(P[:, 1], split.test.labels)
    else:
        before = pbr_core.ece(split.test.probs, split.test.labels)
        after = pbr_core.ece(P, split.test.labels)
    if expect == "unchanged":
        np.testing.assert_array_equal(P, split.test.probs)
    else:
        assert after < before, f"{method} on {split.name}: test ECE {before:.4f} -> {after:.4f}"
