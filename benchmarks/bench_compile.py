"""A lead for issue 15, measured, not shipped: the Monte Carlo kernel of PBR compiled by torch.compile.

PBR's objective spends ~35 % of a fit in ``pbr_core.gp.objectives._MCExpectations`` (Brier term:
the (N, S, K) latent draws, their softmax and the derivatives, in cache-sized row chunks). This
script times one evaluation (forward + backward, the Brier term of PBR, N = 1000 rows, S = 32
float32 draws) of

* the production kernel, eager (``_MCExpectations.apply``, chunks of 2^18 entries), and
* the same chunk loop with the chunk's arithmetic compiled by ``torch.compile`` (inductor: one
  generated C++ loop per fused group of operations instead of ~15 passes over memory),

in CPU seconds of this process (one torch thread), with the compiled version's first call (tracing
and compiling; the C++ compiler runs in worker processes, so also wall seconds) and its largest
difference from the production values and gradients. The inductor cache is a fresh folder unless
``--cache DIR`` names one: run twice with the same folder to see a warm cache.

    python benchmarks/bench_compile.py                 # cold cache
    python benchmarks/bench_compile.py --cache /tmp/ind --write --label "warm cache"   # (second run)
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS_fast_pbr.md"


def chunk_body(m_r, s_r, e, lab):
    """The Brier part of one chunk of ``_MCExpectations.forward`` (values and derivative factors)."""
    import torch

    cd = e.dtype
    lab1 = lab.unsqueeze(-1)
    lab_s = lab1.unsqueeze(-1).expand(lab1.shape[0], e.shape[-2], 1)
    f = torch.addcmul(m_r.to(cd).unsqueeze(-2), s_r.to(cd).unsqueeze(-2), e)
    p = torch.softmax(f, dim=-1)
    onehot = torch.zeros_like(m_r).scatter_(-1, lab1, 1.0)
    e_y, p_y = e.gather(-1, lab_s), p.gather(-1, lab_s)
    q = (p * p).sum(-1, keepdim=True)
    b = ((1.0 - p_y).square() + (q - p_y.square())).mean((-2, -1)).to(m_r.dtype)
    t = (p + (p_y - q)) * p
    d_mu = 2.0 * (t.mean(-2).to(m_r.dtype) - onehot * p_y.mean((-2, -1)).to(m_r.dtype).unsqueeze(-1))
    d_sd = 2.0 * ((t * e).mean(-2).to(m_r.dtype) - onehot * (p_y * e_y).mean((-2, -1)).to(m_r.dtype).unsqueeze(-1))
    return b, d_mu, d_sd


def measure(k: int, n: int, s: int, repeats: int) -> dict:
    import torch

    from pbr_core.gp.objectives import _MCExpectations, chunk_rows_for, kernel_draws

    g = torch.Generator().manual_seed(0)
    mu = torch.randn(n, k, dtype=torch.float64, generator=g) * 3
    sd = torch.rand(n, k, dtype=torch.float64, generator=g) + 0.1
    lab = torch.randint(0, k, (n,), generator=g)
    eps = torch.randn(n, s, k, generator=g).to(torch.float32)
    rows = chunk_rows_for(mu, s)

    def production():
        m, d = mu.clone().requires_grad_(), sd.clone().requires_grad_()
        _, out_b = _MCExpectations.apply(m, d, lab, kernel_draws(eps), False, True, rows)
        out_b.sum().backward()
        return out_b.detach(), m.grad, d.grad

    compiled_body = torch.compile(chunk_body, dynamic=False)

    def compiled():
        parts = [compiled_body(mu[a:a + rows], sd[a:a + rows], eps[a:a + rows], lab[a:a + rows])
                 for a in range(0, n, rows)]
        return tuple(torch.cat([p[i] for p in parts]) for i in range(3))

    ref = production()
    c0, w0 = time.process_time(), time.perf_counter()
    got = compiled()
    first_cpu, first_wall = time.process_time() - c0, time.perf_counter() - w0
    diff = [float((a - b).abs().max()) for a, b in zip(ref, got)]

    def per_eval(fn) -> float:
        fn()
        c = time.process_time()
        for _ in range(repeats):
            fn()
        return (time.process_time() - c) / repeats

    # Interleaved, so that load from other processes falls on both alike.
    eager_t, comp_t = [], []
    for _ in range(3):
        eager_t.append(per_eval(production))
        comp_t.append(per_eval(compiled))
    return {"k": k, "rows": rows, "eager": min(eager_t), "compiled": min(comp_t), "first_cpu": first_cpu,
            "first_wall": first_wall, "diff_value": diff[0], "diff_grad": max(diff[1:])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--classes", default="10,100")
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--draws", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--cache", default=None, help="inductor cache folder (default: a fresh one, i.e. cold)")
    ap.add_argument("--label", default="")
    ap.add_argument("--write", action="store_true", help=f"append the table to {RESULTS.name}")
    args = ap.parse_args()
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = args.cache or tempfile.mkdtemp(prefix="inductor_")
    import torch

    torch.set_num_threads(1)
    lines = ["| K | rows per chunk | eager ms / evaluation | compiled ms / evaluation | speed-up | "
             "first compiled call: CPU s / wall s | max diff: values / gradients |", "|---|---|---|---|---|---|---|"]
    print(*lines, sep="\n", flush=True)
    for k in (int(x) for x in args.classes.split(",")):
        r = measure(k, args.rows, args.draws, args.repeats)
        line = (f"| {k} | {r['rows']} | {1e3 * r['eager']:.1f} | {1e3 * r['compiled']:.1f} | "
                f"{r['eager'] / r['compiled']:.2f}x | {r['first_cpu']:.1f} / {r['first_wall']:.1f} | "
                f"{r['diff_value']:.1e} / {r['diff_grad']:.1e} |")
        lines.append(line)
        print(line, flush=True)
    if args.write:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        head = (f"\n## torch.compile of the Monte Carlo kernel{': ' + args.label if args.label else ''} "
                f"({platform.machine()}, {os.cpu_count()} CPUs, load average {load} at the end; "
                f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; torch {torch.__version__})\n\n"
                f"N = {args.rows}, S = {args.draws} float32 draws, the Brier term (PBR), forward + backward, "
                f"CPU s of one thread, best of 3 interleaved rounds of {args.repeats}. Command: "
                f"`python benchmarks/bench_compile.py {' '.join(sys.argv[1:])}`.\n\n")
        with open(RESULTS, "a") as fh:
            fh.write(head + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
