"""A class that the model gives probability 0 on every row, yet is some rows' true class (audit 8's
kitti_tree_8class.csv: 'pedestrian', 0 on all 9,090 rows, the true class of 234) is named in the notes:
the Data page's and ``evaluate``'s. Before, its only trace was "nll infinite (252 rows)"."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import pbr_core
import pbr_core.metrics

from test_unlabelled_classes import shown_by_evaluate_and_the_data_page

NAMES = ["background", "car", "truck", "pedestrian", "tram"]


def tree_like(n: int = 2000, zero: tuple[int, ...] = (3,), seed: int = 8) -> pd.DataFrame:
    """Probabilities of 5 classes, the columns in ``zero`` exactly 0 on every row (a decision tree
    whose leaves never hold the class), labels drawn from a model that does give them rows."""
    rng = np.random.default_rng(seed)
    truth = rng.dirichlet([4, 1, 1, 0.6, 0.4], n)
    y = np.array([rng.choice(len(NAMES), p=row) for row in truth])
    probs = truth.copy()
    probs[:, list(zero)] = 0.0
    probs /= probs.sum(axis=1, keepdims=True)
    df = pd.DataFrame(probs, columns=[f"prob_{c}" for c in NAMES])
    df["label"] = y
    return df


def _load(df: pd.DataFrame):
    return pbr_core.load_predictions(df.to_csv(index=False).encode(), format="csv")


def test_one_class_with_zero_probability_everywhere_is_named_with_its_rows():
    df = tree_like()
    preds = _load(df)
    rows = int((df["label"] == 3).sum())
    assert rows > 0
    assert (f"Class 'pedestrian' gets probability 0 on every row, yet is the true class of {rows:,} rows: the "
            "model cannot predict it (its NLL is infinite on those rows).") in preds.notes
    assert pbr_core.metrics.nll_infinite_rows(preds.probs, preds.labels) == rows  # the trace there was before


def test_several_are_counted():
    df = tree_like(zero=(3, 4))
    note = next(n for n in _load(df).notes if "probability 0 on every row" in n)
    assert note.startswith("2 classes get probability 0 on every row")
    for k in (3, 4):
        assert f"{NAMES[k]!r} ({int((df['label'] == k).sum()):,} rows)" in note


@pytest.mark.parametrize("case", ["tiny but not zero", "zero and never the label", "never the top class"])
def test_no_note_otherwise(case):
    df = tree_like(zero=())
    if case == "tiny but not zero":  # one row gives it 1e-9: not "probability 0 on every row"
        df = tree_like()
        df["prob_pedestrian"] = np.where(np.arange(len(df)) == 0, 1e-9, 0.0)
        df["prob_background"] -= df["prob_pedestrian"]
    elif case == "zero and never the label":
        df = tree_like()
        df = df[df["label"] != 3]
    else:  # tram at most a tenth of background's probability: never the top class, a decision not noted
        cut = np.minimum(df["prob_tram"], df["prob_background"] / 10)
        df["prob_background"] += df["prob_tram"] - cut
        df["prob_tram"] = cut
    preds = _load(df)
    if case == "never the top class":
        assert not (preds.probs.argmax(axis=1) == 4).any() and (preds.labels == 4).any()
    assert not any("probability 0 on every row" in n for n in preds.notes)


def test_evaluate_and_the_data_page_show_it(tmp_path, capsys):
    path = tmp_path / "tree.csv"
    tree_like(n=800).to_csv(path, index=False)
    shown_by_evaluate_and_the_data_page(path, "Class 'pedestrian' gets probability 0 on every row", capsys)
