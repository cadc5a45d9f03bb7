"""The fingerprint of a recalibrator's fit rows (pbr_core.fit_rows): saved, loaded, checked, and why it
matters (a check on the fit rows flatters a recalibrator: measured here with known probabilities)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import pbr_core
from pbr_core import Predictions
from pbr_core.cli import main
from pbr_core.experiments.runs import run_apply
from pbr_core.fit_rows import FitRows, FitSketch, HASH_NAME, prediction_hashes, row_hashes
from pbr_core.loading import load_predictions, save_predictions
from pbr_core.recalibrators import (PlattScaling, RecalibratorFileError, TemperatureScaling, get_recalibrator,
                                    load_recalibrator)


def _binary(n: int, seed: int, decimals: int | None = None) -> Predictions:
    """An over-confident model's scores of y ~ Bernoulli(p), p ~ Beta(2, 2) (its true probabilities)."""
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 2, n)
    s = 1 / (1 + np.exp(-1.8 * np.log(p / (1 - p))))
    if decimals is not None:
        s = np.round(s, decimals)
    return Predictions.from_arrays(s, (rng.random(n) < p).astype(int))


def _joined(a: Predictions, b: Predictions) -> Predictions:
    return Predictions.from_arrays(np.r_[a.probs[:, 1], b.probs[:, 1]], np.r_[a.labels, b.labels])


def test_the_hash_is_vectorised_and_tells_rows_apart() -> None:
    rng = np.random.default_rng(0)
    z = rng.random((1000, 3))
    h = row_hashes(z, np.zeros(1000, dtype=int))
    assert h.dtype == np.uint64 and len(np.unique(h)) == 1000
    assert np.array_equal(h, row_hashes(z.copy(), np.zeros(1000, dtype=int)))
    assert not np.any(h == row_hashes(z, np.ones(1000, dtype=int)))          # the label counts
    assert not np.any(h == row_hashes(z[:, ::-1], np.zeros(1000, dtype=int)))  # so does the column order
    assert row_hashes(np.array([[-0.0, 1.0]]), [0])[0] == row_hashes(np.array([[0.0, 1.0]]), [0])[0]


def test_the_fingerprint_round_trips_through_save_and_load(tmp_path) -> None:
    preds = _binary(500, 1, decimals=2)  # repeated rows: the counts are saved too
    rec = PlattScaling().fit(preds)
    doc = rec.to_dict()
    field = doc["fit_rows"]
    assert field["hash"] == HASH_NAME and field["n_rows"] == 500 and field["repeats"] is not None
    back = load_recalibrator(rec.save(tmp_path / "p.json"))
    assert np.array_equal(back.fit_rows_.hashes, rec.fit_rows_.hashes)
    assert np.array_equal(back.fit_rows_.counts, rec.fit_rows_.counts) and back.fit_rows_.counts.sum() == 500
    assert back.to_dict() == doc
    # Distinct rows: no counts written (each once).
    assert TemperatureScaling().fit(_binary(300, 2)).to_dict()["fit_rows"]["repeats"] is None


def test_a_check_on_fit_rows_and_new_rows_measures_on_the_new_rows() -> None:
    a, b = _binary(400, 3), _binary(600, 4)
    rec = PlattScaling().fit(a)
    check = rec.fit_row_overlap(_joined(a, b))
    assert (check.state, check.n_identified, check.n_possible, check.n_other) == ("some", 400, 0, 600)
    assert np.array_equal(np.flatnonzero(check.mask), np.arange(400))
    run = run_apply(_joined(a, b), rec)
    assert run.n_eval == 600 and not run.in_sample and run.tests is not None
    assert run.after["ece"] == pytest.approx(pbr_core.ece(rec.predict_proba(b)[:, 1], b.labels), rel=1e-12)


def test_a_check_on_other_rows_finds_none_and_one_on_the_fit_rows_is_in_sample() -> None:
    a, b = _binary(400, 5), _binary(600, 6)
    rec = PlattScaling().fit(a)
    assert rec.fit_row_overlap(b).state == "none" and rec.fit_row_overlap(b).n_excluded == 0
    assert rec.fit_row_overlap(a).state == "all"
    run = run_apply(a, rec)
    assert run.in_sample and run.tests is None and run.worse_shown is None and run.n_eval == 400


def test_identical_rows_are_never_called_the_fit_rows() -> None:
    """Scores rounded to 1 decimal (20 different rows): new rows share values with the fit rows by
    chance, so matches only may be fit rows, and are kept (leaving them out would pick rows by label)."""
    a, b = _binary(300, 7, decimals=1), _binary(1000, 8, decimals=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scores rounded to exactly 0 or 1: Platt's warning, not this test's
        rec = PlattScaling().fit(a)
    check = rec.fit_row_overlap(b)
    assert check.n_identified == 0 and 0 < check.n_possible <= 300 and check.n_matched_repeated > 250
    assert check.n_distinct <= 22 and check.state == "shared" and check.n_excluded == 0
    assert check.rows_to_measure() is None and not check.contains
    from dashboard.texts import fit_rows_check

    words = fit_rows_check(check, 144)
    assert "may have been used" in words and "cannot tell them from new rows with the same values" in words
    assert "It keeps them: leaving them out would pick rows by their label" in words
    assert "measured on all 1,000 rows" in words and "the figures below flatter it" in words
    assert "are rows it was fitted on" not in words
    # 4 decimals, 500 fit rows, 1,500 new rows: once-seen values match by chance (Good-Turing), so not "identified".
    a4, b4 = _binary(500, 9, decimals=4), _binary(1500, 10, decimals=4)
    check = PlattScaling().fit(a4).fit_row_overlap(b4)
    assert check.n_identified == 0 and check.chance_matches > 0.05 * check.n_matched and check.state == "shared"


def _discrete_calibrated(n: int, rng: np.random.Generator, decimals: int = 2) -> Predictions:
    """A calibrated model whose scores repeat: s = p rounded to ``decimals``, y ~ Bernoulli(s)."""
    s = np.clip(np.round(rng.beta(2, 2, n), decimals), 0.01, 0.99)
    return Predictions.from_arrays(s, (rng.random(n) < s).astype(int))


def test_new_rows_with_repeated_scores_are_all_measured(capsys, tmp_path) -> None:
    """Audit 8: on new rows (disjoint from the fit rows) whose scores repeat, the check left out min(c, f)
    rows of each value, which are those of the label the fit rows hold more of: on the fraud file's
    disjoint Q2 it measured 2,502 of 4,071 rows (base rate 0.315 against 0.232). Now every new row is
    measured, and the ECE before / after are those of the whole file."""
    rng = np.random.default_rng(20)
    a, b = _discrete_calibrated(500, rng), _discrete_calibrated(1500, rng)
    rec = PlattScaling().fit(a)
    check = rec.fit_row_overlap(b)
    assert check.n_possible == 480 and check.n_excluded == 0 and check.state == "shared"  # before: 1,020 rows measured
    run = run_apply(b, rec)
    assert run.n_eval == 1500 and not run.in_sample and run.tests is not None
    assert run.before["ece"] == pytest.approx(pbr_core.ece(b.probs[:, 1], b.labels), rel=1e-12)
    assert run.after["ece"] == pytest.approx(pbr_core.ece(rec.predict_proba(b)[:, 1], b.labels), rel=1e-12)
    # pbr-calib apply: the same rows, and the kept rows said to be kept.
    fit_file, new_file, model = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "p.json"
    save_predictions(a, path_or_buffer=fit_file)
    save_predictions(b, path_or_buffer=new_file)
    assert main(["fit", str(fit_file), "--method", "platt", "--out", str(model), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["apply", str(model), str(new_file), "--out", str(tmp_path / "o.csv")]) == 0
    out = capsys.readouterr().out
    saved = load_recalibrator(model)
    before, after = pbr_core.ece(b.probs[:, 1], b.labels), pbr_core.ece(saved.predict_proba(b)[:, 1], b.labels)
    assert f"applied platt to 1500 rows of b.csv: ECE {before:.4f} -> {after:.4f}" in out
    assert "480 rows may be rows it was fitted on" in out and "leaving them out would pick rows by their label" in out
    assert "kept in the ECE (if some were fit rows, the ECE above flatters it)" in out


def test_a_check_on_new_rows_calls_a_calibrated_model_miscalibrated_at_its_level() -> None:
    """Known truth: a calibrated model with scores to 2 decimals (s = round(p, 2), y ~ Bernoulli(s)), Platt
    fitted on 500 rows, checked on 1,000 new rows, 200 files: the test of calibration of the model before
    recalibration says "miscalibrated beyond chance" (p < ALPHA_TEST = 0.035) in 5 of 200 files (2.5 %); with
    the possible fit rows left out (as before) it said so in 59 of 200 (29.5 %), on 541 rows kept of 1,000 on
    average (a scratch run). Counted here on the first 100 files: 3 now, 29 before."""
    from pbr_core.fit_rows import FitRows, overlap
    from pbr_core.significance import ALPHA_TEST, calibration_test

    said = 0
    for i in range(100):
        rng = np.random.default_rng(100 + i)
        a, b = _discrete_calibrated(500, rng), _discrete_calibrated(1000, rng)
        rows = overlap(FitRows.of(a), b).rows_to_measure()  # None now: every new row
        measured = b if rows is None else b.subset(rows)
        said += calibration_test(measured.probs[:, 1], measured.labels).p_value < ALPHA_TEST
    assert said <= 8, said  # 3.5 expected at the level; binomial(100, 0.035) exceeds 8 with chance 1.3 %


def _tree(n: int, rng: np.random.Generator) -> Predictions:
    """A tree-like model: 24 leaves, each a score row; y ~ its leaf's probability (3 classes)."""
    leaves = np.random.default_rng(0).dirichlet(np.ones(3) * 0.7, 24)
    leaf = rng.choice(24, n, p=np.random.default_rng(1).dirichlet(np.ones(24) * 2))
    probs = leaves[leaf]
    labels = (rng.random(n)[:, None] > np.cumsum(probs, axis=1)).sum(axis=1)
    return Predictions.from_arrays(np.round(probs, 4), labels)


def test_a_file_that_holds_its_fit_rows_is_said_to_and_is_not_tested_on_them(capsys, tmp_path) -> None:
    """Fit on A, check on A (a tree's 24 score rows): the file appears to be its fit rows (every value as
    often as among them: new rows would do that with a probability below 1 in a million); in-sample, no
    test. Checked on A and B together (B half A's size): f rows of each fit value are left out, which
    leaves exactly B's values, so the figures are B's."""
    rng = np.random.default_rng(21)
    a, b = _tree(2000, rng), _tree(1000, rng)
    rec = TemperatureScaling().fit(a)
    check = rec.fit_row_overlap(a)
    assert check.contains and check.chance_contains < 1e-6 and check.state == "all" and check.n_identified == 0
    run = run_apply(a, rec)
    assert run.in_sample and run.tests is None and run.worse_shown is None
    from dashboard.texts import fit_rows_check

    words = fit_rows_check(check, 144)
    assert "This check is in-sample" in words and "This file appears to be the 2,000 rows it was fitted on" in words
    both = Predictions.from_arrays(np.r_[a.probs, b.probs], np.r_[a.labels, b.labels])
    check = rec.fit_row_overlap(both)
    assert check.contains and check.state == "some" and check.n_excluded == 2000 and check.n_other == 1000
    run = run_apply(both, rec)
    assert run.n_eval == 1000 and run.tests is not None
    assert run.after["ece"] == pytest.approx(pbr_core.ece(rec.predict_proba(b), b.labels), rel=1e-12)
    assert run.before["ece"] == pytest.approx(pbr_core.ece(b.probs, b.labels), rel=1e-12)
    words = fit_rows_check(check, 144)
    assert "These rows include the rows it was fitted on" in words and "leaves exactly the values of the other 1,000" in words
    # New rows of the same tree: kept, all measured.
    assert rec.fit_row_overlap(b).state == "shared"
    # The CLI: no ECE on the fit rows, and why.
    fit_file = tmp_path / "a.csv"
    save_predictions(a, path_or_buffer=fit_file)
    model = tmp_path / "t.json"
    assert main(["fit", str(fit_file), "--method", "temperature", "--out", str(model), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["apply", str(model), str(fit_file), "--out", str(tmp_path / "o.csv")]) == 0
    out = capsys.readouterr().out
    assert "ECE not measured: in-sample: this file appears to be the 2000 rows it was fitted on" in out
    assert "->" not in out


@pytest.mark.parametrize("make,ratios", [
    (lambda n, rng: _tree(n, rng), (1.0, 1.5)),
    (lambda n, rng: _discrete_calibrated(n, rng, 2), (1.0, 1.5, 2.0)),
])
def test_containment_is_rarely_found_in_new_rows_and_found_in_files_that_hold_the_fit_rows(make, ratios) -> None:
    """Known truth, 500 fit rows of a tree (24 score rows) or of 2-decimal scores (about 100 values): files
    of new rows 1x, 2x, 5x, 10x the fit's size (15 each) hold every fit value at least as often by chance
    in 0, 0, 9, 10 of 15 (tree) and 0, 0, 0, 11 of 15 (2 decimals), but none is said to contain them
    (estimated chance <= 1 %; at most 2 of 60 allowed); a file holding the fit rows and new rows (1x-1.5x
    the fit's size for the tree, 1x-2x for 2 decimals) is found in every one of 20."""
    from pbr_core.fit_rows import FitRows, overlap

    said, holds = 0, 0
    for i in range(60):
        rng = np.random.default_rng(300 + i)
        a = make(500, rng)
        fit = FitRows.of(a)
        new = make(int(500 * (1.0, 2.0, 5.0, 10.0)[i % 4]), rng)
        check = overlap(fit, new)
        said += check.contains
        holds += check.holds_all
        if i < 20:
            extra = int(500 * (ratios[i % len(ratios)] - 1))
            if extra:
                b = make(extra, rng)
                both = Predictions.from_arrays(np.r_[a.probs, b.probs], np.r_[a.labels, b.labels])
            else:
                both = a
            assert overlap(fit, both).contains, (i, ratios[i % len(ratios)])
    assert said <= 2, (said, holds)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_file_written_and_read_again_hashes_as_the_fit_saw_it(tmp_path, fmt) -> None:
    """save_predictions writes logits as probabilities, and the loader divides every row by its sum
    (one float64 step on 258 of 9,090 KITTI rows): the hash of float32 probabilities survives both."""
    from pathlib import Path

    root = Path(pbr_core.__file__).resolve().parent.parent / "sample_data"
    for name in ("cifar10_resnet110.npz", "kitti_multiclass_random_forest.csv", "kitti_mlp.parquet"):
        preds = load_predictions(root / name)
        path = tmp_path / f"x.{fmt}"
        save_predictions(preds, path_or_buffer=path)
        again = load_predictions(path)
        assert np.array_equal(prediction_hashes(preds), prediction_hashes(again)), name
        rec = TemperatureScaling().fit(preds.subset(np.arange(1000)))
        assert rec.fit_row_overlap(again).n_excluded == 1000, name


def test_old_files_and_files_saved_without_fit_rows_say_not_recorded(tmp_path) -> None:
    preds = _binary(400, 11)
    rec = PlattScaling().fit(preds)
    path = rec.save(tmp_path / "p.json", fit_rows=False)
    doc = json.loads(path.read_text())
    assert "fit_rows" not in doc and doc["format_version"] == 1  # what a version-1 file always was
    back = load_recalibrator(path)
    assert back.fit_rows_ is None and back.fit_row_overlap(preds).state == "not recorded"
    assert run_apply(preds, back).n_eval == 400  # measured on every row, and the front ends say they cannot tell


@pytest.mark.parametrize("change,message", [
    (lambda f: "x", "fit_rows must be a group of the fields"),
    (lambda f: {**f, "hash": "md5"}, 'fit_rows.hash must be the text "splitmix64'),
    (lambda f: {**f, "n_rows": -3}, "fit_rows.n_rows must be a whole number of at least 1"),
    (lambda f: {**f, "n_rows": 10}, "fit_rows.hashes must hold at most 10 distinct hashes"),
    (lambda f: {**f, "hashes": "not base64!"}, "fit_rows.hashes must be a base64 text"),
    (lambda f: {**f, "hashes": "AAAA"}, "fit_rows.hashes must hold a whole number of 8-byte values"),
    (lambda f: {**f, "repeats": "AQAAAA=="}, "fit_rows.repeats must hold pairs (position, count)"),
    (lambda f: {**f, "repeats": "AQAAAAEAAAA="}, "fit_rows.repeats must hold pairs (position of one of the"),
    (lambda f: {**f, "extra": 1}, "fit_rows must be a group of the fields"),
    (lambda f: {**f, "resolution": 6}, 'fit_rows.resolution must be a group of the fields "decimals"'),
    (lambda f: {**f, "resolution": {"decimals": 12, "digits": None, "float32": False}},
     "fit_rows.resolution.decimals must be null or a whole number from 1 to 9"),
    (lambda f: {**f, "resolution": {"decimals": None, "digits": True, "float32": False}},
     "fit_rows.resolution.digits must be null or a whole number"),
    (lambda f: {**f, "resolution": {"decimals": None, "digits": None, "float32": "no"}},
     "fit_rows.resolution.float32 must be true or false"),
])
def test_a_damaged_fit_rows_field_is_refused_and_named(tmp_path, change, message) -> None:
    doc = PlattScaling().fit(_binary(300, 12)).to_dict()
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**doc, "fit_rows": change(doc["fit_rows"])}))
    with pytest.raises(RecalibratorFileError) as info:
        load_recalibrator(path)
    assert str(info.value).startswith(f"{path}: Damaged 'platt' recalibrator file: ") and message in str(info.value)


def test_unsorted_hashes_are_refused(tmp_path) -> None:
    import base64

    doc = PlattScaling().fit(_binary(300, 13)).to_dict()
    raw = np.frombuffer(base64.b64decode(doc["fit_rows"]["hashes"]), dtype="<u8")[::-1]
    doc["fit_rows"]["hashes"] = base64.b64encode(raw.tobytes()).decode()
    path = tmp_path / "u.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(RecalibratorFileError, match="in increasing order"):
        load_recalibrator(path)


def test_beyond_the_cap_a_bottom_k_sample_estimates_the_overlap() -> None:
    """A cap of 1,000 distinct rows on a fit of 5,000: the same sample whatever the parts it was built
    from (a streamed fit's chunks), and the overlap with a file holding 2,000 fit rows is estimated."""
    rng = np.random.default_rng(14)
    z, y = rng.random((5000, 2)), rng.integers(0, 2, 5000)
    h = row_hashes(z, y)
    whole = FitRows.of_hashes(h, cap=1000)
    parts = FitSketch(1000)
    for chunk in np.array_split(h, 7):
        parts.add(chunk)
    assert np.array_equal(parts.result().hashes, whole.hashes) and not whole.complete and whole.n_rows == 5000
    from pbr_core.fit_rows import overlap

    checked = Predictions.from_arrays(np.r_[rng.random(3000), np.ones(0)], rng.integers(0, 2, 3000))
    assert overlap(whole, checked).state == "none"


def test_streamed_fits_record_the_same_fit_rows_as_a_fit_in_memory(tmp_path) -> None:
    preds = _binary(2000, 15)
    path = tmp_path / "rows.csv"
    save_predictions(preds, path_or_buffer=path)
    for method in ("temperature", "platt"):
        model = tmp_path / f"{method}.json"
        assert main(["fit", str(path), "--method", method, "--all-rows", "--out", str(model), "--quiet"]) == 0
        streamed = load_recalibrator(model)
        in_memory = get_recalibrator(method).fit(load_predictions(path))
        assert np.array_equal(streamed.fit_rows_.hashes, in_memory.fit_rows_.hashes), method
        assert streamed.fit_row_overlap(load_predictions(path)).state == "all"


def test_calibrated_model_records_its_fit_rows(tmp_path) -> None:
    from sklearn.linear_model import LogisticRegression

    from pbr_core import CalibratedModel

    rng = np.random.default_rng(16)
    X = rng.normal(size=(900, 3))
    y = (rng.random(900) < 1 / (1 + np.exp(-X[:, 0]))).astype(int)
    model = LogisticRegression().fit(X[:300], y[:300])
    clf = CalibratedModel(model, PlattScaling()).fit(X[300:600], y[300:600])
    doc = json.loads(clf.save(tmp_path / "c.json").read_text())
    assert doc["fit_rows"]["n_rows"] == 300
    assert "fit_rows" not in json.loads(clf.save(tmp_path / "d.json", fit_rows=False).read_text())
    scores = Predictions.from_arrays(model.predict_proba(X[300:900]), y[300:900])
    assert clf.recalibrator_.fit_row_overlap(scores).n_identified == 300


def test_apply_measures_on_the_rows_it_was_not_fitted_on(capsys, tmp_path) -> None:
    a, b = _binary(400, 17), _binary(600, 18)
    fit_file, check_file = tmp_path / "a.csv", tmp_path / "ab.csv"
    save_predictions(a, path_or_buffer=fit_file)
    save_predictions(_joined(a, b), path_or_buffer=check_file)
    model = tmp_path / "p.json"
    assert main(["fit", str(fit_file), "--method", "platt", "--out", str(model), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["apply", str(model), str(check_file), "--out", str(tmp_path / "o.csv")]) == 0
    out = capsys.readouterr().out
    rec = load_recalibrator(model)
    new = load_predictions(check_file).subset(np.arange(400, 1000))
    after = pbr_core.ece(rec.predict_proba(new)[:, 1], new.labels)
    assert "; ECE on the 600 rows it was not fitted on: ECE " in out and f"-> {after:.4f}" in out
    assert "fit rows: 400 of these 1000 rows are rows it was fitted on" in out
    # On its own fit rows: in-sample, no ECE.
    assert main(["apply", str(model), str(fit_file), "--out", str(tmp_path / "o.csv")]) == 0
    out = capsys.readouterr().out
    assert "ECE not measured: in-sample: 400 of these 400 rows are rows it was fitted on" in out and "->" not in out
    # Other rows: measured on all of them, and said.
    save_predictions(b, path_or_buffer=tmp_path / "b.csv")
    assert main(["apply", str(model), str(tmp_path / "b.csv"), "--out", str(tmp_path / "o.csv")]) == 0
    assert ("fit rows: none of these 600 rows has exactly the scores and label of one of the 400 rows it was fitted "
            "on") in capsys.readouterr().out
    # --no-fit-rows: nothing recorded, and apply says it cannot tell.
    assert main(["fit", str(fit_file), "--method", "platt", "--out", str(model), "--quiet", "--no-fit-rows"]) == 0
    assert "fit_rows" not in json.loads(model.read_text())
    capsys.readouterr()
    assert main(["apply", str(model), str(fit_file), "--out", str(tmp_path / "o.csv")]) == 0
    assert "fit rows: not recorded in" in capsys.readouterr().out


@pytest.mark.parametrize("method", ["platt", "histogram_binning"])
def test_a_check_on_the_fit_rows_is_optimistic_and_is_no_longer_reported(method) -> None:
    """Known truth: an over-confident model (scores sigmoid(1.8 logit p), y ~ Bernoulli(p)), a
    recalibrator fitted on 300 rows, its ECE on those rows against 300 fresh rows of the same
    probabilities, 200 files. Platt: in-sample 0.0373 on average against 0.0546 fresh (lower in 147 of
    200 files); histogram binning: 0.0000 against 0.0564 (every file: its bins are the ECE's). run_apply, given the fit rows and
    the fresh rows together, measures on the fresh rows: its figure is the fresh one, not the in-sample."""
    in_sample, fresh, reported = [], [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(200):
            a, b = _binary(300, 1000 + 2 * i), _binary(300, 1001 + 2 * i)
            rec = get_recalibrator(method).fit(a)
            in_sample.append(pbr_core.ece(rec.predict_proba(a)[:, 1], a.labels))
            fresh.append(pbr_core.ece(rec.predict_proba(b)[:, 1], b.labels))
            if i < 20:  # the check of a and b together reports b's figure
                reported.append(run_apply(_joined(a, b), rec).after["ece"])
    in_sample, fresh = np.array(in_sample), np.array(fresh)
    gap = fresh.mean() - in_sample.mean()
    assert gap > (0.015 if method == "platt" else 0.05), (in_sample.mean(), fresh.mean())
    assert np.mean(in_sample < fresh) > (0.65 if method == "platt" else 0.99)
    np.testing.assert_allclose(reported, fresh[:20], rtol=1e-12)


def test_rows_written_with_fewer_decimals_than_the_fit_rows_cannot_be_told(capsys, tmp_path) -> None:
    """Platt fitted on 500 float64 rows, checked on the same rows written with 6 decimals: 13 rows happen to
    keep their float32 value, and the check said "some" (13 fit rows, measured on the other 487) though all
    500 are fit rows; with 3 decimals none matched and it said "none". Both now say it cannot tell, and
    measure on every row. The fit's own decimals, and float32 exports, are still recognised."""
    rng = np.random.default_rng(0)
    p = rng.beta(2, 2, 500)
    y = (rng.random(500) < p).astype(int)
    rec = PlattScaling().fit(Predictions.from_arrays(p, y))
    assert rec.to_dict()["fit_rows"]["resolution"] == {"decimals": None, "digits": None, "float32": False}
    for d in (3, 6, 9):
        check = rec.fit_row_overlap(Predictions.from_arrays(np.round(p, d), y))
        assert check.coarser and check.state == "coarser" and check.rows_to_measure() is None
        assert run_apply(Predictions.from_arrays(np.round(p, d), y), rec, check=check).n_eval == 500
    assert rec.fit_row_overlap(Predictions.from_arrays(p, y)).state == "all"
    # Fitted on 6 decimals: the same file is recognised; 4 decimals is coarser; 8 decimals of it is the same grid.
    r6 = PlattScaling().fit(Predictions.from_arrays(np.round(p, 6), y))
    assert r6.fit_rows_.resolution.decimals == 6
    assert r6.fit_row_overlap(Predictions.from_arrays(np.round(p, 6), y)).state == "all"
    assert r6.fit_row_overlap(Predictions.from_arrays(np.round(p, 4), y)).state == "coarser"
    # A file of new rows written as finely as the fit's: an ordinary check, not "cannot tell".
    q = rng.beta(2, 2, 500)
    assert r6.fit_row_overlap(Predictions.from_arrays(np.round(q, 6), y)).state in ("none", "shared")
    # The CLI: measured on all 500 rows, and why it cannot tell.
    model = rec.save(tmp_path / "p.json")
    assert load_recalibrator(model).fit_rows_.resolution == rec.fit_rows_.resolution
    csv = tmp_path / "r6.csv"
    csv.write_text("p,label\n" + "".join(f"{v:.6f},{t}\n" for v, t in zip(p, y)))
    capsys.readouterr()
    assert main(["apply", str(model), str(csv), "--out", str(tmp_path / "o.csv")]) == 0
    out = capsys.readouterr().out
    assert "ECE on the" not in out and "-> " in out
    assert ("fit rows: cannot tell: these rows are written with fewer decimals than the rows it was fitted on "
            "(6 decimals here, full precision in the fit), so its fit rows would not be recognised; ECE on all 500 "
            "rows") in out


def test_files_without_the_resolution_still_load_and_check_as_before(tmp_path) -> None:
    preds = _binary(400, 21)
    doc = PlattScaling().fit(preds).to_dict()
    del doc["fit_rows"]["resolution"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    back = load_recalibrator(path)
    assert back.fit_rows_.resolution is None
    assert back.fit_row_overlap(preds).state == "all"
    assert back.fit_row_overlap(Predictions.from_arrays(np.round(preds.probs[:, 1], 6), preds.labels)).state != "coarser"


def test_streamed_fits_record_the_resolution_of_their_rows(tmp_path) -> None:
    from pbr_core.fit_rows import FitSketch as Sketch

    preds = _binary(600, 22, decimals=5)
    whole = FitRows.of(preds)
    parts = Sketch()
    for lo in range(0, 600, 250):
        part = preds.subset(np.arange(lo, min(lo + 250, 600)))
        parts.add(prediction_hashes(part), part.probs)
    assert parts.result().resolution == whole.resolution and whole.resolution.decimals == 5
    assert Sketch().add(prediction_hashes(preds)).result().resolution is None  # no probabilities: not recorded


def test_chance_words_is_one_format() -> None:
    from pbr_core.fit_rows import chance_words

    assert chance_words(0.012) == "about 1.2 %"  # "1%" beside a 1 % limit read as at, not above, it
    assert chance_words(0.45) == "about 45 %"
    assert chance_words(1 / 363_000) == "about 1 in 360,000"
    assert chance_words(1e-9) == "below 1 in a million"


def test_a_sampled_fingerprint_s_none_says_what_its_sample_checked(capsys) -> None:
    """A sample of 20 of 2,000 fit rows checked against 1,000 new rows: no match among the rows the sample can
    check, which bounds the fit rows at about 3 n / checked (95 %), hundreds here: both front ends say that
    bound, not "none of these rows is one it was fitted on" (CLI) or "Almost certainly not" (the page)."""
    from dashboard import texts
    from pbr_core.cli.apply import _measured_ece

    rec = PlattScaling().fit(_binary(2000, 31))
    rec.fit_rows_ = FitRows.of(_binary(2000, 31), cap=20)
    new = _binary(1000, 32)
    check = rec.fit_row_overlap(new)
    assert check.verdict(100) == "none of the sample" and check.n_checkable < 1000
    bound = f"{check.bound_if_none:,.0f}"
    assert check.bound_if_none > 100  # hundreds of the 1,000 rows
    words = texts.fit_rows_check(check, 100)
    assert (f"None of the {check.n_checkable:,} of these rows that its file's sample of its 2,000 fit rows can check "
            f"is a fit row; at most about {bound} of the 1,000 can be (95 %)") in words
    assert "Almost certainly not" not in words
    _measured_ece(rec, new, new.with_probs(rec.predict_proba(new)), "m.json")
    out = capsys.readouterr().out
    assert (f"fit rows: none of the {check.n_checkable} rows its sample of 2,000 fit rows can check is a fit row; "
            f"at most about {bound} of the 1000 can be (95 %)") in out
    assert "none of these 1000 rows" not in out
