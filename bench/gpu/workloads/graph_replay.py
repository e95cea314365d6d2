"""graph_replay.py: a CUDA-graph workload. An MLP forward+backward step is
captured once with torch.cuda.graph and replayed; the replayed result must
equal the eager result of the same step bit for bit (same kernels, same
inputs). Prints the median time of --replays replays per measured step.

--ballast-gb N adds N GiB of int32 tensors holding a pattern derived from
--seed, allocated before the capture and compared with the pattern at the
end: several instances then oversubscribe the GPU (bench/gpu/run.sh,
section graphs), and a graph replayed after its job's memory came back
from the host must find every byte where it was."""
import argparse

import torch

from common import ballast_intact, make_ballast, result, summary, timed_steps

p = argparse.ArgumentParser()
p.add_argument("--width", type=int, default=4096)
p.add_argument("--batch", type=int, default=512)
p.add_argument("--replays", type=int, default=20)
p.add_argument("--steps", type=int, default=30)
p.add_argument("--warmup", type=int, default=5)
p.add_argument("--ballast-gb", type=float, default=0.0)
p.add_argument("--seed", type=int, default=1)
a = p.parse_args()

ballast = make_ballast(a.ballast_gb, a.seed)
torch.cuda.synchronize()
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
intact = ballast_intact(ballast, a.seed)
result(workload="graph_replay", ok=bool(ok and intact), replays=a.replays,
       ballast_gb=a.ballast_gb, ballast_intact=intact, **summary(times))
ok = ok and intact
raise SystemExit(0 if ok else 1)
