"""Which slices are searched: the columns, cut how (values, quantile bands, months), and which half
of the rows each row belongs to.

Everything is decided from **mergeable summaries** of the columns (value counts, a hash sample of
the numbers, the first values of each column in file order), so that a file in memory and the same
rows read in a stream (batch by batch, or unit by unit on Dask) get the same plan, hence the same
candidate slices, the same split and the same report.

The split: row ``i`` of file ``f`` goes to the search half or the confirmation half by the top bit of
a 64-bit hash (SplitMix64) of (seed, f, i); the lower bits order the rows for the bottom-k sample
from which quantile bands are cut. The hash depends on the row's position only, never on its
values or outcome, so the halves are independent random halves of the rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Literal, Sequence

import numpy as np
import pandas as pd

from pbr_core.groups import _NOT_A_SEGMENT, bucket_dates, column_keys

#: More different values than this: a text column is not sliced (an id, free text); a number is
#: cut into bands. The same cap as the groups of :func:`pbr_core.groups.calibration_by_group`.
MAX_LEVELS = 1000
#: A numeric column with at most this many different values is sliced by value (a count of children,
#: a grade); with more, into quantile bands.
MAX_NUMERIC_VALUES = 10
#: Quantile bands of a numeric column (quintiles).
N_BANDS = 5
#: Band edges are the quantiles of this many rows of the column, those with the smallest hashes (a
#: uniform sample that merges across batches: keep the k smallest of both).
SAMPLE_ROWS = 50_000
#: Whether a text column holds dates is decided on its first this many values (as the Groups page does).
DATE_HEAD = 200
#: At most this many cells (slices, counted with the cells of values too rare to be a slice) are
#: summed: 8 numbers each, ~13 MB. A plan over the cap drops the pairs of the columns with the most
#: values first, and says so.
MAX_CELLS = 200_000
#: Missing values form a slice of their own, named so.
MISSING = "(missing)"
#: Row keys of numbers that are whole (25.0 -> "25"), as a text column shows them.
How = Literal["values", "bands", "months"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_TOP = np.uint64(63)
_LOW = np.uint64(0x7FFFFFFFFFFFFFFF)


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (a bijection of 64-bit integers with full avalanche)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def row_hash(seed: int, file_index: int, first_row: int, n: int) -> np.ndarray:
    """The 64-bit hash of rows ``first_row .. first_row + n - 1`` of file ``file_index`` (uint64)."""
    with np.errstate(over="ignore"):
        key = _mix(np.array([int(seed) & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64) + _GOLDEN)
        key = _mix(key ^ (np.array([int(file_index)], dtype=np.uint64) * _M1 + _GOLDEN))
        rows = np.arange(int(first_row), int(first_row) + int(n), dtype=np.uint64)
        return _mix(rows * _GOLDEN + key[0])


def halves(h: np.ndarray) -> np.ndarray:
    """0 for the search half, 1 for the confirmation half (the hash's top bit)."""
    return (h >> _TOP).astype(np.intp)


def _sample_key(h: np.ndarray) -> np.ndarray:
    return h & _LOW


# --------------------------------------------------------------------------------- summaries
def _num_text(v: float) -> str:
    """A number as a slice's value: 25.0 -> '25', 2.5 -> '2.5' (the same for an int or a float batch)."""
    return str(int(v)) if float(v).is_integer() and abs(v) < 2 ** 53 else f"{v:.6g}"


@dataclass
class ColumnSummary:
    """What the plan needs to know about one column, from some of its rows; :meth:`merge` adds rows."""

    kinds: set = field(default_factory=set)          # dtype kinds seen: "n" numbers, "t" text, "d" dates
    counts: dict = field(default_factory=dict)      # value (float for numbers, text otherwise) -> rows
    many: bool = False                              # more than MAX_LEVELS values (counts dropped)
    missing: int = 0
    sample_keys: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    sample_values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    integer: bool = True                            # every number seen is whole
    lo: float = np.inf
    hi: float = -np.inf

    def merge(self, other: "ColumnSummary") -> "ColumnSummary":
        self.kinds |= other.kinds
        self.missing += other.missing
        self.many |= other.many
        if not self.many:
            for k, v in other.counts.items():
                self.counts[k] = self.counts.get(k, 0) + v
            self._cut()
        keys = np.concatenate([self.sample_keys, other.sample_keys])
        values = np.concatenate([self.sample_values, other.sample_values])
        self.sample_keys, self.sample_values = _smallest(keys, values)
        self.integer &= other.integer
        self.lo, self.hi = min(self.lo, other.lo), max(self.hi, other.hi)
        return self

    def _cut(self) -> None:
        if len(self.counts) > MAX_LEVELS:
            self.many, self.counts = True, {}


def _smallest(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The SAMPLE_ROWS rows with the smallest keys (sorted by key: the same result in any merge order)."""
    if keys.size > SAMPLE_ROWS:
        part = np.argpartition(keys, SAMPLE_ROWS - 1)[:SAMPLE_ROWS]
        keys, values = keys[part], values[part]
    order = np.argsort(keys, kind="stable")
    return keys[order], values[order]


def is_numeric(col: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype)


def band_numbers(col: pd.Series) -> np.ndarray:
    """A banded column's values as float64, NaN where missing or not a number (text cells read as numbers)."""
    if is_numeric(col):
        return col.to_numpy(dtype=np.float64, na_value=np.nan)
    return pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def summarize(col: pd.Series, is_date: bool, h: np.ndarray) -> ColumnSummary:
    """The summary of one batch of a column (``h``: the rows' hashes)."""
    out = ColumnSummary()
    if is_date:
        keys = bucket_dates(col, "month")
        out.kinds.add("d")
        out.counts = keys.value_counts(sort=False).to_dict()
        out.missing = int(col.isna().sum())
    elif is_numeric(col):
        x = col.to_numpy(dtype=np.float64, na_value=np.nan)
        ok = np.isfinite(x)
        out.kinds.add("n")
        out.missing = int((~ok).sum())
        v = x[ok]
        if v.size:
            values, counts = np.unique(v, return_counts=True)
            out.counts = dict(zip(values.tolist(), counts.tolist()))
            out.sample_keys, out.sample_values = _smallest(_sample_key(h[ok]), v)
            out.integer = bool(np.all(v == np.floor(v)))
            out.lo, out.hi = float(v.min()), float(v.max())
    else:
        out.kinds.add("t")
        out.missing = int(col.isna().sum())
        keys = column_keys(col, None, False)
        out.counts = keys[col.notna().to_numpy()].value_counts(sort=False).to_dict()
    out.counts = {k: int(v) for k, v in out.counts.items()}
    out._cut()
    return out


#: A date as text: 2024-03-10, 2024/3/10, 10/03/2024 or 10.03.24, with a time after it or not.
_DATE_RE = re.compile(r"^\s*(\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4})([ T]\d{1,2}:\d{2}.*)?\s*$")


def date_columns(heads: dict[str, pd.Series]) -> dict[str, bool]:
    """Which columns hold dates, from their first :data:`DATE_HEAD` values that are not missing: a date
    type, or text of which more than 90 % is written as a date (2024-03-10, 10/03/2024, with a time or
    not). Stricter than reading any text a date parser accepts ('11th' would be the 11th of this month)."""
    out = {}
    for name, head in heads.items():
        if pd.api.types.is_datetime64_any_dtype(head.dtype) or "date" in str(head.dtype) or "timestamp" in str(head.dtype):
            out[name] = True
        elif is_numeric(head) or pd.api.types.is_bool_dtype(head.dtype) or not len(head):
            out[name] = False
        else:
            text = head.astype(str)
            out[name] = bool(text.map(lambda v: bool(_DATE_RE.match(v))).mean() > 0.9)
    return out


def skip_by_name(name: str) -> str | None:
    """Why a column is never sliced by default, from its name: an identifier, a data split, a weight,
    a per-record measurement or evaluation metric (each slice would be a row or two, a split of the
    data, or rows selected by something measured with the outcome). Dates are sliced by month, so a
    date's name is no reason (its values decide)."""
    from pbr_core.loading._roles import metadata_by_name

    what = metadata_by_name(str(name))
    if what in _NOT_A_SEGMENT and what != "a date or time":
        return f"its name says it is {what}"
    return None


# --------------------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class SliceColumn:
    """How one column is cut into slices. Codes 0..L-1 are the slices' values (``levels``); code L
    is every value too rare to be a slice."""

    name: str
    how: How
    levels: tuple[str, ...]                 # each slice's value in words ("Female", "25–34", "2024-03")
    keys: tuple = ()                        # values / months: the column's value of each level
    rare: tuple = ()                        # values / months: the other values seen (code L)
    edges: tuple[float, ...] = ()           # bands: the lower edge of every band but the first
    missing: bool = False                   # bands: the last level is the rows with no value
    text: bool = False                      # values: numbers are read as text (the column mixes both)

    @property
    def n_codes(self) -> int:
        return len(self.levels) + 1

    def condition(self, code: int) -> str:
        """One level as a condition in words ("sex = Female", "age 25–34", "signup in 2024-03")."""
        level = self.levels[code]
        if self.how == "bands":
            return f"{self.name} {level}" if level != MISSING else f"{self.name} {MISSING}"
        if self.how == "months":
            return f"{self.name} in {level}"
        return f"{self.name} = {level}"

    def codes(self, col: pd.Series) -> np.ndarray:
        """The code of every row of a batch of the column (a ``ValueError`` for a value the plan never
        saw: the data changed between passes)."""
        L = len(self.levels)
        if self.how == "bands":
            x = band_numbers(col)
            out = np.searchsorted(np.asarray(self.edges, dtype=np.float64), x, side="right").astype(np.intp)
            bad = ~np.isfinite(x)
            out[bad] = L - 1 if self.missing else L
            return out
        keys = self.row_keys(col)
        if keys.dtype.kind == "f":  # numbers by value: look each up among the plan's numbers, sorted
            known = (*self.keys, *self.rare)
            nums = [(k, i) for i, k in enumerate(known) if not isinstance(k, str)]
            idx = np.full(keys.size, -1, dtype=np.intp)
            if nums:
                values = np.array([k for k, _ in nums], dtype=np.float64)
                code = np.array([i for _, i in nums], dtype=np.intp)
                order = np.argsort(values)
                values, code = values[order], code[order]
                pos = np.clip(np.searchsorted(values, keys), 0, values.size - 1)
                hit = values[pos] == keys
                idx[hit] = code[pos[hit]]
            miss = np.isnan(keys)
            if miss.any() and MISSING in known:
                idx[miss] = known.index(MISSING)
        else:
            idx = pd.Index(list(self.keys) + list(self.rare)).get_indexer(keys)
        if (idx < 0).any():
            value = keys[int(np.flatnonzero(idx < 0)[0])]
            raise ValueError(f"column {self.name!r}: value {value!r} was not there when the slices were planned: "
                             "the data changed while it was read. Run again when it no longer changes.")
        return np.where(idx < L, idx, L).astype(np.intp)

    def row_keys(self, col: pd.Series) -> np.ndarray:
        """Each row's value as the plan's keys hold them: text, or numbers (NaN where missing)."""
        if self.how == "months":  # (no date) where there is none, as the summary counted
            return bucket_dates(col, "month").to_numpy(dtype=object)
        if is_numeric(col) and not self.text:  # NaN where missing
            x = col.to_numpy(dtype=np.float64, na_value=np.nan)
            return np.where(np.isfinite(x), x, np.nan)
        if is_numeric(col):  # numbers in a batch of a column that other batches show as text
            x = col.to_numpy(dtype=np.float64, na_value=np.nan)
            return np.array([_num_text(v) if np.isfinite(v) else MISSING for v in x.tolist()], dtype=object)
        keys = column_keys(col, None, False).to_numpy(dtype=object)
        return np.where(col.isna().to_numpy(), MISSING, keys)


@dataclass(frozen=True)
class Plan:
    """The columns cut into slices, the groupings summed (each column alone, and pairs), and what was
    left out and why."""

    columns: tuple[SliceColumn, ...]
    groupings: tuple[tuple[int, ...], ...]     # (i,) or (i, j): indices into ``columns``
    skipped: tuple[tuple[str, str], ...] = ()  # (column, why)
    notes: tuple[str, ...] = ()
    n_rows: int = 0

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @cached_property
    def sizes(self) -> np.ndarray:
        """Cells of every grouping (codes of its columns multiplied, the rare values' code included)."""
        return np.array([int(np.prod([self.columns[i].n_codes for i in g])) for g in self.groupings], dtype=np.intp)

    @cached_property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.intp)

    @property
    def n_cells(self) -> int:
        return int(self.sizes.sum())

    def cell_codes(self, g: int, cell: int) -> tuple[int, ...]:
        """The column codes of a cell of grouping ``g``."""
        cols = [self.columns[i] for i in self.groupings[g]]
        out = []
        for c in reversed(cols):
            out.append(cell % c.n_codes)
            cell //= c.n_codes
        return tuple(reversed(out))

    def cells(self, codes: np.ndarray, g: int) -> np.ndarray:
        """Each row's cell of grouping ``g`` from the rows' codes (n, columns)."""
        cell = np.zeros(codes.shape[0], dtype=np.intp)
        for i in self.groupings[g]:
            cell = cell * self.columns[i].n_codes + codes[:, i]
        return cell


def build_plan(names: Sequence[str], summaries: dict[str, ColumnSummary], dates: dict[str, bool], *,
               n_rows: int, min_rows: int, max_order: int, n_bands: int = N_BANDS,
               skipped: Iterable[tuple[str, str]] = ()) -> Plan:
    """The plan from the columns' summaries (the same for every way of reading the rows)."""
    cols: list[SliceColumn] = []
    skipped = list(skipped)
    for name in names:
        s = summaries[name]
        col, why = _cut(name, s, dates.get(name, False), min_rows, n_bands)
        if col is None:
            skipped.append((name, why))
        else:
            cols.append(col)
    groupings: list[tuple[int, ...]] = [(i,) for i in range(len(cols))]
    notes: list[str] = []
    if max_order >= 2:
        pairs = [(i, j) for i in range(len(cols)) for j in range(i + 1, len(cols))]
        size = sum(c.n_codes for c in cols) + sum(cols[i].n_codes * cols[j].n_codes for i, j in pairs)
        dropped: list[str] = []
        by_values = sorted(range(len(cols)), key=lambda i: -cols[i].n_codes)
        while size > MAX_CELLS and by_values:
            worst = by_values.pop(0)
            size -= sum(cols[i].n_codes * cols[j].n_codes for i, j in pairs if worst in (i, j))
            pairs = [(i, j) for i, j in pairs if worst not in (i, j)]
            dropped.append(cols[worst].name)
        if dropped:
            notes.append(f"pairs with {', '.join(repr(d) for d in dropped)} were not searched (their values are too "
                         f"many to combine within {MAX_CELLS:,} cells); each column alone was")
        groupings += pairs
    return Plan(columns=tuple(cols), groupings=tuple(groupings), skipped=tuple(skipped), notes=tuple(notes),
                n_rows=int(n_rows))


def _cut(name: str, s: ColumnSummary, is_date: bool, min_rows: int, n_bands: int) -> tuple[SliceColumn | None, str]:
    """How a column is cut, or (None, why not)."""
    numbers = s.kinds == {"n"}
    if is_date:
        if s.many:
            return None, f"more than {MAX_LEVELS:,} months"
        return _by_value(name, "months", s, min_rows, lambda k: k[:7] + k[10:] if k[:4].isdigit() else k)
    if numbers and (s.many or len(s.counts) > MAX_NUMERIC_VALUES):
        return _bands(name, s, min_rows, n_bands)
    if s.many:
        return None, f"more than {MAX_LEVELS:,} different values (an identifier or free text?)"
    if numbers:
        return _by_value(name, "values", s, min_rows, _num_text)
    if "n" in s.kinds:  # numbers in some batches, text in others: all read as text
        counts: dict = {}
        for k, v in s.counts.items():
            t = _num_text(k) if isinstance(k, float) else str(k)
            counts[t] = counts.get(t, 0) + v
        s = ColumnSummary(kinds={"t"}, counts=counts, missing=s.missing)
        col, why = _by_value(name, "values", s, min_rows, str)
        return (None, why) if col is None else (SliceColumn(**{**col.__dict__, "text": True}), "")
    return _by_value(name, "values", s, min_rows, str)


def _by_value(name: str, how: How, s: ColumnSummary, min_rows: int, words) -> tuple[SliceColumn | None, str]:
    counts = dict(s.counts)
    if s.missing and how != "months":
        counts[MISSING] = counts.get(MISSING, 0) + s.missing
    big = sorted((k for k, v in counts.items() if v >= min_rows), key=lambda k: (-counts[k], str(k)))
    if list(counts) == [MISSING]:
        return None, "no values (missing in every row)"
    if len(counts) < 2:
        return None, "one value only"
    if not big:
        return None, f"no value has {min_rows:,} rows"
    rare = tuple(sorted((k for k in counts if counts[k] < min_rows), key=str))
    levels = tuple(MISSING if k == MISSING else words(k) for k in big)
    return SliceColumn(name=name, how=how, levels=levels, keys=tuple(big), rare=rare), ""


def _bands(name: str, s: ColumnSummary, min_rows: int, n_bands: int) -> tuple[SliceColumn | None, str]:
    v = np.sort(s.sample_values)
    if v.size == 0:
        return None, "no numbers"
    if v[-1] == v[0]:
        return None, "one value only"
    at_min = np.searchsorted(v, v[0], side="right")
    if at_min * n_bands >= v.size:
        # The smallest value holds a band's share or more (a count that is mostly 0: capital gains, days
        # overdue): its quantiles collapse onto it, and audit 9a's 'capital_gain' became "1 quantile
        # bands", the whole file. That value is a band of its own; the rest is cut into the other bands.
        rest = v[at_min:]
        qs = np.quantile(rest, np.arange(1, n_bands - 1) / (n_bands - 1), method="inverted_cdf")
        edges = np.unique(np.r_[rest[0], qs[qs > rest[0]]])
    else:
        qs = np.quantile(v, np.arange(1, n_bands) / n_bands, method="inverted_cdf")
        edges = np.unique(qs[qs > v[0]])  # a band starts at each edge; ties collapse bands
    bounds = [s.lo, *edges.tolist(), s.hi]
    levels = []
    for k in range(len(bounds) - 1):
        lo, hi, last = bounds[k], bounds[k + 1], k == len(bounds) - 2
        levels.append(_band_words(lo, hi, last, s.integer))
    missing = s.missing >= min_rows
    if missing:
        levels.append(MISSING)
    return SliceColumn(name=name, how="bands", levels=tuple(levels), edges=tuple(float(e) for e in edges),
                       missing=missing), ""


def _band_words(lo: float, hi: float, last: bool, integer: bool) -> str:
    """A band [lo, hi) (the last one [lo, hi]) in words: '25–34' for whole numbers, else
    'from 0.25 to under 0.5' / 'from 0.5 to 0.98'."""
    if integer:
        top = hi if last else hi - 1
        return _num_text(lo) if top <= lo else f"{_num_text(lo)}–{_num_text(top)}"
    return f"from {lo:.4g} to {hi:.4g}" if last else f"from {lo:.4g} to under {hi:.4g}"
