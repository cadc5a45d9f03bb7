"""The Data page's error box on a fresh session (audit 8): the data still in use is the bundled sample
loaded at start, which a new user never loaded, so the box says "The bundled sample shown at start
(...) is still in use", and "The data loaded before (...)" only once the user loaded something."""

from __future__ import annotations

import numpy as np
import pandas as pd

import dashboard.texts as texts

BAD = b"a,b\nx,y\nz,w\n"  # no numbers at all: refused


def _upload(at, name: str, data: bytes) -> None:
    at.file_uploader(key="data_upload").upload(name, data, "text/csv").run()
    assert not at.exception, at.exception


def test_a_refusal_on_a_fresh_session_names_the_start_sample_then_the_users_data(at):
    start = at.session_state["pbr_loaded"].name
    _upload(at, "bad.csv", BAD)
    message = at.error[0].value
    assert f"The bundled sample shown at start (**{start}**) is still in use." in message
    assert "loaded before" not in message
    rng = np.random.default_rng(1)
    p = rng.uniform(size=300)
    good = pd.DataFrame({"p": p, "label": (rng.uniform(size=300) < p).astype(int)})
    _upload(at, "good.csv", good.to_csv(index=False).encode())
    assert not at.error
    _upload(at, "bad2.csv", BAD + b"q,r\n")
    message = at.error[0].value
    assert "The data loaded before (**good.csv**) is still in use." in message
    assert "shown at start" not in message


def test_the_words_for_each_case():
    assert texts.load_failed("f.csv", "no.", [], "S", at_start=True).endswith(
        "The bundled sample shown at start (**S**) is still in use.")
    assert texts.load_failed("f.csv", "no.", [], "S").endswith("The data loaded before (**S**) is still in use.")
    assert "the bundled sample shown at start stays in use" in texts.read_stopped_note("x", at_start=True)
    assert "the data loaded before stays in use" in texts.read_stopped_note("x")
