"""pbr-calib evaluate / fit / apply on datasets (folders, globs), through main([...])."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core.cli import EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE, main
from pbr_core.recalibrators import load_recalibrator
from stream_testdata import write_parts

SCORES = [f"c{k}" for k in range(10)]


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_evaluate_a_glob_streams_with_the_in_memory_numbers(capsys, cifar10_parts, cifar10_frame) -> None:
    code, out, _ = run(capsys, "evaluate", cifar10_parts / "*.parquet", "--format", "json", "--curve", "--n-bins", "15",
                       "--quiet")
    assert code == EXIT_OK
    t = json.loads(out)
    probs, labels = cifar10_frame[SCORES].to_numpy(), cifar10_frame["label"].to_numpy()
    assert (t["n"], t["files"], t["K"], t["kind"], t["optimal_n_bins"]) == (10000, 4, 10, "multiclass", 21)
    assert t["ece"] == pytest.approx(pbr_core.ece(probs, labels, n_bins=21), abs=1e-12)
    assert t["ece_at_n_bins"] == pytest.approx(pbr_core.ece(probs, labels, n_bins=15), abs=1e-12)
    assert t["brier"] == pytest.approx(pbr_core.brier_score(probs, labels), abs=1e-12)
    curve = np.array([t["ece_curve"][str(b)] for b in range(1, 201)])
    np.testing.assert_allclose(curve, pbr_core.ece_curve(probs, labels), rtol=0, atol=1e-12)
    assert t["ece_ci_low"] <= t["ece"] <= t["ece_ci_high"]
    assert t["ece_debiased"] is None  # needs the rows: not claimed


def test_a_single_file_keeps_the_in_memory_evaluation_unless_asked(capsys, cifar10_parts) -> None:
    f = cifar10_parts / "part0.parquet"
    _, out, _ = run(capsys, "evaluate", f, "--format", "json")
    plain = json.loads(out)
    assert plain["ece_debiased"] is not None and "files" not in plain
    _, out, _ = run(capsys, "evaluate", f, "--format", "json", "--stream", "--quiet")
    streamed = json.loads(out)
    assert streamed["files"] == 1
    assert streamed["ece"] == pytest.approx(plain["ece"], abs=1e-12)
    assert streamed["mce"] == pytest.approx(plain["mce"], abs=1e-12)


def test_evaluate_on_a_dask_scheduler(capsys, cifar10_parts) -> None:
    distributed = pytest.importorskip("distributed")
    _, out, _ = run(capsys, "evaluate", cifar10_parts, "--format", "json", "--quiet", "--n-boot", "30")
    local = json.loads(out)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as c:
        code, out, _ = run(capsys, "evaluate", cifar10_parts, "--format", "json", "--quiet", "--n-boot", "30",
                           "--scheduler", c.scheduler_address)
    assert code == EXIT_OK
    remote = json.loads(out)
    for key in ("n", "ece", "ece_ci_low", "ece_ci_high", "mce", "brier", "nll", "accuracy", "classwise_ece"):
        assert remote[key] == pytest.approx(local[key], abs=1e-12), key


def test_dataset_errors_and_options_that_need_rows(capsys, cifar10_frame, tmp_path) -> None:
    files = write_parts(cifar10_frame, tmp_path / "logs", 3)
    part = pd.read_parquet(files[1])
    part.loc[part.index[2500], "c1"] = np.nan
    part.to_parquet(files[1], index=False)
    code, _, err = run(capsys, "evaluate", tmp_path / "logs", "--quiet")
    assert code == EXIT_BAD_INPUT and "part1.parquet" in err and "row 2501 of the file" in err
    code, _, err = run(capsys, "evaluate", tmp_path / "logs", "--libraries")
    assert code == EXIT_USAGE and "--libraries needs every row in memory" in err
    code, _, err = run(capsys, "evaluate", tmp_path / "logs", "--scheduler", "tcp://x:1", "--local-cluster", "2")
    assert code == EXIT_USAGE and "not both" in err


def test_fit_on_a_sample_then_apply_to_the_dataset(capsys, cifar10_parts, cifar10_frame, tmp_path) -> None:
    model = tmp_path / "ts.json"
    code, _, err = run(capsys, "fit", cifar10_parts / "*.parquet", "--method", "temperature", "--out", model)
    assert code == EXIT_USAGE and "--sample" in err
    code, out, _ = run(capsys, "fit", cifar10_parts / "*.parquet", "--sample", "3000", "--seed", "5",
                       "--method", "temperature", "--out", model, "--quiet")
    assert code == EXIT_OK and "sampled 3,000 rows" in out and "on 3000 rows" in out
    rec = load_recalibrator(model)
    out_dir = tmp_path / "calibrated"
    code, out, _ = run(capsys, "apply", model, cifar10_parts, "--out", out_dir, "--quiet")
    assert code == EXIT_OK and "wrote 4 Parquet file(s)" in out
    back = pd.concat([pd.read_parquet(out_dir / f"part{i}.parquet") for i in range(4)], ignore_index=True)
    assert list(back.columns) == [*cifar10_frame.columns, *[f"calibrated_{c}" for c in SCORES]]
    preds = pbr_core.load_predictions(cifar10_frame.to_csv(index=False).encode(), format="csv")
    np.testing.assert_allclose(back[[f"calibrated_{c}" for c in SCORES]].to_numpy(), rec.predict_proba(preds),
                               rtol=0, atol=1e-12)
    code, _, err = run(capsys, "apply", model, cifar10_parts, "--out", out_dir)
    assert code == EXIT_USAGE and "not empty" in err


def test_a_month_of_logs_with_an_added_column_and_another_order(capsys, cifar10_frame, tmp_path) -> None:
    """Audit 10a: one column added on a later day was refused even with --ignore-columns, and a CSV day
    with its columns in another order was refused. Both are read by name now; a column the run needs
    and a file lacks is still refused, naming the file (exit 3)."""
    files = write_parts(cifar10_frame, tmp_path / "logs", 3, fmt="csv")
    last = pd.read_csv(files[2]).assign(model_version="v2")
    last[last.columns[::-1]].to_csv(files[2], index=False)   # another order, and one more column
    code, out, err = run(capsys, "evaluate", tmp_path / "logs", "--quiet", "--ignore-columns", "model_version",
                         "--format", "json")
    assert code == EXIT_OK, err
    t = json.loads(out)
    assert t["n"] == 10000 and not any("Not in every file" in n for n in t["notes"])
    assert t["ece"] == pytest.approx(pbr_core.ece(cifar10_frame[SCORES].to_numpy(), cifar10_frame["label"].to_numpy(),
                                                  n_bins=21), abs=1e-12)
    code, out, _ = run(capsys, "evaluate", tmp_path / "logs", "--quiet")
    assert code == EXIT_OK and "Not in every file of the dataset, so not read: 'model_version' (not in part0.csv" in out
    code, _, err = run(capsys, "evaluate", tmp_path / "logs", "--quiet", "--by", "model_version")
    assert code == EXIT_BAD_INPUT and "part0.csv: this file has no column 'model_version'" in err
    model = tmp_path / "ts.json"
    assert run(capsys, "fit", tmp_path / "logs", "--sample", "3000", "--method", "temperature", "--out", model,
               "--quiet")[0] == EXIT_OK
    code, _, err = run(capsys, "apply", model, tmp_path / "logs", "--out", tmp_path / "calibrated", "--quiet")
    assert code == EXIT_OK, err
    back = pd.read_parquet(tmp_path / "calibrated" / "part2.parquet")
    assert "model_version" in back.columns and "calibrated_c0" in back.columns
    pd.read_csv(files[1]).drop(columns=["label"]).to_csv(files[1], index=False)
    code, _, err = run(capsys, "evaluate", tmp_path / "logs", "--quiet")
    assert code == EXIT_BAD_INPUT and "part1.csv: this file has no column 'label' (the label)" in err


def test_missing_text_and_the_curve_are_the_same_streamed_and_in_memory(capsys, tmp_path) -> None:
    """Empty text cells are the group '(missing)' in both (the streamed CSV reader made them a group ''),
    and --curve reports the ECE curve for one file in memory too (it was silently left out)."""
    rng = np.random.default_rng(1)
    n = 400
    p = rng.random(n)
    seg = rng.choice(["a", "b", ""], size=n)
    path = tmp_path / "seg.csv"
    path.write_text("p,label,seg\n" + "".join(f"{a},{int(rng.random() < a)},{s}\n" for a, s in zip(p, seg)))
    tables = {}
    for mode in ("--stream", None):
        code, out, _ = run(capsys, "evaluate", path, "--by", "seg", "--curve", "--format", "json",
                           *([mode] if mode else []))
        assert code == EXIT_OK
        tables[mode] = json.loads(out)
    streamed, whole = tables["--stream"], tables[None]
    groups = {m: {r["group"]: r["n"] for r in t["groups"]["rows"]} for m, t in tables.items()}
    assert groups["--stream"] == groups[None] and groups[None]["(missing)"] == int((seg == "").sum())
    assert len(whole["ece_curve"]) == 200 and whole["ece_curve"].keys() == streamed["ece_curve"].keys()
    preds = pbr_core.load_predictions(path)
    expected = pbr_core.ece_curve(preds.p_positive, preds.labels, range(1, 201))
    np.testing.assert_allclose([whole["ece_curve"][str(b)] for b in range(1, 201)], expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose([streamed["ece_curve"][str(b)] for b in range(1, 201)], expected, rtol=0, atol=1e-12)


def test_dates_with_utc_offsets_in_a_csv_count_as_written(capsys, tmp_path) -> None:
    """Arrow reads 2024-01-31T20:00:00-05:00 as a UTC time stamp (February 1st); the loader and the
    streamed reader keep such a column as the text written, so --every counts the day written."""
    path = tmp_path / "tz.csv"
    path.write_text("p,label,ts\n0.2,0,2024-01-15T21:00:00-05:00\n0.7,1,2024-01-15T22:00:00-05:00\n"
                    "0.4,0,2024-01-16T08:00:00-05:00\n0.9,1,2024-01-31T20:00:00-05:00\n0.3,0,2024-03-10T23:30:00-04:00\n")
    preds = pbr_core.load_predictions(path)
    assert preds.metadata["ts"].tolist()[0] == "2024-01-15T21:00:00-05:00"  # as written
    for mode in ("--stream", None):
        for every, expected in (("day", {"2024-01-15": 2, "2024-01-16": 1, "2024-01-31": 1, "2024-03-10": 1}),
                                ("month", {"2024-01": 4, "2024-03": 1})):
            code, out, _ = run(capsys, "evaluate", path, "--by", "ts", "--every", every, "--format", "json",
                               *([mode] if mode else []))
            assert code == EXIT_OK
            assert {r["group"]: r["n"] for r in json.loads(out)["groups"]["rows"]} == expected


def test_a_pipelines_prediction_and_score_stream_as_top_label(capsys, tmp_path) -> None:
    """(prediction, score = confidence in it, label) with class names: read as top-label in memory
    and streamed, with the same ECE (not as p(POSITIVE), which would be silently wrong)."""
    rng = np.random.default_rng(4)
    n = 600
    p1 = rng.random(n)
    names = np.array(["NEGATIVE", "POSITIVE"])
    pred = (p1 >= 0.5).astype(int)
    y = (rng.random(n) < p1).astype(int)
    conf = np.where(pred == 1, p1, 1 - p1)
    path = tmp_path / "pipeline.csv"
    pd.DataFrame({"prediction": names[pred], "score": conf, "label": names[y]}).to_csv(path, index=False)
    tables = {}
    for mode in ("--stream", None):
        code, out, _ = run(capsys, "evaluate", path, "--format", "json", *([mode] if mode else []))
        assert code == EXIT_OK
        tables[mode] = json.loads(out)
    expected = pbr_core.ece(conf, (pred == y).astype(float))
    assert tables[None]["kind"] == tables["--stream"]["kind"] == "top_label"
    assert tables[None]["ece"] == pytest.approx(expected, abs=1e-12)
    assert tables["--stream"]["ece"] == pytest.approx(expected, abs=1e-12)


def test_a_top_label_layout_decided_on_the_first_batch_holds_for_every_batch(tmp_path) -> None:
    """(prediction, score) read as top-label on the first batch: a later batch whose rows all predict
    one class is read the same way (it was re-decided per batch and came back binary)."""
    import pbr_core.stream as ps

    rng = np.random.default_rng(1)
    n = 400
    conf = rng.uniform(0.5, 1, n)
    pred = np.where(np.arange(n) < 200, rng.integers(0, 2, n), 1)
    lab = np.where(rng.uniform(size=n) < conf, pred, 1 - pred)
    names = np.array(["NEGATIVE", "POSITIVE"])
    path = tmp_path / "pipeline.parquet"
    pd.DataFrame({"label": names[lab], "prediction": names[pred], "score": conf}).to_parquet(path, row_group_size=200)
    ds = ps.open_dataset(str(path), batch_rows=200)
    assert ds.layout().kind == "top_label"
    kinds = [p.kind for u in ds.units() for _, p in ds.predictions(u)]
    assert kinds == ["top_label", "top_label"]
    stats = ps.compute_statistics(ds)
    whole = pbr_core.load_predictions(path)
    assert stats.n == n and whole.kind == "top_label"
    assert stats.accuracy == pytest.approx(float((pred == lab).mean()), abs=1e-12)
    assert stats.ece() == pytest.approx(pbr_core.ece(*whole.metric_inputs()), abs=1e-12)
