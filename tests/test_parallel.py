"""Folds fitted in worker processes (pbr_core.parallel): the same numbers as in one process,
progress per fit, a stop that keeps the finished rows and leaves no worker behind, errors that
come out as they were raised."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path

import numpy as np
import pytest

from pbr_core.alpha_selection import select_alpha
from pbr_core.cancel import Cancelled
from pbr_core.experiments import kl_vs_ece_gap
from pbr_core.parallel import available_cores, check_n_jobs, run_chains
from pbr_core.predictions import Predictions

QUICK = dict(max_iter=30, n_mc=8, n_predict_samples=8, device="cpu")


@pytest.fixture(scope="module")
def preds(cifar10) -> Predictions:
    z, y = cifar10
    return Predictions.from_arrays(z[:900].astype(float), y[:900], input_type="logits")


def _no_workers_left(timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while mp.active_children() and time.monotonic() < end:
        time.sleep(0.1)
    return not mp.active_children()


def test_kl_gap_in_two_processes_gives_the_same_rows_in_the_same_order(preds) -> None:
    kw = dict(alphas=[1.0, 0.1], n_re=150, n_folds=3, **QUICK)
    one = kl_vs_ece_gap(preds, **kw)
    seen: list[tuple[int, int, str]] = []
    two = kl_vs_ece_gap(preds, n_jobs=2, progress=lambda d, t, m: seen.append((d, t, m)), **kw)
    cols = ["alpha", "fold", "n_re", "n_bins", "kl", "ece_re", "ece_te", "gap", "bound", "error"]
    assert one.table[cols].equals(two.table[cols])
    assert two.table[["fold", "alpha"]].values.tolist() == [[f, a] for f in range(3) for a in (1.0, 0.1)]
    # one progress call per fit, counting up to the total, whatever order the folds finished in
    assert [d for d, _, _ in seen] == list(range(1, 7)) and {t for _, t, _ in seen} == {6}
    assert sorted(m for _, _, m in seen) == sorted(f"pbr alpha={a:g}, fold {f}/3" for f in (1, 2, 3) for a in (1, 0.1))
    assert one.pearson_r == two.pearson_r


def test_alpha_selection_in_two_processes_chooses_the_same(preds) -> None:
    kw = dict(grid=(0.1, 1.0), n_splits=3, **QUICK)
    sub = preds.subset(np.arange(300))
    one, two = select_alpha(sub, **kw), select_alpha(sub, n_jobs=2, **kw)
    assert one.scores.equals(two.scores) and one.best_alpha == two.best_alpha
    from pbr_core.recalibrators import get_recalibrator

    cv = get_recalibrator("pbr_cv", alphas=[0.1, 1.0], cv=3, n_jobs=2, **QUICK).fit(sub)
    assert cv.alpha_ == one.best_alpha and cv.selection_.scores.equals(one.scores)


def test_a_stop_keeps_the_finished_rows_and_terminates_the_workers(preds) -> None:
    state = {"rows": 0}

    def progress(done, total, message):
        state["rows"] = done

    with pytest.raises(Cancelled) as info:
        kl_vs_ece_gap(preds, alphas=[0.1, 0.5, 1.0], n_re=150, n_folds=4, n_jobs=2, progress=progress,
                      cancel=lambda: state["rows"] >= 1, **QUICK)
    exc = info.value
    assert exc.total == 12 and 1 <= exc.done < 12 and len(exc.partial) == exc.done
    assert exc.partial["kl"].notna().all()
    assert _no_workers_left()


def _chain_ok(x: int, *, emit) -> None:
    for i in range(3):
        emit((x, i))


def _chain_fails(x: int, *, emit) -> None:
    emit((x, 0))
    if x == 1:
        raise ValueError(f"chain {x} cannot go on")


def _chain_dies(x: int, *, emit) -> None:
    if x == 1:
        os._exit(3)  # a worker killed from outside (e.g. for memory)
    time.sleep(0.5)


def _chain_warns(x: int, *, emit) -> None:
    import warnings

    warnings.warn(f"chain {x}: a fit ended at the prior", RuntimeWarning)
    emit(x)


def test_warnings_in_workers_reach_the_caller() -> None:
    """A worker's warnings are re-issued in the calling process (its filters, pytest.warns and the
    dashboard's capture see them), with their category, as with n_jobs=1."""
    for n_jobs in (1, 2):
        got: list[int] = []
        with pytest.warns(RuntimeWarning) as record:
            run_chains(_chain_warns, [(1,), (2,)], n_jobs, lambda i, item: got.append(item))
        assert sorted(got) == [1, 2]
        texts = sorted(str(w.message) for w in record if w.category is RuntimeWarning)
        assert texts == ["chain 1: a fit ended at the prior", "chain 2: a fit ended at the prior"], n_jobs
    assert _no_workers_left()


def test_run_chains_delivers_every_item_and_raises_a_chains_error() -> None:
    got: list[tuple[int, tuple[int, int]]] = []
    run_chains(_chain_ok, [(10,), (20,), (30,)], 2, lambda i, item: got.append((i, item)))
    assert sorted(got) == [(i, (x, k)) for i, x in enumerate((10, 20, 30)) for k in range(3)]
    with pytest.raises(ValueError, match="chain 1 cannot go on"):
        run_chains(_chain_fails, [(0,), (1,), (2,)], 2, lambda i, item: None)
    assert _no_workers_left()
    with pytest.raises(RuntimeError, match="worker process stopped unexpectedly"):
        run_chains(_chain_dies, [(0,), (1,)], 2, lambda i, item: None)
    assert _no_workers_left()
    # one job: in this process, in order
    got.clear()
    run_chains(_chain_ok, [(1,), (2,)], 1, lambda i, item: got.append((i, item)))
    assert got == [(0, (1, 0)), (0, (1, 1)), (0, (1, 2)), (1, (2, 0)), (1, (2, 1)), (1, (2, 2))]


def test_n_jobs_is_checked() -> None:
    assert check_n_jobs(1) == 1 and check_n_jobs(np.int64(3)) == 3 and check_n_jobs(-1) == available_cores()
    for bad in (0, -2, 1.5, True, "2"):
        with pytest.raises(ValueError, match="n_jobs"):
            check_n_jobs(bad)
    from pbr_core.recalibrators import get_recalibrator

    with pytest.raises(ValueError, match="n_jobs"):
        get_recalibrator("pbr_cv", n_jobs=0)


def test_a_script_without_a_main_guard_gets_told_why(tmp_path) -> None:
    """Spawned workers import the script that started them: a top-level call with n_jobs > 1 would
    run again in every worker. It stops with a message naming the fix, not a bare BrokenProcessPool."""
    import subprocess
    import sys

    script = tmp_path / "no_guard.py"
    script.write_text(
        "import numpy as np\n"
        "from pbr_core.parallel import run_chains\n"
        "from tests.test_parallel import _chain_ok\n"
        "run_chains(_chain_ok, [(1,), (2,)], 2, lambda i, item: None)\n")
    root = str(Path(__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": root}, cwd=root)
    assert done.returncode != 0
    assert "Put the call under `if __name__ == '__main__':`" in done.stderr
    assert "is not under `if __name__ == '__main__':`" in done.stderr  # the parent's own message


def test_a_stop_installed_around_pbrcv_reaches_its_workers(preds) -> None:
    """The dashboard's Stop: a cancel_when around the job (not a cancel= argument) stops a PBRCV
    whose folds run in worker processes, and terminates them."""
    from pbr_core.cancel import cancel_when
    from pbr_core.recalibrators import get_recalibrator

    seen = []
    rec = get_recalibrator("pbr_cv", alphas=[0.1, 0.5, 1.0], cv=4, n_jobs=2, **QUICK)
    with pytest.raises(Cancelled), cancel_when(lambda: len(seen) >= 1):
        rec.fit(preds.subset(np.arange(400)), progress=lambda done, total, message: seen.append(done))
    assert 1 <= len(seen) < 12 and not hasattr(rec, "alpha_")
    assert _no_workers_left()


def test_arguments_that_cannot_reach_a_worker_raise_instead_of_waiting() -> None:
    with pytest.raises(Exception, match="pickle|lambda"):
        run_chains(_chain_ok, [(lambda: 1,), (2,)], 2, lambda i, item: None)
    assert _no_workers_left()


def test_compare_in_two_processes_gives_the_same_table_and_predictions(preds) -> None:
    """Table 1's protocol: the same rows in the same (fold, method) order; on_predictions runs here
    with the probabilities the workers send back (fits shared within a fold stay shared)."""
    from pbr_core.experiments import compare

    kw = dict(methods=["uncalibrated", "temperature", "pbr", "pbr_app"], n_re=150, n_folds=3,
              method_params={m: QUICK for m in ("pbr", "pbr_app")})
    got: dict[int, dict] = {1: {}, 2: {}}

    def keep(jobs):
        return lambda fold, method, test, probs: got[jobs].__setitem__((fold, method), (test.n, probs))

    one = compare(preds, on_predictions=keep(1), **kw)
    two = compare(preds, on_predictions=keep(2), n_jobs=2, **kw)
    cols = ["method", "fold", "n_re", "n_te", "ece", "accuracy", "nll", "brier", "kl", "at_prior", "fit_shared_with"]
    assert one[cols].equals(two[cols])
    assert (two["fit_shared_with"] == "pbr").sum() == 3  # pbr_app reused pbr's fit in every fold
    assert got[1].keys() == got[2].keys() and len(got[2]) == 12
    for key, (n_te, probs) in got[1].items():
        assert got[2][key][0] == n_te
        np.testing.assert_array_equal(got[2][key][1], probs)
