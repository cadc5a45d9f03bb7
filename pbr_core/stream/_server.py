"""Datasets on the server: paths a dashboard user may open, only under a folder the operator chose."""

from __future__ import annotations

import os
from pathlib import Path

from pbr_core.predictions import PredictionsError
from pbr_core.stream._source import bounded_glob

__all__ = ["DATA_ROOT_ENV", "ServerPathError", "data_root", "resolve_server_path"]

#: Environment variable naming the folder under which the dashboard may open datasets.
DATA_ROOT_ENV = "PBR_CALIB_DATA_ROOT"


class ServerPathError(ValueError):
    """A server path the user may not open (outside the data folder, or none configured)."""


def data_root(configured: str | os.PathLike | None = None) -> Path | None:
    """The operator's data folder: ``configured`` if given, else ``$PBR_CALIB_DATA_ROOT``; None when
    neither is set (the dashboard then offers no server datasets) or it is not an existing folder."""
    value = configured if configured not in (None, "") else os.environ.get(DATA_ROOT_ENV, "")
    if not value:
        return None
    root = Path(value).expanduser()
    return root.resolve() if root.is_dir() else None


def resolve_server_path(text: str, root: str | os.PathLike) -> list[str]:
    """The files that ``text`` (a path relative to ``root``: a file, a folder or a glob) names,
    every one checked to lie under ``root`` after following symbolic links.

    Refused, with a plain message: an absolute path outside ``root``, any ``..`` component, a path
    (or a file a glob or folder reaches) that leaves ``root`` through a symbolic link, and a path
    that names nothing.

    Raises
    ------
    ServerPathError
    """
    root_path = Path(root).resolve()
    raw = (text or "").strip()
    if not raw:
        raise ServerPathError("Type the path of a file, folder or pattern inside the data folder.")
    if "\x00" in raw:
        raise ServerPathError("The path holds a character that paths cannot hold.")
    p = Path(raw)
    if ".." in p.parts:
        raise ServerPathError(f"{raw}: '..' is not allowed; give a path inside the data folder.")
    if p.is_absolute():
        try:
            p = p.relative_to(root_path)
        except ValueError:
            raise ServerPathError(f"{raw}: only files inside the data folder can be opened; give a path relative "
                                  "to it.") from None
    target = root_path / p
    # Both walks are bounded (bounded_glob: at most MAX_FOLDER_ENTRIES entries), so that a pattern such
    # as '**/*' over a large data folder is refused instead of walked for minutes.
    try:
        if any(ch in raw for ch in "*?["):
            candidates = [Path(f) for f in bounded_glob(str(target), raw)]
        elif target.is_dir() or target.is_symlink() and target.resolve().is_dir():
            _inside(target, root_path, raw)
            candidates = sorted(f for f in map(Path, bounded_glob(str(target / "**"), raw)) if not any(
                part.startswith((".", "_")) for part in f.relative_to(target).parts))
        else:
            candidates = [target]
    except PredictionsError as exc:
        raise ServerPathError(str(exc)) from None
    files = []
    for f in candidates:
        real = _inside(f, root_path, raw)
        if real.is_file():
            files.append(str(real))
    if not files:
        raise ServerPathError(f"{raw}: no file found there in the data folder.")
    return files


def _inside(path: Path, root: Path, shown: str) -> Path:
    real = path.resolve()
    if real != root and root not in real.parents:
        raise ServerPathError(f"{shown}: leads outside the data folder (through a link); only files inside it "
                              "can be opened.")
    return real
