"""CSV injection (issue 34): a text cell that a spreadsheet would run as a formula is written with a
leading apostrophe (OWASP's advice) in every CSV the project writes; numbers are never touched, and
``spreadsheet_safe=False`` / ``--raw-csv`` write the cells as they are."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core.cli import EXIT_OK, main
from pbr_core.loading import save_predictions
from pbr_core.loading.writing import FORMULA_STARTS, csv_text, spreadsheet_safe
from pbr_core.recalibrators import TemperatureScaling

ROOT = Path(__file__).resolve().parents[1]
LINK = '=HYPERLINK("http://evil.example/","x")'

#: Cells as a hostile file would carry them, and what the file must hold instead.
HOSTILE = {
    LINK: "'" + LINK,
    "+cmd|' /C calc'!A0": "'+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0": "'-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0": "'@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1": "'\t=1+1",
    "\r=1+1": "'\r=1+1",
    "-inf": "'-inf",  # not a plain decimal number: a spreadsheet would not read it as one
}
#: Text cells that stay as they are: no formula start, or a plain number (a spreadsheet reads a number).
HARMLESS = ["a=b", "x+1", "1-2", " =1", "-1", "+1", "-0.5", "+.5", "-1e-3", "12", "", "'already"]


def test_every_formula_start_of_owasp_is_neutralised_and_nothing_else():
    df = pd.DataFrame({"cell": list(HOSTILE) + HARMLESS})
    out = spreadsheet_safe(df)["cell"].tolist()
    assert out == list(HOSTILE.values()) + HARMLESS
    assert set(FORMULA_STARTS) == {"=", "+", "-", "@", "\t", "\r"}
    assert df["cell"].tolist() == list(HOSTILE) + HARMLESS  # the caller's table is not changed


def test_numbers_and_non_text_cells_are_never_changed():
    df = pd.DataFrame({
        "p": [-0.5, 0.25, -1e-300],                                   # a numeric column
        "k": [-1, 2, -3],
        "mixed": pd.Series([-0.5, "=1+1", None], dtype=object),      # numbers inside a text column stay
        "flag": [True, False, True],
        "when": pd.to_datetime(["2026-01-01", "2026-01-02", "2026-01-03"]),
        "cat": pd.Categorical(["=a", "b", "=a"]),
        "s": pd.array(["@x", None, "y"], dtype="string"),
    })
    out = spreadsheet_safe(df)
    for name in ("p", "k", "flag", "when"):
        pd.testing.assert_series_equal(out[name], df[name])
    assert out["mixed"].tolist()[:2] == [-0.5, "'=1+1"] and out["mixed"].iloc[2] is None
    assert out["cat"].tolist() == ["'=a", "b", "'=a"]
    assert out["s"].tolist()[0] == "'@x" and out["s"].tolist()[2] == "y"
    lines = csv_text(df).splitlines()
    assert lines[1].startswith("-0.5,-1,-0.5,True,2026-01-01,'=a,'@x")


def test_headers_are_neutralised_too():
    df = pd.DataFrame({LINK: ["a"], "-1": [0.5], "plain": [1]})
    assert csv_text(df).splitlines()[0] == '"\'=HYPERLINK(""http://evil.example/"",""x"")",-1,plain'
    assert csv_text(df, spreadsheet_safe=False).splitlines()[0].startswith('"=HYPERLINK(')


def _hostile_predictions(n: int = 60, classes: tuple[str, str] = ("-1", "+1")) -> pbr_core.Predictions:
    rng = np.random.default_rng(0)
    p1 = rng.uniform(0.05, 0.95, n)
    y = (rng.uniform(size=n) < p1).astype(int)
    cells = list(HOSTILE) + [c for c in HARMLESS if c]  # an empty cell reads back as missing
    meta = pd.DataFrame({"comment": [cells[i % len(cells)] for i in range(n)], "amount": -rng.uniform(0, 1, n)})
    df = pd.DataFrame({classes[0]: 1 - p1, classes[1]: p1, "label": np.where(y == 1, classes[1], classes[0])})
    text = csv_text(pd.concat([df, meta], axis=1), spreadsheet_safe=False).encode()
    return pbr_core.load_predictions(text, format="csv", group_columns=["comment", "amount"], name="hostile.csv")


def test_save_predictions_neutralises_metadata_but_not_scores_labels_or_numbers():
    preds = _hostile_predictions()
    safe = pd.read_csv(io.BytesIO(save_predictions(preds)), dtype={"comment": str, "label": str}, keep_default_na=False)
    raw = pd.read_csv(io.BytesIO(save_predictions(preds, spreadsheet_safe=False)), dtype={"comment": str, "label": str},
                      keep_default_na=False)
    assert list(safe.columns) == list(raw.columns) == ["-1", "+1", "label", "comment", "amount"]
    expected = [HOSTILE.get(c, c) for c in preds.metadata["comment"]]
    assert safe["comment"].tolist() == expected
    assert raw["comment"].tolist() == preds.metadata["comment"].tolist()
    for frame in (safe, raw):  # scores (classes "-1", "+1"), labels and negative amounts: exactly as before
        np.testing.assert_array_equal(frame[["-1", "+1"]].to_numpy(), preds.probs)
        np.testing.assert_array_equal(frame["amount"].to_numpy(), preds.metadata["amount"].to_numpy())
    assert safe["label"].tolist() == raw["label"].tolist()
    named = _hostile_predictions(classes=("no", "yes"))
    back = pbr_core.load_predictions(save_predictions(named), format="csv", group_columns=["comment"])
    np.testing.assert_array_equal(back.probs, named.probs)  # reads back; the metadata keeps its apostrophes
    np.testing.assert_array_equal(back.labels, named.labels)
    assert back.metadata["comment"].tolist() == [HOSTILE.get(c, c) for c in named.metadata["comment"]]


def test_a_carriage_return_inside_a_cell_cannot_start_a_row():
    """Python's CSV writer leaves a lone CR unquoted: a spreadsheet then starts a new row inside the
    cell, and its rest, '=HYPERLINK(...)', becomes a cell of its own. Such a cell is quoted."""
    df = pd.DataFrame({"note": ["ok", "abc\r" + LINK], "p": [0.5, -0.5]})
    for safe in (True, False):
        text = csv_text(df, spreadsheet_safe=safe)
        assert '"abc\r=HYPERLINK(' in text and text.endswith("\r\n")
        back = pd.read_csv(io.StringIO(text))
        assert back["note"].tolist() == ["ok", "abc\r" + LINK] and back["p"].tolist() == [0.5, -0.5]
    assert "\r" not in csv_text(df.iloc[:1])  # without such a cell: "\n" line ends, as always


def _run(capsys, *argv) -> str:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    return out


def test_cli_apply_and_compare_write_safe_csv_unless_raw_csv(capsys, tmp_path):
    preds = _hostile_predictions(400, classes=("no", "yes"))
    data = tmp_path / "hostile.csv"
    data.write_bytes(save_predictions(preds, spreadsheet_safe=False))
    model = TemperatureScaling().fit(preds).save(tmp_path / "t.json")
    _run(capsys, "apply", model, data, "--out", tmp_path / "safe.csv", "--group-columns", "comment")
    _run(capsys, "apply", model, data, "--out", tmp_path / "raw.csv", "--group-columns", "comment", "--raw-csv")
    safe, raw = (tmp_path / "safe.csv").read_text(), (tmp_path / "raw.csv").read_text()
    assert '"\'=HYPERLINK(""http://evil.example/""' in safe and "'@SUM(1+1)" in safe
    assert '"=HYPERLINK(""http://evil.example/""' in raw and "\n'@SUM" not in raw
    s = pd.read_csv(tmp_path / "safe.csv")
    r = pd.read_csv(tmp_path / "raw.csv")
    np.testing.assert_array_equal(s[["no", "yes"]].to_numpy(), r[["no", "yes"]].to_numpy())
    np.testing.assert_array_equal(s["amount"].to_numpy(), r["amount"].to_numpy())  # negative numbers unchanged
    # compare --out: the per-fold table (method names and numbers) goes through the same writer
    _run(capsys, "compare", data, "--methods", "uncalibrated,temperature", "--n-re", "200", "--folds", "2",
         "--out", tmp_path / "folds.csv", "--quiet", "--group-columns", "comment")
    table = pd.read_csv(tmp_path / "folds.csv")
    assert set(table["method"]) == {"uncalibrated", "temperature"} and (table["ece"] >= 0).all()


def test_every_csv_the_project_writes_goes_through_csv_text():
    """No other writer: a new download or --out file that wrote CSV by itself would skip the rule."""
    writers = []
    for folder in ("pbr_core", "dashboard"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text()
            for m in re.finditer(r"\.to_csv\(|csv\.writer\(|pacsv\.write_csv|write_csv\(", text):
                writers.append(f"{path.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}")
    assert writers == ["pbr_core/loading/writing.py:" + str(_line_of("table.to_csv(index=False"))], writers


def _line_of(fragment: str) -> int:
    text = (ROOT / "pbr_core/loading/writing.py").read_text()
    return text[:text.index(fragment)].count("\n") + 1


@pytest.mark.parametrize("cell", [LINK, "![x](http://127.0.0.1:9/x.png)"])
def test_the_dashboards_calibrated_predictions_download_is_neutralised(cell):
    import dataclasses

    from dashboard.runs import Downloads

    preds = _hostile_predictions()
    d = Downloads()
    d.preds = dataclasses.replace(preds, metadata=preds.metadata.assign(comment=cell))
    d.recalibrator, d.fit_rows = TemperatureScaling().fit(preds), np.arange(10)
    text = d.calibrated_csv().decode()
    if cell.startswith("="):
        assert text.count("'=HYPERLINK") == preds.n and '"=HYPERLINK' not in text
    else:
        assert text.count(cell) == preds.n  # markdown is no formula: written as it is
