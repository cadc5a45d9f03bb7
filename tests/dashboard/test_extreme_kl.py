"""A fit whose KL is extreme (issue 35: alpha = 0 on a 7-class file gave KL ~1.6e8, squashed the
Generalization chart and made its mean KL 54,320,410.98): said, marked, drawn on a log scale and
kept out of the KL and bound means; the rule, n_re ln K nats, pinned on the paper's reproduction."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dashboard import figures_recal as FR
from dashboard import report, runs, tables, texts
from pbr_core.experiments import KLGapResult, extreme_kl, kl_limit

ROOT = Path(__file__).resolve().parents[2]


def _study(n_classes: int = 7, extreme: float = 1.6e8) -> pd.DataFrame:
    """A KL-gap table of 3 alphas x 3 folds (n_re = 1000) whose alpha = 0, fold 2 fit drifted."""
    rng = np.random.default_rng(0)
    rows = []
    for fold in range(3):
        for alpha, kl in ((0.0, 60.0), (0.5, 4.0), (1.0, 2.5)):
            kl = extreme if (alpha, fold) == (0.0, 1) else kl * (1 + 0.1 * fold)
            rows.append({"alpha": alpha, "fold": fold, "n_re": 1000, "n_bins": 10, "kl": kl,
                         "ece_re": 0.02, "ece_te": 0.02 + rng.uniform(0, 0.03), "gap": 0.0, "bound": 0.5,
                         "fit_seconds": 1.0, "error": None})
    t = pd.DataFrame(rows)
    t["gap"] = (t["ece_te"] - t["ece_re"]).abs()
    return t


def test_the_line_is_n_re_ln_k_and_flags_only_alpha_zero_fits_of_the_reproduction():
    """The paper's reproduction (committed CSVs, 560 fits): 3 fits above n_re ln K, all at alpha = 0
    (KITTI XGBoost 4,655 and 1,563 above 693; CIFAR-100 WRN-26-10 6,835 above 4,605); every alpha > 0
    fit below 150 nats."""
    assert kl_limit(1000, 2) == pytest.approx(1000 * math.log(2)) and kl_limit(1000, 100) == pytest.approx(4605.17, 1e-6)
    flagged, total = [], 0
    for name, k in (("kitti", 2), ("cifar100", 100)):
        t = pd.read_csv(ROOT / "docs" / "reproduction_results" / "figures" / f"kl_gap_{name}.csv")
        total += len(t)
        hit = t[extreme_kl(t["kl"], t["n_re"], k)]
        flagged += [(m, a, round(kl)) for m, a, kl in zip(hit["model"], hit["alpha"], hit["kl"])]
        assert t.loc[t["alpha"] > 0, "kl"].max() < 150
    assert total == 560
    assert sorted(flagged) == [("wrn26-10", 0.0, 6835), ("xgboost", 0.0, 1563), ("xgboost", 0.0, 4655)]
    assert not extreme_kl(np.nan, 1000, 2) and list(extreme_kl([1.0, 694.0], 1000, 2)) == [False, True]


def test_per_alpha_means_leave_the_extreme_fit_out_and_count_it():
    t = _study()
    plain = tables.per_alpha_frame(t, 0.05)  # without K: as before, the drifted fit dominates
    assert plain.loc[plain["α"] == 0.0, "mean KL"].iloc[0] > 5e7
    shown = tables.per_alpha_frame(t, 0.05, 7)
    row = shown[shown["α"] == 0.0].iloc[0]
    assert row["mean KL"] == pytest.approx((60.0 + 60.0 * 1.2) / 2)  # folds 1 and 3
    assert row[tables.EXTREME_KL_COLUMN] == 1 and shown[tables.EXTREME_KL_COLUMN].sum() == 1
    # Beside the mean KL it explains: last, it was cut off at the right edge of a 1400 px page.
    assert list(shown.columns[:3]) == ["α", "mean KL", tables.EXTREME_KL_COLUMN]
    assert row["mean gap"] == pytest.approx(t[t["alpha"] == 0.0]["gap"].mean())  # gaps keep every fit
    assert tables.EXTREME_KL_COLUMN not in tables.per_alpha_frame(_study(extreme=70.0), 0.05, 7)


def test_the_chart_marks_the_extreme_fit_on_a_log_scale():
    t = _study()
    fig = FR.kl_gap_figure(t, n_classes=7)
    traces = {tr.name: tr for tr in fig.data}
    marked = traces[texts.KL_GAP_EXTREME_TRACE]
    assert list(marked.x) == [1.6e8] and marked.marker.symbol == "x"
    assert max(traces[FR.TRACE_GAP_POINTS].x) < 100  # the other fits are not squashed against the axis
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis2.type == "log"
    calm = FR.kl_gap_figure(_study(extreme=70.0), n_classes=7)  # nothing extreme: the paper's linear axis
    assert calm.layout.xaxis.type in (None, "linear") and texts.KL_GAP_EXTREME_TRACE not in {tr.name for tr in calm.data}


def test_the_note_says_which_fit_why_and_what_the_page_does():
    note = tables.extreme_kl_note(_study(), 7)
    assert note.startswith("One fit has an extreme KL (α = 0, fold 2: KL = 1.6e+08)")
    assert "n_re·ln K = 1,000·ln 7 = 1,946 nats" in note and "At α = 0 the objective has no KL term" in note
    assert "left out of the mean KL and mean bound" in note
    assert tables.extreme_kl_note(_study(extreme=70.0), 7) is None


def test_the_report_carries_the_note_the_marked_chart_and_the_means():
    t = _study()
    res = KLGapResult.from_table(t, objective="pbr")
    gen = runs.GenResult(settings=runs.KLGapSettings(alphas=(0.0, 0.5, 1.0), n_folds=3), data_name="d", data_key="k",
                         result=res, n_classes=7)
    sec = report.generalization_section(gen)
    assert any("One fit has an extreme KL" in p for p in sec.paragraphs)
    per_alpha = dict(sec.tables)["Per α, mean over folds"].data  # a Styler: its numbers
    assert per_alpha[tables.EXTREME_KL_COLUMN].sum() == 1 and per_alpha["mean KL"].max() < 100
    assert texts.KL_GAP_EXTREME_TRACE in {tr.name for tr in sec.figures[0][1].data}


def test_pbr_page_note_on_one_extreme_fit():
    class Result:  # the fields of runs.PBRResult the note reads
        kl, alpha = 3.48e7, 0.0
        settings = runs.PBRSettings(alpha=0.0, n_re=100)

        class preds:  # noqa: N801
            n_classes = 10

    note = tables.pbr_extreme_kl_note(Result)
    assert note.startswith("Extreme KL: 3.48e+07 nats, above n_re·ln K = 100·ln 10 = 230")
    assert "At α = 0 the objective has no KL term" in note
    Result.kl = 35.1
    assert tables.pbr_extreme_kl_note(Result) is None


@pytest.mark.slow
def test_a_real_alpha_zero_fit_drifts_past_the_line_and_alpha_half_does_not():
    """Real PBR fits on 100 CIFAR-10 rows (~5 s): alpha = 0 ends far above 100 ln 10 = 230 nats (3.5e7
    when measured), alpha = 0.5 stays at the prior (KL ~2e-8)."""
    from pbr_core.recalibrators.gp import PBR

    d = np.load(ROOT / "sample_data" / "cifar10_resnet110.npz")
    z, y = d["logits"][:100].astype(float), d["labels"][:100]
    assert extreme_kl(PBR(alpha=0.0, device="cpu").fit(z, y).kl_, 100, 10)
    assert not extreme_kl(PBR(alpha=0.5, device="cpu").fit(z, y).kl_, 100, 10)


def test_the_per_alpha_headers_are_short_enough_for_a_1400_px_page():
    """Audit 13 item 3: "fits with an extreme KL (not in the KL and bound means)" pushed the bound column
    off a 1,400 px page ("mean Corollary 1 bo…"); the headers are short, their meaning in the help."""
    shown = tables.per_alpha_frame(_study(), 0.05, 7)
    assert list(shown.columns) == ["α", "mean KL", tables.EXTREME_KL_COLUMN, "mean ECE (recal.)",
                                   "mean ECE (test subset)", "mean gap", "mean bound (95%)"]
    assert max(len(c) for c in shown.columns) <= 22
    config = tables.per_alpha_config(0.05)
    assert "Corollary 1" in config["mean bound (95%)"]["help"] and "left out" in config[tables.EXTREME_KL_COLUMN]["help"]
