"""Sampling for a fit and applying a fitted recalibrator to a dataset, batch by batch."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pbr_core
from pbr_core.predictions import PredictionsError
from pbr_core.recalibrators import TemperatureScaling
from pbr_core.stream import apply_to_dataset, open_dataset, sample_dataset
from stream_testdata import SAMPLE, write_parts

SCORES = [f"c{k}" for k in range(10)]


def test_sample_has_the_exact_size_and_is_reproducible(cifar10_parts, cifar10_frame) -> None:
    ds = open_dataset(cifar10_parts, batch_rows=400)
    a = sample_dataset(ds, 1234, seed=1)
    b = sample_dataset(open_dataset(cifar10_parts, batch_rows=400), 1234, seed=1)
    c = sample_dataset(ds, 1234, seed=2)
    assert a.n == 1234 and np.array_equal(a.probs, b.probs)
    assert not np.array_equal(a.probs, c.probs)
    # Every sampled row is a row of the files, with its label, in file order.
    probs = cifar10_frame[SCORES].to_numpy()
    rows = np.array([np.abs(probs - r).max(axis=1).argmin() for r in a.probs])
    np.testing.assert_allclose(a.probs, probs[rows], rtol=0, atol=1e-15)  # the loader may renormalise by 1 ulp
    assert np.all(np.diff(rows) > 0)
    assert np.array_equal(a.labels, cifar10_frame["label"].to_numpy()[rows])
    assert sample_dataset(ds, 10**6).n == 10000  # larger than the data: every row


def test_sample_is_uniform_over_rows(tmp_path) -> None:
    """Bottom-k sampling: each of 2000 rows (4 files, batches of 250) is kept with probability
    k/n = 0.25, whatever its file or its position in a batch."""
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(3), 2000)
    df = pd.DataFrame(p, columns=["a", "b", "c"]).assign(label=rng.integers(0, 3, 2000))
    write_parts(df, tmp_path / "u", 4)
    ds = open_dataset(tmp_path / "u", batch_rows=250)
    hits = np.zeros(2000)
    n_seeds = 10
    for seed in range(n_seeds):
        s = sample_dataset(ds, 500, seed=seed)
        assert s.n == 500
        hits[[np.abs(p - r).max(axis=1).argmin() for r in s.probs]] += 1
    assert hits.sum() == 500 * n_seeds  # 500 distinct rows each time
    freq = hits / n_seeds
    tol = 5 * np.sqrt(0.25 * 0.75 / (n_seeds * 200))  # 5 sd of a group of 200 rows
    assert np.abs(freq.reshape(10, 200).mean(axis=1) - 0.25).max() < tol  # by position in the files
    position_in_batch = np.arange(2000) % 250
    by_position = [freq[(position_in_batch >= lo) & (position_in_batch < lo + 25)].mean() for lo in range(0, 250, 25)]
    assert np.abs(np.array(by_position) - 0.25).max() < tol


def test_apply_writes_every_original_column_and_the_calibrated_probabilities(cifar10_parts, cifar10_frame, tmp_path) -> None:
    ds = open_dataset(cifar10_parts, batch_rows=600)
    preds = pbr_core.load_predictions(cifar10_frame.to_csv(index=False).encode(), format="csv")
    rec = TemperatureScaling().fit(preds.subset(np.arange(2000)))
    out = tmp_path / "calibrated"
    written = apply_to_dataset(rec, ds, out)
    assert [p.name for p in written] == [f"part{i}.parquet" for i in range(4)]
    assert sorted(p.name for p in out.iterdir()) == [f"part{i}.parquet" for i in range(4)]
    assert not [p for p in tmp_path.iterdir() if "partial" in p.name]
    back = pd.concat([pd.read_parquet(p) for p in written], ignore_index=True)
    pd.testing.assert_frame_equal(back[list(cifar10_frame.columns)], cifar10_frame)
    np.testing.assert_allclose(back[[f"calibrated_{c}" for c in SCORES]].to_numpy(), rec.predict_proba(preds),
                               rtol=0, atol=1e-12)


def test_apply_with_a_bad_row_leaves_no_output(cifar10_frame, tmp_path) -> None:
    files = write_parts(cifar10_frame, tmp_path / "logs", 3)
    part = pd.read_parquet(files[2])
    part.loc[part.index[3000], "c5"] = np.inf
    pq.write_table(pa.Table.from_pandas(part, preserve_index=False), files[2], row_group_size=700)
    rec = TemperatureScaling().fit(pbr_core.load_predictions(cifar10_frame.iloc[:1000].to_csv(index=False).encode(),
                                                             format="csv"))
    out = tmp_path / "calibrated"
    with pytest.raises(PredictionsError, match=r"part2\.parquet.*row group 5, row 3001 of the file"):
        apply_to_dataset(rec, open_dataset(tmp_path / "logs"), out)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs"]  # no partial folder left behind
    (out / "x").mkdir(parents=True)
    with pytest.raises(FileExistsError, match="not an empty folder"):
        apply_to_dataset(rec, open_dataset(tmp_path / "logs"), out)


def test_temperature_on_every_row_equals_the_in_memory_fit(cifar10_parts, cifar10_frame, tmp_path, capsys) -> None:
    from pbr_core.cli import main
    from pbr_core.recalibrators import load_recalibrator
    from pbr_core.stream import fit_temperature

    # Logits (the in-memory fit's own input), 3 Parquet files.
    logits = np.load(SAMPLE / "cifar10_resnet110.npz")
    df = pd.DataFrame(logits["logits"], columns=SCORES).assign(label=logits["labels"])
    write_parts(df, tmp_path / "logits", 3)
    streamed = fit_temperature(open_dataset(tmp_path / "logits"))
    in_memory = TemperatureScaling().fit(logits["logits"].astype(np.float64), logits["labels"])
    assert streamed.temperature_ == pytest.approx(in_memory.temperature_, rel=1e-9)
    assert 2 <= streamed.fit_passes_ <= 12
    code = main(["fit", str(tmp_path / "logits" / "*.parquet"), "--method", "temperature", "--all-rows",
                 "--out", str(tmp_path / "t.json"), "--quiet"])
    assert code == 0 and "passes: T = " in capsys.readouterr().out
    assert load_recalibrator(tmp_path / "t.json").temperature_ == pytest.approx(in_memory.temperature_, rel=1e-9)
    assert main(["fit", str(tmp_path / "logits"), "--method", "beta", "--all-rows", "--out",
                 str(tmp_path / "p.json")]) == 2


def test_apply_writes_the_venn_abers_intervals(kitti_csv_parts, tmp_path, capsys) -> None:
    """A Venn-Abers predictor's (p0, p1) of each class right after its calibrated column, batch by batch
    equal to the in-memory predict_interval (KITTI XGBoost, 3 CSV files), through pbr-calib apply too."""
    from pbr_core.cli import main
    from pbr_core.recalibrators import VennAbers

    df = pd.read_csv(SAMPLE / "kitti_xgboost.csv")
    preds = pbr_core.load_predictions(df.to_csv(index=False).encode(), format="csv")
    rec = VennAbers().fit(preds.subset(np.arange(1000)))
    written = apply_to_dataset(rec, open_dataset(kitti_csv_parts, batch_rows=500), tmp_path / "out")
    back = pd.concat([pd.read_parquet(p) for p in written], ignore_index=True)
    assert list(back.columns) == ["p_positive", "label", "calibrated_0", "calibrated_0_low", "calibrated_0_high",
                                  "calibrated_1", "calibrated_1_low", "calibrated_1_high"]
    low, high = rec.predict_interval(preds)
    for k in range(2):
        np.testing.assert_allclose(back[f"calibrated_{k}_low"], low[:, k], rtol=0, atol=1e-12)
        np.testing.assert_allclose(back[f"calibrated_{k}_high"], high[:, k], rtol=0, atol=1e-12)
    assert np.all((back["calibrated_1_low"] <= back["calibrated_1"]) & (back["calibrated_1"] <= back["calibrated_1_high"]))
    model = tmp_path / "va.json"
    rec.save(model)
    assert main(["apply", str(model), str(kitti_csv_parts), "--out", str(tmp_path / "cli"), "--quiet"]) == 0
    assert "calibrated_<class>_low and calibrated_<class>_high" in capsys.readouterr().out
    assert "calibrated_1_high" in pd.read_parquet(next((tmp_path / "cli").iterdir())).columns
