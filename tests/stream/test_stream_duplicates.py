"""Exact copies of rows on a streamed dataset (left out by audit 9b's fix, which looked in memory only).

A prediction log is where copies happen: a pipeline that delivers a batch twice, a day's file copied
into the folder again. The streamed pass keeps the rows' hashes (scores and label) in bounded memory
(:class:`pbr_core.loading._duplicates.RowHashes`: a row is kept by its hash value, so its copies are kept
with it) and applies the in-memory rule to them. Known truth both ways: doubled calibrated files and a
folder with a day copied get the note; real files, tree and rounded scores, and draws with replacement
(independent rows that repeat by chance) do not, whether every row is kept or a sample.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil

import numpy as np
import pandas as pd
import pytest

from pbr_core import Predictions
from pbr_core.cli import EXIT_OK, main
from pbr_core.loading import load_predictions
from pbr_core.loading._duplicates import RowHashes, duplicate_rows
from pbr_core.stream import compute_statistics, copies_notes, open_dataset
from stream_testdata import SAMPLE, write_parts

P_ADULT = pd.read_csv(SAMPLE / "adult_gradient_boosting.csv.gz")["p_gt50k"].to_numpy()
NOTE = "exact copies of another row"


def _sample(preds: Predictions, batch: int = 700, cap: int = RowHashes.CAP) -> RowHashes:
    """A RowHashes fed as a stream feeds it: batch after batch, two partial samples merged."""
    a, b = RowHashes(cap), RowHashes(cap)
    for i, start in enumerate(range(0, preds.n, batch)):
        (a if i % 2 else b).add(preds.subset(np.arange(start, min(start + batch, preds.n))))
    return a.merge(b)


def _drawn(rng, n: int, doubled: bool = False) -> Predictions:
    p = P_ADULT[rng.integers(0, P_ADULT.size, n // 2 if doubled else n)]
    y = (rng.random(p.size) < p).astype(int)
    if doubled:
        p, y = np.repeat(p, 2), np.repeat(y, 2)
    return Predictions.from_arrays(p, y, input_type="probabilities")


def _same(d1, d2) -> None:
    assert (d1.n, d1.copies) == (d2.n, d2.copies)
    assert d1.beyond_chance == pytest.approx(d2.beyond_chance) and d1.z == pytest.approx(d2.z)


@pytest.mark.parametrize("path", sorted(p for p in SAMPLE.iterdir() if p.suffix != ".md"), ids=lambda p: p.name)
def test_kept_whole_the_stream_s_rule_is_the_in_memory_rule_on_the_predictions(path):
    """Every row kept (below the cap): the same copies, excess and z as duplicate_rows on the same
    predictions without their other columns; and no note on the real files (a random forest's KITTI
    scores repeat 8,864 times in 9,090 rows, in the shape chance gives)."""
    preds = load_predictions(path)
    bare = preds.subset(np.arange(preds.n))
    bare = Predictions(**{**bare.__dict__, "metadata": None}) if bare.metadata is not None else bare
    sample = _sample(preds)
    assert not sample.sampled and sample.n == preds.n
    _same(sample.rows(), duplicate_rows(bare))
    assert not sample.rows().notable


def test_a_sample_keeps_every_copy_of_a_kept_row_and_any_split_gives_the_same_sample():
    rng = np.random.default_rng(1)
    p = rng.random(20_000)  # every row twice, no other repeat
    y = (rng.random(p.size) < p).astype(int)
    preds = Predictions.from_arrays(np.repeat(p, 2), np.repeat(y, 2), input_type="probabilities")
    parts = [_sample(preds, batch, cap=3000) for batch in (500, 1777, 40_000)]
    kept = [s._compact() for s in parts]
    for s, (h, c) in zip(parts, kept):
        assert s.sampled and s.n == 40_000 and 0 < h.size <= 3000
        assert set(c) == {2}  # each kept row with its copy
    assert all(np.array_equal(h, kept[0][0]) for h, _ in kept)
    d = parts[0].rows()
    assert d.notable and d.copies / d.n == 0.5


def test_doubled_files_get_the_note_and_independent_rows_do_not_kept_whole_or_sampled():
    """Known truth, 20 files a cell: every doubled calibrated file of 500-20,000 rows gets the note; files
    of independent rows (Adult's scores, 1- and 2-decimal exports, a 10-tree forest's steps of 0.1, drawn
    with outcomes from them) get none, with every row kept and with at most 1,000 distinct rows kept of 20,000."""
    rng = np.random.default_rng(2)
    notes = {"doubled": 0, "independent": 0}
    for n, cap in ((500, RowHashes.CAP), (20_000, RowHashes.CAP), (20_000, 1000)):
        for _ in range(20):
            notes["doubled"] += _sample(_drawn(rng, n, doubled=True), 4000, cap).rows().notable
            p = P_ADULT[rng.integers(0, P_ADULT.size, n)]
            y = (rng.random(n) < p).astype(int)
            for q in (p, np.round(p, 1), np.round(p, 2), np.round(p * 10) / 10):
                preds = Predictions.from_arrays(q, y, input_type="probabilities")
                notes["independent"] += _sample(preds, 4000, cap).rows().notable
    assert notes == {"doubled": 60, "independent": 0}


def _cli(*argv) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        assert main([str(a) for a in argv]) == EXIT_OK
    return buf.getvalue()


def test_a_folder_with_a_day_copied_says_so_in_evaluate_text_and_json(tmp_path):
    """A folder of 5 daily files in which one day was copied in again ('part2 (1).parquet'): 1 row in 6 is
    a copy, too few for the rows' rule (a part copied is caught from about 40 % of the rows), but the
    files' bytes say it exactly. `evaluate <folder>` lists the note under how the file was read, text and
    JSON; the folder without the copy has none; files of the same size and other rows are no copies."""
    rng = np.random.default_rng(3)
    p = P_ADULT[rng.integers(0, P_ADULT.size, 5000)]
    df = pd.DataFrame({"p_gt50k": p, "label": (rng.random(p.size) < p).astype(int)})
    folder = tmp_path / "logs"
    write_parts(df, folder, 5)
    text = _cli("evaluate", folder)
    assert "copies of another" not in text
    assert open_dataset(folder).identical_files() == []
    shutil.copy(folder / "part2.parquet", folder / "part2 (1).parquet")
    ds = open_dataset(folder)
    assert ds.identical_files() == [[str(folder / "part2 (1).parquet"), str(folder / "part2.parquet")]] or \
        ds.identical_files() == [[str(folder / "part2.parquet"), str(folder / "part2 (1).parquet")]]
    stats = compute_statistics(ds)
    assert not stats.duplicate_note()  # the rows' rule alone misses it: 17 % copies
    text = _cli("evaluate", folder)
    assert "Some files are copies of another file of the dataset: " in text
    assert "have the same contents" in text or "has the same contents" in text
    data = json.loads(_cli("evaluate", folder, "--format", "json"))
    assert sum("copies of another file" in n for n in data["notes"]) == 1


def test_a_file_doubled_in_a_folder_is_said_once_for_the_file():
    """Every row twice as two identical files: the files' note, not also the rows' (the same cause)."""
    import tempfile
    from pathlib import Path

    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        p = rng.random(2000)
        pd.DataFrame({"p": p, "label": (rng.random(p.size) < p).astype(int)}).to_csv(folder / "a.csv", index=False)
        shutil.copy(folder / "a.csv", folder / "b.csv")
        ds = open_dataset(folder)
        stats = compute_statistics(ds)
        assert stats.duplicate_note()  # the rows' rule sees it too (50 % copies)
        notes = copies_notes(ds, stats)
        assert len(notes) == 1 and "'b.csv' has the same contents as 'a.csv'" in notes[0]


def test_a_streamed_csv_upload_of_a_doubled_file_says_so(tmp_path):
    """`--stream` on one CSV whose every row appears twice, as a join would leave it."""
    rng = np.random.default_rng(4)
    preds = _drawn(rng, 3000, doubled=True)
    path = tmp_path / "doubled.csv"
    pd.DataFrame({"p_gt50k": preds.p_positive, "label": preds.labels}).to_csv(path, index=False)
    text = _cli("evaluate", path, "--stream")
    import re

    assert re.search(r"1,5\d\d of the 3,000 rows \(5\d %\) are exact copies of another row: the same scores and label", text)


def test_quiet_days_and_tiny_equal_files_are_not_called_copies(tmp_path):
    """Review 11: zero-byte and header-only CSV days (quiet days) were 'copies of another file' whose rows
    'count two or more times', and hid the rows' note. Files of fewer than 10 rows are not compared: two
    3-row days of coarse scores can be equal by chance."""
    rng = np.random.default_rng(6)
    folder = tmp_path / "logs"
    folder.mkdir()
    p = rng.random(500)
    pd.DataFrame({"p": p, "label": (rng.random(p.size) < p).astype(int)}).to_csv(folder / "day0.csv", index=False)
    for name in ("day1.csv", "day2.csv"):
        (folder / name).write_text("p,label\n")
    tiny = "p,label\n0.5,1\n0.5,0\n0.5,1\n"
    for name in ("day3.csv", "day4.csv"):
        (folder / name).write_text(tiny)
    ds = open_dataset(folder)
    assert ds.identical_files() == []
    assert copies_notes(ds, compute_statistics(ds)) == []
