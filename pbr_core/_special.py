"""scipy.special's functions, imported on first call.

Importing ``scipy.special`` costs ~0.15 CPU s (on this project's two-core machine), paid by every
process that imports :mod:`pbr_core.recalibrators`, where the classical recalibrators register
themselves, even one that only fits PBR (issue 40: the first fit of a process). These wrappers
call scipy's own functions, so the numbers are scipy's bit for bit; only the import moves to the
first call.
"""

from __future__ import annotations

from typing import Any


def softmax(*args: Any, **kwargs: Any) -> Any:
    from scipy.special import softmax as f

    return f(*args, **kwargs)


def log_softmax(*args: Any, **kwargs: Any) -> Any:
    from scipy.special import log_softmax as f

    return f(*args, **kwargs)


def expit(*args: Any, **kwargs: Any) -> Any:
    from scipy.special import expit as f

    return f(*args, **kwargs)


def log_expit(*args: Any, **kwargs: Any) -> Any:
    from scipy.special import log_expit as f

    return f(*args, **kwargs)


def gammaln(*args: Any, **kwargs: Any) -> Any:
    from scipy.special import gammaln as f

    return f(*args, **kwargs)
