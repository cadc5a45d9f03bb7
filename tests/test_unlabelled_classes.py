"""A class that is never any row's true label is named in the notes (audit 3, B2: a class 'fish' with
mean p .034 and up to .917 went unmentioned on the Data page, in the CLI and in ``preds.notes``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core.cli import EXIT_OK, main

ROOT = Path(__file__).resolve().parents[1]


def _cifar_without(classes: list[int], n: int = 1500) -> pd.DataFrame:
    """Real CIFAR-10 ResNet-110 probabilities (first ``n`` rows), rows whose label is in ``classes``
    left out, written as a table with named class columns."""
    preds = pbr_core.load_predictions(ROOT / "sample_data" / "cifar10_resnet110.npz")
    keep = np.flatnonzero(~np.isin(preds.labels[:n], classes))
    names = [f"c{k}" for k in range(preds.n_classes)]
    df = pd.DataFrame(preds.probs[keep], columns=names)
    df["label"] = np.asarray(names)[preds.labels[keep]]
    return df


def test_a_class_without_rows_is_named_with_its_mean_and_largest_probability():
    df = _cifar_without([3])
    preds = pbr_core.load_predictions(df.to_csv(index=False).encode(), format="csv")
    note = [n for n in preds.notes if "never the true label" in n]
    assert len(note) == 1
    p = preds.probs[:, 3]
    assert f"'c3' (mean predicted probability {p.mean():.3f}, at most {p.max():.3f})" in note[0]
    assert note[0].startswith("One class is never the true label of any row")


def test_several_classes_are_counted_and_the_first_five_named():
    df = _cifar_without([0, 2, 4, 6, 7, 9])
    preds = pbr_core.load_predictions(df.to_csv(index=False).encode(), format="csv")
    note = next(n for n in preds.notes if "never the true label" in n)
    assert note.startswith("6 classes are never the true label")
    assert all(f"'c{k}'" in note for k in (0, 2, 4, 6, 7)) and "'c9'" not in note and "and 1 more" in note


@pytest.mark.parametrize("which", ["all classes", "binary"])
def test_no_note_when_every_class_has_rows_or_the_file_is_binary(which):
    if which == "all classes":
        df = _cifar_without([])
    else:
        preds = pbr_core.load_predictions(ROOT / "sample_data" / "kitti_random_forest.csv")
        df = pd.DataFrame({"p": preds.p_positive, "label": preds.labels})
    preds = pbr_core.load_predictions(df.to_csv(index=False).encode(), format="csv")
    assert not any("never the true label" in n for n in preds.notes)


def shown_by_evaluate_and_the_data_page(path: Path, words: str, capsys) -> None:
    """``words`` are in ``pbr-calib evaluate``'s output for the file ``path`` and in the Data page's
    notes once it is uploaded."""
    from streamlit.testing.v1 import AppTest

    assert main(["evaluate", str(path)]) == EXIT_OK
    assert words in capsys.readouterr().out
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=120).run()
    at.file_uploader(key="data_upload").upload(path.name, path.read_bytes(), "text/csv").run()
    assert not at.exception
    assert any(words in i.value for i in at.info)


def test_the_cli_and_the_data_page_show_it(tmp_path, capsys):
    path = tmp_path / "missing.csv"
    _cifar_without([5], n=600).to_csv(path, index=False)
    shown_by_evaluate_and_the_data_page(path, "One class is never the true label of any row: 'c5'", capsys)
