"""``pbr-calib apply`` writes a file's calibrated probabilities under the file's own score columns
(an earlier issue: downloads keep the user's names), so the written file cannot tell which values are
calibrated; its last line says which columns now hold them (audit 8). ``probability_columns`` is the
one rule for those names, pinned here against the headers actually written for each layout."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core.cli import EXIT_OK, main
from pbr_core.loading import save_predictions
from pbr_core.loading.writing import probability_columns


def _frames() -> dict[str, tuple[pd.DataFrame, dict]]:
    rng = np.random.default_rng(37)
    n = 400
    p = rng.uniform(0.05, 0.95, n)
    y = (rng.random(n) < p).astype(int)
    probs = rng.dirichlet([1, 1, 1], n)
    yk = np.array([rng.choice(3, p=r) for r in probs])
    return {
        "binary p": (pd.DataFrame({"race_id": [f"r{i}" for i in range(n)], "p_dem": p, "won": y}), {}),
        "binary logit": (pd.DataFrame({"txn": np.arange(n) + 7, "fraud_logit": np.log(p / (1 - p)), "is_fraud": y}),
                         {"label_column": "is_fraud", "input_type": "logits"}),
        "multiclass": (pd.DataFrame({**{f"prob_{c}": probs[:, k] for k, c in enumerate("abc")}, "label": yk}), {}),
        "multiclass logits": (pd.DataFrame({**{f"logit_{c}": np.log(probs[:, k]) for k, c in enumerate("abc")},
                                            "label": yk}), {"input_type": "logits"}),
    }


@pytest.mark.parametrize("layout", list(_frames()))
def test_probability_columns_are_the_written_headers_of_the_probabilities(layout):
    frame, options = _frames()[layout]
    preds = pbr_core.load_predictions(frame.to_csv(index=False).encode(), format="csv", **options)
    written = pd.read_csv(io.BytesIO(save_predictions(preds.with_probs(preds.probs), headers_from=preds)))
    columns = probability_columns(preds.with_probs(preds.probs), preds)
    assert columns and set(columns) <= set(written.columns)
    expected = preds.probs[:, 1:] if len(columns) == 1 else preds.probs
    np.testing.assert_allclose(written[columns].to_numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("layout,says", [
    ("binary p", "column 'p_dem' now holds the calibrated probabilities (in place of the scores)"),
    ("binary logit", "column 'p_1' now holds the calibrated probabilities"),
    ("multiclass", "columns 'prob_a', 'prob_b', 'prob_c' now hold the calibrated probabilities"),
    ("multiclass logits", "columns 'a', 'b', 'c' now hold the calibrated probabilities")])
def test_apply_says_which_columns_hold_the_calibrated_probabilities(layout, says, tmp_path, capsys):
    frame, options = _frames()[layout]
    data, model, out = tmp_path / "data.csv", tmp_path / "m.json", tmp_path / "out.csv"
    frame.to_csv(data, index=False)
    flags = [a for k, v in options.items() for a in (f"--{k.replace('_', '-')}", v)]
    assert main(["fit", str(data), "--method", "temperature" if "multi" in layout else "platt", *flags,
                 "--out", str(model)]) == EXIT_OK
    capsys.readouterr()
    assert main(["apply", str(model), str(data), *flags, "--out", str(out)]) == EXIT_OK
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == (f"wrote {out} (in your file's own format: comma-separated, '.' decimal points, UTF-8, LF line ends; "
                    f"your other columns as written; the probabilities as fractions from 0 to 1): {says}") + ("" if says.endswith("(in place of the scores)") else
                                               " (in place of the scores)") + "; every other column is as it was"
    header = out.read_text().splitlines()[0].split(",")
    assert all(c.strip("'") in header for c in says.split(" now ")[0].split(" ", 1)[1].split(", "))


def test_apply_to_another_class_count_says_what_to_do(tmp_path, capsys):
    """Audit 9a: "Expected predictions with 2 classes (as in fit), but got 10" named the problem only."""
    from pbr_core.cli import EXIT_BAD_INPUT

    frames = _frames()
    binary, multi, model = tmp_path / "b.csv", tmp_path / "m.csv", tmp_path / "platt.json"
    frames["binary p"][0].to_csv(binary, index=False)
    frames["multiclass"][0].to_csv(multi, index=False)
    assert main(["fit", str(binary), "--method", "platt", "--out", str(model)]) == EXIT_OK
    capsys.readouterr()
    assert main(["apply", str(model), str(multi), "--out", str(tmp_path / "out.csv")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "Expected predictions with 2 classes (as in fit), but got 3" in err
    assert "the same classes" in err and "fit a new recalibrator" in err
