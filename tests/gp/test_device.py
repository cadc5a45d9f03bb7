"""device="auto" chooses by the size of the work (pbr_core.gp.device; the rule is provisional)."""

from __future__ import annotations

import pytest
import torch

from pbr_core.gp import device as gp_device
from pbr_core.gp.device import AUTO_CUDA_MIN_SCORES, auto_prefers_cuda, resolve_device


def test_auto_takes_the_gpu_for_large_work_only(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto", scores=AUTO_CUDA_MIN_SCORES).type == "cuda"
    assert resolve_device("auto", scores=5000 * 100).type == "cuda"  # n_re = 5000, K = 100: 7x faster measured
    assert resolve_device("auto", scores=1000 * 10).type == "cpu"  # n_re = 1000, K = 10: 1.4 s against 0.76
    assert resolve_device("auto", scores=AUTO_CUDA_MIN_SCORES - 1).type == "cpu"
    assert resolve_device("auto").type == "cuda"  # size unknown: the GPU whenever there is one, as before


def test_auto_without_a_gpu_is_the_cpu(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto", scores=10**9).type == "cpu"
    with pytest.raises(RuntimeError, match="cannot use a CUDA GPU"):
        resolve_device("cuda", scores=10)  # an explicit request is never overruled by the size


def test_the_rule_in_words() -> None:
    assert auto_prefers_cuda(None) and auto_prefers_cuda(AUTO_CUDA_MIN_SCORES)
    assert not auto_prefers_cuda(AUTO_CUDA_MIN_SCORES - 1)
    assert "provisional" in gp_device.__doc__


def test_a_small_fit_with_auto_never_touches_cuda(monkeypatch) -> None:
    """On a GPU machine, a K = 3 fit of 60 rows with device="auto" runs on the CPU: CUDA is not even asked."""
    import numpy as np

    from pbr_core.recalibrators.gp import PBR

    asked = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: asked.append(1) or False)
    rng = np.random.default_rng(0)
    z, y = rng.normal(size=(60, 3)) * 3, rng.integers(0, 3, 60)
    r = PBR(alpha=0.5, n_mc=4, n_predict_samples=4, max_iter=30).fit(z, y)
    r.predict_proba(z)
    assert r.fit_report_["device"] == "cpu" and not asked
