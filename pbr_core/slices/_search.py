"""The search half: per-slice sums, how far each slice's calibration departs from the rest's, and the
few slices sent to confirmation.

The score of a slice S against the rest R of the search half is a two-sample version of Cox's
recalibration test (:mod:`pbr_core.significance`). In each of S and R the sums U = sum (y - p)(1, x)
and I = sum p(1 - p)(1, x; x, x^2), x = logit p, give the one-step estimate theta = I^-1 U of the
recalibration logit P(Y = 1) = a + b x away from (a, b) = (0, 1) (calibration in the large and the
slope), with covariance about I^-1. The score is the Wald statistic of their difference,
D = (theta_S - theta_R)' (I_S^-1 + I_R^-1)^-1 (theta_S - theta_R), about chi^2(2) when S is
calibrated like the rest: it is large for a slice whose miscalibration differs from the rest's and
small when the whole file is miscalibrated alike (which the overall test already says). Only the
ranking uses it; what is claimed is confirmed on other rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pbr_core.significance import EPS
from pbr_core.slices._plan import Plan

#: The sums kept per cell: on the search half n, sum (y - p), sum (y - p) x, sum w, sum w x, sum w x^2
#: (w = p(1 - p)); and the confirmation half's rows.
SUM_NAMES = ("n", "resid", "resid_x", "w", "w_x", "w_xx", "n_confirm")
#: Two slices sharing at least this share of their rows (Jaccard index) are one finding.
OVERLAP = 0.5


def search_terms(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(6, rows): each row's part of the search sums (:data:`SUM_NAMES` but the last)."""
    p = np.asarray(p, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    pc = np.clip(p, EPS, 1 - EPS)
    x = np.log(pc) - np.log1p(-pc)
    w = p * (1 - p)
    r = y - p
    return np.stack([np.ones_like(p), r, r * x, w, w * x, w * x * x])


@dataclass
class SearchSums:
    """The sums of every cell of every grouping of a plan; feed with :meth:`update`, combine with
    :meth:`merge` (partial sums of different rows add up)."""

    plan: Plan
    sums: np.ndarray = field(repr=False)   # (7, cells)

    @classmethod
    def empty(cls, plan: Plan) -> "SearchSums":
        return cls(plan=plan, sums=np.zeros((len(SUM_NAMES), plan.n_cells)))

    def update(self, codes: np.ndarray, half: np.ndarray, p: np.ndarray, y: np.ndarray) -> "SearchSums":
        """Add rows: their codes (rows, columns of the plan), half (0 search, 1 confirmation), p and y."""
        plan = self.plan
        search = half == 0
        terms = search_terms(p[search], y[search])
        cs, cc = codes[search], codes[~search]
        for g, (off, size) in enumerate(zip(plan.offsets, plan.sizes)):
            cell = plan.cells(cs, g)
            for k in range(terms.shape[0]):
                self.sums[k, off:off + size] += np.bincount(cell, weights=terms[k], minlength=size)
            self.sums[6, off:off + size] += np.bincount(plan.cells(cc, g), minlength=size)
        return self

    def merge(self, other: "SearchSums") -> "SearchSums":
        if other.plan != self.plan:
            raise ValueError("Cannot merge slice sums of different plans.")
        self.sums += other.sums
        return self


# --------------------------------------------------------------------------------- the score
def _pinv2(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pseudo-inverse and rank of symmetric 2 x 2 matrices [[a, b], [b, c]] (arrays). Rank 1 (every
    row with the same p: only calibration in the large can be measured): M / trace(M)^2."""
    tr = a + c
    det = a * c - b * b
    full = (tr > 0) & (det > 1e-10 * tr * tr)
    one = (tr > 0) & ~full
    with np.errstate(divide="ignore", invalid="ignore"):
        pa = np.where(full, c / det, np.where(one, a / tr ** 2, 0.0))
        pb = np.where(full, -b / det, np.where(one, b / tr ** 2, 0.0))
        pc = np.where(full, a / det, np.where(one, c / tr ** 2, 0.0))
    return pa, pb, pc, np.where(full, 2, np.where(one, 1, 0))


def _quad(P, u0, u1):
    return P[0] * u0 * u0 + 2 * P[1] * u0 * u1 + P[2] * u1 * u1


def departure(s: np.ndarray, r: np.ndarray) -> dict[str, np.ndarray]:
    """The departure of slices (sums ``s``, (6, m)) from their rests (``r``, (6, m) or (6,)): the
    statistic D, its degrees of freedom and p-value (chi^2), and each side's chi^2 per row (how
    miscalibrated it is, whatever its size: ``per_row_slice`` > ``per_row_rest`` means worse than the rest)."""
    from scipy.special import chdtrc

    r = np.broadcast_to(np.asarray(r, dtype=np.float64).reshape(6, -1), s.shape)
    Ps, Pr = _pinv2(s[3], s[4], s[5]), _pinv2(r[3], r[4], r[5])
    ts = (Ps[0] * s[1] + Ps[1] * s[2], Ps[1] * s[1] + Ps[2] * s[2])
    tr = (Pr[0] * r[1] + Pr[1] * r[2], Pr[1] * r[1] + Pr[2] * r[2])
    Q = _pinv2(Ps[0] + Pr[0], Ps[1] + Pr[1], Ps[2] + Pr[2])
    d = np.maximum(_quad(Q, ts[0] - tr[0], ts[1] - tr[1]), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_s = _quad(Ps, s[1], s[2]) / s[0]
        per_r = _quad(Pr, r[1], r[2]) / r[0]
        p = np.where(Q[3] > 0, chdtrc(np.maximum(Q[3], 1), d), np.nan)
    return {"chi2": d, "df": Q[3], "p": p, "per_row_slice": per_s, "per_row_rest": per_r}


# --------------------------------------------------------------------------------- the choice
@dataclass(frozen=True)
class Candidate:
    """A slice proposed by the search: its conditions ((column index, code), ...), where its sums are,
    its rows in each half and its score."""

    conditions: tuple[tuple[int, int], ...]
    flat: int
    n_search: int
    n_confirm: int
    chi2: float
    p: float


@dataclass
class Choice:
    """What the search did: the slices sent to confirmation, and how many it scored."""

    chosen: list[Candidate]
    scored: int        # slices with enough rows, scored
    screened: int      # of which departed from the rest at the screening level and were worse than it


def choose(plan: Plan, search: SearchSums, *, min_rows: int, max_slices: int, screen: float) -> Choice:
    """The slices to confirm: those of at least ``min_rows`` rows (both halves) whose departure from
    the rest has p < ``screen`` on the search half and which are calibrated worse than the rest, the
    ``max_slices`` largest departures that are not the same finding as one already chosen."""
    sums = search.sums
    total = sums[:6, plan.offsets[0]:plan.offsets[0] + plan.sizes[0]].sum(axis=1) if plan.groupings else np.zeros(6)
    valid = np.zeros(plan.n_cells, dtype=bool)
    for g, (off, size) in enumerate(zip(plan.offsets, plan.sizes)):
        dims = [plan.columns[i].n_codes for i in plan.groupings[g]]
        codes = np.unravel_index(np.arange(size), dims)
        # the last code of a column is its values too rare to be a slice
        valid[off:off + size] = np.all([c < d - 1 for c, d in zip(codes, dims)], axis=0)
    n_all = sums[0] + sums[6]
    valid &= (n_all >= min_rows) & (total[0] - sums[0] >= min_rows / 2) & (sums[0] > 0)
    idx = np.flatnonzero(valid)
    dep = departure(sums[:6, idx], total[:, None] - sums[:6, idx])
    worse = dep["per_row_slice"] > dep["per_row_rest"]
    keep = worse & (dep["p"] < screen)
    order = np.lexsort((idx[keep], -_rank_key(plan, idx, dep)[keep]))  # best first; ties in plan order
    pool = [Candidate(conditions=_conditions(plan, int(f)), flat=int(f), n_search=int(sums[0, f]), n_confirm=int(sums[6, f]),
                      chi2=float(c), p=float(p))
            for f, c, p in zip(idx[keep][order], dep["chi2"][keep][order], dep["p"][keep][order])]
    chosen: list[Candidate] = []
    where = _Lookup(plan)
    for cand in pool:
        if len(chosen) >= max_slices:
            break
        if not any(_same_finding(cand, k, sums, total, where, screen) for k in chosen):
            chosen.append(cand)
    return Choice(chosen=chosen, scored=int(idx.size), screened=int(keep.sum()))


def _rank_key(plan: Plan, idx: np.ndarray, dep: dict[str, np.ndarray]) -> np.ndarray:
    """-ln(p x m): the departure's p-value times the number m of slices scored with as many conditions
    (Bonferroni within each order). A pair of columns must depart about ten times more surely than a
    single column to rank above it (Adult: ~90 single values, ~900 pairs), so that a slice is named by
    its simplest description (education = Bachelors, not education = Bachelors and native_country =
    United-States, 90 % of the same rows)."""
    from scipy.special import log_ndtr

    order = np.searchsorted(plan.offsets, idx, side="right") - 1
    n_cond = np.array([len(g) for g in plan.groupings])[order]
    m = np.bincount(n_cond, minlength=3).astype(np.float64)
    d = dep["chi2"]
    log_p = np.where(dep["df"] == 2, -d / 2, np.log(2) + log_ndtr(-np.sqrt(d)))
    return -log_p - np.log(m[n_cond])


def _conditions(plan: Plan, flat: int) -> tuple[tuple[int, int], ...]:
    """The (column index, code) pairs of the cell at ``flat``."""
    g = int(np.searchsorted(plan.offsets, flat, side="right")) - 1
    return tuple(zip(plan.groupings[g], plan.cell_codes(g, flat - int(plan.offsets[g]))))


class _Lookup:
    """The flat index of a set of conditions (None when that combination was not summed)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.grouping = {cols: g for g, cols in enumerate(plan.groupings)}

    def flat(self, conditions) -> int | None:
        conditions = tuple(sorted(conditions))
        g = self.grouping.get(tuple(i for i, _ in conditions))
        if g is None:
            return None
        cell = 0
        for i, code in conditions:
            cell = cell * self.plan.columns[i].n_codes + code
        return int(self.plan.offsets[g] + cell)


def _same_finding(c: Candidate, k: Candidate, sums: np.ndarray, total: np.ndarray, where: _Lookup,
                  screen: float) -> bool:
    """Whether ``c`` adds nothing to the chosen ``k``: they share most of their rows (Jaccard index at
    least :data:`OVERLAP`, from a lower bound on their common rows), or one is a part of the other with
    the same miscalibration (a part that does not differ from the rest of the whole, or a whole whose
    departure comes from the chosen part)."""
    a, b = set(c.conditions), set(k.conditions)
    if a == b:
        return True
    common = _common_rows(a, b, sums, float(total[0]), where)
    if common / max(c.n_search + k.n_search - common, 1.0) >= OVERLAP:
        return True
    if b < a or a < b:
        child, parent = (c, k) if b < a else (k, c)
        cs, ps = sums[:6, child.flat], sums[:6, parent.flat]
        if b < a:  # c refines the chosen k: does it differ from the rest of k?
            rest = ps - cs
            return bool(rest[0] <= 0 or not departure(cs[:, None], rest)["p"][0] < screen)
        # c contains the chosen k: does the rest of c depart from the rest of the file?
        part = ps - cs
        return bool(part[0] <= 0 or not departure(part[:, None], total - ps)["p"][0] < screen)
    return False


def _rows(conditions, sums: np.ndarray, n_total: float, where: _Lookup) -> float | None:
    """Search-half rows meeting every condition, when counted (at most two columns), else None."""
    cols: dict[int, int] = {}
    for i, code in conditions:
        if cols.setdefault(i, code) != code:
            return 0.0  # two values of one column: no row
    if not cols:
        return n_total
    f = where.flat(cols.items())
    return None if f is None else float(sums[0, f])


def _common_rows(a: set, b: set, sums: np.ndarray, n_total: float, where: _Lookup) -> float:
    """A lower bound on the rows two slices share: exact when their conditions span at most two
    columns; else, for every pair of wider slices A' of ``a`` and B' of ``b`` (a subset of the
    conditions each) whose common rows are counted, |A' and B'| - |A' but not a| - |B' but not b|."""
    from itertools import chain, combinations

    def parents(x: set):
        return list(chain.from_iterable(combinations(sorted(x), r) for r in range(len(x) + 1)))

    na = _rows(a, sums, n_total, where)
    nb = _rows(b, sums, n_total, where)
    best = 0.0
    for pa in parents(a):
        for pb in parents(b):
            both = _rows((*pa, *pb), sums, n_total, where)
            if both is None:
                continue
            best = max(best, both - (_rows(pa, sums, n_total, where) - na) - (_rows(pb, sums, n_total, where) - nb))
    return best
