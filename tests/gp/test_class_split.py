"""Drawing only each row's largest classes (``mc_classes``): the tail enters through its moments.

:class:`pbr_core.gp.objectives.ClassSplit` replaces, in the normaliser Z = sum_k exp f_k of each
Monte Carlo draw, the sum over a row's tail classes by its expectation (and, for the Brier score's
sum of squares, sum exp 2 f_k by its expectation). Pinned here: the fused kernel against the
obvious autograd implementation of that estimator; the exact estimator when the tail is empty; the
estimator's error against a large-sample reference on real CIFAR-100 marginals and the error
estimate that bounds it; the rule of ``mc_classes="auto"``; and the recalibrators' parameter,
report and refinement.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pbr_core.gp import objectives as obj
from pbr_core.gp.objectives import (
    ObjectiveSpec,
    auto_mc_classes,
    draw_mc_noise,
    evaluate_objective,
    mc_expectations,
    split_classes,
    tail_error,
)
from pbr_core.gp.problem import FitData

F64 = torch.float64


def _inputs(lead=(), n=40, k=30, seed=0):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(*lead, n, k, dtype=F64, generator=g) * 3
    mu = z + 0.3 * torch.randn(*lead, n, k, dtype=F64, generator=g)
    var = 0.05 + torch.rand(*lead, n, k, dtype=F64, generator=g)
    y = torch.randint(0, k, (*lead, n), generator=g)
    return z, mu, var, y


def _split_reference(mu, var, split, ce: bool, brier: bool):
    """The split estimator written with plain autograd (no shift, no chunks, no analytic gradients)."""
    mu_x, var_x = mu.gather(-1, split.exact), var.gather(-1, split.exact)
    f = mu_x.unsqueeze(-2) + var_x.sqrt().unsqueeze(-2) * split.eps.to(mu.dtype)  # (..., N, S, T)
    c = torch.where(split.tail, torch.exp(mu + var / 2), torch.zeros((), dtype=F64)).sum(-1)
    d = torch.where(split.tail, torch.exp(2 * mu + 2 * var), torch.zeros((), dtype=F64)).sum(-1)
    ef = torch.exp(f)
    z = ef.sum(-1) + c.unsqueeze(-1)  # (..., N, S)
    p = ef / z.unsqueeze(-1)
    pos = split.label_pos.unsqueeze(-1).unsqueeze(-1).expand(*f.shape[:-1], 1)
    p_y, f_y = p.gather(-1, pos).squeeze(-1), f.gather(-1, pos).squeeze(-1)
    q = (p * p).sum(-1) + d.unsqueeze(-1) / z.square()
    ce_n = (z.log() - f_y).mean(-1) if ce else None
    brier_n = ((1 - p_y).square() + q - p_y.square()).mean(-1) if brier else None
    return ce_n, brier_n


@pytest.mark.parametrize("lead", [(), (2,)])
@pytest.mark.parametrize("ce,brier", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("n_exact", [2, 7, 29])
def test_split_kernel_equals_plain_autograd(lead, ce, brier, n_exact) -> None:
    """Values and gradients (through mu and var, tail moments included) of the fused kernel equal
    the obvious autograd version of the same estimator, with several row chunks."""
    z, mu, var, y = _inputs(lead)
    eps = draw_mc_noise(mu.shape[-2], 9, mu.shape[-1], seed=1)
    split = split_classes(z, y, eps, n_exact)
    w = torch.rand(*lead, mu.shape[-2], dtype=F64, generator=torch.Generator().manual_seed(3))
    out = []
    for fn in (lambda m, v: mc_expectations(m, v, y, eps, ce=ce, brier=brier, max_chunk_elements=101, split=split),
               lambda m, v: _split_reference(m, v, split, ce, brier)):
        m, v = mu.clone().requires_grad_(), var.clone().requires_grad_()
        a, b = fn(m, v)
        loss = sum((t * w * (i + 1)).sum() for i, t in enumerate((a, b)) if t is not None)
        loss.backward()
        out.append((loss.detach(), m.grad, v.grad))
    for x, r in zip(out[0], out[1]):
        torch.testing.assert_close(x, r, rtol=1e-11, atol=1e-12)


def test_a_split_without_tail_is_the_exact_estimator() -> None:
    """T = K: nothing is replaced by its moments, so the terms are those of the exact estimator."""
    z, mu, var, y = _inputs(n=25, k=12)
    eps = draw_mc_noise(25, 8, 12, seed=2)
    split = split_classes(z, y, eps, 12)
    assert not bool(split.tail.any())
    a = mc_expectations(mu, var, y, eps, split=split)
    b = mc_expectations(mu, var, y, eps)
    for x, r in zip(a, b):
        torch.testing.assert_close(x, r, rtol=1e-13, atol=1e-14)


def test_the_split_keeps_the_label_and_the_largest_scores() -> None:
    z = torch.tensor([[5.0, 4.0, 3.0, 2.0, 1.0], [5.0, 4.0, 3.0, 2.0, 1.0]], dtype=F64)
    y = torch.tensor([1, 4])
    eps = draw_mc_noise(2, 4, 5, seed=0)
    split = split_classes(z, y, eps, 3)
    assert split.exact.tolist() == [[0, 1, 2], [0, 1, 4]]  # a label outside the top 3 takes the third place
    assert split.label_pos.tolist() == [1, 2]
    assert split.tail.tolist() == [[False, False, False, True, True], [False, False, True, True, False]]
    # the draws of the drawn classes are the fit's draws of those very classes
    assert torch.equal(split.eps[1, :, 2], eps[1, :, 4])
    assert torch.equal(split.with_mc_draws(2).eps, split.eps[:, :2])


def test_split_error_on_real_marginals_is_within_its_estimate(cifar100_logits) -> None:
    """On CIFAR-100 DenseNet-121 rows at marginals like a PBR fit's (the logits, variance .15, as
    the fits of docs/gp_measurements.md), drawing 16 classes per row moves the Brier and the
    cross-entropy terms by less than the error estimate ``tail_error`` (measured: 0.2 and 0.55 of
    it), against 2000 antithetic draws of every class; with 48 classes the move is smaller."""
    z, y = cifar100_logits
    z, y = torch.as_tensor(z[:300]), torch.as_tensor(y[:300])
    var = torch.full_like(z, 0.15)
    eps = draw_mc_noise(300, 2000, 100, seed=7, dtype=torch.float32, antithetic=True)
    ce0, b0 = mc_expectations(z, var, y, eps)
    moved = {}
    for t in (16, 48):
        split = split_classes(z, y, eps, t)
        ce1, b1 = mc_expectations(z, var, y, eps, split=split)
        est = float(tail_error(z, var, split))
        moved[t] = (abs(float(ce1.mean() - ce0.mean())), abs(float(b1.mean() - b0.mean())), est)
        assert moved[t][0] < est and moved[t][1] < est, moved
    assert moved[48][0] < moved[16][0] and moved[48][2] < moved[16][2], moved
    # the estimate is not vacuous: at 16 classes it is within 5x of the cross entropy's move
    assert moved[16][2] < 5 * moved[16][0], moved


def test_tail_error_is_zero_without_variance_and_grows_with_it() -> None:
    z, mu, var, y = _inputs(n=30, k=20)
    split = split_classes(z, y, draw_mc_noise(30, 4, 20, seed=0), 5)
    assert float(tail_error(mu, torch.zeros_like(var), split)) == 0.0
    assert float(tail_error(mu, 0.1 * var, split)) < float(tail_error(mu, var, split))


def test_auto_rule_draws_every_class_below_fifty_and_adapts_to_the_tail(cifar100_logits) -> None:
    z, _ = cifar100_logits
    assert auto_mc_classes(np.random.default_rng(0).normal(size=(100, 49))) is None
    assert auto_mc_classes(z) == obj.MC_EXACT_CLASSES  # DenseNet-121: a light tail at 16 classes
    # a softer model (temperature 1.5) has a heavier tail: more classes are drawn
    t = auto_mc_classes(z / 1.5)
    assert t is not None and t > obj.MC_EXACT_CLASSES
    # the rule's own criterion holds at the chosen T, and not at the one before it
    p = torch.softmax(torch.as_tensor(z / 1.5), -1)
    sq = torch.sort(p * p, -1, descending=True).values
    assert float(sq[:, t:].sum(-1).mean()) <= obj.MC_TAIL_SQUARES < float(sq[:, 48:].sum(-1).mean())
    # flat scores: no split can keep the tail light
    assert auto_mc_classes(np.zeros((10, 60))) is None


def test_fitdata_slices_and_refines_its_split() -> None:
    z, mu, var, y = _inputs((2,), n=20, k=40)
    eps = draw_mc_noise(20, 6, 40, seed=0)
    data = FitData(z=z, labels=y, spec=ObjectiveSpec.pbr(0.5), eps=eps, split=split_classes(z, y, eps, 8))
    assert data.with_mc_draws(2).split.eps.shape == (2, 20, 2, 8)
    finer = data.refined()
    assert finer.split.n_exact == 16 and finer.refined().split.n_exact == 32
    assert finer.refined().refined().split is None  # 64 classes of 40: every class
    member = data.member((1,))
    assert member.split.exact.shape == (20, 8)
    torch.testing.assert_close(member.split.eps, split_classes(z[1], y[1], eps, 8).eps)


def test_the_exact_terms_ignore_the_split() -> None:
    z, mu, var, y = _inputs(n=20, k=40)
    eps = draw_mc_noise(20, 6, 40, seed=0)
    kl = torch.tensor(1.0, dtype=F64)
    spec = ObjectiveSpec.pbr_total(0.5)
    split = split_classes(z, y, eps, 8)
    exact = evaluate_objective(mu, var, y, kl, spec, eps)
    approx = evaluate_objective(mu, var, y, kl, spec, eps, split=split)
    assert float(exact.total) != float(approx.total)
    assert abs(float(exact.total - approx.total)) < 0.05 * float(exact.total)


# ---------------------------------------------------------------------- the recalibrators' mc_classes
def test_mc_classes_auto_splits_from_fifty_classes_and_reports_it(cifar10_logits, cifar100_logits, tmp_path) -> None:
    from pbr_core.recalibrators import load_recalibrator
    from pbr_core.recalibrators.gp import PBR, GPCalibration

    fit = dict(max_iter=10, n_predict_samples=5, device="cpu")
    z, y = cifar100_logits
    rec = PBR(**fit).fit(z[:80], y[:80])
    rep = rec.fit_report_
    assert rec.mc_classes == "auto" and rec.mc_class_count(z[:80]) == 16
    # after 10 iterations the variances are still large: the fit continued with more classes
    # (32, 64, then all) until the split's error estimate was within the tolerance
    assert rep["mc_classes"] in (16, 32, 64, None)
    assert rep["mc_classes"] is None or 0 <= rep["mc_tail_error"] <= obj.MC_TAIL_TOLERANCE
    # the reported objective is the one on every class (the split only steers the optimiser)
    exact = PBR(mc_classes="all", **fit)
    assert exact.mc_class_count(z) is None
    assert PBR(mc_classes=24).mc_class_count(z) == 24 and PBR(mc_classes=100).mc_class_count(z) is None
    loaded = load_recalibrator(rec.save(tmp_path / "split.json"))
    assert loaded.mc_classes == "auto" and loaded.fit_report_["mc_classes"] == rep["mc_classes"]
    np.testing.assert_array_equal(loaded.predict_proba(z[80:90]), rec.predict_proba(z[80:90]))
    # ten classes: every class is drawn, as before
    z10, y10 = cifar10_logits
    small = PBR(**fit).fit(z10[:80], y10[:80]).fit_report_
    assert small["mc_classes"] is None and small["mc_tail_error"] is None
    assert GPCalibration(max_iter=3).fit(z[:60], y[:60]).fit_report_["mc_classes"] is None  # no Monte Carlo


def test_the_reported_objective_is_on_every_class(cifar100_logits) -> None:
    from pbr_core.recalibrators.gp import PBR

    z, y = cifar100_logits
    rec = PBR(max_iter=10, n_predict_samples=5, device="cpu").fit(z[:80], y[:80])
    eps = draw_mc_noise(80, rec.mc_draw_count(100), 100, 0, dtype=obj.MC_DTYPE, antithetic=True)
    data = FitData(z=torch.as_tensor(z[:80], dtype=F64), labels=torch.as_tensor(y[:80]), spec=rec._spec(), eps=eps)
    with torch.no_grad():
        value = float(data.terms(rec.model_).total)
    assert value == pytest.approx(rec.fit_report_["objective"], rel=1e-12)


def test_a_restarted_fit_that_continues_with_more_classes_still_says_it_was_restarted(cifar100_logits,
                                                                                      monkeypatch) -> None:
    """The continuation with more classes gives the stop reason its own ending, but what the
    restarts from the prior did stays in it (it was lost before). Forced: the first fit counts as
    at the prior, the restarts report a rescue, and a tolerance nothing meets makes the fit go on."""
    from pbr_core.gp import training
    from pbr_core.recalibrators.gp import PBR

    note = training.RESTARTED + "the first fit ended at the prior, objective 0.4; from an alpha = 0.25 fit it reached 0.3)"
    assert note.startswith(" (restarted: ")
    z, y = cifar100_logits
    monkeypatch.setattr(training, "MC_TAIL_TOLERANCE", 0.0)
    ends = iter([[True]])
    real = training._at_prior_members
    monkeypatch.setattr(training, "_at_prior_members", lambda model, data: next(ends, None) or real(model, data))
    monkeypatch.setattr(training, "_escape_prior", lambda *args: (0, 0, (np.array([True]), "tolerance", note)))
    rep = PBR(max_iter=10, n_predict_samples=5, device="cpu", mc_classes=20).fit(z[:80], y[:80]).fit_report_
    assert note + " (continued drawing every class)" in rep["stop_reason"]
    assert rep["stop_reason"].count("(restarted:") == 1 and rep["restarts"] == 1
    # Restarts that did not do better: that stays in the stop reason through the continuation too.
    ends = iter([[True]])
    monkeypatch.setattr(training, "_escape_prior", lambda *args: (0, 0, None))
    rep = PBR(max_iter=10, n_predict_samples=5, device="cpu", mc_classes=20).fit(z[:80], y[:80]).fit_report_
    assert rep["stop_reason"].endswith(training.NOT_RESTARTED + " (continued drawing every class)")
    assert rep["stop_reason"].count("(ended at the prior") == 1 and rep["restarts"] == 0
    # A fit that never ended at the prior says nothing of restarts.
    ends = iter([[False]])
    rep = PBR(max_iter=10, n_predict_samples=5, device="cpu", mc_classes=20).fit(z[:80], y[:80]).fit_report_
    assert rep["stop_reason"].endswith(" (continued drawing every class)")
    assert "restart" not in rep["stop_reason"] and "ended at the prior" not in rep["stop_reason"]


def test_a_split_too_coarse_at_the_fit_continues_with_more_classes(cifar100_logits, monkeypatch) -> None:
    """Where the error estimate at the end exceeds MC_TAIL_TOLERANCE, the fit continues with twice
    as many classes drawn until it does not (here: a tolerance nothing meets, so up to every class)."""
    from pbr_core.gp import training
    from pbr_core.recalibrators.gp import PBR

    z, y = cifar100_logits
    monkeypatch.setattr(training, "MC_TAIL_TOLERANCE", 0.0)
    rec = PBR(max_iter=10, n_predict_samples=5, device="cpu", mc_classes=20).fit(z[:80], y[:80])
    rep = rec.fit_report_
    assert rep["mc_classes"] is None and rep["mc_tail_error"] is None  # finished on every class
    assert rep["stop_reason"].endswith("(continued drawing every class)")
    assert rep["iterations"] > 10 and all(w.startswith("the optimiser stopped") for w in rep["warnings"])
    monkeypatch.setattr(training, "MC_TAIL_TOLERANCE", 1e-3)  # met at once: no continuation
    kept = PBR(max_iter=10, n_predict_samples=5, device="cpu", mc_classes=20).fit(z[:80], y[:80]).fit_report_
    assert kept["mc_classes"] == 20 and kept["iterations"] <= 10 and "continued" not in kept["stop_reason"]


@pytest.mark.parametrize("bad", [1, 0, "some", 2.5, True])
def test_mc_classes_must_be_an_integer_of_two_or_more_auto_or_all(bad, cifar10_logits) -> None:
    from pbr_core.recalibrators.gp import PBR

    z, y = cifar10_logits
    with pytest.raises(ValueError, match=r"`mc_classes` to be an integer from 2 to 1000000, 'auto' or 'all'"):
        PBR(mc_classes=bad).fit(z[:50], y[:50])


def test_a_batch_of_split_fits_follows_each_fit_alone(cifar100_logits, monkeypatch) -> None:
    """Batched fits (alpha selection on a GPU, the KL-gap study) split every GP's rows as its fit
    alone would: the Adam path of each batch member equals the member's fit alone. (A batch shares
    one T: where one GP's split needs more classes at the end, all continue with more, so the
    tolerance is set here where neither needs it.)"""
    from pbr_core.gp import training
    from pbr_core.gp.batch import fit_batch
    from pbr_core.gp.problem import TrainSettings

    monkeypatch.setattr(training, "MC_TAIL_TOLERANCE", 1.0)

    z, y = cifar100_logits
    zs, ys = [z[:50], z[50:90]], [y[:50], y[50:90]]
    settings = TrainSettings(optimizer="adam", max_iter=15, escape_prior=False)
    spec = ObjectiveSpec.pbr(0.5)
    batched, reports = fit_batch(zs, ys, [0.5, 1.0], spec, "logits", torch.device("cpu"), n_mc=8, mc_classes=16,
                                 settings=settings)
    assert [r.mc_classes for r in reports] == [16, 16]
    for i in range(2):
        alone, rep = fit_batch([zs[i]], [ys[i]], [[0.5, 1.0][i]], spec, "logits", torch.device("cpu"), n_mc=8,
                               mc_classes=16, settings=settings)
        for (name, p), q in zip(batched.member(i).named_parameters(), alone.member(0).parameters()):
            torch.testing.assert_close(p, q, rtol=1e-9, atol=1e-11, msg=name)


def test_a_batch_continues_with_more_classes_when_one_gp_needs_it(cifar100_logits, monkeypatch) -> None:
    from pbr_core.gp import training
    from pbr_core.gp.batch import fit_batch
    from pbr_core.gp.problem import TrainSettings

    z, y = cifar100_logits
    monkeypatch.setattr(training, "MC_TAIL_TOLERANCE", 0.0)
    _, reports = fit_batch([z[:50], z[50:90]], [y[:50], y[50:90]], [0.5, 1.0], ObjectiveSpec.pbr(0.5), "logits",
                           torch.device("cpu"), n_mc=8, mc_classes=16,
                           settings=TrainSettings(optimizer="adam", max_iter=5, escape_prior=False))
    assert [r.mc_classes for r in reports] == [None, None]
    assert all(r.stop_reason.endswith("(continued drawing every class)") for r in reports)


def test_the_draws_are_described_in_words() -> None:
    from pbr_core.recalibrators.gp import mc_description

    assert mc_description({}) == ""  # GP calibration: no Monte Carlo
    assert mc_description({"n_mc": 32, "mc_classes": None}) == "32 Monte Carlo draws per entry"
    assert mc_description({"n_mc": 16, "mc_classes": 16}) == (
        "16 Monte Carlo draws per entry of each row's 16 largest scores and its label (the other classes "
        "through their expectation)")


def test_where_the_tail_s_moments_overflow_the_evaluation_draws_every_class() -> None:
    """At a trial point with huge variances exp(2 mu + 2 var) overflows; the split's terms would be
    inf or NaN where the exact estimator is finite, so such an evaluation draws every class."""
    z, mu, var, y = _inputs(n=20, k=40)
    eps = draw_mc_noise(20, 6, 40, seed=0)
    split = split_classes(z, y, eps, 8)
    huge = var.clone()
    huge[3, split.tail[3].nonzero()[0, 0]] = 400.0  # one tail entry: exp(800) overflows
    m, v = mu.clone().requires_grad_(), huge.clone().requires_grad_()
    a = mc_expectations(m, v, y, eps, split=split)
    b = mc_expectations(mu, huge, y, eps)
    for x, r in zip(a, b):
        assert bool(torch.isfinite(x).all())
        torch.testing.assert_close(x.detach(), r)
    (a[0].sum() + a[1].sum()).backward()
    assert bool(torch.isfinite(m.grad).all() and torch.isfinite(v.grad).all())
    # at ordinary variances the split is used (its terms differ from the exact ones)
    assert not torch.equal(mc_expectations(mu, var, y, eps, split=split)[1], mc_expectations(mu, var, y, eps)[1])
