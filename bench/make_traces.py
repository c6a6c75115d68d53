"""Produce small, real Kineto (Chrome-trace JSON) traces for tests/fixtures/traces/.

Two tiny CPU jobs, each run as 2 processes on one machine with a gloo process group and profiled
with ``torch.profiler`` (CPU activity only, so no GPU is needed):

- ``ddp``: data parallelism.  A 3-layer MLP wrapped in DistributedDataParallel; each of a few
  iterations is forward, backward (DDP all-reduces the gradient buckets through gloo while the
  backward goes on) and an SGD step, inside ``prof.step()`` so the trace has ProfilerStep#N.
- ``pipe``: a 2-stage pipeline.  Rank 0 runs the first half of the MLP and ``dist.send``s the
  activation, rank 1 ``dist.recv``s it and runs the second half; the gradient comes back the
  same way (GPipe with one micro-batch: Huang et al. 2019).

torch is not a dependency of the project: install it only to regenerate the fixtures
(``pip install torch``).  Run ``python bench/make_traces.py [--out DIR]``; it writes
``DIR/{ddp,pipe}/rank{0,1}.json.gz`` (gzipped, as torch writes them with a ``.gz`` name).
"""
from __future__ import annotations

import argparse
import gzip
import os
import shutil
import tempfile
from pathlib import Path

WORLD = 2
STEPS = 4          # profiled iterations (after one warm-up step the schedule skips)
WIDTH = 256        # hidden size: large enough that a GEMM is visible, small enough to be fast
BATCH = 64


def _mlp(torch):
    return torch.nn.Sequential(torch.nn.Linear(WIDTH, 4 * WIDTH), torch.nn.ReLU(),
                               torch.nn.Linear(4 * WIDTH, 4 * WIDTH), torch.nn.ReLU(),
                               torch.nn.Linear(4 * WIDTH, WIDTH))


def _profiled(torch, rank: int, out: Path, body) -> None:
    """Run ``body(step)`` for warm-up + STEPS iterations under the profiler; write rank{r}.json.gz."""
    from torch.profiler import ProfilerActivity, profile, schedule
    sched = schedule(wait=0, warmup=1, active=STEPS, repeat=1)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / f"rank{rank}.json"
        with profile(activities=[ProfilerActivity.CPU], schedule=sched, record_shapes=True,
                     on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:
            for step in range(1 + STEPS):
                body(step)
                prof.step()
        with open(raw, "rb") as src, gzip.open(out / f"rank{rank}.json.gz", "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)


def _ddp(rank: int, out: Path) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    torch.manual_seed(0)
    model = DistributedDataParallel(_mlp(torch), bucket_cap_mb=1)   # several buckets: overlap
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(BATCH, WIDTH)

    def step(_: int) -> None:
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    _profiled(torch, rank, out, step)
    dist.barrier()


def _pipe(rank: int, out: Path) -> None:
    import torch
    import torch.distributed as dist
    torch.manual_seed(0)
    layers = list(_mlp(torch))
    stage = torch.nn.Sequential(*(layers[:3] if rank == 0 else layers[3:]))
    opt = torch.optim.SGD(stage.parameters(), lr=1e-3)
    x = torch.randn(BATCH, WIDTH)
    act_shape = (BATCH, 4 * WIDTH)

    def step(_: int) -> None:
        opt.zero_grad()
        if rank == 0:
            y = stage(x)
            dist.send(y.detach(), dst=1)
            grad = torch.empty(act_shape)
            dist.recv(grad, src=1)
            y.backward(grad)
        else:
            a = torch.empty(act_shape)
            dist.recv(a, src=0)
            a.requires_grad_(True)
            stage(a).square().mean().backward()
            dist.send(a.grad, dst=0)
        opt.step()
    _profiled(torch, rank, out, step)
    dist.barrier()


def _worker(rank: int, job: str, out: str, port: int) -> None:
    import torch
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)           # two ranks share the machine's cores
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        (_ddp if job == "ddp" else _pipe)(rank, Path(out))
    finally:
        dist.destroy_process_group()


def main() -> None:
    import torch.multiprocessing as mp
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "tests/fixtures/traces"))
    args = ap.parse_args()
    for port, job in ((29531, "ddp"), (29532, "pipe")):
        out = Path(args.out) / job
        out.mkdir(parents=True, exist_ok=True)
        mp.spawn(_worker, args=(job, str(out), port), nprocs=WORLD, join=True)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
