"""The README's command-line examples run as written (from the repository root), and every file
they name exists. GP examples (PBR fits) are slow on a CPU today and run only with PBR_SLOW=1."""

from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path

import pytest

from pbr_core.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[1]


def _cli_lines() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Command line\n+```bash\n(.*?)```", text, re.S)
    assert block, "the README has no command-line block"
    return [line.strip() for line in block.group(1).splitlines() if line.strip().startswith("pbr-calib")]


def _cli_examples() -> list[str]:
    return [line.split("#", 1)[0].strip() for line in _cli_lines()]


#: A GP example runs in the suite when the README says it takes at most this long.
FAST_GP_EXAMPLE_S = 10


def _slow(command: str) -> bool:
    """A GP fit (PBR, GP calibration) whose README comment does not say it takes at most
    ``FAST_GP_EXAMPLE_S`` seconds (``~1 s``): run with PBR_SLOW=1 only."""
    if not re.search(r"--method (pbr|gp)\b|--methods \S*\b(pbr|gp)", command):
        return False
    line = next(line for line in _cli_lines() if line.split("#", 1)[0].strip() == command)
    return _over_fast_limit(line.partition("#")[2])


def _over_fast_limit(comments: str) -> bool:
    """Whether the times stated in ``comments`` ('~5 s', '~4 min') exceed ``FAST_GP_EXAMPLE_S``, or
    none is stated."""
    stated = [float(v) * (60 if unit == "min" else 1)
              for v, unit in re.findall(r"~(\d+(?:\.\d+)?) (s|min)\b", comments)]
    return not stated or max(stated) > FAST_GP_EXAMPLE_S


@pytest.mark.parametrize("command", _cli_examples())
def test_readme_cli_example_runs(command, tmp_path, monkeypatch, capsys):
    args = shlex.split(command)[1:]
    for arg in args:  # every input file the example names is in the repository
        if arg.startswith("sample_data/"):
            assert (ROOT / arg).is_file(), f"{command}: {arg} does not exist"
    if _slow(command) and not os.environ.get("PBR_SLOW"):
        pytest.skip(f"a GP example the README says takes over {FAST_GP_EXAMPLE_S} s (set PBR_SLOW=1)")
    shutil.copytree(ROOT / "sample_data", tmp_path / "sample_data")
    monkeypatch.chdir(tmp_path)
    if args[0] == "apply":  # it applies the recalibrator the fit example saves
        assert cli_main(["fit", "sample_data/cifar100_densenet121.npz", "--method", "temperature",
                         "--out", "ts.json"]) == 0
    assert cli_main(args) == 0, capsys.readouterr().err
    for i, arg in enumerate(args[:-1]):
        if arg == "--out":
            assert (tmp_path / args[i + 1]).stat().st_size > 0


def _python_blocks_by_section() -> list[tuple[str, str]]:
    """(the ``## `` section it is in, the code) of every Python block of the README, in order."""
    text = (ROOT / "README.md").read_text()
    out, section = [], ""
    for part in re.split(r"(^## [^\n]*|```python\n.*?```)", text, flags=re.S | re.M):
        if part.startswith("## "):
            section = part
        elif part.startswith("```python\n"):
            out.append((section, part[len("```python\n"):-3]))
    return out


def _python_blocks() -> list[str]:
    return [code for _, code in _python_blocks_by_section()]


@pytest.mark.parametrize("index", range(len(_python_blocks())))
def test_readme_python_example_runs(index, tmp_path, monkeypatch):
    """Each Python block runs after the ones before it in its section (the Library's build on
    ``preds``; a section such as *In a notebook* starts afresh), from a copy of the repository's
    sample data; blocks that fit GPs for longer than ``FAST_GP_EXAMPLE_S`` (by the README's own
    comments) run only with PBR_SLOW=1."""
    sections = [section for section, _ in _python_blocks_by_section()]
    blocks = _python_blocks()
    slow = [bool(re.search(r"\bPBR\(|\"gp\"|\"pbr", b))
            and _over_fast_limit(" ".join(line.partition("#")[2] for line in b.splitlines())) for b in blocks]
    if slow[index] and not os.environ.get("PBR_SLOW"):
        pytest.skip(f"GP fits the README says take over {FAST_GP_EXAMPLE_S} s (set PBR_SLOW=1)")
    shutil.copytree(ROOT / "sample_data", tmp_path / "sample_data")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for i in range(index + 1):
        if sections[i] != sections[index]:
            continue  # another section's examples: this one does not build on them
        if i < index and slow[i]:
            continue  # earlier slow blocks: what later blocks need from them is re-made here
        exec(compile(blocks[i], f"README.md python block {i + 1}", "exec"), namespace)


def _cli_json(capsys, *argv: str) -> tuple[dict, str]:
    import json

    assert cli_main([*argv, "--format", "json"]) in (0, 5)
    out = capsys.readouterr()
    return json.loads(out.out), out.err


def test_readme_ece_intervals_are_the_cli_s(capsys, monkeypatch):
    """Every ECE interval the README quotes is the one the CLI prints: a CLI example's "(here .0107 to
    .0221" and the In CI section's gate messages (audit 10a: ".0108 to .0219" went stale when each bin's
    outcome noise started to widen the interval; the CLI printed .0107 to .0221)."""
    monkeypatch.chdir(ROOT)
    quoted = [(line, m) for line in _cli_lines() if (m := re.search(r"here (\.\d+) to (\.\d+)", line))]
    assert quoted, "no CLI example quotes its interval any more: drop this part of the test"
    for line, m in quoted:
        table, _ = _cli_json(capsys, *shlex.split(line.split("#", 1)[0])[1:])
        printed = tuple(f"{table[k]:.4f}".removeprefix("0") for k in ("ece_ci_low", "ece_ci_high"))
        assert printed == m.groups(), f"{line}: the CLI prints {printed[0]} to {printed[1]}"
    text = " ".join((ROOT / "README.md").read_text().split())
    section = text[text.index("## In CI"):]
    failed = re.search(r"`(pbr-calib: calibration gate failed: [^`]*)`", section).group(1)
    undecided = re.search(r"`(pbr-calib: warning: [^`…]*)…`", section).group(1)
    kitti = "sample_data/kitti_random_forest.csv"
    for limit, words in (("0.05", failed), ("0.07", undecided)):
        _, err = _cli_json(capsys, "evaluate", kitti, "--fail-above", limit)
        assert words in " ".join(err.split()), f"the README quotes {words!r}; the CLI says {err!r}"
