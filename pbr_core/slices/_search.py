"""The search half: how far each slice's calibration departs from the rest's, and the few slices sent
to confirmation, chosen one at a time with the rows of those already chosen set aside.

The score of a slice S against the rest R is a two-sample version of Cox's recalibration test
(:mod:`pbr_core.significance`). In each of S and R the sums U = sum (y - p)(1, x) and
I = sum p(1 - p)(1, x; x, x^2), x = logit p, give the one-step estimate theta = I^-1 U of the
recalibration logit P(Y = 1) = a + b x away from (a, b) = (0, 1) (calibration in the large and the
slope), with covariance about I^-1. The score is the Wald statistic of their difference,
D = (theta_S - theta_R)' (I_S^-1 + I_R^-1)^-1 (theta_S - theta_R), about chi^2(2) when S is
calibrated like the rest: large for a slice whose miscalibration differs from the rest's, small when
the whole file is miscalibrated alike (which the overall test already says). Only the choice uses it;
what is claimed is confirmed on other rows.

**One finding once** (forward selection): once a slice is chosen, its rows are set aside and every
other slice is scored again on its remaining rows against the remaining rest. A part of a chosen
slice (education = Bachelors and native_country = United-States after education = Bachelors) then
has no rows left; a slice overlapping a chosen one is judged by its rows outside it; a wider slice
by its rows beyond the chosen part. Each chosen slice is confirmed on its own rows: those not in a
slice chosen before it.

The search runs on the search half's rows with the smallest hashes, at most :data:`SEARCH_ROWS`
(every row of the search half of a file up to twice that): the forward selection needs each row's
slice codes, which a stream keeps for this bounded uniform sample; the slices' sizes come from
counts over every row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pbr_core.significance import EPS
from pbr_core.slices._plan import Plan, _sample_key
from pbr_core.slices._strata import _pinv2, _quad, strata_edges

#: Rows of the search half the search scores (a uniform sample by hash beyond that: 1M rows of 10
#: slice columns are ~36 MB).
SEARCH_ROWS = 1_000_000


def search_terms(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(6, rows): each row's part of n, sum (y - p), sum (y - p) x, sum w, sum w x, sum w x^2
    (x = logit p, w = p(1 - p))."""
    p = np.asarray(p, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    pc = np.clip(p, EPS, 1 - EPS)
    x = np.log(pc) - np.log1p(-pc)
    w = p * (1 - p)
    r = y - p
    return np.stack([np.ones_like(p), r, r * x, w, w * x, w * x * x])


@dataclass
class SearchSample:
    """The search half's rows with the smallest hashes (their slice codes, p and y) and the rows of
    every cell of every grouping in each half; feed with :meth:`update`, combine with :meth:`merge`."""

    plan: Plan
    keys: np.ndarray = field(repr=False)      # (m,) uint64 hash keys
    codes: np.ndarray = field(repr=False)     # (m, columns) int16
    p: np.ndarray = field(repr=False)
    y: np.ndarray = field(repr=False)
    counts: np.ndarray = field(repr=False)    # (2, cells): rows of each cell in the search / confirmation half
    cap: int = SEARCH_ROWS

    @classmethod
    def empty(cls, plan: Plan, cap: int = SEARCH_ROWS) -> "SearchSample":
        C = len(plan.columns)
        return cls(plan=plan, keys=np.zeros(0, dtype=np.uint64), codes=np.zeros((0, C), dtype=np.int16),
                   p=np.zeros(0), y=np.zeros(0), counts=np.zeros((2, plan.n_cells)), cap=int(cap))

    def update(self, codes: np.ndarray, half: np.ndarray, h: np.ndarray, p: np.ndarray, y: np.ndarray
               ) -> "SearchSample":
        """Add rows: their codes (rows, columns of the plan), half (0 search, 1 confirmation), hash, p and y."""
        plan = self.plan
        for g, (off, size) in enumerate(zip(plan.offsets, plan.sizes)):
            cell = plan.cells(codes, g) * 2 + half
            self.counts[:, off:off + size] += np.bincount(cell, minlength=2 * size).reshape(size, 2).T
        s = half == 0
        self._add(_sample_key(h[s]), codes[s].astype(np.int16), np.asarray(p, np.float64)[s],
                  np.asarray(y, np.float64)[s])
        return self

    def _add(self, keys, codes, p, y) -> None:
        self.keys = np.concatenate([self.keys, keys])
        self.codes = np.concatenate([self.codes, codes])
        self.p = np.concatenate([self.p, p])
        self.y = np.concatenate([self.y, y])
        if self.keys.size > 2 * self.cap:
            self._trim()

    def _trim(self) -> None:
        """The ``cap`` rows with the smallest keys, in key order (the same rows in the same order
        however the batches were read and merged)."""
        keep = np.argpartition(self.keys, self.cap - 1)[:self.cap] if self.keys.size > self.cap else \
            np.arange(self.keys.size)
        keep = keep[np.argsort(self.keys[keep], kind="stable")]
        self.keys, self.codes, self.p, self.y = self.keys[keep], self.codes[keep], self.p[keep], self.y[keep]

    def merge(self, other: "SearchSample") -> "SearchSample":
        if other.plan != self.plan:
            raise ValueError("Cannot merge the search rows of different plans.")
        self.counts += other.counts
        self._add(other.keys, other.codes, other.p, other.y)
        return self

    def finish(self) -> "SearchSample":
        self._trim()
        return self


# --------------------------------------------------------------------------------- the score
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


def _cell_sums(plan: Plan, codes: np.ndarray, terms: np.ndarray) -> np.ndarray:
    """(6, cells): the sums of ``terms`` (6, rows) over the rows of every cell of every grouping."""
    out = np.zeros((terms.shape[0], plan.n_cells))
    for g, (off, size) in enumerate(zip(plan.offsets, plan.sizes)):
        cell = plan.cells(codes, g)
        for k in range(terms.shape[0]):
            out[k, off:off + size] = np.bincount(cell, weights=terms[k], minlength=size)
    return out


# --------------------------------------------------------------------------------- the choice
@dataclass(frozen=True)
class Candidate:
    """A slice chosen by the search: its conditions ((column index, code), ...), its rows in the file
    (every row, both halves: the slice's size), its remaining search rows when chosen and its score."""

    conditions: tuple[tuple[int, int], ...]
    n_search: int
    n_confirm: int
    remaining: int
    chi2: float
    p: float


@dataclass
class Choice:
    """What the search did: the slices sent to confirmation (in the order chosen) and how many it scored."""

    chosen: list[Candidate]
    scored: int        # slices with enough rows, scored
    screened: int      # of which departed from the rest at the screening level at the first step
    sample: int = 0    # search rows scored
    search_rows: int = 0
    # inner edges of the score's strata, from the search rows (the confirmation compares within them)
    edges: tuple[float, ...] = ()


def choose(plan: Plan, search: SearchSample, *, min_rows: int, max_slices: int, screen: float) -> Choice:
    """Forward selection (see the module docstring): at each step, among the slices of at least
    ``min_rows`` rows in the file whose remaining search rows are calibrated worse than the remaining
    rest and depart from it with p < ``screen``, the one ranked first by :func:`_rank_key`; its rows
    are then set aside. At most ``max_slices`` steps."""
    search.finish()
    codes = search.codes.astype(np.intp)
    terms = search_terms(search.p, search.y)
    sums = _cell_sums(plan, codes, terms)
    n_half, n_conf = search.counts
    share = codes.shape[0] / max(float(n_half.sum() / max(len(plan.groupings), 1)), 1.0)  # the sample's share
    static = _slice_cells(plan) & (n_half + n_conf >= min_rows) & ~_same_rows_as_a_single(plan, n_half + n_conf)
    idx = np.flatnonzero(static)
    min_left = max(2.0, min_rows / 2 * share)   # remaining search rows for a slice to be scored again
    chosen: list[Candidate] = []
    screened = 0
    active = np.ones(codes.shape[0], dtype=bool)
    for step in range(max_slices):
        total = terms[:, active].sum(axis=1)
        s = sums[:, idx]
        ok = (s[0] >= min_left) & (total[0] - s[0] >= min_left)
        dep = departure(s, total[:, None] - s)
        keep = ok & (dep["per_row_slice"] > dep["per_row_rest"]) & (dep["p"] < screen)
        if step == 0:
            screened = int(keep.sum())
        if not keep.any():
            break
        key = np.where(keep, _rank_key(plan, idx, dep), -np.inf)
        best = int(np.argmax(key))  # first in plan order among ties
        flat = int(idx[best])
        conds = _conditions(plan, flat)
        chosen.append(Candidate(conditions=conds, n_search=int(n_half[flat]), n_confirm=int(n_conf[flat]),
                                remaining=int(s[0, best]), chi2=float(dep["chi2"][best]), p=float(dep["p"][best])))
        rows = active.copy()
        for i, code in conds:
            rows &= codes[:, i] == code
        sums -= _cell_sums(plan, codes[rows], terms[:, rows])
        active &= ~rows
    return Choice(chosen=chosen, scored=int(idx.size), screened=screened, sample=int(codes.shape[0]),
                  search_rows=int(round(n_half.sum() / max(len(plan.groupings), 1))),
                  edges=strata_edges(search.p, n_conf.sum() / max(len(plan.groupings), 1)) if chosen else ())


def _slice_cells(plan: Plan) -> np.ndarray:
    """Which cells are slices: none of their codes is a column's rare values (its last code)."""
    valid = np.zeros(plan.n_cells, dtype=bool)
    for g, (off, size) in enumerate(zip(plan.offsets, plan.sizes)):
        dims = [plan.columns[i].n_codes for i in plan.groupings[g]]
        codes = np.unravel_index(np.arange(size), dims)
        valid[off:off + size] = np.all([c < d - 1 for c, d in zip(codes, dims)], axis=0)
    return valid


def _same_rows_as_a_single(plan: Plan, counts: np.ndarray) -> np.ndarray:
    """Pair cells holding exactly the rows of one of their two single-column cells (``counts``: rows per
    cell; a pair's rows are a subset of each of its singles', so equal counts mean the same rows).

    Why: where one column fixes another (an LLM file's subject and its subject_group), "subject =
    marketing and subject_group = business" is the slice "subject = marketing" named by one condition
    too many, and it even ranked first: the Bonferroni count m of the pairs scored (one non-empty
    pair per subject) was below that of the single values, so the same p-value gave it the higher
    rank. Such pairs are not scored: the slice keeps its simplest name."""
    single = {grouping[0]: int(plan.offsets[g]) for g, grouping in enumerate(plan.groupings) if len(grouping) == 1}
    out = np.zeros(plan.n_cells, dtype=bool)
    for g, grouping in enumerate(plan.groupings):
        if len(grouping) != 2 or not all(i in single for i in grouping):
            continue
        i, j = grouping
        n_j = plan.columns[j].n_codes
        off, size = int(plan.offsets[g]), int(plan.sizes[g])
        code_i, code_j = np.divmod(np.arange(size), n_j)  # Plan.cells: cell = code_i * n_j + code_j
        pair = counts[off:off + size]
        out[off:off + size] = (pair == counts[single[i] + code_i]) | (pair == counts[single[j] + code_j])
    return out


def _rank_key(plan: Plan, idx: np.ndarray, dep: dict[str, np.ndarray]) -> np.ndarray:
    """-ln(p x m): the departure's p-value times the number m of slices scored with as many conditions
    (Bonferroni within each order). A pair of columns must depart about ten times more surely than a
    single column to rank above it (Adult: ~90 single values, ~900 pairs), so that a finding is named
    by its simplest description (education = Bachelors, not education = Bachelors and native_country =
    United-States, 90 % of the same rows)."""
    from scipy.special import log_ndtr

    order = np.searchsorted(plan.offsets, idx, side="right") - 1
    n_cond = np.array([len(g) for g in plan.groupings])[order]
    m = np.bincount(n_cond, minlength=3).astype(np.float64)
    d = dep["chi2"]
    with np.errstate(invalid="ignore"):
        log_p = np.where(dep["df"] == 2, -d / 2, np.log(2) + log_ndtr(-np.sqrt(d)))
    return -log_p - np.log(m[n_cond])


def _conditions(plan: Plan, flat: int) -> tuple[tuple[int, int], ...]:
    """The (column index, code) pairs of the cell at ``flat``."""
    g = int(np.searchsorted(plan.offsets, flat, side="right")) - 1
    return tuple(zip(plan.groupings[g], plan.cell_codes(g, flat - int(plan.offsets[g]))))
