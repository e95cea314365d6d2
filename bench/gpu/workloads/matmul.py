"""matmul.py: a cuBLAS-heavy loop (bf16 GEMMs), optionally spread over
several streams with different priorities (--streams N): the multi-stream
workload. Each stream multiplies its own matrices; a sampled block of every
result is checked against an fp32 reference."""
import argparse

import torch

from common import result, summary, timed_steps

p = argparse.ArgumentParser()
p.add_argument("--n", type=int, default=8192)
p.add_argument("--streams", type=int, default=1)
p.add_argument("--per-step", type=int, default=10, help="GEMMs per stream per step")
p.add_argument("--steps", type=int, default=20)
p.add_argument("--warmup", type=int, default=3)
a = p.parse_args()

torch.manual_seed(0)
lo, hi = torch.cuda.Stream.priority_range() if hasattr(torch.cuda.Stream, "priority_range") else (0, -1)
streams = [torch.cuda.Stream(priority=(hi if i == 0 else lo)) for i in range(a.streams)]
mats = [(torch.randn(a.n, a.n, device="cuda", dtype=torch.bfloat16),
         torch.randn(a.n, a.n, device="cuda", dtype=torch.bfloat16)) for _ in streams]
outs = [torch.empty(a.n, a.n, device="cuda", dtype=torch.bfloat16) for _ in streams]
main = torch.cuda.current_stream()


def step():
    for s, (x, y), o in zip(streams, mats, outs):
        s.wait_stream(main)
        with torch.cuda.stream(s):
            for _ in range(a.per_step):
                torch.matmul(x, y, out=o)
    for s in streams:
        main.wait_stream(s)


times = timed_steps(step, a.steps, a.warmup)
ok = True
for (x, y), o in zip(mats, outs):
    ref = x[:64].float() @ y[:, :64].float()
    ok = ok and torch.allclose(o[:64, :64].float(), ref, rtol=2e-2, atol=2e-1 * a.n ** 0.5 / 16)
s = summary(times)
flops = 2 * a.n ** 3 * a.per_step * a.streams
result(workload="matmul", ok=bool(ok), streams=a.streams, tflops=flops / s["median_s"] / 1e12, **s)
raise SystemExit(0 if ok else 1)
