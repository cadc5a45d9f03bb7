"""Platt scaling on every row by streamed passes (``fit_platt``, ``pbr-calib fit --all-rows --method platt``):
the in-memory fit's answer, on real sample data split into several files."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.special import expit

import pbr_core
import pbr_core.recalibrators._logistic as logistic
import pbr_core.stream._fit as stream_fit
from pbr_core.cli import EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE, main
from pbr_core.predictions import PredictionsError
from pbr_core.recalibrators import PlattScaling, load_recalibrator
from pbr_core.stream import fit_platt, open_dataset
from stream_testdata import SAMPLE, write_parts


def assert_same_maps(streamed: PlattScaling, in_memory: PlattScaling, rel: float = 1e-10) -> None:
    assert streamed.n_classes_ == in_memory.n_classes_ and len(streamed.maps_) == len(in_memory.maps_)
    for s, m in zip(streamed.maps_, in_memory.maps_):
        assert s["targets"] == m["targets"]
        assert s["slope"] == pytest.approx(m["slope"], rel=rel, abs=1e-12)
        assert s["intercept"] == pytest.approx(m["intercept"], rel=rel, abs=1e-12)


@pytest.mark.parametrize("name", ["kitti_xgboost.csv", "kitti_random_forest.csv"])
@pytest.mark.parametrize("targets", ["auto", "platt"])
def test_binary_on_every_row_equals_the_in_memory_fit(tmp_path, name, targets) -> None:
    write_parts(pd.read_csv(SAMPLE / name), tmp_path / "logs", 3, fmt="csv")
    passes = []
    streamed = fit_platt(open_dataset(tmp_path / "logs"), targets=targets, progress=lambda p, total, message: passes.append((p, total, message)))
    in_memory = PlattScaling(targets=targets).fit(pbr_core.load_predictions(SAMPLE / name))
    assert_same_maps(streamed, in_memory)
    assert streamed.maps_[0]["slope"] != 1.0  # a real fit, not the identity map
    # One count pass, then one pass per Newton iteration; progress after every pass, the last with no map left.
    assert 3 <= streamed.fit_passes_ <= 15
    assert passes == [(p, None, "1 map(s) still iterating") for p in range(1, streamed.fit_passes_)] + [
        (streamed.fit_passes_, None, "0 map(s) still iterating")]
    np.testing.assert_allclose(streamed.predict_proba(pbr_core.load_predictions(SAMPLE / name)),
                               in_memory.predict_proba(pbr_core.load_predictions(SAMPLE / name)), rtol=0, atol=1e-12)


def test_multiclass_on_every_row_equals_the_in_memory_fit(cifar10_parts) -> None:
    # CIFAR-10 probabilities in 4 Parquet files (row groups of 700): ten one-vs-all maps in the same passes.
    streamed = fit_platt(open_dataset(cifar10_parts))
    in_memory = PlattScaling().fit(pbr_core.load_predictions(SAMPLE / "cifar10_resnet110.npz"))
    assert_same_maps(streamed, in_memory)
    assert 3 <= streamed.fit_passes_ <= 15


def test_separated_classes_fall_back_to_platt_targets_as_in_memory(tmp_path) -> None:
    # KITTI multiclass: two classes never occur, so their labels' fit does not exist; "auto" refits them on
    # Platt's targets (in later passes here) and warns once, naming them, as PlattScaling.fit does.
    name = "kitti_multiclass_random_forest.csv"
    write_parts(pd.read_csv(SAMPLE / name), tmp_path / "logs", 3, fmt="csv")
    with pytest.warns(RuntimeWarning, match=r"'class_2', 'class_6' are perfectly separated") as streamed_warnings:
        streamed = fit_platt(open_dataset(tmp_path / "logs"))
    with pytest.warns(RuntimeWarning) as memory_warnings:
        in_memory = PlattScaling().fit(pbr_core.load_predictions(SAMPLE / name))
    # The same warnings: the targets one, and the one about exact 0/1 scores that were wrong, counted in
    # the streamed fit's first pass.
    targets = lambda ws: [str(w.message) for w in ws if "perfectly separated" in str(w.message)]
    assert targets(streamed_warnings) == targets(memory_warnings) and len(targets(memory_warnings)) == 1
    messages = lambda ws: sorted(str(w.message) for w in ws)
    assert messages(streamed_warnings) == messages(memory_warnings)
    assert any("exactly 0 or 1" in m for m in messages(streamed_warnings))
    assert [m["targets"] for m in streamed.maps_].count("platt") == 2
    assert_same_maps(streamed, in_memory)
    with pytest.raises(RuntimeError, match=r"Platt scaling failed for 'class_2': .*separated.*targets='auto'"):
        fit_platt(open_dataset(tmp_path / "logs"), targets="labels")


def _backtracking_data() -> tuple[np.ndarray, np.ndarray]:
    """p(y=1) with one confident outlier (logit -14.8) among 1708 rows, 1706 positives: Newton's full step
    from the start point overshoots, and the in-memory line search halves it (found by a seed search)."""
    rng = np.random.default_rng(0)
    n = int(rng.integers(50, 2000))
    sd = rng.uniform(0.1, 5)
    x = rng.normal(0, sd, n)
    i = rng.integers(n)
    x[i] = rng.choice([-1, 1]) * rng.uniform(5, 36)
    a, b = rng.uniform(-3, 10), rng.uniform(-12, 12)
    y = (rng.random(n) < expit(a * x + b)).astype(np.int64)
    return expit(x), y


def test_line_search_steps_match_across_passes(tmp_path, monkeypatch) -> None:
    p, y = _backtracking_data()
    pd.DataFrame({"p": p, "label": y}).to_csv(tmp_path / "all.csv", index=False)
    write_parts(pd.read_csv(tmp_path / "all.csv"), tmp_path / "logs", 4, fmt="csv")
    in_memory_data = pbr_core.load_predictions(tmp_path / "all.csv")
    in_memory = PlattScaling().fit(in_memory_data)
    # The in-memory solver does backtrack here: objective evaluations beyond the start and one per accepted step.
    calls = []
    real_loss = logistic._loss
    monkeypatch.setattr(logistic, "_loss", lambda eta, t: calls.append(1) or real_loss(eta, t))
    fit = logistic.fit_logistic(logistic.logit(in_memory_data.probs[:, 1])[:, None], in_memory_data.labels)
    monkeypatch.setattr(logistic, "_loss", real_loss)
    assert fit.converged and fit.coef[0] == in_memory.maps_[0]["slope"]
    assert len(calls) - 1 - fit.n_iter >= 2, "the data no longer make the line search backtrack"
    # ...and the streamed fit takes the same steps: four trial scales in one pass, or one per pass.
    four = fit_platt(open_dataset(tmp_path / "logs"))
    assert_same_maps(four, in_memory)
    monkeypatch.setattr(stream_fit, "_TRIALS_PER_PASS", 1)
    one = fit_platt(open_dataset(tmp_path / "logs"))
    assert_same_maps(one, in_memory)
    assert one.fit_passes_ >= four.fit_passes_ + 2  # each halving cost a pass of its own


def _with_bad_row(frame: pd.DataFrame, folder) -> None:
    files = write_parts(frame, folder, 3)
    part = pd.read_parquet(files[2])
    part.loc[part.index[3000], "c5"] = np.inf  # row 3001 of part2, in its fifth row group (700 rows each)
    pq.write_table(pa.Table.from_pandas(part, preserve_index=False), files[2], row_group_size=700)


def test_a_bad_row_in_a_later_file_is_named(cifar10_frame, tmp_path, capsys) -> None:
    _with_bad_row(cifar10_frame, tmp_path / "logs")
    with pytest.raises(PredictionsError, match=r"part2\.parquet.*row group 5, row 3001 of the file"):
        fit_platt(open_dataset(tmp_path / "logs"))
    code = main(["fit", str(tmp_path / "logs"), "--method", "platt", "--all-rows", "--out",
                 str(tmp_path / "p.json"), "--quiet"])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT and "part2.parquet" in err and "row 3001 of the file" in err
    assert "Traceback" not in err and not (tmp_path / "p.json").exists()


def test_cli_fits_platt_on_every_row(cifar10_parts, tmp_path, capsys) -> None:
    out = tmp_path / "platt.json"
    code = main(["fit", str(cifar10_parts / "*.parquet"), "--method", "platt", "--all-rows", "--out", str(out)])
    stdout, err = capsys.readouterr()
    assert code == EXIT_OK, err
    assert re.search(r"fitted Platt scaling on every row of .* \(4 file\(s\)\) in \d+ passes: a = .*\(10 maps\)",
                     stdout)
    assert "Platt (passes over the data)" in err  # the per-pass progress bar, on stderr
    saved = load_recalibrator(out)
    in_memory = PlattScaling().fit(pbr_core.load_predictions(SAMPLE / "cifar10_resnet110.npz"))
    assert isinstance(saved, PlattScaling)
    assert_same_maps(saved, in_memory)
    # --param targets=... reaches the streamed fit.
    code = main(["fit", str(cifar10_parts), "--method", "platt", "--param", "targets=platt", "--all-rows",
                 "--out", str(out), "--quiet"])
    assert code == EXIT_OK and {m["targets"] for m in load_recalibrator(out).maps_} == {"platt"}
    capsys.readouterr()
    code = main(["fit", str(cifar10_parts), "--method", "beta", "--all-rows", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and "temperature or Platt scaling only" in err and "not beta" in err


def test_the_streamed_fit_warns_about_wrong_exact_zeros_and_ones_as_in_memory(tmp_path) -> None:
    """A random forest's p(y=1) with exact 0/1 scores, some wrong (audit 3): the streamed Platt fit
    counts them over its first pass and gives the in-memory fit's warning, word for word; calibrated
    soft scores with every exact 0/1 right give no warning on either path."""
    import warnings

    rng = np.random.default_rng(0)
    truth = rng.beta(0.6, 0.6, 3000)
    y = (rng.uniform(size=3000) < truth).astype(int)
    df = pd.DataFrame({"p": rng.binomial(10, truth) / 10, "label": y})
    write_parts(df, tmp_path / "forest", 3, fmt="csv")
    with pytest.warns(RuntimeWarning, match="exactly 0 or 1") as streamed:
        fit_platt(open_dataset(tmp_path / "forest"))
    with pytest.warns(RuntimeWarning, match="exactly 0 or 1") as memory:
        PlattScaling().fit(pbr_core.Predictions.from_arrays(df["p"].to_numpy(), y))
    assert [str(w.message) for w in streamed] == [str(w.message) for w in memory]
    right = df.assign(p=np.where(rng.uniform(size=3000) < 0.11, y, rng.uniform(0.05, 0.95, 3000)))
    write_parts(right, tmp_path / "right", 3, fmt="csv")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_platt(open_dataset(tmp_path / "right"))
