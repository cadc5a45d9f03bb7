"""Platt scaling and beta calibration warn when fitted on probabilities of exactly 0 or 1 (audit 3:
a random forest's 1,297 exact 0/1 scores of 3,000 set Platt's slope to 0.104, which squeezed every
other score into 0.19-0.27; nothing said so), and the warning reaches Fit & apply's notes and the CLI.
Only a wrong exact 0 or 1 (an outcome the score gave no chance) throws the fit off: 330 exact 0/1
scores of 3,000, all right, gave Platt a slope of 0.95 and an ECE of 0.0092 from 0.0114 (audit 4), and
no warning is due there."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pbr_core
from pbr_core.recalibrators import get_recalibrator


def _forest_like(n: int = 3000, seed: int = 0) -> pbr_core.Predictions:
    """A small random forest's p(y=1): votes of 10 trees, so 0 and 1 are common; the outcomes follow a
    smoother truth, so an exact 0 or 1 is sometimes wrong."""
    rng = np.random.default_rng(seed)
    truth = rng.beta(0.6, 0.6, n)
    y = (rng.uniform(size=n) < truth).astype(int)
    votes = rng.binomial(10, truth) / 10
    return pbr_core.Predictions.from_arrays(votes, y)


def _caught(method: str, preds) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        get_recalibrator(method).fit(preds)
    return [str(w.message) for w in caught]


@pytest.mark.parametrize("method", ["platt", "beta"])
def test_a_logistic_map_on_exact_zeros_and_ones_warns_with_the_count(method):
    preds = _forest_like()
    p, y = preds.p_positive, preds.labels
    hard = int(np.count_nonzero((p == 0) | (p == 1)))
    wrong = int(np.count_nonzero(((p == 0) & (y == 1)) | ((p == 1) & (y == 0))))
    assert 0 < wrong < hard < preds.n
    messages = [m for m in _caught(method, preds) if "exactly 0 or 1" in m]
    assert len(messages) == 1
    assert f"{hard:,} of {preds.n:,} rows" in messages[0] and f"{wrong:,} of those rows were wrong" in messages[0]
    assert "±36" in messages[0] and "clipped at -36" not in messages[0] and "one in n" not in messages[0]


def _all_right(n: int = 3000, seed: int = 1) -> pbr_core.Predictions:
    """Audit 4's case: about one row in nine scored exactly 0 or 1, every one of them right; the rest
    calibrated soft scores."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.05, 0.95, n)
    y = (rng.uniform(size=n) < p).astype(int)
    hard = rng.uniform(size=n) < 0.11
    p[hard] = y[hard]
    return pbr_core.Predictions.from_arrays(p, y)


@pytest.mark.parametrize("method", ["platt", "beta"])
def test_no_warning_when_every_exact_zero_or_one_was_right_and_the_fit_is_fine(method):
    preds = _all_right()
    assert np.count_nonzero((preds.p_positive == 0) | (preds.p_positive == 1)) > 300
    assert not any("exactly 0 or 1" in m for m in _caught(method, preds))
    if method == "platt":
        assert 0.8 < get_recalibrator("platt").fit(preds).maps_[0]["slope"] < 1.2


def test_one_wrong_exact_score_is_enough_and_the_count_says_one_row():
    preds = _all_right()
    p, y = preds.p_positive.copy(), preds.labels
    i = int(np.flatnonzero((p == 0) & (y == 0))[0])
    p[i] = 1.0
    messages = [m for m in _caught("platt", pbr_core.Predictions.from_arrays(p, y)) if "exactly 0 or 1" in m]
    assert len(messages) == 1 and "and 1 of those rows was wrong" in messages[0]


def _multiclass(top_wrong: bool, n: int = 900, seed: int = 2) -> pbr_core.Predictions:
    """Three classes, soft scores with some rows one-hot; the one-hot rows all right unless
    ``top_wrong``, where a few of them name the wrong class."""
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet([2.0, 2.0, 2.0], n)
    y = np.array([rng.choice(3, p=row) for row in probs])
    hot = np.flatnonzero(rng.uniform(size=n) < 0.1)
    probs[hot] = np.eye(3)[y[hot]]
    if top_wrong:
        probs[hot[:5]] = np.eye(3)[(y[hot[:5]] + 1) % 3]
    return pbr_core.Predictions.from_arrays(probs, y)


def test_multiclass_counts_the_wrong_ones_of_the_maps_being_fitted():
    """Platt and beta are one-vs-all on multiclass data (a map per class); the top-label reading (the
    top probability against whether the top label was right) is checked on the function itself."""
    from pbr_core.recalibrators._logistic import hard_scores_warning

    def caught(preds):
        with warnings.catch_warnings(record=True) as c:
            warnings.simplefilter("always")
            get_recalibrator("platt").fit(preds)
        return [str(w.message) for w in c if "exactly 0 or 1" in str(w.message)]

    right, wrong = _multiclass(top_wrong=False), _multiclass(top_wrong=True)
    assert caught(right) == []
    messages = caught(wrong)
    assert len(messages) == 1 and "5 of those rows were wrong" in messages[0] and "a class probability" in messages[0]
    assert hard_scores_warning(right, "X", top_label=True) == ""
    top = hard_scores_warning(wrong, "X", top_label=True)
    assert "a top probability" in top and "5 of those rows were wrong" in top


@pytest.mark.parametrize("method", ["platt", "beta", "temperature", "isotonic"])
def test_no_warning_without_hard_scores_or_for_methods_they_do_not_throw_off(method):
    preds = _forest_like()
    soft = pbr_core.Predictions.from_arrays(np.clip(preds.p_positive, 0.02, 0.98), preds.labels)
    assert not any("exactly 0 or 1" in m for m in _caught(method, soft))
    if method in ("temperature", "isotonic"):
        assert not any("exactly 0 or 1" in m for m in _caught(method, preds))


def test_fit_and_apply_shows_the_warning_among_its_notes():
    from pbr_core.experiments import FitSettings
    from pbr_core.experiments.runs import run_fit

    run = run_fit(_forest_like(), FitSettings(method="platt", holdout=0.2))
    assert any("PlattScaling" in n and "exactly 0 or 1" in n for n in run.notes)


def test_the_cli_fit_prints_it(tmp_path, capsys):
    from pbr_core.cli import EXIT_OK, main

    preds = _forest_like(800)
    path = tmp_path / "forest.csv"
    path.write_text("p,label\n" + "\n".join(f"{p:g},{y}" for p, y in zip(preds.p_positive, preds.labels)) + "\n")
    assert main(["fit", str(path), "--method", "platt", "--out", str(tmp_path / "m.json")]) == EXIT_OK
    assert "exactly 0 or 1" in capsys.readouterr().err
