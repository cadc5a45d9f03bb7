"""Declarative checks of recalibrator parameters, in the spirit of scikit-learn's ``_parameter_constraints``.

Each recalibrator class lists its parameters' constraints in one table::

    _parameter_constraints = {"max_iter": POSITIVE_INT, "strategy": one_of(("uniform", "equal_mass"))}

and :meth:`Recalibrator._validate_params <pbr_core.recalibrators.base.Recalibrator._validate_params>`
checks them in the table's order, raising one message pattern for all of them::

    Expected argument `max_iter` to be an integer larger than 0, but got 0.

A constraint is a test and the words that describe what passes it; a check that involves two
parameters at once (``min_temperature < max_temperature``) stays in the class's ``_validate_params``.

The same table is checked when a saved recalibrator is loaded (``Recalibrator._validate_saved_params``):
a saved file is untrusted input, so every parameter that sets how much memory or time a fit or a
prediction takes (a size) has an upper bound here, not only a lower one (issue 34: a file holding
``n_predict_samples = 10**8`` made predicting ONE row take 63 s and 15.7 GB).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

__all__ = [
    "BOOLEAN",
    "FINITE_NON_NEGATIVE",
    "NON_NEGATIVE_INT",
    "POSITIVE_INT",
    "POSITIVE_NUMBER",
    "Constraint",
    "check_params",
    "int_range",
    "one_of",
    "or_none",
]

# The upper bounds of the size-like parameters. Each is 10-100 times the largest value the project's
# defaults, protocols and documentation use, so no real use meets it, and each keeps the work one
# fit or one prediction can demand within what one server can give (one row at the bound of J with
# K = 1000 classes is 3 x 8 B x 1000 x 10^4 = 240 MB, inside the 512 MiB batch budget of
# pbr_core.gp.predict; 300 CIFAR-10 rows predict in 1.8 s at J = 10^4 against 0.04 s at 100).

#: J, posterior draws averaged per GP prediction (default 100, the paper's).
MAX_PREDICT_SAMPLES = 10_000
#: M, a GP's inducing points (default 10, the paper's); K_uu is M x M and a Cholesky variational factor too.
MAX_INDUCING_POINTS = 1_000
#: S, fixed Monte Carlo draws per entry of a GP fit (default 16-32; 100 before 2026-11).
MAX_MC_DRAWS = 10_000
#: T, classes drawn per row of a GP fit (beyond the number of classes it means every class).
MAX_MC_CLASSES = 1_000_000
#: Optimiser iterations of one fit (defaults 1000-2000).
MAX_ITERATIONS = 100_000
#: Bins of histogram binning (default floor(n^(1/3)): 10,000 bins is n = 10^12 rows).
MAX_BINS = 10_000
#: Cross-validation folds (default 5) and alphas of a grid (the paper's has 8).
MAX_FOLDS = 100
MAX_GRID = 1_000


@dataclass(frozen=True)
class Constraint:
    """``test(value)`` says whether a value passes; ``words`` say what passes, for the message."""

    test: Callable[[Any], bool]
    words: str

    def check(self, name: str, value: Any) -> None:
        if not self.test(value):
            raise ValueError(f"Expected argument `{name}` to be {self.words}, but got {value!r}.")


def _is_int(v: Any) -> bool:
    return not isinstance(v, (bool, np.bool_)) and isinstance(v, (int, np.integer))


def _is_real(v: Any) -> bool:
    return not isinstance(v, (bool, np.bool_)) and isinstance(v, (int, float, np.integer, np.floating))


POSITIVE_INT = Constraint(lambda v: _is_int(v) and v >= 1, "an integer larger than 0")
NON_NEGATIVE_INT = Constraint(lambda v: _is_int(v) and v >= 0, "an integer >= 0")
FINITE_NON_NEGATIVE = Constraint(lambda v: _is_real(v) and math.isfinite(v) and v >= 0, "a finite number >= 0")
POSITIVE_NUMBER = Constraint(lambda v: _is_real(v) and math.isfinite(v) and v > 0, "a positive number")
#: A floor of predicted probabilities (isotonic regression, histogram binning): None (1 / (n + 1)) or [0, 0.5).
PROBABILITY_FLOOR = Constraint(lambda v: v is None or (_is_real(v) and math.isfinite(v) and 0 <= v < 0.5),
                               "None or a number from 0 to 0.5 (0.5 excluded)")
BOOLEAN = Constraint(lambda v: isinstance(v, (bool, np.bool_)), "True or False")


def int_range(low: int, high: int) -> Constraint:
    """An integer from ``low`` to ``high`` (both included): a size with a declared upper bound."""
    return Constraint(lambda v: _is_int(v) and low <= v <= high, f"an integer from {low} to {high}")


def one_of(options: Sequence[str], words: str | None = None) -> Constraint:
    """One of the texts ``options``; ``words`` default to "'a', 'b' or 'c'"."""
    options = tuple(options)
    if words is None:
        shown = [repr(o) for o in options]
        words = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]
    return Constraint(lambda v: isinstance(v, str) and v in options, words)


def or_none(constraint: Constraint) -> Constraint:
    """``constraint``, or None."""
    return Constraint(lambda v: v is None or constraint.test(v), f"{constraint.words} or None")


def check_params(owner: Any, constraints: dict[str, Constraint]) -> None:
    """Check ``owner``'s attributes named in ``constraints``, in order; ValueError names the first bad one."""
    for name, constraint in constraints.items():
        constraint.check(name, getattr(owner, name))
