"""The Data page with a Parquet file whose columns pandas stored as ``category`` (audit 10a, finding 2:
"Could not load cat.parquet: it could not be read (TypeError)"), and the words for a read that fails
with an error the file checks do not know."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from dashboard import texts


def _category_parquet() -> bytes:
    rng = np.random.default_rng(0)
    p = rng.uniform(0, 1, 500)
    df = pd.DataFrame({"p_positive": p, "label": (rng.uniform(size=500) < p).astype(int),
                       "segment": pd.Categorical(rng.choice(["Male", "Female"], 500))})
    buf = io.BytesIO()
    df.to_parquet(buf)
    return buf.getvalue()


def test_a_parquet_file_with_a_category_column_loads(at):
    at.file_uploader(key="data_upload").upload("cat.parquet", _category_parquet(), "application/octet-stream").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    loaded = at.session_state["pbr_loaded"]
    assert loaded.preds.n == 500
    assert set(loaded.preds.metadata["segment"]) == {"Male", "Female"}


def test_an_unexpected_read_error_is_said_as_one(at, monkeypatch):
    import dashboard.state

    def broken(*args, **kwargs):
        raise TypeError("Categorical is not ordered for operation max")

    monkeypatch.setattr(dashboard.state, "_read", broken)
    at.file_uploader(key="data_upload").upload("odd.csv", b"p,label\n0.2,0\n0.7,1\n", "text/csv").run()
    assert not at.exception, at.exception
    shown = " ".join(str(e.value) for e in at.error)
    assert texts.read_unexpected("TypeError") in shown
    assert "unexpected error in pbr-calib" in shown and "bug report" in shown
    assert ".as_ordered()" not in shown
