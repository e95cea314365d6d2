"""pytorch_add.py: the seeds' workload. Large fp32 tensors, repeated adds,
every result checked. --gb sets the working set (three tensors of gb/3)."""
import argparse
import time

import torch

from common import result, since_start

imported_s = since_start()  # the interpreter and torch

p = argparse.ArgumentParser()
p.add_argument("--gb", type=float, default=4.0)
p.add_argument("--iters", type=int, default=200)
p.add_argument("--seed", type=int, default=1)
a = p.parse_args()

n = int(a.gb * (1 << 30) / 4 / 3)
t0 = time.perf_counter()
x = torch.full((n,), float(a.seed), device="cuda")
first_s = since_start()  # + the CUDA context (under cushare: the connection, the grant)
y = torch.ones(n, device="cuda")
z = torch.zeros(n, device="cuda")
for i in range(a.iters):
    torch.add(x, y, out=z)
    x, z = z, x
torch.cuda.synchronize()
elapsed = time.perf_counter() - t0
expect = float(a.seed + a.iters)
ok = bool(torch.all(x == expect).item())
result(workload="pytorch_add", ok=ok, gb=a.gb, iters=a.iters, elapsed_s=elapsed,
       value=x[0].item(), expect=expect, imported_s=imported_s, first_s=first_s,
       result_s=since_start())
raise SystemExit(0 if ok else 1)
