"""A Monte Carlo p-value at its floor (no draw as extreme as the data: p = 1 / (draws + 1)) is written
"≤ X", X its floor after any correction, rounded up (user audit 12a: Mistral, ECE 0.39, z = 267, showed
"p = 0.001" after Holm beside Yi-34b's analytic "< 0.001" at ECE 0.043, and every confirmed slice
"p = 0.002"); JSON keeps the numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core import groups as G
from pbr_core import significance as S


def _file(tmp_path):
    """Five groups: 'sure' (150 rows at 0.97, right half the time: V = 4.4, tested by Monte Carlo, no draw
    comes near it), 'shifted' (3,000 rows 8 points off: analytic, p ~ 1e-20), three calibrated ones."""
    rng = np.random.default_rng(0)
    parts = []
    for name, n in (("sure", 150), ("shifted", 3000), ("c1", 800), ("c2", 800), ("c3", 800)):
        p = np.full(n, 0.97) if name == "sure" else rng.uniform(0.2, 0.8, n)
        truth = 0.5 if name == "sure" else np.clip(p - (0.08 if name == "shifted" else 0.0), 0, 1)
        parts.append(pd.DataFrame({"p_positive": p, "label": (rng.random(n) < truth).astype(int), "team": name}))
    path = tmp_path / "teams.csv"
    pd.concat(parts).to_csv(path, index=False)
    return pbr_core.load_predictions(path)


def test_at_floor_reads_the_draws():
    assert S.at_floor(1 / 2000, "Monte Carlo, 1,999 draws")
    assert not S.at_floor(2 / 2000, "Monte Carlo, 1,999 draws") and not S.at_floor(1e-9, "analytic")
    assert not S.at_floor(20 / 20, "Monte Carlo, 20 draws") and not S.at_floor(0.041, "Monte Carlo, 20 draws")
    assert S.format_p(0.0025, at_most=True) == "≤ 0.0025" and S.p_words(5e-4, True) == "p ≤ 0.00050"
    # rounded up, so that the bound stays true; never below the number
    for p in np.exp(np.random.default_rng(1).uniform(np.log(1e-5), np.log(0.9), 500)):
        assert float(S.format_p(p, at_most=True)[2:]) >= p


def test_the_groups_table_and_sentences_write_the_floor_as_a_bound(tmp_path):
    from dashboard import tables

    report = G.calibration_by_group(_file(tmp_path), "team", n_boot=50)
    t = report.table.set_index("group")
    assert t.loc["sure", "test_method"].startswith("Monte Carlo")
    assert S.at_floor(t.loc["sure", "p_value"], t.loc["sure", "test_method"])
    assert t.loc["shifted", "p_holm"] < 1e-6 and t.loc["shifted", "test_method"] == "analytic"
    frame = tables.groups_frame(report).set_index("Group")[tables.GROUPS_P_COLUMN]
    floor = t.loc["sure", "p_holm"]
    expected = f"≤ {S._ceil_2_digits(floor)}"
    assert frame["sure"] == expected and frame["shifted"] == "< 0.001"
    text = " ".join(G.group_statements(report)) + report._repr_html_()
    assert f"p ≤ {S._ceil_2_digits(floor)}" in text or expected in text
    assert f"p = {S.format_p(floor)}" not in text  # never an exact-looking p for the floor
    assert isinstance(report.table["p_holm"].iloc[0], float)  # the numbers stay numbers


def test_evaluate_text_writes_the_floor_as_a_bound(tmp_path, capsys):
    """`evaluate` on one small, far-off file (tested by Monte Carlo, no draw as extreme): its text says
    "≤", its JSON keeps the number."""
    import json

    from pbr_core.cli import main

    path = tmp_path / "sure.csv"
    pd.DataFrame({"p_positive": np.full(150, 0.97), "label": np.arange(150) % 2}).to_csv(path, index=False)
    main(["evaluate", str(path), "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert out["calibration_test"].startswith("Monte Carlo") and isinstance(out["calibration_test_p"], float)
    assert S.at_floor(out["calibration_test_p"], out["calibration_test"])
    main(["evaluate", str(path)])
    text = capsys.readouterr().out
    line = next(v for v in text.splitlines() if v.startswith("calibration_test_p"))
    assert "≤ 0.0005" in line
