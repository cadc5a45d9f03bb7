"""Which rows a recalibrator was fitted on: a fingerprint kept in its saved file, and the check of
other rows against it.

A recalibrator measured on the rows it was fitted on looks better than it is (a fit calibrates its
own rows: ``tests/test_fit_rows.py`` measures by how much). A fit records a 64-bit hash of every
fit row's (probabilities rounded to float32, label) (:func:`prediction_hashes`, which says why not the
float64 scores themselves), kept as the sorted distinct hashes with
their counts (:class:`FitRows`); :func:`overlap` tells how many rows of another file are rows it
was fitted on, so that ``pbr-calib apply`` and the Fit & apply page measure it on the others.

Up to :data:`MAX_DISTINCT` distinct rows are all kept (8 bytes each: about 1.1 MB of base64 at the
cap). Beyond it the fingerprint keeps the :data:`MAX_DISTINCT` distinct rows with the smallest hashes
(a bottom-k sample: each distinct row kept with the same chance, whatever its values, and the same
rows whether the fit read the file whole or streamed it), with their exact counts, and the number
of rows fitted. A checked row whose hash is at most the largest kept one is then checked exactly;
the others cannot be checked, so the overlap is estimated and said to be.

Rows match only when their float32 probabilities are identical: a file written again with fewer
decimals (a CSV of 6 decimals holds other float32 values than the fit's float64 ones: 13 of 500
Platt fit rows matched) holds the fit rows unrecognisable. So the fingerprint also records how
finely the fit's probabilities were written (``resolution``: the grids of
:func:`pbr_core.resolution.grids_from_evidence`), and a checked file whose values lie on a grid the
fit's do not is said to be written more coarsely (:attr:`FitRowOverlap.coarser`): whether it holds fit
rows cannot be told, and it is measured on all its rows with that caveat.

Privacy: the fingerprint tells membership and labels. Whoever holds the file and a row can tell
whether that row (its exact scores and label) was among the fit rows; and whoever knows a fit row's
scores can hash them with each label and so learn its true label. A file that must carry
nothing derived from the data is saved without it (``save(path, fit_rows=False)``,
``pbr-calib fit --no-fit-rows``, the dashboard's download option); such a file, like one written
before fingerprints, cannot tell.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import numpy as np

from pbr_core.resolution import DECIMALS, EVIDENCE_NAMES, MIN_EVIDENCE, Resolution, evidence_counts, grids_from_evidence


#: Distinct fit rows kept in full; beyond it a bottom-k sample of this many (8 bytes each in the file).
MAX_DISTINCT = 100_000
#: Matches of once-seen values are called fit rows only when at most this share of them is expected by chance.
CHANCE_SHARE = 0.05
#: A file whose rows hold every fit row's value (scores and label) at least as often as the fit rows do is
#: said to contain them only when a file of new rows of its size would do so by chance at most this often.
CONTAINS_CHANCE = 0.01
#: The hash's name in the file: a reader that meets another name refuses the field rather than compare
#: hashes of another function.
HASH_NAME = "splitmix64-float32-probabilities-1"

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
#: Rows hashed together (a block of 100 classes is 8 MB).
_BLOCK = 8192


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, in place on a uint64 array (multiplication wraps modulo 2^64)."""
    z ^= z >> np.uint64(30)
    z *= _M1
    z ^= z >> np.uint64(27)
    z *= _M2
    z ^= z >> np.uint64(31)
    return z


def row_hashes(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row's float64 scores and integer label, vectorised over rows.

    Each column's bit pattern is mixed into a running value (splitmix64's finaliser after every
    column, so the order of the columns matters) and the label last. -0.0 is hashed as 0.0 (equal
    floats, equal hashes); the same float64 values always give the same hash, on any machine
    (little- or big-endian: the bits are read as numbers, not bytes).
    """
    z = np.asarray(scores, dtype=np.float64)
    return _hash_words(np.ascontiguousarray(z.reshape(len(z), -1) + 0.0).view(np.uint64), labels)  # + 0.0: -0.0 is 0.0


def _hash_words(words: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The hash of each row of 64-bit ``words`` (n, m) and its label."""
    h = np.full(words.shape[0], (int(_GOLDEN) * (words.shape[1] + 1)) % 2**64, dtype=np.uint64)
    with np.errstate(over="ignore"):
        # Column by column over blocks of rows: each block's columns read contiguously (a strided
        # column of 10^6 rows x 100 classes took 1.6 s, blocks 0.5 s), without a transposed copy.
        for lo in range(0, words.shape[0], _BLOCK):
            hb = h[lo:lo + _BLOCK]
            for column in words[lo:lo + _BLOCK].T:
                hb ^= column
                hb += _GOLDEN
                _mix(hb)
        h ^= np.asarray(labels, dtype=np.int64).view(np.uint64)
        h += _GOLDEN
        return _mix(h)


def prediction_hashes(preds: Any) -> np.ndarray:
    """:func:`row_hashes` of a Predictions value: of its probabilities rounded to float32, and its labels.

    Not of the float64 values the fit read, which do not survive a file written and read again:
    :func:`~pbr_core.loading.save_predictions` writes logits as their probabilities, and the loader
    divides every probability row by its sum, which moves values that were already divided by one
    float64 step (258 of the 9,090 rows of the KITTI multiclass sample changed in a CSV or parquet round
    trip). Rounded to float32, a value changes only if it lies within a float64 step of a float32
    rounding boundary (a chance of about 2^-29 per value), and every sample file's rows hash alike
    after the round trip (``tests/test_fit_rows.py``). Rows whose probabilities agree to float32
    (about 7 digits) count as identical, which :class:`FitRowOverlap` treats as it treats every
    repeated row (they only may be fit rows)."""
    p = np.asarray(preds.probs, dtype=np.float32)
    k = p.shape[1] + p.shape[1] % 2  # two float32 values per 64-bit word: half the mixing of float64
    words = np.zeros((p.shape[0], k), dtype=np.float32)
    words[:, :p.shape[1]] = p + np.float32(0.0)  # -0.0 becomes 0.0
    return _hash_words(words.view(np.uint64), preds.labels)


@dataclass(frozen=True)
class FitRows:
    """The fingerprint of a fit's rows: ``hashes`` (sorted, distinct, uint64) with ``counts``, of
    ``n_rows`` rows fitted. ``complete``: every fit row is in it; otherwise it holds every distinct
    fit row whose hash is at most ``hashes[-1]`` (a bottom-k sample). ``resolution``: the grids every fit
    probability lies on (:func:`pbr_core.resolution.grids_from_evidence`), None where not recorded (files
    written before it, fits that did not read the probabilities)."""

    n_rows: int
    hashes: np.ndarray
    counts: np.ndarray
    resolution: Resolution | None = None

    @property
    def complete(self) -> bool:
        return int(self.counts.sum()) == self.n_rows

    @property
    def threshold(self) -> int:
        """The largest hash a checked row may have to be checked (every hash when complete)."""
        return 2**64 - 1 if self.complete or not len(self.hashes) else int(self.hashes[-1])

    @classmethod
    def of_hashes(cls, hashes: np.ndarray, cap: int = MAX_DISTINCT) -> "FitRows":
        """The fingerprint of rows with these hashes (their resolution not recorded)."""
        return FitSketch(cap).add(hashes).result()

    @classmethod
    def of(cls, preds: Any, cap: int = MAX_DISTINCT) -> "FitRows":
        """The fingerprint of a Predictions value's rows, with the resolution of its probabilities."""
        return FitSketch(cap).add(prediction_hashes(preds), preds.probs).result()

    # --------------------------------------------------------------- the saved field
    def to_field(self) -> dict[str, Any]:
        """The file's ``fit_rows`` field: base64 of the little-endian uint64 hashes, and "repeats": the
        counts above 1 only, as little-endian uint32 pairs (position of the hash, count), null where
        every count is 1 (real-valued scores repeat rarely: 100,000 rows wrote 1.6 MB with every count);
        and, where recorded, "resolution": the grids every fit probability lies on ({"decimals": d or null,
        "digits": d or null, "float32": true/false}; optional: files written before it hold none)."""
        where = np.flatnonzero(self.counts > 1)
        pairs = np.column_stack([where, self.counts[where]]).astype("<u4")
        res = self.resolution
        return {"hash": HASH_NAME, "n_rows": int(self.n_rows),
                "hashes": base64.b64encode(self.hashes.astype("<u8").tobytes()).decode("ascii"),
                "repeats": base64.b64encode(pairs.tobytes()).decode("ascii") if len(where) else None,
                **({} if res is None else
                   {"resolution": {"decimals": res.decimals, "digits": res.digits, "float32": res.float32}})}

    @classmethod
    def from_field(cls, value: Any) -> "FitRows":
        """The fingerprint of a file's ``fit_rows`` field; :class:`StateError` naming what is wrong."""
        from pbr_core.recalibrators._state import StateError, shown  # not at import: recalibrators imports this

        where = "fit_rows"
        fields = {"hash", "n_rows", "hashes", "repeats"}
        if not isinstance(value, dict) or set(value) not in (fields, fields | {"resolution"}):
            raise StateError(f'{where} must be a group of the fields "hash", "n_rows", "hashes", "repeats" and '
                             f'(optional) "resolution", but the file holds {shown(value)}')
        if value["hash"] != HASH_NAME:
            raise StateError(f'{where}.hash must be the text "{HASH_NAME}", but the file holds {shown(value["hash"])}')
        n = value["n_rows"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise StateError(f"{where}.n_rows must be a whole number of at least 1, but the file holds {shown(n)}")
        hashes = _decoded(value["hashes"], "<u8", f"{where}.hashes").astype(np.uint64)
        if len(hashes) > MAX_DISTINCT or len(hashes) > n or np.any(hashes[1:] <= hashes[:-1]):
            raise StateError(f"{where}.hashes must hold at most {min(n, MAX_DISTINCT):,} distinct hashes in increasing "
                             f"order, but the file holds {len(hashes):,}" + (" out of order" if len(hashes) <= n else ""))
        counts = np.ones(len(hashes), dtype=np.int64)
        if value["repeats"] is not None:
            pairs = _decoded(value["repeats"], "<u4", f"{where}.repeats").astype(np.int64)
            if len(pairs) % 2:
                raise StateError(f"{where}.repeats must hold pairs (position, count), but holds {len(pairs)} numbers")
            position, count = pairs[0::2], pairs[1::2]
            if np.any(position >= len(hashes)) or np.any(np.diff(position) <= 0) or np.any(count < 2):
                raise StateError(f"{where}.repeats must hold pairs (position of one of the {len(hashes):,} hashes, in "
                                 "increasing order; a count of at least 2), but it does not")
            counts[position] = count
        if int(counts.sum()) > n:
            raise StateError(f"{where}.repeats add up to {int(counts.sum()):,} rows, more than the {n:,} of "
                             f"{where}.n_rows")
        return cls(n_rows=int(n), hashes=hashes, counts=counts, resolution=_resolution_field(value.get("resolution")))


def _resolution_field(value: Any) -> Resolution | None:
    """The ``fit_rows.resolution`` field (absent from files written before it: None, not recorded)."""
    from pbr_core.recalibrators._state import StateError, shown

    if value is None:
        return None
    where = "fit_rows.resolution"
    if not isinstance(value, dict) or set(value) != {"decimals", "digits", "float32"}:
        raise StateError(f'{where} must be a group of the fields "decimals", "digits" and "float32", but the file '
                         f"holds {shown(value)}")
    for name in ("decimals", "digits"):
        d = value[name]
        if d is not None and (isinstance(d, bool) or not isinstance(d, int) or d not in DECIMALS):
            raise StateError(f"{where}.{name} must be null or a whole number from {DECIMALS[0]} to {DECIMALS[-1]}, but "
                             f"the file holds {shown(d)}")
    if not isinstance(value["float32"], bool):
        raise StateError(f"{where}.float32 must be true or false, but the file holds {shown(value['float32'])}")
    return Resolution(value["decimals"], value["float32"], value["digits"])


def written_more_coarsely(here: Resolution | None, fit: Resolution | None) -> bool:
    """Whether checked values with the grids ``here`` cannot hold the fit's values as the fit saw them
    (``fit``: the fingerprint's record): they lie on a 10^-d grid, or on a grid of d significant digits,
    that the fit's values do not lie on. Values written as float32 numbers never are (the hash rounds to
    float32 anyway); unknown grids (None) never are said to be."""
    if here is None or fit is None or here.float32:
        return False
    if here.decimals is not None and not (fit.decimals is not None and fit.decimals <= here.decimals):
        return True
    # A value below 1 on the 10^-d grid has at most d significant digits.
    return here.digits is not None and not any(g is not None and g <= here.digits for g in (fit.digits, fit.decimals))


def grid_words(res: Resolution | None) -> str:
    """How finely values were written, briefly: "6 decimals", "7 significant digits", "float32", "full precision"."""
    if res is None:
        return "not recorded"
    if res.decimals is not None:
        return f"{res.decimals} decimal{'s' if res.decimals > 1 else ''}"
    if res.digits is not None:
        return f"{res.digits} significant digit{'s' if res.digits > 1 else ''}"
    return "float32" if res.float32 else "full precision"


def coarser_words(check: "FitRowOverlap") -> str:
    """Why a check whose rows are written more coarsely than its fit rows (verdict "coarser") cannot tell
    which are fit rows: the one clause of both front ends."""
    return (f"these rows are written with fewer decimals than the rows it was fitted on "
            f"({grid_words(check.written_here)} here, {grid_words(check.written_fit)} in the fit), so its fit rows "
            "would not be recognised")


def chance_words(p: float) -> str:
    """A probability in words, the one format of both front ends: "below 1 in a million" rather than 0,
    "about 1 in 363,000", "about 1.2 %" (never "1 %" for 0.012, beside a 1 % limit), "about 45 %"."""
    if p < 1e-6:
        return "below 1 in a million"
    if p < 1e-3:
        return f"about 1 in {float(f'{1 / p:.2g}'):,.0f}"
    return f"about {p * 100:.1f} %" if p < 0.1 else f"about {p * 100:.0f} %"


def _decoded(text: Any, dtype: str, where: str) -> np.ndarray:
    from pbr_core.recalibrators._state import StateError, shown

    if not isinstance(text, str):
        raise StateError(f"{where} must be a base64 text, but the file holds {shown(text)}")
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise StateError(f"{where} must be a base64 text, but the file holds text that is not base64") from None
    size = np.dtype(dtype).itemsize
    if len(raw) % size:
        raise StateError(f"{where} must hold a whole number of {size}-byte values, but holds {len(raw)} bytes")
    return np.frombuffer(raw, dtype=dtype)


class FitSketch:
    """The fingerprint built from rows seen in parts (a streamed fit's chunks): the distinct hashes
    with their counts, cut to the ``cap`` smallest once there are more (a bottom-k sample, so the
    result is the same whatever the parts)."""

    def __init__(self, cap: int = MAX_DISTINCT) -> None:
        self.cap = int(cap)
        self.n_rows = 0
        self._hashes = np.zeros(0, dtype=np.uint64)
        self._counts = np.zeros(0, dtype=np.int64)
        # The resolution's counts (pbr_core.resolution.EVIDENCE_NAMES), added up over the parts; None once a
        # part came without its probabilities (not recorded).
        self._evidence: np.ndarray | None = np.zeros(len(EVIDENCE_NAMES))

    def add(self, hashes: np.ndarray, probs: np.ndarray | None = None) -> "FitSketch":
        """Rows with these hashes, and their probabilities (for the resolution; None: not recorded)."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        if probs is None or self._evidence is None:
            self._evidence = None
        else:
            self._evidence = self._evidence + evidence_counts(probs)
        self.n_rows += len(hashes)
        both = np.concatenate([self._hashes, hashes])
        weights = np.concatenate([self._counts, np.ones(len(hashes), dtype=np.int64)])
        unique, inverse = np.unique(both, return_inverse=True)
        counts = np.bincount(inverse, weights=weights, minlength=len(unique)).astype(np.int64)
        self._hashes, self._counts = unique[:self.cap], counts[:self.cap]  # sorted: the smallest
        return self

    def result(self) -> FitRows:
        res = None if self._evidence is None else grids_from_evidence(self._evidence)
        return FitRows(n_rows=self.n_rows, hashes=self._hashes.copy(), counts=self._counts.copy(), resolution=res)


@dataclass(frozen=True)
class FitRowOverlap:
    """How many rows of a checked file are rows a recalibrator was fitted on (:func:`overlap`).

    Rows match when their scores and label are exactly those of a fit row. Identical rows cannot be
    told apart: a value the checked file holds c times and the fit rows f times accounts for at most
    min(c, f) fit rows, and those rows ``may`` be fit rows or may match by chance (a model whose scores
    take few values gives many identical rows). A row is ``identified`` only when its value occurs
    once in the checked file and once among the fit rows, and the checked file's values repeat so
    rarely that at most :data:`CHANCE_SHARE` of such matches are expected by chance (``chance_matches``);
    identified rows are left out of a check.

    Rows that only may be fit rows are kept (``n_possible``): which of them match is decided by their
    label (a value's rows of the rarer label are the ones the fit rows do not account for), so leaving
    them out of a file of new rows would pick its rows by label and bias the check (audit 8: on a
    disjoint quarter of the fraud file, the 2,502 rows kept of 4,071 had a base rate of 0.315 against
    0.232). Except where the file ``contains`` the fit rows: every fit value occurs here at least as often
    as among the fit rows, and a file of new rows of this size would do that by chance at most
    :data:`CONTAINS_CHANCE` of the time (``chance_contains``). Then f rows of each fit value are left out,
    which leaves exactly the values of the file's other rows, whichever identical rows they are.
    """

    #: False: the recalibrator's file records no fit rows (written before fingerprints, or without them).
    recorded: bool
    n_rows: int
    #: Rows fitted (the file's record; 0 when not recorded).
    n_fit: int = 0
    #: Every fit row is in the fingerprint (else a sample: ``n_checkable`` rows could be checked).
    complete: bool = True
    n_checkable: int = 0
    #: Checked rows whose exact scores and label are among the fit rows' (identical rows all count).
    n_matched: int = 0
    #: Of those, rows whose value other rows of the checked file share.
    n_matched_repeated: int = 0
    #: Rows that are fit rows: their value occurs once here and once among the fit rows.
    n_identified: int = 0
    #: Further rows that may be fit rows (min(c, f) per shared value, less the identified), kept in the
    #: check unless the file ``contains`` the fit rows.
    n_possible: int = 0
    #: Distinct rows (scores and label) of the checked file.
    n_distinct: int = 0
    #: True for each row a check leaves out: the identified rows, and where the file ``contains`` the fit
    #: rows, the first f rows of each fit value.
    mask: np.ndarray | None = None
    #: Matches of values found once here and once among the fit rows expected by chance (Good-Turing).
    chance_matches: float = 0.0
    #: Every value of the (checkable) fit rows occurs here at least as often as among them (computed only
    #: where some rows only may be fit rows).
    holds_all: bool = False
    #: Where ``holds_all``: the estimated chance that a file of new rows of this size, from the same source,
    #: would hold every fit value as often (1.0 where not computed).
    chance_contains: float = 1.0
    #: How finely the checked rows' probabilities are written (grids, None: too few values to tell) and the
    #: fit's (None: not recorded in its file).
    written_here: Resolution | None = None
    written_fit: Resolution | None = None

    @property
    def coarser(self) -> bool:
        """The checked rows are written more coarsely than the fit rows were (:func:`written_more_coarsely`):
        a fit row written so is not recognised, so which of them are fit rows cannot be told."""
        return written_more_coarsely(self.written_here, self.written_fit)

    @property
    def contains(self) -> bool:
        """The file holds the fit rows: every fit value as often, which new rows would rarely do by chance."""
        return self.holds_all and self.chance_contains <= CONTAINS_CHANCE

    @property
    def n_excluded(self) -> int:
        """Rows a check leaves out: the identified fit rows, or (``contains``) the fit rows' values."""
        return 0 if self.mask is None else int(self.mask.sum())

    @property
    def n_other(self) -> int:
        """Rows that cannot be fit rows (with a complete fingerprint)."""
        return self.n_rows - self.n_excluded

    @property
    def estimated(self) -> float:
        """Estimated fit rows among the checked rows: counted where complete, else the checkable rows'
        share scaled to all rows."""
        if self.complete or not self.n_checkable:
            return float(self.n_excluded)
        return self.n_excluded * self.n_rows / self.n_checkable

    @property
    def bound_if_none(self) -> float:
        """With a sample and no match: at most about this many rows can be fit rows (95 %: none of
        r fit rows falls among the n_checkable checked rows with chance about exp(-3) when r = 3 n / n_checkable)."""
        return 3.0 * self.n_rows / max(self.n_checkable, 1)

    @property
    def state(self) -> str:
        """"not recorded"; "coarser" (the rows are written more coarsely than the fit rows: whether they
        hold fit rows cannot be told, whatever matched); "none" (no row matches a fit row); "shared" (rows
        share their values with fit rows, none is left out: they only may be fit rows); "some" or "all"
        (rows left out: the identified fit rows, or the fit rows' values of a file that contains them); or
        "sampled" (a sample found fit rows here: which rows cannot be told)."""
        if not self.recorded:
            return "not recorded"
        if self.coarser:
            return "coarser"
        if self.n_matched == 0:
            return "none"
        if self.n_excluded == 0:
            return "shared"
        if not self.complete:
            return "sampled"
        return "all" if self.n_other == 0 else "some"

    def verdict(self, min_rows: int) -> str:
        """What a check says, the one list both front ends put in words (``min_rows``: the fewest rows a
        check measures on): the :attr:`state`, with "none" split into "none" (every fit row checked) and
        "none of the sample" (a sampled fingerprint: at most about :attr:`bound_if_none` rows can be fit
        rows), and "some" into "too few left" (fewer than ``min_rows`` others: not measured) and "some";
        "all" is "in-sample". How fit rows were found (in "some", "too few left", "in-sample") is
        :attr:`found`."""
        state = self.state
        if state == "none":
            return "none" if self.complete else "none of the sample"
        if state == "all":
            return "in-sample"
        if state == "some" and self.n_other < min_rows:
            return "too few left"
        return state

    @property
    def found(self) -> str:
        """How the left-out rows were found: "contains" (the file holds every fit value as often, which new
        rows would rarely do by chance: the fit rows' values are left out; ``n_rows == n_fit``: it is them),
        "identified" (rows found once here and once among the fit rows; ``n_possible`` more only may be),
        or "" (none left out)."""
        if self.contains:
            return "contains"
        return "identified" if self.n_identified else ""

    def rows_to_measure(self) -> np.ndarray | None:
        """The rows a check of the recalibrator measures on: None for every row (none is a fit row, or
        some only may be, or the file cannot tell, or every row is one: the check is then in-sample),
        else the indices of the rows not left out.

        Raises
        ------
        FitRowsUnknownError
            A sampled fingerprint found fit rows here: which of the rows are fit rows cannot be told.
        """
        if self.state == "sampled":
            about = ("This row may be one the recalibrator was fitted on" if self.n_rows == 1 else
                     f"About {self.estimated:,.0f} of these {self.n_rows:,} rows "
                     f"{'is a row' if f'{self.estimated:,.0f}' == '1' else 'are rows'} the recalibrator was fitted on")
            raise FitRowsUnknownError(
                f"{about} (estimated: its file keeps a sample of its {self.n_fit:,} fit rows), and which ones cannot "
                "be told, so it cannot be measured on the others.")
        return np.flatnonzero(~self.mask) if self.state == "some" else None  # "coarser": every row, said to


class FitRowsUnknownError(ValueError):
    """Some rows of a checked file are fit rows, but a sampled fingerprint cannot say which."""


def overlap(fit_rows: FitRows | None, preds: Any) -> FitRowOverlap:
    """How many rows of ``preds`` (labelled, in the fitted class order) are rows of ``fit_rows``."""
    n = int(preds.n)
    if fit_rows is None:
        return FitRowOverlap(recorded=False, n_rows=n)
    counts = evidence_counts(preds.probs)
    # Read only from enough values (as the loader's rounding note): a few values on a grid say nothing.
    grids_here = grids_from_evidence(counts) if counts[0] >= MIN_EVIDENCE else None
    h = prediction_hashes(preds)
    unique, inverse, counts_here = np.unique(h, return_inverse=True, return_counts=True)
    checkable = h <= np.uint64(fit_rows.threshold)
    where = np.searchsorted(fit_rows.hashes, h).clip(max=max(len(fit_rows.hashes) - 1, 0))
    matched = checkable & (fit_rows.hashes[where] == h) if len(fit_rows.hashes) else np.zeros(n, dtype=bool)
    fit_count = np.where(matched, fit_rows.counts[where] if len(fit_rows.hashes) else 0, 0)
    here = counts_here[inverse]
    # Each row's rank among the rows of its value (0, 1, ...): the first min(c, f) may be fit rows.
    order = np.argsort(inverse, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts_here)[:-1]])
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - starts[inverse[order]]
    may = matched & (rank < fit_count)
    single = matched & (here == 1) & (fit_count == 1)
    # A value found once here and once among the fit rows is the same row unless values repeat by chance.
    # Good-Turing: the values seen once here carry about 2 n2 / n of the probability (n2: values seen
    # twice), so about n_fit * 2 n2 / n of these matches are expected by chance between independent rows
    # (0 for real-valued scores; 25 of 950 for 1,000 rows of 4-decimal scores and 500 fit rows).
    n2 = int(np.sum(counts_here == 2))
    chance = min(float(single.sum()), fit_rows.n_rows * 2.0 * n2 / max(n, 1))
    identified = single if chance <= CHANCE_SHARE * single.sum() else np.zeros(n, dtype=bool)
    mask = identified.copy()
    holds_all, chance_contains = False, 1.0
    if np.any(may & ~identified):
        # Rows that only may be fit rows are kept: leaving out min(c, f) rows of each value picks, in a file
        # of new rows, the label the fit rows hold more of. Unless the file holds the fit rows: then f rows
        # of each fit value are left out, which leaves exactly the values of its other rows.
        holds_all, chance_contains = _containment(fit_rows, h[checkable])
        if holds_all and chance_contains <= CONTAINS_CHANCE:
            mask = may
    return FitRowOverlap(recorded=True, n_rows=n, n_fit=fit_rows.n_rows, complete=fit_rows.complete,
                         n_checkable=int(checkable.sum()), n_matched=int(matched.sum()),
                         n_matched_repeated=int((matched & (here > 1)).sum()), n_identified=int(identified.sum()),
                         n_possible=int((may & ~mask).sum()), n_distinct=len(unique), mask=mask,
                         chance_matches=chance, holds_all=holds_all, chance_contains=chance_contains,
                         written_here=grids_here, written_fit=fit_rows.resolution)


def _containment(fit_rows: FitRows, h: np.ndarray) -> tuple[bool, float]:
    """Whether the rows with hashes ``h`` (those the fingerprint can check) hold every fingerprinted fit
    value at least as often as the fit rows do, and if so the estimated chance that new rows would.

    The chance: the fit rows (n) and the file's rows (m) as independent draws from one source, each
    value's counts as Poisson (n q, m q), q its share of both together; the chance that every value
    occurs here at least as often is the product over values of P(Skellam(m q, n q) >= 0). Values seen
    in neither count as 1 (the estimate errs high: towards not calling new rows the fit rows). Audit 8's
    files (scratch simulation, disjoint files of one source): a KITTI depth-4 tree (51 values) holds every
    fit value by chance in 0-99 % of files 1x-10x the fit's size, but the estimate fell to 1 % or below
    in at most 1 % of them; files that hold the fit rows were found in every file up to 1.5x its size
    (the tree), 2x-3x (Adult's p to 2 decimals), 10x (fraud scores and Adult's p to 3-4 decimals).
    """
    from scipy.stats import skellam

    unique, counts = np.unique(h, return_counts=True)
    where = np.searchsorted(unique, fit_rows.hashes).clip(max=max(len(unique) - 1, 0))
    found = unique[where] == fit_rows.hashes if len(unique) else np.zeros(len(fit_rows.hashes), dtype=bool)
    here = np.where(found, counts[where] if len(unique) else 0, 0)
    if not len(fit_rows.hashes) or np.any(here < fit_rows.counts):
        return False, 1.0
    only_here = np.ones(len(unique), dtype=bool)
    only_here[where[found]] = False
    c = np.concatenate([here, counts[only_here]]).astype(float)
    f = np.concatenate([fit_rows.counts, np.zeros(int(only_here.sum()))]).astype(float)
    m, n_fit = c.sum(), f.sum()
    q = (c + f) / (m + n_fit)
    with np.errstate(divide="ignore"):
        log_chance = float(np.sum(np.log(skellam.sf(-1, m * q, n_fit * q))))
    return True, float(np.exp(log_chance))
