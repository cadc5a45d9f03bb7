"""The command line on paths that are not prediction files (issue 34): a FIFO, a device, a file cut
short while it is read, a 5,000-character path, a large folder that is no dataset. Each ends with
the project's error, exit code 3 and one line naming the problem, never a hang, a traceback or a
"Bus error"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pbr_core
from pbr_core.cli import EXIT_BAD_INPUT, EXIT_USAGE, main
from pbr_core.recalibrators import TemperatureScaling
from pbr_core.stream import _source as stream_source

ROOT = Path(__file__).resolve().parents[1]
KITTI = ROOT / "sample_data" / "kitti_random_forest.csv"


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("model") / "t.json"
    TemperatureScaling().fit(pbr_core.load_predictions(ROOT / "sample_data" / "cifar10_resnet110.npz")).save(path)
    return path


def _run(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    """The real command in its own process: a hang ends the test at ``timeout``, a crash shows as a signal."""
    return subprocess.run([sys.executable, "-m", "pbr_core.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _one_error_line(proc: subprocess.CompletedProcess, code: int = EXIT_BAD_INPUT) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("pbr-calib: error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need a POSIX system")
def test_a_fifo_is_refused_as_the_model_and_as_the_data(model, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # nobody writes to it: reading would wait forever
    line = _one_error_line(_run(["apply", fifo, KITTI, "--out", tmp_path / "o.csv"], timeout=30))
    assert line.endswith(f"{fifo}: a named pipe (FIFO), not a regular file; give the path of the recalibrator file")
    line = _one_error_line(_run(["apply", model, fifo, "--out", tmp_path / "o.csv"], timeout=30))
    assert line.endswith(f"pipe: a named pipe (FIFO), not a file: {fifo}")
    assert _one_error_line(_run(["evaluate", fifo], timeout=30)).endswith("a named pipe (FIFO), not a file: " + str(fifo))


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_dev_zero_is_refused_before_a_byte_is_read(model, tmp_path):
    """/dev/zero never ends: read as the model it grew the process by 1 GB a second."""
    line = _one_error_line(_run(["apply", "/dev/zero", KITTI, "--out", tmp_path / "o.csv"], timeout=30))
    assert line.endswith("/dev/zero: a device, not a regular file; give the path of the recalibrator file")
    assert _one_error_line(_run(["evaluate", "/dev/zero"], timeout=30)).endswith("zero: a device, not a file: /dev/zero")


def test_an_npy_cut_short_while_it_is_read_is_an_error_not_a_bus_error(monkeypatch, tmp_path, capsys):
    """The file is cut after its header was checked, as a copy still being written is: memory-mapped,
    the first touch of the missing pages ended the process with SIGBUS; read, numpy reports a short read."""
    path = tmp_path / "scores.npy"
    rows = 200_000
    np.save(path, np.tile([[0.25, 0.75, 1.0]], (rows, 1)))
    from pbr_core.loading import _numpy

    real_check = _numpy.check_npy

    def check_then_cut(src, limits):
        shape = real_check(src, limits)
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size // 2)
        return shape

    monkeypatch.setattr(_numpy, "check_npy", check_then_cut)
    assert main(["evaluate", str(path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("pbr-calib: error: scores.npy: could not read the NPY array (truncated or corrupt?)")


def test_an_npy_cut_short_before_it_is_read_names_what_is_missing(tmp_path):
    path = tmp_path / "cut.npy"
    np.save(path, np.tile([[0.25, 0.75, 1.0]], (1000, 1)))
    path.write_bytes(path.read_bytes()[:-5000])
    line = _one_error_line(_run(["evaluate", path]))
    assert line.endswith("cut.npy: the file is truncated: its header declares an array of shape (1000, 3) (23.4 KB of "
                         "float64), but only 18.6 KB follow.")


def test_a_5000_character_path_is_a_message_not_a_traceback(model, tmp_path):
    long_name = tmp_path / ("a" * 5000 + ".csv")
    line = _one_error_line(_run(["evaluate", long_name]))
    assert "File name too long" in line and "(5,004 characters)" in line and len(line) < 500
    deep = tmp_path / ("d/" * 2600 + "x.csv")
    assert "File name too long" in _one_error_line(_run(["evaluate", deep]))
    assert "File name too long" in _one_error_line(_run(["apply", deep, KITTI, "--out", tmp_path / "o.csv"]))
    line = _one_error_line(_run(["apply", model, KITTI, "--out", deep.with_name("o.csv")]), code=EXIT_USAGE)
    assert line.startswith("pbr-calib: error: --out ") and "File name too long" in line


def test_a_large_folder_that_is_no_dataset_is_refused_without_walking_it(monkeypatch, tmp_path, capsys):
    """Scaled down: the limits are 50 entries and 5 other files instead of 100,000 and 1,000."""
    monkeypatch.setattr(stream_source, "MAX_FOLDER_ENTRIES", 50)
    monkeypatch.setattr(stream_source, "MAX_OTHER_FILES", 5)
    system = tmp_path / "system"
    for i in range(8):
        (system / "bin").mkdir(parents=True, exist_ok=True)
        (system / "bin" / f"tool{i}").write_text("#!/bin/sh\n")
    (system / "share").mkdir()
    (system / "share" / "table.csv").write_bytes(KITTI.read_bytes())
    assert main(["evaluate", str(system)]) == EXIT_BAD_INPUT
    assert "this folder holds more than 5 files that are not .parquet / .csv" in capsys.readouterr().err
    big = tmp_path / "big"
    for i in range(60):
        (big / f"part{i:02d}").mkdir(parents=True)
    assert main(["evaluate", str(big)]) == EXIT_BAD_INPUT
    assert "this folder holds more than 50 files and folders" in capsys.readouterr().err
    # A dataset's folder, with its _SUCCESS marker and hidden checksums, still reads.
    data = tmp_path / "data"
    (data / "day=1").mkdir(parents=True)
    (data / "day=1" / "part-0.csv").write_bytes(KITTI.read_bytes())
    (data / "_SUCCESS").write_text("")
    (data / "day=1" / ".part-0.csv.crc").write_text("")
    assert stream_source.open_dataset(data).files == [str(data / "day=1" / "part-0.csv")]


def test_a_glob_is_walked_within_bounds_and_matches_as_glob_does(monkeypatch, tmp_path, capsys):
    """bounded_glob finds what glob.glob finds (files only), and refuses a pattern whose walk passes the
    limit (scaled down to 50 entries) instead of walking a whole system ('/**/*.csv', '/*/*/*')."""
    import glob
    import os

    tree = ["a/x.csv", "a/b/y.csv", "a/b/c/z.parquet", "a/.h/q.csv", "a/.hid.csv", "b1/x.csv", "b2/y.csv",
            "a/b/w.txt", "top.csv"]
    for rel in tree:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    for pattern in ("*.csv", "a/*.csv", "a/**/*.csv", "**/*.csv", "b?/*.csv", "b[12]/*.csv", "b[!1]/*.csv", "a/*/*",
                    "a/**", "*/*.csv", "a/b/*.*", "a/.*"):
        full = str(tmp_path / pattern)
        assert stream_source.bounded_glob(full) == sorted(f for f in glob.glob(full, recursive=True)
                                                          if os.path.isfile(f)), pattern
    monkeypatch.setattr(stream_source, "MAX_FOLDER_ENTRIES", 50)
    for i in range(60):
        (tmp_path / "big" / f"part{i:02d}").mkdir(parents=True)
    assert main(["evaluate", str(tmp_path / "big" / "**" / "*.csv")]) == EXIT_BAD_INPUT
    assert "more than 50 files and folders to look through" in capsys.readouterr().err
    # A pattern that reaches only a small part of the tree still reads.
    (tmp_path / "big" / "part07" / "p.csv").write_bytes(KITTI.read_bytes())
    assert stream_source.open_dataset(str(tmp_path / "big" / "part07" / "*.csv")).files == [
        str(tmp_path / "big" / "part07" / "p.csv")]
