"""Recalibrators: one shared interface (:mod:`pbr_core.recalibrators.base`), one module per family.

Every class is registered under a stable ``method`` name, which is what saved files, the CLI and
experiment tables use::

    >>> from pbr_core.recalibrators import available_methods, get_recalibrator
    >>> available_methods()[:3]
    ['uncalibrated', 'temperature', 'vector_scaling']
    >>> get_recalibrator("histogram_binning", n_bins=10)
    HistogramBinning(n_bins=10, strategy='uniform')

The GP-based recalibrators (``GPCalibration``, ``PBR``, ...) live in
:mod:`pbr_core.recalibrators.gp`, and ``PBRCV`` (alpha by cross-validation) in
:mod:`pbr_core.recalibrators.pbr_cv`; they import torch, so their modules are listed in
:data:`LAZY_MODULES` and imported on first use (``from pbr_core.recalibrators import PBR``,
``available_methods()``, ``get_recalibrator("pbr")``, loading a saved PBR), where they register
themselves like the others. A new family with heavy imports is added the same way: its module's
name appended to :data:`LAZY_MODULES` below (and its class names to ``__all__``) makes it
importable by name, listed and loadable without importing it before it is needed.

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
from pbr_core.recalibrators._params import MAX_ITERATIONS, MAX_PREDICT_SAMPLES
from pbr_core.recalibrators.identity import Identity
from pbr_core.recalibrators.temperature import TemperatureScaling
from pbr_core.recalibrators.scaling import MatrixScaling, VectorScaling
from pbr_core.recalibrators.dirichlet import DirichletCalibration
from pbr_core.recalibrators.structured import StructuredMatrixScaling, StructuredVectorScaling
from pbr_core.recalibrators.platt import PlattScaling
from pbr_core.recalibrators.isotonic import IsotonicCalibration
from pbr_core.recalibrators.histogram import HistogramBinning
from pbr_core.recalibrators.beta import BetaCalibration
from pbr_core.recalibrators.bbq import BBQ
from pbr_core.recalibrators.venn_abers import VennAbers, VennAbersCross

__all__ = [
    "BBQ",
    "BetaCalibration",
    "DirichletCalibration",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "GPCalibration",
    "HistogramBinning",
    "Identity",
    "IsotonicCalibration",
    "LAZY_MODULES",
    "MAX_ITERATIONS",
    "MAX_PREDICT_SAMPLES",
    "MatrixScaling",
    "NotFittedError",
    "PBR",
    "PBRCV",
    "PlattScaling",
    "REGISTRY",
    "Recalibrator",
    "RecalibratorFileError",
    "StructuredMatrixScaling",
    "StructuredVectorScaling",
    "TemperatureScaling",
    "VectorScaling",
    "VennAbers",
    "VennAbersCross",
    "available_methods",
    "get_recalibrator",
    "gp_method",
    "method_class",
    "method_label",
    "methods_taking",
    "accepted_params",
    "default_params",
    "method_family",
    "class_power",
    "param_names",
    "takes",
    "load_recalibrator",
    "register",
    "report_progress",
]


# Families whose imports are heavy, imported on first use: an attribute access (a class name, or the
# module's own name), available_methods(), get_recalibrator() or loading a file of one of their
# methods. The GP family (GPCalibration, PBR and variants; PBRCV) imports torch and gpytorch, which
# takes seconds. __getattr__ reads LAZY_MODULES itself, so a module listed here (or appended later,
# from outside) is found by name like these two.
LAZY_MODULES.extend(name for name in ("pbr_core.recalibrators.gp", "pbr_core.recalibrators.pbr_cv")
                    if name not in LAZY_MODULES)


def __getattr__(name: str) -> Any:
    """A class (or module) of a family in :data:`LAZY_MODULES`, imported now."""
    short = {module_name.rpartition(".")[2]: module_name for module_name in LAZY_MODULES}
    if name[:1].isupper() or name in short:  # class names (and the modules): maybe a lazy family's
        ensure_registered()
    if name in short and short[name] in sys.modules:
        return sys.modules[short[name]]
    for module_name in LAZY_MODULES:
        module = sys.modules.get(module_name)
        if module is not None and name[:1].isupper() and hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def available_methods() -> list[str]:
    """The registered method names, in registration order (classical ones first, then the GP family)."""
    ensure_registered()
    return list(REGISTRY)


def method_class(name: str) -> type[Recalibrator]:
    """The registered class of method ``name``: its facts (``label``, ``family``, parameters).

    Raises ``ValueError`` for an unknown name (the message lists the registered ones).
    """
    if name not in REGISTRY:
        ensure_registered()
    cls = REGISTRY.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"Unknown recalibration method {name!r}. Available methods: {', '.join(available_methods())}.")
    return cls


def method_label(name: str, multiclass: bool = False) -> str:
    """The method's name for people, with how a binary map meets multiclass data (its default): e.g.
    "Platt scaling (one-vs-all)" for ``platt``, "Isotonic regression (top label)" for ``isotonic``.

    A name that is not registered is returned as it is.
    """
    try:
        cls = method_class(name)
    except ValueError:
        return str(name)
    label = cls.label or name
    if not multiclass or cls.family != "binary":
        return label
    top = cls._settings_defaults().get("multiclass") == "top_label"
    return f"{label} (top label)" if top else f"{label} (one-vs-all)"


def param_names(name: str) -> list[str]:
    """The parameters ``get_recalibrator(name, ...)`` takes (the constructor's, in its order; PBRCV's
    own and its estimator's, flat), which a saved file's "params" hold.

    Raises ``ValueError`` for an unknown name (the message lists the registered ones).
    """
    return list(method_class(name)._settings_defaults())


def default_params(name: str) -> dict[str, Any]:
    """Each parameter of method ``name`` (:func:`param_names`) with its default value (``pbr-calib
    methods`` lists them)."""
    return method_class(name)._settings_defaults()


def takes(name: str, param: str) -> bool:
    """Whether method ``name`` takes the parameter ``param``, e.g. ``takes("pbr", "alpha")``; a front
    end asks this instead of keeping its own list of the methods that have an alpha."""
    return param in param_names(name)


def accepted_params(name: str, **wanted: Any) -> dict[str, Any]:
    """The entries of ``wanted`` that method ``name`` takes; an entry of None (not asked for) is left out.

    How one setting of a page or a command reaches every method that has it, e.g.
    ``accepted_params("temperature", max_iter=200, alpha=0.5) == {}`` and
    ``accepted_params("pbr", max_iter=200, alpha=0.5) == {"max_iter": 200, "alpha": 0.5}``.
    """
    names = set(param_names(name))
    return {key: value for key, value in wanted.items() if key in names and value is not None}


def methods_taking(param: str) -> list[str]:
    """The registered methods that take ``param`` (e.g. "alpha": the PBR methods)."""
    return [name for name in available_methods() if takes(name, param)]


def method_family(name: str) -> str:
    """The family of method ``name``: "classical", "binary" (a map of one probability: one-vs-all or
    top-label on multiclass data, see ``_binary``) or "gp"
    (slow, may use the GPU: a front end runs it as a heavy job). ValueError for an unknown name."""
    return method_class(name).family


def class_power(name: str) -> int:
    """How method ``name``'s fitted parameters grow with the classes K: 1 (K, or fewer) or 2 (K^2: matrix
    scaling, Dirichlet calibration, SMS; their fits take minutes from a few hundred classes on, so a
    front end queues them and refuses the longest). ValueError for an unknown name."""
    return method_class(name).class_power


def gp_method(objective: str, mean_approx: bool) -> str:
    """The registered GP-family method of an objective and prediction rule, e.g.
    ``gp_method("pbr_total", True) == "pbr_total_app"``; ValueError when there is none."""
    ensure_registered()
    for name, cls in REGISTRY.items():
        if getattr(cls, "variant", None) == (objective, bool(mean_approx)):
            return name
    raise ValueError(f"No recalibration method has objective {objective!r} with mean_approx={mean_approx!r}.")


def get_recalibrator(name: str, **params: Any) -> Recalibrator:
    """A new, unfitted recalibrator by method name, e.g. ``get_recalibrator("temperature")``: the
    package's one factory (the CLI, the protocols, the dashboard and the scripts all call it).

    The parameters are checked now, not at fit time, so that a long protocol fails before its first
    fit. Raises ``ValueError`` naming the problem: an unknown method (listing the registered ones),
    an unknown parameter (listing the valid ones), or a bad parameter value (the class's declared
    constraints, prefixed with the method's name).
    """
    cls = method_class(name)
    valid = param_names(name)
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise ValueError(f"Invalid parameter(s) {unknown} for {name!r} ({cls.__name__}); valid parameters: {valid}.")
    try:
        recalibrator = cls._from_settings(**params)
    except TypeError as exc:
        raise ValueError(f"Invalid parameters {params!r} for method {name!r}: {exc}") from exc
    except ValueError as exc:  # a wrapper's settings that name no estimator (PBRCV's objective)
        raise ValueError(f"Method {name!r}: {exc}") from exc
    try:
        recalibrator._validate_params()
    except ValueError as exc:
        raise ValueError(f"Method {name!r}: {exc}") from exc
    return recalibrator
