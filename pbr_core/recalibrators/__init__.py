"""Recalibrators: one shared interface (:mod:`pbr_core.recalibrators.base`), one module per family."""

from __future__ import annotations

from pbr_core.recalibrators.base import (
    REGISTRY,
    NotFittedError,
    Recalibrator,
    load_recalibrator,
)

__all__ = ["REGISTRY", "NotFittedError", "Recalibrator", "load_recalibrator"]
