"""multi_gpu.py: one process on two GPUs (issue 23), every result checked.

In order:
  1. peer copies: a seeded tensor on cuda:0 goes to cuda:1 and back
     (device-to-device, through peer access where the GPUs have it) and
     must come back bit-equal; the same from cuda:1 to cuda:0.
  2. a model split across the two GPUs (first half of an MLP on cuda:0,
     second half on cuda:1, activations and gradients crossing between
     them) trained --steps steps on a fixed batch, side by side with the
     same model, same initial weights and data, on cuda:0 alone: the two
     losses must agree step by step (TF32 off: the same kernels on the same
     GPU model; rtol 1e-3) and fall.
  3. for --duration seconds one thread per GPU runs a fixed GEMM loop
     (synchronizing each step) and records when each step ended: per GPU the
     steps done, the longest gap between two steps, and how many steps GPU 0
     made while GPU 1 was stalled (gaps over --stall-s) and the other way
     round. This is the measure of "a GPU of the process keeps running while
     its other GPU's lease is away" (for instance while another job swaps
     that GPU's memory). Every GEMM's result is compared with the first.
  --ballast0-gb/--ballast1-gb: patterned memory held on that GPU all along
  (checked at the end), to make the job large on one GPU.
Prints one JSON line; exit status 1 if any check failed."""
import argparse
import threading
import time

import torch

from common import ballast_intact, make_ballast, result

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=200)
p.add_argument("--duration", type=float, default=20.0)
p.add_argument("--dim", type=int, default=4096)
p.add_argument("--gemm", type=int, default=8192)
p.add_argument("--stall-s", type=float, default=0.5)
p.add_argument("--ballast0-gb", type=float, default=0.0)
p.add_argument("--ballast1-gb", type=float, default=0.0)
p.add_argument("--seed", type=int, default=1)
p.add_argument("--no-peer", action="store_true",
               help="skip 1 and 2: the GPUs used independently, peer access never enabled")
a = p.parse_args()

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
errors = []
t_start = time.perf_counter()
assert torch.cuda.device_count() >= 2, "needs two GPUs"
D0, D1 = torch.device("cuda:0"), torch.device("cuda:1")


bal0 = make_ballast(a.ballast0_gb, a.seed, D0)
bal1 = make_ballast(a.ballast1_gb, a.seed + 1, D1)

peer = torch.cuda.can_device_access_peer(0, 1)
losses, worst, split_s = [float("nan")], 0.0, 0.0
if not a.no_peer:
    # 1. Peer copies, both directions.
    g = torch.Generator(device="cpu").manual_seed(a.seed)
    host = torch.randn(64 << 20 >> 2, generator=g)
    x0 = host.to(D0)
    x1 = x0.to(D1)
    back0 = x1.to(D0)
    y1 = host.to(D1) * 2
    y0 = y1.to(D0)
    torch.cuda.synchronize(D0)
    torch.cuda.synchronize(D1)
    if not torch.equal(back0.cpu(), host) or not torch.equal(x1.cpu(), host):
        errors.append("peer copy 0->1->0 differs")
    if not torch.equal(y0.cpu(), host * 2):
        errors.append("peer copy 1->0 differs")
    del x0, x1, back0, y0, y1


    # 2. A model split across the GPUs against the same model on cuda:0.
    def mlp(dim, seed):
        torch.manual_seed(seed)
        return (torch.nn.Sequential(torch.nn.Linear(dim, dim), torch.nn.ReLU(), torch.nn.Linear(dim, dim)),
                torch.nn.Sequential(torch.nn.Linear(dim, dim), torch.nn.ReLU(), torch.nn.Linear(dim, 16)))


    first, second = mlp(a.dim, a.seed)
    rf, rs = mlp(a.dim, a.seed)
    first, second = first.to(D0), second.to(D1)
    rf, rs = rf.to(D0), rs.to(D0)
    xin = torch.randn(256, a.dim, generator=g).to(D0)
    target = torch.randint(0, 16, (256,), generator=g)
    opt = torch.optim.SGD(list(first.parameters()) + list(second.parameters()), lr=0.05)
    ropt = torch.optim.SGD(list(rf.parameters()) + list(rs.parameters()), lr=0.05)
    losses, rlosses = [], []
    t_split = time.perf_counter()
    for step in range(a.steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(second(first(xin).to(D1)), target.to(D1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    split_s = time.perf_counter() - t_split
    for step in range(a.steps):
        ropt.zero_grad()
        loss = torch.nn.functional.cross_entropy(rs(rf(xin)), target.to(D0))
        loss.backward()
        ropt.step()
        rlosses.append(loss.item())
    if not all(l == l and abs(l) < 1e9 for l in losses):
        errors.append("split model: loss not finite")
    elif not losses[-1] < losses[0] * 0.9:
        errors.append(f"split model: loss did not fall ({losses[0]:.4f} -> {losses[-1]:.4f})")
    worst = max(abs(l - r) / max(abs(r), 1e-6) for l, r in zip(losses, rlosses))
    if worst > 1e-3:
        errors.append(f"split model differs from one GPU: worst relative loss difference {worst:.2e}")
    del first, second, rf, rs, opt, ropt, xin


# 3. Both GPUs busy at once, one thread each.
def gemm_loop(dev, began, ends, stop, bad):
    torch.cuda.set_device(dev)
    gg = torch.Generator(device="cpu").manual_seed(a.seed + dev.index)
    m = torch.randn(a.gemm, a.gemm, generator=gg).to(dev, torch.bfloat16)
    ref = m @ m
    out = torch.empty_like(ref)
    torch.cuda.synchronize(dev)
    began.append(time.perf_counter())
    while not stop.is_set():
        torch.matmul(m, m, out=out)
        torch.cuda.synchronize(dev)
        ends.append(time.perf_counter())
        if len(ends) % 50 == 0 and not torch.equal(out, ref):
            bad.append(f"gemm on {dev} differs from its first result")
            return


def stalls(began, ends, ts):
    """Gaps between consecutive steps within the loop's window: from the
    thread's first step start to ts, when the loops were told to stop. (Not
    to when the threads were joined: a thread that finished on time would
    show the other's wait as its own last gap.)"""
    pts = began[:1] + [e for e in ends if e <= ts] + [ts]
    return [(pts[i], pts[i + 1]) for i in range(len(pts) - 1)]


def steps_within(ends, spans):
    return sum(1 for e in ends if any(s < e < t for s, t in spans))


ends0, ends1, began0, began1, bad = [], [], [], [], []
stop = threading.Event()
threads = [threading.Thread(target=gemm_loop, args=(D0, began0, ends0, stop, bad)),
           threading.Thread(target=gemm_loop, args=(D1, began1, ends1, stop, bad))]
t0 = time.perf_counter()
for t in threads:
    t.start()
time.sleep(a.duration)
ts = time.perf_counter()
stop.set()
for t in threads:
    t.join()
t1 = time.perf_counter()
errors += bad
if not began0 or not began1:
    errors.append("a GPU's GEMM loop did not start before the stop")
    began0, began1 = began0 or [ts], began1 or [ts]
gaps0, gaps1 = stalls(began0, ends0, ts), stalls(began1, ends1, ts)
stall0 = [s for s in gaps0 if s[1] - s[0] > a.stall_s]
stall1 = [s for s in gaps1 if s[1] - s[0] > a.stall_s]
if not ends0 or not ends1:
    errors.append("a GPU made no GEMM step")

if not ballast_intact(bal0, a.seed, D0) or not ballast_intact(bal1, a.seed + 1, D1):
    errors.append("ballast differs")
ok = not errors
result(workload="multi_gpu", ok=ok, errors=errors, peer_access=peer,
       split_steps=a.steps, split_s=split_s, loss_first=losses[0], loss_last=losses[-1],
       split_vs_one_gpu_worst_rel=worst,
       gemm_steps0=sum(1 for e in ends0 if e <= ts), gemm_steps1=sum(1 for e in ends1 if e <= ts),
       duration_s=ts - t0, setup0_s=began0[0] - t0, setup1_s=began1[0] - t0, join_s=t1 - ts,
       max_gap0_s=max(e - s for s, e in gaps0), max_gap1_s=max(e - s for s, e in gaps1),
       stalled0_s=sum(e - s for s, e in stall0), stalled1_s=sum(e - s for s, e in stall1),
       steps0_while_1_stalled=steps_within(ends0, stall1),
       steps1_while_0_stalled=steps_within(ends1, stall0),
       ballast_gb=[a.ballast0_gb, a.ballast1_gb], elapsed_s=time.perf_counter() - t_start)
raise SystemExit(0 if ok else 1)
