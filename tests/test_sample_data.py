"""The bundled sample data matches its documentation (sample_data/SOURCES.md).

Every file in the Summary table of SOURCES.md must exist, load with ``pbr_core.load_predictions``
and have the documented kind, n, K, accuracy and 15-bin top-label ECE; every file in ``sample_data/`` must be documented;
and the folder stays small. Nothing is retrained here: ``scripts/make_kitti_predictions.py``
regenerates the KITTI files.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import pbr_core

SAMPLE_DIR = Path(__file__).resolve().parents[1] / "sample_data"
SOURCES = SAMPLE_DIR / "SOURCES.md"
MAX_FOLDER_BYTES = 15 * 1024 * 1024

#: A Summary-table row: | `file` | format | kind | n | K | accuracy | top-label ECE, 15 bins | ...
_ROW = re.compile(
    r"^\|\s*`(?P<file>[^`]+)`\s*\|\s*(?P<format>[^|]+?)\s*\|\s*(?P<kind>[^|]+?)\s*\|"
    r"\s*(?P<n>\d+)\s*\|\s*(?P<K>\d+)\s*\|\s*(?P<accuracy>[0-9.]+)\s*\|\s*(?P<ece15>[0-9.]+)\s*\|"
)


def documented_files() -> dict[str, dict]:
    """file name -> {"kind", "n", "K", "accuracy", "ece15"} from the Summary table of SOURCES.md."""
    rows = {}
    for line in SOURCES.read_text(encoding="utf-8").splitlines():
        m = _ROW.match(line)
        if m:
            assert m["file"] not in rows, f"{m['file']} is listed twice in SOURCES.md"
            rows[m["file"]] = {"kind": m["kind"], "n": int(m["n"]), "K": int(m["K"]),
                               "accuracy": float(m["accuracy"]), "ece15": float(m["ece15"])}
    return rows


DOCUMENTED = documented_files()


def test_sources_table_is_parsed():
    # Guards the parser: the table lists the two CIFAR npz files and the generated files.
    assert len(DOCUMENTED) >= 7
    assert {"cifar100_densenet121.npz", "cifar10_resnet110.npz", "kitti_xgboost.csv"} <= set(DOCUMENTED)
    assert {row["kind"] for row in DOCUMENTED.values()} == {"multiclass", "binary", "top_label"}


def test_every_file_in_the_folder_is_documented():
    present = {p.name for p in SAMPLE_DIR.iterdir() if p.is_file() and p.name != "SOURCES.md"}
    assert present - set(DOCUMENTED) == set(), "files in sample_data/ missing from SOURCES.md's table"
    assert set(DOCUMENTED) - present == set(), "files in SOURCES.md's table missing from sample_data/"


def test_folder_is_small():
    total = sum(p.stat().st_size for p in SAMPLE_DIR.rglob("*") if p.is_file())
    assert total < MAX_FOLDER_BYTES, f"sample_data/ holds {total / 2**20:.1f} MB; keep it under 15 MB"


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_sample_file_loads_as_documented(name):
    doc = DOCUMENTED[name]
    path = SAMPLE_DIR / name
    assert path.is_file(), f"{name} is listed in SOURCES.md but missing"

    preds = pbr_core.load_predictions(path)

    assert preds.kind == doc["kind"]
    assert preds.n == doc["n"]
    assert preds.labels.shape == (doc["n"],)
    assert abs(preds.accuracy - doc["accuracy"]) <= 1e-3
    # Top-label ECE with 15 bins (paper Eq. 2), documented to 4 decimals.
    assert abs(pbr_core.ece(*preds.metric_inputs(), n_bins=15) - doc["ece15"]) <= 1e-3
    if doc["kind"] == "top_label" and not preds.has_class_ids:
        # (confidence, correct) records: no class ids at all (K = 0 in the table).
        assert doc["K"] == 0 and preds.n_classes == 0 and preds.probs is None
        assert set(np.unique(preds.correct)) <= {0.0, 1.0}
        assert np.all((preds.confidence >= 0) & (preds.confidence <= 1))
    elif doc["kind"] == "top_label":
        # Integer-labelled top-label data has no class list (n_classes is 0, see Predictions);
        # K is then the number of classes the integer ids span.
        assert preds.n_classes in (0, doc["K"])
        assert preds.probs is None
        ids = np.concatenate([preds.labels, preds.predicted])
        assert ids.min() >= 0 and ids.max() < doc["K"]
        assert np.unique(preds.labels).size == doc["K"]
        assert preds.confidence.shape == (doc["n"],)
        assert np.all((preds.confidence > 0) & (preds.confidence <= 1))
    else:
        assert preds.n_classes == doc["K"]
        assert preds.probs.shape == (doc["n"], doc["K"])
        np.testing.assert_allclose(preds.probs.sum(axis=1), 1.0, atol=1e-6)
        assert np.all(np.isfinite(preds.probs)) and np.all(preds.probs >= 0)
        assert preds.labels.min() >= 0 and preds.labels.max() < doc["K"]
