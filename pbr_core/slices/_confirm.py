"""The confirmation half: the chosen slices' sums, reliability bins and (small slices) rows, and the
whole file's, in one mergeable value, whether the rows are in memory or stream by."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pbr_core import metrics as M
from pbr_core import significance as S
from pbr_core.groups import exact_eligible
from pbr_core.slices._plan import Plan
from pbr_core.slices._search import Candidate


def masks(plan: Plan, chosen: list[Candidate], codes: dict[int, np.ndarray], n: int) -> np.ndarray:
    """(rows, slices): whether each row is in each chosen slice, from the codes of the columns the
    slices use (``codes[i]``: column i's code of every row)."""
    out = np.ones((n, len(chosen)), dtype=bool)
    for s, cand in enumerate(chosen):
        for i, code in cand.conditions:
            out[:, s] &= codes[i] == code
    return out


def columns_used(chosen: list[Candidate]) -> list[int]:
    return sorted({i for c in chosen for i, _ in c.conditions})


@dataclass
class ConfirmSums:
    """Per chosen slice: the sums of the test of calibration (:data:`pbr_core.significance.SUM_NAMES`)
    of its confirmation rows, their reliability bins (B = floor(n^(1/3)) of its confirmation rows,
    known from the search pass) and, for the slices that may get the exact test, the rows themselves;
    the confirmation half's totals (for the rest of the file); the whole file's sums and bins (and its
    rows when they are few enough for the exact test)."""

    n_bins: tuple[int, ...]
    overall_bins: int
    exact: tuple[bool, ...]
    keep_all: bool
    sums: np.ndarray = field(repr=False)          # (N_SUMS, k)
    confirm_total: np.ndarray = field(repr=False)  # (N_SUMS,)
    overall: np.ndarray = field(repr=False)       # (N_SUMS,)
    bins: list = field(repr=False)                # k arrays (3, B_s): count, sum p, sum y
    overall_sums: np.ndarray = field(repr=False)  # (3, B)
    kept: dict = field(default_factory=dict, repr=False)   # slice -> list of (2, m) blocks
    kept_all: list = field(default_factory=list, repr=False)

    @classmethod
    def empty(cls, chosen: list[Candidate], n_rows: int) -> "ConfirmSums":
        n_conf = [c.n_confirm for c in chosen]
        nb = tuple(M.optimal_n_bins(n) if n > 0 else 1 for n in n_conf)
        B = M.optimal_n_bins(n_rows) if n_rows > 0 else 1
        return cls(n_bins=nb, overall_bins=B, exact=tuple(bool(e) for e in exact_eligible(n_conf)),
                   keep_all=n_rows <= S.EXACT_MAX_ROWS, sums=np.zeros((S.N_SUMS, len(chosen))),
                   confirm_total=np.zeros(S.N_SUMS), overall=np.zeros(S.N_SUMS),
                   bins=[np.zeros((3, b)) for b in nb], overall_sums=np.zeros((3, B)))

    def update(self, inside: np.ndarray, half: np.ndarray, p: np.ndarray, y: np.ndarray) -> "ConfirmSums":
        """Add rows: ``inside`` (rows, slices) from :func:`masks`, their half, p and y."""
        p = np.asarray(p, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        self.overall += S.calibration_sums(p, y)
        self._bin(self.overall_sums, p, y, self.overall_bins)
        if self.keep_all:
            self.kept_all.append(np.stack([p, y]))
        conf = half == 1
        pc, yc = p[conf], y[conf]
        self.confirm_total += S.calibration_sums(pc, yc)
        for s in range(inside.shape[1]):
            rows = inside[conf, s]
            ps, ys = pc[rows], yc[rows]
            self.sums[:, s] += S.calibration_sums(ps, ys)
            self._bin(self.bins[s], ps, ys, self.n_bins[s])
            if self.exact[s] and ps.size:
                self.kept.setdefault(s, []).append(np.stack([ps, ys]))
        return self

    @staticmethod
    def _bin(into: np.ndarray, p: np.ndarray, y: np.ndarray, B: int) -> None:
        b = M.bin_index(p, B)
        into[0] += np.bincount(b, minlength=B)
        into[1] += np.bincount(b, weights=p, minlength=B)
        into[2] += np.bincount(b, weights=y, minlength=B)

    def merge(self, other: "ConfirmSums") -> "ConfirmSums":
        if (other.n_bins, other.exact, other.overall_bins) != (self.n_bins, self.exact, self.overall_bins):
            raise ValueError("Cannot merge the confirmation sums of other slices.")
        self.sums += other.sums
        self.confirm_total += other.confirm_total
        self.overall += other.overall
        self.overall_sums += other.overall_sums
        for a, b in zip(self.bins, other.bins):
            a += b
        for s, blocks in other.kept.items():
            self.kept.setdefault(s, []).extend(blocks)
        self.kept_all.extend(other.kept_all)
        return self

    def rows(self, s: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The confirmation rows (p, y) of slice ``s`` when kept for its exact test, else None."""
        if not self.exact[s]:
            return None
        both = np.concatenate(self.kept.get(s, [np.zeros((2, 0))]), axis=1)
        return both[0], both[1]

    def all_rows(self) -> tuple[np.ndarray, np.ndarray] | None:
        if not self.keep_all:
            return None
        both = np.concatenate(self.kept_all or [np.zeros((2, 0))], axis=1)
        return both[0], both[1]
