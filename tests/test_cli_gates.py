"""``pbr-calib evaluate --fail-above`` / ``--max-group-gap`` (CI gates, exit code 5) and the CORP
decomposition in evaluate's output (issue 38).

The group-gap gate's promise (calibrated groups fail it at most 5 % of the time, whatever the limit
and the group sizes) is counted on simulations with known truth; so is its power on a group that is
miscalibrated."""

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
from pbr_core.cli.evaluate import CORP_KEYS, calibration_gates
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


def test_fail_above_passes_at_or_below_the_limit_and_fails_above_it(capsys):
    code, out, err = run(capsys, "evaluate", KITTI, "--format", "json")
    ece = json.loads(out)["ece"]
    assert abs(ece - 0.0733) < 1e-4
    code, out, err = run(capsys, "evaluate", KITTI, "--fail-above", repr(ece), "--format", "json")
    assert code == EXIT_OK, err       # "at most X": equal passes
    assert json.loads(out)["gates"] == [{"gate": "fail_above", "limit": ece, "value": ece, "status": "passed",
                                         "message": json.loads(out)["gates"][0]["message"]}]
    code, out, err = run(capsys, "evaluate", KITTI, "--fail-above", "0.05")
    assert code == EXIT_GATE_FAILED == 5
    assert re.search(r"^ece\s+0\.0732696$", out, re.M)     # the results are printed as without the gate
    assert "calibration gates:\n  failed: ECE 0.0733" in out
    lines = err.strip().splitlines()
    assert lines == ["pbr-calib: calibration gate failed: ECE 0.0733 (B = 20, binary ECE on p(y=1) (Appendix A)) is "
                     "above --fail-above 0.05"]
    code, out, err = run(capsys, "evaluate", KITTI, "--fail-above", "0.1")
    assert code == EXIT_OK and err == ""
    assert "passed: ECE 0.0733 (B = 20, binary ECE on p(y=1) (Appendix A)) is at most --fail-above 0.1" in out


def test_fail_above_json_and_streamed_say_the_same(capsys):
    code, out, err = run(capsys, "evaluate", KITTI, "--fail-above", "0.05", "--format", "json")
    assert code == EXIT_GATE_FAILED
    memory = json.loads(out)["gates"]
    code, out, err2 = run(capsys, "evaluate", KITTI, "--stream", "--quiet", "--fail-above", "0.05", "--format", "json")
    assert code == EXIT_GATE_FAILED
    streamed = json.loads(out)["gates"]
    assert memory[0]["status"] == streamed[0]["status"] == "failed"
    assert memory[0]["value"] == pytest.approx(streamed[0]["value"], abs=1e-12)
    assert memory[0]["message"] == streamed[0]["message"] and err.strip() == err2.strip()


@pytest.mark.parametrize("argv, code, words", [
    (["--max-group-gap", "0.05"], EXIT_USAGE, "--max-group-gap needs --by"),
    (["--fail-above", "-0.1"], EXIT_USAGE, "expected a finite number >= 0"),
    (["--fail-above", "x"], EXIT_USAGE, "expected a number"),
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
    args = SimpleNamespace(fail_above=None, max_group_gap=limit, by=["segment"])
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
