"""scripts/reproduce_paper.py on a tiny real configuration: files written, table shape, merging."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("reproduce_paper", ROOT / "scripts" / "reproduce_paper.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TINY = ["--part", "kitti", "--models", "xgboost", "--folds", "2", "--n-re", "200",
        "--methods", "uncalibrated,temperature,platt", "--no-progress"]


def test_tiny_kitti_run_writes_per_fold_csv_table_and_run_log(script, tmp_path):
    result = script.main([*TINY, "--out", str(tmp_path)])

    csv_path, md_path = result["kitti"]["csv"], result["kitti"]["table"]
    assert csv_path == tmp_path / "kitti_per_fold.csv" and md_path == tmp_path / "kitti_table.md"
    table = pd.read_csv(csv_path)
    assert list(table.columns) == script.ROW_COLUMNS
    assert len(table) == 2 * 3
    assert set(table["method"]) == {"uncalibrated", "temperature", "platt"}
    assert sorted(set(table["fold"])) == [0, 1]
    assert (table["model"] == "xgboost").all() and (table["n_re"] == 200).all()
    assert (table["n_te"] == 8000).all()  # the paper's KITTI n_te, not all 8890 remaining rows
    assert (table["n_bins"] == 20).all()  # floor(8000^(1/3))
    assert table["error"].isna().all()
    for col in ("ece", "ece_positive", "accuracy", "nll", "brier"):
        assert table[col].between(0, 1 if col != "nll" else 10).all(), col
    # Uncalibrated is the identity: the same metrics as the raw predictions of the fold.
    unc = table[table["method"] == "uncalibrated"]
    assert unc["accuracy"].between(0.95, 0.98).all()

    lines = md_path.read_text(encoding="utf-8").strip().splitlines()
    assert lines[0].startswith("| model | method | folds | ECE top-label | ΔECE vs uncal. | ECE p(y=1) |")
    body = [line for line in lines[2:] if line.startswith("| xgboost")]
    assert len(body) == 3
    assert all(line.split(" | ")[2] == "2" for line in body)  # folds column
    assert [line.split(" | ")[1] for line in body] == ["uncalibrated", "temperature", "platt"]  # paper order
    # the relative ECE change is the mean over the same folds, against uncalibrated
    platt_ece = table[table["method"] == "platt"]["ece"].mean()
    assert body[2].split(" | ")[4] == f"{100 * (platt_ece / unc['ece'].mean() - 1):+.0f}%"
    assert body[0].split(" | ")[4] == "+0%"

    runs = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert len(runs) == 1 and runs[0]["parts"] == ["kitti"] and runs[0]["torch_threads"] == 1


def test_second_run_merges_rows_instead_of_overwriting(script, tmp_path):
    common = ["--part", "kitti", "--models", "xgboost", "--n-re", "200", "--no-progress", "--out", str(tmp_path)]
    script.main([*common, "--folds", "2", "--methods", "uncalibrated,platt"])
    script.main([*common, "--folds", "2", "--first-fold", "1", "--methods", "uncalibrated"])
    table = pd.read_csv(tmp_path / "kitti_per_fold.csv")
    assert len(table) == 2 * 2 + 1  # fold 1 of uncalibrated replaced, fold 2 added, platt kept
    assert sorted(table.loc[table["method"] == "uncalibrated", "fold"]) == [0, 1, 2]
    assert sorted(table.loc[table["method"] == "platt", "fold"]) == [0, 1]
    assert "| xgboost | uncalibrated | 3 |" in (tmp_path / "kitti_table.md").read_text()


def test_bad_alpha_is_rejected(script, tmp_path):
    with pytest.raises(SystemExit):
        script.main([*TINY, "--alpha", "-1", "--out", str(tmp_path)])
    with pytest.raises(SystemExit):
        script.main([*TINY, "--alpha", "best", "--out", str(tmp_path)])


def test_paired_reproduction_script_matches_the_library_and_the_committed_file(tmp_path, capsys):
    """docs/reproduction_results/paired_tests.md is what the script computes from the committed CSVs."""
    spec = importlib.util.spec_from_file_location("paired_reproduction", ROOT / "scripts" / "paired_reproduction.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "paired.md"
    assert module.main(["--out", str(out)]) == 0
    capsys.readouterr()
    text = out.read_text()
    assert text == (ROOT / "docs" / "reproduction_results" / "paired_tests.md").read_text()
    from pbr_core.experiments import paired_tests

    kitti = pd.read_csv(ROOT / "docs" / "reproduction_results" / "kitti_per_fold.csv")
    r = paired_tests(kitti[kitti.model == "random_forest"], "ece", [("pbr_total", "gp")]).iloc[0]
    line = next(x for x in text.splitlines() if x.startswith("| random_forest | pbr_total | gp |"))
    assert f"{r.mean_diff:+.4f}" in line and f"| {r.t_p:.2g} | {r.wilcoxon_p:.2g} |" in line
    # The verdict rests on the corrected t-test (Holm over the claim's pairs), not on the plain tests,
    # which both say p < 0.05 here (the old rule's "pbr_total better").
    assert r.t_p < 0.05 and r.wilcoxon_p < 0.05 and r.corrected_t_p > 0.05
    assert "| no difference shown |" in line and f"| {r.corrected_t_p:.2g} |" in line


def test_compare_prob_input_uses_the_library_rule_and_matches_the_committed_file(tmp_path, capsys):
    """prob_input/comparison.md is what the script computes, with the verdict of paired_tests (not its own copy)."""
    import shutil

    spec = importlib.util.spec_from_file_location("compare_prob_input", ROOT / "scripts" / "compare_prob_input.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = ROOT / "docs" / "reproduction_results" / "prob_input"
    for variant in ("log", "wenger"):
        (tmp_path / variant).mkdir()
        shutil.copy(committed / variant / "kitti_per_fold.csv", tmp_path / variant / "kitti_per_fold.csv")
    text = module.main(["--results", str(tmp_path)])
    capsys.readouterr()
    assert text == (committed / "comparison.md").read_text(encoding="utf-8")
    # Random forest, GP calibration: wenger lower on 10/10 folds, t-test and Wilcoxon both below 0.05 (the
    # old rule's "wenger better"), but the corrected t-test after Holm over the model's 6 methods is not.
    df = pd.read_csv(tmp_path / "comparison_ece.csv")
    row = df[(df.model == "random_forest") & (df.method == "gp")].iloc[0]
    assert row.t_p < 0.05 and row.wilcoxon_p < 0.05 and row.wenger_lower_folds == 10
    assert row.decisive_p >= 0.05 and row.holm_pairs == 6 and row.verdict == "no difference shown"
    # The same verdict and decides p as the library's paired_tests on the two variants.
    from pbr_core.experiments import paired_tests

    both = module._variant_table({v: pd.read_csv(tmp_path / v / "kitti_per_fold.csv") for v in ("log", "wenger")})
    part = both[both.model == "random_forest"]
    lib = paired_tests(part, "ece", [(f"{m}@wenger", f"{m}@log") for m in module.METHODS]).set_index("a")
    assert lib.loc["gp@wenger", "decisive_p"] == pytest.approx(row.decisive_p)
    assert lib.loc["gp@wenger", "better"] is None
