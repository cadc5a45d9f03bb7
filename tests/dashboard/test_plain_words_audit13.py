"""Audit 13 (a new user's walk, items 2, 9, 10): the pages' headers, cards and captions in plain words
(the tests' and estimators' names kept in the help), the Groups table's numbers that cannot be misread,
and the multiclass Brier / NLL cards named for what they are."""
from __future__ import annotations

import io
import re

import numpy as np
import pandas as pd
import pytest

import pbr_core
from dashboard import report, tables, texts
from pbr_core import groups as G

#: Names of tests, statistics and optimisers that a header, a card or a caption must not lead with.
JARGON = re.compile(r"Kendall|τ|Wilcoxon|t-test|sign test|Cox|Spiegelhalter|Holm|L-BFGS|Monte Carlo|\(\)|_")


def _folds_file(tmp_path, shift: float = 0.25):
    """Five folds of 400 rows, every one miscalibrated by ``shift`` (outcomes drawn from p - shift)."""
    rng = np.random.default_rng(13)
    n = 2000
    p = rng.uniform(0.3, 0.95, n)
    frame = pd.DataFrame({"p_positive": p, "label": (rng.random(n) < np.clip(p - shift, 0, 1)).astype(int),
                          "fold": np.repeat(np.arange(5), n // 5)})
    path = tmp_path / "folds.csv"
    frame.to_csv(path, index=False)
    return pbr_core.load_predictions(path)


def _calibrated_groups(tmp_path):
    """Six calibrated groups of 300 rows: some group's ECE without noise comes out below 0."""
    rng = np.random.default_rng(7)
    parts = []
    for name in "abcdef":
        p = rng.uniform(0.1, 0.9, 300)
        parts.append(pd.DataFrame({"p_positive": p, "label": (rng.random(300) < p).astype(int), "team": name}))
    path = tmp_path / "teams.csv"
    pd.concat(parts).to_csv(path, index=False)
    return pbr_core.load_predictions(path)


# ------------------------------------------------------------------------------------- item 2: words
def test_headers_cards_and_captions_name_no_test_and_no_library_call():
    assert not [c for c in texts.PAIRED_P_COLUMNS if JARGON.search(c)], list(texts.PAIRED_P_COLUMNS)
    assert not [c for c in (*texts.FOLD_METRICS, texts.FOLD_TAU_ROW, texts.FOLDS_NEGATIVE) if JARGON.search(c)]
    assert not JARGON.search(texts.GROUPS_TEST_CAPTION) and not JARGON.search(texts.BEST_SHOWN)
    # the technical names stay, in the help
    assert "Nadeau & Bengio" in next(iter(texts.PAIRED_P_COLUMNS.values()))
    assert "Wilcoxon" in texts.PAIRED_P_COLUMNS["p-value, rank test"]
    assert "Kendall" in texts.FOLD_TAU_HELP and "Wilcoxon" in texts.FOLD_WILCOXON_HELP
    assert all(name in texts.GROUPS_TEST_HELP for name in ("Cox", "Spiegelhalter", "Holm"))
    # the estimators' table names the library and its call in words, no "()"
    from pbr_core.estimators import CONVENTIONS

    names = [c.name for c in CONVENTIONS.values()]
    assert "torchmetrics (calibration_error)" in names and not [n for n in names if "()" in n]


def test_the_fit_caption_says_in_words_whether_it_converged():
    caption = texts.fit_details("cpu", 0.5, False, "32 Monte Carlo draws per entry",
                                "tolerance (L-BFGS: gradient or objective change)", True)
    plain, details = caption.split("Details:")
    assert texts.FIT_CONVERGED in plain and not JARGON.search(plain.replace("device: **cpu**", ""))
    assert "L-BFGS: gradient or objective change" in details and "32 Monte Carlo draws per entry" in details
    stopped = texts.fit_details("cpu", None, False, None, "reached max_iter=20", False)
    assert texts.FIT_NOT_CONVERGED in stopped and "reached the limit of 20 iterations" in stopped


def test_the_report_s_every_fold_table_has_no_row_numbers_and_no_raw_column():
    table = pd.DataFrame({"method": ["uncalibrated", "temperature"], "fold": [0, 0], "n_re": [250, 250],
                          "ece": [0.0331, 0.0419], "nll": [0.41, 0.42], "nll_infinite_rows": [0, 0],
                          "error": [None, None]})
    html = report._table_html(tables.fold_styler(table))
    assert "nll_infinite_rows" not in html and texts.COLUMN_TITLES["nll_infinite_rows"] in html
    assert "row_heading" not in html and not re.search(r"<th[^>]*>\s*0\s*</th>", html)


def test_the_groups_csv_columns_are_each_documented():
    assert list(G.TABLE_COLUMN_MEANINGS) == G.TABLE_COLUMNS
    assert all(f"`{c}`" in texts.groups_csv_help() for c in ("z", "chi2_cox", "p_holm", "test_method"))


# ---------------------------------------------------------------- item 9: numbers that cannot be misread
def test_a_numeric_grouping_names_its_groups_with_the_column(tmp_path):
    rep = G.calibration_by_group(_folds_file(tmp_path), "fold", n_boot=20)
    assert len(rep.miscalibrated) == 5
    line = texts.groups_headline(rep)
    assert "fold = 0, fold = 1, fold = 2, fold = 3, fold = 4" in line.replace("\\", ""), line


def test_an_ece_without_noise_below_0_reads_as_about_0_with_its_estimate_kept(tmp_path):
    rep = G.calibration_by_group(_calibrated_groups(tmp_path), "team", n_boot=20)
    t = rep.table.set_index("group")
    below = t.index[t["ece_corrected"] < 0].tolist()
    assert below, t["ece_corrected"]  # the seed gives some
    shown = tables.groups_frame(rep).set_index("Group")[tables.GROUPS_CORRECTED_COLUMN]
    for g in t.index:
        v = t.loc[g, "ece_corrected"]
        assert shown[g] == (f"≈ 0 ({v:.4f}: noise)" if v < 0 else f"{v:.4f}")
    assert texts.corrected_ece_cell(-0.0108) == "≈ 0 (-0.0108: noise)"
    note = texts.groups_below_zero_note(below)
    assert "below 0" in note and "not as better than perfect" in note and "kept" in note
    # the download keeps the estimate itself
    assert (rep.table["ece_corrected"] < 0).sum() == len(below)


def test_a_numeric_grouping_s_table_names_its_groups_as_the_sentences_do(tmp_path):
    """Audit 14, item 9: a fold grouping's Group cells read "fold = 0" (bare 0-4 before), as the
    sentences say; the CSV keeps the raw values; a crossed group with a number in it is named too."""
    from pbr_core.loading.writing import csv_text

    rep = G.calibration_by_group(_folds_file(tmp_path), "fold", n_boot=20)
    assert tables.groups_frame(rep)["Group"].tolist() == [f"fold = {k}" for k in range(5)]
    said = " ".join(G.group_statements(rep))
    assert all(f"fold = {k}" in said for k in range(5))   # the sentences' names, now the table's too
    # the download keeps the raw values: 0-4, not "fold = 0"
    assert pd.read_csv(io.StringIO(csv_text(rep.table)))["group"].tolist() == list(range(5))
    # names that are not numbers stay as they are
    named = G.calibration_by_group(_calibrated_groups(tmp_path), "team", n_boot=20)
    assert tables.groups_frame(named)["Group"].tolist() == list("abcdef")
    from pbr_core.loading._tables import _is_number  # what tables.group_cells reads as a bare number

    assert _is_number("0") and _is_number("2.5") and not _is_number("2024-01")


def test_the_groups_table_shows_its_verdict_and_p_value_first(tmp_path):
    rep = G.calibration_by_group(_calibrated_groups(tmp_path), "team", n_boot=20)
    cols = list(tables.groups_frame(rep).columns)
    assert cols[:4] == ["Group", "Rows", tables.GROUPS_VERDICT_COLUMN, tables.GROUPS_P_COLUMN]
    assert "the last column" not in texts.groups_headline(rep)
    assert tables.GROUPS_VERDICT_COLUMN in texts.groups_headline(rep)


# ------------------------------------------------------------------ item 10: Brier and NLL named right
@pytest.mark.parametrize("binary_positive, top_label_only, brier, nll", [
    (False, False, "Brier score (all classes)", "NLL (true class)"),   # multiclass: the vector (the paper's)
    (True, False, "Brier score", "NLL"),                               # p(y=1)
    (False, True, "Brier score", "NLL"),                               # confidence against correctness
])
def test_the_brier_and_nll_cards_say_what_they_are_of(binary_positive, top_label_only, brier, nll):
    one = texts.measured_probability(binary_positive, top_label_only)
    assert (texts.brier_label(one), texts.nll_label(one)) == (brier, nll)
    summary = {"ece": 0.0169, "ece_ci_low": 0.0, "ece_ci_high": 0.03, "mce": 0.25, "brier": 0.2459,
               "nll": 0.5296, "accuracy": 0.836}
    assert list(tables.metric_cards_frame(summary, one).index) == ["ECE", "MCE", brier, nll, "Accuracy"]
