"""Datasets on the server: only under the operator's folder ('..', absolute paths, symbolic links refused)."""

from __future__ import annotations

import os

import pytest

from pbr_core.stream import ServerPathError, data_root, resolve_server_path


@pytest.fixture()
def tree(tmp_path):
    root = tmp_path / "data"
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "a.parquet").write_bytes(b"PAR1")
    (root / "logs" / "b.parquet").write_bytes(b"PAR1")
    (root / "logs" / ".hidden.parquet").write_bytes(b"PAR1")
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "s.parquet").write_bytes(b"PAR1")
    (root / "escape").symlink_to(secret, target_is_directory=True)        # a folder link leaving the root
    (root / "logs" / "link.parquet").symlink_to(secret / "s.parquet")     # a file link leaving the root
    (root / "inside.parquet").symlink_to(root / "logs" / "a.parquet")     # a link staying inside: fine
    return root


def test_paths_inside_the_root_are_opened(tree) -> None:
    real = str((tree / "logs" / "a.parquet").resolve())
    assert resolve_server_path("logs/a.parquet", tree) == [real]
    assert resolve_server_path(str(tree / "logs" / "a.parquet"), tree) == [real]  # absolute, but inside
    assert resolve_server_path("inside.parquet", tree) == [real]
    assert resolve_server_path("logs/[ab].parquet", tree) == [real, str((tree / "logs" / "b.parquet").resolve())]


@pytest.mark.parametrize("text, match", [
    ("../secret/s.parquet", r"'\.\.' is not allowed"),
    ("logs/../../secret/s.parquet", r"'\.\.' is not allowed"),
    ("/etc/passwd", "only files inside the data folder"),
    ("escape/s.parquet", "outside the data folder"),
    ("escape", "outside the data folder"),
    ("logs/link.parquet", "outside the data folder"),
    ("logs/*.parquet", "outside the data folder"),   # the glob reaches the file link
    ("", "Type the path"),
    ("logs/none.parquet", "no file found"),
])
def test_paths_outside_the_root_are_refused(tree, text, match) -> None:
    with pytest.raises(ServerPathError, match=match):
        resolve_server_path(text, tree)


def test_the_root_comes_from_the_operator(tree, monkeypatch) -> None:
    monkeypatch.delenv("PBR_CALIB_DATA_ROOT", raising=False)
    assert data_root() is None
    monkeypatch.setenv("PBR_CALIB_DATA_ROOT", str(tree))
    assert data_root() == tree.resolve()
    assert data_root(tree / "logs") == (tree / "logs").resolve()
    monkeypatch.setenv("PBR_CALIB_DATA_ROOT", str(tree / "missing"))
    assert data_root() is None
    assert os.environ["PBR_CALIB_DATA_ROOT"].endswith("missing")


def test_a_pattern_or_folder_too_large_to_walk_is_refused(tree, monkeypatch) -> None:
    """'**/*' over a large data folder was walked whole before anything was said: the walk is bounded
    (scaled down here to 40 entries from MAX_FOLDER_ENTRIES = 100,000)."""
    import pbr_core.stream._source as source

    monkeypatch.setattr(source, "MAX_FOLDER_ENTRIES", 40)
    for i in range(50):
        (tree / "many" / f"d{i:02d}").mkdir(parents=True)
    for text in ("many/**/*.parquet", "many", "*/*/*"):
        with pytest.raises(ServerPathError, match="more than 40 files and folders to look through"):
            resolve_server_path(text, tree)
    # A folder within the bound still opens, its hidden files skipped as before.
    (tree / "many" / "d03" / "p.parquet").write_bytes(b"PAR1")
    assert resolve_server_path("many/d03", tree) == [str((tree / "many" / "d03" / "p.parquet").resolve())]
    assert resolve_server_path("*.parquet", tree) == [str((tree / "logs" / "a.parquet").resolve())]
