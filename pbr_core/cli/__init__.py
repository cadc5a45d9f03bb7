"""The ``pbr-calib`` command line tool: evaluate a prediction file, fit, save and apply recalibrators.

Usage::

    pbr-calib evaluate FILE [--n-bins B] [--format table|json]
    pbr-calib evaluate FILE [--fail-above X | --require-below X] [--by COLUMN --max-group-gap X]   (CI gates: exit 5)
    pbr-calib evaluate 'logs/*.parquet' [--stream] [--local-cluster N | --scheduler ADDRESS] [--curve] [--by COLUMN]
    pbr-calib evaluate FILE_OR_GLOB --find-slices [--format json]
    pbr-calib fit FILE --method NAME [--param KEY=VALUE ...] --out MODEL.json
    pbr-calib fit FILE --method pbr --select-alpha [--alpha-grid 0,0.1,0.5,1] [--alpha-metric ece] [--jobs N] --out MODEL.json
    pbr-calib apply MODEL.json FILE --out CALIBRATED.csv|.parquet
    pbr-calib apply MODEL.json 'logs/*.parquet' --out calibrated/
    pbr-calib fit 'logs/*.parquet' --sample 100000 [--seed 0] --method NAME --out MODEL.json
    pbr-calib compare FILE --methods uncalibrated,temperature,pbr [--n-re 1000] [--n-te N] [--folds 10] [--out TABLE.csv]
    pbr-calib methods [--format table|json]
    pbr-calib dashboard [--port N] [--data-root DIR]

FILE is anything :func:`pbr_core.load_predictions` reads (CSV, TSV, Excel, Parquet, JSON, JSON Lines, NPZ, NPY), with a
label column. A folder, a glob or a URL (or ``--stream``) is a dataset read in one streamed pass
(:mod:`pbr_core.stream`): never all rows in memory. ``--param`` values are read as JSON when they parse (``n_bins=10``,
``bias=false``, ``targets="labels"``) and as text otherwise (``strategy=equal_mass``).

Exit codes (stable, for scripts):

* 0 -- success;
* 2 -- usage error: unknown subcommand, method or parameter, invalid parameter value, output path
  with an unsupported suffix or in a missing folder (argparse's own code for usage errors);
* 3 -- bad input file: unreadable or invalid predictions (the loader's ``PredictionsError``, also a
  file over the read limits, :class:`pbr_core.loading.ReadLimitError`), a path that is not a regular
  file (a FIFO, a device such as /dev/zero, a folder given as the model) or that the system cannot
  open (a name too long), a folder read as a dataset that holds far more than a dataset, a
  file that is not a valid recalibrator saved by pbr-calib (``RecalibratorFileError``: not JSON,
  another format version, a damaged field), predictions whose number of classes differs from the
  recalibrator's;
* 4 -- fitting failed (the optimiser, or a fit that does not exist, e.g. separable labels with
  ``targets=labels``);
* 5 -- a calibration gate failed (``evaluate --fail-above X``: the calibration error is shown above
  X, the ECE's 95 % interval lies above X; an interval that contains X is "undecided": exit 0 with a
  warning; ``--require-below X``: the calibration error is not shown at most X, the interval reaches
  above X; ``--max-group-gap X`` with ``--by``: the largest gap between groups is real and its
  bias-corrected estimate above X; see :func:`pbr_core.cli.evaluate.calibration_gates`). The
  results are printed as without the gate (the JSON gains a ``gates`` list), then one line per
  failed gate on stderr (``pbr-calib: calibration gate failed: ...``; ``pbr-calib: warning: ...``
  for one undecided or not checked). A usage or input error (2, 3) takes precedence: nothing was
  measured.

``evaluate --format json`` follows the JSON Schema ``pbr_core/schemas/evaluate.schema.json``
(:func:`pbr_core.schemas.evaluate_schema`), in memory and streamed, with ``--by``,
``--find-slices``, ``--libraries`` and the gates.

Errors are one line on stderr (``pbr-calib: error: ...``), never a traceback. Results go to
stdout; progress bars (tqdm, for slow fits) go to stderr and are hidden by ``--quiet``."""

from __future__ import annotations

import sys
import warnings
from typing import Sequence

from pbr_core.cli._common import (EXIT_BAD_INPUT, EXIT_FIT_FAILED, EXIT_GATE_FAILED, EXIT_OK, EXIT_USAGE, CLIError,
                                   cli_words, parse_params, regular_file, shown_path)
from pbr_core.cli.apply import cmd_apply
from pbr_core.cli.compare import cmd_compare
from pbr_core.cli.dashboard import cmd_dashboard
from pbr_core.cli.evaluate import cmd_evaluate, evaluation_table, group_text
from pbr_core.cli.fit import cmd_fit
from pbr_core.cli.methods import cmd_methods, methods_table
from pbr_core.cli.parser import build_parser

__all__ = ["EXIT_BAD_INPUT", "EXIT_FIT_FAILED", "EXIT_GATE_FAILED", "EXIT_OK", "EXIT_USAGE", "CLIError", "build_parser",
           "cli_words",
           "evaluation_table", "group_text", "main", "methods_table", "parse_params", "regular_file", "shown_path"]


COMMANDS = {"evaluate": cmd_evaluate, "fit": cmd_fit, "apply": cmd_apply, "compare": cmd_compare, "methods": cmd_methods,
            "dashboard": cmd_dashboard}


def _warning_printer():
    """``warnings.showwarning`` for one command: each warning on stderr, the same sentence once (the
    library's "default" filter forgets what it said whenever a filter changes inside the command, and a
    check made on the same rows twice, as apply's class names are, said it twice)."""
    said: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        text = str(message)
        if text not in said:
            said.add(text)
            print(f"pbr-calib: warning: {text}", file=sys.stderr)

    return show


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line tool; returns the exit code (see the module docstring)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2), message already printed
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            # Library deprecations (torch, gpytorch) are for developers, not for the user of the tool.
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            warnings.showwarning = _warning_printer()
            return COMMANDS[args.command](args)
    except CLIError as exc:
        print(f"pbr-calib: error: {exc}", file=sys.stderr)
        return exc.code
    except OSError as exc:  # a path the checks above did not foresee: still a message, never a traceback
        where = f"{shown_path(exc.filename)}: " if exc.filename else ""
        print(f"pbr-calib: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("pbr-calib: interrupted", file=sys.stderr)
        return 130
