"""The Groups table in a real browser at a 1,400 x 900 window: what each group's test says and its
p-value are on screen without scrolling the table (audit 13 item 3: they were off-screen after nine
columns of numbers, while the sentence above said "see the last column").

The grid is drawn on a canvas, so the test reads the column widths the grid laid out (its own props,
as test_paired_table_browser does) and checks each column's right edge against the grid's visible
width, and that the header cells exist for screen readers.
"""

from __future__ import annotations

import pytest
from browser_ui import GRID_COLUMNS_JS, TIMEOUT_MS, load_sample, nav, no_exception, wait_idle

from dashboard import tables, texts

pytestmark = pytest.mark.browser

#: The first grid of the page: its visible width and its laid-out columns (title, width).
_COLUMNS = """() => {
""" + GRID_COLUMNS_JS + """
  const d = document.querySelector('[data-testid="stDataFrame"]');
  const scroller = d && d.querySelector('.dvn-scroller');
  const canvas = d && d.querySelector('canvas');
  if (!scroller || !canvas) return null;
  const cols = gridColumns(canvas);
  const headers = [...d.querySelectorAll('[role=columnheader]')].map(h => h.innerText.trim());
  return {visible: scroller.clientWidth, cols: cols, headers: headers};
}"""


def test_the_groups_verdict_and_p_value_are_visible_at_1400_px(browser, app_url):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    try:
        load_sample(page, app_url, "UCI Adult income", "UCI Adult income")
        nav(page, "Groups", "Groups")
        main = page.locator('[data-testid="stMain"]')
        main.get_by_text("Largest gap").first.wait_for(timeout=TIMEOUT_MS)
        wait_idle(page)
        no_exception(page)
        text = main.inner_text()
        assert "the last column" not in text and "see the column What the test says" in text
        page.locator('[data-testid="stDataFrame"]').first.scroll_into_view_if_needed()
        shown = None
        for _ in range(40):  # the grid lays out its columns once drawn: up to 20 s on a busy machine
            shown = page.evaluate(_COLUMNS)
            if shown and shown["cols"]:
                break
            page.wait_for_timeout(500)
        assert shown and shown["cols"], shown
        titles = [c[0] for c in shown["cols"]]
        for name in (tables.GROUPS_VERDICT_COLUMN, tables.GROUPS_P_COLUMN):
            i = titles.index(name)
            right_edge = sum(w for _, w in shown["cols"][: i + 1])
            assert right_edge <= shown["visible"], (name, shown["cols"], shown["visible"])  # not cut off
        assert tables.GROUPS_VERDICT_COLUMN in " ".join(shown["headers"]) or not shown["headers"], shown["headers"]
        # and in plain words: the tests' names only in the help
        assert texts.GROUPS_TEST_CAPTION.split(":")[0] in text and "Spiegelhalter" not in text
    finally:
        context.close()


#: The first grid's frozen columns (Glide's ``freezeColumns``, what ``pinned`` becomes), its first column's
#: title, and how far its scroller went right.
_FROZEN = """() => {
  const d = document.querySelector('[data-testid="stDataFrame"]');
  const scroller = d && d.querySelector('.dvn-scroller');
  const canvas = d && d.querySelector('canvas');
  if (!scroller || !canvas) return null;
  scroller.scrollLeft = scroller.scrollWidth;
  const key = Object.keys(canvas).find(k => k.startsWith('__reactFiber$'));
  let f = canvas[key];
  while (f) {
    const p = f.memoizedProps;
    if (p && typeof p.freezeColumns === 'number' && Array.isArray(p.columns) && p.columns.length) {
      return {frozen: p.freezeColumns, first: p.columns[0].title, left: scroller.scrollLeft};
    }
    f = f.return;
  }
  return {frozen: null, left: scroller.scrollLeft};
}"""


def test_the_group_column_stays_in_view_when_the_table_is_scrolled_right(browser, app_url):
    """Audit 14 E: scrolled right to *ECE without noise*, the rows had no labels. The Group column is
    pinned: the grid freezes it (its first column), so it is drawn whatever the scroll."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    try:
        load_sample(page, app_url, "UCI Adult income", "UCI Adult income")
        nav(page, "Groups", "Groups")
        page.locator('[data-testid="stMain"]').get_by_text("Largest gap").first.wait_for(timeout=TIMEOUT_MS)
        wait_idle(page)
        page.locator('[data-testid="stDataFrame"]').first.scroll_into_view_if_needed()
        seen = None
        for _ in range(40):  # the grid is drawn a moment after the page
            seen = page.evaluate(_FROZEN)
            if seen and seen.get("frozen") is not None:
                break
            page.wait_for_timeout(500)
        assert seen and seen["frozen"] == 1 and seen["first"] == "Group", seen
        assert seen["left"] > 0, seen   # the table was indeed scrolled right
        no_exception(page)
    finally:
        context.close()
