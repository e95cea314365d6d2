"""infer_resnet.py: ResNet-50 batch-1 inference latency loop (the
latency-critical job): --rate requests per second (0 = back to back)."""
import argparse
import time

import torch
import torchvision

from common import result, summary

p = argparse.ArgumentParser()
p.add_argument("--requests", type=int, default=300)
p.add_argument("--rate", type=float, default=0.0)
p.add_argument("--warmup", type=int, default=20)
a = p.parse_args()

torch.manual_seed(0)
model = torchvision.models.resnet50().cuda().eval().to(memory_format=torch.channels_last)
x = torch.randn(1, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
with torch.inference_mode():
    for _ in range(a.warmup):
        ref = model(x)
    torch.cuda.synchronize()
    lat = []
    period = 1.0 / a.rate if a.rate > 0 else 0.0
    nxt = time.perf_counter()
    for _ in range(a.requests):
        if period:
            while time.perf_counter() < nxt:
                pass
            nxt += period
        t0 = time.perf_counter()
        out = model(x)
        torch.cuda.synchronize()
        lat.append(time.perf_counter() - t0)
ok = bool(torch.allclose(out, ref, rtol=1e-3, atol=1e-3))
result(workload="infer_resnet", ok=ok, **summary(lat))
raise SystemExit(0 if ok else 1)
