"""No registered method is worse than the uncalibrated model in test NLL on the bundled CIFAR files
(issue 37's target).

Each method with its defaults is fitted on the first 5000 rows of a bundled file (the benchmark's
fit size, benchmarks/RESULTS_ranked.md) and tested on the other 5000. "Not worse" is the paired
claim: the mean per-row NLL difference from the uncalibrated model is at most two standard errors
above 0. A strict "<=" would fail temperature scaling on CIFAR-100 by .0003 (.9538 against .9535,
two standard errors .0008), which is the test rows' noise, not the method; the step-function
methods' old defaults failed by +.58 and +.37 (tested below, so this check can fail).

Measured test NLL (uncalibrated: CIFAR-10 ResNet-110 .1958, CIFAR-100 DenseNet-121 .9535):
temperature .1885 / .9538, vector scaling .1860 / .9471, matrix scaling .1859 / .9324, SVS .1830 /
.9471, SMS .1776 / .9432, Platt .1854 / .9491, isotonic .1822 / .9406, histogram binning .1819 /
.9422, beta .1841 / .9342, BBQ .1839 / .9397, Venn-Abers (top-label, the default) .1803 / .9408 and
cross Venn-Abers .1799 / .9401 (one-vs-all, the published construction: .1859 / .9659 and .1895 /
.9985, +.0124 +- .0062 and +.0451 +- .0068 on CIFAR-100; the cross one is tested below), Dirichlet .1766 / .9037 (its default penalty at K = 100 is 110; the old 1
overfit: 1.4044 against .9831 in benchmarks/RESULTS_ranked.md). The fits run with one BLAS thread
(Dirichlet at K = 100: ~18 s; with two threads competing for this machine's 2 cores, minutes).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.special import log_softmax

from pbr_core.recalibrators import available_methods, get_recalibrator, method_family

SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data"

FIT_ROWS = 5000
FILES = {"cifar10": "cifar10_resnet110.npz", "cifar100": "cifar100_densenet121.npz"}

#: (data, method) pairs not run here, and why.
NOT_RUN: dict[tuple[str, str], str] = {
}
for _method in available_methods():
    if method_family(_method) == "gp":  # minutes per fit on these files: benchmarks/RESULTS_ranked_pbr.md
        for _data in FILES:
            NOT_RUN[(_data, _method)] = ("GP family: 7-26 s per fit on 5000 rows, minutes for the family (PBRCV: a "
                                         "grid of fits); gp_app and pbr_app beat the uncalibrated model in test NLL "
                                         "on all five networks of benchmarks/RESULTS_ranked_pbr.md")

#: Known to fail, left open (run, strict: an XPASS says it was fixed). None since Venn-Abers' default became
#: top-label (its one-vs-all option is tested below, where it fails).
KNOWN_WORSE: dict[tuple[str, str], str] = {}

#: Fits that take more than a few seconds here (K = 100: 10,100 parameters).
SLOW = {("cifar100", "matrix_scaling"), ("cifar100", "sms"), ("cifar100", "dirichlet")}


@pytest.fixture(scope="module")
def bundled() -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    out = {}
    for name, file in FILES.items():
        d = np.load(SAMPLE_DATA / file, allow_pickle=False)
        z, y = d["logits"].astype(np.float64), d["labels"]
        out[name] = (z[:FIT_ROWS], y[:FIT_ROWS], z[FIT_ROWS:], y[FIT_ROWS:])
    return out


def paired_nll_excess(P: np.ndarray, z_test: np.ndarray, y_test: np.ndarray) -> tuple[float, float]:
    """(mean, standard error) over test rows of -ln P[y] + ln softmax(z)[y]: the method's NLL minus the model's."""
    rows = np.arange(y_test.size)
    d = -np.log(P[rows, y_test]) + log_softmax(z_test, axis=1)[rows, y_test]
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(d.size))


def _cases() -> list:
    cases = []
    for data in FILES:
        for method in available_methods():
            marks = [pytest.mark.slow] if (data, method) in SLOW else []
            if (data, method) in NOT_RUN:
                marks.append(pytest.mark.skip(reason=NOT_RUN[(data, method)]))
            if (data, method) in KNOWN_WORSE:
                marks.append(pytest.mark.xfail(reason=KNOWN_WORSE[(data, method)], strict=True))
            cases.append(pytest.param(data, method, marks=marks, id=f"{data}-{method}"))
    return cases


@pytest.mark.parametrize("data,method", _cases())
def test_test_nll_is_not_worse_than_uncalibrated(bundled, data: str, method: str) -> None:
    z, y, z_test, y_test = bundled[data]
    from threadpoolctl import threadpool_limits  # a scikit-learn dependency

    with warnings.catch_warnings(), threadpool_limits(limits=1):
        warnings.simplefilter("ignore", RuntimeWarning)  # e.g. Platt's note on separated one-vs-all maps
        P = get_recalibrator(method).fit(z, y).predict_proba(z_test)
    mean, se = paired_nll_excess(P, z_test, y_test)
    assert mean <= 2 * se, f"{method} on {data}: test NLL {mean:+.4f} (SE {se:.4f}) against the uncalibrated model"


@pytest.mark.parametrize("method,params,worse", [
    ("histogram_binning", {"strategy": "uniform", "multiclass": "one_vs_all"}, 0.5),
    ("bbq", {"floor": 0.0, "multiclass": "one_vs_all"}, 0.3),
    ("isotonic", {"multiclass": "one_vs_all"}, 0.01),
    ("venn_abers_cross", {"multiclass": "one_vs_all"}, 0.03),
])
def test_the_plain_step_methods_fail_the_check(bundled, method: str, params: dict, worse: float) -> None:
    """The check above can fail: the plain one-vs-all forms (the old defaults) on CIFAR-100 were
    measured at +.58 (histogram binning), +.37 (BBQ), +.019 (isotonic) and +.045 (cross Venn-Abers)
    nats per row (one-vs-all Venn-Abers: +.0124, two standard errors exactly, too close to test either way)."""
    z, y, z_test, y_test = bundled["cifar100"]
    P = get_recalibrator(method, **params).fit(z, y).predict_proba(z_test)
    mean, se = paired_nll_excess(np.maximum(P, 1e-300), z_test, y_test)
    assert mean > worse and mean > 2 * se
