"""scikit-learn's own estimator checks over the registry (issue 38: recalibrators follow scikit-learn's
API conventions where they apply).

``parametrize_with_checks`` runs every check of scikit-learn's ``check_estimator`` on one quick
instance of each method. Passing: clone, get_params / set_params (and their invariance), repr,
default-constructible parameters, no attribute set in ``__init__`` but the parameters, no error from
``__init__`` / ``set_params``, NotFittedError before fit (pbr_core's ``NotFittedError`` is also
scikit-learn's where scikit-learn is loaded), valid tags, sparse input refused with a message saying
so, complex data refused, one sample refused, ``fit(X, None)`` refused, 1-D input, pickling,
idempotent fits, invariance of predictions to the order and subsets of rows (except where said).

Expected to fail (``EXCLUDED``; run, marked xfail), each for its reason: scikit-learn feeds arbitrary
features with arbitrary targets, while a recalibrator's input is a probability vector or logits of K
classes with labels 0..K-1, and the ``n_features_in_`` checks are replaced by the class-count checks
(a recalibrator refuses predictions with another number of classes than it was fitted on,
tests/recalibrators/test_common.py::test_wrong_number_of_classes_at_predict). What those checks
would have tested is tested here on real score data instead (the tests after the checks): fit
returns self and leaves the parameters as they were, read-only (memory-mapped) input, NaN and
infinite scores refused with a message naming the row.

Not run (``NOT_RUN``): the GP variants whose code is that of ``gp`` and ``pbr_app`` (which run, ~9 s
each), and ``pbr_cv`` (46 s here: a grid of fits per fit).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from pbr_core.recalibrators import available_methods, method_family
from pbr_core.recalibrators.base import REGISTRY, Recalibrator, ensure_registered

_ARBITRARY = ("scikit-learn's data for this check are arbitrary features and targets (e.g. 2 columns with labels "
              "0..2, or rows of positive numbers that are not probabilities): a recalibrator refuses them with a "
              "clear PredictionsError, as it should")
#: Checks expected to fail for every recalibrator, and why.
EXCLUDED: dict[str, str] = {
    "check_estimators_fit_returns_self": _ARBITRARY + "; fit returns self: test_fit_returns_self_and_keeps_params",
    "check_estimators_overwrite_params": _ARBITRARY + "; tested in test_fit_returns_self_and_keeps_params",
    "check_readonly_memmap_input": _ARBITRARY + "; tested in test_read_only_input",
    "check_fit_score_takes_y": _ARBITRARY + " (and a recalibrator has no score method)",
    "check_estimators_nan_inf": _ARBITRARY + "; NaN / inf refused: test_nan_and_inf_are_refused",
    "check_dtype_object": "object arrays are refused ('the scores are not numeric'): scores are numbers",
    "check_estimators_empty_data_messages": "0 columns are refused in pbr_core's own words ('no rows' / no scores)",
    "check_fit2d_1feature": "one column is binary data by design (p(y=1)); its values must be probabilities",
    "check_fit2d_predict1d": "a 1-D array is binary p(y=1) by design, not a sample to reshape",
    "check_n_features_in": "replaced by the class-count checks (n_classes_, refused at predict when it differs)",
    "check_n_features_in_after_fitting": "replaced by the class-count checks (n_classes_, refused at predict when it differs)",
}
_MC = ("predicts by averaging Monte Carlo posterior draws made for the whole batch (the paper's Algorithm 1, "
       "seeded by random_state), so a row's probabilities depend on the other rows of the batch; the (app.) "
       "variants predict softmax(mu), row by row")
PER_METHOD: dict[str, dict[str, str]] = {
    m: {"check_methods_sample_order_invariance": _MC, "check_methods_subset_invariance": _MC}
    for m in ("gp", "pbr", "pbr_total")
}

ensure_registered()
NOT_RUN: dict[str, str] = {
    "gp_app": "the code of gp (mean_approx=True), which runs", "pbr": "the code of pbr_app (mean_approx=False)",
    "pbr_total": "the code of pbr_app with another objective", "pbr_total_app": "the code of pbr_app",
    "pbr_cv": "46 s here (a grid of PBR fits per fit); its get_params / clone are tested in test_pbr_cv",
}


def quick(method: str) -> Recalibrator:
    """The method's quick test instance (``_test_params``: the GP family with 60 iterations and 20 draws;
    with 5 iterations a GP fit on the checks' random data fails its own training check, as it should)."""
    cls = REGISTRY[method]
    return cls(**cls._test_params())


CHECKED = [m for m in available_methods() if m not in NOT_RUN]


def _expected(estimator: Recalibrator) -> dict[str, str]:
    return {**EXCLUDED, **PER_METHOD.get(estimator.method, {})}


@parametrize_with_checks([quick(m) for m in CHECKED], expected_failed_checks=_expected)
def test_sklearn_estimator_checks(estimator, check) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # fits on random data hit their bounds and say so
        check(estimator)


@pytest.mark.parametrize("method", CHECKED)
def test_fit_returns_self_and_keeps_params(method: str, small_multiclass) -> None:
    X, y = small_multiclass
    rec = quick(method)
    before = clone(rec).get_params()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert rec.fit(X, y) is rec
    after = rec.get_params()
    assert after.keys() == before.keys()
    for name, value in before.items():
        assert repr(after[name]) == repr(value), name


@pytest.mark.parametrize("method", [m for m in CHECKED if method_family(m) != "gp"])
def test_read_only_input(method: str, small_multiclass) -> None:
    X, y = (np.array(a) for a in small_multiclass)
    X.flags.writeable = False
    y.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        rec = quick(method).fit(X, y)
    P = rec.predict_proba(X)
    assert np.all(np.isfinite(P)) and not X.flags.writeable


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_and_inf_are_refused(bad: float, small_multiclass) -> None:
    X, y = small_multiclass
    X = np.array(X)
    X[3, 1] = bad
    for method in [m for m in CHECKED if method_family(m) != "gp"]:
        with pytest.raises(ValueError, match="row"):
            quick(method).fit(X, y)


def test_not_fitted_error_is_scikit_learns_too() -> None:
    from sklearn.exceptions import NotFittedError as SklearnNotFitted

    from pbr_core.recalibrators import NotFittedError

    with pytest.raises(NotFittedError) as info:
        quick("temperature").predict_proba(np.eye(3))
    assert isinstance(info.value, SklearnNotFitted) and isinstance(info.value, RuntimeError)


def test_fit_without_labels_is_refused() -> None:
    with pytest.raises(ValueError, match="requires y to be passed"):
        quick("temperature").fit(np.eye(3))
