"""Rows that are exact copies of another row, and whether there are more of them than chance gives.

Every test of calibration counts each row as a separate observation. A file in which every row appears
twice (a join that doubled it, an export appended twice) has half the information it seems to have, and
a calibrated model then reads as miscalibrated: audit 9b drew outcomes from a calibrated model's Adult
scores and doubled every row; the test called it "miscalibrated beyond chance" (level 3.5 %) in 17 % of
files of 500 rows and 18 % of 2,000, the CORP MCB (level 1 %) in 40 % and 82 %.

Repeated rows are not proof of a copy: a tree model or a rounded export repeats its scores, and a file
with few other columns then repeats whole rows. What a copy leaves that chance does not is the *shape*
of the repeats. If the rows are independent cases, the number of distinct rows seen exactly k times,
f_k, is (nearly: sampling n rows is close to Poisson sampling) a mixture of Poisson probabilities
exp(-l) l^k / k! over the rows' distinct values, and for any rate l

    P(k) / (P(k - 1) + P(k + 1)) = 1 / (k / l + l / (k + 1)) <= sqrt((k + 1) / k) / 2

(its largest value, at l = sqrt(k (k + 1)): 0.61 for k = 2, 0.58 for k = 3, towards 0.5). So chance keeps
f_k at most :func:`chance_share` (k) x (f_{k-1} + f_{k+1}), whatever the values and their frequencies.
A file whose every row appears twice has f_2 = n / 2 and f_1 = f_3 = 0, far beyond that. The bound holds
for every mixture, so it never needs to know how coarse the scores are; the price is that a copy of a
part of a fine-grained file (its rows otherwise seen once) is not caught until about 40 % of the rows
are copies (:data:`MIN_SHARE`, :data:`MIN_Z`; measured in docs/claims.md row 1b).

Nothing is removed: the loader only says so (:func:`duplicate_note`), in words for a person, because
copies may also be real separate cases (the same inputs seen twice).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["MIN_COPIES", "MIN_SHARE", "MIN_Z", "DuplicateRows", "RowHashes", "chance_share", "duplicate_note",
           "duplicate_rows", "identical_files_note", "streamed_duplicate_note"]

#: The repeats beyond chance must be at least this share of the rows before the note is shown: a few
#: copies change no test by much (a 5 % share widens the test's real spread by at most about 5 %).
MIN_SHARE = 0.05
#: ... and at least this many rows (a 20-row file with 2 copies says nothing).
MIN_COPIES = 5
#: How far beyond the chance bound (in standard deviations of the counts) the repeats must be:
#: the bound is an upper bound on the mean, the counts scatter around it.
MIN_Z = 3.0


def chance_share(k: int) -> float:
    """The most that independent rows make f_k, as a share of f_{k-1} + f_{k+1} (module docstring)."""
    return math.sqrt((k + 1) / k) / 2


class DuplicateRows:
    """The exact copies among a file's rows: ``copies`` (rows equal to an earlier row, n - distinct rows),
    ``beyond_chance`` (the copies the frequencies of the distinct rows do not explain by chance, 0 when
    they do), ``z`` (how far beyond chance, in standard deviations) and ``n``."""

    def __init__(self, n: int, copies: int, beyond_chance: float, z: float) -> None:
        self.n, self.copies, self.beyond_chance, self.z = n, copies, beyond_chance, z

    @property
    def notable(self) -> bool:
        """More copies than chance gives, and enough of them to matter."""
        return (self.z >= MIN_Z and self.beyond_chance >= max(MIN_SHARE * self.n, MIN_COPIES))

    def __repr__(self) -> str:
        return (f"DuplicateRows(n={self.n}, copies={self.copies}, beyond_chance={self.beyond_chance:.1f}, "
                f"z={self.z:.2f})")


def _row_hashes(columns: list, rows: np.ndarray | None = None, h: np.ndarray | None = None) -> np.ndarray:
    """One 64-bit hash per row over all the columns (restricted to ``rows``), continuing ``h`` (the hashes
    of earlier columns) if given. Two different rows share one with chance about 1e-7 among 10^6 rows:
    far below anything that could change the note."""
    import pandas as pd

    for col in columns:
        c = col(rows) if callable(col) else (col if rows is None else col[rows])
        try:  # pandas' hash of each value (NaN as NaN, -0.0 as 0.0; text by its characters)
            v = pd.util.hash_array(np.ascontiguousarray(c))
        except (TypeError, ValueError):  # mixed objects, lists (a JSON 'choices' column): by their text
            v = pd.util.hash_array(np.array([repr(x) for x in c], dtype=object))
        h = v if h is None else (h * np.uint64(1000003)) ^ v  # mixed column after column
    return h


def _columns(preds, other_columns: bool = True) -> list:
    """Every value a row carries: its scores as read, its label (or outcome) and every other column
    (these as functions of the rows wanted: a text column is converted only for the rows compared;
    left out with ``other_columns=False``, as a streamed pass reads the predictions only)."""
    cols: list = []
    if preds.has_labels:
        cols.append(preds.labels)
    scores = preds.logits if preds.logits is not None else preds.probs
    if scores is not None:
        # binary: p(y=0) is 1 - p(y=1), nothing more to compare
        cols += [scores[:, 1]] if preds.kind == "binary" and preds.logits is None else \
            [scores[:, k] for k in range(scores.shape[1])]
    else:
        cols += [preds.confidence, preds.predicted]
    meta = preds.metadata
    if meta is not None and other_columns:
        for name in meta.columns:
            series = meta[name]
            cols.append(lambda rows, s=series: (s if rows is None else s.iloc[rows]).to_numpy())
    return cols


def duplicate_rows(preds) -> DuplicateRows:
    """The exact copies among the rows of ``preds`` (scores, label and every other column equal) and how
    many of them chance does not explain (module docstring).

    Cheap on files without copies: rows are first compared on their label and first score only, and the
    whole row is hashed only for the rows that share those with another row."""
    import pandas as pd

    n = preds.n
    if n < 2:
        return DuplicateRows(n, 0, 0.0, 0.0)
    cols = _columns(preds)
    lead = 2 if preds.has_labels else 1  # the label and the first score
    first = _row_hashes(cols[:lead])
    rows = np.flatnonzero(pd.Series(first).duplicated(keep=False).to_numpy())
    if rows.size == 0:
        return DuplicateRows(n, 0, 0.0, 0.0)
    # sizes of the groups of equal rows among the candidates; every other row is seen once
    full = _row_hashes(cols[lead:], rows, first[rows]) if len(cols) > lead else first[rows]
    sizes = pd.Series(full).value_counts(sort=False).to_numpy()
    f = np.bincount(sizes)
    f[1] += n - rows.size
    return _beyond_chance(n, f)


def _beyond_chance(n: int, f: np.ndarray) -> DuplicateRows:
    """The copies among ``n`` rows whose distinct rows are seen k times ``f[k]`` times (f_k), and how
    many of them chance does not explain (module docstring)."""
    f = np.append(np.asarray(f, dtype=np.int64), 0)  # f_{k+1} of the largest k
    copies = int(n - f[1:].sum())
    beyond, z = 0.0, 0.0
    for k in range(2, f.size - 1):
        if f[k] == 0:
            continue
        chance = chance_share(k) * (f[k - 1] + f[k + 1])
        excess = f[k] - chance
        if excess <= 0:
            continue
        # the spread of f_k - chance when both are Poisson-like counts (their covariance only widens it
        # by little for the mixtures that come near the bound: simulated, tests/test_duplicate_rows.py)
        sd = math.sqrt(f[k] + chance_share(k) ** 2 * (f[k - 1] + f[k + 1]) + 1.0)
        beyond += (k - 1) * excess
        z = max(z, excess / sd)
    return DuplicateRows(n, copies, beyond, z)


class RowHashes:
    """The rows' hashes (scores and label) of a streamed dataset, kept for :func:`duplicate_rows`' rule
    in bounded memory: each distinct row's hash with its count of rows. A distinct row is kept when its
    hash is at most ``limit``, and ``limit`` halves whenever more than ``cap`` distinct rows are kept.
    The choice depends on the row's values only, so a row's copies are all kept or all left out, and the
    kept rows are a random sample of the distinct rows with every copy of each (the frequencies f_k of
    the rule, thinned by the same factor for every k: the chance bound holds on the sample as on the
    whole). Batches add, partial samples merge; both ways give the same sample."""

    #: Distinct rows kept: 4 MB of hashes and counts once compacted (as pickled, e.g. for a Dask merge),
    #: at most twice that while batches accumulate between thinnings.
    CAP = 1 << 18

    def __init__(self, cap: int = CAP) -> None:
        self.cap = int(cap)
        self.limit = np.uint64(2**64 - 1)
        self.n = 0                      # rows seen
        self._parts: list[tuple[np.ndarray, np.ndarray]] = []  # (distinct hashes, their rows), may overlap
        self._size = 0

    def add(self, preds) -> "RowHashes":
        """Add a validated batch of predictions."""
        self.n += preds.n
        if preds.n:
            h = _row_hashes(_columns(preds, other_columns=False))
            self._keep(*np.unique(h[h <= self.limit], return_counts=True))
        return self

    def merge(self, other: "RowHashes") -> "RowHashes":
        """Both samples' rows (in place; returns self)."""
        self.n += other.n
        self.limit = min(self.limit, other.limit)
        for h, c in other._parts:
            self._keep(h, c)
        self._thin()
        return self

    def _keep(self, h: np.ndarray, c: np.ndarray) -> None:
        if h.size:
            self._parts.append((h, c.astype(np.int64)))
            self._size += h.size
            if self._size > 2 * self.cap:
                self._thin()

    def _thin(self) -> None:
        """One part of distinct hashes at most ``limit``, halving ``limit`` until at most ``cap`` are left."""
        h, c = self._compact()
        while h.size > self.cap:
            self.limit = np.uint64(int(self.limit) // 2)
            keep = h <= self.limit
            h, c = h[keep], c[keep]
        self._parts = [(h, c)] if h.size else []
        self._size = h.size

    def _compact(self) -> tuple[np.ndarray, np.ndarray]:
        if not self._parts:
            return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
        h = np.concatenate([p[0] for p in self._parts])
        c = np.concatenate([p[1] for p in self._parts])
        keep = h <= self.limit
        h, inverse = np.unique(h[keep], return_inverse=True)
        return h, np.bincount(inverse, weights=c[keep], minlength=h.size).astype(np.int64)

    @property
    def sampled(self) -> bool:
        """Whether only a sample of the rows was kept."""
        return int(self.limit) < 2**64 - 1

    def rows(self) -> DuplicateRows:
        """:class:`DuplicateRows` of the kept rows (all rows unless :attr:`sampled`)."""
        h, c = self._compact()
        n = int(c.sum())
        if n < 2:
            return DuplicateRows(n, 0, 0.0, 0.0)
        return _beyond_chance(n, np.bincount(c))

    def __getstate__(self) -> dict:  # one pair of arrays of at most ``cap`` on the wire (Dask)
        self._thin()
        h, c = self._compact()
        return {"cap": self.cap, "limit": int(self.limit), "n": self.n, "hashes": h, "counts": c}

    def __setstate__(self, state: dict) -> None:
        self.cap, self.limit, self.n = state["cap"], np.uint64(state["limit"]), state["n"]
        h, c = state["hashes"], state["counts"]
        self._parts = [(h, c)] if h.size else []
        self._size = int(h.size)


def duplicate_note(preds) -> str:
    """The loader's note when a notable share of rows are exact copies beyond chance, else ""."""
    try:
        d = duplicate_rows(preds)
    except (TypeError, ValueError):  # a value no hash can read: a note must never stop a load
        return ""
    if not d.notable:
        return ""
    return _note_words(f"{d.copies:,} of the {d.n:,} rows ({100 * d.copies / d.n:.0f} %)",
                       "the same scores, label and every other column")


def streamed_duplicate_note(sample: RowHashes | None) -> str:
    """The note of :func:`duplicate_note` for a streamed dataset, from its :class:`RowHashes` ("" when
    no notable share of copies, or no sample was kept)."""
    if sample is None:
        return ""
    d = sample.rows()
    if not d.notable:
        return ""
    share = 100 * d.copies / d.n
    if sample.sampled:
        how_many = (f"About {share:.0f} % of the {sample.n:,} rows (measured on {d.n:,} of them, chosen so that a "
                    "row and its copies are in or out together)")
    else:
        how_many = f"{d.copies:,} of the {d.n:,} rows ({share:.0f} %)"
    return _note_words(how_many, "the same scores and label (the other columns are not read in a streamed pass)")


def _note_words(how_many: str, same: str) -> str:
    return (f"{how_many} are exact copies of another row: {same}, far more than repeated values give by chance. "
            "The tests of calibration count each row as a separate case, so copies make a calibrated model look "
            "miscalibrated (in a simulation where every row appeared twice, a calibrated model was called "
            "miscalibrated 4 to 5 times as often as it should be). If the copies come from a join or an export "
            "that repeated rows, remove them and load the file again; if each row is a real separate case (the "
            "same inputs seen again), leave them. Nothing was removed.")


def identical_files_note(groups: list[list[str]]) -> str:
    """The note on files of a dataset with the same bytes as another of its files
    (:meth:`pbr_core.stream.Dataset.identical_files`), else ""."""
    if not groups:
        return ""
    import os

    names = [p for group in groups for p in group]
    short = len({os.path.basename(p) for p in names}) == len(names)
    name = (lambda p: repr(os.path.basename(p))) if short else repr
    sets = [f"{' and '.join(name(p) for p in group[1:])} {'has' if len(group) == 2 else 'have'} the same contents as "
            f"{name(group[0])}" for group in groups[:5]]
    more = f"; and {len(groups) - 5} more such sets" if len(groups) > 5 else ""
    return (f"Some files are copies of another file of the dataset: {'; '.join(sets)}{more}. Every file is read, so "
            "their rows count two or more times. The tests of calibration count each row as a separate case, so "
            "copies make a calibrated model look miscalibrated. If a file was copied in by mistake, remove the copy "
            "and run again. Nothing was left out.")
