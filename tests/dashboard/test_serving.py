"""Serving (issue 34): the app's safety settings do not depend on the folder it is started from, it
answers only to the names it is served under (DNS rebinding), and a dataset on the server is named
relative to the data folder in errors. The live-server halves are in tests/browser/test_serving_browser.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dashboard import serving, texts

ROOT = Path(__file__).resolve().parents[2]


def test_the_config_beside_the_app_is_the_projects_config():
    """Streamlit reads .streamlit/config.toml from the working folder and from the app's folder: both
    copies must say the same, or the app would behave differently depending on where it starts."""
    assert (ROOT / "dashboard" / ".streamlit" / "config.toml").read_text() == (ROOT / ".streamlit" / "config.toml").read_text()
    text = (ROOT / ".streamlit" / "config.toml").read_text()
    for line in ('address = "localhost"', "gatherUsageStats = false", 'showErrorDetails = "none"'):
        assert line in text


def _getters(values: dict, manual: set):
    defaults = {"server.address": None, "client.showErrorDetails": "full", "browser.gatherUsageStats": True}
    return (lambda k: values.get(k, defaults[k])), (lambda k: k in manual)


def test_settings_left_at_streamlits_defaults_are_reported_and_explicit_ones_accepted():
    assert serving.unsafe_settings(*_getters({}, set())) == list(serving.SAFE_SETTINGS)
    project = {"server.address": "localhost", "client.showErrorDetails": "none", "browser.gatherUsageStats": False}
    assert serving.unsafe_settings(*_getters(project, set(project))) == []
    # serving a team on purpose: --server.address 0.0.0.0 (behind a proxy) is the operator's decision
    team = {**project, "server.address": "0.0.0.0"}
    assert serving.unsafe_settings(*_getters(team, set(team))) == []
    # an explicit choice of the unsafe value is a choice too; a default is not
    assert serving.unsafe_settings(*_getters({"browser.gatherUsageStats": True}, {"browser.gatherUsageStats"})) == [
        "server.address", "client.showErrorDetails"]
    words = texts.serving_unsafe(["server.address"])
    assert "every network interface" in words and "streamlit run dashboard/app.py" in words


def test_started_without_the_projects_config_the_app_refuses_to_open(tmp_path):
    """The issue: started from another folder, the config was not read and the app served anyway.
    AppTest reads only the working folder's config, so from an empty folder the defaults are in force:
    the app must show the refusal and nothing else (no page, no data loaded)."""
    probe = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from streamlit.testing.v1 import AppTest
        at = AppTest.from_file({str(ROOT / 'dashboard' / 'app.py')!r}, default_timeout=90)
        at.run()
        print("ERRORS:", [e.value for e in at.error])
        print("TITLES:", [t.value for t in at.title])
        print("LOADED:", "pbr_loaded" in at.session_state)
        print("EXCEPTION:", bool(at.exception))
    """)
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert 'ERRORS: ["This dashboard was started without its safety settings' in out.stdout, out.stdout + out.stderr
    for key in serving.SAFE_SETTINGS:
        assert key in out.stdout
    assert "TITLES: []" in out.stdout and "LOADED: False" in out.stdout and "EXCEPTION: False" in out.stdout
    assert "pbr-calib refuses to serve" in out.stderr  # and the operator's log says why


@pytest.mark.parametrize("host,address,listed,allowed", [
    ("localhost:8501", "localhost", "", True),
    ("127.0.0.1:8501", "localhost", "", True),
    ("[::1]:8501", "localhost", "", True),
    ("LOCALHOST:8501", "localhost", "", True),
    ("evil.example:8501", "localhost", "", False),          # DNS rebinding: evil.example -> 127.0.0.1
    ("evil.example", "localhost", "", False),
    ("127.0.0.1.evil.example:8501", "localhost", "", False),
    ("calib.team.example", "localhost", "calib.team.example", True),   # a proxy that keeps the name
    ("calib.team.example:443", "0.0.0.0", "calib.team.example, other.example", True),
    ("evil.example", "0.0.0.0", "calib.team.example", False),
    ("evil.example", "0.0.0.0", "", True),               # every interface, no list: the proxy checks names
    ("10.0.0.5:8501", "10.0.0.5", "", True),             # the address it listens on
    ("evil.example:8501", "10.0.0.5", "", False),
])
def test_the_dashboard_answers_only_to_the_names_it_is_served_under(host, address, listed, allowed):
    env = {serving.ALLOWED_HOSTS_ENV: listed}
    assert serving.host_allowed({"Host": host}, address, env) is allowed
    assert serving.host_allowed({"host": host}, address, env) is allowed  # header names are case-blind
    assert serving.host_allowed({}, address, env)  # no browser (AppTest): nothing to check


def test_a_refused_host_is_named_as_text(monkeypatch):
    """The wiring: a request for another name gets the refusal (the name shown as text) and no page."""
    from dashboard import app as _app  # noqa: F401  - importing runs nothing: main() needs a script run

    monkeypatch.setattr(serving, "host_allowed", lambda headers, address, environ=None: False)
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=60)
    at.run()
    assert not at.exception
    assert [e.value for e in at.error] == [texts.HOST_REFUSED.format(host="")]
    assert not at.title and "pbr_loaded" not in at.session_state


def test_an_error_on_a_server_dataset_names_files_relative_to_the_data_folder(tmp_path, monkeypatch):
    """The issue: 'An error on a server dataset shows the absolute server path (/srv/.../bad.csv)'."""
    root = tmp_path / "srv" / "prediction-logs"
    (root / "2025").mkdir(parents=True)
    pd.DataFrame({"p_a": [0.2, 0.7, 0.4], "p_b": [0.8, 0.3, 0.6], "label": [1, 0, 1]}).to_csv(root / "2025" / "ok.csv",
                                                                                              index=False)
    (root / "2025" / "bad.csv").write_text("p_a,p_b,label\n0.2,0.8,1\nabc,0.3,0\n")
    monkeypatch.setenv("PBR_CALIB_DATA_ROOT", str(root))
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=90)
    at.run()
    at.text_input(key="data_server_path").set_value("2025/bad.csv")
    at.button(key="data_server_read").click().run()
    assert not at.exception, at.exception
    shown = "\n".join(e.value for e in at.error)
    assert "bad.csv" in shown, shown
    assert str(tmp_path) not in shown and "/srv/" not in shown and "prediction-logs" not in shown, shown
    from dashboard import state

    assert state.within_data_root(f"{root}/2025/bad.csv: row 2") == "2025/bad.csv: row 2"
    assert state.within_data_root(f"{root}: empty") == "the data folder: empty"
