"""Audit 14, finding A: a recalibrator fitted on scores the Data page mapped to probabilities (a risk decile
1-10) takes probabilities, but the model's new predictions are deciles. Fit & apply says so, offers the map
itself (JSON) beside the recalibrator and shows the code applying both; the Data page says the column was
mapped, not "read as probabilities"."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from pbr_core.recalibrators import load_recalibrator
from pbr_core.scores import apply_score_map
from test_app_recal import APP, _finish

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def deciles() -> bytes:
    """A risk score export: a decile score 1..10 and the 0/1 outcome (UCI Adult model outputs as deciles)."""
    from pbr_core.loading import read_table

    t = read_table(ROOT / "sample_data" / "adult_gradient_boosting.csv.gz")
    t["decile_score"] = pd.qcut(t.pop("p_gt50k").to_numpy(), 10, labels=False) + 1
    return t.rename(columns={"label": "two_year_recid"})[["race", "decile_score", "two_year_recid"]] \
        .to_csv(index=False).encode()


def _mapped(deciles: bytes) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.file_uploader(key="data_upload").upload("compas.csv", deciles, "text/csv").run()
    at.selectbox(key="data_map_score").set_value("decile_score")
    at.selectbox(key="data_map_label").set_value("two_year_recid")
    at.button(key="data_map").click().run()
    assert not at.exception and not at.error
    assert "decile_score mapped to probabilities" in at.session_state["pbr_loaded"].name
    return at


def test_the_data_page_says_the_scores_were_mapped_not_read_as_probabilities(deciles):
    at = _mapped(deciles)
    said = "\n".join(m.value for m in at.markdown)
    assert "read as **probabilities**" not in said
    assert "The score column **decile_score** was not read as probabilities: it was **mapped to probabilities**" in said


def test_fit_and_apply_gives_the_map_with_the_recalibrator_and_says_to_apply_it_first(deciles, monkeypatch, tmp_path):
    from dashboard import recal_ui

    made: dict[str, bytes] = {}
    real = recal_ui.lazy_button

    def capture(label, make, file_name, mime, key, **kwargs):  # the deferred downloads, made at once
        made[file_name] = make()
        real(label, make, file_name, mime, key, **kwargs)

    monkeypatch.setattr(recal_ui, "lazy_button", capture)
    at = _mapped(deciles)
    at.switch_page("views/apply.py").run()
    at.button(key="ship_run").click().run()
    _finish(at, "ship")
    warning = "\n".join(w.value for w in at.warning)
    assert "New predictions of the model must first go through **the same map**" in warning
    assert "Score map (JSON)" in [d.label for d in at.get("download_button")]
    code = at.code[0].value
    assert "apply_score_map(score_map, new_scores)" in code and 'open("decile_score_map.json")' in code
    assert "recalibrator.predict_proba(logits)" not in code
    # The two files, used as the code says on the raw deciles, give the page's calibrated p(y=1).
    preds = at.session_state["pbr_loaded"].preds
    score_map = json.loads(made["decile_score_map.json"])
    raw = preds.metadata["decile_score"].to_numpy(dtype=float)
    p = apply_score_map(score_map, raw)
    np.testing.assert_allclose(p, preds.p_positive, rtol=0, atol=1e-12)
    name = next(k for k in made if k.endswith("_recalibrator.json"))
    (tmp_path / name).write_bytes(made[name])
    recal = load_recalibrator(tmp_path / name)
    expected = recal.predict_proba(preds)  # the page's own route: the mapped probabilities it measured
    np.testing.assert_allclose(recal.predict_proba(np.column_stack([1 - p, p])), expected, rtol=0, atol=1e-12)


def test_fit_and_apply_on_probabilities_keeps_the_plain_snippet():
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/apply.py").run()
    at.button(key="ship_run").click().run()
    _finish(at, "ship")
    assert "recalibrator.predict_proba(logits)" in at.code[0].value
    assert "Score map (JSON)" not in [d.label for d in at.get("download_button")]
    assert not any("the same map" in w.value for w in at.warning)


def test_the_pbr_page_offers_the_map_beside_its_recalibrator_on_mapped_scores(deciles, monkeypatch):
    """The PBR page's recalibrator download has the same need: its warning points to Fit & apply's code, and the
    map is downloadable there too, the same numbers as the loaded predictions' map."""
    from dashboard import recal_ui
    from test_app_recal import _small_gp_settings

    made: dict[str, bytes] = {}
    real = recal_ui.lazy_button

    def capture(label, make, file_name, mime, key, **kwargs):
        made[key] = make()
        real(label, make, file_name, mime, key, **kwargs)

    monkeypatch.setattr(recal_ui, "lazy_button", capture)
    at = _mapped(deciles)
    at.switch_page("views/pbr.py").run()
    at.number_input(key="pbr_n_re").set_value(150).run()
    _small_gp_settings(at, "pbr")
    at.button(key="pbr_run").click().run()
    _finish(at, "pbr")
    warning = "\n".join(w.value for w in at.warning)
    assert "must first go through **the same map**" in warning and "as the code on the Fit & apply page does" in warning
    assert json.loads(made["pbr_dl_score_map"]) == at.session_state["pbr_loaded"].preds.score_map
