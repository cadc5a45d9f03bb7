"""Scores of exactly 0 or 1 that the file's rounding made (audit 8): an export writing "99.3%" turns every
confidence from 0.9995 up into "100.0%", and the test of calibration called 333 wrong answers at "100.0%"
impossible ("miscalibrated for certain") although the model had said 0.9995-0.99999988. Such rows are now
tested within their rounding (pbr_core.resolution, significance._within_rounding); float64 scores with no
evident rounding keep "for certain"."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pbr_core import load_predictions, resolution as R, significance as S
from pbr_core.cli import main
from pbr_core.metrics import confidence_and_outcome


def _near_one(rng: np.random.Generator, n: int, share: float = 0.8, over: float = 0.0):
    """Confidences: ``share`` of them near 1 (1 - 10^U(-7, -3.2), an LLM's), the rest in 0.3-0.99;
    outcomes drawn from them (``over``: the near-1 rows are right ``over`` less often than said)."""
    near = rng.uniform(size=n) < share
    c = np.where(near, 1 - 10 ** rng.uniform(-7, -3.2, n), rng.uniform(0.3, 0.99, n))
    y = (rng.uniform(size=n) < c - over * near).astype(float)
    return c, y


def _export(path, c, y) -> None:
    """An export with one decimal of a percent ("99.3%", "100.0%")."""
    lines = ["run_id,confidence,correct"] + [f"r{i},{100 * v:.1f}%,{'TRUE' if o else 'FALSE'}"
                                               for i, (v, o) in enumerate(zip(c, y))]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """600 rows, seeded, overconfident near 1: 2 % of the "100.0%" answers are wrong."""
    c, y = _near_one(np.random.default_rng(8), 600, over=0.02)
    path = tmp_path_factory.mktemp("export") / "llm_eval_export.csv"
    _export(path, c, y)
    return path


def test_the_export_is_tested_within_its_rounding_not_called_certain(export):
    preds = load_predictions(export)
    c, o = confidence_and_outcome(*preds.metric_inputs())
    wrong = int(np.sum((c >= 1) & (o < 1)))
    assert wrong > 0
    test = S.calibration_test(c, o)
    words = S.verdict(test)
    assert not test.method.startswith("certain") and "for certain" not in words
    assert test.rounded_rows == wrong
    assert words.startswith(f"the file gives probability 1 to {wrong:,} outcome")
    assert "rounded to 3 decimals" in words and "anything from 99.95 %" in words and "taken at 99.95 %" in words
    assert "miscalibrated beyond chance" in words  # a real test, and it finds the overconfidence
    # the loader's note, on the Data page and in evaluate's notes
    assert any(n.startswith("Confidences are written with one decimal of a percent: values of 100.0% stand for "
                            "anything from 99.95%") for n in preds.notes)
    # the streamed sums read the same rounding and move the same rows (their test is the analytic one;
    # in memory these 600 rows, sum p(1 - p) < 100, get Monte Carlo draws)
    from_sums = S.calibration_test_from_sums(S.calibration_sums(c, o))
    assert from_sums.rounding == test.rounding and from_sums.rounded_rows == wrong
    assert from_sums.p_value < S.ALPHA_TEST


def test_sums_of_batches_find_the_resolution_of_the_whole():
    rng = np.random.default_rng(3)
    c, y = _near_one(rng, 3000, over=0.01)
    c = np.round(c, 3)
    whole = S.calibration_sums(c, y)
    parts = sum(S.calibration_sums(c[i:i + 250], y[i:i + 250]) for i in range(0, 3000, 250))
    np.testing.assert_allclose(parts, whole, rtol=1e-9, atol=1e-6)
    a, b = S.calibration_test_from_sums(whole), S.calibration_test_from_sums(parts)
    assert a.rounding == b.rounding != "" and a.p_value == pytest.approx(b.p_value, rel=1e-6, abs=1e-12)


def test_float64_scores_of_exactly_one_that_were_wrong_are_still_certain():
    rng = np.random.default_rng(1)
    c = rng.uniform(0.5, 1, 500)
    c[:5] = 1.0
    y = (rng.uniform(size=500) < c).astype(float)
    y[:2] = 0
    assert R.resolution_of(c) is None
    assert S.verdict(S.calibration_test(c, y)).startswith("miscalibrated for certain: 2 outcomes")
    # a constant 0.5 beside them is no evidence of rounding (it lies on every grid)
    p = np.r_[np.zeros(50), np.full(50, 0.5)]
    y = np.r_[np.zeros(49), 1.0, np.zeros(25), np.ones(25)]
    assert S.calibration_test(p, y).method.startswith("certain")


def test_the_resolutions_read():
    rng = np.random.default_rng(0)
    u = rng.uniform(size=200)
    assert R.resolution_of(np.round(u, 3)).half_at_1 == pytest.approx(5e-4)
    assert R.resolution_of(u.astype(np.float32)).half_at_1 == pytest.approx(2.0 ** -25)
    assert R.resolution_of(u.astype(np.float32)).half_at_0 == 0.0   # a float32 0 is the model's
    nine = np.array([float(f"{v:.9g}") for v in u * 1e-3 + 0.99])  # "%.9g": 9 significant digits
    assert R.resolution_of(nine).half_at_1 == pytest.approx(5e-10)
    assert R.resolution_of(u) is None and R.resolution_of(np.round(u, 3)[:10]) is None  # too few values
    # multiples of 0.1 or 0.01 are as likely a model's own (a forest of 10 or 100 trees): no rounding read
    assert R.resolution_of(np.round(u, 2)) is None and R.resolution_of(np.round(u, 1)) is None
    assert R.resolution_of(np.maximum(np.round(u, 1), 1 - np.round(u, 1))) is None  # 0.6000000000000001


@pytest.mark.parametrize("n", [600, 4500])
def test_on_calibrated_rounded_files_the_test_holds_its_level(n):
    """Known truth: outcomes drawn from the confidences, written with one decimal of a percent. The
    test with the "100.0%" rows within their rounding claims "miscalibrated" at most ALPHA_TEST + noise
    (with them at the edge 0.9995 always, 35 of 40 calibrated files of 50,000 rows were called so)."""
    rng = np.random.default_rng(n)
    trials = 120
    claimed = 0
    for t in range(trials):
        c, y = _near_one(rng, n)
        test = S.calibration_test(np.round(c, 3), y, seed=t)
        assert not test.method.startswith("certain")
        claimed += test.p_value < S.ALPHA_TEST
    # binomial upper tail: at most ALPHA_TEST plus 2.5 standard errors
    assert claimed <= trials * S.ALPHA_TEST + 2.5 * np.sqrt(trials * S.ALPHA_TEST * (1 - S.ALPHA_TEST)), claimed


def test_a_real_overconfidence_near_one_is_still_found():
    """The "100.0%" answers right 1.5 points less often than said (and rounded): found in most files."""
    rng = np.random.default_rng(11)
    found = sum(S.calibration_test(np.round(c, 3), y, seed=t).p_value < S.ALPHA_TEST
                for t, (c, y) in enumerate(_near_one(rng, 2000, over=0.015) for _ in range(30)))
    assert found >= 27, found


def test_evaluate_text_and_json(export, capsys):
    assert main(["evaluate", str(export)]) == 0
    text = capsys.readouterr().out
    assert "for certain" not in text
    assert "the file gives probability 1 to" in text and "miscalibrated beyond chance" in text
    assert "Confidences are written with one decimal of a percent" in text
    assert main(["evaluate", str(export), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    row = out[0] if isinstance(out, list) else out
    assert row["calibration_verdict"].startswith("the file gives probability 1 to")
    assert row["calibration_test"] == "analytic" or row["calibration_test"].startswith("Monte Carlo")


def _rounded_multiclass(path) -> int:
    """Review 9: 2,000 rows of 3 classes written with 3 decimals (422 rows then do not sum to 1), 3 of the
    "1.000" rows wrong. Returns how many rows were wrong at 1.000."""
    rng = np.random.default_rng(0)
    n, K = 2000, 3
    z = rng.normal(size=(n, K)) * 4
    p = np.exp(z)
    p /= p.sum(1, keepdims=True)
    y = np.array([rng.choice(K, p=q) for q in p])
    written = np.round(p, 3)
    at1 = np.flatnonzero(written.max(1) >= 1)[:3]
    y[at1] = (written[at1].argmax(1) + 1) % K
    frame = {name: written[:, k] for k, name in enumerate("abc")}
    import pandas as pd
    pd.DataFrame({**frame, "label": np.array(list("abc"))[y]}).to_csv(path, index=False)
    return at1.size


def test_a_renormalised_multiclass_file_keeps_its_rounding(tmp_path, capsys):
    """Review 9: a 3-decimal multiclass file is refused until renormalize=True, whose division moves the
    values off the 10^-3 grid: no rounding was read, and its wrong "1.000" rows (still exactly 1) read
    "miscalibrated for certain: 3 outcomes happened that the model gave probability 0". The rounding is now
    read from the values as written (Predictions.row_sums_as_written), in memory, in groups and streamed."""
    from pbr_core import groups as G
    from pbr_core.stream import compute_statistics, open_dataset

    path = tmp_path / "rounded_3_classes.csv"
    wrong = _rounded_multiclass(path)
    preds = load_predictions(path, renormalize=True)
    assert preds.row_sums_as_written is not None and R.resolution_of(preds.probs) is None
    assert R.resolution_of(preds.as_written(preds.probs)).decimals == 3
    assert any(n.startswith("Probabilities are written with 3 decimals: values of 1.000 stand for anything from "
                            "0.9995") for n in preds.notes)
    c, o = confidence_and_outcome(preds.probs, preds.labels)
    assert S.calibration_test(c, o).method.startswith("certain")          # the values alone: off the grid
    test = S.calibration_test(c, o, written=preds.as_written(c))
    assert test.rounded_rows == wrong and "rounded to 3 decimals" in test.rounding
    assert "for certain" not in S.verdict(test)
    # a subset keeps the sums as written; new probabilities are not the file's
    half = preds.subset(np.arange(0, preds.n, 2))
    np.testing.assert_array_equal(half.row_sums_as_written, preds.row_sums_as_written[::2])
    assert preds.with_probs(preds.probs).row_sums_as_written is None
    # groups and the streamed sums read the same rounding
    report = G.calibration_by_group(preds, G.PREDICTED_CLASS, n_boot=20)
    assert not report.table.test_method.str.startswith("certain").any() and report.table.rounded_rows.sum() == wrong
    stats = compute_statistics(open_dataset(path, renormalize=True, batch_rows=300), n_boot=20)
    streamed = stats.calibration_test()
    assert streamed.rounded_rows == wrong and streamed.rounding == test.rounding
    # the CLI
    assert main(["evaluate", str(path), "--renormalize"]) == 0
    text = capsys.readouterr().out
    assert "for certain" not in text and "the file gives probability 1 to 3 outcomes" in text


def test_fit_and_apply_s_held_out_test_reads_the_rounding_as_written(tmp_path):
    """Review 9's leftover: Fit & apply's held-out test of the model before recalibration
    (evaluation.measured_calibration_test through experiments.runs) read the rounding from the
    renormalised values, so a 3-decimal multiclass file's wrong "1.000" rows read "for certain" there while
    the Reliability page tested them within the rounding. The held-out rows keep their row sums as written."""
    from pbr_core.evaluation import measured_calibration_test
    from pbr_core.experiments import FitSettings
    from pbr_core.experiments.runs import run_fit

    path = tmp_path / "rounded_3_classes.csv"
    wrong = _rounded_multiclass(path)
    preds = load_predictions(path, renormalize=True)
    plain = measured_calibration_test(preds.probs, preds.labels, preds.kind)
    read = measured_calibration_test(preds.probs, preds.labels, preds.kind, row_sums_as_written=preds.row_sums_as_written)
    assert plain.method.startswith("certain") and read.rounded_rows == wrong and not read.method.startswith("certain")
    run = run_fit(preds, FitSettings(method="temperature", holdout=0.5, seed=0))
    assert run.tests is not None and not run.tests[0].method.startswith("certain")
    held = preds.subset(np.setdiff1d(np.arange(preds.n), run.fit_rows))
    c, o = confidence_and_outcome(held.probs, held.labels)
    assert run.tests[0].rounded_rows == S.calibration_test(c, o, written=held.as_written(c)).rounded_rows
