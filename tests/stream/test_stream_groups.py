"""Calibration by group on a streamed dataset == pbr_core.groups.calibration_by_group on the same rows.

The real UCI Adult predictions (sample_data/adult_gradient_boosting.csv.gz, 16,281 rows with
demographic columns) written as several Parquet files (and CSV files), with a time stamp column
and an id column added.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core import groups as G
from pbr_core.cli import EXIT_BAD_INPUT, EXIT_OK, main
from pbr_core.stream import compute_group_statistics, compute_statistics, open_dataset
from stream_testdata import SAMPLE, write_parts

# Every column but the interval and the bias-corrected (split) estimate, whose random halves a stream
# draws row by row: the exact (Monte Carlo) p-values of small groups included, from their kept rows.
EXACT = ["group", "n", "share", "rate", "mean_predicted", "n_bins", "ece", "mce", "brier", "z", "chi2_cox",
         "p_value", "p_holm", "test_method", "detectable_shift", "too_small"]
CLASSES = (G.PREDICTED_CLASS, G.EACH_CLASS)


@pytest.fixture(scope="module")
def adult_frame() -> pd.DataFrame:
    df = pd.read_csv(SAMPLE / "adult_gradient_boosting.csv.gz")
    df["scored_at"] = pd.date_range("2025-01-01", periods=len(df), freq="3min").strftime("%Y-%m-%d %H:%M")
    df["request_id"] = np.arange(len(df))
    # Whole numbers with a few missing values, all in the last file: its batches only are float.
    store = (np.arange(len(df)) % 7).astype(float)
    store[-500::97] = np.nan
    df["store"] = pd.array(store, dtype="Int64")
    return df


@pytest.fixture(scope="module")
def adult_parts(tmp_path_factory, adult_frame):
    folder = tmp_path_factory.mktemp("adult") / "logs"
    write_parts(adult_frame, folder, 4, row_group_size=1500)
    return folder


@pytest.fixture(scope="module")
def adult_whole(tmp_path_factory, adult_frame):
    """The same rows as one Parquet file, read whole by the in-memory loader: the reference."""
    path = tmp_path_factory.mktemp("adult_whole") / "all.parquet"
    write_parts(adult_frame, path.parent, 1)
    return path.parent / "part0.parquet"


def _in_memory(path, by, **kw):
    preds = pbr_core.load_predictions(path, group_columns=[b for b in by if b not in CLASSES] or None)
    return G.calibration_by_group(preds, by, **kw)


def _streamed(folder, by, batch_rows=1000, **kw):
    ds = open_dataset(folder, group_columns=[b for b in by if b not in CLASSES] or None, batch_rows=batch_rows)
    groups, _ = compute_group_statistics(ds, by, **kw)
    return groups.report()


def _same(streamed: G.GroupReport, memory: G.GroupReport) -> None:
    # rtol: sums added in another order (chi2 values near 10^6 differ in the 16th digit)
    pd.testing.assert_frame_equal(streamed.table[EXACT], memory.table[EXACT], check_exact=False, rtol=1e-10, atol=1e-12)
    assert streamed.by == memory.by and streamed.target == memory.target
    assert streamed.diagrams.keys() == memory.diagrams.keys()
    for g in memory.diagrams:
        pd.testing.assert_frame_equal(streamed.diagrams[g], memory.diagrams[g], check_exact=False, rtol=0, atol=1e-12)
    gap_s, gap_m = streamed.largest_gap, memory.largest_gap
    assert gap_s.keys() == gap_m.keys()
    if gap_m:  # the same measured ECEs; the corrected estimates come from other random halves
        assert gap_s["measured_gap"] == pytest.approx(gap_m["measured_gap"], abs=1e-12) or \
            (gap_s["worst"], gap_s["best"]) != (gap_m["worst"], gap_m["best"])
        # Other random halves: the two estimates differ by about their own uncertainty, not more.
        assert abs(gap_s["gap"] - gap_m["gap"]) <= ((gap_s["high"] - gap_s["low"]) + (gap_m["high"] - gap_m["low"])) / 2
        assert gap_s["p_holm_worst"] == pytest.approx(gap_m["p_holm_worst"], abs=1e-12) or \
            gap_s["worst"] != gap_m["worst"]


@pytest.mark.parametrize("by, kw", [
    (["sex"], {}),
    (["race", "sex"], {}),
    (["scored_at"], {"every": "week"}),
    (["predicted class"], {"target": "top_label"}),
    (["store"], {}),
])
def test_streamed_groups_equal_the_in_memory_groups(adult_parts, adult_whole, by, kw):
    memory = _in_memory(adult_whole, by, n_boot=200, **kw)
    streamed = _streamed(adult_parts, by, n_boot=200, **kw)
    _same(streamed, memory)
    t = streamed.table
    assert (t["ece_low"] <= t["ece"]).all() and (t["ece"] <= t["ece_high"]).all()
    # The split interval with a Poisson bootstrap: the same construction, other random draws.
    np.testing.assert_allclose(t["ece_high"], memory.table["ece_high"], rtol=0, atol=0.03)
    assert "Poisson" in streamed.interval


def test_streamed_group_intervals_are_as_wide_as_in_memory(adult_parts, adult_whole):
    """Each Poisson replicate is divided by its own total weight, as the ordinary bootstrap's by
    its n rows. Dividing by n instead (before) made the interval of a one-sidedly miscalibrated
    group 56 % wider than in memory (Adult, true class 1: .029 against .0185)."""
    memory = _in_memory(adult_whole, ["predicted class"], n_boot=400, target="top_label").table
    streamed = _streamed(adult_parts, ["predicted class"], n_boot=400, target="top_label").table
    ratio = (streamed["ece_high"] - streamed["ece_low"]) / (memory["ece_high"] - memory["ece_low"])
    assert ((0.85 < ratio) & (ratio < 1.15)).all(), ratio.tolist()


def test_a_csv_dataset_reads_whole_numbers_with_gaps_as_a_whole_file_does(tmp_path, adult_frame):
    """CSV files: 'store' has missing values in the last file only, so its batches are floats there
    and whole numbers elsewhere; every batch shows the values as the whole file does (25.0)."""
    folder = tmp_path / "csv"
    write_parts(adult_frame, folder, 3, fmt="csv")
    whole = tmp_path / "whole.csv"
    adult_frame.to_csv(whole, index=False)
    for by in (["store"], ["race", "store"]):
        memory = _in_memory(whole, by, n_boot=50)
        streamed = _streamed(folder, by, batch_rows=1 << 18, n_boot=50)
        _same(streamed, memory)
    assert {"0.0", "6.0", "(missing)"} <= set(_streamed(folder, ["store"], batch_rows=1 << 18, n_boot=5).table["group"])


def test_groups_and_overall_in_one_pass_equal_the_overall_pass(adult_parts):
    ds = open_dataset(adult_parts, group_columns="sex", batch_rows=1000)
    alone = compute_statistics(ds, n_boot=30, seed=3)
    groups, overall = compute_group_statistics(ds, "sex", n_boot=30, seed=3, overall=alone.config)
    np.testing.assert_allclose(overall.cells, alone.cells, rtol=0, atol=1e-9)
    assert overall.ece_interval() == pytest.approx(alone.ece_interval(), abs=1e-12)  # the same per-batch draws
    assert groups.n.sum() == alone.n


def test_too_many_groups_unknown_columns_and_no_classes(adult_parts, tmp_path):
    ds = open_dataset(adult_parts, group_columns="request_id")
    with pytest.raises(ValueError, match=r"grouping by request_id gives more than 1,000 groups.*such as an id"):
        compute_group_statistics(ds, "request_id", n_boot=5)
    with pytest.raises(ValueError, match="more than 20 groups"):
        compute_group_statistics(open_dataset(adult_parts), "age", n_boot=5, max_groups=20)
    # Each row group holds at most 1,500 ids: the units' counts are merged and cut at the cap.
    rows = []
    with pytest.raises(ValueError, match="more than 2,000 groups"):
        compute_group_statistics(open_dataset(adult_parts), "request_id", n_boot=5, max_groups=2000,
                                 progress=lambda done, total, what: rows.append(done))
    assert max(rows) < 16281   # stopped before reading every file
    with pytest.raises(ValueError, match=r"no column 'zip' to group by.*'sex'"):
        compute_group_statistics(open_dataset(adult_parts), "zip", n_boot=5)
    llm = pd.read_csv(SAMPLE / "llm_qa_confidence_correct.csv.gz")   # (confidence, correct): no classes
    write_parts(llm, tmp_path / "llm", 2)
    with pytest.raises(ValueError, match="no classes"):
        compute_group_statistics(open_dataset(tmp_path / "llm"), "predicted class", n_boot=5)
    with pytest.raises(ValueError, match="grouping by the true class is not offered: it selects rows by their outcome"):
        compute_group_statistics(open_dataset(adult_parts), "true class", n_boot=5)
    with pytest.raises(ValueError, match="three or more classes"):
        compute_group_statistics(open_dataset(adult_parts), "each class", n_boot=5)
    with pytest.raises(ValueError, match="one or two group columns"):
        compute_group_statistics(open_dataset(adult_parts), ["sex", "race", "age"], n_boot=5)


def test_a_value_that_is_not_a_date_is_named_with_its_file_and_row(tmp_path, adult_frame):
    df = adult_frame.drop(columns=["store"]).copy()
    df.loc[12000, "scored_at"] = "soon"
    write_parts(df, tmp_path / "bad", 4, row_group_size=1500)
    with pytest.raises(pbr_core.PredictionsError, match=r"part2\.parquet: row group 3, column 'scored_at': value "
                                                        r"'soon' at row 3860 of the file is not a date"):
        compute_group_statistics(open_dataset(tmp_path / "bad"), "scored_at", every="day", n_boot=5)


def test_dask_gives_the_numbers_of_the_single_process_pass(adult_parts):
    distributed = pytest.importorskip("distributed", reason="the optional extra pbr-calib[scale] is not installed")
    ds = open_dataset(adult_parts, group_columns=["race", "sex"], batch_rows=1000)
    local, _ = compute_group_statistics(ds, ["race", "sex"], n_boot=40, seed=2)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        on_dask, _ = compute_group_statistics(ds, ["race", "sex"], n_boot=40, seed=2, client=client)
    np.testing.assert_allclose(on_dask.bins, local.bins, rtol=0, atol=1e-9)
    np.testing.assert_allclose(on_dask.boot, local.boot, rtol=0, atol=1e-9)
    a, b = on_dask.report().table, local.report().table
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=0, atol=1e-12)   # intervals included


def test_cli_evaluate_a_glob_by_group(capsys, adult_parts, adult_whole):
    assert main(["evaluate", str(adult_parts / "*.parquet"), "--by", "race", "--format", "json", "--quiet",
                 "--n-boot", "50"]) == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    memory = _in_memory(adult_whole, ["race"], n_boot=50)
    rows = pd.DataFrame(out["groups"]["rows"])
    assert rows["group"].tolist() == memory.table["group"].tolist()
    np.testing.assert_allclose(rows["ece"], memory.table["ece"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(rows["p_holm"], memory.table["p_holm"], rtol=0, atol=1e-12)
    assert out["groups"]["largest_gap"]["worst"] == memory.largest_gap["worst"]
    assert out["n"] == 16281 and out["columns"]["race"] == "group"
    assert main(["evaluate", str(adult_parts), "--by", "sex", "--by", "predicted class", "--quiet",
                 "--n-boot", "50"]) == EXIT_OK
    text = capsys.readouterr().out
    assert "calibration by sex × predicted class" in text and "Female × 1" in text and "Poisson bootstrap" in text
    assert main(["evaluate", str(adult_parts), "--by", "request_id", "--quiet"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "more than 1,000 groups" in err and "Traceback" not in err


def test_confidence_and_correctness_records_by_two_columns(tmp_path):
    """LLM (confidence, correct) records (real, no classes): top-label only, Brier of (c - correct)."""
    llm = pd.read_csv(SAMPLE / "llm_qa_confidence_correct.csv.gz")
    write_parts(llm, tmp_path / "llm", 3, row_group_size=900)
    llm.to_parquet(tmp_path / "whole.parquet", index=False)
    by = ["model", "dataset"]
    memory = _in_memory(tmp_path / "whole.parquet", by, n_boot=20)
    streamed = _streamed(tmp_path / "llm", by, batch_rows=2000, n_boot=20)
    assert streamed.target == "top_label" and len(streamed.table) == 20
    _same(streamed, memory)


def test_each_class_against_the_rest_streamed_equals_in_memory(tmp_path):
    """Real KITTI 8-class random-forest predictions: for every class k, p_k against 1[y = k] over all
    rows, the same table from a stream of three Parquet files as from the whole file in memory."""
    df = pd.read_csv(SAMPLE / "kitti_multiclass_random_forest.csv")
    write_parts(df, tmp_path / "kitti", 3, row_group_size=1000)
    memory = G.calibration_by_group(pbr_core.load_predictions(SAMPLE / "kitti_multiclass_random_forest.csv"),
                                    "each class", n_boot=100)
    streamed = _streamed(tmp_path / "kitti", ["each class"], n_boot=100)
    _same(streamed, memory)
    assert (memory.table["n"] == len(df)).all() and (memory.table["share"] == 1.0).all()


def test_streamed_groups_of_a_rounded_file_read_the_file_s_rounding(tmp_path):
    """Review 9: each group reads how finely the file wrote its values from the whole file (the sums'
    evidence is the total over the groups), streamed as in memory: 30 one-day groups of 15 rows of an LLM
    export at "100.0%" (3 decimals), none "for certain", the same p-values and rounded rows."""
    rng = np.random.default_rng(4)
    n = 450
    near = rng.random(n) < 0.9
    c = np.round(np.where(near, 1 - 10 ** rng.uniform(-7, -3.2, n), rng.uniform(0.3, 0.99, n)), 3)
    y = (rng.random(n) < np.minimum(c, 0.9999)).astype(int)
    at1 = np.flatnonzero(c >= 1)
    y[at1[[0, 40, 41, 200]]] = 0
    day = (pd.Timestamp("2025-03-01") + pd.to_timedelta(np.repeat(np.arange(30), 15), unit="D")).strftime("%Y-%m-%d")
    frame = pd.DataFrame({"answered_on": day, "confidence": c, "correct": y})
    write_parts(frame, tmp_path / "parts", 3, row_group_size=40)
    write_parts(frame, tmp_path / "whole", 1)
    memory = _in_memory(tmp_path / "whole" / "part0.parquet", ["answered_on"], every="day", n_boot=50)
    streamed = _streamed(tmp_path / "parts", ["answered_on"], batch_rows=37, every="day", n_boot=50)
    _same(streamed, memory)
    t = streamed.table
    assert not t.test_method.str.startswith("certain").any() and t.rounded_rows.sum() == 4
    assert t.rounded_rows.tolist() == memory.table.rounded_rows.tolist()


# ------------------------------------------------------------------ a column that restates the outcome
def test_a_streamed_grouping_by_a_column_that_restates_the_outcome_warns_as_in_memory(tmp_path, adult_frame):
    """Review 10 left it: a streamed ``--by`` never looked for a column that restates the outcome (every
    value one outcome: its groups are miscalibrated by construction). The streamed pass now applies the
    rule to the sums it keeps per group (pbr_core.outcome_columns.restating_from_sums): the same column,
    values, outcomes and chance as the in-memory check; an ordinary column is not flagged."""
    df = adult_frame.assign(verdict=np.where(adult_frame["label"] == 1, "over 50K", "50K or less"))
    folder = tmp_path / "logs"
    write_parts(df, folder, 3)
    streamed = _streamed(folder, ["verdict"])
    whole = _in_memory(_whole(tmp_path, df), ["verdict"])
    assert [f.column for f in streamed.restating] == [f.column for f in whole.restating] == ["verdict"]
    s, m = streamed.restating[0], whole.restating[0]
    assert (s.outcome, s.cut, s.n_values, s.outcomes) == (m.outcome, m.cut, m.n_values, m.outcomes)
    assert s.covered == pytest.approx(m.covered) and s.log10_chance == pytest.approx(m.log10_chance, rel=1e-9)
    assert streamed.warnings == whole.warnings
    assert _streamed(folder, ["sex"]).restating == [] == _in_memory(_whole(tmp_path, df), ["sex"]).restating
    out = _run_cli("evaluate", str(folder), "--by", "verdict")
    assert "warning: 'verdict' restates the outcome: each of its values has a single outcome (the label)" in out


def test_the_streamed_restating_rule_equals_the_in_memory_one_on_drawn_files(tmp_path):
    """Known truth: outcomes drawn from real scores (Adult p(y=1), calibrated), a column made of the drawn
    outcome, a column of 10-row values at random and one cut along the score (pure at its ends). On every
    file the streamed verdict for each column is the in-memory verdict for the measured outcome (rows 6b's
    rule: the restating column flagged from 300 rows here, the others never)."""
    from pbr_core import outcome_columns as O

    rng = np.random.default_rng(3)
    s = pd.read_csv(SAMPLE / "adult_gradient_boosting.csv.gz")["p_gt50k"].to_numpy()
    flagged = {"restating": 0, "random10": 0, "along10": 0}
    for i, n in enumerate((60, 300, 1000, 1000)):
        p = s[rng.choice(s.size, n, replace=False)]
        y = (rng.random(n) < p).astype(int)
        along = np.empty(n, dtype=int)
        along[np.argsort(p, kind="stable")] = np.arange(n) // 10
        df = pd.DataFrame({"p_gt50k": p, "label": y, "random10": rng.integers(0, n // 10, n).astype(str),
                           "along10": along.astype(str), "restating": np.where(y == 1, "A", "B")})
        folder = tmp_path / f"f{i}"
        write_parts(df, folder, 2)
        preds = pbr_core.load_predictions(_whole(tmp_path / f"w{i}", df))
        for col in flagged:
            streamed = _streamed(folder, [col], max_groups=1000).restating
            memory = O._check(*_value_codes(preds.metadata[col]), np.asarray(preds.labels),
                              np.log(np.clip(preds.probs, O._EPS, 1.0)), ("0", "1"))
            assert bool(streamed) == (memory is not None), (n, col)
            flagged[col] += bool(streamed)
    assert flagged == {"restating": 3, "random10": 0, "along10": 0}


def _value_codes(col: pd.Series):
    codes, uniques = pd.factorize(col, use_na_sentinel=False)
    return codes.astype(np.intp), [str(u) for u in uniques]


def _whole(folder, df):
    folder.mkdir(parents=True, exist_ok=True)
    write_parts(df, folder / "whole", 1)
    return folder / "whole" / "part0.parquet"


def _run_cli(*argv) -> str:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(list(argv)) == EXIT_OK
    return buf.getvalue()
