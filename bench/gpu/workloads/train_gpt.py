"""train_gpt.py: a GPT-2-small-sized transformer (from config, random
weights) trained on synthetic tokens, bf16 autocast. --layers/--hidden scale
it; --mem-gb pads the job's footprint with an extra resident tensor (to make
oversubscription scenarios) that is checked at the end. --seconds S trains
for S seconds instead of --steps steps, --start-at T (seconds since the
epoch) waits after the warm-up until T (jobs started apart measure one
window: bench/lc/torch.sh); with either, tokens_per_s and steps_per_s are
over that window (steps / window_s) instead of from the median step."""
import argparse
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from common import result, summary, timed_window

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=16)
p.add_argument("--seq", type=int, default=512)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--hidden", type=int, default=768)
p.add_argument("--steps", type=int, default=30)
p.add_argument("--warmup", type=int, default=5)
p.add_argument("--mem-gb", type=float, default=0.0)
p.add_argument("--seconds", type=float, default=0.0,
               help="train for this many seconds after the start instead of --steps")
p.add_argument("--start-at", type=float, default=0.0, metavar="EPOCH_SECONDS",
               help="after the warm-up, wait until then (0 = start at once)")
a = p.parse_args()

torch.manual_seed(0)
cfg = GPT2Config(n_layer=a.layers, n_embd=a.hidden, n_head=a.hidden // 64, n_positions=a.seq)
model = GPT2LMHeadModel(cfg).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
tok = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), device="cuda")
pad = None
if a.mem_gb > 0:
    pad = torch.full((int(a.mem_gb * (1 << 30) / 4),), 3.0, device="cuda")
losses = []


def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(tok, labels=tok).loss
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses.append(loss.detach())
    if pad is not None:
        pad.add_(1.0)


t0 = time.perf_counter()
times, window, late = timed_window(step, a.steps, a.warmup, a.seconds, a.start_at)
elapsed = time.perf_counter() - t0
l0, l1 = losses[0].item(), losses[-1].item()
ok = l1 == l1 and l1 < l0
if pad is not None:
    ok = ok and bool(torch.all(pad == 3.0 + len(losses)).item())  # one add per step, warm-up too
s = summary(times)
extra = {"tokens_per_s": a.batch * a.seq / s["median_s"]}
if a.seconds > 0 or a.start_at > 0:
    extra = {"tokens_per_s": a.batch * a.seq * len(times) / window, "steps": len(times),
             "steps_per_s": len(times) / window, "window_s": window, "late_s": late}
result(workload="train_gpt", ok=ok, **extra,
       loss_first=l0, loss_last=l1, elapsed_s=elapsed, mem_gb=a.mem_gb, **s)
raise SystemExit(0 if ok else 1)
