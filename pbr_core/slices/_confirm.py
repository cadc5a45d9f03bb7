"""The confirmation half: each chosen slice's own rows (those in no slice chosen before it), their
sums of the test of calibration, reliability bins and (small slices) the rows themselves, and the
whole file's, in one mergeable value, whether the rows are in memory or stream by.

A slice's own confirmation rows are known only once they are read, so its B = floor(n^(1/3)) is too:
the bins are kept for every B its own rows can give, from a bound on its overlap with the slices
chosen before it (counted per cell by the search pass).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pbr_core import metrics as M
from pbr_core import significance as S
from pbr_core.groups import exact_eligible
from pbr_core.slices._plan import Plan
from pbr_core.slices._search import Candidate
from pbr_core.slices._strata import stratum


def masks(plan: Plan, chosen: list[Candidate], codes: dict[int, np.ndarray], n: int) -> np.ndarray:
    """(rows, slices): whether each row meets each chosen slice's conditions (``codes[i]``: column i's
    code of every row)."""
    out = np.ones((n, len(chosen)), dtype=bool)
    for s, cand in enumerate(chosen):
        for i, code in cand.conditions:
            out[:, s] &= codes[i] == code
    return out


def own(inside: np.ndarray) -> np.ndarray:
    """Each slice's own rows: in it and in no slice chosen before it."""
    out = inside.copy()
    for j in range(1, inside.shape[1]):
        out[:, j] &= ~inside[:, :j].any(axis=1)
    return out


def columns_used(chosen: list[Candidate]) -> list[int]:
    return sorted({i for c in chosen for i, _ in c.conditions})


def bin_ranges(plan: Plan, chosen: list[Candidate], confirm_counts: np.ndarray) -> tuple[tuple[int, int], ...]:
    """For each chosen slice, the smallest and largest B = floor(n^(1/3)) its own confirmation rows can
    give: n is at most its confirmation rows, and at least that minus its rows in each slice chosen
    before it (counted exactly when the two slices span at most two columns, else all of that slice's)."""
    where = {cols: g for g, cols in enumerate(plan.groupings)}

    def count(conditions) -> int | None:
        cols: dict[int, int] = {}
        for i, code in conditions:
            if cols.setdefault(i, code) != code:
                return 0  # two values of one column: no common row
        g = where.get(tuple(sorted(cols)))
        if g is None:
            return None
        cell = 0
        for i in sorted(cols):
            cell = cell * plan.columns[i].n_codes + cols[i]
        return int(confirm_counts[plan.offsets[g] + cell])

    out = []
    for j, c in enumerate(chosen):
        hi = c.n_confirm
        lo = hi
        for k in chosen[:j]:
            both = count((*k.conditions, *c.conditions))
            lo -= k.n_confirm if both is None else both
        out.append((M.optimal_n_bins(max(lo, 1)), M.optimal_n_bins(max(hi, 1))))
    return tuple(out)


@dataclass
class ConfirmSums:
    """Per chosen slice, on its own confirmation rows: the sums of the test of calibration
    (:data:`pbr_core.significance.SUM_NAMES`), reliability bins at every B in its range and, up to
    :data:`~pbr_core.significance.EXACT_MAX_ROWS`, the rows (for the exact test); its own rows in each
    half and its rows in each slice before it; the confirmation half's totals (for the rest of the
    file); the whole file's sums and bins (and its rows when few enough for the exact test)."""

    ranges: tuple[tuple[int, int], ...]
    overall_bins: int
    keep_all: bool
    sums: np.ndarray = field(repr=False)          # (N_SUMS, k)
    moments: np.ndarray = field(repr=False)       # (2, k): sum p^2, sum y p (the calibration slope)
    own_rows: np.ndarray = field(repr=False)      # (2, k): own rows in the search / confirmation half
    overlap: np.ndarray = field(repr=False)       # (k, k): rows in both slice i and slice j
    confirm_total: np.ndarray = field(repr=False)  # (N_SUMS,)
    overall: np.ndarray = field(repr=False)       # (N_SUMS,)
    bins: list = field(repr=False)                # per slice, per B in its range: (3, B) count, sum p, sum y
    overall_sums: np.ndarray = field(repr=False)  # (3, B)
    kept: dict = field(default_factory=dict, repr=False)   # slice -> list of (2, m) blocks
    kept_all: list = field(default_factory=list, repr=False)
    # Strata of the score (inner ``edges`` from the search half, :func:`~pbr_core.slices._strata.strata_edges`):
    # rows, outcome sum and score sum per stratum of each slice's own confirmation rows, and of the
    # confirmation half's (the rest: that less the slice and those chosen before it), for the comparison
    # at the same predicted probability (:func:`~pbr_core.slices._strata.compare`).
    edges: tuple[float, ...] = ()
    strata: np.ndarray = field(default=None, repr=False)         # (3, K, k)
    strata_total: np.ndarray = field(default=None, repr=False)   # (3, K)

    @classmethod
    def empty(cls, ranges: tuple[tuple[int, int], ...], n_rows: int,
              edges: tuple[float, ...] = ()) -> "ConfirmSums":
        k = len(ranges)
        B = M.optimal_n_bins(n_rows) if n_rows > 0 else 1
        return cls(ranges=tuple(ranges), overall_bins=B, keep_all=n_rows <= S.EXACT_MAX_ROWS,
                   sums=np.zeros((S.N_SUMS, k)), moments=np.zeros((2, k)), own_rows=np.zeros((2, k)), overlap=np.zeros((k, k)),
                   confirm_total=np.zeros(S.N_SUMS), overall=np.zeros(S.N_SUMS),
                   bins=[[np.zeros((3, b)) for b in range(lo, hi + 1)] for lo, hi in ranges],
                   overall_sums=np.zeros((3, B)), edges=tuple(float(e) for e in edges),
                   strata=np.zeros((3, len(edges) + 1, k)), strata_total=np.zeros((3, len(edges) + 1)))

    def update(self, inside: np.ndarray, half: np.ndarray, p: np.ndarray, y: np.ndarray,
               written: np.ndarray | None = None) -> "ConfirmSums":
        """Add rows: ``inside`` (rows, slices) from :func:`masks`, their half, p and y (``written``: p as the
        file wrote them, :meth:`pbr_core.predictions.Predictions.as_written`). How finely the file rounded
        its values is read from every row (``overall``): each slice is tested with the file's."""
        p = np.asarray(p, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        self.overall += S.calibration_sums(p, y, written)
        self._bin(self.overall_sums, p, y, self.overall_bins)
        if self.keep_all:
            self.kept_all.append(np.stack([p, y]))
        mine = own(inside)
        as_int = inside.astype(np.float64)
        self.overlap += as_int.T @ as_int
        conf = half == 1
        self.own_rows[0] += mine[~conf].sum(axis=0)
        self.own_rows[1] += mine[conf].sum(axis=0)
        pc, yc = p[conf], y[conf]
        self.confirm_total += S.calibration_sums(pc, yc)
        K = len(self.edges) + 1
        at = stratum(pc, self.edges)
        for i, v in enumerate((None, yc, pc)):
            self.strata_total[i] += np.bincount(at, weights=v, minlength=K)
        for s, (lo, hi) in enumerate(self.ranges):
            rows = mine[conf, s]
            ps, ys = pc[rows], yc[rows]
            self.sums[:, s] += S.calibration_sums(ps, ys)
            for i, v in enumerate((None, ys, ps)):
                self.strata[i, :, s] += np.bincount(at[rows], weights=v, minlength=K)
            self.moments[:, s] += (ps @ ps, ys @ ps)
            for B, into in zip(range(lo, hi + 1), self.bins[s]):
                self._bin(into, ps, ys, B)
            self._keep(s, ps, ys)
        return self

    def _keep(self, s: int, p: np.ndarray, y: np.ndarray) -> None:
        """Keep the rows of slice ``s`` for its exact test while they are at most EXACT_MAX_ROWS; beyond,
        None (the test is then analytic, in memory too: its rows are too many to draw)."""
        blocks = self.kept.setdefault(s, [])
        if blocks is None or not p.size:
            return
        if sum(b.shape[1] for b in blocks) + p.size > S.EXACT_MAX_ROWS:
            self.kept[s] = None
            return
        blocks.append(np.stack([p, y]))

    @staticmethod
    def _bin(into: np.ndarray, p: np.ndarray, y: np.ndarray, B: int) -> None:
        b = M.bin_index(p, B)
        into[0] += np.bincount(b, minlength=B)
        into[1] += np.bincount(b, weights=p, minlength=B)
        into[2] += np.bincount(b, weights=y, minlength=B)

    def merge(self, other: "ConfirmSums") -> "ConfirmSums":
        if (other.ranges, other.overall_bins, other.edges) != (self.ranges, self.overall_bins, self.edges):
            raise ValueError("Cannot merge the confirmation sums of other slices.")
        for name in ("sums", "moments", "own_rows", "overlap", "confirm_total", "overall", "overall_sums", "strata",
                     "strata_total"):
            getattr(self, name).__iadd__(getattr(other, name))
        for mine, theirs in zip(self.bins, other.bins):
            for a, b in zip(mine, theirs):
                a += b
        for s, blocks in other.kept.items():
            if blocks is None:
                self.kept[s] = None
            else:
                for b in blocks:
                    self._keep(s, b[0], b[1])
        self.kept_all.extend(other.kept_all)
        return self

    # ------------------------------------------------------------------------- reading
    def n_bins(self, s: int) -> int:
        return M.optimal_n_bins(int(self.sums[0, s])) if self.sums[0, s] > 0 else 1

    def slice_bins(self, s: int) -> np.ndarray:
        """(3, B) of slice ``s`` at B = floor(n^(1/3)) of its own confirmation rows."""
        lo, hi = self.ranges[s]
        B = min(max(self.n_bins(s), lo), hi)
        return self.bins[s][B - lo]

    def exact(self) -> np.ndarray:
        """The slices whose own confirmation rows may get the exact test (:func:`pbr_core.groups.exact_eligible`)."""
        return exact_eligible([int(v) for v in self.sums[0]]) if self.sums.shape[1] else np.zeros(0, dtype=bool)

    def rows(self, s: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The own confirmation rows (p, y) of slice ``s`` when kept for its exact test, else None."""
        blocks = self.kept.get(s, [])
        if blocks is None or not self.exact()[s]:
            return None
        both = np.concatenate(blocks or [np.zeros((2, 0))], axis=1)
        return both[0], both[1]

    def all_rows(self) -> tuple[np.ndarray, np.ndarray] | None:
        if not self.keep_all:
            return None
        both = np.concatenate(self.kept_all or [np.zeros((2, 0))], axis=1)
        return both[0], both[1]
