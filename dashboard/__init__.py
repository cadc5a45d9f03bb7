"""The Streamlit dashboard of pbr-calib: thin pages over `pbr_core` and its figures (`pbr_core.plot`).

Start it with ``streamlit run dashboard/app.py``. Layout:

* ``app.py``      entry point: page config, navigation, sidebar ("what is loaded")
* ``state.py``    session state: the loaded predictions, loading samples and uploads
* ``compute.py``  cached calls into `pbr_core` (keyed on a content hash, so sliders stay snappy)
* ``figures.py``  the calibration pages' figures: ``pbr_core.plot``'s builders, re-exported (no drawing here)
* ``texts.py``    plain-language explanations shared by several pages
* ``tables.py``   pure pandas tables for display (data preview, per-class listings, the
  experiments' per-fold tables in the pages' words, the tables of a job's result)
* Recalibration section (PBR, Compare, Generalization, Fit & apply pages):
  ``runs.py`` what each run computes (pure, over pbr_core), ``jobs.py`` background jobs and the
  server-wide GP fit lock, ``recal_ui.py`` Streamlit pieces the pages share,
  ``figures_recal.py`` their pure figure builders, ``report.py`` the self-contained HTML report,
  ``audit.py`` its audit part (the Data, Reliability and Bins & bias pages as report sections);
  both only assemble what the pages' builders make
* ``settings_ui.py`` the choices a page's features share, read once (the Compare page's
  ``CompareChoices``, from which its sweep and group gaps get their typed settings)
* ``sections/``   features drawn on a page that are not its own run (the Compare page's n_re sweep
  and group gaps)
* ``views/``      one file per page. Deliberately not ``pages/``: Streamlit treats a ``pages/``
  folder next to the entry point as old-style pages and, on a fresh server, runs such a file
  directly for a URL like ``/data``, skipping app.py (sys.path set-up, default data, sidebar).

How the parts fit, and where to add a page: ``docs/architecture.md``.
"""

import warnings as _warnings

# Classes matched ignoring case ('NO' / 'YES' against a fit on 'no' / 'yes'): the Fit & apply page says so
# in its own words (texts.apply_classes_by_case); the library's ClassCaseWarning would only reach the
# server's log on every prediction, or stop the page where warnings are errors. Matched by message so that
# importing the dashboard does not import the recalibrators; set once per process.
_warnings.filterwarnings("ignore", message=r"These predictions name the classes .* matched ignoring case")
