"""A closed tab's upload leaves the server (real server, real browser).

Before dashboard/sessions.py, Streamlit kept a closed session for a reconnect, then let it expire
without ever shutting it down, so its uploaded file stayed in the server's UploadedFileManager (and
the parsed predictions in its state) until the server stopped. The server's own metrics endpoint
(``/_stcore/metrics``, ``cache_memory_bytes`` of the ``UploadedFileManager``) shows the upload
arriving and, once the tab is closed, leaving. The server here releases closed sessions after 1 s
(``PBR_SESSION_GRACE_S``) instead of 30 s, to keep the test short. The memory this gives back is
measured in benchmarks/bench_memory.py.
"""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path

import pytest

from dashboard import local_server

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]

TIMEOUT_MS = 60_000
_UPLOADED = re.compile(r'^cache_memory_bytes\{cache_type="UploadedFileManager"[^}]*\}\s+(\d+)', re.M)


@pytest.fixture(scope="module")
def fast_release_url(tmp_path_factory):
    log = tmp_path_factory.mktemp("streamlit_release") / "server.log"
    try:
        proc, url = local_server.start(log, env={"PBR_SESSION_GRACE_S": "1", "PBR_SESSION_SWEEP_S": "0.5"},
                                       timeout=60)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield url
    local_server.stop(proc, timeout=10)


def _uploaded_bytes(url: str) -> int:
    """Bytes the server holds for uploads, from its metrics (0 when it holds none)."""
    with urllib.request.urlopen(f"{url}/_stcore/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(int(v) for v in _UPLOADED.findall(text))


def _wait_for(condition, seconds: float) -> bool:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return condition()


def test_the_upload_of_a_closed_tab_leaves_the_server(browser, fast_release_url, tmp_path: Path):
    upload = tmp_path / "my_model_predictions.csv"
    upload.write_bytes((ROOT / "sample_data" / "kitti_random_forest.csv").read_bytes())
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(fast_release_url, wait_until="domcontentloaded")
    page.wait_for_selector('[data-testid="stApp"]', timeout=TIMEOUT_MS)
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(upload))
    page.locator('[data-testid="stSidebar"]').get_by_text("Uploaded file: my_model_predictions.csv").first.wait_for(
        timeout=TIMEOUT_MS)
    size = upload.stat().st_size
    # The server holds the upload while the tab is open (the metrics are cached for a few seconds).
    assert _wait_for(lambda: _uploaded_bytes(fast_release_url) >= size, 30), "the upload never showed in the metrics"

    context.close()
    assert _wait_for(lambda: _uploaded_bytes(fast_release_url) == 0, 45), (
        f"the server still holds {_uploaded_bytes(fast_release_url):,} bytes of uploads after the tab closed")
