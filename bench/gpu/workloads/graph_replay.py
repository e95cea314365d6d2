"""graph_replay.py: a CUDA-graph workload. An MLP forward+backward step is
captured once with torch.cuda.graph and replayed; the replayed result must
equal the eager result of the same step bit for bit (same kernels, same
inputs). Prints the median time of --replays replays per measured step."""
import argparse

import torch

from common import result, summary, timed_steps

p = argparse.ArgumentParser()
p.add_argument("--width", type=int, default=4096)
p.add_argument("--batch", type=int, default=512)
p.add_argument("--replays", type=int, default=20)
p.add_argument("--steps", type=int, default=30)
p.add_argument("--warmup", type=int, default=5)
a = p.parse_args()

torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(a.width, a.width) for _ in range(4)]).cuda()
x = torch.randn(a.batch, a.width, device="cuda", requires_grad=False)


def fwd_bwd():
    model.zero_grad(set_to_none=False)
    out = model(x).square().mean()
    out.backward()
    return out


# Warm up on a side stream, as torch.cuda.graph requires, then capture.
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        fwd_bwd()
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    static_out = fwd_bwd()
eager = fwd_bwd().item()
eager_grad = model[0].weight.grad.clone()
g.replay()
torch.cuda.synchronize()
ok = (abs(static_out.item() - eager) <= 1e-5 * abs(eager)
      and torch.allclose(model[0].weight.grad, eager_grad, rtol=1e-4, atol=1e-6))


def step():
    for _ in range(a.replays):
        g.replay()


times = timed_steps(step, a.steps, a.warmup)
ok = ok and abs(static_out.item() - eager) <= 1e-5 * abs(eager)
result(workload="graph_replay", ok=bool(ok), replays=a.replays, **summary(times))
raise SystemExit(0 if ok else 1)
