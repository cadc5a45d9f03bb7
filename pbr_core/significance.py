"""Is the miscalibration larger than chance? Tests of calibration, their power, and consistency bands.

Every sentence a page writes about calibration ("miscalibrated beyond chance", "no evidence of
miscalibration", "this bin's gap is larger than chance") rests on this module. A claim must hold at
every sample size, so each tool here is either exact or used only where its approximation has been
measured to hold (benchmarks/bench_claims.py, RESULTS_claims.md; the tests in tests/test_significance.py
draw outcomes from known probabilities and count how often a claim is made).

The test of calibration
-----------------------
H0: P(Y = 1 | p) = p for every row (p: p(y=1) of binary data, or the top-label confidence with Y the
correctness). Two statistics, both sums over rows:

* **Cox's recalibration test** (Cox 1958, "Two further applications of a model for binary
  regression"): the score test of a = 0, b = 1 in logit P(Y = 1) = a + b logit(p), i.e. of
  calibration in the large (the mean outcome against the mean prediction) and of the calibration
  slope (over- or under-confidence) together, 2 degrees of freedom. With x = logit(p) and
  w = p(1 - p): U = sum (y - p) (1, x), I = sum w (1, x; x, x^2), statistic U' I^-1 U ~ chi^2(2).
  It detects a plain shift (outcomes uniformly 8 points more frequent than predicted), which
* **Spiegelhalter's z** (1986) misses near p = 1/2, because it weights each row by (1 - 2p):
  z = sum (y - p)(1 - 2p) / sqrt(sum (1 - 2p)^2 w). It is kept for what it sees best
  (miscalibration of the Brier score's reliability term).

An outcome the model gave probability exactly 0 (y = 1 at p = 0) settles it: p-value 0, whatever
the rest. Otherwise the test's statistic is the smaller of the two p-values; one p-value per set of
rows:

* **analytic**: min(1, 2 min(p_Cox, p_Spiegelhalter)) (Bonferroni over the two; valid whatever their
  dependence) from the asymptotic distributions. Measured on real probability distributions, these
  hold in the tails only when the rows carry enough information: below V = sum p(1 - p) of about
  100 ("effective rows"), the chance of p < 0.001 under H0 was up to 37 times too high (10 rows of
  CIFAR-10 confidences, where nearly every p is above 0.99).
* **Monte Carlo** (exact at any n): outcomes are drawn from the rows' own probabilities R times
  (the model's world if it were calibrated) and the p-value is the share of draws whose statistic
  is at least as extreme (Besag & Clifford 1991's sequential version: drawing stops once 20 draws
  were as extreme; the p-value is then 20 / draws). Valid exactly, conditionally on the
  probabilities, whatever their distribution. Used whenever V < :data:`EXACT_BELOW_V` (and the rows
  are at most :data:`EXACT_MAX_ROWS`, the rows a stream keeps per group for it).

What "no evidence" means: :func:`detectable_shift` is the uniform shift delta (outcomes delta more
or less frequent than predicted, every row) that the test detects at least 80 % of the time at the
level used (a lower bound on the power of the decision the test makes, Cox's 2-degree-of-freedom
test and Spiegelhalter's z each at alpha / 2; measured). A page then says "no evidence of miscalibration at this
sample size: a shift of X would be detected at least 80 % of the time", never "calibrated". The
formula rests on a normal approximation of the outcomes' sum and on the analytic test's level; on every
set tested by Monte Carlo draws (V < :data:`EXACT_BELOW_V`: every set under 400 rows, and larger ones of
rare events), where neither holds, the shift is found instead by drawing shifted outcomes and reading
the test's own sequential decision on them (:func:`drawn_detectable_shift`): with 10 rows of UCI
Adult's p(y=1) the formula's shift was detected in 62 % of draws, not 80 %, and above the 60 rows where
it was drawn until audit 9b in 57.6-60.0 % of files of 100-300 rows all at 0.001, 75.5 % at 100 rows of
0.05, 62.2 % for a file of 61 rows of Adult's scores moved to a mean of 0.1 % (drawn: 80.0-85.1 % of
1,000 draws in those cells; tests/test_claims_small_n.py). The draws are sparse (their cost follows the
uncertain outcomes, not the rows: 0.13 s for 10,000 rows of rare events); a group among many draws it
only where that stays cheap (:data:`GROUP_SHIFT_WORK`), which leaves the formula to groups of many
uncertain outcomes, where it held (78.8-82.0 % at V ~ 21, 85-100 % on Adult-like scores).

Consistency bands
-----------------
Many bins outside their bands: :func:`bins_outside_test`. Bins hold disjoint rows, so under
calibration their outcomes are independent, and bin b falls outside its band with probability at
most pi_b (:func:`outside_chances`: from its rows and mean prediction, at most 1 - ``level`` and
far less in bins of few rows): the number outside is stochastically at most the Poisson-binomial
count of the pi_b, whose upper tail at the count (:func:`bins_outside_p`) is a valid p-value for
"more bins outside their bands than chance"
(:func:`bins_note` says so only below :data:`ALPHA_BINS`; one bin in ten outside, the chance rate, says
nothing).

One family of claims
--------------------
The test, the bins note and the CORP MCB against chance (:mod:`pbr_core.corp`) answer the same question
about the same rows, side by side on one page; each at 5 %, a calibrated model drew at least one of
them in 9-11.5 % of files. The 5 % is split between them (:data:`ALPHA_TEST`, :data:`ALPHA_BINS`,
:data:`ALPHA_MCB`; a union bound), so the family holds 5 % and each claim is still decided alone.

:func:`consistency_band` gives, per bin of a reliability diagram, where the bin's observed
frequency would fall at least ``level`` of the time if the model were calibrated (Broecker & Smith
2007, "Increasing the reliability of reliability diagrams"): the quantiles of Binomial(n_b, mean
p of the bin) / n_b. The outcomes of a calibrated bin are a Poisson-binomial sum, which is more
concentrated than the binomial of the same mean (Hoeffding 1956), so the band covers at least
``level``; bins are narrow (width 1/B), so it is nearly exact. Two sums per bin: mergeable.
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, replace
from typing import Sequence

import numpy as np

from pbr_core import resolution as _res

__all__ = ["ALPHA_BINS", "ALPHA_FAMILY", "ALPHA_MCB", "ALPHA_TEST", "CalibrationTest", "at_floor", "EXACT_BELOW_V",
           "EXACT_MAX_ROWS", "GROUP_SHIFT_WORK", "N_SUMS", "SHIFT_NONE", "SHIFT_NOT_DRAWN", "calibration_sums",
           "calibration_sums_by", "calibration_test", "file_evidence", "with_evidence", "calibration_test_from_sums", "consistency_band", "detectable_shift",
           "drawn_detectable_shift", "format_p", "needs_exact", "verdict", "bins_outside", "bins_outside_p",
           "bins_outside_test", "outside_chances", "bins_note"]

#: One set of rows gets three "beyond chance" claims about the same question, is this model miscalibrated?
#: (the Reliability page, its CORP expander, the audit report, ``pbr-calib evaluate``): the test of
#: calibration ("miscalibrated beyond chance", :func:`verdict`), the bins note after a "no evidence" ("Not
#: an all-clear: k of the m bins ...", :func:`bins_note`) and the CORP miscalibration MCB ("beyond chance",
#: :func:`pbr_core.corp.mcb_against_chance`). Each at 5 %, a calibrated model was called miscalibrated by at
#: least one of them in 11.5 % of 400 calibrated Adult files of 300 rows and 9.0 % of 300 of 2,000 rows
#: (audit 5); split, in 3.1 % of 1,500 and 3.5 % of 600 (8.3 % and 7.5 % before on the same files,
#: benchmarks/RESULTS_claim_family.md). The family's level is split between them (a union bound: the
#: chance that any of the three is made of a calibrated model is at most the sum of their levels, whatever
#: their dependence; tests/test_claim_family.py checks the sum), so that each claim is still decided on
#: its own (the page computes the MCB's 199 draws only when its expander is opened) and together they
#: hold 5 %.
ALPHA_FAMILY = 0.05
#: The test of calibration: the main claim, and the one with power against miscalibration of the whole
#: (a shift, over- or under-confidence), so it keeps most of the level: outcomes 0.03 more frequent than
#: predicted on 300 Adult rows were found in 172 of 300 files (182 at 0.05). Its "no evidence; a shift of
#: X would be detected at least 80 % of the time" is computed at this level (300 Adult rows: 0.070, 0.0675
#: at 0.05).
ALPHA_TEST = 0.035
#: The bins note: it exists for what the test does not look at, one range of predictions badly off (a
#: Platt fit squeezing scores into 0.19-0.26, docs/claims.md row 8b). At 3,000 rows (B = 14) every such
#: file the test calls "no evidence" still gets it at 0.005 (71 of 71). With few bins the count is coarse
#: (3 of 8 bins outside: p = 0.038; 4 of 8: 0.005), so at 600 rows most of those files are lost at any
#: level the family can spare, and 0.01 instead of 0.005 changed no count measured (squeezed files, four
#: Platt fits, 300 and 600 rows); the CORP MCB is beyond chance on all of them
#: (benchmarks/RESULTS_claim_family.md).
ALPHA_BINS = 0.005
#: The CORP MCB against chance: with :data:`pbr_core.corp.MCB_CHANCE_DRAWS` = 199 draws the reference is
#: the 2nd largest drawn MCB (k = floor(0.01 x 200) = 2: a level the Monte Carlo test attains exactly).
#: At 0.005 it would be the largest of the 199 (outcomes 0.06 more frequent than predicted, 300 Adult
#: rows: 47 of 300 files beyond chance against 69 at 0.01); 499 draws instead of 199 gained nothing
#: measurable at 0.01 (a shift of 0.08, 1,000 KITTI rows: 37 against 36 of 60) for 2.5 times the cost.
ALPHA_MCB = 0.01

#: Below this many effective rows V = sum p(1 - p), p-values come from Monte Carlo draws (exact). The
#: asymptotic combined test's chance of p < 0.001 under calibration was 35x its level at V = 0.2 (10
#: CIFAR-10 confidences), 1.5-13x at V = 0.6-2.6, and within noise of its level from V = 128 on
#: (benchmarks/RESULTS_claims.md, table 1; a first measurement of 60,000-200,000 draws each gave
#: 2.8x at V ~ 6, 1.4-1.6x at V ~ 23-27 and 1.15x at V ~ 65).
EXACT_BELOW_V = 100.0
#: At most this many rows per set for the Monte Carlo test (a stream keeps the rows of groups up to
#: this size to test them as the whole file in memory would). A larger set with V below
#: EXACT_BELOW_V (a million rows of p ~ 0.99999) is tested analytically and flagged ``approximate``.
EXACT_MAX_ROWS = 50_000
#: A group's detectable shift is drawn (:func:`drawn_detectable_shift`) where that draws at most this many
#: outcomes under calibration (:func:`_shift_work`), else it is the normal bound's (:func:`detectable_shift`):
#: 90 one-day groups of ~222 rows of Adult-like scores, each at alpha / 90, took 20.5 s drawn, 0.6 s
#: with the bound. The groups this leaves to the bound carry many uncertain outcomes (sum of min(p, 1 - p)
#: above ~55 at 90 groups, ~300 at 10), where the outcome count is not coarse: the bound's figure was
#: detected in 78.8-82.0 % of 400 draws at V ~ 21 (every score 0.2, 0.05, 0.01, 0.002; 10 groups), 85-100 %
#: on Adult-like scores; rare events, where it failed (58-62 %), cost little to draw and are drawn.
GROUP_SHIFT_WORK = 2e6
#: Outcome vectors drawn per candidate shift (coupled across the bisection's shifts, :class:`_ShiftedDraws`).
_SHIFT_DRAWS = 1000
#: Probabilities are clipped to [EPS, 1 - EPS] for logit(p) (an event of probability 0 that
#: happens then gives an enormous statistic, as it should).
EPS = 1e-12
#: How the test reads when an outcome had probability 0 (its p-value is then 0: certain); ``{what}``:
#: "1 outcome" or "28 outcomes" (:func:`_impossible_words`).
IMPOSSIBLE = "certain: {what} happened that the model gave probability 0"
#: Sequential Monte Carlo: stop after this many draws as extreme as the data (Besag & Clifford 1991).
_H = 20
#: Where :func:`detectable_shift` reads how much of a shift the rows can take: for each g of this
#: grid (0.5, 0.25, ..., 2^-14), sum min(p, g) and sum min(1 - p, g), the mean of sum (y - p) under a
#: shift of g down (up) with each row's probability clipped at 0 (1). Rows at or near 0 (1) cannot
#: move further, which a formula with n x delta alone overstated (40 % of rows at exactly 0 count n
#: delta although they add nothing).
SHIFT_GRID = 2.0 ** -np.arange(1, 15)
#: The sums kept per set of rows, in order (all add up over batches and partitions).
SUM_NAMES = ("n", "x", "resid", "resid_x", "w", "w_x", "w_xx", "sp_num", "sp_var", "p", "impossible",
             *(f"min_p_{g:g}" for g in SHIFT_GRID), *(f"min_1-p_{g:g}" for g in SHIFT_GRID),
             # the rows at exactly 0 and 1 by outcome, and how finely the values were written
             # (:mod:`pbr_core.resolution`): a score of 1 may be a rounding (:func:`_within_rounding`)
             "at0_y0", "at0_y1", "at1_y0", "at1_y1", *_res.EVIDENCE_NAMES)
N_SUMS = len(SUM_NAMES)
_GRID0 = 11  # where the grid's sums start
_EDGE0 = _GRID0 + 2 * SHIFT_GRID.size  # where the counts at 0 and 1 start
_EVID0 = _EDGE0 + 4  # where the resolution's evidence starts


def _terms(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(N_SUMS, rows): each row's contribution to every sum of :data:`SUM_NAMES`."""
    p = np.asarray(p, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    pc = np.clip(p, EPS, 1 - EPS)
    x = np.log(pc) - np.log1p(-pc)
    w = p * (1 - p)
    r = y - p
    s = 1 - 2 * p
    # An outcome the model gave probability exactly 0 (y = 1 at p = 0, y = 0 at p = 1): impossible if
    # the model were calibrated, whatever the other rows say.
    impossible = ((p <= 0) & (y > 0)) | ((p >= 1) & (y < 1))
    return np.stack([np.ones_like(p), x, r, r * x, w, w * x, w * x * x, r * s, s * s * w, p,
                     impossible.astype(np.float64)])


def _room(p: np.ndarray):
    """Each row's min(p, g) then min(1 - p, g) for every g of :data:`SHIFT_GRID`, one (rows,) array at a
    time (not a (28, rows) block: a million rows would take 220 MB)."""
    p = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)
    for room in (p, 1.0 - p):
        for g in SHIFT_GRID:
            yield np.minimum(room, g)


def _edges(p: np.ndarray, y: np.ndarray, written: np.ndarray | None = None) -> list[np.ndarray]:
    """Per row, 0/1 for each of "at0_y0", "at0_y1", "at1_y0", "at1_y1" then the resolution's evidence
    (read from ``written``, the values as the file wrote them, when given)."""
    p = np.asarray(p, dtype=np.float64)
    one = np.asarray(y, dtype=np.float64) > 0
    at0, at1 = p <= 0, p >= 1
    return ([(m & o).astype(np.float64) for m in (at0, at1) for o in (~one, one)]
            + _res.evidence_terms(p if written is None else written))


def calibration_sums(p: np.ndarray, y: np.ndarray, written: np.ndarray | None = None) -> np.ndarray:
    """The sums (:data:`SUM_NAMES`) of probabilities ``p`` of 0/1 outcomes ``y``, shape (N_SUMS,).
    ``written``: the same values as the file wrote them, where the loader changed them
    (:meth:`pbr_core.predictions.Predictions.as_written`: renormalised rows), whose grid tells how finely
    the file rounded them; None: ``p``."""
    return np.concatenate([_terms(p, y).sum(axis=1), [float(m.sum()) for m in _room(p)],
                           [float(m.sum()) for m in _edges(p, y, written)]])


def calibration_sums_by(codes: np.ndarray, n_groups: int, p: np.ndarray, y: np.ndarray,
                        written: np.ndarray | None = None) -> np.ndarray:
    """The sums of every group at once: (N_SUMS, n_groups), rows of group ``codes[i]``."""
    rows = [*_terms(p, y), *_room(p), *_edges(p, y, written)]
    return np.stack([np.bincount(codes, weights=row, minlength=n_groups) for row in rows])


def file_evidence(sums: np.ndarray) -> np.ndarray:
    """The resolution's evidence (:data:`pbr_core.resolution.EVIDENCE_NAMES`) of sets of rows that make up a
    file: the total over the sets' sums, (N_SUMS,) or (N_SUMS, sets). How finely the file wrote its values is
    a fact of the file, not of a group: a 15-row group of a file rounded to 3 decimals holds too few values
    strictly between 0 and 1 (:data:`pbr_core.resolution.MIN_EVIDENCE`) to show the grid on its own, and its
    wrong 1.000 read "miscalibrated for certain" while the whole file read it within its rounding."""
    sums = np.asarray(sums, dtype=np.float64)
    ev = sums[_EVID0:]
    return ev.sum(axis=1) if ev.ndim == 2 else ev.copy()


def with_evidence(sums: np.ndarray, evidence: np.ndarray | None) -> np.ndarray:
    """``sums`` ((N_SUMS,) or (N_SUMS, sets)) with every set's evidence replaced by ``evidence`` (the file's,
    :func:`file_evidence`); ``sums`` unchanged when None. The sums still add: only the evidence is the file's."""
    if evidence is None:
        return sums
    out = np.array(sums, dtype=np.float64)
    ev = np.asarray(evidence, dtype=np.float64)
    out[_EVID0:] = ev[:, None] if out.ndim == 2 else ev
    return out


@dataclass(frozen=True)
class _Rounded:
    """The rows at a score of exactly 0 or 1 that went against it, where the file's resolution says that
    score may be a rounding (:func:`_within_rounding`): tested at ``values`` instead."""

    resolution: "_res.Resolution"
    wrong: tuple[int, int]       # outcomes against a score of 0 (y = 1), of 1 (y = 0)
    rows: tuple[int, int]        # rows at 0, at 1
    values: tuple[float, float]  # the score they are tested at (NaN: that side is left as it is)


def _within_rounding(sums: np.ndarray) -> _Rounded | None:
    """Where the sums' rows hold outcomes against a score of exactly 0 or 1 that the file's resolution
    (:mod:`pbr_core.resolution`) may have rounded there, the score to test them at: for each such side,
    the value within its rounding interval that the rows at that score fit best, a common value for all
    of them (whatever their outcome, so that the test stays one of calibration): at 1, 1 - (wrong rows) /
    (rows at 1), kept within [1 - h/2, 1]; at 0 alike. That is the edge 1 - h/2 whenever more went wrong
    than even the edge predicts (333 of the LLM export's rows at "100.0%").

    Why not the edge always: the rows' real scores lie anywhere in [1 - h/2, 1], mostly near 1 where an
    LLM's confidences pile up, so the edge predicts more wrong answers than a calibrated model gives, and
    a test at the edge finds "not confident enough" where nothing is wrong: 35 of 40 calibrated files of
    50,000 rows (90 % of them near 1, rounded to 3 decimals) at ALPHA_TEST, against 2 of 40 at the best
    fit (tests/test_rounded_scores.py keeps the level). None when no side needs it."""
    sums = np.asarray(sums, dtype=np.float64)
    a00, a01, a10, a11 = (int(round(v)) for v in sums[_EDGE0:_EVID0])
    wrong = (a01, a10)
    if not any(wrong):
        return None
    res = _res.from_evidence(sums[_EVID0:])
    if res is None:
        return None
    rows = (a00 + a01, a10 + a11)
    values = [float("nan"), float("nan")]
    for side in (0, 1):
        h = res.half(side)
        if wrong[side] and h > 0:
            share = wrong[side] / rows[side]   # the share of rows whose outcome went against the score
            values[side] = min(share, h) if side == 0 else max(1 - share, 1 - h)
    if all(np.isnan(values)):
        return None
    return _Rounded(res, wrong, rows, (values[0], values[1]))


def _moved_sums(sums: np.ndarray, rounded: _Rounded) -> np.ndarray:
    """The sums with the rows at 0 / 1 moved to ``rounded.values``: their terms taken out and put back at
    the new score (the counts at 0 and 1 and the evidence stay: they describe the file as written)."""
    out = np.array(sums, dtype=np.float64)
    y = np.array([0.0, 1.0])
    for side in (0, 1):
        v = rounded.values[side]
        if np.isnan(v):
            continue
        k = out[_EDGE0 + 2 * side:_EDGE0 + 2 * side + 2]  # rows at this side with y = 0, y = 1

        def part(q: float) -> np.ndarray:
            return np.concatenate([(_terms(np.full(2, q), y) * k).sum(axis=1),
                                   [float((m * k).sum()) for m in _room(np.full(2, q))]])

        out[:_EDGE0] += part(v) - part(float(side))
    return out


def _rounding_words(r: _Rounded) -> str:
    """What the verdict says first about the rows moved within their rounding, e.g. "the file gives
    probability 1 to 333 outcomes that did not happen, but its values are rounded to 3 decimals (steps of
    0.1 %): 1 stands for anything from 99.95 %; with the 2,042 rows at 1 taken at 99.95 % (the edge of
    their rounding)"."""
    sides = [side for side in (1, 0) if not np.isnan(r.values[side])]
    gives, stands, taken = [], [], []
    for side in sides:
        k, v, n = r.wrong[side], r.values[side], r.rows[side]
        edge = (1 - r.resolution.half_at_1) if side else r.resolution.half_at_0
        gives.append(f"probability {side} to {k:,} outcome{'' if k == 1 else 's'} that "
                     f"{'did not happen' if side else 'happened'}")
        stands.append(f"{side} stands for {r.resolution.stands_for(side)}")
        taken.append(f"the {n:,} row{'' if n == 1 else 's'} at {side} taken at {_res.percent(v)} "
                     f"({'the edge of their rounding' if v == edge else 'within their rounding, the value their outcomes fit best'})")
    return (f"the file gives {' and '.join(gives)}, but its values are {r.resolution.words()}: "
            f"{' and '.join(stands)}; with {' and '.join(taken)}")


@dataclass(frozen=True)
class CalibrationTest:
    """One test of calibration of a set of rows (see the module docstring)."""

    n: int
    effective_n: float          # V = sum p(1 - p)
    p_value: float              # the one p-value (NaN: nothing to test)
    method: str                 # "analytic" | "Monte Carlo, R draws" | "analytic (approximate: ...)"
    z: float                    # Spiegelhalter's z
    p_spiegelhalter: float
    chi2_cox: float
    p_cox: float
    #: The uniform shift in the outcome rate detected 80 % of the time at the level used (NaN if none).
    detectable_shift: float
    level: float                # the significance level the detectable shift is computed at
    #: Outcomes against a score of exactly 0 or 1 that the file's resolution may have rounded there
    #: (:func:`_within_rounding`): they were tested within their rounding, not called impossible.
    rounded_rows: int = 0
    #: What the verdict says about them first ("" when none).
    rounding: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def _cox(s: np.ndarray) -> tuple[float, float, np.ndarray | None, int]:
    """(chi2, p, pseudo-inverse of I, rank) of Cox's score test from the sums."""
    from scipy.special import chdtrc  # the chi^2 survival function, without importing scipy.stats (seconds)

    n, sx, r, rx, w, wx, wxx = s[:7]
    info = np.array([[w, wx], [wx, wxx]])
    U = np.array([r, rx])
    if not np.all(np.isfinite(info)) or w <= 0:
        return float("nan"), float("nan"), None, 0
    inv, rank = _pinv(info)
    stat = float(U @ inv @ U)
    return stat, float(chdtrc(rank, stat)), inv, rank


def _pinv(info: np.ndarray) -> tuple[np.ndarray, int]:
    """Pseudo-inverse and rank of the 2x2 information (rank 1 when every row has the same p: x is then
    constant and only calibration in the large can be tested)."""
    vals, vecs = np.linalg.eigh(info)
    keep = vals > vals.max() * 1e-10
    inv = (vecs[:, keep] / vals[keep]) @ vecs[:, keep].T
    return inv, int(keep.sum())


def _spiegelhalter(s: np.ndarray) -> tuple[float, float]:
    from scipy.special import ndtr

    num, var = s[7], s[8]
    if var <= 0:
        return float("nan"), float("nan")
    z = float(num / np.sqrt(var))
    return z, float(2 * ndtr(-abs(z)))


def _combined(p1: float, p2: float) -> float:
    ps = [p for p in (p1, p2) if np.isfinite(p)]
    return min(1.0, len(ps) * min(ps)) if ps else float("nan")


def detectable_shift(sums: np.ndarray, level: float = ALPHA_TEST / 2, power: float = 0.8) -> float:
    """The uniform shift delta of the outcome rate (every row's P(Y = 1) = p + delta, clipped to [0, 1],
    towards 1/2 from the rows' mean p) that the analytic test detects with probability at least
    ``power`` when each of its two statistics is compared with ``level`` (the test's alpha halved for
    its two statistics and divided by the number of sets it is corrected for: the test rejects when
    min(p_Cox, p_Spiegelhalter) < level).

    A lower bound on the power, so that "a shift of X would be detected at least 80 % of the time" holds:

    * Spiegelhalter's z can only add rejections to Cox's, so only Cox's test is counted;
    * Cox's statistic U' I^-1 U is at least (sum (y - p))^2 / sum p(1 - p) for every outcome (Cauchy-
      Schwarz with the direction (1, 0)), so it rejects at least whenever |sum (y - p)| exceeds
      sqrt(c V), c the chi^2 critical value of Cox's test (2 degrees of freedom, 1 when every row has
      the same p), V = sum p(1 - p);
    * under the shift, sum (y - p) has mean M(delta) = sum min(delta, room) (room: p for a shift down,
      1 - p up; rows at the edge cannot move) and variance at most V(delta) + (1 + delta)(n delta -
      M(delta)), V(delta) = sum (p + s delta)(1 - p - s delta) (s = +-1); M is concave in delta, so
      its straight-line interpolation between the grid's sums (:data:`SHIFT_GRID`) is below it;
    * the power is then at least 1 - Phi((sqrt(c V) - M) / sqrt(variance)) (normal approximation of a
      sum of independent outcomes).

    The earlier figure (the 1-degree-of-freedom critical value, n delta for the mean) was detected only
    67-76 % of the time at confidences around 0.4-0.5 (f9: LLM answers to 4-option questions, 74.7 %);
    this one 80-88 % there and more elsewhere (tests/test_significance.py).
    """
    from scipy.special import chdtri

    sums = np.asarray(sums, dtype=np.float64)
    n, V, sp = float(sums[0]), float(sums[4]), float(sums[9])
    if n <= 0 or V <= 0 or not 0 < level < 1:
        return float("nan")
    _, rank = _pinv(np.array([[sums[4], sums[5]], [sums[5], sums[6]]]))
    crit = float(np.sqrt(chdtri(rank, level)))
    sign = -1.0 if sp / n > 0.5 else 1.0
    k = SHIFT_GRID.size
    room = sums[_GRID0:_GRID0 + k] if sign < 0 else sums[_GRID0 + k:_GRID0 + 2 * k]
    # M(g) on the grid, rising g, with M(0) = 0; beyond the largest g, M(delta) >= M(0.5) (M rises)
    gx = np.r_[0.0, SHIFT_GRID[::-1]]
    gm = np.r_[0.0, room[::-1]]

    def bound(d: float) -> float:
        mean = float(np.interp(d, gx, gm))
        var = V + sign * d * (n - 2 * sp) - n * d * d + (1 + d) * max(n * d - mean, 0.0)
        return 1 - _ndtr((crit * np.sqrt(V) - mean) / np.sqrt(max(var, 1e-300)))

    lo, hi = 0.0, 1.0
    for _ in range(40):  # bisection (1e-12: far below what is printed); the bound grows with delta above 1/2
        d = (lo + hi) / 2
        lo, hi = (d, hi) if bound(d) < power else (lo, d)
    return hi if hi < 1.0 else float("nan")


def _ndtr(x: float) -> float:
    from scipy.special import ndtr

    return float(ndtr(x))


def needs_exact(n: int, effective_n: float) -> bool:
    """Whether a set of rows is tested by Monte Carlo draws: too little information for the
    asymptotic tails (V < EXACT_BELOW_V) and few enough rows to draw (n <= EXACT_MAX_ROWS)."""
    return effective_n < EXACT_BELOW_V and n <= EXACT_MAX_ROWS


def calibration_test_from_sums(sums: np.ndarray, n_tests: int = 1, alpha: float = ALPHA_TEST) -> CalibrationTest:
    """The analytic test from :func:`calibration_sums` (see the module docstring). ``n_tests``: how many sets
    the p-values will be corrected over (Holm); the detectable shift is computed at alpha / (2 n_tests),
    the level the first step of Holm's method gives a set's combined test."""
    sums = np.asarray(sums, dtype=np.float64)
    rounded = _within_rounding(sums)
    if rounded is not None:
        return replace(calibration_test_from_sums(_without_evidence(_moved_sums(sums, rounded)), n_tests, alpha),
                       **_rounded_fields(rounded))
    n, V = int(round(sums[0])), float(sums[4])
    chi, p_cox, _, _ = _cox(sums)
    z, p_sp = _spiegelhalter(sums)
    level = alpha / (2 * max(int(n_tests), 1))
    method = "analytic"
    impossible = int(round(sums[10]))
    if impossible:
        # Said with its condition where the values lie on a grid not read as a rounding (1 or 2 decimals):
        # the 0 and 1 may be an export's (resolution.coarse_caveat).
        method = _impossible_words(impossible) + _res.coarse_caveat(sums[_EVID0:])
        return CalibrationTest(n=n, effective_n=V, p_value=0.0, method=method, z=z,
                               p_spiegelhalter=p_sp, chi2_cox=chi, p_cox=p_cox,
                               detectable_shift=detectable_shift(sums, level), level=level)
    if V < EXACT_BELOW_V and n > 0:
        method = (f"analytic (approximate: the rows carry little information, sum p(1 - p) = {V:.3g}, and are "
                  f"too many to draw)")
    return CalibrationTest(n=n, effective_n=V, p_value=_combined(p_cox, p_sp), method=method, z=z,
                           p_spiegelhalter=p_sp, chi2_cox=chi, p_cox=p_cox,
                           detectable_shift=detectable_shift(sums, level) if n > 0 else float("nan"), level=level)


def _without_evidence(sums: np.ndarray) -> np.ndarray:
    """The sums with no resolution evident (moved once, the rows are not moved again)."""
    out = np.array(sums, dtype=np.float64)
    out[_EVID0] = 0.0
    return out


def _rounded_fields(rounded: _Rounded) -> dict:
    moved = [side for side in (0, 1) if not np.isnan(rounded.values[side])]
    return {"rounded_rows": int(sum(rounded.wrong[side] for side in moved)), "rounding": _rounding_words(rounded)}


def monte_carlo_draws(n_tests: int, alpha: float, cost: float) -> int:
    """Most draws of the Monte Carlo test: enough to resolve p-values 20 times below the first Holm
    threshold alpha / n_tests (at least 1999), at most 99,999, and at most 2e8 / cost, the expected
    work of a draw (:class:`_Sampler`: about the rows whose outcome is uncertain)."""
    want = int(np.ceil(20 * max(int(n_tests), 1) / alpha)) - 1
    return int(max(1999, min(99_999, want, 2e8 // max(cost, 1.0))))


def calibration_test(p: np.ndarray, y: np.ndarray, *, n_tests: int = 1, alpha: float = ALPHA_TEST, seed: int = 0,
                     name: str = "", _resolution_read: bool = False, draw_shift: bool = True,
                     evidence: np.ndarray | None = None, written: np.ndarray | None = None,
                     shift_work: float | None = None) -> CalibrationTest:
    """Test of calibration of probabilities ``p`` of 0/1 outcomes ``y``: analytic when the rows carry
    enough information, Monte Carlo (exact) otherwise (:func:`needs_exact`).

    ``seed`` and ``name`` (a group's name) seed the draws: the same rows give the same p-value in any
    process and on a stream. ``n_tests``: see :func:`calibration_test_from_sums`. ``draw_shift=False``:
    a set that would get :func:`drawn_detectable_shift` (every set the Monte Carlo test decides and does
    not flag) gets NaN instead (:data:`SHIFT_NOT_DRAWN`): the draws cost ~0.1 s a set, 20 s for the 180
    one-day groups of ~44 rows of the audit's fraud file, all flagged too small. ``shift_work``: draw the
    shift only where its draws cost at most this much (:func:`_shift_work`), else keep the normal bound's
    figure (None: always draw; the groups pass :data:`GROUP_SHIFT_WORK`).
    ``evidence``: how finely the file wrote its values (:func:`file_evidence` of the whole file), read in
    place of the rows' own when they are a group or slice of it (None: the rows' own); ``written``: the
    rows' values as the file wrote them (:func:`calibration_sums`), read for the rows' own.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> p = rng.uniform(0.2, 0.8, 2000); y = (rng.uniform(size=2000) < p + 0.08).astype(int)
    >>> calibration_test(p, y).p_value < 0.001       # a plain shift of 8 points: found
    True
    """
    p = np.asarray(p, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    sums = with_evidence(calibration_sums(p, y, written), evidence)
    rounded = _within_rounding(sums)
    if rounded is not None:  # the rows at 0 / 1 moved within their rounding, as the sums' test moves them
        moved = p.copy()
        for side, at in ((0, p <= 0), (1, p >= 1)):
            if not np.isnan(rounded.values[side]):
                moved[at] = rounded.values[side]
        test = calibration_test(moved, y, n_tests=n_tests, alpha=alpha, seed=seed, name=name,
                                _resolution_read=True, draw_shift=draw_shift, shift_work=shift_work)
        return replace(test, **_rounded_fields(rounded))
    if _resolution_read:
        sums = _without_evidence(sums)
    analytic = calibration_test_from_sums(sums, n_tests, alpha)
    if p.size == 0 or sums[10] > 0 or not needs_exact(p.size, float(sums[4])):
        return analytic
    q = np.minimum(p, 1 - p)
    r_max = monte_carlo_draws(n_tests, alpha, float(np.sum(np.where(q >= _DENSE_Q, 1.0, q))))
    key = [int(seed) & 0xFFFFFFFF, zlib.crc32(str(name).encode("utf-8"))]
    p_mc, draws = _monte_carlo_p(p, analytic.p_value, r_max, np.random.default_rng(key))
    shift = {}
    # Holm's first step tests a set at alpha / n_tests; the Monte Carlo test needs no Bonferroni factor 2
    # for its two statistics (it draws the combined one's own null distribution). A set whose p-value is
    # below that level is flagged whatever the other sets' (Holm), so its "no evidence" sentence, the
    # only one that states the shift, is never written: the draws are spent only where it can be.
    level = alpha / max(int(n_tests), 1)
    if not p_mc < level and (not draw_shift or shift_work is None or _shift_work(p, level) <= shift_work):
        shift = {"detectable_shift": drawn_detectable_shift(p, level, rng=np.random.default_rng([*key, 1]))
                 if draw_shift else float("nan"), "level": level}
    return CalibrationTest(**{**analytic.as_dict(), "p_value": p_mc, "method": f"Monte Carlo, {draws:,} draws",
                              **shift})


def _shift_work(p: np.ndarray, level: float) -> float:
    """The outcomes :func:`drawn_detectable_shift` draws under calibration at ``level`` (draws x the rows
    whose outcome is uncertain): most of its cost."""
    q = np.minimum(p, 1 - p)
    cost = float(np.sum(np.where(q >= _DENSE_Q, 1.0, q)))
    return max(monte_carlo_draws(1, level, cost), min(_SHIFT_NULL_DRAWS, 2e8 // max(cost, 1.0))) * max(cost, 1.0)


def drawn_detectable_shift(p: np.ndarray, level: float = ALPHA_TEST, power: float = 0.8, *,
                           rng: np.random.Generator | None = None, draws: int = _SHIFT_DRAWS) -> float:
    """The uniform shift delta of the outcome rate (every row's P(Y = 1) = p + delta, clipped to [0, 1],
    towards 1/2 from the rows' mean p, as :func:`detectable_shift`) that the Monte Carlo test at
    ``level`` detects with probability at least ``power``, found by drawing outcomes and testing them.

    The test's statistic is the smaller p-value of Cox's and Spiegelhalter's, doubled; its p-value is the
    share of draws under calibration at least as extreme, drawn sequentially (:func:`_monte_carlo_p`).
    Each shifted outcome vector's tail chance under calibration (the share of :data:`_SHIFT_NULL_DRAWS`
    draws of outcomes from ``p`` at least as extreme; ties count as extreme, as in the test) gives the
    chance that the test's own draws put its p-value below ``level`` (:func:`_sequential_power`: not 1
    below the level and 0 above, which overstated the power where the outcome count is coarse); an
    outcome of probability 0 is always detected. For each candidate delta, ``draws`` outcome vectors
    from p + delta (coupled: the same randomness for every delta, so the estimated power rises with
    delta; :class:`_ShiftedDraws`) give the share detected; bisection finds the smallest delta whose
    share is at least ``power`` plus two binomial standard deviations of that share (2.5 points at 1000
    draws), so the figure errs on the large side. NaN when no shift up to 1 is detected that often
    (the verdict then says :data:`SHIFT_NONE`).

    Used for every set the Monte Carlo test decides (V = sum p(1 - p) < :data:`EXACT_BELOW_V`), where
    :func:`detectable_shift`'s normal approximation of the outcomes' sum is not to be trusted: its figure
    was detected in 62 % of draws of 10 rows of UCI Adult's p(y=1), in 58-60 % of files of 100-300 rows
    whose every score is 0.001 and in 75.5 % at 100 rows of 0.05 (audit 9b). The draws cost about
    ``draws`` x (the rows whose outcome is uncertain: sum of min(p, 1 - p) + n delta) per candidate:
    a few milliseconds for 10,000 rows of rare events. ``rng`` seeds the draws (the same seed, the same
    figure).
    """
    p = np.asarray(p, dtype=np.float64).ravel()
    if p.size == 0 or not 0 < level < 1:
        return float("nan")
    rng = np.random.default_rng(0) if rng is None else rng
    pc = np.clip(p, EPS, 1 - EPS)
    x = np.log(pc) - np.log1p(-pc)
    sums = calibration_sums(p, p)
    _, _, inv, rank = _cox(sums)
    sp_var = float(sums[8])
    q = np.minimum(p, 1 - p)
    cost = float(np.sum(np.where(q >= _DENSE_Q, 1.0, q)))
    r_max = monte_carlo_draws(1, level, cost)  # the test's most draws at ``level``
    # the null distribution, more finely than the test draws it: each shifted draw's tail chance is read
    # from it (20,000 draws: +-0.13 points at a tail chance of 3.5 %)
    r0 = int(max(r_max, min(_SHIFT_NULL_DRAWS, 2e8 // max(cost, 1.0))))
    null = np.sort(_statistic(*_Sampler(p, x, rng).sums(r0), inv, rank, sp_var))
    if not np.all(np.isfinite(null)):
        return float("nan")
    W = np.stack([np.ones_like(p), x, 1 - 2 * p])
    sign = -1.0 if p.mean() > 0.5 else 1.0
    target = min(1.0, power + 2 * np.sqrt(power * (1 - power) / int(draws)))

    def share(drawn: _ShiftedDraws, delta: float) -> float:
        r, rx, rs, impossible = drawn.sums(delta)
        t = _statistic(r, rx, rs, inv, rank, sp_var)
        tail = np.searchsorted(null, t * (1 + 1e-9), side="right") / r0  # ties count as extreme, as in the test
        return float(np.mean(np.where(impossible, 1.0, _sequential_power(tail, level, r_max))))

    # The draws cover shifts up to ``hi`` only (their cost grows with it): start at twice the normal
    # bound's figure and double until that shift is detected often enough.
    start = detectable_shift(sums, level / 2, power)
    hi = min(1.0, 2 * start) if np.isfinite(start) and start > 0 else 1.0
    while True:
        drawn = _ShiftedDraws(p, W, sign, hi, int(draws), rng)
        if share(drawn, hi) >= target:
            break
        if hi >= 1.0:
            return float("nan")
        hi = min(1.0, 2 * hi)
    lo = 0.0
    for _ in range(14):  # hi / 16,384: far below what the sentence prints (2 digits of points)
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if share(drawn, mid) < target else (lo, mid)
    return hi


def _sequential_power(tail: np.ndarray, level: float, r_max: int) -> np.ndarray:
    """The chance that the sequential Monte Carlo test (:func:`_monte_carlo_p`: stop at the
    :data:`_H`-th draw as extreme as the data, p = H / draws; else (extreme + 1) / (r_max + 1)) gives a
    p-value below ``level`` to data whose statistic is as extreme as a share ``tail`` of the draws under
    calibration. Its draws are a sample: at a tail chance equal to the level it rejects about half the
    time, at 3 % with level 3.5 % about 70 % (a set of 100 rows at 0.05: every outcome count at the
    edge of the test's region, which the fixed threshold counted as always detected)."""
    from scipy.special import bdtr

    tail = np.clip(np.asarray(tail, dtype=np.float64), 0.0, 1.0)
    # stopped: the H-th extreme draw comes after H / level draws (p = H / d < level) and by r_max
    after = int(np.floor(_H / level))
    out = np.zeros_like(tail)
    if r_max > after:
        out += bdtr(_H - 1, after, tail) - bdtr(_H - 1, r_max, tail)
    # not stopped: e < H extreme draws in r_max, (e + 1) / (r_max + 1) < level
    most = min(_H - 1, int(np.ceil(level * (r_max + 1))) - 2)
    if most >= 0:
        out += bdtr(most, r_max, tail)
    return out


#: Draws of the statistic under calibration from which :func:`drawn_detectable_shift` reads each shifted
#: draw's tail chance (at least the test's own number of draws).
_SHIFT_NULL_DRAWS = 20_000
#: :class:`_ShiftedDraws` draws rows whose unlikely outcome may reach this probability one uniform per
#: row and draw; the others by the draws in which it can happen (:func:`_bernoulli_positions`).
_DENSE_SHIFTED = 0.25
#: At most this many uniforms at once (dense rows x draws), regenerated from their seed at each delta.
_BLOCK = 2_000_000


class _ShiftedDraws:
    """``draws`` outcome vectors of rows whose P(Y = 1) is clip(p + sign delta, 0, 1), for every delta in
    [0, ``hi``], coupled: row i's outcome is its unlikely one (1 where p <= 1/2, 0 above) when its
    uniform U_i is below that outcome's probability tau_i(delta), so as delta grows each outcome moves
    one way only. Only the draws where U_i < max tau_i on [0, hi] (e_i) can differ from the likely
    outcome: for rows of small e_i they are found from Geometric(e_i) waiting times, with U_i uniform
    on (0, e_i) there, at a cost of about draws x sum e_i; rows of larger e_i get one uniform per draw,
    regenerated from a fixed seed for each delta (memory stays at most :data:`_BLOCK` values).
    """

    def __init__(self, p: np.ndarray, W: np.ndarray, sign: float, hi: float, draws: int,
                 rng: np.random.Generator):
        self.p, self.sign, self.draws = p, sign, draws
        self.likely = p > 0.5
        # y - p changes by +1 (likely 0) or -1 (likely 1) when a row takes its unlikely outcome
        Wf = W * np.where(self.likely, -1.0, 1.0)
        self.base = W @ (self.likely - p)
        # its unlikely outcome has probability 0 under calibration: detected whenever it happens
        self.edge = (p <= 0) | (p >= 1)
        e = np.maximum(self.tau(0.0), self.tau(hi))
        dense = e >= _DENSE_SHIFTED
        self.dense, self.Wf_dense = np.flatnonzero(dense), Wf[:, dense]
        sparse = np.flatnonzero(~dense & (e > 0))
        rows, self.pos = _bernoulli_positions(e[sparse], draws, rng)
        self.rows = sparse[rows]
        self.marks = rng.random(self.rows.size) * e[self.rows]
        self.Wf_rows = Wf[:, self.rows]
        self.seed = int(rng.integers(2 ** 62))

    def tau(self, delta: float, idx=slice(None)) -> np.ndarray:
        """Each row's chance of its unlikely outcome under the shift ``delta``."""
        q = np.clip(self.p[idx] + self.sign * delta, 0.0, 1.0)
        return np.where(self.likely[idx], 1.0 - q, q)

    def sums(self, delta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Sums of (y - p), (y - p) x, (y - p)(1 - 2p) of every draw under ``delta``, and whether the
        draw holds an outcome of probability 0."""
        m = self.draws
        out = np.repeat(self.base[:, None], m, axis=1)
        hit = self.marks < self.tau(delta, self.rows)
        pos = self.pos[hit]
        for j in range(3):
            out[j] += np.bincount(pos, weights=self.Wf_rows[j, hit], minlength=m)
        impossible = np.zeros(m, dtype=bool)
        impossible[pos[self.edge[self.rows[hit]]]] = True
        if self.dense.size:
            tau, edge = self.tau(delta, self.dense), self.edge[self.dense]
            block = max(1, _BLOCK // self.dense.size)
            for b, r0 in enumerate(range(0, m, block)):
                mm = min(block, m - r0)
                Y = np.random.default_rng([self.seed, b]).random((mm, self.dense.size)) < tau
                out[:, r0:r0 + mm] += self.Wf_dense @ Y.T
                impossible[r0:r0 + mm] |= (Y & edge).any(axis=1)
        return out[0], out[1], out[2], impossible


def _statistic(r: np.ndarray, rx: np.ndarray, rs: np.ndarray, inv: np.ndarray | None, rank: int,
               sp_var: float) -> np.ndarray:
    """The combined p-value (the test's statistic) of draws whose sums of (y - p), (y - p) x and
    (y - p)(1 - 2p) are ``r``, ``rx``, ``rs``."""
    from scipy.special import chdtrc, ndtr

    ps = []
    if inv is not None:
        stat = inv[0, 0] * r * r + 2 * inv[0, 1] * r * rx + inv[1, 1] * rx * rx
        ps.append(chdtrc(rank, stat))
    if sp_var > 0:
        ps.append(2 * ndtr(-np.abs(rs) / np.sqrt(sp_var)))
    if not ps:
        return np.full(r.shape[0], np.nan)
    return np.minimum(1.0, len(ps) * np.minimum.reduce(ps))


#: Rows whose less likely outcome has at least this probability are drawn densely (one uniform per
#: row and draw); the others sparsely (see :class:`_Sampler`).
_DENSE_Q = 0.05


class _Sampler:
    """Draws of outcomes y ~ Bernoulli(p), as the three sums the statistic needs, at a cost that
    grows with the outcomes that *differ* from each row's likely value, not with the rows.

    Row i's likely outcome is 1[p_i > 1/2]; it differs with probability q_i = min(p_i, 1 - p_i). For
    rows with q_i < 0.05 (most rows of a confident model: CIFAR-10 confidences have q ~ 0.005), the
    draws in which the row differs are found from Geometric(q_i) waiting times, exactly the
    distribution of independent Bernoulli(q_i) trials. The other rows get one uniform per draw.
    The cost of a draw is then about (dense rows) + sum of q_i over the sparse rows.
    """

    def __init__(self, p: np.ndarray, x: np.ndarray, rng: np.random.Generator):
        self.rng = rng
        likely = (p > 0.5).astype(np.float64)
        q = np.minimum(p, 1 - p)
        W = np.stack([np.ones_like(p), x, 1 - 2 * p])            # (3, n): what each row adds per unit of y - p
        self.base = W @ (likely - p)                              # the sums when every row takes its likely value
        dense = q >= _DENSE_Q
        self.p_dense, self.W_dense = p[dense], W[:, dense]
        sparse = ~dense & (q > 0)
        self.q_sparse = q[sparse]
        # flipping a row away from its likely value changes y by +1 (likely 0) or -1 (likely 1)
        self.W_sparse = W[:, sparse] * np.where(likely[sparse] > 0, -1.0, 1.0)
        self.cost = float(dense.sum() + self.q_sparse.sum())      # expected work per draw

    def sums(self, m: int) -> np.ndarray:
        """(3, m) sums of (y - p), (y - p) x and (y - p)(1 - 2p) of m independent draws."""
        out = np.repeat(self.base[:, None], m, axis=1)
        if self.p_dense.size:
            block = max(1, 4_000_000 // self.p_dense.size)
            for r0 in range(0, m, block):
                mm = min(block, m - r0)
                Y = (self.rng.random((mm, self.p_dense.size)) < self.p_dense).astype(np.float64)
                out[:, r0:r0 + mm] += self.W_dense @ (Y - (self.p_dense > 0.5)).T
        if self.q_sparse.size:
            rows, pos = self._sparse_draws(m)
            for j in range(3):
                out[j] += np.bincount(pos, weights=self.W_sparse[j, rows], minlength=m)
        return out

    def _sparse_draws(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        """(row, draw) of every outcome that differs from its row's likely value in m draws
        (:func:`_bernoulli_positions`)."""
        return _bernoulli_positions(self.q_sparse, m, self.rng)


def _bernoulli_positions(q: np.ndarray, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(row, draw) of every success of independent Bernoulli(q[row]) trials in m draws: for each
    row, the gaps between successes are Geometric(q) (the waiting times of Bernoulli(q) trials),
    drawn in one flat array for all rows, a few more than expected; rows whose gaps have not
    reached m draws get more in the next round. Work: about m x sum(q), not m x rows."""
    if q.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    want = np.ceil(m * q + 6 * np.sqrt(m * q) + 6).astype(np.int64)
    start = np.zeros(q.size, dtype=np.int64)
    active = np.arange(q.size)
    got_rows, got_pos = [], []
    while active.size:
        c = want[active]
        rows = np.repeat(active, c)
        # A gap past the block is as good as any larger one (the row has no more outcomes here),
        # so gaps are capped at m + 1: for q below ~1e-18 numpy's geometric saturates at the
        # int64 maximum and the running sum wrapped round to negative positions (a Platt fit whose
        # p(y=1) came within 1e-18 of 0 or 1 crashed the test). The same draws, the same result
        # for every position inside the block.
        gaps = np.minimum(rng.geometric(q[rows]), m + 1)
        ends = np.cumsum(c)
        first = ends - c
        cs = np.cumsum(gaps)
        cs -= np.repeat(cs[first] - gaps[first], c)          # the cumulative sum within each row
        pos = start[rows] + cs - 1
        keep = pos < m
        got_rows.append(rows[keep])
        got_pos.append(pos[keep])
        last = pos[ends - 1]
        more = last < m                                      # not yet past the block: draw on
        start[active[more]] = last[more] + 1
        active = active[more]
    return np.concatenate(got_rows), np.concatenate(got_pos)


def _monte_carlo_p(p: np.ndarray, observed: float, r_max: int, rng: np.random.Generator) -> tuple[float, int]:
    """(p-value, draws): the share of draws of outcomes from ``p`` whose statistic is at most the
    observed one, sequential (Besag & Clifford 1991)."""
    if not np.isfinite(observed):
        return float("nan"), 0
    sums = calibration_sums(p, p)  # the information does not depend on the outcomes
    _, _, inv, rank = _cox(sums)
    pc = np.clip(p, EPS, 1 - EPS)
    sampler = _Sampler(p, np.log(pc) - np.log1p(-pc), rng)
    tol = observed * (1 + 1e-9)  # ties (discrete outcomes) count as extreme: the conservative side
    block = int(max(1, min(r_max, 2_000_000 // max(sampler.cost, 1.0), 1_000)))
    extreme = draws = 0
    while draws < r_max:
        m = min(block, r_max - draws)
        r, rx, rs = sampler.sums(m)
        t = _statistic(r, rx, rs, inv, rank, float(sums[8]))
        hits = np.flatnonzero(t <= tol)
        if extreme + hits.size >= _H:  # stop at the H-th extreme draw: p = H / draws so far
            draws += int(hits[_H - extreme - 1]) + 1
            return _H / draws, draws
        extreme += hits.size
        draws += m
        block = min(block * 2, 64_000)
    return (extreme + 1) / (draws + 1), draws


def _impossible_words(k: int) -> str:
    """:data:`IMPOSSIBLE` for ``k`` outcomes ("1 outcome", "28 outcomes")."""
    return IMPOSSIBLE.format(what=f"{k:,} outcome{'' if k == 1 else 's'}")


def consistency_band(count: np.ndarray, sum_p: np.ndarray, level: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
    """Per bin, the frequencies between which a calibrated bin's observed frequency falls at least
    ``level`` of the time: the (1 -/+ level)/2 quantiles of Binomial(count, mean p) / count (see the
    module docstring). Empty bins give NaN.

    The quantile is the smallest k with P(K <= k) >= q, from scipy.special's binomial functions
    (importing scipy.stats would cost a fresh dashboard seconds)."""
    count = np.asarray(count, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.clip(np.asarray(sum_p, dtype=np.float64) / count, 0.0, 1.0)
    lo = _binom_ppf((1 - level) / 2, count, mean)
    hi = _binom_ppf((1 + level) / 2, count, mean)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo, hi = lo / count, hi / count
    empty = ~(count > 0)
    lo[empty] = hi[empty] = np.nan
    return lo, hi


def _binom_ppf(q: float, n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Smallest k in 0..n with P(Binomial(n, p) <= k) >= q, elementwise."""
    from scipy.special import bdtr, bdtrik

    n = np.maximum(np.asarray(n, dtype=np.float64), 0)
    p = np.nan_to_num(np.asarray(p, dtype=np.float64), nan=0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        k = np.ceil(np.nan_to_num(bdtrik(q, n, p), nan=0.0))
    n_int = n.astype(np.int64)
    k = np.clip(k, 0, n).astype(np.int64)
    for _ in range(3):  # the continuous inverse can be off by one either way: settle on the definition
        down = (k > 0) & (bdtr(np.maximum(k - 1, 0), n_int, p) >= q)
        k = np.where(down, k - 1, k)
        up = (k < n_int) & (bdtr(k, n_int, p) < q)
        k = np.where(up, k + 1, k)
    k = np.where(p <= 0, 0, k)
    return np.where(p >= 1, n_int, k).astype(np.float64)


def holm_level_count(p_values: Sequence[float]) -> int:
    """How many finite p-values Holm's correction runs over."""
    return int(np.isfinite(np.asarray(p_values, dtype=np.float64)).sum())


# ------------------------------------------------------------------------------------ the sentences
def at_floor(p_value: float, method: str) -> bool:
    """Whether a test's p-value is a Monte Carlo p-value at its floor: no draw came out as extreme as
    the data, so p = 1 / (draws + 1) says only that the true p-value is at most that (Besag & Clifford,
    :func:`_monte_carlo_p`). Written "≤ X" (:func:`format_p`'s ``at_most``), never "= X": a user audit
    read "p = 0.001" (Mistral, ECE 0.39, z = 267) as weaker than Yi-34b's analytic "< 0.001" (ECE 0.043)."""
    text = str(method)
    if not text.startswith("Monte Carlo, ") or not np.isfinite(p_value):
        return False
    try:
        draws = int(text.split(", ", 1)[1].split(" ", 1)[0].replace(",", ""))
    except ValueError:
        return False
    # exactly 1 / (draws + 1): an early stop (H extreme draws) gives H / draws, never this
    return draws > 0 and abs(p_value * (draws + 1) - 1.0) < 1e-9


def _ceil_2_digits(p: float) -> str:
    """``p`` rounded up to two significant digits (three decimals from 0.01), as text: a bound that stays true."""
    unit = 10.0 ** (np.floor(np.log10(p)) - 1) if p < 0.01 else 1e-3
    decimals = max(int(round(-np.log10(unit))), 3)
    return f"{np.ceil(p / unit * (1 - 1e-12)) * unit:.{decimals}f}"


def format_p(p: float, at_most: bool = False) -> str:
    """A p-value as every front end writes it (the dashboard's tables, the reports and the CLI): its
    first two significant digits from 0.001 to 0.99 (0.0499 is "0.049", 0.00195 is "0.0019", 0.398 is
    "0.39"), cut rather than rounded so that the text sits on the same side of every level
    the pages use (0.05, 0.035, 0.01, 0.005) as the number (0.0499 is never "0.050"); "< 0.001" below
    0.001, "> 0.99" above 0.99 (the doubled smaller p-value of the test of calibration is 1 whenever both
    are above 0.5: "1.000" read as "perfect"), "n/a" when there is none. One format, so that 4.69e-7 and
    0.00000135 never stand side by side.

    ``at_most``: the p-value is a Monte Carlo p-value at its floor (:func:`at_floor`), corrected or not:
    "≤ X", X rounded up (2.5e-3 is "≤ 0.0025", 5e-4 "≤ 0.00050"), so that it never reads as an exact p-value
    weaker than an analytic "< 0.001".

    Why two digits below 0.01: three decimals cut wrote the Wilcoxon test's 2/1024 = 0.00195 and a
    Holm-corrected 0.0016 as "0.001", half their size, beside an analytic "< 0.001" (a user audit).
    Why two above 0.1 too: one rule in every column; "0.398" beside "0.016" and "0.0097" in one table
    read as three formats (a later audit), and no level the pages use lies above 0.1.

    Examples
    --------
    >>> [format_p(v) for v in (0.52, 0.398, 0.0499, 0.00195, 0.0016, 0.0004, 4.69e-7, 0.995, 1.0, float("nan"))]
    ['0.52', '0.39', '0.049', '0.0019', '0.0016', '< 0.001', '< 0.001', '> 0.99', '> 0.99', 'n/a']
    """
    if p is None or not np.isfinite(p):
        return "n/a"
    if at_most and p <= 0.99:  # a Monte Carlo p-value at its floor (:func:`at_floor`), after any correction
        return f"≤ {_ceil_2_digits(p)}"
    if p < 1e-3:
        return "< 0.001"
    if p > 0.99:
        return "> 0.99"
    if p < 0.01:
        return f"{np.floor(p * 10_000 * (1 + 1e-12)) / 10_000:.4f}"
    if p < 0.1:
        return f"{np.floor(p * 1000 * (1 + 1e-12)) / 1000:.3f}"
    return f"{np.floor(p * 100 * (1 + 1e-12)) / 100:.2f}"


def p_words(p: float, at_most: bool = False) -> str:
    """'p = 0.031', 'p < 0.001', 'p > 0.99' (:func:`format_p`'s bounds never written "p = < 0.001"),
    'p = n/a'.

    Examples
    --------
    >>> [p_words(v) for v in (0.0312, 4.69e-7, 1.0, float("nan"))]
    ['p = 0.031', 'p < 0.001', 'p > 0.99', 'p = n/a']
    """
    text = format_p(p, at_most)
    return f"p {text}" if text[0] in "<>≤" else f"p = {text}"


def shift_words(delta: float) -> str:
    """A shift of the outcome rate in points (percentage points), e.g. '3.1 points'."""
    if not np.isfinite(delta):  # callers say SHIFT_NONE instead of a size
        return "no size"
    pts = 100 * delta
    return f"{pts:.2g} points" if pts < 1 else f"{pts:.1f} points"


#: What the test of calibration looks at, in plain words: every "no evidence" sentence says it, since
#: the test (Cox's intercept and slope, Spiegelhalter's z) cannot see predictions that are off in one
#: range only (audit 3: Platt scaling of scores of exactly 0 and 1 gave 42 held-out rows 0.249 that
#: were right 90.5 % of the time, p = 0.153).
TESTED = "that the predictions are off on average, too confident or not confident enough"
#: What it does not look at.
NOT_LOCAL = ("The test looks at the predictions as a whole (their average and how confident they are), not at "
             "single ranges of them: a range of predictions can be off while the whole looks right.")


#: What a "no evidence" sentence says in place of the detectable shift where it was not drawn
#: (``calibration_test(draw_shift=False)``: the groups too small to compare).
SHIFT_NOT_DRAWN = "too few rows to work out how large a miscalibration the test would detect"


#: ... where it was drawn and no shift, however large, would be detected 80 % of the time (a handful of
#: rows: :func:`drawn_detectable_shift` is NaN). "A shift of any size would be detected" said the opposite.
SHIFT_NONE = ("too few rows: no miscalibration, however large, would be detected even 80 % of the time, so this "
              "says nothing about calibration")


def verdict(test: CalibrationTest, p_corrected: float | None = None, alpha: float = ALPHA_TEST,
            scope_note: bool = True, shift_drawn: bool = True) -> str:
    """What a test supports, in one sentence (``p_corrected``: the p-value after correction for the
    other sets tested, when there are others; ``alpha``: the level, :data:`ALPHA_TEST` for one set of
    rows, which shares the family's 5 % with the bins note and the MCB; the groups and slices pass their
    own). Never "calibrated": a test that finds nothing says what it looked at (:data:`TESTED`) and how
    large a miscalibration it would have found; ``scope_note`` adds :data:`NOT_LOCAL` (left out where a
    list of groups would repeat it); ``shift_drawn=False``: the shift was not worked out
    (:data:`SHIFT_NOT_DRAWN` is said instead)."""
    p = test.p_value if p_corrected is None else p_corrected
    after = "" if p_corrected is None else " after correcting for the other groups"
    if test.method.startswith("certain"):
        return f"miscalibrated for certain: {test.method.split(': ', 1)[1]}."
    if test.rounding:  # outcomes against a score of 0 or 1 that may be the file's rounding: tested, not certain
        rest = verdict(replace(test, rounding=""), p_corrected, alpha, scope_note, shift_drawn)
        return f"{test.rounding}: {rest}"
    if not np.isfinite(p):
        return "not tested (no row has a probability strictly between 0 and 1)."
    floor = at_floor(test.p_value, test.method)  # "≤": a Monte Carlo p-value at its floor, corrected or not
    if p < alpha:
        return f"miscalibrated beyond chance ({p_words(p, floor)}{after})."
    # A p-value under the usual 0.05 but above this test's share of the family's level would read as a
    # contradiction without the level beside it.
    held = (f", above the {alpha:g} this test is held to: the three checks of one set of rows (this test, the "
            f"bins outside their bands and the CORP MCB) share {ALPHA_FAMILY:.0%}" if p < ALPHA_FAMILY else "")
    if not shift_drawn:
        shift = SHIFT_NOT_DRAWN
    elif not np.isfinite(test.detectable_shift):  # no shift up to the whole range reaches 80 % power
        shift = SHIFT_NONE
    else:
        shift = (f"a shift of {shift_words(test.detectable_shift)} between the predicted probabilities and the "
                 f"observed frequency would be detected at least 80 % of the time, smaller ones could go unnoticed")
    return (f"no evidence {TESTED}, at this sample size ({p_words(p, floor)}{after}{held}); {shift}."
            + (" " + NOT_LOCAL if scope_note else ""))


# ----------------------------------------------------------------- bins outside their consistency bands
def bins_outside(table) -> tuple[int, int]:
    """(bins outside their consistency band, bins with rows) of a reliability table (columns ``count``,
    ``accuracy``, ``band_low``, ``band_high``: :func:`pbr_core.metrics.reliability_diagram`)."""
    count = np.asarray(table["count"], dtype=np.float64)
    full = count > 0
    acc = np.asarray(table["accuracy"], dtype=np.float64)[full]
    low = np.asarray(table["band_low"], dtype=np.float64)[full]
    high = np.asarray(table["band_high"], dtype=np.float64)[full]
    return int(((acc < low - 1e-12) | (acc > high + 1e-12)).sum()), int(full.sum())


def outside_chances(table) -> np.ndarray:
    """Per bin with rows of a reliability table (:func:`bins_outside`'s columns plus ``mean_confidence``),
    an upper bound on the chance that the bin lies outside its consistency band if the predictions are
    calibrated: the bin's count of outcomes X is then Poisson-binomial with mean mu = n_b * mean p, and

    * P(X >= c) for c = the band's upper count + 1 is at most the Binomial(n_b, mean p) tail when
      c >= mu + 1, and at most mu / c (Markov) otherwise;
    * P(X <= b) for b = the band's lower count - 1 is at most the binomial's when b <= mu - 1, and at most
      (n_b - mu) / (n_b - b) (Markov on n_b - X) otherwise

    (Hoeffding 1956, Theorem 4: under those conditions the binomial of the same mean has the heavier
    tails). Each chance is at most 1 - level by the band's construction, and far below it where a bin's
    rows are few (discreteness): 0.06 on average over 40,000 random bins of 1-80 rows, never above 0.1,
    and never below the bin's exact Poisson-binomial chance (tests/test_bins_outside_claim.py checks
    both against a direct computation)."""
    from scipy.special import bdtr, bdtrc

    count = np.asarray(table["count"], dtype=np.float64)
    full = count > 0
    n = count[full]
    mu = np.clip(np.asarray(table["mean_confidence"], dtype=np.float64)[full], 0.0, 1.0) * n
    p = np.where(n > 0, mu / np.maximum(n, 1), 0.0)
    low = np.rint(np.asarray(table["band_low"], dtype=np.float64)[full] * n)
    high = np.rint(np.asarray(table["band_high"], dtype=np.float64)[full] * n)
    c, b = high + 1, low - 1
    n_int = n.astype(np.int64)  # scipy's binomial functions take whole numbers of trials and successes
    with np.errstate(invalid="ignore", divide="ignore"):
        up = np.where(c >= mu + 1, bdtrc(np.maximum(c - 1, 0).astype(np.int64), n_int, p),
                      np.minimum(1.0, mu / np.maximum(c, 1)))
        down = np.where(b <= mu - 1, bdtr(np.maximum(b, 0).astype(np.int64), n_int, p),
                        np.minimum(1.0, (n - mu) / np.maximum(n - b, 1)))
    up = np.where(c > n, 0.0, np.nan_to_num(up, nan=1.0))
    down = np.where(b < 0, 0.0, np.nan_to_num(down, nan=1.0))
    return np.minimum(1.0, up + down)


def bins_outside_p(k: int, m: int, level: float = 0.9, chances: Sequence[float] | np.ndarray | None = None) -> float:
    """The p-value of ``k`` of ``m`` bins with rows lying outside their ``level`` consistency bands.

    With ``chances`` (each bin's :func:`outside_chances`, the pages' and ``evaluate``'s case): P(N >= k)
    for N the Poisson-binomial count of m independent bins, bin b outside with probability chances[b].
    Without: P(Binomial(m, 1 - level) >= k), the coarser bound that takes every bin's chance as 1 - level.

    Valid under calibration: bins hold disjoint rows, so their outcomes are independent given the
    predictions, and bin b lies outside its band with probability at most chances[b] (at most 1 - level),
    so the count outside is stochastically at most that Poisson-binomial (or binomial) count. The
    chances are sharper where bins hold few rows: 3 of 8 bins outside is p = 0.038 by the binomial,
    p = 0.0058 with chances of 0.05 each.

    Examples
    --------
    >>> round(bins_outside_p(5, 55), 3), round(bins_outside_p(4, 4), 6), bins_outside_p(0, 14)
    (0.655, 0.0001, 1.0)
    >>> round(bins_outside_p(3, 8, chances=[0.05] * 8), 4)
    0.0058
    """
    from scipy.special import bdtrc

    k, m = int(k), int(m)
    if k > m:
        raise ValueError(f"{k} bins outside their bands, but only {m} bins with rows.")
    if k <= 0:
        return 1.0
    if chances is None:
        return float(bdtrc(k - 1, m, 1.0 - level))  # P(X > k - 1)
    chances = np.clip(np.asarray(chances, dtype=np.float64).ravel(), 0.0, 1.0)
    if chances.size != m:
        raise ValueError(f"{chances.size} chances of lying outside given for {m} bins with rows.")
    pmf = np.zeros(m + 1)
    pmf[0] = 1.0
    for q in chances:  # the Poisson-binomial distribution, one bin at a time (m is at most a few hundred)
        pmf[1:] = pmf[1:] * (1.0 - q) + pmf[:-1] * q
        pmf[0] *= 1.0 - q
    return float(min(1.0, pmf[k:].sum()))


def bins_outside_test(table, level: float = 0.9) -> tuple[int, int, float]:
    """(bins outside their bands, bins with rows, :func:`bins_outside_p` with each bin's
    :func:`outside_chances`) of a reliability table: the count rule every page, report and ``evaluate``
    use. A table without ``mean_confidence`` gets the coarser binomial p-value."""
    k, m = bins_outside(table)
    chances = outside_chances(table) if "mean_confidence" in table else None
    return k, m, bins_outside_p(k, m, level, chances)


def bins_outside_smallest_p(table, level: float = 0.9) -> float:
    """The smallest p-value the count of bins outside their bands (:func:`bins_outside_test`) could reach
    on this diagram, whatever its outcomes: every bin that can lie outside its band (a chance above 0,
    :func:`outside_chances`) lying outside. At or above a level, the count cannot tell anything there:
    "no more than chance" would read as a finding where none was possible (a slice of 402 rows, 396 of
    them in one bin, had 1 of 4 bins outside, p = 0.104, beside a verdict of 38 points too confident,
    a user audit). 1.0 for a diagram without rows."""
    k, m = bins_outside(table)
    if m == 0:
        return 1.0
    chances = outside_chances(table) if "mean_confidence" in table else np.full(m, 1.0 - level)
    can = int(np.count_nonzero(chances > 0))
    return bins_outside_p(can, m, level, chances) if can else 1.0


def bins_note(test: CalibrationTest | None, k: int, m: int, bins: str, alpha: float = ALPHA_BINS,
              level: float = 0.9, test_alpha: float = ALPHA_TEST,
              chances: Sequence[float] | np.ndarray | None = None) -> str:
    """After a test of calibration that found no evidence (``test``; None: no test beside it): the
    sentence that keeps it from reading as an all-clear when more bins of the reliability diagram lie
    outside their bands than chance puts there (:func:`bins_outside_p` < ``alpha``, :data:`ALPHA_BINS`: its
    share of the family's 5 %); empty otherwise, and after a test that found miscalibration (p <
    ``test_alpha``, the level :func:`verdict` uses). ``bins`` names the bins, e.g. "bins with rows in the
    diagram above"; ``chances``: each bin's :func:`outside_chances` (the sharper p-value; the pages pass
    them). Begins with a space."""
    if test is not None:
        if test.method.startswith("certain") or not np.isfinite(test.p_value) or test.p_value < test_alpha:
            return ""
    if m == 0:
        return ""
    p = bins_outside_p(k, m, level, chances)
    if p >= alpha:
        return ""
    one = k == 1
    return (f" Not an all-clear: {k} of the {m} {bins} lie{'s' if one else ''} outside {'its' if one else 'their'} "
            f"{100 * level:g} % band, more than chance puts there ({p_words(p)}): some ranges of predictions are off, "
            f"which the test does not look at.")
