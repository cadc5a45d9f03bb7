"""The library's L-BFGS (pbr_core.gp.optimizers.LBFGS) against torch.optim.LBFGS, the reference it ports."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from pbr_core.gp.model import GPRecalibrationModel, initial_inducing_points
from pbr_core.gp.objectives import ObjectiveSpec, draw_mc_noise
from pbr_core.gp.optimizers import CHUNK, LBFGS
from pbr_core.gp.problem import FitData


def _problem(cifar10_logits, n=80, s=10):
    z, y = cifar10_logits
    z, y = z[:n], y[:n]
    model = GPRecalibrationModel(torch.as_tensor(initial_inducing_points(z, 6)), "logits")
    data = FitData(torch.as_tensor(z), torch.as_tensor(y), ObjectiveSpec.pbr(0.5), eps=draw_mc_noise(n, s, z.shape[1], 0))
    return model, data


def _closure(model, data, counter):
    objective = data.objective(model)

    def closure():
        for p in model.parameters():
            if p.grad is not None:
                p.grad.zero_()
        loss = objective()
        counter[0] += 1
        loss.backward()
        return loss

    return closure


def test_same_path_as_torch_lbfgs_over_several_chunks(cifar10_logits) -> None:
    """Chunk after chunk, the parameters equal torch.optim.LBFGS's (the same algorithm; the two-loop
    recursion runs in NumPy on the host, so to round-off: ~1e-11 here), with one evaluation fewer per
    chunk (torch re-evaluates the point its previous step ended on)."""
    mine, data = _problem(cifar10_logits)
    ref, _ = _problem(cifar10_logits)
    kw = dict(lr=1.0, history_size=20, tolerance_grad=1e-6, tolerance_change=1e-9)
    n_ref, n_mine = [0], [0]
    torch_opt = torch.optim.LBFGS(list(ref.parameters()), max_iter=CHUNK, max_eval=CHUNK * 30,
                                  line_search_fn="strong_wolfe", **kw)
    my_opt = LBFGS(list(mine.parameters()), max_eval=CHUNK * 30, **kw)
    ref_closure, my_closure = _closure(ref, data, n_ref), _closure(mine, data, n_mine)
    for chunk in range(4):
        before = torch_opt.state[torch_opt._params[0]].get("n_iter", 0)
        torch_opt.step(ref_closure)
        it_ref = torch_opt.state[torch_opt._params[0]]["n_iter"] - before
        it_mine = my_opt.step(my_closure, CHUNK)
        assert it_mine == it_ref
        for (name, a), b in zip(ref.named_parameters(), mine.parameters()):
            torch.testing.assert_close(b, a, rtol=0, atol=1e-9, msg=f"{name} after chunk {chunk}")
        with torch.no_grad():
            assert float(data.terms(mine).total) == pytest.approx(float(data.terms(ref).total), rel=1e-12, abs=0)
        with torch.no_grad():
            assert my_opt.loss == float(data.terms(mine).total)  # the carried value is the objective there
    assert n_mine[0] == n_ref[0] - 3  # torch's start-of-step evaluations of chunks 2-4


def test_tolerance_stop_returns_fewer_iterations(cifar10_logits) -> None:
    model, data = _problem(cifar10_logits)
    opt = LBFGS(list(model.parameters()), tolerance_grad=1e-6, tolerance_change=1e-2)
    assert opt.step(_closure(model, data, [0]), CHUNK) < CHUNK  # |delta f| < 1e-2 stops it early
    huge = LBFGS(list(model.parameters()), tolerance_grad=1e3)
    assert huge.step(_closure(model, data, [0]), CHUNK) == 0  # gradient already below tolerance


def test_a_fit_imports_only_what_it_uses() -> None:
    """Constructing a torch.optim optimiser imports torch._dynamo (~1.5 CPU s once per process,
    a CLI run pays it), and torch.broadcast_shapes imports sympy (~0.7 CPU s, GPyTorch calls it
    when a model is built); the library's fits must import neither."""
    code = ("import sys, numpy as np\n"
            "from pbr_core.recalibrators.gp import PBR\n"
            "rng = np.random.default_rng(0); z = rng.normal(size=(60, 3)) * 3; y = rng.integers(0, 3, 60)\n"
            "r = PBR(alpha=0.5, n_mc=4, n_predict_samples=4, max_iter=120).fit(z, y)\n"
            "r.predict_proba(z)\n"
            "print('torch._dynamo' in sys.modules, 'sympy' in sys.modules, 'sklearn' in sys.modules, "
            "'scipy.optimize' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # Nor scikit-learn (~1 CPU s with scipy.stats) or scipy.optimize (~0.4): no GP fit uses them.
    assert out.stdout.strip().splitlines()[-1] == "False False False False"


def test_a_gradient_that_is_not_finite_stops_the_fit_at_good_parameters(cifar10_logits) -> None:
    """A NaN in the gradient (with a finite objective) raises DivergenceError out of run_lbfgs, with the
    model back at the parameters of the last good snapshot: the check is one test of the flat gradient
    in LBFGS.evaluate (it was a test per parameter in the closure)."""
    from pbr_core.gp.optimizers import DivergenceError, run_lbfgs, snapshot
    from pbr_core.gp.problem import TrainSettings

    model, data = _problem(cifar10_logits)
    objective = data.objective(model)
    calls = [0]

    class NaNGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return torch.full_like(g, float("nan"))

    def poisoned():
        calls[0] += 1
        value = objective()
        return NaNGrad.apply(value) if calls[0] > 3 else value  # finite value, NaN gradient from the 4th

    start = snapshot(model)
    with pytest.raises(DivergenceError, match="gradient became NaN or infinite"):
        run_lbfgs(model, poisoned, TrainSettings(), 1.0, 0, 20, None, {"evaluations": 0, "iterations": 0})
    # The fit stopped in its first chunk, so the last good snapshot is the start.
    for name, p in model.named_parameters():
        assert torch.equal(p.detach(), start[name]), name
