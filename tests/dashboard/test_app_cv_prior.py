"""Audit 14, finding C: with "Choose α automatically", a final fit at its prior is the cross-validation's own
preference, so the page says so instead of advising "a smaller α"; and the chart's cross-validated ECE,
measured on each fold's few held-out rows, is said to be biased upward against the test ECE (checked here
on the page's own test rows)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

import pbr_core
from dashboard import report, texts
from test_app_recal import _run_automatic_alpha, at  # noqa: F401 - the fixture: CIFAR-10 loaded


def _infos(at) -> str:
    return "\n".join(str(i.value) for i in at.info)


def test_a_fit_at_its_prior_chosen_by_cross_validation_gets_no_advice_against_the_choice(at):  # noqa: F811
    job = _run_automatic_alpha(at)  # α from (0.1, 1) by 2-fold CV on 144 rows
    # The audit's case: the chosen α's fit ended at its prior (the fit's own record, ended_at_prior).
    job.result = replace(job.result, alpha=1.0, fit_report={**job.result.fit_report, "ended_at_prior": True})
    assert job.result.at_prior
    at.run()
    assert not at.exception, at.exception
    said = _infos(at)
    assert "The fit ended at the prior" in said and "A smaller α" not in said
    assert ("Cross-validation chose α = 1, and with it a fit at its prior: on these 144 recalibration rows the "
            "smaller α values, which let the GP move further from the prior, did not score better") in said
    assert "lowering α by hand would go against that choice" in said
    doc = report.build_report([report.pbr_section(job.result)], data_name="d")
    assert "A smaller α" not in doc and "Cross-validation chose α = 1" in doc


def test_the_cross_validated_ece_is_said_to_be_larger_than_the_test_ece_and_it_is(at):  # noqa: F811
    job = _run_automatic_alpha(at)
    r = job.result
    caption = next(c.value for c in at.caption if "held-out rows" in c.value)
    n_te = r.n_te
    assert (f"Each fold's ECE is measured on its about 72 held-out rows (B = 4 bins), not on the {n_te:,} test rows "
            f"(B = {pbr_core.optimal_n_bins(n_te)}) of the test ECE above: on fewer rows per bin the ECE is biased "
            "upward") in caption
    # The claim on these very predictions: the uncalibrated test rows' ECE on 72-row draws (B = 4), on average,
    # is well above their ECE on every test row.
    preds = at.session_state["pbr_loaded"].preds
    rng = np.random.default_rng(0)
    test_rows = np.setdiff1d(np.arange(preds.n), r.fit_rows)
    assert len(test_rows) == n_te
    whole = pbr_core.ece(preds.probs[test_rows], preds.labels[test_rows])
    small = np.mean([pbr_core.ece(preds.probs[i], preds.labels[i], 4)
                     for i in (rng.choice(test_rows, 72, replace=False) for _ in range(200))])
    assert small > 1.3 * whole


def test_a_hand_set_alpha_at_its_prior_keeps_its_advice():
    note = texts.at_prior_note(True, 0.75, 1000)
    assert "A smaller α or more recalibration rows" in note and "Cross-validation" not in note
    smallest = texts.at_prior_note(True, 0.1, 144, cv_grid=(0.1, 1.0))
    assert "the smallest of its grid" in smallest and "A smaller α" not in smallest
