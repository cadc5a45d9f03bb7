"""The library's thread policy for GP fits and predictions (pbr_core.gp.threads)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from pbr_core.gp.threads import ENV_VAR, fit_thread_count, fit_threads
from pbr_core.recalibrators.gp import PBR


def test_fit_threads_sets_and_restores(monkeypatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    torch.set_num_threads(2)
    try:
        with fit_threads() as n:
            assert n == 1 and torch.get_num_threads() == 1
            with fit_threads(3):  # nested: restores the outer block's count
                assert torch.get_num_threads() == 3
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        with pytest.raises(KeyError), fit_threads():
            raise KeyError("the count is restored when the block raises")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)


@pytest.mark.parametrize("value,expected", [("4", 4), (" 2 ", 2), ("", 1)])
def test_environment_variable_overrides_the_default(monkeypatch, value, expected) -> None:
    monkeypatch.setenv(ENV_VAR, value)
    assert fit_thread_count() == expected


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_a_bad_environment_variable_is_named_in_the_error(monkeypatch, value) -> None:
    monkeypatch.setenv(ENV_VAR, value)
    with pytest.raises(ValueError, match=ENV_VAR):
        fit_thread_count()


def test_pbr_fit_and_prediction_run_with_one_thread_in_a_job_thread(monkeypatch, cifar10_logits) -> None:
    """As in the dashboard: a fit in another thread that starts with torch's default count of 2
    runs with 1 thread (seen from inside the fit's progress reports) and leaves 2 behind."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    z, y = cifar10_logits
    seen: dict[str, object] = {}

    def job() -> None:
        torch.set_num_threads(2)
        rec = PBR(alpha=0.5, device="cpu", **PBR._test_params())
        from pbr_core.progress import report_progress

        with report_progress(lambda done, total, message: seen.setdefault("during_fit", torch.get_num_threads())):
            rec.fit(z[:300], y[:300])
        seen["after_fit"] = torch.get_num_threads()
        import pbr_core.recalibrators.gp as gp_module

        real = gp_module.predict_proba
        monkeypatch.setattr(gp_module, "predict_proba",
                            lambda *a, **k: (seen.setdefault("during_predict", torch.get_num_threads()), real(*a, **k))[1])
        probs = rec.predict_proba(z[300:310])
        seen["after_predict"] = torch.get_num_threads()
        seen["probs_ok"] = bool(np.allclose(probs.sum(1), 1.0))

    def guarded() -> None:
        try:
            job()
        except Exception as exc:  # an error in the thread must fail the test, not vanish
            seen["error"] = repr(exc)

    t = threading.Thread(target=guarded)
    t.start()
    t.join()
    assert seen == {"during_fit": 1, "after_fit": 2, "during_predict": 1, "after_predict": 2, "probs_ok": True}
