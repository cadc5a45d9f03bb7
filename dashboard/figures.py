"""The calibration pages' figures: the library's own (:mod:`pbr_core.plot`), one drawing code for the
app and a notebook (issue 38; the builders moved from here to ``pbr_core/plot/``).

Kept as the pages' import point and for the names the tests look traces up by. Nothing is drawn
here: a figure the dashboard needs goes into :mod:`pbr_core.plot`, its words (when they are the
dashboard's) passed in from :mod:`dashboard.texts`.
"""

from __future__ import annotations

from pbr_core.plot.bins import (  # noqa: F401  (re-exported for the pages and tests)
    ESTIMATOR_COLORS,
    TRACE_BAND_HIGH,
    TRACE_BAND_LOW,
    TRACE_BINNING,
    TRACE_ECE,
    TRACE_ECE_REFERENCE,
    TRACE_ESTIMATION,
    TRACE_MINIMISING_B,
    TRACE_OPTIMAL_B,
    ece_vs_bins_figure,
    estimator_convergence_figure,
)
from pbr_core.plot.diagrams import (  # noqa: F401
    MAX_BINS_WITH_TEXT,
    TRACE_ACCURACY,
    TRACE_BANDS,
    TRACE_COUNTS,
    TRACE_DIAGONAL,
    TRACE_OUTSIDE,
    TRACE_OVER,
    TRACE_OVER_BINARY,
    TRACE_SMOOTH,
    TRACE_SMOOTH_BAND,
    TRACE_UNDER,
    TRACE_UNDER_BINARY,
    band_traces,
    bars_name,
    gap_names,
    gap_traces,
    reliability_figure,
    smooth_traces,
)
from pbr_core.plot.style import COLORS, marker_b, trace  # noqa: F401
