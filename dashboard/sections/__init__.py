"""Features of a page that are not the page's own run: each draws one section of a page, reading the
page's shared choices (:mod:`dashboard.settings_ui`) instead of its widgets.

* ``sweep``      the Compare page's n_re sweep (the paper's Figure 3)
* ``group_gaps`` the Compare page's "does recalibration close the gaps between groups?"

A section module is imported by its page and draws with ``render(loaded, choices, running)``; it is
not a page of its own (``dashboard/views/`` holds the pages, ``app.PAGES`` lists them).
"""
