"""train_resnet.py: ResNet-50 training on synthetic images (torchvision,
random init), bf16 autocast. Prints per-step timing and a loss check.
--seconds S trains for S seconds instead of --steps steps, --start-at T
(seconds since the epoch) waits after the warm-up until T (jobs started apart
measure one window: bench/lc/torch.sh); with either, imgs_per_s and
steps_per_s are over that window (steps / window_s) instead of from the
median step."""
import argparse

import torch
import torchvision

from common import result, summary, timed_window

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=64)
p.add_argument("--steps", type=int, default=50)
p.add_argument("--warmup", type=int, default=10)
p.add_argument("--seconds", type=float, default=0.0,
               help="train for this many seconds after the start instead of --steps")
p.add_argument("--start-at", type=float, default=0.0, metavar="EPOCH_SECONDS",
               help="after the warm-up, wait until then (0 = start at once)")
a = p.parse_args()

torch.manual_seed(0)
torch.backends.cudnn.benchmark = False  # same algorithms in every run: comparable step times
model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(a.batch, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
y = torch.randint(0, 1000, (a.batch,), device="cuda")
losses = []


def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses.append(loss.detach())


times, window, late = timed_window(step, a.steps, a.warmup, a.seconds, a.start_at)
l0, l1 = losses[0].item(), losses[-1].item()
ok = l1 == l1 and l1 < l0  # finite and learning on a fixed batch
s = summary(times)
extra = {"imgs_per_s": a.batch / s["median_s"]}
if a.seconds > 0 or a.start_at > 0:
    extra = {"imgs_per_s": a.batch * len(times) / window, "steps": len(times),
             "steps_per_s": len(times) / window, "window_s": window, "late_s": late}
result(workload="train_resnet", ok=ok, batch=a.batch, **extra,
       loss_first=l0, loss_last=l1, **s)
raise SystemExit(0 if ok else 1)
