"""One row is said in the singular (audit 10a: "these 1 rows cannot show that the calibration error is
above 0.05" on a one-row file): pbr_core.wording, the CLI's gates and fit-row lines, the dashboard's
fit-row sentences."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pbr_core.wording import other_rows, rows, these_rows


def test_counts_of_rows_in_words():
    assert (rows(1), rows(2), rows(9090), rows(9090, thousands=False)) == ("1 row", "2 rows", "9,090 rows", "9090 rows")
    assert (these_rows(1), these_rows(0), these_rows(1000)) == ("this row", "these 0 rows", "these 1,000 rows")
    assert (other_rows(1), other_rows(2)) == ("the other row", "the other 2 rows")


@pytest.mark.parametrize("name,interval,starts", [
    ("fail_above", (0.0, 1.0), "this row cannot show that the calibration error is above 0.05"),
    ("require_below", (0.0, 1.0), "this row cannot show that the calibration error is at most 0.05"),
    ("fail_above", (0.6, 0.8), "the calibration error is above 0.05 beyond noise"),
])
def test_a_one_row_file_s_gate_speaks_of_one_row(name, interval, starts):
    from pbr_core.cli.evaluate import ece_gate

    table = {"n": 1, "ece": 0.7, "ece_ci_low": interval[0], "ece_ci_high": interval[1], "optimal_n_bins": 1,
             "ece_type": "binary ECE"}
    message = ece_gate(name, 0.05, table)["message"]
    assert message.startswith(starts) and "rows" not in message.replace("1 row,", "")
    if interval[0] > 0.05:
        assert "(1 row, B = 1, binary ECE)" in message
    many = ece_gate(name, 0.05, {**table, "n": 9090})["message"]
    assert "these 9,090 rows" in many or "9,090 rows, B = 1" in many


def _check(n_rows: int, **kw) -> SimpleNamespace:
    verdict = kw.pop("verdict")
    return SimpleNamespace(n_rows=n_rows, n_fit=400, n_possible=0, estimated=1.2, verdict=lambda min_rows: verdict,
                           **kw)


def test_the_fit_row_sentences_of_one_row():
    from dashboard import texts
    from pbr_core.cli.apply import _fit_rows_found

    none = texts.fit_rows_check(_check(1, verdict="none"), min_rows=10)
    assert "this row does not have exactly the scores and label of one of the 400 rows" in none
    assert "none of these 2 rows has" in texts.fit_rows_check(_check(2, verdict="none"), min_rows=10)
    sampled = texts.fit_rows_check(_check(1, verdict="sampled"), min_rows=10)
    assert "This row may be one it was fitted on" in sampled and "of these 1 rows" not in sampled
    assert "About 1 of these 5 rows is a row it was fitted on" in texts.fit_rows_check(_check(5, verdict="sampled"),
                                                                                       min_rows=10)
    left = texts.fit_rows_check(_check(5, verdict="too few left", found="identified", n_identified=4, n_other=1),
                                min_rows=10)
    assert "4 of these 5 rows are rows it was fitted on" in left and "Only 1 other row is left" in left
    one = _check(1, verdict="in-sample", found="identified", n_identified=1, n_other=0)
    assert _fit_rows_found(one).startswith("this row is one it was fitted on")
    assert texts.fit_rows_check(one, min_rows=10).count("This row is one it was fitted on") == 1
    contains = SimpleNamespace(found="contains", n_rows=3, n_fit=2, n_excluded=2, n_other=1, chance_contains=0.01,
                               n_possible=0)
    assert texts._found_rows(contains).endswith("leaves exactly the values of the other row")


def test_the_other_rows_of_mapped_scores():
    import numpy as np
    import pandas as pd

    from pbr_core.scores import map_scores

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"score": rng.normal(size=40), "y": rng.integers(0, 2, 40)})
    notes = map_scores(frame, "score", "y", share=0.5).preds.notes
    assert any("turns the scores of the other 20 rows into" in n for n in notes)


def test_a_one_row_group_s_statement_speaks_of_one_row():
    """Review 11: 'seg = solo (1 rows): no evidence …' in the CLI, the Groups page and the audit report."""
    import numpy as np
    import pandas as pd

    import pbr_core
    from pbr_core.groups import calibration_by_group, group_statements

    rng = np.random.default_rng(0)
    p = rng.random(201)
    df = pd.DataFrame({"p": p, "label": (rng.random(p.size) < p).astype(int), "seg": ["solo"] + ["many"] * 200})
    lines = group_statements(calibration_by_group(pbr_core.load_predictions(df), "seg"))
    assert any("solo (1 row): " in line for line in lines) and any("many (200 rows): " in line for line in lines)
