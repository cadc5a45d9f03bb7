"""``pbr-calib evaluate --fail-above`` / ``--require-below`` / ``--max-group-gap`` (CI gates, exit
code 5) and the CORP decomposition in evaluate's output (issue 38).

The gates' promises are counted on simulations with known truth: a calibrated model, or one at the
limit, fails ``--fail-above`` at most about 5 % of the time on small files; a model above the limit
passes ``--require-below`` as rarely; calibrated groups fail ``--max-group-gap`` at most 5 % of
the time, whatever the limit and the group sizes; and each gate's power where its claim is true."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from pbr_core import load_predictions
from pbr_core.cli import EXIT_BAD_INPUT, EXIT_GATE_FAILED, EXIT_OK, EXIT_USAGE, main
from pbr_core.cli.evaluate import CORP_KEYS, calibration_gates, ece_gate
from pbr_core.groups import calibration_by_group

ROOT = Path(__file__).resolve().parents[1]
KITTI = ROOT / "sample_data" / "kitti_random_forest.csv"   # ECE 0.0733 (B = 20)
ADULT = ROOT / "sample_data" / "adult_gradient_boosting.csv.gz"


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def _groups_frame(rng: np.random.Generator, sizes: tuple[int, ...], shift: float) -> pd.DataFrame:
    """Binary predictions p ~ U(.05, .95) in groups g0, g1, ...; the outcomes drawn from p itself
    (calibrated), except in g0, where they are drawn from p + shift (clipped to [0, 1])."""
    parts = []
    for i, m in enumerate(sizes):
        p = rng.uniform(0.05, 0.95, m)
        truth = np.clip(p + (shift if i == 0 else 0.0), 0.0, 1.0)
        parts.append(pd.DataFrame({"label": (rng.uniform(size=m) < truth).astype(int), "p_positive": p,
                                   "segment": f"g{i}"}))
    return pd.concat(parts, ignore_index=True)


@pytest.fixture(scope="module")
def gap_files(tmp_path_factory) -> dict[str, Path]:
    """CSV and Parquet files: a real gap (g0 predicted .2 too low on 1,500 rows), calibrated groups,
    and groups all too small to compare."""
    rng = np.random.default_rng(38)
    folder = tmp_path_factory.mktemp("gates")
    frames = {"gap": _groups_frame(rng, (1500, 3000), 0.2), "calibrated": _groups_frame(rng, (1500, 3000), 0.0),
              "small": _groups_frame(rng, (60, 50), 0.0)}
    out = {}
    for name, frame in frames.items():
        frame.to_csv(folder / f"{name}.csv", index=False)
        frame.to_parquet(folder / f"{name}.parquet", index=False)
        out[name] = folder / f"{name}.csv"
        out[f"{name}_parquet"] = folder / f"{name}.parquet"
    return out


# ------------------------------------------------------------------------------ --fail-above


# KITTI's random forest: ECE 0.0733, its 95% interval 0.0679 to 0.0771 (9,090 rows, B = 20).
KITTI_WHAT = "ECE 0.0733, its 95% interval 0.0679 to 0.0771"
KITTI_BINS = "B = 20, binary ECE on p(y=1) (Appendix A)"


def test_fail_above_fails_only_when_the_interval_lies_above_the_limit(capsys):
    code, out, err = run(capsys, "evaluate", KITTI, "--format", "json")
    table = json.loads(out)
    assert abs(table["ece"] - 0.0733) < 1e-4 and round(table["ece_ci_low"], 4) == 0.0679
    # Below the interval: shown above the limit, failed (exit 5), the results printed as without the gate.
    code, out, err = run(capsys, "evaluate", KITTI, "--fail-above", "0.05")
    assert code == EXIT_GATE_FAILED == 5
    assert re.search(r"^ece\s+0\.0732696$", out, re.M)
    message = (f"the calibration error is above 0.05 beyond noise: {KITTI_WHAT} lies above --fail-above 0.05 "
               f"(9,090 rows, {KITTI_BINS})")
    assert f"calibration gates:\n  failed: {message}" in out
    assert err.strip().splitlines() == [f"pbr-calib: calibration gate failed: {message}"]
    # Inside the interval (the ECE itself too): undecided, exit 0 with one warning line.
    for limit in ("0.07", repr(table["ece"])):
        code, out, err = run(capsys, "evaluate", KITTI, "--fail-above", limit, "--format", "json")
        assert code == EXIT_OK
        (gate,) = json.loads(out)["gates"]
        assert gate == {"gate": "fail_above", "limit": float(limit), "value": table["ece"], "status": "undecided",
                        "message": gate["message"]}
        x = float(limit)
        assert gate["message"] == (f"these 9,090 rows cannot show that the calibration error is above {x:g}: "
                                   f"{KITTI_WHAT} contains {x:g} ({KITTI_BINS}), so --fail-above {x:g} does not fail")
        assert err.strip().splitlines() == [f"pbr-calib: warning: {gate['message']}"]
    # Above the interval (its upper end itself too): shown at most the limit, passed, silent.
    for limit in ("0.1", repr(table["ece_ci_high"])):
        code, out, err = run(capsys, "evaluate", KITTI, "--fail-above", limit)
        assert code == EXIT_OK and err == ""
        assert (f"passed: the calibration error is shown at most {float(limit):g}: {KITTI_WHAT} lies at or below "
                f"--fail-above {float(limit):g} (9,090 rows, {KITTI_BINS})") in out


def test_require_below_passes_only_when_the_interval_lies_at_or_below_the_limit(capsys):
    code, out, err = run(capsys, "evaluate", KITTI, "--require-below", "0.1", "--format", "json")
    assert code == EXIT_OK and err == ""
    assert json.loads(out)["gates"][0]["status"] == "passed"
    code, out, err = run(capsys, "evaluate", KITTI, "--require-below", "0.07")
    assert code == EXIT_GATE_FAILED
    assert err.strip().splitlines() == [
        "pbr-calib: calibration gate failed: these 9,090 rows cannot show that the calibration error is at most "
        f"0.07: {KITTI_WHAT} reaches above --require-below 0.07 ({KITTI_BINS})"]
    code, out, err = run(capsys, "evaluate", KITTI, "--require-below", "0.05")
    assert code == EXIT_GATE_FAILED
    assert err.strip().splitlines() == [
        f"pbr-calib: calibration gate failed: the calibration error is above 0.05 beyond noise: {KITTI_WHAT} lies "
        f"above --require-below 0.05 (9,090 rows, {KITTI_BINS})"]
    # Both burdens of proof at once: one undecided (a warning), one failed.
    code, out, err = run(capsys, "evaluate", KITTI, "--fail-above", "0.07", "--require-below", "0.07")
    assert code == EXIT_GATE_FAILED
    lines = err.strip().splitlines()
    assert lines[0].startswith("pbr-calib: warning: these 9,090 rows cannot show that the calibration error is above")
    assert lines[1].startswith("pbr-calib: calibration gate failed: these 9,090 rows cannot show that the "
                               "calibration error is at most")


def _figures(message: str) -> str:
    return re.sub(r"0\.\d{4} to 0\.\d{4}", "LO to HI", message)


def test_fail_above_json_and_streamed_say_the_same(capsys):
    """The streamed interval is the Poisson-bootstrap one (pbr_core.stream): the same rule and
    words, its figures a little different."""
    for limit, status, code_wanted in (("0.05", "failed", EXIT_GATE_FAILED), ("0.07", "undecided", EXIT_OK),
                                       ("0.1", "passed", EXIT_OK)):
        code, out, err = run(capsys, "evaluate", KITTI, "--fail-above", limit, "--format", "json")
        assert code == code_wanted
        memory = json.loads(out)["gates"]
        code, out, err2 = run(capsys, "evaluate", KITTI, "--stream", "--quiet", "--fail-above", limit,
                              "--format", "json")
        assert code == code_wanted
        streamed = json.loads(out)
        assert memory[0]["status"] == streamed["gates"][0]["status"] == status
        assert memory[0]["value"] == pytest.approx(streamed["gates"][0]["value"], abs=1e-12)
        assert f"{streamed['ece_ci_low']:.4f} to {streamed['ece_ci_high']:.4f}" in streamed["gates"][0]["message"]
        assert _figures(memory[0]["message"]) == _figures(streamed["gates"][0]["message"])
        assert _figures(err.strip()) == _figures(err2.strip())


def test_an_ece_gate_without_an_interval_is_not_checked():
    table = {"ece": 0.05, "ece_ci_low": None, "ece_ci_high": None, "n": 300, "optimal_n_bins": 6, "ece_type": "x"}
    gate = ece_gate("fail_above", 0.03, table)
    assert gate["status"] == "not checked" and "no interval" in gate["message"]


# Simulations with known truth (audit 7): rows drawn from Adult's p(y=1) (the bundled gradient-boosting
# model's predictions on 16,281 rows), outcomes drawn from q = clip(p - delta), delta solved so that the
# binned calibration error CE_B at the file's B is the target (0: calibrated). Each file's gate is
# decided on exactly what evaluate computes: the ECE at B = floor(n^(1/3)) and ece_bootstrap_ci with
# default_n_boot(n) resamples and seed 0 (tests/test_cli.py pins evaluate's interval to that call;
# test_the_simulated_gate_is_the_command_s_gate below pins the gate on one simulated file).

ADULT_P = pd.read_csv(ADULT)["p_gt50k"].to_numpy()


def _ce_b(p: np.ndarray, q: np.ndarray, n_bins: int) -> float:
    b = np.clip(np.ceil(p * n_bins).astype(int) - 1, 0, n_bins - 1)
    return float(np.abs(np.bincount(b, p - q, minlength=n_bins)).sum() / p.size)


def _truth(n_bins: int, target: float) -> np.ndarray:
    """q = clip(p - delta) over Adult's predictions with CE_B(p, q) = target at these bins."""
    from scipy.optimize import brentq

    if target == 0:
        return ADULT_P.copy()
    delta = brentq(lambda d: _ce_b(ADULT_P, np.clip(ADULT_P - d, 0, 1), n_bins) - target, 0.0, 0.5)
    return np.clip(ADULT_P - delta, 0.0, 1.0)


def _simulated_table(p: np.ndarray, y: np.ndarray) -> dict:
    import pbr_core

    n, B = p.size, pbr_core.optimal_n_bins(p.size)
    lo, hi = pbr_core.ece_bootstrap_ci(p, y, n_bins=B, n_boot=pbr_core.default_n_boot(n))
    return {"ece": pbr_core.ece(p, y, n_bins=B), "ece_ci_low": lo, "ece_ci_high": hi, "n": n, "optimal_n_bins": B,
            "ece_type": "binary ECE on p(y=1) (Appendix A)"}


def _simulated_files(n: int, target: float, files: int, seed: int):
    """``files`` (p, y) pairs of n rows with true CE_B = target."""
    import pbr_core

    rng = np.random.default_rng(seed)
    q = _truth(pbr_core.optimal_n_bins(n), target)
    for _ in range(files):
        rows = rng.integers(0, ADULT_P.size, n)
        yield ADULT_P[rows], (rng.uniform(size=n) < q[rows]).astype(int)


def _gate_counts(n: int, target: float, limit: float, files: int, seed: int) -> dict[str, int]:
    """How often each gate says what over the files, and how often the old rule (ECE > X) failed."""
    counts = {"old rule failed": 0}
    for p, y in _simulated_files(n, target, files, seed):
        table = _simulated_table(p, y)
        counts["old rule failed"] += table["ece"] > limit
        for name in ("fail_above", "require_below"):
            key = f"{name} {ece_gate(name, limit, table)['status']}"
            counts[key] = counts.get(key, 0) + 1
    return counts


#: At most 5 % of 150 files plus 3 binomial standard deviations (7.5 + 8.0).
MOST_FALSE_OF_150 = 15


@pytest.mark.parametrize("n, target", [(200, 0.0), (500, 0.0), (200, 0.03), (500, 0.03)])
def test_fail_above_rarely_fails_a_calibrated_or_at_limit_model_on_a_small_file(n, target):
    """Known truth CE_B = 0 (calibrated) or = X (at the limit), X = 0.03 (0.02 when calibrated): 150
    files each. The gate fails at most 15 (5 % + 3 sd; measured 0, 0, 1 and 0 of 150 in the order
    of the cells, the rest undecided). The old rule (ECE > X) failed most of the same files (measured
    134, 119, 130 and 125 of 150)."""
    limit = 0.02 if target == 0 else target
    counts = _gate_counts(n, target, limit, 150, seed=n + int(1000 * target))
    assert counts.get("fail_above failed", 0) <= MOST_FALSE_OF_150, counts
    assert counts["old rule failed"] > 75, counts   # the simulation is one where the old rule fails most


def test_fail_above_fails_a_model_above_its_limit_on_many_rows():
    """Power: true CE_B = X + 0.02 (0.05 against X = 0.03) on 10,000 rows: at least 16 of 20 files
    fail (measured 19 of 20, the other undecided; audit 7: 94-100 % over 300 files at X = 0.02-0.05)."""
    counts = _gate_counts(10_000, 0.05, 0.03, 20, seed=10)
    assert counts.get("fail_above failed", 0) >= 16, counts


@pytest.mark.parametrize("n, files", [(500, 150), (2000, 100)])
def test_require_below_rarely_passes_a_model_above_its_limit(n, files):
    """Known truth CE_B = X + 0.002, just above X = 0.03 (the hardest case: the further above, the
    rarer a pass): --require-below passes ("shown at most X", false here) in at most 5 % + 3 sd of
    the files (measured 0 of 150 at 500 rows, 0 of 100 at 2,000)."""
    counts = _gate_counts(n, 0.032, 0.03, files, seed=n)
    bound = 0.05 * files + 3 * np.sqrt(files * 0.05 * 0.95)
    assert counts.get("require_below passed", 0) <= bound, counts


def test_require_below_passes_a_calibrated_model_on_many_rows():
    """Power: a calibrated model (CE_B = 0) on 10,000 rows is shown within X = 0.03 in at least 16 of
    20 files (measured 20 of 20)."""
    counts = _gate_counts(10_000, 0.0, 0.03, 20, seed=11)
    assert counts.get("require_below passed", 0) >= 16, counts


def test_the_simulated_gate_is_the_command_s_gate(capsys, tmp_path):
    """One simulated file through ``pbr-calib evaluate``: the same ECE, interval and gates as the
    simulations' own computation."""
    p, y = next(_simulated_files(500, 0.0, 1, seed=5))
    path = tmp_path / "calibrated500.csv"
    pd.DataFrame({"p_positive": p, "label": y}).to_csv(path, index=False)
    code, out, err = run(capsys, "evaluate", path, "--fail-above", "0.02", "--require-below", "0.02",
                         "--format", "json")
    table = _simulated_table(p, y)
    got = json.loads(out)
    assert (got["ece"], got["ece_ci_low"], got["ece_ci_high"]) == pytest.approx(
        (table["ece"], table["ece_ci_low"], table["ece_ci_high"]), abs=1e-12)
    assert got["gates"] == [ece_gate(name, 0.02, table) for name in ("fail_above", "require_below")]
    assert code == (EXIT_GATE_FAILED if any(g["status"] == "failed" for g in got["gates"]) else EXIT_OK)


@pytest.mark.parametrize("argv, code, words", [
    (["--max-group-gap", "0.05"], EXIT_USAGE, "--max-group-gap needs --by"),
    (["--fail-above", "-0.1"], EXIT_USAGE, "expected a finite number >= 0"),
    (["--fail-above", "x"], EXIT_USAGE, "expected a number"),
    # audit 9a: a limit no ECE can exceed was accepted, a gate that can never fail
    (["--fail-above", "1.5"], EXIT_USAGE, "this gate could never fail"),
    (["--max-group-gap", "1", "--by", "predicted class"], EXIT_USAGE, "this gate could never fail"),
    (["--require-below", "0"], EXIT_USAGE, "could pass only where every prediction is exactly right"),
    (["--require-below", "1"], EXIT_USAGE, "at 1 or more it could never fail"),
])
def test_gate_usage_errors(capsys, argv, code, words):
    got, out, err = run(capsys, "evaluate", KITTI, *argv)
    assert got == code and words in err and out == ""


def test_an_unreadable_file_is_a_bad_input_not_a_failed_gate(capsys, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\nx,y\n")
    code, out, err = run(capsys, "evaluate", bad, "--fail-above", "0.01")
    assert code == EXIT_BAD_INPUT and "calibration gate" not in err


# ------------------------------------------------------------------------------ --max-group-gap


def test_max_group_gap_fails_a_real_gap_above_the_limit(capsys, gap_files):
    code, out, err = run(capsys, "evaluate", gap_files["gap"], "--by", "segment", "--max-group-gap", "0.05",
                         "--format", "json")
    assert code == EXIT_GATE_FAILED
    table = json.loads(out)
    g = table["groups"]["largest_gap"]
    assert g["real"] and g["worst"] == "g0" and g["gap"] > 0.1
    (gate,) = table["gates"]
    assert gate["gate"] == "max_group_gap" and gate["status"] == "failed" and gate["value"] == g["gap"]
    line = err.strip()
    assert "\n" not in line
    assert re.fullmatch(r"pbr-calib: calibration gate failed: largest group gap 0\.\d{4} \(segment = g0 against segment = g1, "
                        r"bias-corrected; real: 95% interval 0\.\d{4} to 0\.\d{4}, adjusted for every pair of "
                        r"groups\) is above --max-group-gap 0\.05", line), line
    # The same gap under a limit it does not exceed: real, passed.
    code, out, err = run(capsys, "evaluate", gap_files["gap"], "--by", "segment", "--max-group-gap", "0.5")
    assert code == EXIT_OK and err == ""
    assert "is real but at most --max-group-gap 0.5" in out


def test_max_group_gap_counts_only_a_real_gap(capsys, gap_files):
    """Calibrated groups: whatever their estimated gap, a gap not shown to be real passes, even
    against a limit of 0."""
    code, out, err = run(capsys, "evaluate", gap_files["calibrated"], "--by", "segment", "--max-group-gap", "0",
                         "--format", "json")
    table = json.loads(out)
    assert not table["groups"]["largest_gap"]["real"]
    assert code == EXIT_OK and table["gates"][0]["status"] == "passed"
    g, gate = table["groups"]["largest_gap"], table["gates"][0]
    assert gate["value"] == g["gap"]   # the JSON keeps the figure; the message gives the interval only
    assert re.fullmatch(r"largest group gap \(segment = g\d against segment = g\d, bias-corrected\) is not shown to be "
                        r"real \(95% interval -?0\.\d{4} to 0\.\d{4}, adjusted for every pair of groups; consistent "
                        r"with no difference\), so it does not count against --max-group-gap 0", gate["message"]), \
        gate["message"]
    assert f"{g['gap']:.4f}" not in gate["message"]


def test_max_group_gap_not_checked_when_groups_are_too_small(capsys, gap_files):
    code, out, err = run(capsys, "evaluate", gap_files["small"], "--by", "segment", "--max-group-gap", "0",
                         "--format", "json")
    assert code == EXIT_OK
    (gate,) = json.loads(out)["gates"]
    assert gate["status"] == "not checked" and gate["value"] is None
    assert err.strip() == ("pbr-calib: warning: --max-group-gap 0 not checked: fewer than two groups of segment have "
                           "enough rows to compare")


def test_max_group_gap_on_a_streamed_dataset(capsys, gap_files):
    code, out, err = run(capsys, "evaluate", gap_files["gap_parquet"], "--stream", "--quiet", "--by", "segment",
                         "--max-group-gap", "0.05", "--fail-above", "0.5", "--format", "json")
    assert code == EXIT_GATE_FAILED
    gates = {g["gate"]: g for g in json.loads(out)["gates"]}
    assert gates["fail_above"]["status"] == "passed" and gates["max_group_gap"]["status"] == "failed"
    assert len(err.strip().splitlines()) == 1 and "largest group gap" in err
    code, out, err = run(capsys, "evaluate", gap_files["calibrated_parquet"], "--stream", "--quiet", "--by", "segment",
                         "--max-group-gap", "0")
    assert code == EXIT_OK


def test_both_gates_fail_with_one_line_each(capsys, gap_files):
    code, out, err = run(capsys, "evaluate", gap_files["gap"], "--by", "segment", "--max-group-gap", "0.01",
                         "--fail-above", "0.001")
    assert code == EXIT_GATE_FAILED
    lines = err.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("pbr-calib: calibration gate failed: ") for line in lines)
    assert "--fail-above 0.001" in lines[0] and "--max-group-gap 0.01" in lines[1]


def _gate(report, limit: float) -> str:
    args = SimpleNamespace(fail_above=None, require_below=None, max_group_gap=limit, by=["segment"])
    return calibration_gates(args, {}, report)[0]["status"]


def test_group_gap_gate_false_alarms_on_calibrated_groups_at_most_its_level():
    """Known truth: three calibrated groups of 200, 1,000 and 400 rows. Against the harshest limit
    (0) the gate fails only when the gap is called real, which Holm's guarantee bounds at 5 %:
    over 30 simulations at most 5 failures (P(Binomial(30, .05) > 5) = 0.003). Observed: 0."""
    rng = np.random.default_rng(2038)
    failed = 0
    for r in range(30):
        preds = load_predictions(_groups_frame(rng, (200, 1000, 400), 0.0), group_columns="segment")
        failed += _gate(calibration_by_group(preds, ["segment"], n_boot=200, seed=r), 0.0) == "failed"
    assert failed <= 5


def test_group_gap_gate_catches_a_miscalibrated_group():
    """Known truth: the group of 400 rows has outcomes drawn from p + .15 (a gap of ~.15 in truth).
    The gate at 0.05 fails in at least 8 of 12 simulations (observed 10 of 12: the two that pass
    estimated the gap at .057 and .071 and these rows did not show it to be real), and a limit above the
    truth (0.5) never fails."""
    rng = np.random.default_rng(3038)
    statuses = []
    for r in range(12):
        preds = load_predictions(_groups_frame(rng, (400, 1000), 0.15), group_columns="segment")
        report = calibration_by_group(preds, ["segment"], n_boot=200, seed=r)
        statuses.append((_gate(report, 0.05), _gate(report, 0.5)))
    assert sum(s == "failed" for s, _ in statuses) >= 8
    assert all(s == "passed" for _, s in statuses)


def test_exit_code_5_is_documented():
    import pbr_core.cli as cli
    from pbr_core.cli._common import _EPILOG

    assert "* 5 -- a calibration gate failed" in cli.__doc__
    assert "  5  a calibration gate failed" in _EPILOG
    readme = (ROOT / "README.md").read_text()
    assert "5 a calibration gate failed" in readme


# ------------------------------------------------------------------------------ CORP in evaluate


def test_corp_decomposition_in_evaluate(capsys):
    from pbr_core.corp import score_decomposition
    from pbr_core.metrics import confidence_and_outcome

    code, out, _ = run(capsys, "evaluate", KITTI, "--format", "json")
    t = json.loads(out)
    # Binary data: the decomposed scores are evaluate's own Brier score and NLL of p(y=1).
    assert t["corp_brier"] == pytest.approx(t["brier"], rel=1e-12)
    assert t["corp_log"] == pytest.approx(t["nll"], rel=1e-9)
    for kind in ("brier", "log"):
        s, mcb, dsc, unc = (t[f"corp_{kind}{k}"] for k in ("", "_mcb", "_dsc", "_unc"))
        assert s == pytest.approx(mcb - dsc + unc, abs=1e-12) and mcb >= 0 and dsc >= 0
    frame = pd.read_csv(KITTI)
    ref = score_decomposition(frame["p_positive"].to_numpy(), frame["label"].to_numpy(), kind="brier")
    assert (t["corp_brier_mcb"], t["corp_brier_dsc"], t["corp_brier_unc"]) == pytest.approx((ref.mcb, ref.dsc, ref.unc),
                                                                                          abs=1e-14)
    # Multiclass: the top-label confidence against correctness (what the ECE bins).
    code, out, _ = run(capsys, "evaluate", ROOT / "sample_data" / "cifar10_resnet110.npz", "--format", "json")
    t = json.loads(out)
    preds = load_predictions(ROOT / "sample_data" / "cifar10_resnet110.npz")
    c, o = confidence_and_outcome(preds.probs, preds.labels)
    ref = score_decomposition(c, o, kind="brier")
    assert (t["corp_brier"], t["corp_brier_mcb"]) == pytest.approx((ref.score, ref.mcb), abs=1e-12)
    assert t["corp_brier"] != pytest.approx(t["brier"])      # not the multiclass Brier score of the vector
    code, out, _ = run(capsys, "evaluate", KITTI)
    assert re.search(r"^corp_brier_mcb\s+0\.00936996$", out, re.M)


def test_evaluate_says_whether_mcb_is_beyond_chance(capsys, tmp_path):
    """Audit 3, A2: MCB is in-sample, so evaluate gives the MCB calibrated predictions of this size reach
    by chance (pbr_core.corp.mcb_against_chance) and says whether this MCB is beyond it: within chance on
    150 rows whose outcomes are drawn from the predictions, beyond it on CIFAR-10's over-confident
    ResNet-110."""
    from pbr_core.corp import mcb_against_chance
    from pbr_core.metrics import confidence_and_outcome

    rng = np.random.default_rng(0)
    p = rng.choice(pd.read_csv(KITTI)["p_positive"].to_numpy(), size=150)
    y = (rng.uniform(size=p.size) < p).astype(int)
    small = tmp_path / "calibrated150.csv"
    pd.DataFrame({"p_positive": p, "label": y}).to_csv(small, index=False)
    code, out, _ = run(capsys, "evaluate", small, "--format", "json")
    t = json.loads(out)
    ref = mcb_against_chance(p, y)
    assert t["corp_brier_mcb_chance"] == pytest.approx(ref["brier"].chance_high, abs=1e-14)
    assert t["corp_log_mcb_chance"] == pytest.approx(ref["log"].chance_high, abs=1e-12)
    assert t["corp_mcb_verdict"].startswith("within chance: brier MCB")
    assert "no evidence that recalibrating would gain on new data" in t["corp_mcb_verdict"]
    cifar = ROOT / "sample_data" / "cifar10_resnet110.npz"
    code, out, _ = run(capsys, "evaluate", cifar)
    preds = load_predictions(cifar)
    ref = mcb_against_chance(*confidence_and_outcome(preds.probs, preds.labels))["brier"]
    line = next(s for s in out.splitlines() if s.startswith("corp_mcb_verdict"))
    assert "beyond chance: brier MCB" in line and f"above the {ref.chance_high:.4g}" in line
    assert "on new data recalibrating gains at most this" in line


def test_corp_is_not_available_on_a_streamed_dataset(capsys):
    code, out, _ = run(capsys, "evaluate", KITTI, "--stream", "--quiet", "--format", "json")
    t = json.loads(out)
    assert all(t[k] is None for k in CORP_KEYS)
    keys = list(t)
    assert keys[keys.index("nll") + 1:keys.index("nll") + 1 + len(CORP_KEYS)] == list(CORP_KEYS)


def test_the_readme_ci_snippet_runs(capsys, tmp_path, monkeypatch):
    """The GitHub Actions step of the README's "In CI" section: its pbr-calib commands pass on the
    bundled samples (exit 0), and the JSON it saves validates against the shipped schema."""
    import shlex
    import shutil

    section = (ROOT / "README.md").read_text().split("## In CI\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    commands = [line.strip() for line in block.splitlines() if line.strip().startswith("pbr-calib ")]
    assert len(commands) == 2 and any("--fail-above" in c for c in commands) and any("--max-group-gap" in c
                                                                                       for c in commands)
    shutil.copytree(ROOT / "sample_data", tmp_path / "sample_data")
    monkeypatch.chdir(tmp_path)
    for command in commands:
        argv, _, redirect = command.partition(">")
        code, out, err = run(capsys, *shlex.split(argv)[1:])
        assert code == EXIT_OK, err
        if redirect:
            jsonschema = pytest.importorskip("jsonschema")
            from pbr_core.schemas import evaluate_schema

            jsonschema.validate(json.loads(out), evaluate_schema())
