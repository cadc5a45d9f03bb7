"""A file written back from a CSV (``pbr-calib apply``, the dashboard's calibrated-predictions
download) is written in the CSV's own dialect (audit 12a: a European Excel export, ``;``-separated with
decimal commas, a byte-order mark and CRLF line ends, came back comma-separated with decimal points, LF
and no mark, which the same spreadsheet opens as one column), and a score column that held
percentages gets the calibrated probabilities as percentages in the same style (it held ``93,3``
and got ``0.8455...`` under the same header)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core.cli import EXIT_OK, main
from pbr_core.loading import load_predictions, read_as_written, save_predictions
from pbr_core.loading.dialect import CsvDialect, percent_columns_as_written, percent_text
from pbr_core.recalibrators import PlattScaling, load_recalibrator

BOM = b"\xef\xbb\xbf"
HEADER = ["application_id", "submitted_at", "loan_amount", "officer_comment", "p_approved", "decision"]


def excel_export(n: int = 300, seed: int = 0, percent: bool = True) -> tuple[bytes, list[list[str]]]:
    """An Excel export of a German locale: ``;``, decimal commas, a UTF-8 byte-order mark, CRLF, a
    zero-padded id, a day.month date, a comment holding ``;`` and quotes, the score in percent with
    one decimal (``93,3``; fractions ``0,933`` when not ``percent``), an empty row at the end."""
    rng = np.random.default_rng(seed)
    p = np.round(rng.uniform(0.02, 0.98, n), 3)
    y = rng.uniform(size=n) < np.clip(1.4 * p - 0.2, 0, 1)  # miscalibrated: there is something to fix
    comments = ['ok, "standard" file', "income checked; docs, scanned", "n/a"]
    rows = [[f"{i:07d}", f"{1 + i % 28:02d}.03.2026 12:{i % 60:02d}", f"{1000 + 7.5 * i:.2f}".replace(".", ","),
             comments[i % 3], (f"{100 * p[i]:.1f}" if percent else f"{p[i]:.3f}").replace(".", ","),
             "approved" if y[i] else "denied"] for i in range(n)]

    def cell(c: str) -> str:
        return '"' + c.replace('"', '""') + '"' if any(ch in c for ch in ';"') else c

    text = "\r\n".join(";".join(cell(c) for c in row) for row in [HEADER] + rows) + "\r\n;;;;;\r\n"
    return BOM + text.encode("utf-8"), rows


def _fit(path, percent: bool):
    preds = load_predictions(path, label_column="decision", score_columns="p_approved", percent=percent)
    return preds, PlattScaling().fit(preds)


def _lines(data: bytes) -> list[str]:
    """The data lines of a written CSV, split at CRLF only (a lone LF would stay inside a line)."""
    assert data.startswith(BOM)
    return data[len(BOM):].decode("utf-8").split("\r\n")


@pytest.mark.parametrize("percent", [True, False])
def test_apply_writes_an_excel_export_back_in_its_own_dialect(tmp_path, capsys, percent) -> None:
    data, rows = excel_export(percent=percent)
    (tmp_path / "in.csv").write_bytes(data)
    preds, rec = _fit(tmp_path / "in.csv", percent)
    rec.save(tmp_path / "platt.json")
    flags = ["--label-column", "decision", "--score-columns", "p_approved"] + (["--percent"] if percent else [])
    assert main(["apply", str(tmp_path / "platt.json"), str(tmp_path / "in.csv"), "--out", str(tmp_path / "out.csv"),
                 *flags]) == EXIT_OK
    said = capsys.readouterr().out
    written = (tmp_path / "out.csv").read_bytes()
    lines = _lines(written)
    assert lines[0] == ";".join(HEADER) and lines[-1] == "" and len(lines) == len(rows) + 2
    assert "\n" not in "".join(lines)  # every line ends in CRLF, as the export's
    expected = load_recalibrator(tmp_path / "platt.json").predict_proba(preds)[:, 1]
    # Every other cell byte for byte as written (the comment quoted as the export quoted it).
    original = data[len(BOM):].decode("utf-8").split("\r\n")
    for before, after, p in zip(original[1:], lines[1:], expected):
        cells_before, cells_after = before.rsplit(";", 2), after.rsplit(";", 2)
        assert cells_after[0] == cells_before[0] and cells_after[2] == cells_before[2]
        score = cells_after[1]
        assert "." not in score and not score.endswith("%")
        value = float(score.replace(",", "."))
        assert value == pytest.approx(100 * p if percent else p, rel=1e-11, abs=1e-15)
    # It reads back as the export did: the same options give the calibrated probabilities.
    back = load_predictions(tmp_path / "out.csv", label_column="decision", score_columns="p_approved",
                            percent=percent)
    np.testing.assert_allclose(back.probs[:, 1], expected, rtol=1e-11, atol=1e-14)
    np.testing.assert_array_equal(back.labels, preds.labels)
    assert "semicolon-separated, decimal commas, UTF-8 with a byte-order mark, CRLF (Windows) line ends" in said
    if percent:
        assert ("'p_approved' held percentages: the calibrated probabilities are written there as percentages too "
                "(0.8455 as 84,55), as your file wrote them, so the file reads back the same with the percentages "
                "option") in said
    else:
        assert "the probabilities as fractions from 0 to 1" in said


def test_a_percent_sign_is_written_back_with_the_calibrated_percentages() -> None:
    """A score column written ``93,3%`` (whatever made the loader read it so) gets ``84,55%``; the rule
    decides from the cells and the probabilities read from them, not from the loader's options."""
    p = np.array([0.933, 0.05, 0.5, 0.0])
    preds = pbr_core.Predictions.from_predictions([1, 0, 1, 0], p)
    text = pd.DataFrame({"1": ["93,3%", "5%", "50,0 %", "0%"]})
    assert percent_columns_as_written(text, preds, ",") == {}  # not the loaded names' column: nothing
    named = _with_score_column(preds, "p_yes")
    assert percent_columns_as_written(text.rename(columns={"1": "p_yes"}), named, ",") == {"p_yes": "%"}
    # Bare percentages, and fractions; a column mixing signs and bare numbers is not read as one style.
    assert percent_columns_as_written(pd.DataFrame({"p_yes": ["93,3", "5", "50", "0"]}), named, ",") == {"p_yes": ""}
    assert percent_columns_as_written(pd.DataFrame({"p_yes": ["0,933", "0,05", "0,5", "0"]}), named, ",") == {}
    assert percent_columns_as_written(pd.DataFrame({"p_yes": ["93,3%", "5", "50", "0"]}), named, ",") == {}
    # Decided on the whole column: a head of zeros (0 is 100 times 0) does not decide it either way.
    zeros = _with_score_column(pbr_core.Predictions.from_predictions([0] * 25 + [1], [0.0] * 25 + [0.5]), "p_yes")
    assert percent_columns_as_written(pd.DataFrame({"p_yes": ["0"] * 25 + ["50"]}), zeros, ",") == {"p_yes": ""}
    assert percent_columns_as_written(pd.DataFrame({"p_yes": ["0"] * 25 + ["0,5"]}), zeros, ",") == {}
    assert percent_columns_as_written(pd.DataFrame({"p_yes": ["0"] * 26}), _with_score_column(
        pbr_core.Predictions.from_predictions([0] * 25 + [1], [0.0] * 26), "p_yes"), ",") == {}
    dialect = CsvDialect(sep=";", decimal=",", bom=True, line_end="\r\n", percent={"p_yes": "%"})
    as_written = pd.DataFrame(index=range(4))
    as_written.attrs["dialect"] = dialect
    calibrated = named.with_probs(np.column_stack([1 - p / 2, p / 2]), source="x")
    out = save_predictions(calibrated, headers_from=named, as_written=as_written)
    lines = _lines(out)
    assert lines[0] == "p_yes;label"
    assert [line.split(";")[0] for line in lines[1:5]] == ["46,65%", "2,5%", "25%", "0%"]


def _with_score_column(preds: pbr_core.Predictions, name: str) -> pbr_core.Predictions:
    """``preds`` as if loaded from a file whose one score column is ``name``."""
    from dataclasses import replace

    return replace(preds, column_roles=((name, "score"), ("label", "label")))


def test_percent_text_keeps_twelve_digits_without_noise_or_exponent() -> None:
    assert percent_text(np.array([0.8455, 0.8455000000000001, 1e-12, 1.0, 0.123456789012345]), ",", True) == [
        "84,55%", "84,55%", "0,0000000001%", "100%", "12,3456789012%"]
    assert percent_text(np.array([0.25]), ".", False) == ["25"]


def test_read_as_written_records_the_dialect_of_a_plain_and_a_gzip_file(tmp_path) -> None:
    import gzip

    data, _ = excel_export(40)
    for name, content in (("a.csv", data), ("a.csv.gz", gzip.compress(data))):
        (tmp_path / name).write_bytes(content)
        preds = load_predictions(tmp_path / name, label_column="decision", score_columns="p_approved", percent=True)
        text = read_as_written(tmp_path / name, preds, ["application_id"])
        assert list(text.columns) == ["application_id"]
        assert CsvDialect.of(text) == CsvDialect(sep=";", decimal=",", bom=True, line_end="\r\n",
                                                 percent={"p_approved": ""})
    plain = "p_yes,label\n0.2,0\n0.7,1\n".encode()
    (tmp_path / "b.csv").write_bytes(plain)
    text = read_as_written(tmp_path / "b.csv", load_predictions(tmp_path / "b.csv"), [])
    assert CsvDialect.of(text) == CsvDialect()


def test_a_latin1_file_is_written_back_in_latin1(tmp_path, capsys) -> None:
    """A Windows export in Latin-1 (``région``, ``Süd`` with the one byte 0xFC) comes back in Latin-1: in UTF-8 the
    spreadsheet that wrote it would show ``SÃ¼d``."""
    rng = np.random.default_rng(1)
    p = rng.uniform(0.05, 0.95, 200)
    y = (rng.uniform(size=200) < p).astype(int)
    text = "région;p_yes;label\n" + "".join(f"{['Süd', 'Nord'][i % 2]};{v:.3f};{t}\n".replace(".", ",")
                                            for i, (v, t) in enumerate(zip(p, y)))
    (tmp_path / "in.csv").write_bytes(text.encode("latin-1"))
    preds = load_predictions(tmp_path / "in.csv")
    PlattScaling().fit(preds).save(tmp_path / "platt.json")
    assert main(["apply", str(tmp_path / "platt.json"), str(tmp_path / "in.csv"), "--out",
                 str(tmp_path / "out.csv")]) == EXIT_OK
    assert "semicolon-separated, decimal commas, Latin-1, LF line ends" in capsys.readouterr().out
    out = (tmp_path / "out.csv").read_bytes()
    assert out.split(b"\n")[1].startswith(b"S\xfcd;") and out.split(b"\n")[0] == b"r\xe9gion;p_yes;label"
