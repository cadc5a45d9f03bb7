"""Platt scaling and beta calibration warn when fitted on probabilities of exactly 0 or 1 (audit 3:
a random forest's 1,297 exact 0/1 scores of 3,000 set Platt's slope to 0.104, which squeezed every
other score into 0.19-0.27; nothing said so), and the warning reaches Fit & apply's notes and the CLI."""

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
    hard = int(np.count_nonzero((preds.p_positive == 0) | (preds.p_positive == 1)))
    assert 0 < hard < preds.n
    messages = [m for m in _caught(method, preds) if "exactly 0 or 1" in m]
    assert len(messages) == 1 and f"{hard:,} of {preds.n:,} rows" in messages[0]


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
