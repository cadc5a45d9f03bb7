"""Benchmark: do PBR's Corollary 1 / 2 bounds hold? Coverage with known truth (claims row 18, audit 7).

Run from the repository root:  python benchmarks/bench_bounds_coverage.py [--trials 30] [--sizes 300,1000]
Prints a markdown table (record it in benchmarks/RESULTS_bounds_coverage.md). Cost on a shared 2-core
machine: about 1.2 s a fit at 300 rows with the prior on the same rows, 2 s with ``prior_split=0.3``,
4-8 s at 1,000 rows (a full run of 30 trials at 300 and 1,000 rows: about 7 minutes).

Truth: the 10,000 CIFAR-10 ResNet-110 logit rows (``sample_data/cifar10_resnet110.npz``) are the
population, and a row's label is drawn from softmax(z / 2) (so the network is over-confident and a
recalibrator has something to do). Per trial, n rows are drawn without replacement, their labels drawn,
and PBR fitted with its defaults, once with the prior fitted on the same rows (``prior_split=0``: the
page's "Approximate") and once on a separate 30 % (``prior_split=0.3``: "Valid as stated"; the bounds
then count only the other 70 %, ``bound_rows_``).

The bounds are about the posterior rho = q(v) over the whitened inducing values v, whose KL to the
prior N(0, I) is the fit's ``kl_``: each v gives the map eta_v(z) = softmax(z + A(z)^T v) (the GP's
conditional mean given v). J = 20 draws v_j ~ q(v) stand for the average over rho, and for each map

* Corollary 1's quantity: | E_{S_te} ECE(eta_v, S_te) - ECE(eta_v, S_re) |, with S_re the bound's
  rows (their drawn labels) and E_{S_te} over R = 100 fresh test sets of the same row count (rows
  drawn from the population, labels from softmax(z / 2)), B = the bound's ``n_bins``;
* Corollary 2's quantity: | TCE(eta_v) - ECE(eta_v, S_re) |, TCE on the whole population: the
  top-label E | E[q | c] - c | with E[q | c] over 100 equal-mass bins of the confidence c, q the true
  chance that the map's top class is right (also the row-wise E | q - c |, which bounds it above).

Averaged over the J draws, each is compared with its bound (``bounds_["corollary1"]``,
``["corollary2"]``); a violation is a quantity above its bound. The bounds hold with probability 95 %
over the fitted rows, so a violation rate near 0 is consistent, and up to 5 % would be too.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pbr_core.bounds import optimal_n_bins  # noqa: E402
from pbr_core.predictions import softmax  # noqa: E402
from pbr_core.recalibrators import PBR  # noqa: E402

T_TRUE = 2.0   # labels ~ softmax(z / T_TRUE)
J_DRAWS = 20   # draws from the posterior q(v)
R_TEST = 100   # fresh test sets per draw (Corollary 1's expectation over S_te)
PRIOR_SPLITS = (0.0, 0.3)


class Population:
    """The CIFAR-10 logits with labels drawn from softmax(z / T_TRUE)."""

    def __init__(self, path: Path = ROOT / "sample_data" / "cifar10_resnet110.npz") -> None:
        self.z = np.load(path)["logits"].astype(np.float64)
        self.p_true = softmax(self.z / T_TRUE)
        self._cum = self.p_true.cumsum(1)

    def __len__(self) -> int:
        return self.z.shape[0]

    def draw_labels(self, idx: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        u = rng.random(len(idx))[:, None]
        return np.minimum((u > self._cum[idx]).sum(1), self.z.shape[1] - 1)


def ece_top(conf: np.ndarray, correct: np.ndarray, n_bins: int) -> np.ndarray:
    """Top-label binned ECE (equal-width bins (0, 1/B], ..., the paper's Eq. 2), over the last axis
    (vectorised over test sets; ``pbr_core.ece`` takes one set at a time)."""
    b = np.clip(np.ceil(conf * n_bins).astype(int) - 1, 0, n_bins - 1)
    out = np.zeros(conf.shape[:-1])
    for k in range(n_bins):
        out += np.abs(((b == k) * (conf - correct)).sum(-1)) / conf.shape[-1]
    return out


def map_draws(model, z: np.ndarray, v: np.ndarray) -> np.ndarray:
    """softmax(z + A(z)^T v_j) for whitened inducing values v (J, M): probabilities (J, N, K)."""
    with torch.no_grad():
        x = torch.as_tensor(z, dtype=torch.float64).reshape(-1, 1)
        zu = model.variational_strategy.inducing_points
        chol = torch.linalg.cholesky(model.inducing_covariance(zu))
        a = torch.linalg.solve_triangular(chol, model.cross_covariance(zu, x), upper=False)  # (M, NK)
        g = (torch.as_tensor(v) @ a).numpy().reshape(len(v), *z.shape)
    return np.stack([softmax(z + g[j]) for j in range(len(v))])


def population_tce(pop: Population, probs: np.ndarray) -> tuple[float, float]:
    """A map's top-label TCE on the population: E|E[q|c] - c| by 100 equal-mass bins of c, and the
    row-wise E|q - c| (an upper version)."""
    conf, top = probs.max(1), probs.argmax(1)
    q = pop.p_true[np.arange(len(pop)), top]
    o = np.argsort(conf)
    binned = sum(abs(qc.mean() - cc.mean()) * len(cc)
                 for cc, qc in zip(np.array_split(conf[o], 100), np.array_split(q[o], 100)))
    return binned / len(pop), float(np.abs(q - conf).mean())


@dataclass(frozen=True)
class Trial:
    """One fit: its bounds and the true quantities they bound (averaged over the J draws)."""

    n: int
    prior_split: float
    n_bound: int
    kl: float
    bound1: float
    bound2: float
    true1: float
    true2: float
    true2_rowwise: float


def trial(pop: Population, n: int, prior_split: float, seed: int) -> Trial:
    """Fit PBR on n drawn rows and measure Corollary 1's and 2's quantities against their bounds."""
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(pop), n, replace=False)
    y = pop.draw_labels(idx, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = PBR(random_state=seed, prior_split=prior_split).fit(pop.z[idx], y, input_type="logits")
    b = r.bounds_
    rows = r.bound_rows_ if prior_split > 0 else np.arange(n)
    assert b["n"] == len(rows) and b["n_bins"] == optimal_n_bins(b["n"])
    # q(v) = N(m, diag s^2) (mean field, PBR's default): draws of the whitened inducing values.
    assert r.model_.variational == "mean_field"
    mean, s2 = (t.detach().numpy() for t in r.model_._variational_terms())
    v = mean + np.sqrt(s2) * rng.standard_normal((J_DRAWS, len(mean)))
    t1, t2, t2r = [], [], []
    for probs in map_draws(r.model_, pop.z, v):
        conf, top = probs.max(1), probs.argmax(1)
        fit_rows = idx[rows]
        e_re = ece_top(conf[fit_rows], (top[fit_rows] == y[rows]).astype(float), b["n_bins"])
        ti = rng.integers(0, len(pop), size=(R_TEST, b["n"]))
        correct = (rng.random(ti.shape) < pop.p_true[ti, top[ti]]).astype(float)
        e_te = ece_top(conf[ti], correct, b["n_bins"]).mean()
        tce, tce_rows = population_tce(pop, probs)
        t1.append(abs(e_te - e_re))
        t2.append(abs(tce - e_re))
        t2r.append(abs(tce_rows - e_re))
    return Trial(n=n, prior_split=prior_split, n_bound=int(b["n"]), kl=float(b["kl"]),
                 bound1=float(b["corollary1"]), bound2=float(b["corollary2"]),
                 true1=float(np.mean(t1)), true2=float(np.mean(t2)), true2_rowwise=float(np.mean(t2r)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30, help="fits per (size, prior split)")
    parser.add_argument("--sizes", default="300,1000", help="comma-separated row counts")
    args = parser.parse_args()
    torch.set_num_threads(1)
    pop = Population()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"labels ~ softmax(z / {T_TRUE}) on CIFAR-10 ResNet-110 logits; {args.trials} fits a cell, "
          f"J = {J_DRAWS} posterior draws, R = {R_TEST} test sets\n")
    print("| rows | prior split | bound rows | KL (median) | Cor. 1 bound (median; >= 1) | true Cor. 1 (median / max) "
          "| violations | Cor. 2 bound (median) | true Cor. 2 (median / max) | violations | max true / bound | s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        for split in PRIOR_SPLITS:
            t0 = time.perf_counter()
            res = [trial(pop, n, split, 1000 * n + s) for s in range(args.trials)]
            col = {k: np.array([getattr(x, k) for x in res]) for k in Trial.__dataclass_fields__}
            ratio = max(np.max(col["true1"] / col["bound1"]), np.max(col["true2"] / col["bound2"]))
            print(f"| {n} | {split} | {res[0].n_bound} | {np.median(col['kl']):.2f} "
                  f"| {np.median(col['bound1']):.3f} ({int(np.sum(col['bound1'] >= 1))}) "
                  f"| {np.median(col['true1']):.4f} / {col['true1'].max():.4f} "
                  f"| {int(np.sum(col['true1'] > col['bound1']))} of {args.trials} "
                  f"| {np.median(col['bound2']):.3f} | {np.median(col['true2']):.4f} / {col['true2'].max():.4f} "
                  f"| {int(np.sum(col['true2'] > col['bound2']))} of {args.trials} | {ratio:.3f} "
                  f"| {time.perf_counter() - t0:.0f} |", flush=True)


if __name__ == "__main__":
    main()
