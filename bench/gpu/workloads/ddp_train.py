"""ddp_train.py: a torch.distributed NCCL data-parallel job, one rank per GPU
(issue 23), every result checked.

The parent process touches no GPU; it spawns --ranks processes (the spawn
start method: fresh interpreters that inherit the environment, LD_PRELOAD
included, so each rank is its own cushare client). Each rank:
  - checks an all_reduce of known values (rank + 1 summed over the ranks);
  - trains a residual MLP (--layers x --width, bf16 autocast) under
    DistributedDataParallel for --steps steps on its own fixed batch: its loss
    must stay finite and fall;
  - at the end all ranks' parameters must be bit-equal (DDP's gradient
    all-reduce keeps them so: a lost or corrupted all-reduce shows here);
  - --ballast-gb G on rank --ballast-rank holds G GiB of patterned memory all
    along, checked at the end (to oversubscribe that rank's GPU beside
    another job).
Rank 0 prints one JSON line (per-step times after --warmup steps, every
rank's verdict); exit status 1 if any rank failed."""
import argparse
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ballast_intact, make_ballast, result, summary  # noqa: E402


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--ballast-gb", type=float, default=0.0)
    p.add_argument("--ballast-rank", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


class Block(torch.nn.Module):
    def __init__(self, w):
        super().__init__()
        self.norm = torch.nn.LayerNorm(w)
        self.fc1 = torch.nn.Linear(w, w)
        self.fc2 = torch.nn.Linear(w, w)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


def train(rank, a, port, verdicts):
    os.environ.setdefault("CUSHARE_NAME", f"ddp-rank{rank}")
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=a.ranks, device_id=dev)
    errors = []
    bal = make_ballast(a.ballast_gb, a.seed + rank, dev) if rank == a.ballast_rank else []
    probe = torch.full((1 << 20,), float(rank + 1), device=dev)
    dist.all_reduce(probe)
    if not torch.all(probe == a.ranks * (a.ranks + 1) / 2).item():
        errors.append("all_reduce of known values is wrong")

    torch.manual_seed(a.seed)  # the same initial weights on every rank
    model = torch.nn.Sequential(*[Block(a.width) for _ in range(a.layers)],
                                torch.nn.Linear(a.width, 10)).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.02, momentum=0.9)
    g = torch.Generator(device="cpu").manual_seed(a.seed * 100 + rank)
    x = torch.randn(a.batch, a.width, generator=g).to(dev)
    y = torch.randint(0, 10, (a.batch,), generator=g).to(dev)
    losses, times = [], []
    t_train = time.perf_counter()
    for step in range(a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())  # synchronizes: the step's time is real
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    train_s = time.perf_counter() - t_train
    if not all(v == v and abs(v) < 1e9 for v in losses):
        errors.append("loss not finite")
    elif not min(losses[-10:]) < losses[0] * 0.5:
        errors.append(f"loss did not fall ({losses[0]:.3f} -> {min(losses[-10:]):.3f})")

    flat = torch.cat([p.detach().float().flatten() for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(a.ranks)]
    dist.all_gather(gathered, flat)
    if not all(torch.equal(gathered[0], t) for t in gathered[1:]):
        errors.append("parameters differ between ranks")
    if bal and not ballast_intact(bal, a.seed + rank, dev):
        errors.append("ballast differs")
    verdicts[rank] = {"rank": rank, "errors": errors, "loss_first": losses[0],
                      "loss_last": losses[-1], "train_s": train_s, **summary(times)}
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    a = parse()
    assert torch.cuda.device_count() >= a.ranks, f"needs {a.ranks} GPUs"
    t0 = time.perf_counter()
    with mp.Manager() as m:
        verdicts = m.dict()
        failed = None
        try:
            mp.spawn(train, args=(a, free_port(), verdicts), nprocs=a.ranks, join=True)
        except Exception as e:  # a rank raised or died: say which, in the JSON
            failed = str(e).strip().splitlines()[-1] if str(e).strip() else repr(e)
        ranks = [verdicts.get(r, {"rank": r, "errors": ["no verdict"]}) for r in range(a.ranks)]
    errors = [f"rank {v['rank']}: {e}" for v in ranks for e in v["errors"]]
    if failed:
        errors.append(f"spawn: {failed}")
    ok = not errors
    r0 = ranks[0]
    result(workload="ddp_train", ok=ok, errors=errors, ranks=a.ranks, steps=a.steps,
           median_s=r0.get("median_s"), p99_s=r0.get("p99_s"), train_s=r0.get("train_s"),
           loss_first=r0.get("loss_first"), loss_last=r0.get("loss_last"),
           ballast_gb=a.ballast_gb, ballast_rank=a.ballast_rank,
           elapsed_s=time.perf_counter() - t0, per_rank=ranks)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
