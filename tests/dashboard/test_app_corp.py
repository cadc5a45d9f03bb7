"""The Reliability page's CORP part under AppTest: the diagram without bins, the score decomposition
and the log loss's split, with the library's numbers, on multiclass, binary and top-label files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from apptest_tools import sent_figure
from streamlit.testing.v1 import AppTest

import pbr_core
from dashboard import figures_corp as FC
from dashboard import texts
from pbr_core import metrics as M
from pbr_core.corp import CHANCE_OUTSIDE_SHARE, corp_reliability, log_loss_split, outside_band_share, score_decomposition
from test_app_recal import APP

RELIABILITY = "views/reliability.py"


def _open(sample: str, binary_ece: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.selectbox(key="data_sample").set_value(sample).run()
    at.switch_page(RELIABILITY).run()
    assert not at.exception, at.exception
    assert texts.CORP_EXPANDER in [e.label for e in at.expander]
    at.session_state["rel_corp_open"] = True  # the user opens the CORP expander
    at.run()
    assert not at.exception, at.exception
    return at


def _text(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown) + "\n".join(c.value for c in at.caption)


def test_corp_on_cifar10_top_label():
    at = _open("cifar10_resnet110.npz")
    preds = at.session_state["pbr_loaded"].preds
    conf, out = M.confidence_and_outcome(preds.probs, preds.labels)
    brier, log = score_decomposition(conf, out, "brier"), score_decomposition(conf, out, "log")
    text = _text(at)
    assert f"Brier score **{brier.score:.4f}** = miscalibration {brier.mcb:.4f} − discrimination {brier.dsc:.4f}" in text
    assert f"log loss **{log.score:.4f}** = {log.mcb:.4f} − {log.dsc:.4f} + {log.unc:.4f}" in text
    # The decomposed scores are the metric cards' (the Brier score and NLL of what the ECE measures).
    cards = M.target_brier_nll(conf, out)
    assert brier.score == pytest.approx(cards["brier"], rel=1e-9) and log.score == pytest.approx(cards["nll"], rel=1e-9)
    split = log_loss_split(preds.logits, preds.labels)
    assert f"whole probability vector is **{split['log_loss']:.4f}**" in text
    assert f"brings it to {split['refinement']:.4f}" in text and f"**{split['calibration']:.4f}**" in text
    # The figure: the library's PAV curve and band.
    diagram = corp_reliability(conf, out)
    fig = sent_figure(at, 1)
    curve = next(t for t in fig.data if t.name == FC.TRACE_CORP)
    np.testing.assert_allclose(curve.y, diagram.recalibrated, rtol=0, atol=1e-12)
    np.testing.assert_allclose(curve.x, diagram.x, rtol=0, atol=1e-12)
    share = outside_band_share(diagram, conf)
    assert texts.corp_band_reading(share, CHANCE_OUTSIDE_SHARE) in text
    assert share > CHANCE_OUTSIDE_SHARE and "more than chance" in text  # ResNet-110: over-confident
    assert at.table[0].value.loc["Brier score", "Miscalibration MCB"] == f"{brier.mcb:.4f}"


def test_corp_on_a_binary_file_with_exact_zeros_says_what_is_not_computed():
    """KITTI random forest: p(y=1) of exactly 0 or 1 that were wrong make the log loss infinite; the
    page says so in words and does not split it."""
    at = _open("kitti_random_forest.csv")
    preds = at.session_state["pbr_loaded"].preds
    brier = score_decomposition(preds.probs[:, 1], preds.labels, "brier")
    text = _text(at)
    assert f"p(y=1) splits into three parts: Brier score **{brier.score:.4f}**" in text
    assert "The log loss is infinite" in text and texts.LOG_LOSS_SPLIT_ZEROS in text
    assert at.table[0].value.loc["Log loss", "Score"] == "infinite"
    assert "inf " not in text and "nan" not in text


def test_corp_on_a_top_label_file():
    at = _open("cifar10_resnet110_toplabel.csv")
    text = _text(at)
    assert texts.LOG_LOSS_SPLIT_TOP_LABEL in text and "What the score is made of" in text


def test_corp_on_a_server_dataset_uses_its_sample_and_says_so(tmp_path, monkeypatch):
    """A dataset on the server: the PAV fit needs rows, so the CORP part works on the uniform sample
    the page holds (3000 of Adult's rows here) and says so."""
    from pathlib import Path

    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "data"
    (root / "logs").mkdir(parents=True)
    df = pd.read_csv(Path(__file__).resolve().parents[2] / "sample_data" / "adult_gradient_boosting.csv.gz")
    for i, rows in enumerate(np.array_split(np.arange(len(df)), 2)):
        pq.write_table(pa.Table.from_pandas(df.iloc[rows], preserve_index=False), root / "logs" / f"p{i}.parquet")
    monkeypatch.setenv("PBR_CALIB_DATA_ROOT", str(root))
    monkeypatch.setenv("PBR_CALIB_SAMPLE_ROWS", "3000")
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.text_input(key="data_server_path").set_value("logs/*.parquet")
    at.button(key="data_server_read").click().run()
    at.switch_page(RELIABILITY).run()
    at.session_state["rel_corp_open"] = True
    at.run()
    assert not at.exception, at.exception
    sample = at.session_state["pbr_loaded"].preds
    assert sample.n == 3000
    brier = score_decomposition(sample.probs[:, 1], sample.labels, "brier")
    text = _text(at)
    assert f"Brier score **{brier.score:.4f}**" in text
    assert f"{len(df):,} rows, too many to hold in memory: the CORP part works" in text


def calibrated_cifar_csv(n: int = 150, seed: int = 0) -> bytes:
    """Like the audit's f6 file: ``n`` rows of CIFAR-10 ResNet-110 logits with labels drawn from their
    softmax, so the confidence is calibrated by construction."""
    import pandas as pd
    from scipy.special import softmax

    from test_corp import SAMPLE_DATA

    logits = np.load(SAMPLE_DATA / "cifar10_resnet110.npz")["logits"][:n].astype(np.float64)
    rng = np.random.default_rng(seed)
    labels = [rng.choice(10, p=row) for row in softmax(logits, axis=1)]
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    frame = pd.DataFrame(np.round(logits, 5), columns=names)
    frame["label"] = labels
    return frame.to_csv(index=False).encode()


def test_mcb_of_a_small_calibrated_file_is_called_chance_not_removable():
    """Audit 3, A2: on 150 calibrated rows the page called MCB "the part that recalibrating these
    predictions could remove (70 % of the score)". The PAV curve is fitted on those rows, so calibrated
    files show that much by chance; the page now says the MCB is within chance, with the reference."""
    from pbr_core.corp import mcb_against_chance

    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.file_uploader(key="data_upload").upload("small150.csv", calibrated_cifar_csv(), "text/csv").run()
    at.switch_page(RELIABILITY).run()
    at.session_state["rel_corp_open"] = True
    at.run()
    assert not at.exception, at.exception
    preds = at.session_state["pbr_loaded"].preds
    assert preds.n == 150
    conf, out = M.confidence_and_outcome(preds.probs, preds.labels)
    brier, chance = score_decomposition(conf, out, "brier"), mcb_against_chance(conf, out)
    assert brier.mcb / brier.score > 0.3 and not chance["brier"].beyond_chance  # large, and still chance
    text = _text(at)
    assert "could remove" not in text
    assert texts.mcb_chance_words(chance["brier"]) in text
    assert "within what chance alone gives on 150 calibrated rows" in text
    assert f"stays at or below {chance['brier'].chance_high:.4f} in 99% of 199 draws" in text  # 1 - ALPHA_MCB
    table = at.table[0].value
    assert table.loc["Brier score", texts.MCB_BEYOND_COLUMN] == "no: within chance"
    assert table.loc["Brier score", texts.MCB_CHANCE_COLUMN] == f"{chance['brier'].chance_high:.4f}"


def test_mcb_of_an_over_confident_model_is_beyond_chance():
    """CIFAR-10 ResNet-110 (10,000 real labels, over-confident): MCB is beyond chance, and only then
    called removable, with the in-sample caveat."""
    from pbr_core.corp import mcb_against_chance

    at = _open("cifar10_resnet110.npz")
    preds = at.session_state["pbr_loaded"].preds
    chance = mcb_against_chance(*M.confidence_and_outcome(preds.probs, preds.labels))
    assert chance["brier"].beyond_chance
    text = _text(at)
    assert "This is more than chance alone gives" in text and "recalibrating could remove" in text
    assert "on new data the gain is at most this" in text
    assert at.table[0].value.loc["Brier score", texts.MCB_BEYOND_COLUMN] == "yes: partly removable"


def test_the_more_than_chance_reading_of_rounded_scores_says_the_rounding_can_make_it():
    """Audit 12b: Adult's p(y=1) written with 1 decimal, outcomes drawn from the unrounded p: "the predictions
    are off there" in 82 % of 300-row files, true of the written values (a score of 0.0 covering 46 % of the
    rows whose true rate is 1.25 %) but said without the condition the test of calibration's coarse caveat
    states. It is now said of the values as written, with the rounding as a possible cause; fine scores get
    no such words (the same file unrounded), and the page shows the sentence the library's numbers give."""
    import pandas as pd

    from pbr_core.resolution import coarse_grid_words

    frame = pd.read_csv(Path(__file__).parents[2] / "sample_data" / "adult_gradient_boosting.csv.gz")
    rng = np.random.default_rng(5)
    rows = rng.choice(len(frame), 300, replace=False)
    p = frame["p_gt50k"].to_numpy()[rows]
    y = (rng.uniform(size=300) < p).astype(int)
    rounded = np.round(p, 1)
    assert coarse_grid_words(rounded) == "written with at most 1 decimal" and coarse_grid_words(p) == ""
    assert coarse_grid_words(np.array([0.0, 1.0, 0.5, 0.25])) == "0, 1 or a simple fraction such as 0.5"
    assert coarse_grid_words(np.round(p, 2)) == "written with at most 2 decimals"
    assert coarse_grid_words(np.round(p, 4)) == ""   # 4 decimals: read as a rounding elsewhere, no caveat here
    words = texts.corp_band_reading(0.4, CHANCE_OUTSIDE_SHARE, "written with at most 1 decimal")
    assert "off there, as written. But every score in this file is written with at most 1 decimal" in words
    assert "rounding itself" in words
    assert "rounding" not in texts.corp_band_reading(0.4, CHANCE_OUTSIDE_SHARE)
    assert "rounding" not in texts.corp_band_reading(0.1, CHANCE_OUTSIDE_SHARE, "written with at most 1 decimal")
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    for name, scores, caveat in (("rounded.csv", rounded, True), ("fine.csv", p, False)):
        data = pd.DataFrame({"p_gt50k": scores, "label": y}).to_csv(index=False).encode()
        at.file_uploader(key="data_upload").upload(name, data, "text/csv").run()
        at.switch_page(RELIABILITY).run()
        at.session_state["rel_corp_open"] = True
        at.run()
        assert not at.exception, at.exception
        loaded = at.session_state["pbr_loaded"].preds
        conf, out = M.confidence_and_outcome(loaded.p_positive, loaded.labels)   # p(y=1), as the page measures
        diagram = corp_reliability(conf, out)
        grid = "written with at most 1 decimal" if caveat else ""
        expected = texts.corp_band_reading(outside_band_share(diagram, conf), CHANCE_OUTSIDE_SHARE, grid)
        assert expected in _text(at), name
        at.switch_page("views/data.py").run()
