"""The README's set-up section says what is true (issue 35): a virtual environment first, the two
commands, "open http://localhost:8501" (the dashboard is headless: it opens no browser), the tests
can run while the dashboard does (the browser tests' servers take a free port), and the reading
options it names exist under those names."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from dashboard import local_server
from pbr_core.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_the_set_up_is_a_virtual_environment_then_two_commands():
    section = README.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    before_block = section.split("```bash", 1)[0]
    assert "python3 -m venv .venv" in before_block and ". .venv/bin/activate" in before_block
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    commands = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert commands == ['pip install "torch==2.13.0" -e ".[test,scale]" && streamlit run dashboard/app.py',
                        "python -m pytest"]
    assert "python3 -m pytest" in (ROOT / ".ci" / "run").read_text()   # CI runs the README's test command


def test_the_readme_says_open_because_the_dashboard_is_headless():
    config = (ROOT / ".streamlit" / "config.toml").read_text()
    assert re.search(r"^headless = true$", config, re.M)
    assert "opens on http://localhost" not in README
    assert "open http://localhost:8501" in README


def test_the_browser_tests_never_take_the_dashboards_port():
    """With a dashboard listening on 8501, the port the browser tests' servers get is another one."""
    with socket.socket() as running:
        try:
            running.bind(("127.0.0.1", 8501))
        except OSError:
            pass  # a dashboard (or something else) already listens there: the same situation
        else:
            running.listen()
        ports = {local_server.free_port() for _ in range(20)}
    assert 8501 not in ports
    assert "free port" in README.split("## Input files", 1)[0]


@pytest.mark.parametrize("words", ["Scores are percentages", "My scores are not probabilities"])
def test_the_reading_options_the_readme_names_exist(words):
    assert words in README
    assert words in (ROOT / "dashboard" / "views" / "data.py").read_text()


def test_the_command_line_options_the_readme_names_exist():
    evaluate = build_parser()._subparsers._group_actions[0].choices["evaluate"]
    options = {o for a in evaluate._actions for o in a.option_strings}
    assert {"--percent", "--map-scores", "--label-column"} <= options
    assert "--percent" in README and "--map-scores COLUMN --label-column Y" in README
