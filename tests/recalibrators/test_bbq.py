"""BBQ against a slow reference of Naeini et al. (2015), and a rough check against netcal."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pbr_core
from pbr_core.recalibrators import BBQ
from pbr_core.recalibrators.bbq import bbq_bin_range


def slow_bbq(p_fit, y_fit, p_new, n_prime=2.0, C=10.0):
    """Loops over models, bins and samples with math.lgamma (Naeini et al. 2015, Eq. 2 and 3)."""
    n = len(p_fit)
    s = sorted(p_fit)
    lo = max(1, math.floor(n ** (1 / 3) / C))
    hi = max(lo, min(math.ceil(n / 5), math.ceil(C * n ** (1 / 3))))
    models = []
    for B in range(lo, hi + 1):
        edges = [0.0]
        for j in range(1, B):
            c = min(max(int(np.rint(j * n / B)), 1), n - 1)
            edges.append((s[c - 1] + s[c]) / 2)
        edges.append(1.0)

        def which(x, edges=edges, B=B):
            for j in range(B):
                if x <= edges[j + 1] or j == B - 1:
                    return j

        log_ml, values = 0.0, []
        for j in range(B):
            members = [y for x, y in zip(p_fit, y_fit) if which(x) == j]
            N, m = len(members), sum(members)
            mid = (edges[j] + edges[j + 1]) / 2
            a, b = max(n_prime / B * mid, 1e-300), max(n_prime / B * (1 - mid), 1e-300)
            log_ml += (math.lgamma(n_prime / B) - math.lgamma(N + n_prime / B)
                       + math.lgamma(m + a) - math.lgamma(a) + math.lgamma(N - m + b) - math.lgamma(b))
            values.append((m + a) / (N + n_prime / B))
        models.append((log_ml, which, values))
    top = max(m[0] for m in models)
    weights = [math.exp(m[0] - top) for m in models]
    total = sum(weights)
    return np.array([sum(w * vals[which(x)] for w, (_, which, vals) in zip(weights, models)) / total for x in p_new])


@pytest.mark.parametrize("n", [30, 300])
def test_matches_the_slow_reference(binary_split, n: int) -> None:
    p, y = binary_split.fit.probs[:n, 1], binary_split.fit.labels[:n]
    p_new = np.concatenate([binary_split.test.probs[:200, 1], np.linspace(0, 1, 51)])
    ours = BBQ(floor=0.0).fit(p, y).predict_proba(p_new)[:, 1]  # the paper's BBQ
    ref = slow_bbq(list(p), list(y), p_new)
    assert np.max(np.abs(ours - ref)) < 1e-12


def test_model_range_and_weights(binary_split) -> None:
    p, y = binary_split.fit.probs[:, 1], binary_split.fit.labels
    rec = BBQ().fit(p, y)
    m = rec.maps_[0]
    lo, hi = bbq_bin_range(p.size, 10.0)
    assert (lo, hi) == (1, 100)  # n = 1000: [floor(10 / 10), min(200, 100)]
    assert np.all((m["n_bins"] >= lo) & (m["n_bins"] <= hi))
    assert m["weights"].sum() == pytest.approx(1.0, abs=1e-12) and np.all(np.diff(m["edges"]) > 0)
    q = rec.predict_proba(np.linspace(0, 1, 201))[:, 1]
    assert np.all((q > 0) & (q < 1))  # Beta priors keep every bin away from 0 and 1


def test_rough_agreement_with_netcal(binary_split) -> None:
    """netcal's BBQ scores models by BIC (not the paper's BDeu), on equal-width bins only, and
    keeps an elbow-selected subset; so only rough agreement is expected: both recalibrate the
    binary problem, and their maps differ by a few points on average."""
    netcal_binning = pytest.importorskip("netcal.binning")
    fit, test = binary_split.fit, binary_split.test
    ours = BBQ().fit(fit).predict_proba(test)[:, 1]
    ref = netcal_binning.BBQ()
    ref.fit(fit.probs[:, 1], fit.labels)
    theirs = ref.transform(test.probs[:, 1])
    before = pbr_core.ece(test.probs[:, 1], test.labels)
    assert pbr_core.ece(ours, test.labels) < before and pbr_core.ece(theirs, test.labels) < before
    assert np.mean(np.abs(ours - theirs)) < 0.05


def test_ties_and_constant_input() -> None:
    p = np.array([0.3] * 20 + [0.7] * 20)
    y = np.array([0, 1] * 10 + [1] * 15 + [0] * 5)
    q = BBQ().fit(p, y).predict_proba(np.array([0.3, 0.7]))[:, 1]
    assert q[0] < q[1]
    # All samples in one place: the data speak there; elsewhere the empty bins' priors
    # (Beta centred on the bin midpoint) pull towards the identity.
    q = BBQ().fit(np.full(12, 0.5), np.array([0, 1] * 6)).predict_proba(np.array([0.05, 0.5, 0.95]))[:, 1]
    assert q[1] == pytest.approx(0.5, abs=0.02) and q[0] == q[1] < q[2]  # ties: (0, 0.5] is one bin


@pytest.mark.parametrize("params,name", [({"n_prime": 0}, "n_prime"), ({"bin_range_factor": -1}, "bin_range_factor")])
def test_invalid_params(params: dict, name: str) -> None:
    with pytest.raises(ValueError, match=f"`{name}`"):
        BBQ(**params).fit(np.array([0.2, 0.8]), np.array([0, 1]))
