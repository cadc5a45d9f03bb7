"""Markdown and HTML in names, in a real browser (issue 34): a file named like an HTML image tag, a column
and group values that are Markdown images. Before, the dashboard rendered them, so the browser fetched
the image's URL on display. Now no request leaves for it, no script dialog opens, and each name is
shown as typed (texts.md / texts.plot_text; tests/dashboard/test_markup_in_names.py checks every page)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from browser_ui import TIMEOUT_MS, nav, no_exception, wait_idle

IMAGE = "![x](http://127.0.0.1:9/x.png)"
HTML = "<img src=x onerror=alert(1)>"


def _hostile_csv(tmp_path):
    rng = np.random.default_rng(0)
    n = 800
    p = rng.uniform(0.05, 0.95, n)
    y = (rng.uniform(size=n) < p).astype(int)
    df = pd.DataFrame({"p_positive": p, "label": y, IMAGE: np.array([IMAGE, HTML])[np.arange(n) % 2]})
    path = tmp_path / f"{HTML}.csv"  # a file name may hold anything but "/"
    path.write_text(df.to_csv(index=False))
    return path


def test_names_with_markup_are_shown_as_text_and_fetch_nothing(page, app_url, tmp_path):
    requests, dialogs = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(app_url, wait_until="domcontentloaded")
    page.get_by_text("Bundled samples").wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(_hostile_csv(tmp_path)))
    sidebar = page.locator('[data-testid="stSidebar"]')
    sidebar.get_by_text(f"{HTML}.csv").first.wait_for(timeout=TIMEOUT_MS)  # the file name, as typed
    wait_idle(page)
    no_exception(page)
    main = page.locator('[data-testid="stMain"]')
    assert f"Loaded: {HTML}.csv" in main.inner_text()
    nav(page, "Groups", "Groups")
    main.get_by_text("grouped by").first.wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    no_exception(page)
    text = main.inner_text()
    assert f"grouped by {IMAGE}" in text, text[:2000]          # the column's name, as typed
    page.locator(".legendtext").first.wait_for(timeout=TIMEOUT_MS)
    legend = " ".join(page.locator(".legendtext").all_text_contents())
    assert IMAGE in legend and HTML in legend                    # the groups' names in the chart, as typed
    page.wait_for_timeout(1000)
    images = page.eval_on_selector_all("img", "els => els.map(e => e.getAttribute('src') || '')")
    assert not [s for s in images if "127.0.0.1:9" in s or s == "x"], images
    assert not [u for u in requests if "127.0.0.1:9" in u or u.rstrip("/").endswith("/x")], requests
    assert not dialogs
    links = page.eval_on_selector_all("a", "els => els.map(e => e.getAttribute('href') || '')")
    assert not [h for h in links if "127.0.0.1:9" in h], links
