"""The CORP reliability diagram: the library's own figure (:mod:`pbr_core.plot.corp_diagram`, moved there in
issue 38: one drawing code for the Reliability page, the audit report and a notebook), re-exported
for the page, the report and the tests."""

from __future__ import annotations

from pbr_core.plot.corp_diagram import (  # noqa: F401
    TRACE_CORP,
    TRACE_CORP_BAND,
    TRACE_CORP_DIAGONAL,
    TRACE_CORP_OUTSIDE,
    corp_figure,
)
