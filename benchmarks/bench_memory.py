"""Benchmark: memory of the dashboard server when people upload a 300 MB CSV, and what comes back
when their sessions end.

Run from the repository root:  python benchmarks/bench_memory.py [--linger 150] [--scenarios ...]
Prints a markdown table (and, with --write, appends it with the machine description to
benchmarks/RESULTS_memory.md under the given --label).

What it does, per scenario, on a fresh server:

1. Writes a realistic ~300 MB CSV once (cached under $PBR_BENCH_DATA, default /tmp/pbr_bench_data):
   10 classes of Dirichlet probabilities written with 9 significant digits, the label, and
   (variant "meta") an id, a text segment and a date column; variant "bare" has the scores and the
   label only, with more rows to reach the same size.
2. Starts the real server (``streamlit run dashboard/app.py --server.headless true --server.port
   <free>``) and samples the resident memory (VmRSS from /proc/<pid>/status, summed over the
   server's whole process tree) every 50 ms for the whole run.
3. Warms up: one headless Chromium session (Playwright with Debian's chromium, the flags of
   tests/browser/conftest.py) opens the Data page (the default sample loads) and the Reliability
   page, then closes. The idle level is the median RSS over the next 5 s.
4. Opens 1 or 2 sessions at once; each uploads the CSV on the Data page, waits until the sidebar
   names the file, then opens the Reliability page (in-app navigation, so the session keeps its
   data) and waits for the chart. Peak = the highest sampled RSS from the first upload to the
   close; also the kernel's high-water mark VmHWM of the server process, reset just before the
   upload (``/proc/<pid>/clear_refs``), which sees spikes shorter than the sampling interval.
5. Closes the sessions (their websockets close) and keeps sampling for ``--linger`` seconds:
   RSS 10 s after the close, at the end, and the time until RSS came back within 100 MB of the
   idle level ("released after"), if it did.

Memory of the browser itself is not counted (it is not in the server's process tree).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import shutil
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from dashboard import local_server  # noqa: E402 - after the path
DATA_DIR = Path(os.environ.get("PBR_BENCH_DATA", "/tmp/pbr_bench_data"))
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
TIMEOUT_MS = 900_000
RELEASED_WITHIN_MB = 100.0
#: rows for ~300 MB: 164 bytes per row with the metadata columns, 134 without.
ROWS = {"meta": 1_850_000, "bare": 2_250_000}
SEGMENTS = ["north", "south", "east", "west", "online", "partner store"]


# ------------------------------------------------------------------------------------ the data
def _nine_digits(p: np.ndarray) -> np.ndarray:
    """p rounded to 9 significant digits, so the writer prints at most 9 (as a model export does)."""
    out = np.zeros_like(p)
    nz = p > 0
    scale = 10.0 ** (8 - np.floor(np.log10(p[nz])))
    out[nz] = np.round(p[nz] * scale) / scale
    return out


def make_csv(variant: str, rows: int | None = None, seed: int = 0) -> Path:
    """The benchmark's CSV (written once, then reused): see the module docstring."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rows = rows or ROWS[variant]
    path = DATA_DIR / f"predictions_{variant}_{rows}.csv"
    if path.exists():
        return path
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    meta = variant == "meta"
    names = [f"p_{k}" for k in range(10)] + ["label"] + (["id", "segment", "date"] if meta else [])
    rng = np.random.default_rng(seed)
    tmp = path.with_suffix(".part")
    with open(tmp, "wb") as fh:
        fh.write((",".join(names) + "\n").encode())
        options = pacsv.WriteOptions(include_header=False, quoting_style="needed")
        for start in range(0, rows, 200_000):
            n = min(200_000, rows - start)
            p = _nine_digits(rng.dirichlet(np.full(10, 0.3), size=n))
            cols = {f"p_{k}": p[:, k] for k in range(10)}
            # Labels drawn from the probabilities: a calibrated model, as a reference point.
            cdf = np.cumsum(p, axis=1) / p.sum(axis=1, keepdims=True)
            cols["label"] = np.minimum((rng.random(n)[:, None] > cdf).sum(axis=1), 9)
            if meta:
                cols["id"] = np.arange(start, start + n) + 1_000_000
                cols["segment"] = pa.array(rng.choice(SEGMENTS, n))
                days = np.datetime64("2024-01-01") + rng.integers(0, 365, n)
                cols["date"] = pa.array(days.astype("datetime64[D]").astype(str))
            pacsv.write_csv(pa.table(cols), fh, write_options=options)
    tmp.rename(path)
    return path


# ------------------------------------------------------------------------------------ the server
def _status_mb(pid: int, key: str) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Sampler:
    """RSS of a process tree every ``interval`` seconds, in a thread; (time, MB) pairs."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid, self.interval = pid, interval
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._pids = [pid]
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last_tree = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            if now - last_tree > 1.0:  # children are rare: look for them once a second
                self._pids, last_tree = local_server.process_tree(self.pid), now
            self.samples.append((now, sum(_status_mb(p, "VmRSS") for p in self._pids)))
            self._stop.wait(self.interval)

    def now(self) -> float:
        return self.samples[-1][1] if self.samples else 0.0

    def between(self, t0: float, t1: float) -> list[float]:
        return [m for t, m in self.samples if t0 <= t <= t1]

    def reset_hwm(self) -> bool:
        try:  # "5" resets the peak RSS (VmHWM) to the current RSS (Linux >= 4.0)
            with open(f"/proc/{self.pid}/clear_refs", "w") as f:
                f.write("5")
            return True
        except OSError:
            return False

    def hwm(self) -> float:
        return _status_mb(self.pid, "VmHWM")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


# ------------------------------------------------------------------------------------ the browser
def _wait_idle(page) -> None:
    page.wait_for_selector('[data-testid="stApp"]', timeout=TIMEOUT_MS)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                           timeout=TIMEOUT_MS)


def _no_exception(page) -> None:
    exc = page.locator('[data-testid="stException"]')
    if exc.count():
        raise RuntimeError(f"the page shows an exception: {exc.first.inner_text()[:500]}")


def _open(browser, url: str):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(url, wait_until="domcontentloaded")
    _wait_idle(page)
    page.locator('[data-testid="stSidebar"]').get_by_text("Loaded data").first.wait_for(timeout=TIMEOUT_MS)
    return context, page


def _reliability(page) -> None:
    page.locator('[data-testid="stSidebarNav"]').get_by_text("Reliability", exact=True).first.click()
    page.get_by_role("heading", name="Reliability").first.wait_for(timeout=TIMEOUT_MS)
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=TIMEOUT_MS)
    _wait_idle(page)
    _no_exception(page)


def _wait_uploaded(page, name: str, rows: int) -> None:
    sidebar = page.locator('[data-testid="stSidebar"]')
    sidebar.get_by_text(f"Uploaded file: {name}").first.wait_for(timeout=TIMEOUT_MS)
    sidebar.get_by_text(f"{rows:,}").first.wait_for(timeout=TIMEOUT_MS)
    _wait_idle(page)
    _no_exception(page)


# ------------------------------------------------------------------------------------ a scenario
@dataclass
class Result:
    scenario: str
    file_mb: float
    idle: float = 0.0
    peak: float = 0.0
    peak_load: float = 0.0      # from the first upload until every sidebar names the file
    peak_pages: float = 0.0     # then, until every Reliability chart is drawn
    hwm: float = 0.0
    open_: float = 0.0
    after_10s: float = 0.0
    after_end: float = 0.0
    released_s: float | None = None
    load_s: float = 0.0
    linger_s: float = 0.0
    timeline: list[tuple[float, float]] = field(default_factory=list)


def run_scenario(browser, variant: str, sessions: int, linger: float, logdir: Path) -> Result:
    path = make_csv(variant)
    rows = ROWS[variant]
    res = Result(f"{variant}, {sessions} session{'s' if sessions > 1 else ''}", path.stat().st_size / 2**20)
    proc, url = local_server.start(logdir / f"server_{variant}_{sessions}.log")
    sampler = Sampler(proc.pid)
    try:
        ctx, page = _open(browser, url)  # warm-up: imports, the default sample, the charts
        _reliability(page)
        ctx.close()
        time.sleep(10)
        t = time.monotonic()
        time.sleep(5)
        res.idle = statistics.median(sampler.between(t, time.monotonic()))

        opened = [_open(browser, url) for _ in range(sessions)]
        sampler.reset_hwm()
        t_start = time.monotonic()
        for _, pg in opened:
            pg.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(path))
        for _, pg in opened:
            _wait_uploaded(pg, path.name, rows)
        t_loaded = time.monotonic()
        res.peak_load = max(sampler.between(t_start, t_loaded))
        for _, pg in opened:
            _reliability(pg)
        res.load_s = time.monotonic() - t_start
        res.peak_pages = max(sampler.between(t_loaded, time.monotonic()))
        time.sleep(2)
        res.open_ = sampler.now()
        res.hwm = sampler.hwm()
        for c, _ in opened:
            c.close()
        t_close = time.monotonic()
        res.peak = max(sampler.between(t_start, t_close))
        while time.monotonic() - t_close < linger:
            time.sleep(1)
            if res.released_s is None and sampler.now() <= res.idle + RELEASED_WITHIN_MB:
                res.released_s = time.monotonic() - t_close
        res.linger_s = time.monotonic() - t_close
        res.after_10s = statistics.median(sampler.between(t_close + 9, t_close + 11) or [sampler.now()])
        res.after_end = sampler.now()
        res.timeline = [(t - t_start, m) for t, m in sampler.samples[::20] if t >= t_start]
    finally:
        sampler.stop()
        local_server.stop(proc)
    return res


def table(results: list[Result]) -> str:
    lines = [
        "| scenario | CSV (MB) | idle (MB) | peak above idle (MB) | VmHWM above idle (MB) | peak while loading / on the "
        "Reliability page (MB) | sessions open, above idle (MB) | 10 s after close, above idle (MB) "
        "| at the end, above idle (MB) | released after (s) | upload to chart (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        rel = f"{r.released_s:.0f}" if r.released_s is not None else f"not within {r.linger_s:.0f} s"
        lines.append(
            f"| {r.scenario} | {r.file_mb:.0f} | {r.idle:.0f} | {r.peak - r.idle:.0f} | {r.hwm - r.idle:.0f} | "
            f"{r.peak_load - r.idle:.0f} / {r.peak_pages - r.idle:.0f} | {r.open_ - r.idle:.0f} | {r.after_10s - r.idle:.0f} | {r.after_end - r.idle:.0f} | {rel} | {r.load_s:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", default="meta:1,meta:2,bare:1",
                    help="comma-separated variant:sessions (variants: meta, bare)")
    ap.add_argument("--linger", type=float, default=150.0, help="seconds to watch after the sessions close")
    ap.add_argument("--write", action="store_true", help="append the table to benchmarks/RESULTS_memory.md")
    ap.add_argument("--label", default="", help="heading of the appended section (e.g. 'before', 'after')")
    args = ap.parse_args()

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        sys.exit("Debian's chromium is needed (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    logdir = DATA_DIR / "logs"
    logdir.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    load = os.getloadavg()[0]
    results = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        for item in args.scenarios.split(","):
            variant, sessions = item.split(":")
            r = run_scenario(browser, variant, int(sessions), args.linger, logdir)
            print(f"{r.scenario}: peak +{r.peak - r.idle:.0f} MB, open +{r.open_ - r.idle:.0f} MB, "
                  f"end +{r.after_end - r.idle:.0f} MB, released {r.released_s}", flush=True)
            results.append(r)
        browser.close()
    out = table(results)
    print(out)
    for r in results:
        print(f"\n{r.scenario}: RSS timeline (s from the first upload, MB):",
              " ".join(f"{t:.0f}:{m:.0f}" for t, m in r.timeline[::10]))
    if args.write:
        import pandas, pyarrow, streamlit

        head = [
            f"\n## {args.label or 'run'} ({_dt.datetime.now():%Y-%m-%d %H:%M})\n",
            f"- machine: {os.cpu_count()} CPU cores, {platform.machine()}, load average at start {load:.1f} (shared machine)",
            f"- Python {platform.python_version()}, streamlit {streamlit.__version__}, pandas {pandas.__version__}, "
            f"pyarrow {pyarrow.__version__}, numpy {np.__version__}",
            f"- command: `python benchmarks/bench_memory.py --scenarios {args.scenarios} --linger {args.linger:.0f}` "
            f"({time.time() - t0:.0f} s)\n",
        ]
        with open(ROOT / "benchmarks" / "RESULTS_memory.md", "a") as f:
            f.write("\n".join(head) + "\n" + out + "\n")


if __name__ == "__main__":
    main()
