"""The caption under one group's (or slice's) reliability diagram on the Groups page: "k of m bins with
rows fall outside their 90 % consistency band (grey): more than chance puts there (p = … after
correcting for the G groups)" / "no more than chance puts there".

Audit 5: the caption said "A bar outside its band is a gap larger than chance" under every group's
diagram, with no count test. Among 30 calibrated groups of 100-200 rows (100 files), 18.4 % of the
groups had at least one bar outside and every file had such a group. The caption now uses the
Reliability page's count rule (:func:`pbr_core.significance.bins_outside_test`: the Poisson-binomial
tail of each bin's chance of lying outside, < 0.05), Holm-corrected over the groups
(:func:`pbr_core.groups.bins_outside_by_group`): the reader looks through the groups one by one, as
through the table whose tests are corrected the same way. Measured on the audit's 100 files: "more
than chance" for 2 of 3,000 calibrated groups, in 2 files (0 with audit 5's binomial count p-value;
the count rule at 0.05 without the correction: 47 of 3,000, 2 with the binomial p-value). Power, a group of 500 rows whose outcomes
are 30 points above its predictions among 29 calibrated groups of 100-200 rows: 20 of 20 files (of
200 rows: 17 of 20, 11 with the binomial p-value; 20 points above at 500 rows: 20 of 20, 17; its own
corrected test finds all of them).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

import pbr_core
from dashboard import texts
from pbr_core import groups as G

MORE = re.compile(r": more than chance puts there \(p [=<] [0-9.]+ after correcting for the 30 groups\)")


@pytest.fixture(scope="module")
def adult_p() -> np.ndarray:
    return pbr_core.load_predictions("sample_data/adult_gradient_boosting.csv.gz").p_positive


def _file(rng: np.random.Generator, pool: np.ndarray, first: int | None = None, shift: float = 0.0):
    """30 groups of 100-200 rows (the first of ``first`` rows, its outcomes ``shift`` above its
    predictions), p(y=1) drawn from ``pool``, outcomes drawn from p: the group report."""
    sizes = rng.integers(100, 201, 30)
    if first is not None:
        sizes[0] = first
    ps, ys, gs = [], [], []
    for i, n in enumerate(sizes):
        p = rng.choice(pool, n)
        q = np.clip(p + (shift if i == 0 else 0.0), 0, 1)
        ps.append(p)
        ys.append((rng.random(n) < q).astype(int))
        gs += [f"g{i:02d}"] * n
    p = np.concatenate(ps)
    preds = dataclasses.replace(pbr_core.Predictions.from_arrays(np.c_[1 - p, p], np.concatenate(ys)),
                                metadata=pd.DataFrame({"g": gs}))
    return G.calibration_by_group(preds, "g", n_boot=10, seed=0)


def test_calibrated_groups_rarely_read_more_than_chance(adult_p):
    """Known truth: every group calibrated. "More than chance" under at most 5 % of the files (the Holm
    guarantee over the groups; a tolerance that can fail), while a bar outside its band, which the old
    caption called "a gap larger than chance", is common."""
    rng = np.random.default_rng(1)
    files = 30
    more = files_more = any_outside = groups = 0
    for _ in range(files):
        report = _file(rng, adult_p)
        counts = G.bins_outside_by_group(report.diagrams)
        said = [bool(MORE.search(texts.group_bands_caption(counts, g))) for g in counts]
        more += sum(said)
        files_more += any(said)
        any_outside += sum(counts[g][0] > 0 for g in counts)
        groups += len(counts)
    assert files_more <= binom.ppf(0.999, files, 0.05)
    assert more <= 0.05 * groups
    assert any_outside > 0.1 * groups   # the per-bar reading would have flagged these (18.4 % in the audit)


def test_a_miscalibrated_group_reads_more_than_chance(adult_p):
    """Power: one group of 500 rows whose outcomes are 30 points above its predictions, among 29
    calibrated groups; the calibrated groups stay quiet."""
    rng = np.random.default_rng(5)
    found = 0
    for _ in range(5):
        report = _file(rng, adult_p, first=500, shift=0.3)
        counts = G.bins_outside_by_group(report.diagrams)
        words = texts.group_bands_caption(counts, "g00")
        found += bool(MORE.search(words)) and "some ranges of this group's predictions are off" in words
        assert not any(MORE.search(texts.group_bands_caption(counts, g)) for g in counts if g != "g00")
    assert found >= 4


def test_a_smaller_miscalibrated_group_is_found_by_the_chances_of_its_bins(adult_p):
    """Power where bins hold few rows (audit 7): a group of 200 rows 30 points off among 29 calibrated
    groups. Each bin's own chance of lying outside (0.06 on average, not 0.1) finds it in 17 of 20 files
    (the binomial count p-value: 11 of 20); here 10 files."""
    from pbr_core import significance as S

    rng = np.random.default_rng(5)
    found = coarse = 0
    for _ in range(10):
        report = _file(rng, adult_p, first=200, shift=0.3)
        counts = G.bins_outside_by_group(report.diagrams)
        found += bool(MORE.search(texts.group_bands_caption(counts, "g00")))
        k, m = S.bins_outside(report.diagrams["g00"])
        others = [S.bins_outside_p(*S.bins_outside(d)) for g, d in report.diagrams.items() if len(d)]
        coarse += k > 0 and G.holm(np.array(others))[list(report.diagrams).index("g00")] < 0.05
    assert found >= 7 and found >= coarse, (found, coarse)


def test_the_caption_s_words():
    """The count, "no more than chance" for one bar in five, the one-bin case, no rows: nothing; a single
    group: no correction named; a slice: the slices counted."""
    def table(acc):
        n = len(acc)
        return pd.DataFrame({"count": [40] * n, "accuracy": acc, "band_low": [0.4] * n, "band_high": [0.6] * n})

    diagrams = {"a": table([0.5, 0.5, 0.9, 0.5, 0.5]), "b": table([0.9, 0.9, 0.9, 0.9, 0.5]),
                "c": table([0.5]), "d": table([0.5]).assign(count=0)}
    counts = G.bins_outside_by_group(diagrams)
    a = texts.group_bands_caption(counts, "a")
    assert a.startswith("1 of 5 bins with rows fall outside their 90 % consistency band (grey): no more than "
                        "chance puts there (p = 0.81 after correcting for the 3 groups); the count weighs neither how far "
                        "a bar lies outside nor how many rows it holds.")
    assert "looking through 3 groups finds bars outside in some of them by chance" in a
    # the correction in plain words, the method's name in the help (audit 14, item 2)
    assert a.endswith("the count is corrected for the 3 groups, as the tests are.") and "Holm" not in a
    assert "larger than chance" not in a
    b = texts.group_bands_caption(counts, "b")
    assert b.startswith("4 of 5 bins with rows fall outside their 90 % consistency band (grey): more than chance "
                        "puts there (p = 0.0013 after correcting for the 3 groups), so some ranges of this group's "
                        "predictions are off.")
    assert texts.group_bands_caption(counts, "c").startswith("The one bin with rows lies inside its 90 % consistency "
                                                             "band (grey).")
    assert texts.group_bands_caption(counts, "d") == ""
    alone = G.bins_outside_by_group({"b": diagrams["b"]})
    assert "correcting" not in texts.group_bands_caption(alone, "b")
    assert texts.group_bands_caption(alone, "b").startswith("4 of 5 bins with rows fall outside their 90 % "
                                                            "consistency band (grey): more than chance puts there "
                                                            "(p < 0.001)")
    assert "the 3 slices" in texts.group_bands_caption(counts, "a", "slice")


def _crowded_slice(small_rows: list[int]):
    """Audit 12a's slice: 396 rows at confidence 0.99 right 61 % of the time (far outside its band), and
    a few rows spread over other bins (``small_rows`` per bin)."""
    from pbr_core.metrics import reliability_diagram

    conf = [np.full(396, 0.99)] + [np.full(k, v) for k, v in zip(small_rows, (0.55, 0.68, 0.79))]
    outcome = [(np.arange(396) < 242).astype(int)] + [np.arange(k) % 2 for k in small_rows]
    return reliability_diagram(np.concatenate(conf), np.concatenate(outcome), n_bins=7)


def test_a_count_that_could_never_be_beyond_chance_says_it_cannot_tell():
    """One bin of 1-row bins' neighbours can lie outside its band: even every bin outside would not be
    beyond chance (the smallest reachable p is that bin's chance, about 0.07), so the caption says the
    count cannot tell, never "no more than chance puts there" (before: "1 of 4 bins ... no more than
    chance puts there (p = 0.104)" beside "38.3 points too confident ... miscalibrated")."""
    from pbr_core.significance import bins_outside_smallest_p, outside_chances

    t = _crowded_slice([1, 1, 1])
    chances = outside_chances(t)
    assert (chances > 0).sum() == 1  # a bin of 1 row can never lie outside its band
    assert bins_outside_smallest_p(t) == pytest.approx(chances.max(), rel=1e-12) and chances.max() >= 0.05
    words = texts.group_bands_caption(G.bins_outside_by_group({"s": t, "r": t}), "s", "slice", t)
    assert words.startswith("1 of 4 bins") and "cannot tell" in words and "no more" not in words


def test_a_count_within_chance_says_what_it_does_not_weigh():
    """Where the count could have been beyond chance but is not, the caption says so and that it weighs
    neither how far a bar lies outside nor its rows, naming the bar outside that holds most of them."""
    from pbr_core.significance import bins_outside_smallest_p, bins_outside_test, outside_chances

    t = _crowded_slice([3, 3, 3])
    k, m, p = bins_outside_test(t)
    assert (k, m) == (1, 4) and p >= 0.05
    # the smallest reachable p is the product of the chances of the bins that can lie outside
    chances = outside_chances(t)
    smallest = bins_outside_smallest_p(t)
    assert smallest == pytest.approx(np.prod(chances[chances > 0]), rel=1e-9) and smallest < 0.05
    words = texts.group_bands_caption(G.bins_outside_by_group({"s": t}), "s", "slice", t)
    assert "no more than chance puts there" in words and "weighs neither" in words and "holds 396 of the 405 rows" in words


def _slice_report(held: bool, p_holm: float, rest_p_holm: float):
    """A slice report's parts that the diagram's captions read: slice 'b' with 4 of 5 bins outside (the
    count's p = 0.0013 after Holm over the 3 slices), its verdict as given."""
    import types

    def table(acc):
        n = len(acc)
        return pd.DataFrame({"count": [40] * n, "accuracy": acc, "band_low": [0.4] * n, "band_high": [0.6] * n})

    diagrams = {"a": table([0.5, 0.5, 0.9, 0.5, 0.5]), "b": table([0.9, 0.9, 0.9, 0.9, 0.5]), "c": table([0.5])}
    rows = pd.DataFrame({"slice": ["a", "b", "c"], "n_confirm": [200, 200, 40], "p_holm": [0.5, p_holm, 0.9],
                         "rest_p_holm": [0.5, rest_p_holm, 0.9], "p_value": [0.3, p_holm / 3, 0.9],
                         "test_method": ["analytic"] * 3, "held_up": [False, held, False]})
    return types.SimpleNamespace(table=rows, diagrams=diagrams, alpha=0.05, n_rows=880,
                                 held_up=["b"] if held else [],
                                 overall_test=pbr_core.significance.calibration_test(np.full(400, 0.5),
                                                                                     np.arange(400) % 2))


def test_a_slice_that_did_not_hold_up_is_never_called_off_by_its_bins():
    """Audit 13, item 8: a proposed slice labelled "did not hold up" was then said to have "some ranges of
    this slice's predictions are off" (its bins outside, p = 0.038). The count is now worded beside the
    verdict: no finding where the slice's own test of miscalibration found nothing; none about the slice
    where it is miscalibrated but not shown different from the rest. A slice that held up keeps the words."""
    counts = G.bins_outside_by_group(_slice_report(True, 0.01, 0.01).diagrams)
    # each bin outside its 90 % band with chance 0.1 under calibration: P(4 or 5 of 5), Holm x 3 (the smallest)
    assert counts["b"][3] == pytest.approx(3 * binom.sf(3, 5, 0.1), rel=1e-9)
    held, _ = texts.slices_diagram_captions(_slice_report(True, 0.01, 0.01), "b")
    assert "so some ranges of this slice's predictions are off." in held and "not hold up" not in held
    quiet, _ = texts.slices_diagram_captions(_slice_report(False, 0.2, 0.01), "b")
    assert quiet.startswith(texts.SLICES_NOT_HELD)
    assert "some ranges of this slice's predictions are off" not in quiet
    assert ("4 of 5 bins with rows fall outside their 90 % consistency band (grey): more than chance puts there by "
            "this count alone (p = 0.0013 after correcting for the 3 slices), but the slice's own test of "
            "miscalibration, which decides whether it holds up, finds nothing beyond chance (p = 0.20 after "
            "correcting for the slices tested): the count alone does not make the slice a finding.") in quiet
    like_rest, _ = texts.slices_diagram_captions(_slice_report(False, 0.01, 0.3), "b")
    assert "not calibrated differently from the rest of the file (p = 0.30 after correcting for the slices tested)" \
        in like_rest and "so some ranges" not in like_rest and "no finding about the slice" in like_rest
