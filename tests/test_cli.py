"""The pbr-calib command line tool: outputs, files and exit codes, through main([...])."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pbr_core
from pbr_core.cli import EXIT_BAD_INPUT, EXIT_FIT_FAILED, EXIT_OK, EXIT_USAGE, main
from pbr_core.loading import save_predictions
from pbr_core.recalibrators import available_methods, load_recalibrator

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data"


@pytest.fixture(scope="module")
def c10_files(tmp_path_factory) -> tuple[Path, Path]:
    """Two small NPZ files of CIFAR-10 logits: a recalibration set and a test set."""
    d = np.load(SAMPLE / "cifar10_resnet110.npz")
    folder = tmp_path_factory.mktemp("cli")
    fit, test = folder / "fit.npz", folder / "test.npz"
    np.savez(fit, logits=d["logits"][:1000], labels=d["labels"][:1000])
    np.savez(test, logits=d["logits"][1000:3000], labels=d["labels"][1000:3000])
    return fit, test


def _first_rows(source: Path, n: int, folder: Path) -> Path:
    """An NPZ file of the first n rows of ``source`` (logits and labels), in ``folder``."""
    d = np.load(source)
    small = folder / "small.npz"
    np.savez(small, logits=d["logits"][:n], labels=d["labels"][:n])
    return small


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def _fit_first_rows(capsys, source: Path, n: int, folder: Path, *argv: str) -> tuple[str, Any]:
    """``pbr-calib fit`` (with ``argv``, ``--quiet``) on the first n rows of ``source``, saved as
    ``folder``/model.json: its standard output and the saved recalibrator."""
    model = folder / "model.json"
    code, out, err = run(capsys, "fit", _first_rows(source, n, folder), *argv, "--out", model, "--quiet")
    assert code == EXIT_OK, err
    return out, load_recalibrator(model)


def test_methods_lists_every_registered_method(capsys) -> None:
    code, out, _ = run(capsys, "methods")
    assert code == EXIT_OK
    for name in available_methods():
        assert name in out
    code, out, _ = run(capsys, "methods", "--format", "json")
    rows = json.loads(out)
    assert [r["method"] for r in rows] == available_methods()
    assert next(r for r in rows if r["method"] == "histogram_binning")["params"] == {
        "n_bins": None, "strategy": "equal_mass", "floor": None, "multiclass": "top_label"}


def test_evaluate_json_matches_the_library(capsys) -> None:
    path = SAMPLE / "cifar100_densenet121.npz"
    code, out, _ = run(capsys, "evaluate", path, "--format", "json", "--n-bins", "15")
    assert code == EXIT_OK
    table = json.loads(out)
    preds = pbr_core.load_predictions(path)
    assert (table["n"], table["K"], table["kind"]) == (10000, 100, "multiclass")
    assert table["optimal_n_bins"] == 21 == pbr_core.optimal_n_bins(10000)
    assert table["ece"] == pbr_core.ece(preds.probs, preds.labels, n_bins=21)
    assert table["ece_at_n_bins"] == pbr_core.ece(preds.probs, preds.labels, n_bins=15)
    assert table["mce"] == pbr_core.mce(preds.probs, preds.labels, n_bins=21)
    assert table["accuracy"] == pbr_core.accuracy(preds.probs, preds.labels)
    assert table["brier"] == pbr_core.brier_score(preds.probs, preds.labels)
    assert table["nll"] == pbr_core.nll(preds.probs, preds.labels)
    assert table["theorem1_bound"] == pbr_core.theorem1_bound(10000, 21)
    assert table["theorem1_bound_at_n_bins"] == pbr_core.theorem1_bound(10000, 15)
    # The ECE's 95% interval: the library's default, with the resamples the dashboard uses too.
    n_boot = pbr_core.default_n_boot(10000)
    assert (table["ece_ci_low"], table["ece_ci_high"]) == pbr_core.ece_bootstrap_ci(
        preds.probs, preds.labels, n_bins=21, n_boot=n_boot)
    assert (table["ece_at_n_bins_ci_low"], table["ece_at_n_bins_ci_high"]) == pbr_core.ece_bootstrap_ci(
        preds.probs, preds.labels, n_bins=15, n_boot=n_boot)
    assert table["ece_ci_low"] <= table["ece"] <= table["ece_ci_high"]


def test_evaluate_table_binary_and_top_label(capsys) -> None:
    code, out, _ = run(capsys, "evaluate", SAMPLE / "cifar10_resnet110_toplabel.csv", "--lipschitz", "2", "--eps", "0.1")
    assert code == EXIT_OK
    lines = dict(line.split(None, 1) for line in out.strip().splitlines())
    assert lines["kind"] == "top_label" and lines["K"] == "n/a"
    # (confidence, correct): the Brier score and NLL of the confidence against correctness (issue 35).
    top = pbr_core.load_predictions(SAMPLE / "cifar10_resnet110_toplabel.csv")
    scores = pbr_core.metrics.target_brier_nll(top.confidence, top.correct)
    assert float(lines["brier"]) == pytest.approx(scores["brier"], rel=1e-5)
    assert float(lines["nll"]) == pytest.approx(scores["nll"], rel=1e-5)
    assert float(lines["ece_ci_low"]) <= float(lines["ece"]) <= float(lines["ece_ci_high"])
    assert float(lines["theorem1_bound"]) == pytest.approx(pbr_core.theorem1_bound(10000, 21, lipschitz=2, eps=0.1), rel=1e-5)
    kitti = SAMPLE / "kitti_random_forest.csv"
    if kitti.exists():
        code, out, _ = run(capsys, "evaluate", kitti, "--format", "json")
        table = json.loads(out)
        preds = pbr_core.load_predictions(kitti)
        assert table["kind"] == "binary" and table["ece"] == pbr_core.ece(preds.probs[:, 1], preds.labels)
        assert (table["ece_ci_low"], table["ece_ci_high"]) == pbr_core.ece_bootstrap_ci(
            preds.probs[:, 1], preds.labels, n_boot=pbr_core.default_n_boot(preds.n))


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_fit_then_apply(capsys, c10_files, tmp_path, suffix: str) -> None:
    fit, test = c10_files
    model = tmp_path / "ts.json"
    code, out, err = run(capsys, "fit", fit, "--method", "temperature", "--out", model)
    assert code == EXIT_OK and "fitted TemperatureScaling" in out and model.exists()
    rec = load_recalibrator(model)
    assert rec.temperature_ > 0
    out_file = tmp_path / f"calibrated{suffix}"
    code, out, _ = run(capsys, "apply", model, test, "--out", out_file)
    assert code == EXIT_OK and "ECE" in out
    back = pbr_core.load_predictions(out_file)
    expected = rec.predict_proba(pbr_core.load_predictions(test))
    np.testing.assert_array_equal(back.labels, np.load(test)["labels"])
    # The loader divides every row by its sum (removing float drift), hence not bit-identical.
    np.testing.assert_allclose(back.probs, expected, rtol=0, atol=1e-15)


def test_fit_with_params(capsys, c10_files, tmp_path) -> None:
    fit, _ = c10_files
    model = tmp_path / "hb.json"
    code, _, _ = run(capsys, "fit", fit, "--method", "histogram_binning", "--param", "n_bins=5",
                     "--param", "strategy=uniform", "--out", model, "--quiet")
    assert code == EXIT_OK
    doc = json.loads(model.read_text())
    assert doc["method"] == "histogram_binning" and doc["params"] == {"n_bins": 5, "strategy": "uniform", "floor": None,
                                                                     "multiclass": "top_label"}
    code, _, _ = run(capsys, "fit", fit, "--method", "vector_scaling", "--param", "bias=false", "--out", model, "--quiet")
    assert code == EXIT_OK and json.loads(model.read_text())["params"]["bias"] is False


def test_fit_with_alpha_selected_by_cross_validation(capsys, c10_files, tmp_path) -> None:
    """--select-alpha runs select_alpha on FILE with the method's parameters, prints the grid, fits with the winner
    (its folds here in two worker processes, --jobs 2: the same scores as select_alpha in this process)."""
    import pandas as pd

    from pbr_core.alpha_selection import select_alpha

    fit, _ = c10_files
    small = _first_rows(fit, 300, tmp_path)
    model, scores = tmp_path / "pbr.json", tmp_path / "scores.csv"
    code, out, err = run(capsys, "fit", small, "--method", "pbr_total_app", "--select-alpha", "--alpha-grid", "0,1",
                         "--alpha-folds", "2", "--alpha-metric", "brier", "--alpha-scores", scores, "--jobs", "2",
                         "--param", "max_iter=30", "--param", "n_mc=10", "--out", model, "--quiet")
    assert code == EXIT_OK, err
    assert "DeprecationWarning" not in err and "torch.jit" not in err
    expected = select_alpha(pbr_core.load_predictions(small), grid=[0.0, 1.0], n_splits=2, metric="brier",
                            objective="pbr_total", mean_approx=True, max_iter=30, n_mc=10)
    assert f"chosen alpha = {expected.best_alpha:g}" in out
    table = [line.split() for line in out.splitlines() if line.split()[:1] == ["<-"]]
    assert len(table) == 1 and float(table[0][1]) == expected.best_alpha
    written = pd.read_csv(scores)
    np.testing.assert_allclose(written["score"], expected.scores["score"], rtol=1e-12)
    np.testing.assert_allclose(written["brier"], written["score"], rtol=0)
    rec = load_recalibrator(model)
    assert f"KL = {rec.kl_:.4g}; {rec.fit_report_['iterations']} iterations on cpu with 10 Monte Carlo draws per entry" in out
    assert f"Corollary 1 (E_rho ECE generalisation gap) <= {rec.bounds_['corollary1']:.4f}" in out
    assert "bounds: approximate: prior fitted on the same rows" in out and "not bounds on the one saved" in out
    assert "cross entropy, which is unbounded" in out  # PBR total: what the bound does not cover
    assert rec.method == "pbr_total_app" and rec.alpha == expected.best_alpha
    assert (rec.max_iter, rec.n_mc, rec.objective, rec.mean_approx) == (30, 10, "pbr_total", True)


def test_evaluate_says_a_theorem_1_bound_of_at_least_1_is_vacuous(tmp_path, capsys):
    """Audit 7's nit, in ``evaluate`` too: on 20 rows Theorem 1's bound is above 1 and says nothing; the
    text says so after the number (the JSON keeps the number)."""
    from pbr_core.cli._common import VACUOUS

    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.95, 20)
    path = tmp_path / "tiny.csv"
    path.write_text("p,y\n" + "".join(f"{a:.4f},{int(rng.random() < a)}\n" for a in p))
    main(["evaluate", str(path)])
    out = capsys.readouterr().out
    bound = pbr_core.theorem1_bound(20, pbr_core.optimal_n_bins(20))
    assert bound >= 1 and re.search(rf"^theorem1_bound +{bound:.4f} {re.escape(VACUOUS)}$", out, re.M), out
    main(["evaluate", str(path), "--format", "json"])
    assert json.loads(capsys.readouterr().out)["theorem1_bound"] == pytest.approx(bound)


def test_fit_says_a_bound_of_at_least_1_is_vacuous(capsys, c10_files, tmp_path) -> None:
    """Audit 7: ``fit`` printed "Corollary 1 ... <= 1.0418" without saying that a bound of at least 1
    says nothing (the dashboard says "Vacuous here"). On 150 CIFAR-10 rows both bounds are above 1."""
    from pbr_core.cli.fit import VACUOUS, bound_shown

    assert bound_shown(0.9991) == "0.9991" and bound_shown(1.0) == f"1.0000 {VACUOUS}"
    assert bound_shown(1.0418) == "1.0418 (vacuous: at least 1, says nothing)"
    out, rec = _fit_first_rows(capsys, c10_files[0], 150, tmp_path, "--method", "pbr", "--param", "max_iter=20",
                               "--param", "n_mc=5")
    b = rec.bounds_
    assert b["corollary1"] >= 1 and b["corollary2"] >= 1
    assert (f"Corollary 1 (E_rho ECE generalisation gap) <= {b['corollary1']:.4f} {VACUOUS}; Corollary 2 "
            f"(E_rho |TCE - ECE|) <= {b['corollary2']:.4f} {VACUOUS} (n = 150") in out


def test_fit_with_alpha_selection_survives_a_failed_fit(capsys, c10_files, tmp_path, monkeypatch) -> None:
    """One (alpha, fold) fit of --select-alpha fails: the command still fits with the best of the
    others, its table marks the failed folds and the warning says which fit failed and why."""
    from recal_doubles import failing_pbr_fits

    fit, _ = c10_files
    small = _first_rows(fit, 200, tmp_path)
    failing_pbr_fits(monkeypatch, lambda alpha, n, nth: alpha == 0.0 and n == 100)  # alpha 0 on both folds
    model = tmp_path / "pbr.json"
    code, out, err = run(capsys, "fit", small, "--method", "pbr", "--select-alpha", "--alpha-grid", "0,1",
                         "--alpha-folds", "2", "--param", "max_iter=20", "--param", "n_mc=8", "--out", model,
                         "--quiet")
    assert code == EXIT_OK, err
    assert "chosen alpha = 1" in out and "failed folds" in out
    rows = {r[-5]: r for r in (line.split() for line in out.splitlines()) if r[:1] in (["<-"], ["0"], ["1"])
            and len(r) >= 5}
    assert rows["0"][1:] == ["NaN", "NaN", "NaN", "2"] and rows["1"][0] == "<-" and rows["1"][-1] == "0"
    assert "The PBR fit for alpha = 0 on fold 1 of 2 failed (GP fit diverged: test double)" in err
    assert load_recalibrator(model).alpha == 1.0


def test_fit_says_when_it_ended_at_the_prior(capsys, c10_files, tmp_path, monkeypatch) -> None:
    """The note follows the fit's own record (forced here as in tests/gp/test_training.py), not KL < 1e-3."""
    import pbr_core.gp.training as training

    fit, _ = c10_files
    small = _first_rows(fit, 100, tmp_path)
    argv = ("fit", small, "--method", "pbr_app", "--param", "max_iter=5", "--param", "n_mc=5",
            "--out", tmp_path / "m.json", "--quiet")
    code, out, err = run(capsys, *argv)
    assert code == EXIT_OK, err
    assert "ended at the prior" not in out
    monkeypatch.setattr(training, "PRIOR_SHIFT", 1e9)
    code, out, err = run(capsys, *argv)
    assert code == EXIT_OK, err
    assert "note: the fit ended at the prior" in out and "a smaller alpha (--alpha A) or more rows" in out


@pytest.mark.parametrize("argv,message", [
    ([], "required"),
    (["nope"], "invalid choice"),
    (["fit", "{fit}", "--method", "nope", "--out", "{tmp}/m.json"], "Unknown recalibration method 'nope'"),
    (["fit", "{fit}", "--method", "platt", "--param", "foo=1", "--out", "{tmp}/m.json"], "Invalid parameter(s) ['foo']"),
    (["fit", "{fit}", "--method", "histogram_binning", "--param", "n_bins=0", "--out", "{tmp}/m.json"], "`n_bins`"),
    (["fit", "{fit}", "--method", "platt", "--param", "targets", "--out", "{tmp}/m.json"], "KEY=VALUE"),
    (["fit", "{fit}", "--method", "platt"], "--out"),
    (["fit", "{fit}", "--method", "platt", "--out", "{tmp}/m.txt"], "ending in .json"),
    (["fit", "{fit}", "--method", "platt", "--out", "{tmp}/missing/m.json"], "does not exist"),
    (["apply", "{tmp}/m.json", "{fit}", "--out", "{tmp}/out.xlsx"], "ending in .csv"),
    (["evaluate", "{fit}", "--n-bins", "0"], "positive integer"),
    (["fit", "{fit}", "--method", "temperature", "--select-alpha", "--out", "{tmp}/m.json"], "applies to the PBR methods"),
    (["fit", "{fit}", "--method", "pbr", "--alpha-grid", "0,1", "--out", "{tmp}/m.json"], "needs --select-alpha"),
    (["fit", "{fit}", "--method", "pbr", "--select-alpha", "--param", "alpha=0.5", "--out", "{tmp}/m.json"],
     "do not also give --param alpha"),
    (["fit", "{fit}", "--method", "pbr", "--select-alpha", "--alpha-grid", "0,x", "--out", "{tmp}/m.json"],
     "comma-separated numbers"),
    (["fit", "{fit}", "--method", "pbr", "--select-alpha", "--alpha-grid", "0,-1", "--out", "{tmp}/m.json"], ">= 0"),
    (["fit", "{fit}", "--method", "pbr", "--select-alpha", "--alpha-scores", "{tmp}/s.txt", "--out", "{tmp}/m.json"],
     "ending in .csv"),
    (["evaluate", "{fit}", "--eps", "1.5"], "(0, 1)"),
    (["fit", "{fit}", "--method", "pbr", "--select-alpha", "--jobs", "0", "--out", "{tmp}/m.json"], "-1 (every core)"),
    (["fit", "{fit}", "--method", "pbr", "--jobs", "2", "--out", "{tmp}/m.json"], "--jobs needs --select-alpha"),
    # no file could make these valid: a usage choice, not a bad input file (audit 10a: it exited 3)
    (["evaluate", "{fit}", "--by", "true class"], "--by 'true class': grouping by the true class is not offered"),
    (["evaluate", "{tmp}/logs", "--by", "true class"], "--by 'true class': grouping by the true class is not offered"),
    (["evaluate", "{fit}", "--by", "each class", "--by", "predicted class"], "cannot be combined with another --by"),
])
def test_usage_errors_exit_2(capsys, c10_files, tmp_path, argv, message) -> None:
    argv = [a.format(fit=c10_files[0], tmp=tmp_path) for a in argv]
    code, _, err = run(capsys, *argv)
    assert code == EXIT_USAGE
    assert message in err
    assert not (tmp_path / "m.json").exists()


def test_bad_input_files_exit_3(capsys, c10_files, tmp_path) -> None:
    fit, test = c10_files
    (tmp_path / "broken.csv").write_text("a,b,label\n0.5,0.7,1\n")
    code, _, err = run(capsys, "evaluate", tmp_path / "broken.csv")
    assert code == EXIT_BAD_INPUT and err.startswith("pbr-calib: error: broken.csv:")
    code, _, err = run(capsys, "evaluate", tmp_path / "absent.csv")
    assert code == EXIT_BAD_INPUT and "not found" in err
    code, _, err = run(capsys, "fit", SAMPLE / "cifar10_resnet110_toplabel.csv", "--method", "temperature",
                       "--out", tmp_path / "m.json")
    assert code == EXIT_BAD_INPUT and "cannot be recalibrated" in err
    # A model file that is not one, of another version, or for another number of classes.
    (tmp_path / "junk.json").write_text("{not json")
    code, _, err = run(capsys, "apply", tmp_path / "junk.json", test, "--out", tmp_path / "o.csv")
    assert code == EXIT_BAD_INPUT and "not a JSON recalibrator file" in err
    assert run(capsys, "fit", fit, "--method", "temperature", "--out", tmp_path / "m.json")[0] == EXIT_OK
    doc = json.loads((tmp_path / "m.json").read_text())
    (tmp_path / "v9.json").write_text(json.dumps({**doc, "format_version": 9}))
    code, _, err = run(capsys, "apply", tmp_path / "v9.json", test, "--out", tmp_path / "o.csv")
    assert code == EXIT_BAD_INPUT and "format version 9" in err
    code, _, err = run(capsys, "apply", tmp_path / "m.json", SAMPLE / "cifar100_densenet121.npz", "--out", tmp_path / "o.csv")
    assert code == EXIT_BAD_INPUT and "Expected predictions with 10 classes" in err
    code, _, err = run(capsys, "apply", tmp_path / "absent.json", test, "--out", tmp_path / "o.csv")
    assert code == EXIT_BAD_INPUT and "cannot read" in err
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize("name,damage,message", [
    ("deep.json", "[" * 100_000, "not a JSON recalibrator file (its lists or objects are nested too deeply"),
    ("negative.json", {"state": {"temperature": -1.5}},
     "Damaged 'temperature' recalibrator file: state.temperature must be a finite number above 0, but the file holds -1.5."),
    ("object.json", {"state": {"temperature": {"__ndarray__": [2.0], "dtype": "object", "shape": []}}},
     'state.temperature must be an array of numbers, but its dtype is "object"'),
    ("version.json", {"format_version": "1"}, 'the "format_version" field must be the number 1, but the file holds the text "1"'),
])
def test_a_damaged_recalibrator_file_exits_3_with_one_line(capsys, c10_files, tmp_path, name, damage, message) -> None:
    fit, test = c10_files
    assert run(capsys, "fit", fit, "--method", "temperature", "--out", tmp_path / "m.json")[0] == EXIT_OK
    doc = json.loads((tmp_path / "m.json").read_text())
    bad = tmp_path / name
    bad.write_text(damage if isinstance(damage, str) else json.dumps({**doc, **damage}))
    code, out, err = run(capsys, "apply", bad, test, "--out", tmp_path / "o.csv")
    assert code == EXIT_BAD_INPUT and out == ""
    assert err.startswith(f"pbr-calib: error: {bad}: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err and "RecursionError" not in err
    assert not (tmp_path / "o.csv").exists()


def test_fit_failure_exits_4(capsys, tmp_path) -> None:
    data = tmp_path / "separable.csv"
    save_predictions(np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9]), [0, 0, 0, 1, 1, 1], data)
    code, _, err = run(capsys, "fit", data, "--method", "platt", "--param", "targets=labels", "--out", tmp_path / "m.json")
    assert code == EXIT_FIT_FAILED and "fitting platt failed" in err and "separated" in err
    assert not (tmp_path / "m.json").exists()
    code, _, err = run(capsys, "fit", data, "--method", "platt", "--out", tmp_path / "m.json", "--quiet")
    assert code == EXIT_OK and err.startswith("pbr-calib: warning:") and "smoothed targets" in err


def test_help_documents_exit_codes(capsys) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == EXIT_OK and "exit codes:" in out and "4  fitting failed" in out


def test_python_dash_m_subprocess(c10_files) -> None:
    proc = subprocess.run([sys.executable, "-m", "pbr_core.cli", "evaluate", str(c10_files[1]), "--format", "json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["n"] == 2000
    proc = subprocess.run([sys.executable, "-m", "pbr_core.cli", "evaluate", "/no/such/file.csv"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == EXIT_BAD_INPUT and "Traceback" not in proc.stderr


def test_python_dash_m_streamed_errors_are_messages(tmp_path) -> None:
    """The streamed subcommands raise pbr_core.cli.CLIError; under `python -m pbr_core.cli` (module
    __main__) they were shown as a traceback."""
    proc = subprocess.run([sys.executable, "-m", "pbr_core.cli", "evaluate", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
    assert "Traceback" not in proc.stderr and "no file found" in proc.stderr


def test_apply_to_unlabelled_new_data(capsys, c10_files, tmp_path) -> None:
    """Shipping a recalibrator: the new data has no labels; apply still works and writes no label column."""
    fit, test = c10_files
    model = tmp_path / "ts.json"
    assert run(capsys, "fit", fit, "--method", "temperature", "--out", model)[0] == EXIT_OK
    unlabelled = tmp_path / "new_logits.npz"
    np.savez(unlabelled, logits=np.load(test)["logits"])
    out_file = tmp_path / "calibrated.csv"
    code, out, _ = run(capsys, "apply", model, unlabelled, "--out", out_file)
    assert code == EXIT_OK and "unlabelled" in out
    assert "label" not in out_file.read_text().splitlines()[0].split(",")
    back = pbr_core.load_predictions(out_file, require_labels=False)
    expected = load_recalibrator(model).predict_proba(np.load(test)["logits"])
    np.testing.assert_allclose(back.probs, expected, rtol=0, atol=1e-12)


def test_compare_prints_summary_and_writes_the_fold_table(capsys, tmp_path) -> None:
    from pbr_core.experiments import compare

    data = SAMPLE / "cifar10_resnet110.npz"
    out_file = tmp_path / "table.csv"
    code, out, _ = run(capsys, "compare", data, "--methods", "uncalibrated,temperature", "--n-re", "500",
                       "--folds", "2", "--quiet", "--out", out_file, "--jobs", "2")  # folds in two processes
    assert code == EXIT_OK and "temperature" in out and "±" in out
    import pandas as pd

    table = pd.read_csv(out_file)
    assert len(table) == 4 and set(table["method"]) == {"uncalibrated", "temperature"}
    expected = compare(pbr_core.load_predictions(data), ["uncalibrated", "temperature"], n_re=500, n_folds=2)
    np.testing.assert_allclose(table.sort_values(["method", "fold"])["ece"].to_numpy(),
                               expected.sort_values(["method", "fold"])["ece"].to_numpy(), rtol=0, atol=1e-12)
    code, _, err = run(capsys, "compare", data, "--methods", "no_such_method", "--quiet")
    assert code == EXIT_USAGE and "no_such_method" in err
    code, _, err = run(capsys, "compare", data, "--n-re", "20000", "--quiet")
    assert code == EXIT_USAGE


def test_compare_with_a_fixed_test_set_size(capsys, tmp_path) -> None:
    from pbr_core.experiments import compare

    data = SAMPLE / "cifar10_resnet110.npz"
    out_file = tmp_path / "table.csv"
    code, out, _ = run(capsys, "compare", data, "--methods", "uncalibrated,temperature", "--n-re", "500",
                       "--n-te", "3000", "--folds", "2", "--quiet", "--out", out_file)
    assert code == EXIT_OK and "n_re = 500, n_te = 3000" in out
    import pandas as pd

    table = pd.read_csv(out_file)
    assert (table["n_te"] == 3000).all()
    expected = compare(pbr_core.load_predictions(data), ["uncalibrated", "temperature"], n_re=500, n_folds=2,
                       n_te=3000)
    np.testing.assert_allclose(table["ece"].to_numpy(), expected["ece"].to_numpy(), rtol=0, atol=1e-12)
    code, _, err = run(capsys, "compare", data, "--n-re", "500", "--n-te", "9600", "--quiet")
    assert code == EXIT_USAGE and "--n-te 9600" in err


def test_compare_prints_paired_tests_and_the_binary_ece_choice(capsys, tmp_path) -> None:
    import pandas as pd

    from pbr_core.experiments import paired_tests

    data = SAMPLE / "kitti_random_forest.csv"
    if not data.exists():
        pytest.skip("kitti_random_forest.csv is not bundled")
    out_file = tmp_path / "table.csv"
    code, out, _ = run(capsys, "compare", data, "--methods", "uncalibrated,platt,beta", "--n-re", "500",
                       "--folds", "6", "--quiet", "--out", out_file, "--pairs", "beta:platt")
    assert code == EXIT_OK
    assert "ECE of p(y=1)" in out  # binary data: the ECE definition is named (the app's p(y=1), by default)
    table = pd.read_csv(out_file)
    expected = paired_tests(table, "ece", [("beta", "platt")]).iloc[0]
    line = next(x for x in out.splitlines() if x.strip().startswith("beta - platt"))
    from pbr_core.significance import p_words   # one p-value format: the pages', the reports' and this

    assert f"{expected['mean_diff']:+.4f}" in line and f"t-test {p_words(expected['t_p'])}" in line
    assert f"Wilcoxon {p_words(expected['wilcoxon_p'])}" in line
    # The interval printed is the corrected test's (the table has n_re, n_te), and the header says so.
    assert f"[{expected['ci_low']:+.4f}, {expected['ci_high']:+.4f}]" in line
    assert "95% interval of the mean difference for overlapping folds, the corrected t-test's" in out
    # The verdict's p-value (the corrected t-test, Holm over the one pair asked for) is printed first.
    assert f"decides {p_words(expected['decisive_p'])};" in line and expected["holm_pairs"] == 1
    assert f"t-test for overlapping folds {p_words(expected['corrected_t_p'])}" in line
    verdict = f"{expected['better']} better" if expected["better"] else "no difference shown"
    assert line.split(": ")[-1].startswith(verdict)
    assert "corrected resampled t-test (Nadeau & Bengio) p-value after Holm's correction over 1 pair" in out
    assert "Wilcoxon signed-rank" in out and "2/2^6" in out and "assumed the folds independent" not in out
    code, _, err = run(capsys, "compare", data, "--methods", "uncalibrated,platt", "--pairs", "platt:gp", "--quiet")
    assert code == EXIT_USAGE and "gp" in err and "--methods" in err
    code, out, _ = run(capsys, "compare", data, "--methods", "uncalibrated,platt", "--n-re", "500", "--folds", "2",
                       "--quiet", "--binary-ece", "top_label")
    assert code == EXIT_OK and "top-label ECE" in out and "paper's tables" in out
    code, out, _ = run(capsys, "compare", data, "--methods", "uncalibrated,platt,beta", "--n-re", "500",
                       "--folds", "6", "--quiet", "--pairs", "beta:platt", "--format", "json")
    doc = json.loads(out)
    assert code == EXIT_OK and doc["paired_tests"][0]["t_p"] == pytest.approx(expected["t_p"], abs=1e-10)  # JSON: 10 decimals
    got = doc["paired_tests"][0]
    assert got["decisive_p"] == pytest.approx(expected["decisive_p"], abs=1e-10) and got["better"] == expected["better"]
    assert got["folds_assumed_independent"] is False and got["holm_pairs"] == 1
    assert {r["method"] for r in doc["summary"]} == {"uncalibrated", "platt", "beta"}


def test_compare_paired_text_writes_small_p_values_and_names_its_interval() -> None:
    """'decides p < 0.001', never 'decides p = < 0.001' (a user audit); the header names the interval
    printed: the corrected test's with fold sizes, the plain t interval without them."""
    import pandas as pd

    from pbr_core.cli.compare import _paired_text
    from pbr_core.experiments import paired_tests

    rng = np.random.default_rng(0)
    base = 0.05 + 0.004 * rng.standard_normal(10)
    table = pd.DataFrame([{"method": m, "fold": f, "ece": v, "n_re": 500, "n_te": 500}
                          for m, vs in (("uncalibrated", base), ("temperature", base - 0.03 + 1e-4 * rng.standard_normal(10)))
                          for f, v in enumerate(vs)])
    tests = paired_tests(table, "ece")
    assert (tests[["t_p", "corrected_t_p", "decisive_p"]] < 1e-3).all(axis=None)
    text = _paired_text(tests, "ece")
    assert "decides p < 0.001;" in text and "t-test for overlapping folds p < 0.001" in text
    assert "p = <" not in text and "p = n/a" not in text
    r = tests.iloc[0]
    assert f"[{r['ci_low']:+.4f}, {r['ci_high']:+.4f}]" in text and "overlapping folds, the corrected t-test's" in text
    plain = _paired_text(paired_tests(table.drop(columns=["n_re", "n_te"]), "ece"), "ece")
    assert "95% t interval of the mean difference, folds assumed independent" in plain
    assert "t-test for overlapping folds p = n/a" in plain  # no fold sizes: not run, said in words


def test_compare_defaults_to_the_apps_binary_ece_the_same_as_evaluate(capsys, tmp_path) -> None:
    """One binary ECE (issue 33): compare measures p(y=1) as evaluate and the dashboard do, unless
    --binary-ece top_label asks for the paper's tables' ECE."""
    import pandas as pd

    from pbr_core.experiments import compare

    data = SAMPLE / "kitti_random_forest.csv"
    if not data.exists():
        pytest.skip("kitti_random_forest.csv is not bundled")
    out_file = tmp_path / "table.csv"
    assert run(capsys, "compare", data, "--methods", "uncalibrated", "--n-re", "500", "--folds", "2", "--quiet",
               "--out", out_file)[0] == EXIT_OK
    preds = pbr_core.load_predictions(data)
    pos = compare(preds, ["uncalibrated"], n_re=500, n_folds=2, binary_ece="positive")
    np.testing.assert_allclose(pd.read_csv(out_file)["ece"], pos["ece"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(pd.read_csv(out_file)["brier"], pos["brier"], rtol=0, atol=1e-12)
    assert run(capsys, "compare", data, "--methods", "uncalibrated", "--n-re", "500", "--folds", "2", "--quiet",
               "--out", out_file, "--binary-ece", "top_label")[0] == EXIT_OK
    top = compare(preds, ["uncalibrated"], n_re=500, n_folds=2, binary_ece="top_label")
    np.testing.assert_allclose(pd.read_csv(out_file)["ece"], top["ece"], rtol=0, atol=1e-12)


def test_fit_with_a_prior_split_prints_bounds_valid_as_stated(capsys, c10_files, tmp_path) -> None:
    from pbr_core.cli.fit import bound_shown

    out, rec = _fit_first_rows(capsys, c10_files[0], 300, tmp_path, "--method", "gp", "--prior-split", "0.4",
                               "--param", "max_iter=30")
    assert rec.prior_split == 0.4 and rec.bounds_["n"] == 180
    assert "bounds: valid as stated (prior chosen on 120 rows, bounds on the other 180 of 300)" in out
    assert f"E_rho |TCE - ECE|) <= {bound_shown(rec.bounds_['corollary2'])} (n = 180," in out  # 1.09: vacuous
    code, _, err = run(capsys, "fit", tmp_path / "small.npz", "--method", "gp", "--prior-split", "0.4", "--param",
                       "prior_split=0.2", "--out", tmp_path / "model.json", "--quiet")
    assert code == EXIT_USAGE and "once" in err


def test_fit_sample_of_a_numpy_file(capsys, tmp_path) -> None:
    """--sample N on an NPZ file (the streamed reader reads Parquet and CSV only): the file is read
    whole and N rows are drawn uniformly without replacement with --seed, in file order."""
    from pbr_core.recalibrators import TemperatureScaling, load_recalibrator

    out = tmp_path / "ts.json"
    code, text, _ = run(capsys, "fit", SAMPLE / "cifar10_resnet110.npz", "--sample", 300, "--seed", 4,
                        "--method", "temperature", "--out", out, "--quiet")
    assert code == 0 and "sampled 300 rows of" in text and "(read whole; seed 4)" in text
    preds = pbr_core.load_predictions(SAMPLE / "cifar10_resnet110.npz")
    rows = np.sort(np.random.default_rng(4).choice(preds.n, size=300, replace=False))
    expected = TemperatureScaling().fit(preds.subset(rows))
    assert load_recalibrator(out).temperature_ == pytest.approx(expected.temperature_, rel=1e-12)


def test_fit_says_which_classes_a_k_100_fit_drew(capsys, tmp_path) -> None:
    """From 50 classes on a PBR fit draws each row's largest classes (mc_classes="auto"): the fit's
    summary line says so, with the T the fit ended with."""
    d = np.load(Path(__file__).resolve().parents[1] / "sample_data" / "cifar100_densenet121.npz")
    small = tmp_path / "c100.npz"
    np.savez(small, logits=d["logits"][:120], labels=d["labels"][:120])
    model = tmp_path / "pbr.json"
    code, out, err = run(capsys, "fit", small, "--method", "pbr", "--param", "max_iter=20",
                         "--param", "n_predict_samples=5", "--out", model, "--quiet")
    assert code == EXIT_OK, err
    rec = load_recalibrator(model)
    t = rec.fit_report_["mc_classes"]
    drew = (f" of each row's {t} largest scores and its label (the other classes through their expectation)"
            if t else "")
    assert f"iterations on cpu with 16 Monte Carlo draws per entry{drew}," in out


def test_evaluate_says_how_the_file_was_read(capsys, tmp_path) -> None:
    """The loader's notes (which column is what, which class is 1) are printed under the table, in the
    JSON and on a streamed file: a p_churn column read as p(stay) inverted every metric of a file
    in the wild, and the note saying so was never shown."""
    rng = np.random.default_rng(0)
    p = rng.beta(2, 2, 300)
    y = rng.random(300) < p
    path = tmp_path / "churn.csv"
    path.write_text("p_churn,label\n" + "".join(f"{a},{'churn' if b else 'stay'}\n" for a, b in zip(p, y)))
    code, out, _ = run(capsys, "evaluate", path)
    assert code == EXIT_OK
    head, notes = out.split("how the file was read:\n")
    lines = dict(line.split(None, 1) for line in head.strip().splitlines())
    assert float(lines["accuracy"]) == pytest.approx(np.mean((p > 0.5) == y))
    assert float(lines["ece"]) == pytest.approx(pbr_core.ece(p, y.astype(int)), rel=1e-5)
    assert "'churn' is class 1" in notes and "'p_churn'" in notes
    code, out, _ = run(capsys, "evaluate", path, "--format", "json")
    assert any("'churn' is class 1" in n for n in json.loads(out)["notes"])
    code, out, _ = run(capsys, "evaluate", path, "--stream", "--quiet")
    assert code == EXIT_OK and "'churn' is class 1" in out.split("how the file was read:\n")[1]


def test_one_log_odds_column_with_input_type_logits(capsys, tmp_path) -> None:
    """A CSV of a logistic model's log-odds (scikit-learn, real data) evaluates with --input-type
    logits to the metrics of the model's own predict_proba, in memory and streamed; without it the
    error says how to read the column."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    x, y = load_breast_cancer(return_X_y=True)
    x = StandardScaler().fit_transform(x)
    model = LogisticRegression(C=0.1, max_iter=1000).fit(x[::2], y[::2])
    path = tmp_path / "margins.csv"
    path.write_text("id,log_odds,label\n" + "".join(
        f"{i},{float(m)!r},{t}\n" for i, (m, t) in enumerate(zip(model.decision_function(x[1::2]), y[1::2]))))
    probs = model.predict_proba(x[1::2])
    for extra in ((), ("--stream",)):
        code, out, _ = run(capsys, "evaluate", path, "--input-type", "logits", "--format", "json", "--quiet", *extra)
        assert code == EXIT_OK
        table = json.loads(out)
        assert (table["n"], table["K"], table["kind"]) == (len(probs), 2, "binary")
        assert table["ece"] == pytest.approx(pbr_core.ece(probs, y[1::2]), abs=1e-12)
        # p(y=1) against y: half the two-class Brier score, as the ECE beside it measures p(y=1)
        assert table["brier"] == pytest.approx(pbr_core.brier_score(probs, y[1::2]) / 2, abs=1e-12)
    code, out, err = run(capsys, "evaluate", path)
    assert code == EXIT_BAD_INPUT and "log-odds of class 1" in err and "--input-type logits" in err


def test_fit_alpha_option(capsys, c10_files, tmp_path) -> None:
    """--alpha A is --param alpha=A for the PBR methods; elsewhere, twice, or with --select-alpha it
    is a usage error that says so."""
    fit, _ = c10_files
    out = tmp_path / "pbr.json"
    code, _, err = run(capsys, "fit", fit, "--method", "pbr_app", "--alpha", "0.25", "--param", "max_iter=5",
                       "--out", out, "--quiet")
    assert code == EXIT_OK, err
    assert load_recalibrator(out).alpha == 0.25
    for extra, message in ((["--method", "temperature"], "--alpha applies to the PBR methods"),
                           (["--method", "pbr", "--param", "alpha=0.5"], "give alpha once"),
                           (["--method", "pbr", "--select-alpha"], "give alpha once")):
        code, _, err = run(capsys, "fit", fit, "--alpha", "0.25", *extra, "--out", out)
        assert code == EXIT_USAGE and message in err
    code, _, err = run(capsys, "fit", fit, "--method", "pbr", "--alpha", "-1", "--out", out)
    assert code == EXIT_USAGE and "finite number >= 0" in err


def test_compare_on_a_small_file_proposes_half_and_refuses_a_tiny_test_set(capsys, tmp_path) -> None:
    """Issue 35: 504 rows (random rows of a real KITTI model): the default n_re is 252, not 1000 or 503;
    a test set of fewer than 144 rows is refused with why and which option to change; with fewer than
    6 folds no method is named best and no paired test is reported."""
    import pandas as pd

    frame = pd.read_csv(SAMPLE / "kitti_random_forest.csv")
    rows = np.sort(np.random.default_rng(0).choice(len(frame), size=504, replace=False))
    path = tmp_path / "small.csv"
    frame.iloc[rows].to_csv(path, index=False)
    code, out, _ = run(capsys, "compare", path, "--methods", "uncalibrated,platt", "--folds", "3", "--quiet")
    assert code == EXIT_OK and "504 rows, K = 2: n_re = 252, n_te = 252, 3 folds" in out
    assert "With 3 folds no difference between methods can be shown" in out and "paired tests: not run" in out
    assert "Wilcoxon p =" not in out and "best ECE:" not in out
    code, _, err = run(capsys, "compare", path, "--n-re", "503", "--quiet")
    assert code == EXIT_USAGE and "A test set of 1 row is too small to say anything" in err
    assert "Give --n-re 360 or less, so that at least 144 rows are left to test on." in err
    code, _, err = run(capsys, "compare", path, "--n-te", "100", "--quiet")
    assert code == EXIT_USAGE and "100 rows is too small" in err and "Give --n-te 144 or more" in err
    # JSON: the best flag only where the folds show it (never with 3 folds).
    code, out, _ = run(capsys, "compare", path, "--methods", "uncalibrated,platt", "--folds", "3", "--quiet",
                       "--format", "json")
    assert code == EXIT_OK and not any(r["best"] for r in json.loads(out))
    # apply: the ECE of fewer than 144 rows is not measured, and the reason is given.
    model = tmp_path / "platt.json"
    assert run(capsys, "fit", path, "--method", "platt", "--out", model, "--quiet")[0] == EXIT_OK
    tiny = tmp_path / "tiny.csv"
    frame.iloc[rows[:100]].to_csv(tiny, index=False)
    code, out, _ = run(capsys, "apply", model, tiny, "--out", tmp_path / "out.csv")
    assert code == EXIT_OK and "ECE not measured: A test set of 100 rows is too small" in out
    # The rows it was fitted on: a random forest's scores repeat, so no row is known to be a fit row, but
    # the file holds every fit value exactly as often as its fit rows (by chance: below 1 in a million): no ECE.
    code, out, _ = run(capsys, "apply", model, path, "--out", tmp_path / "out.csv")
    assert code == EXIT_OK and "ECE not measured: in-sample: this file appears to be the 504 rows" in out
    assert "-> " not in out
    assert run(capsys, "fit", path, "--method", "platt", "--out", model, "--quiet", "--no-fit-rows")[0] == EXIT_OK
    code, out, _ = run(capsys, "apply", model, path, "--out", tmp_path / "out.csv")
    assert code == EXIT_OK and "ECE of p(y=1)" in out and "-> " in out
    assert "fit rows: not recorded in" in out


def test_apply_venn_abers_writes_each_class_interval(capsys, tmp_path) -> None:
    """The (p0, p1) interval beside each written probability column (<column>_low, <column>_high), equal
    to predict_interval, the probability inside it; the file reads back (the interval columns are kept
    as metadata); a formula-like header is neutralised in the interval columns' names too."""
    import pandas as pd

    df = pd.read_csv(SAMPLE / "kitti_xgboost.csv").rename(columns={"p_positive": "@risk"})
    df["note"] = ["=1+1"] * len(df)
    df.iloc[:1000].to_csv(tmp_path / "fit.csv", index=False)
    df.iloc[1000:3000].to_csv(tmp_path / "new.csv", index=False)
    model = tmp_path / "va.json"
    assert run(capsys, "fit", tmp_path / "fit.csv", "--method", "venn_abers", "--out", model, "--quiet")[0] == EXIT_OK
    out_file = tmp_path / "calibrated.csv"
    code, out, _ = run(capsys, "apply", model, tmp_path / "new.csv", "--out", out_file)
    assert code == EXIT_OK and "<column>_low and <column>_high" in out
    assert out_file.read_text().splitlines()[0] == "'@risk,'@risk_low,'@risk_high,label,note"
    written = pd.read_csv(out_file)
    assert written["note"].eq("'=1+1").all()
    rec = load_recalibrator(model)
    new = pbr_core.load_predictions(tmp_path / "new.csv")
    low, high = rec.predict_interval(new)
    np.testing.assert_allclose(written["'@risk_low"], low[:, 1], rtol=0, atol=1e-15)
    np.testing.assert_allclose(written["'@risk_high"], high[:, 1], rtol=0, atol=1e-15)
    p = written["'@risk"].to_numpy()
    assert np.all((low[:, 1] <= p) & (p <= high[:, 1])) and np.mean(high[:, 1] - low[:, 1]) > 0
    back = pbr_core.load_predictions(out_file)
    assert back.columns_with_role("score") == ["'@risk"] and back.n == 2000
    np.testing.assert_allclose(back.probs, rec.predict_proba(new), rtol=0, atol=1e-15)
    # --raw-csv: the names as they are
    code, _, _ = run(capsys, "apply", model, tmp_path / "new.csv", "--out", out_file, "--raw-csv")
    assert out_file.read_text().splitlines()[0] == "@risk,@risk_low,@risk_high,label,note"


def test_apply_cross_venn_abers_multiclass_parquet(capsys, c10_files, tmp_path) -> None:
    fit, test = c10_files
    model = tmp_path / "cvap.json"
    assert run(capsys, "fit", fit, "--method", "venn_abers_cross", "--param", "n_splits=3", "--out", model,
               "--quiet")[0] == EXIT_OK
    out_file = tmp_path / "calibrated.parquet"
    assert run(capsys, "apply", model, test, "--out", out_file)[0] == EXIT_OK
    import pandas as pd

    written = pd.read_parquet(out_file)
    assert list(written.columns[:6]) == ["0", "0_low", "0_high", "1", "1_low", "1_high"]
    low, high = load_recalibrator(model).predict_interval(pbr_core.load_predictions(test))
    np.testing.assert_array_equal(written[[f"{k}_low" for k in range(10)]].to_numpy(), low)
    np.testing.assert_array_equal(written[[f"{k}_high" for k in range(10)]].to_numpy(), high)


def test_apply_refuses_an_interval_column_taken_by_the_file(capsys, tmp_path) -> None:
    import pandas as pd

    df = pd.read_csv(SAMPLE / "kitti_xgboost.csv").iloc[:600]
    df.to_csv(tmp_path / "fit.csv", index=False)
    df.assign(p_positive_low="x").to_csv(tmp_path / "new.csv", index=False)
    model = tmp_path / "va.json"
    assert run(capsys, "fit", tmp_path / "fit.csv", "--method", "venn_abers", "--out", model, "--quiet")[0] == EXIT_OK
    code, _, err = run(capsys, "apply", model, tmp_path / "new.csv", "--out", tmp_path / "o.csv")
    assert code == EXIT_BAD_INPUT and "'p_positive_low' would replace a column of the same name" in err


def test_apply_measures_ece_on_a_file_whose_label_is_found_by_its_values(capsys, tmp_path) -> None:
    """A recidivism export (as /tmp/audit/f1_recid.csv): 'two_year_recid' is found by its values by fit
    and evaluate, so apply finds it too (without requiring it) and reports ECE before and after; the
    before is evaluate's ECE of the same file."""
    rng = np.random.default_rng(4)
    n = 1500
    age = rng.integers(18, 70, n)
    p_true = 1 / (1 + np.exp(-(-0.5 + 0.03 * (40 - age) + rng.normal(0, 1, n))))
    path = tmp_path / "recid.csv"
    path.write_text("person_id,age,score,two_year_recid\n" + "".join(
        f"{10001 + i},{a},{min(max(p + 0.06, 0.01), 0.99):.4f},{int(rng.random() < p)}\n"
        for i, (a, p) in enumerate(zip(age, p_true))))
    model, out_file = tmp_path / "ts.json", tmp_path / "calibrated.csv"
    # Saved without its fit rows, so that apply measures the same file (else: in-sample, no ECE).
    assert run(capsys, "fit", path, "--method", "temperature", "--out", model, "--no-fit-rows")[0] == EXIT_OK
    code, out, _ = run(capsys, "apply", model, path, "--out", out_file)
    assert code == EXIT_OK and "unlabelled" not in out
    assert f"applied temperature to {n} rows of recid.csv: ECE " in out
    before = float(out.split(": ECE ")[1].split(" -> ")[0])
    code, table, _ = run(capsys, "evaluate", path, "--format", "json", "--quiet")
    assert code == EXIT_OK and before == pytest.approx(json.loads(table)["ece"], abs=5e-5)
    assert out_file.read_text().splitlines()[0] == "person_id,age,score,two_year_recid"
