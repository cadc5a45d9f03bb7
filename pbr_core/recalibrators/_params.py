"""Declarative checks of recalibrator parameters, in the spirit of scikit-learn's ``_parameter_constraints``.

Each recalibrator class lists its parameters' constraints in one table::

    _parameter_constraints = {"max_iter": POSITIVE_INT, "strategy": one_of(("uniform", "equal_mass"))}

and :meth:`Recalibrator._validate_params <pbr_core.recalibrators.base.Recalibrator._validate_params>`
checks them in the table's order, raising one message pattern for all of them::

    Expected argument `max_iter` to be an integer larger than 0, but got 0.

A constraint is a test and the words that describe what passes it; a check that involves two
parameters at once (``min_temperature < max_temperature``) stays in the class's ``_validate_params``.
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
    "one_of",
    "or_none",
]


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
BOOLEAN = Constraint(lambda v: isinstance(v, (bool, np.bool_)), "True or False")


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
