"""How finely a file wrote its probabilities, and what a score of exactly 0 or 1 then stands for.

An export that writes confidences as "99.3%" (one decimal of a percent) turns every confidence from
0.9995 up into "100.0%": read back, the file gives probability 1, though the model never did (audit 8:
333 wrong answers of an LLM read "100.0%"; their real confidences were 0.99952-0.99999988). A
float32 column does the same from 1 - 2^-25 (about 0.99999997) up. A test that calls a wrong answer
at probability 1 "impossible" (:mod:`pbr_core.significance`) must then not: the model may have said
0.9996.

The resolution is read from the values themselves, so that every path that tests a set of rows (a
file in memory, a stream's sums, a group, a slice) reads the same one from the same rows:

* **decimals**: every value strictly between 0 and 1 is a multiple of 10^-d (d = 3..9, coarser grids excepted: :data:`MIN_DECIMALS`; "99.3%" is
  0.993, d = 3): a score of 1 stands for anything from 1 - 10^-d / 2, one of 0 for anything below
  10^-d / 2;
* **float32**: every such value is a float32 number (stored as one, or written out with the 9
  significant digits that identify one): a score of 1 stands for anything from 1 - 2^-25. A 0 is
  not a rounding there (float32 holds numbers down to 1e-45).

It is *evident* only from at least :data:`MIN_EVIDENCE` values strictly between 0 and 1 other than
short binary fractions (k / 16: 0.5 or 0.25 lie on every grid, whatever wrote them): a random
float64 probability is on a 10^-d grid with chance about 2e-6 and a float32 number with chance
about 0.1, so 20 such values are not there by chance (a model whose every output is a multiple of
0.1, k-nearest neighbours with k = 10, is read as rounded too: nothing in the file tells the two
apart, and the test then only stops calling its wrong 1s impossible). Float64 values with no grid
have no evident resolution: their 0 and 1 are the model's.

The evidence is a few counts per set of rows (:func:`evidence_terms`), added up like the test's other
sums (:data:`pbr_core.significance.SUM_NAMES`) over batches, partitions and groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DECIMALS", "EVIDENCE_NAMES", "FLOAT32_HALF", "MIN_EVIDENCE", "Resolution", "coarse_caveat", "evidence_counts",
           "evidence_terms", "from_evidence", "grids_from_evidence", "resolution_of", "rounding_note", "value_blocks"]

#: The grids looked for: 10^-1 .. 10^-9 (a confidence written as "99.3%" is on 10^-3), as decimals and as
#: significant digits.
DECIMALS = tuple(range(1, 10))
#: The coarsest grid read as a rounding: values on 10^-1 or 10^-2 are as likely a model's own outputs
#: (k-nearest neighbours with k = 10, a random forest of 10 or of scikit-learn's default 100 trees; audit
#: 3's 10-tree forest gave 1,229 scores of exactly 0), whose 0 and 1 are the model's: "for certain".
MIN_DECIMALS = 3
#: Values strictly between 0 and 1 needed before a grid is taken for the file's resolution.
MIN_EVIDENCE = 20
#: Half the float32 spacing just below 1 (2^-24): from 1 - 2^-25 up, a float32 is 1.
FLOAT32_HALF = 2.0 ** -25
#: A value counts as a float32 number within this relative distance of one (the 9 significant digits
#: that identify a float32 place it within 5e-9 of it, relative; its spacing is 6e-8 to 1.2e-7).
_F32_REL = 5e-9
#: The counts kept per set of rows, in order.
EVIDENCE_NAMES = ("interior", *(f"off_grid_{d}" for d in DECIMALS), *(f"off_digits_{d}" for d in DECIMALS),
                  "off_float32")


def evidence_terms(p: np.ndarray) -> list[np.ndarray]:
    """Per row, one 0/1 array per name of :data:`EVIDENCE_NAMES`: a value that counts (strictly between
    0 and 1, not a multiple of 1/16), and among those: off the 10^-d grid (for each d), off the grid of d
    significant digits (for each d), not a float32 number."""
    p = np.asarray(p, dtype=np.float64)
    # Only values that are not short binary fractions count: 0.5, 0.25 or 0.8125 (k / 16) lie on every
    # grid and are float32 numbers, whatever wrote them (a constant 0.5 says nothing of rounding).
    inner = (p > 0) & (p < 1) & (p * 16 != np.round(p * 16))
    out = [inner.astype(np.float64)]
    for d in DECIMALS:
        scaled = p * 10.0 ** d
        # 1e-6 of a step: far above float64's error on a value read from d decimals (1e-7 at d = 9),
        # far below what a value written with more decimals misses the grid by.
        out.append((inner & (np.abs(scaled - np.round(scaled)) > 1e-6)).astype(np.float64))
    # d significant digits ("%.9g"): a value v is on the grid of step 10^(floor(log10 v) - d + 1).
    # A subnormal value (below 2.2e-308, as GaussianNB's predict_proba gives: 1e-320) holds too few
    # digits of its own to show how many were written: it is no evidence either way (its step,
    # 10^-328 at d = 9, is 0 in float64 and divided to inf and NaN with RuntimeWarnings). Scaling
    # by 10^-lead, then 10^(d-1), keeps every factor a normal float64 (10^308 at most).
    normal = inner & (p >= np.finfo(np.float64).tiny)
    lead = np.floor(np.log10(np.where(normal, p, 0.5)))
    unit = p * 10.0 ** -lead  # in [1, 10) where normal
    for d in DECIMALS:
        scaled = unit * 10.0 ** (d - 1)
        out.append((normal & (np.abs(scaled - np.round(scaled)) > 1e-6)).astype(np.float64))
    f32 = p.astype(np.float32).astype(np.float64)
    out.append((inner & (np.abs(p - f32) > _F32_REL * p)).astype(np.float64))
    return out


@dataclass(frozen=True)
class Resolution:
    """How finely the values were written: ``decimals`` (a 10^-d grid), ``digits`` (d significant
    digits: a 10^-d grid just below 1, none near 0) and/or ``float32``."""

    decimals: int | None
    float32: bool
    digits: int | None = None

    @property
    def half_at_1(self) -> float:
        """A score of exactly 1 stands for anything from 1 - this."""
        return max(0.5 * 10.0 ** -self.decimals if self.decimals else 0.0,
                   0.5 * 10.0 ** -self.digits if self.digits else 0.0, FLOAT32_HALF if self.float32 else 0.0)

    @property
    def half_at_0(self) -> float:
        """A score of exactly 0 stands for anything below this (0: a 0 is the model's own)."""
        return 0.5 * 10.0 ** -self.decimals if self.decimals else 0.0

    def half(self, side: int) -> float:
        return self.half_at_1 if side else self.half_at_0

    def words(self) -> str:
        """How the values were written, e.g. "rounded to 3 decimals (steps of 0.1 %)"."""
        return _words(self)[0]

    def stands_for(self, side: int) -> str:
        """What a score of exactly 1 (``side`` 1) or 0 stands for, e.g. "anything from 99.95 %"."""
        h = self.half(side)
        return f"anything from {percent(1 - h)}" if side else f"anything below {percent(h)}"


def _words(res: Resolution) -> tuple[str, str]:
    """(how the values near 1 were written, "decimals" | "digits" | "float32"): the coarsest that is
    evident decides what a 1 stands for."""
    half = res.half_at_1
    if res.decimals and 0.5 * 10.0 ** -res.decimals == half:
        d = res.decimals
        return f"rounded to {d} decimal{'s' if d > 1 else ''} (steps of {_step(d)})", "decimals"
    if res.digits and 0.5 * 10.0 ** -res.digits == half:
        d = res.digits
        return f"rounded to {d} significant digit{'s' if d > 1 else ''} (steps of {_step(d)} just below 1)", "digits"
    return "stored in single precision (float32, steps of 6e-8 just below 1)", "float32"


def _step(d: int) -> str:
    """A step of 10^-d in words: "0.1 %" down to 0.01 %, then "1e-07"."""
    return percent(10.0 ** -d) if d <= 4 else f"{10.0 ** -d:g}"


def percent(p: float) -> str:
    """A probability in percent with the digits it needs: 99.95 %, 99.999997 %, 0.05 %."""
    return f"{100 * p:.10g} %"


def from_evidence(counts: np.ndarray) -> Resolution | None:
    """The resolution the counts (:data:`EVIDENCE_NAMES`, in order) show, None when none is evident."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.size != len(EVIDENCE_NAMES) or counts[0] < MIN_EVIDENCE:
        return None
    m = len(DECIMALS)
    on = [d for d, k in zip(DECIMALS, counts[1:1 + m]) if k == 0]
    on_digits = [d for d, k in zip(DECIMALS, counts[1 + m:1 + 2 * m]) if k == 0]
    decimals = on[0] if on and on[0] >= MIN_DECIMALS else None
    digits = on_digits[0] if on_digits and on_digits[0] >= MIN_DECIMALS else None
    if (on and on[0] < MIN_DECIMALS) or (on_digits and on_digits[0] < MIN_DECIMALS):
        return None  # a coarse grid: the model's own values as likely as a rounding
    float32 = bool(counts[-1] == 0)
    if decimals is None and digits is None and not float32:
        return None
    return Resolution(decimals, float32, digits)


#: Values looked at at once by :func:`evidence_counts` and :func:`rounding_note`: :func:`evidence_terms`
#: makes ~20 temporary float64 arrays of its input's size (~160 bytes a value), so that a whole score
#: table at once took ten times the memory of the table itself (audit 12c: a 127 KB .csv.gz of 2,000 rows
#: x 20,000 scores peaked at 8.6 GB); 32,768 values take ~5 MB.
CHUNK_VALUES = 1 << 15


def value_blocks(values: np.ndarray, row_scale: np.ndarray | None = None, chunk: int = CHUNK_VALUES):
    """The values of ``values`` (1-D, or 2-D: rows x classes), as float64 1-D blocks of whole rows of
    about ``chunk`` values (one row at least), each row multiplied by ``row_scale`` (one number a row)
    when given: a block at a time, so that no copy of the whole table is made."""
    values = np.asarray(values)
    if values.ndim != 2:
        values = values.reshape(-1, 1)
    n, k = values.shape
    step = max(1, chunk // max(k, 1))
    for a in range(0, n, step):
        block = np.asarray(values[a:a + step], dtype=np.float64)
        if row_scale is not None:
            block = block * np.asarray(row_scale[a:a + step], dtype=np.float64)[:, None]
        yield np.ravel(block)


def evidence_counts(p: np.ndarray, row_scale: np.ndarray | None = None) -> np.ndarray:
    """The counts of :data:`EVIDENCE_NAMES` (in order) over the values ``p`` (any shape; a 2-D ``p`` with
    ``row_scale``: each row times its number), added up block by block (:func:`value_blocks`: the counts
    are whole numbers, so the sum is the same as over all values at once)."""
    p = np.asarray(p)
    if p.ndim > 2:
        p = p.reshape(-1)
    counts = np.zeros(len(EVIDENCE_NAMES))
    for block in value_blocks(p, row_scale):
        counts += [t.sum() for t in evidence_terms(block)]
    return counts


def resolution_of(p: np.ndarray, row_scale: np.ndarray | None = None) -> Resolution | None:
    """The evident resolution of the values ``p`` (any shape), None when none is."""
    return from_evidence(evidence_counts(p, row_scale))


def _any_at_edges(values: np.ndarray, row_scale: np.ndarray | None) -> tuple[bool, bool]:
    """(any value >= 1, any value <= 0), block by block."""
    at1 = at0 = False
    for block in value_blocks(values, row_scale):
        at1 = at1 or bool(np.any(block >= 1))
        at0 = at0 or bool(np.any(block <= 0))
    return at1, at0


def grids_from_evidence(counts: np.ndarray) -> Resolution:
    """Every grid that all the counted values lie on, however coarse, without :func:`from_evidence`'s
    thresholds: the coarsest 10^-d grid (``decimals``), the fewest significant digits (``digits``),
    and whether every value is a float32 number; ``Resolution(None, False)`` for float64 values on no
    grid. For telling whether two sets of values were written alike (a saved recalibrator's fit rows
    and a checked file, :mod:`pbr_core.fit_rows`), not for reading a 0 or 1 as a rounding: a model's
    own coarse values count here. Without counted values every grid holds them (1 decimal, float32)."""
    counts = np.asarray(counts, dtype=np.float64)
    m = len(DECIMALS)
    decimals = next((d for d, k in zip(DECIMALS, counts[1:1 + m]) if k == 0), None)
    digits = next((d for d, k in zip(DECIMALS, counts[1 + m:1 + 2 * m]) if k == 0), None)
    return Resolution(decimals, bool(counts[-1] == 0), digits)


def rounding_note(values: np.ndarray, what: str = "Scores", percent_text: bool = False,
                  row_scale: np.ndarray | None = None) -> str:
    """The loader's note when scores of exactly 0 or 1 may be roundings (an evident resolution, and
    such scores on a side it rounds): "Confidences are written with one decimal of a percent: values of
    100.0% stand for anything from 99.95% ..."; "" otherwise. ``percent_text``: the file wrote them
    as percentages. ``row_scale``: each row of a 2-D ``values`` times its number is what the file wrote
    (:meth:`pbr_core.predictions.Predictions.as_written`), applied block by block (no copy of the table)."""
    values = np.asarray(values)
    if values.ndim > 2:
        values = values.reshape(-1)
    res = resolution_of(values, row_scale)
    if res is None:
        return ""
    any1, any0 = _any_at_edges(values, row_scale)
    at1 = any1 and res.half_at_1 > 0
    at0 = any0 and res.half_at_0 > 0
    if not (at1 or at0):
        return ""
    kind = _words(res)[1]
    d = res.decimals if kind == "decimals" else res.digits
    h0 = res.half_at_0
    if kind == "float32":
        how = "stored in single precision (float32)"
        one, from1 = "1", f"{1 - res.half_at_1:.10g}"
    elif percent_text and d >= 2:
        pd_ = d - 2
        how = (f"written with {'no decimals' if pd_ == 0 else 'one decimal' if pd_ == 1 else f'{pd_} decimals'} "
               "of a percent")
        one, from1 = f"{100:.{pd_}f}%", f"{100 * (1 - res.half_at_1):.{pd_ + 1}f}%"
    else:
        how = f"written with {d} {'decimal' if kind == 'decimals' else 'significant digit'}{'s' if d > 1 else ''}"
        one, from1 = (f"{1:.{d}f}" if kind == "decimals" else "1"), f"{1 - res.half_at_1:.{d + 1}f}"
    stands = [f"values of {one} stand for anything from {from1}"] if at1 else []
    if at0:
        zero = (f"{0:.{d - 2}f}%" if percent_text and kind == "decimals" and d >= 2 else f"{0:.{res.decimals}f}")
        below = (f"{100 * h0:.{d - 1}f}%" if percent_text and kind == "decimals" and d >= 2
                 else f"{h0:.{res.decimals + 1}f}")
        stands.append(f"values of {zero} {'stand ' if not at1 else ''}for anything below {below}")
    return (f"{what} are {how}: {' and '.join(stands)}. The test of calibration therefore does not call an "
            "outcome that went against such a value impossible: it tests those rows within their rounding (at its "
            "edge when more of them went wrong than even the edge predicts).")


def coarse_grid_words(values: np.ndarray) -> str:
    """How coarsely ``values`` were written when that is coarse enough for an export's rounding to move a
    reliability curve (1 or 2 decimals, 1 or 2 significant digits, or only 0, 1 and simple fractions):
    "written with at most 1 decimal"; "" otherwise. The same grids as :func:`coarse_caveat` reads."""
    counts = evidence_counts(np.asarray(values, dtype=np.float64))
    if counts[0] == 0:
        return "0, 1 or a simple fraction such as 0.5"
    g = grids_from_evidence(counts)
    for d, kind in ((g.decimals, "decimal"), (g.digits, "significant digit")):
        if d is not None and d < MIN_DECIMALS:
            return f"written with at most {d} {kind}{'s' if d > 1 else ''}"
    return ""


#: What a "for certain" verdict adds when the values could be an export's rounding (:func:`coarse_caveat`);
#: front ends look for it to shorten the caveat (a table cell).
COARSE_CAVEAT_MARK = "if those scores of 0 and 1 are the model's own"


def coarse_caveat(counts: np.ndarray) -> str:
    """The caveat a "miscalibrated for certain" verdict carries when the values it read were written on a grid
    that is not read as a rounding (:func:`from_evidence`: a 1- or 2-decimal grid, :data:`MIN_DECIMALS`, or a
    finer one shown by too few values, :data:`MIN_EVIDENCE`), "" for values on no grid (float64 scores: their
    0 and 1 are the model's). Values that are all 0, 1 or simple fractions (0.5, 0.25) show no grid, and
    a rounded export writes them too: they get the caveat (at 1 decimal, the widest). Audit 9b: Adult's probabilities written with 1 decimal, outcomes drawn from the
    unrounded ones, read "for certain" in 23 % of 40-row files and 71 % of 200-row ones. A 10-tree forest or
    k-nearest neighbours (k = 10) writes such values itself, so the verdict stands, said with its condition."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.size != len(EVIDENCE_NAMES):
        return ""
    g = grids_from_evidence(counts)
    if counts[0] == 0:  # only 0, 1 and simple fractions (0.5, 0.25): what a rounded export writes too
        d, how = 1, "every score in this file is 0, 1 or a simple fraction such as 0.5"
        step = "1 decimal, say"
    elif g.decimals is not None:
        d = g.decimals
        how = f"every score in this file is written with at most {d} decimal{'s' if d > 1 else ''}"
    elif g.digits is not None:
        d = g.digits
        how = f"every score in this file is written with at most {d} significant digit{'s' if d > 1 else ''}"
    else:
        return ""
    if counts[0] > 0:
        step = f"{d} decimal{'s' if d > 1 else ''}" if g.decimals is not None else \
            f"{d} significant digit{'s' if d > 1 else ''}"
    h = 0.5 * 10.0 ** -d
    return (f", {COARSE_CAVEAT_MARK}. But {how}: if the file was exported rounded to {step}, a score written "
            f"1 stands for anything from {1 - h:.{d + 1}f} and one written 0 for anything below {h:.{d + 1}f}, and "
            "these outcomes are then a rounding, not a certainty. A small random forest or a nearest-neighbours "
            "model writes such values itself; to tell, export the scores with more decimals")
