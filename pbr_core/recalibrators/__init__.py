"""Recalibrators: one shared interface (:mod:`pbr_core.recalibrators.base`), one module per family.

Every class is registered under a stable ``method`` name, which is what saved files, the CLI and
experiment tables use::

    >>> from pbr_core.recalibrators import available_methods, get_recalibrator
    >>> available_methods()[:3]
    ['uncalibrated', 'temperature', 'vector_scaling']
    >>> get_recalibrator("histogram_binning", n_bins=10)
    HistogramBinning(n_bins=10, strategy='uniform')

The GP-based recalibrators (``GPCalibration``, ``PBR``, ...) live in
:mod:`pbr_core.recalibrators.gp`; that module imports torch, so it is imported on first use
(``from pbr_core.recalibrators import PBR``, ``available_methods()``, ``get_recalibrator("pbr")``,
loading a saved PBR), and registers itself like the others.

Saved files (``Recalibrator.save`` / ``load_recalibrator``) are checked field by field on load; a
damaged one raises :class:`RecalibratorFileError` (a ``ValueError``) naming the file and the field.
"""

from __future__ import annotations

import sys
from typing import Any

from pbr_core.recalibrators.base import (
    FORMAT_NAME,
    FORMAT_VERSION,
    LAZY_MODULES,
    REGISTRY,
    NotFittedError,
    Recalibrator,
    RecalibratorFileError,
    ensure_registered,
    load_recalibrator,
    register,
    report_progress,
)
from pbr_core.recalibrators.identity import Identity
from pbr_core.recalibrators.temperature import TemperatureScaling
from pbr_core.recalibrators.scaling import MatrixScaling, VectorScaling
from pbr_core.recalibrators.platt import PlattScaling
from pbr_core.recalibrators.isotonic import IsotonicCalibration
from pbr_core.recalibrators.histogram import HistogramBinning
from pbr_core.recalibrators.beta import BetaCalibration
from pbr_core.recalibrators.bbq import BBQ

__all__ = [
    "BBQ",
    "BetaCalibration",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "GPCalibration",
    "HistogramBinning",
    "Identity",
    "IsotonicCalibration",
    "MatrixScaling",
    "NotFittedError",
    "PBR",
    "PlattScaling",
    "REGISTRY",
    "Recalibrator",
    "RecalibratorFileError",
    "TemperatureScaling",
    "VectorScaling",
    "available_methods",
    "get_recalibrator",
    "load_recalibrator",
    "register",
    "report_progress",
]


# The GP family (GPCalibration, PBR and variants) imports torch and gpytorch, which takes seconds;
# it is imported on first use: an attribute access, available_methods(), get_recalibrator() or
# loading a file of a GP method.
_GP_MODULE = "pbr_core.recalibrators.gp"
LAZY_MODULES.append(_GP_MODULE)


def __getattr__(name: str) -> Any:
    if name[:1].isupper() or name == "gp":  # class names (and the module): maybe the GP family's
        ensure_registered()
    module = sys.modules.get(_GP_MODULE)
    if module is not None and hasattr(module, name) and name[:1].isupper():
        return getattr(module, name)
    if module is not None and name == "gp":
        return module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def available_methods() -> list[str]:
    """The registered method names, in registration order (classical ones first, then the GP family)."""
    ensure_registered()
    return list(REGISTRY)


def get_recalibrator(name: str, **params: Any) -> Recalibrator:
    """A new, unfitted recalibrator by method name, e.g. ``get_recalibrator("temperature")``.

    Raises ``ValueError`` for an unknown name or parameter (the message lists the valid ones).
    """
    if name not in REGISTRY:
        ensure_registered()
    cls = REGISTRY.get(name)
    if cls is None:
        raise ValueError(f"Unknown recalibration method {name!r}; available: {available_methods()}.")
    valid = cls._param_names()
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise ValueError(f"Invalid parameter(s) {unknown} for {name!r} ({cls.__name__}); valid parameters: {valid}.")
    return cls(**params)
