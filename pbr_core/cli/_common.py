"""What every ``pbr-calib`` command shares: exit codes, the one error type, option types, loading a
file with the loader's advice in command-line words, progress bars, output paths."""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import math
import re
import shlex
import sys
from pathlib import Path
from typing import Any, Iterator, Sequence


#: Said after a bound of at least 1, which says nothing about a quantity in [0, 1] (``fit``'s Corollary 1 / 2
#: lines, ``evaluate``'s Theorem 1 bound; the dashboard's "Vacuous here", texts.corollary1_reading).
VACUOUS = "(vacuous: at least 1, says nothing)"


def json_text(document: Any) -> str:
    """``document`` as standard JSON: a NaN or infinite number (a quantity that could not be worked
    out, e.g. the detectable shift of 3 rows) is written null, since ``NaN`` is not JSON and strict
    parsers (JavaScript's ``JSON.parse``, jq) refuse the whole document."""
    def clean(v: Any) -> Any:
        if isinstance(v, float):
            return v if math.isfinite(v) else None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v

    return json.dumps(clean(document), indent=2, allow_nan=False)


def bound_shown(bound: float, digits: int = 4) -> str:
    """A bound as the terminal prints it: ``digits`` decimals, and :data:`VACUOUS` after a bound of at
    least 1, which says nothing (an ECE gap, |TCE - ECE| and |TCE - ECE_B| lie in [0, 1] anyway)."""
    return f"{bound:.{digits}f} {VACUOUS}" if bound >= 1.0 else f"{bound:.{digits}f}"


EXIT_OK = 0


EXIT_USAGE = 2


EXIT_BAD_INPUT = 3


EXIT_FIT_FAILED = 4


#: ``evaluate --fail-above`` / ``--require-below`` / ``--max-group-gap``: the predictions were
#: measured, and a calibration gate failed (distinct from 3 and 4 so that a CI job can tell "worse
#: than allowed" from "could not measure").
EXIT_GATE_FAILED = 5


_EPILOG = """exit codes:
  0  success (and no calibration gate failed; an undecided --fail-above warns on stderr)
  2  usage error (unknown subcommand/method/parameter, invalid value, bad output path)
  3  bad input file (invalid predictions, not a pbr-calib recalibrator file, wrong number of classes)
  4  fitting failed (optimiser failure, or no maximum-likelihood fit exists)
  5  a calibration gate failed (evaluate --fail-above: the ECE's 95% interval lies above X;
     --require-below: it reaches above X; --max-group-gap); the results are still printed
"""


class CLIError(Exception):
    """An error with the exit code it maps to; the message is printed without a traceback."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------------- parser


def _jobs(text: str) -> int:
    from pbr_core.parallel import N_JOBS_WORDS, is_n_jobs

    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not is_n_jobs(value):
        raise argparse.ArgumentTypeError(f"expected {N_JOBS_WORDS}, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _port(text: str) -> int:
    value = _positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 1 to 65535, got {text!r}")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return value


def _fail_limit(text: str) -> float:
    """--fail-above / --max-group-gap X: an ECE and a gap between two are at most 1, so a limit of 1 or
    more is a gate that can never fail (audit 9a: --fail-above 1.5 was accepted)."""
    value = _non_negative_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to below 1, got {text!r}: a calibration error "
                                         "is at most 1, so this gate could never fail")
    return value


def _pass_limit(text: str) -> float:
    """--require-below X: at 0 the gate could pass only on an interval of exactly 0; at 1 or more it
    could never fail (the interval ends at 1 at most: review 10)."""
    value = _non_negative_float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number above 0 and below 1, got {text!r}: at 0 this gate "
                                         "could pass only where every prediction is exactly right, at 1 or more it "
                                         "could never fail")
    return value


def _probability(text: str) -> float:
    value = _non_negative_float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}")
    return value


def _alpha_grid(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values or any(not (math.isfinite(v) and v >= 0) for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated finite numbers >= 0, got {text!r}")
    return values


def parse_params(items: Sequence[str]) -> dict[str, Any]:
    """``["n_bins=10", "strategy=equal_mass"]`` -> ``{"n_bins": 10, "strategy": "equal_mass"}``."""
    params: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CLIError(f"--param expects KEY=VALUE, got {item!r}", EXIT_USAGE)
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        params[key] = value
    return params


# ---------------------------------------------------------------------- commands


def _load(path: str, args: argparse.Namespace, require_labels: bool = True):
    from pbr_core import PredictionsError, load_predictions

    try:
        return load_predictions(path, input_type=args.input_type, label_column=args.label_column,
                                score_columns=args.score_columns, group_columns=args.group_columns,
                                ignore_columns=args.ignore_columns, renormalize=args.renormalize,
                                percent=args.percent, positive_class=getattr(args, "positive_class", None),
                                require_labels=require_labels)
    except PredictionsError as exc:
        raise CLIError(cli_words(str(exc)), EXIT_BAD_INPUT) from exc
    except OSError as exc:
        raise CLIError(f"{path}: cannot read the file: {exc.strerror or exc}", EXIT_BAD_INPUT) from exc


#: The loader's advice names Python arguments; on the command line the same is an option.
_CLI_WORDS = (
    ("(label_column=)", "(--label-column)"), ("(score_columns=)", "(--score-columns)"),
    ("(ignore_columns=)", "(--ignore-columns)"), ("label_column=", "--label-column"),
    ("renormalize=True", "--renormalize"), ("input_type='logits'", "--input-type logits"), ("percent=True", "--percent"),
    ("positive_class=", "--positive-class "),
    ("input_type='probabilities'", "--input-type probabilities"),
    ("`n_re`", "--n-re"), ("n_re=", "--n-re "), ("`n_te`", "--n-te"), ("n_te=", "--n-te "),
    ("every='day'", "--every day"), ("every='week'", "--every week"), ("every='month'", "--every month"),
)


def cli_words(message: str) -> str:
    """A loader message with its Python advice replaced by the command-line option that does the same."""
    for python, option in _CLI_WORDS:
        message = message.replace(python, option)
    # score_columns=['risk_30d'] (the columns to choose, as a Python list) -> --score-columns risk_30d
    return re.sub(r"score_columns=(\[[^\]]*\])", _score_columns_option, message)


def _score_columns_option(match: re.Match) -> str:
    try:
        names = ast.literal_eval(match[1])
    except (ValueError, SyntaxError):  # a column name with a bracket: leave the Python words
        return match[0]
    return "--score-columns " + shlex.quote(",".join(map(str, names)))


@contextlib.contextmanager
def _fit_progress(quiet: bool) -> Iterator[None]:
    """Within the block, the slow loops inside a fit (GP optimiser iterations, one-vs-all maps)
    show on one tqdm bar on stderr, opened at their first report (``pbr_core.progress``)."""
    from tqdm import tqdm

    from pbr_core.progress import report_progress, tqdm_progress

    bars: list = []

    def progress(done: int, total: int, message: str) -> None:
        if not bars:
            bars.append(tqdm(total=total, desc=message, file=sys.stderr, disable=quiet, leave=False))
        tqdm_progress(bars[0])(done, total, message)

    try:
        with report_progress(progress):
            yield
    finally:
        for bar in bars:
            bar.close()


def shown_path(path: str | Path) -> str:
    """``path`` for a message: a long one (a 5,000-character argument) by its start and end."""
    from pbr_core.loading._source import shorten

    return shorten(str(path))


def _check_output(path: Path, suffixes: tuple[str, ...]) -> None:
    if path.suffix.lower() not in suffixes:
        raise CLIError(f"--out {shown_path(path)}: expected a file name ending in {' or '.join(suffixes)}", EXIT_USAGE)
    try:
        folder = path.parent.exists()
    except OSError as exc:  # a name too long for the file system
        raise CLIError(f"--out {shown_path(path)}: {exc.strerror or exc}", EXIT_USAGE) from None
    if not folder:
        raise CLIError(f"--out {shown_path(path)}: the folder {shown_path(path.parent)} does not exist", EXIT_USAGE)


def regular_file(path: str | Path, what: str = "file") -> Path:
    """``path`` when it names a regular file; otherwise the project's error (exit code 3) saying what
    it is. Only regular files are read: a FIFO waits forever for a writer, a device such as
    /dev/zero never ends, a folder is not a file."""
    import os
    import stat

    from pbr_core.loading._source import special_file_kind

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise CLIError(f"{shown_path(path)}: cannot read the {what}: no such file", EXIT_BAD_INPUT) from None
    except OSError as exc:  # a name too long, a folder without permission...
        raise CLIError(f"{shown_path(path)}: cannot read the {what}: {exc.strerror or exc}", EXIT_BAD_INPUT) from None
    if not stat.S_ISREG(mode):
        raise CLIError(f"{shown_path(path)}: {special_file_kind(mode)}, not a regular file; give the path of the "
                       f"{what}", EXIT_BAD_INPUT)
    return Path(path)


def _binary_ece_words() -> str:
    """Which ECE a binary file's numbers are: the app's one choice (pbr_core.metrics.BINARY_TARGET)."""
    from pbr_core.metrics import BINARY_TARGET

    return BINARY_TARGET.words[BINARY_TARGET.default]
