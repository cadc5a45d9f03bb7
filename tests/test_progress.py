"""The one progress protocol (pbr_core.progress): progress(done, total, message), stops via pbr_core.cancel."""

from __future__ import annotations

import numpy as np
import pytest

from pbr_core.cancel import Cancelled, cancel_when
from pbr_core.progress import report_progress, track, tqdm_progress
from pbr_core.recalibrators import HistogramBinning


def test_a_tracked_loop_reports_the_items_done_before_each_item() -> None:
    seen = []
    with report_progress(lambda done, total, message: seen.append((done, total, message))):
        items = list(track(iter("abc"), total=3, desc="maps"))
    assert items == ["a", "b", "c"]
    assert seen == [(0, 3, "maps"), (1, 3, "maps"), (2, 3, "maps")]


def test_without_a_listener_the_loop_is_returned_untouched() -> None:
    loop = range(3)
    assert track(loop, total=3) is loop


def test_an_inner_none_hides_the_outer_progress_and_the_block_restores_it() -> None:
    seen = []
    with report_progress(lambda d, t, m: seen.append(d)):
        with report_progress(None):
            list(track(range(2), total=2))
        assert seen == []
        list(track(range(2), total=2))
    assert seen == [0, 1]


def test_a_stop_ends_a_tracked_loop_before_the_next_item() -> None:
    stop, done = [False], []
    with pytest.raises(Cancelled), cancel_when(lambda: stop[0]):
        for k in track(range(5), total=5):
            done.append(k)
            stop[0] = k == 1
    assert done == [0, 1]


def test_one_vs_all_fits_report_through_the_protocol() -> None:
    seen = []
    P = np.full((20, 3), 1 / 3)
    with report_progress(lambda d, t, m: seen.append((d, t, m))):
        HistogramBinning(n_bins=2, multiclass="one_vs_all").fit(P, np.arange(20) % 3)
    assert seen == [(k, 3, "histogram_binning (one-vs-all)") for k in range(3)]


def test_the_experiments_tqdm_adapter_is_the_protocol_one() -> None:
    from pbr_core.experiments import tqdm_progress as from_experiments

    assert from_experiments is tqdm_progress
