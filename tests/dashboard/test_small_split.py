"""Files too small for a measured recalibration result (audit 3 A4, B3): 150 and 60 real rows.

Before, the 150-row file's PBR page advised "Lower n_re to at most 6, so that at least 144 rows are
left to test on" and accepted it (a fit on 6 rows, Compare's 10 folds powerless: isotonic worse on
all 10, "no difference shown"); the n_re sweep said "Lower n_re to at most 6" while n_re was 6; Fit &
apply on 60 rows fitted and offered a recalibrator measured only on its own rows with no word of
the size. Now every page says in one sentence that the file is too small and what to do (load at
least 288 rows: pbr_core.experiments.MIN_MEASURED_ROWS), a recalibration set below 144 rows
(MIN_FIT_ROWS) is refused with the value to raise it to, and Fit & apply still fits and downloads
but says the recalibrator is unmeasured, on the page and in the report.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import pbr_core
from dashboard import report, runs
from pbr_core.experiments import SmallTestSetError, small_file_problem
from tests.dashboard.test_small_files import small_kitti_csv

ROOT = Path(__file__).resolve().parents[2]
PBR, COMPARE, GEN, APPLY = "views/pbr.py", "views/compare.py", "views/generalization.py", "views/apply.py"


def _app(n: int) -> AppTest:
    app = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=60)
    app.run()
    app.file_uploader(key="data_upload").upload(f"small_{n}.csv", small_kitti_csv(n), "text/csv").run()
    assert not app.exception, app.exception
    assert app.session_state["pbr_loaded"].preds.n == n
    return app


def _words(at: AppTest) -> list[str]:
    return [e.value for e in (*at.error, *at.info, *at.warning)]


TOO_SMALL_150 = ("This file has 150 rows, too few to measure a recalibrator, which needs at least 144 rows to fit on "
                 "and 144 other rows to test on: load a file with at least 288 labelled rows.")


def test_150_rows_pbr_and_compare_say_the_file_is_too_small_never_n_re_6():
    at = _app(150)
    at.switch_page(PBR).run()
    assert not at.exception
    for n_re in (None, 6):
        if n_re:
            at.number_input(key="pbr_n_re").set_value(n_re).run()
        assert [e.value for e in at.error] == [TOO_SMALL_150] and at.button(key="pbr_run").disabled
    at.switch_page(COMPARE).run()
    at.number_input(key="cmp_n_re").set_value(6).run()
    errors = [e.value for e in at.error]
    assert errors == [TOO_SMALL_150] and at.button(key="cmp_run").disabled
    # B3: the sweep names no n_re (before: "Lower n_re to at most 6" with n_re = 6), only the file's size.
    assert TOO_SMALL_150 in [i.value for i in at.info]
    assert not any("at most 6" in w or "Lower n_re" in w for w in _words(at))
    at.switch_page(GEN).run()
    (error,) = [e.value for e in at.error]
    assert "this file has 150" in error and "Load a larger file" in error and "at most" not in error
    assert TOO_SMALL_150 == small_file_problem(150)  # the CLI's words, the same


def test_504_rows_refuse_a_fit_on_fewer_than_144_rows_with_the_value_to_raise_it_to():
    at = _app(504)
    at.switch_page(PBR).run()
    at.number_input(key="pbr_n_re").set_value(100).run()
    (error,) = [e.value for e in at.error]
    assert error.startswith("A recalibration set of 100 rows is too small to fit on")
    assert error.endswith("Raise n_re to at least 144 (at most 360 on this file, so that at least 144 rows are "
                          "left to test on).")
    assert at.button(key="pbr_run").disabled
    at.switch_page(COMPARE).run()
    at.number_input(key="cmp_n_re").set_value(100).run()
    (error,) = [e.value for e in at.error]
    assert "A recalibration set of 100 rows is too small" in error and at.button(key="cmp_run").disabled
    # The paper's sweep sizes from 10 stay: an explicit experiment about small recalibration sets.
    assert at.multiselect(key="sweep_n_re_values").options == ["10", "50", "100", "250"]


def test_runs_refuse_few_fit_rows_started_without_the_page():
    import pbr_core

    preds = pbr_core.load_predictions(small_kitti_csv(504), format="csv")
    with pytest.raises(SmallTestSetError, match="100 rows is too small to fit on.*Raise n_re to at least 144"):
        runs.run_compare(preds, runs.CompareSettings.of(["uncalibrated"], 100, 2, 0), runs.NullReporter())
    small = pbr_core.load_predictions(small_kitti_csv(150), format="csv")
    with pytest.raises(SmallTestSetError, match="^This file has 150 rows, too few"):
        runs.run_pbr(small, runs.PBRSettings(objective="pbr", n_re=6), runs.NullReporter())


def test_fit_and_apply_on_60_rows_fits_downloads_and_says_it_is_unmeasured():
    at = _app(60)
    at.switch_page(APPLY).run()
    assert at.slider(key="ship_holdout").value == 0 and not at.button(key="ship_run").disabled
    at.selectbox(key="ship_method").set_value("platt").run()
    at.button(key="ship_run").click().run()
    job = at.session_state["recal_jobs"]["ship"]
    assert job.join(120), job.status
    at.run()
    assert not at.exception and job.status == "done", (job.status, job.error)
    warnings = [w.value for w in at.warning]
    assert any(w.startswith("This file has 60 rows, fewer than the 288 the other pages need to measure a "
                            "recalibrator") and "this recalibrator is unmeasured" in w and "You can still download it"
               in w for w in warnings), warnings
    assert at.session_state["recal_jobs"]["ship"].result.calibrated_csv()  # the download is not blocked
    paragraphs = report.apply_section(job.result).paragraphs
    assert any(p.startswith("Warning: This file has 60 rows") and "unmeasured" in p for p in paragraphs)


def _app_with_groups(n: int) -> AppTest:
    """``n`` KITTI rows with a group column (two regions), so that the Compare page draws its group gaps."""
    frame = pd.read_csv(io.BytesIO(small_kitti_csv(n)))
    frame["region"] = np.where(np.arange(n) % 2 == 0, "north", "south")
    app = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=60)
    app.run()
    app.file_uploader(key="data_upload").upload(f"groups_{n}.csv", frame.to_csv(index=False).encode(), "text/csv").run()
    assert not app.exception, app.exception
    return app


def test_group_gaps_are_blocked_up_front_with_the_pages_one_sentence():
    """Audit 4: on a 150-row file the group gaps' Run was enabled while the rest of Compare was blocked;
    clicking it failed with two messages joined ("A test set of 75 rows is too small ... This file has
    150 rows, too few ...") and a traceback in the server log. Now no Run, and the page's sentence."""
    at = _app_with_groups(150)
    at.switch_page(COMPARE).run()
    assert not at.exception
    assert "gap_run" not in [b.key for b in at.button]
    infos = [i.value for i in at.info]
    assert infos.count(TOO_SMALL_150) == 2  # the sweep's and the group gaps', word for word
    assert not any("A test set of" in w for w in _words(at))
    # The guard behind the page (a run started without it) gives the same one sentence.
    small = pbr_core.load_predictions(small_kitti_csv(150), format="csv")
    s = runs.GroupGapSettings.of("temperature", ("region",), 75, 2, 0)
    with pytest.raises(SmallTestSetError) as refused:
        runs.run_group_gaps(small, s, runs.NullReporter())
    assert str(refused.value) == TOO_SMALL_150


def test_group_gaps_on_a_larger_file_follow_the_comparisons_test_set_refusal():
    at = _app_with_groups(504)
    at.switch_page(COMPARE).run()
    assert "gap_run" in [b.key for b in at.button]
    at.number_input(key="cmp_n_re").set_value(450).run()  # 54 rows left to test on
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert error.startswith("A test set of 54 rows is too small")
    assert error in [i.value for i in at.info] and "gap_run" not in [b.key for b in at.button]


def test_a_refused_pbr_run_shows_no_split_and_no_time_estimate():
    """Audit 4: the blocked PBR page on 150 rows still said "Fit on 75 rows, test on 75 rows." and how long
    the fit would take; a refused run has neither. A file large enough shows both again."""
    at = _app(150)
    at.switch_page(PBR).run()
    assert [e.value for e in at.error] == [TOO_SMALL_150]
    shown = [m.value for m in at.markdown] + [c.value for c in at.caption] + [i.value for i in at.info]
    assert not any(w.startswith("Fit on **") or ":material/schedule:" in w for w in shown)
    at = _app(504)
    at.switch_page(PBR).run()
    assert not at.error
    shown = [m.value for m in at.markdown] + [c.value for c in at.caption] + [i.value for i in at.info]
    assert "Fit on **252** rows, test on **252** rows." in shown
    assert any(":material/schedule:" in w for w in shown)  # a short fit: its time as a caption


def test_the_bands_caption_of_a_one_bin_diagram_says_one_bin():
    """Audit 4: a slice of Adult whose held-out rows all fell in one bin read "0 of 1 bins with rows fall
    outside their 90 % consistency band ... at most about 1 in 10 would"."""
    from dashboard import texts

    one = pd.DataFrame({"count": [0, 40, 0], "accuracy": [0.0, 0.5, 0.0], "band_low": [0.0, 0.4, 0.0],
                        "band_high": [1.0, 0.6, 1.0]})
    inside = texts.bands_caption(one)
    assert inside.startswith("The one bin with rows lies inside its 90 % consistency band (grey).")
    assert "of 1 bins" not in inside and "1 in 10" not in inside
    outside = texts.bands_caption(one.assign(accuracy=[0.0, 0.9, 0.0]))
    assert outside.startswith("The one bin with rows lies outside")
    assert texts.bands_caption(one.assign(count=0)) == ""
    two = pd.concat([one, one.iloc[[1]]])
    assert texts.bands_caption(two).startswith("0 of 2 bins with rows fall outside")
