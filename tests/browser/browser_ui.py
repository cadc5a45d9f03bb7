"""Steps the real-browser tests share: wait for a script run to end, check the page shows no
exception, go to a page by the sidebar."""

from __future__ import annotations

TIMEOUT_MS = 90_000


def wait_idle(page, timeout: int = TIMEOUT_MS) -> None:
    """Wait until Streamlit has finished the current script run (the 'running' widget is gone)."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout)
    page.wait_for_timeout(300)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout)


def no_exception(page) -> None:
    exc = page.locator('[data-testid="stException"]')
    assert exc.count() == 0, exc.first.inner_text()


def nav(page, name: str, heading: str, timeout: int = TIMEOUT_MS) -> None:
    """Click ``name`` in the sidebar and wait for the page titled ``heading`` to finish its run."""
    page.locator('[data-testid="stSidebarNav"]').get_by_text(name, exact=True).click()
    page.get_by_role("heading", name=heading, level=1).wait_for(timeout=timeout)
    wait_idle(page, timeout)


def load_sample(page, app_url: str, option: str, sidebar: str, exact: bool = False) -> None:
    """Open the app and load the bundled sample ``option`` from the Data page's sample box; wait
    until the sidebar names it (``sidebar``). Every step waits up to ``TIMEOUT_MS``: the app's first
    run on a fresh server, on a loaded machine, takes longer than Playwright's 30 s default."""
    page.goto(app_url, wait_until="domcontentloaded")
    page.get_by_text("Bundled samples").wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    box = page.locator('[data-testid="stSelectbox"]').first
    box.wait_for(state="visible", timeout=TIMEOUT_MS)
    box.click(timeout=TIMEOUT_MS)
    page.get_by_role("option", name=option, exact=exact).click(timeout=TIMEOUT_MS)
    page.locator('[data-testid="stSidebar"]').get_by_text(sidebar).wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)


#: A JavaScript function ``gridColumns(canvas)``: the columns an ``st.dataframe`` grid laid out, as
#: [title, width] pairs, read from the React props of its canvas (the grid draws on a canvas, so its
#: cells are not in the DOM), or null. Paste it into a page.evaluate() function body.
GRID_COLUMNS_JS = """function gridColumns(canvas) {
  const key = Object.keys(canvas).find(k => k.startsWith('__reactFiber$'));
  let f = canvas[key];
  while (f) {
    const p = f.memoizedProps;
    if (p && Array.isArray(p.columns) && p.columns.length && typeof p.columns[0].width === 'number') {
      return p.columns.map(c => [c.title, c.width]);
    }
    f = f.return;
  }
  return null;
}"""
