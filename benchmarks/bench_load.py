"""Benchmark: how long the Reliability page takes to settle when several people open it at once.

Run from the repository root:  python benchmarks/bench_load.py [--sessions 1,4,8] [--rounds 3]
Prints a markdown table per run (and, with --write, appends it with the machine description to
benchmarks/RESULTS_load.md under the given --label).

What it does, for each number of sessions N, on a fresh server:

1. Starts the real server (``streamlit run dashboard/app.py --server.headless true --server.port
   <free>``) and waits for ``/_stcore/health``.
2. Round "cold": N new browser sessions at once each open ``<server>/reliability`` (a new session
   loads the default sample, CIFAR-100 DenseNet-121, 10,000 x 100 logits, which is what a new user
   does). The server process has imported nothing of the pages yet and its caches are empty.
3. ``--rounds`` rounds "warm": the same, on the same server (its imports done, its caches filled).
4. ``--rounds`` rounds "in-app": N new sessions first open the Data page (the app's start page)
   and wait until it has settled and the browser and server have gone idle (untimed: half a second
   with under 0.05 CPU s used by both together), then all click "Reliability" in the sidebar at once.

A page has settled when the Reliability heading and the plotly chart are drawn, the script run
has ended (``stApp[data-test-script-state="notRunning"]``) and Streamlit's status widget is gone.
The time is measured inside the page with ``performance.now()``: from navigation start (the
document's time origin) for a URL, from the click for the in-app navigation. Each round's new
contexts are created before the clock starts, and closed after the round.

Client "protocol" (``--clients protocol``, run first): the same rounds without a browser. Each
session is a websocket that speaks Streamlit's own protocol (``/_stcore/stream``: a ``rerun_script``
BackMsg for the page, then the ForwardMsgs until ``script_finished``), timed from the connection to
the end of the script run. It measures the server alone: what N people would see with their
browsers on their own machines, minus the network and the browser's own drawing (and minus the
static files, ~130 requests per new browser, that a browser fetches first).

``--app floor`` runs the same rounds against a minimal two-page app instead of the dashboard (a
"Data" page, and a "Reliability" page with a title and a two-point plotly chart; written to a
temporary folder): what Streamlit and plotly cost a new session on this machine whatever the page
shows, i.e. the lowest time the dashboard could reach here.

``--app paired`` (browser clients) compares the two fairly on a shared machine, whose load from other
jobs changes from minute to minute: the dashboard's and the floor's rounds alternate, each pair in
the other order than the last (dashboard first, then floor first, ...), so that both meet the same
load. Cold rounds come in ``--cold-pairs`` pairs, each on two fresh servers; warm and in-app rounds
follow in ``--rounds`` pairs on the last pair's two servers. The table gives both apps' rows and, per kind, the
ratio of the dashboard's p95 to the floor's (issue 35's target: at most 1.5) over all pairs, with
the range of the per-pair ratios.

Browser: ONE headless Chromium (Debian's ``/usr/bin/chromium`` through Playwright, the flags of
tests/browser/conftest.py) with N browser contexts. A context is a separate profile (own cookies,
cache and websocket, so its own Streamlit session and its own renderer process), which is what N
people are for the server; N whole browsers would add N browser and GPU processes that real users
run on their own machines, and on this 2-core machine that CPU is taken from the server under
test. Chromium's remaining cost is measured, not hidden: the table gives the CPU seconds used
during each round by the server process, by the browser (Playwright's driver and every Chromium
process, i.e. this script's process tree minus the server), and by the whole machine (/proc/stat,
which includes other people's jobs on a shared machine).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from dashboard import local_server  # noqa: E402 - after the path
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
TIMEOUT_MS = 300_000
CLK_TCK = os.sysconf("SC_CLK_TCK")

#: Settled: heading, chart, script run over, no status widget. Returns the page's clock then.
SETTLED_JS = """(t0) => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
  if (document.querySelector('[data-testid="stException"]')) return -1;
  const h1 = [...document.querySelectorAll('h1')].some(h => h.textContent.trim() === 'Reliability');
  if (!h1 || !document.querySelector('.js-plotly-plot .main-svg')) return false;
  return performance.now() - t0;
}"""
#: The Data page (the start page) has settled and the sidebar names the loaded sample.
DATA_SETTLED_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
  const side = document.querySelector('[data-testid="stSidebar"]');
  return !!side && side.textContent.includes('Loaded data') && side.textContent.includes('n = ');
}"""
CLICK_JS = """() => {
  const links = [...document.querySelectorAll('[data-testid="stSidebarNav"] a')];
  const a = links.find(l => l.textContent.trim().endsWith('Reliability'));
  const t0 = performance.now();
  a.click();
  return t0;
}"""


#: The minimal app of ``--app floor``: Streamlit's frame, a sidebar like the dashboard's, and one
#: plotly chart on the Reliability page (so the browser loads plotly, as for the real page).
FLOOR_APP = '''
import plotly.graph_objects as go
import streamlit as st


def data():
    st.title("Data")


def reliability():
    st.title("Reliability")
    st.plotly_chart(go.Figure(go.Scatter(x=[0, 1], y=[0, 1])))


st.set_page_config(page_title="floor", layout="wide")
nav = st.navigation([st.Page(data, title="Data", url_path="data", default=True),
                     st.Page(reliability, title="Reliability", url_path="reliability")])
with st.sidebar:
    st.markdown("### Loaded data")
    st.markdown("n = 10,000")
nav.run()
'''


# ------------------------------------------------------------------------------------ processes
def _cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of these processes (their own, not their reaped children's)."""
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            continue
    return total / CLK_TCK


def _machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (all cores; /proc/stat minus idle and iowait)."""
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:]]
    return (sum(vals[:8]) - vals[3] - vals[4]) / CLK_TCK


@dataclass
class CpuSnapshot:
    server: float
    browser: float
    machine: float

    @classmethod
    def take(cls, server_pid: int) -> "CpuSnapshot":
        children = local_server.process_children()
        server = local_server.process_tree(server_pid, children)
        mine = [p for p in local_server.process_tree(os.getpid(), children)
                if p not in set(server) and p != os.getpid()]
        return cls(_cpu_s(server), _cpu_s(mine), _machine_busy_s())

    def __sub__(self, other: "CpuSnapshot") -> "CpuSnapshot":
        return CpuSnapshot(self.server - other.server, self.browser - other.browser,
                           self.machine - other.machine)


# ------------------------------------------------------------------------------------ sessions
async def _settle(page, t0: float = 0.0) -> float:
    handle = await page.wait_for_function(SETTLED_JS, arg=t0, polling=50, timeout=TIMEOUT_MS)
    ms = await handle.json_value()
    if ms == -1:
        exc = await page.locator('[data-testid="stException"]').first.inner_text()
        raise RuntimeError(f"the page shows an exception: {exc[:500]}")
    return ms / 1000.0


async def _by_url(page, url: str) -> float:
    await page.goto(f"{url}/reliability", wait_until="commit", timeout=TIMEOUT_MS)
    return await _settle(page)


async def _open_data(page, url: str) -> None:
    await page.goto(url, wait_until="commit", timeout=TIMEOUT_MS)
    await page.wait_for_function(DATA_SETTLED_JS, polling=100, timeout=TIMEOUT_MS)


async def _until_quiet(server_pid: int, window: float = 0.5, busy: float = 0.05, limit: float = 60.0) -> float:
    """Wait until the browser and the server have been idle for a whole ``window`` (together under
    ``busy`` CPU seconds in it), at most ``limit`` seconds; returns the seconds waited.

    Why: a page's script run ends before the browser has drawn what it sent (the Data page draws for
    about 0.7 CPU s after its run ends: its grid and controls), so N Data pages opened at once on two
    cores are still drawing seconds after the last one says it has settled. A fixed pause charged that
    drawing to the in-app navigation that follows, which the floor's empty Data page never had.
    """
    t0 = time.monotonic()
    last = CpuSnapshot.take(server_pid)
    while time.monotonic() - t0 < limit:
        await asyncio.sleep(window)
        now = CpuSnapshot.take(server_pid)
        used = (now.server - last.server) + (now.browser - last.browser)
        last = now
        if used < busy:
            break
    return time.monotonic() - t0


async def _in_app(page) -> float:
    t0 = await page.evaluate(CLICK_JS)
    return await _settle(page, t0)


async def _protocol_run(ws, page_name: str) -> dict[str, int]:
    """Ask for a run of ``page_name`` on an open connection; wait for its end. Returns element counts."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    msg = BackMsg()
    msg.rerun_script.query_string = ""
    msg.rerun_script.page_name = page_name
    await ws.send(msg.SerializeToString())
    seen: dict[str, int] = {}
    while True:
        fm = ForwardMsg()
        fm.ParseFromString(await ws.recv())
        kind = fm.WhichOneof("type")
        if kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
            element = fm.delta.new_element.WhichOneof("type")
            if element == "exception":
                raise RuntimeError(f"the page shows an exception: {fm.delta.new_element.exception.message[:300]}")
            seen[element] = seen.get(element, 0) + 1
        elif kind == "script_finished":
            return seen


def _protocol_connect(url: str):
    from websockets.asyncio.client import connect

    return connect(url.replace("http://", "ws://") + "/_stcore/stream", subprotocols=["streamlit"],
                   additional_headers={"Origin": url}, max_size=None, compression=None, open_timeout=TIMEOUT_MS / 1000)


async def _protocol_session(url: str, kind: str, start: asyncio.Event | None) -> float:
    if kind != "in-app":
        await start.wait()
        t0 = time.perf_counter()
        async with _protocol_connect(url) as ws:
            seen = await _protocol_run(ws, "reliability")
            elapsed = time.perf_counter() - t0
    else:
        async with _protocol_connect(url) as ws:
            await _protocol_run(ws, "")          # the Data page, untimed
            await start.wait()
            t0 = time.perf_counter()
            seen = await _protocol_run(ws, "reliability")
            elapsed = time.perf_counter() - t0
    if not seen.get("plotly_chart"):
        raise RuntimeError(f"the Reliability page sent no chart (elements: {seen})")
    return elapsed


@dataclass
class Round:
    n: int
    client: str             # "browser", "protocol"
    kind: str               # "cold", "warm", "in-app"
    times: list[float]
    wall_s: float
    cpu: CpuSnapshot
    load: tuple[float, float]  # 1-minute load average at the start and at the end


async def run_round(browser, url: str, n: int, kind: str, server_pid: int) -> Round:
    """One round of N browser sessions at once (see the module docstring)."""
    contexts = [await browser.new_context(viewport={"width": 1400, "height": 1000}) for _ in range(n)]
    pages = [await c.new_page() for c in contexts]
    try:
        if kind == "in-app":
            await asyncio.gather(*(_open_data(p, url) for p in pages))
            await _until_quiet(server_pid)  # the Data pages' drawing is not the navigation's cost
        load0 = os.getloadavg()[0]
        cpu0, t0 = CpuSnapshot.take(server_pid), time.monotonic()
        if kind == "in-app":
            times = await asyncio.gather(*(_in_app(p) for p in pages))
        else:
            times = await asyncio.gather(*(_by_url(p, url) for p in pages))
        wall = time.monotonic() - t0
        cpu = CpuSnapshot.take(server_pid) - cpu0
        return Round(n, "browser", kind, list(times), wall, cpu, (load0, os.getloadavg()[0]))
    finally:
        for c in contexts:
            await c.close()


async def run_protocol_round(url: str, n: int, kind: str, server_pid: int) -> Round:
    """One round of N protocol sessions at once: all connected (in-app: on the Data page) before the clock starts."""
    start = asyncio.Event()
    tasks = [asyncio.create_task(_protocol_session(url, kind, start)) for _ in range(n)]
    await asyncio.sleep(1.5 if kind == "in-app" else 0.0)  # in-app: the Data page runs end first
    load0 = os.getloadavg()[0]
    cpu0, t0 = CpuSnapshot.take(server_pid), time.monotonic()
    start.set()
    times = await asyncio.gather(*tasks)
    wall = time.monotonic() - t0
    cpu = CpuSnapshot.take(server_pid) - cpu0
    return Round(n, "protocol", kind, list(times), wall, cpu, (load0, os.getloadavg()[0]))


# ------------------------------------------------------------------------------------ the table
def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


@dataclass
class Summary:
    n: int
    client: str
    kind: str
    rounds: list[Round] = field(default_factory=list)

    @property
    def times(self) -> list[float]:
        return [t for r in self.rounds for t in r.times]


def table(summaries: list[Summary]) -> str:
    lines = [
        "| client | N | server | rounds | p50 (s) | p95 (s) | max (s) | p95 per round (s) | round wall (s) | server CPU (s) "
        "| browser CPU (s) | machine busy (s) | load avg |",
        "|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for s in summaries:
        t = s.times
        rs = s.rounds
        per_round = ", ".join(f"{_pct(r.times, 95):.1f}" for r in rs)
        mean = lambda f: sum(f(r) for r in rs) / len(rs)  # noqa: E731
        loads = f"{min(r.load[0] for r in rs):.1f}-{max(max(r.load) for r in rs):.1f}"
        lines.append(
            f"| {s.client} | {s.n} | {s.kind} | {len(rs)} | {_pct(t, 50):.2f} | {_pct(t, 95):.2f} | {max(t):.2f} | {per_round} | "
            f"{mean(lambda r: r.wall_s):.1f} | {mean(lambda r: r.cpu.server):.1f} | "
            f"{mean(lambda r: r.cpu.browser):.1f} | {mean(lambda r: r.cpu.machine):.1f} | {loads} |"
        )
    return "\n".join(lines)


def _floor_app(logdir: Path) -> Path:
    app = logdir / "floor_app" / "floor_app.py"
    app.parent.mkdir(parents=True, exist_ok=True)
    app.write_text(FLOOR_APP)
    return app


async def run_paired(args) -> list[Summary]:
    """``--app paired``: the dashboard's and the floor's browser rounds, alternating (module docstring)."""
    from playwright.async_api import async_playwright

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        sys.exit("Debian's chromium is needed (apt-get install -y chromium)")
    logdir = Path(args.logdir)
    logdir.mkdir(parents=True, exist_ok=True)
    apps = {"dashboard": None, "floor": _floor_app(logdir)}
    n = int(args.sessions.split(",")[-1])
    out = {(a, k): Summary(n, f"browser, {a}", k) for k in ("cold", "warm", "in-app") for a in apps}
    pair = 0

    def order() -> list[str]:
        nonlocal pair
        pair += 1
        return ["dashboard", "floor"] if pair % 2 else ["floor", "dashboard"]

    async def one(browser, name: str, url: str, kind: str, pid: int) -> None:
        r = await run_round(browser, url, n, kind, pid)
        out[(name, kind)].rounds.append(r)
        print(f"{name} N={n} {kind}: p95 {_pct(r.times, 95):.2f}  (server CPU {r.cpu.server:.1f} s, browser "
              f"{r.cpu.browser:.1f} s, load {r.load[0]:.1f})", flush=True)
        await asyncio.sleep(args.pause)

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        servers: dict = {}
        try:
            for i in range(max(1, args.cold_pairs)):  # the last pair's servers go on to the warm rounds
                for proc, _ in servers.values():
                    local_server.stop(proc)
                servers = {}
                for a in apps:
                    servers[a] = local_server.start(logdir / f"server_paired_{a}.log", app=apps[a])
                for a in order():
                    await one(browser, a, servers[a][1], "cold", servers[a][0].pid)
            for kind in ("warm", "in-app"):
                for _ in range(args.rounds):
                    for a in order():
                        await one(browser, a, servers[a][1], kind, servers[a][0].pid)
        finally:
            for proc, _ in servers.values():
                local_server.stop(proc)
        await browser.close()
    return [out[(a, k)] for k in ("cold", "warm", "in-app") for a in apps]


def ratio_table(summaries: list[Summary]) -> str:
    """Per kind: the dashboard's p95 over the floor's (all pairs), and the range of the per-pair ratios."""
    by = {(s.client.split(", ")[1], s.kind): s for s in summaries}
    lines = ["| server | dashboard p95 (s) | floor p95 (s) | ratio | per pair |", "|---|---:|---:|---:|---|"]
    for kind in ("cold", "warm", "in-app"):
        d, f = by[("dashboard", kind)], by[("floor", kind)]
        pairs = [_pct(a.times, 95) / _pct(b.times, 95) for a, b in zip(d.rounds, f.rounds)]
        lines.append(f"| {kind} | {_pct(d.times, 95):.2f} | {_pct(f.times, 95):.2f} | "
                     f"{_pct(d.times, 95) / _pct(f.times, 95):.2f} | {', '.join(f'{x:.2f}' for x in pairs)} |")
    return "\n".join(lines)


async def run(args) -> list[Summary]:
    from playwright.async_api import async_playwright

    clients = args.clients.split(",")
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if "browser" in clients and exe is None:
        sys.exit("Debian's chromium is needed (apt-get install -y chromium)")
    logdir = Path(args.logdir)
    logdir.mkdir(parents=True, exist_ok=True)
    app = _floor_app(logdir) if args.app == "floor" else None
    summaries: list[Summary] = []
    async with async_playwright() as pw:
        browser = None
        if "browser" in clients:
            browser = await pw.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        for client in clients:
            for n in [int(x) for x in args.sessions.split(",")]:
                proc, url = local_server.start(logdir / f"server_{client}_{n}.log", app=app)
                try:
                    for kind, count in [("cold", 1), ("warm", args.rounds), ("in-app", args.rounds)]:
                        s = Summary(n, client, kind)
                        for _ in range(count):
                            if client == "browser":
                                r = await run_round(browser, url, n, kind, proc.pid)
                            else:
                                r = await run_protocol_round(url, n, kind, proc.pid)
                            s.rounds.append(r)
                            print(f"{client} N={n} {kind}: " + " ".join(f"{x:.2f}" for x in sorted(r.times))
                                  + f"  (server CPU {r.cpu.server:.1f} s, browser {r.cpu.browser:.1f} s, "
                                    f"machine {r.cpu.machine:.1f} s, wall {r.wall_s:.1f} s, load {r.load[0]:.1f})",
                                  flush=True)
                            await asyncio.sleep(args.pause)
                        summaries.append(s)
                finally:
                    local_server.stop(proc)
        if browser is not None:
            await browser.close()
    return summaries


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", default="1,4,8", help="comma-separated numbers of concurrent sessions")
    ap.add_argument("--clients", default="protocol,browser",
                    help="comma-separated: protocol (the server alone), browser (headless Chromium)")
    ap.add_argument("--app", choices=("dashboard", "floor", "paired"), default="dashboard",
                    help="the dashboard, the minimal app of the module docstring (the floor), or both in "
                         "alternating browser rounds (paired; the last of --sessions)")
    ap.add_argument("--cold-pairs", type=int, default=2, help="--app paired: pairs of cold rounds")
    ap.add_argument("--rounds", type=int, default=3, help="warm rounds and in-app rounds per N")
    ap.add_argument("--pause", type=float, default=2.0, help="seconds between rounds")
    ap.add_argument("--logdir", default="/tmp/pbr_bench_load", help="where the server logs go")
    ap.add_argument("--write", action="store_true", help="append the table to benchmarks/RESULTS_load.md")
    ap.add_argument("--label", default="", help="heading of the appended section (e.g. 'before', 'after')")
    args = ap.parse_args()

    t0 = time.time()
    load = os.getloadavg()
    summaries = asyncio.run(run_paired(args) if args.app == "paired" else run(args))
    out = table(summaries)
    if args.app == "paired":
        out += "\n\nThe dashboard's p95 against the floor's (issue 35: at most 1.5):\n\n" + ratio_table(summaries)
    print(out)
    if args.write:
        import plotly
        import streamlit

        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
        head = [
            f"\n## {args.label or 'run'} ({_dt.datetime.now():%Y-%m-%d %H:%M}, commit {commit})\n",
            f"- machine: {os.cpu_count()} CPU cores, {platform.machine()}, load average at start "
            f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min; shared machine)",
            f"- Python {platform.python_version()}, streamlit {streamlit.__version__}, plotly {plotly.__version__}, "
            f"numpy {np.__version__}",
            f"- command: `python benchmarks/bench_load.py --app {args.app} "
            f"{'' if args.app == 'paired' else f'--clients {args.clients} '}"
            f"--sessions {args.sessions} --rounds {args.rounds}"
            f"{f' --cold-pairs {args.cold_pairs}' if args.app == 'paired' else ''}` "
            f"({time.time() - t0:.0f} s)\n",
        ]
        with open(ROOT / "benchmarks" / "RESULTS_load.md", "a") as f:
            f.write("\n".join(head) + "\n" + out + "\n")


if __name__ == "__main__":
    main()
