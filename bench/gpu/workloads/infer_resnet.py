"""infer_resnet.py: ResNet-50 batch-1 inference latency loop (the
latency-critical job): --rate requests per second (0 = back to back),
--requests of them or, with --seconds S, as many as S seconds hold.

Requests go out at absolute deadlines (start + i / rate), so one that overruns
its period does not shift the ones after it. A request's latency is the time
from its actual start to torch.cuda.synchronize() returning: median_s/p99_s
(as always) and p50_ms/p99_ms/max_ms. sched_p50_ms/sched_p99_ms count from
the scheduled send time instead, so they include the wait behind an earlier
request that overran (behind: how many started over 1 ms late). busy_frac is
the sum of the latencies over the window's wall time: the fraction of time
this job keeps the GPU busy. --start-at T (seconds since the epoch): after
the warm-up, wait until T, so that jobs started apart measure one window
(bench/lc/torch.sh); late_s says how late the warm-up made it. --graph
captures the forward pass once in a CUDA graph and replays it per request,
as an inference server that cares for its latency does (torch.compile's
reduce-overhead mode): one launch instead of ~160, so the latency is the
GPU's and not the Python interpreter's scheduling jitter."""
import argparse
import time

import torch
import torchvision

from common import percentile, result, summary, wait_until

p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
p.add_argument("--requests", type=int, default=300, help="requests to send (without --seconds)")
p.add_argument("--seconds", type=float, default=0.0,
               help="send requests for this many seconds instead of --requests")
p.add_argument("--rate", type=float, default=0.0, help="requests per second (0 = back to back)")
p.add_argument("--warmup", type=int, default=20)
p.add_argument("--start-at", type=float, default=0.0, metavar="EPOCH_SECONDS",
               help="after the warm-up, wait until then (0 = start at once)")
p.add_argument("--graph", action="store_true", help="replay the forward pass as a CUDA graph")
a = p.parse_args()

CHECK_EVERY = 100  # compare an output with the reference this often (outside the timing)

torch.manual_seed(0)
model = torchvision.models.resnet50().cuda().eval().to(memory_format=torch.channels_last)
x = torch.randn(1, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
with torch.inference_mode():
    for _ in range(max(1, a.warmup)):
        ref = model(x)
    torch.cuda.synchronize()
    forward = lambda: model(x)  # noqa: E731
    if a.graph:
        # Captured on a side stream after its own warm-up (PyTorch's recipe:
        # the capture must not record the first-use allocations).
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = model(x)

        def forward():
            graph.replay()
            return static_out
        for _ in range(max(1, a.warmup)):
            forward()
        torch.cuda.synchronize()
    late = wait_until(a.start_at)
    period = 1.0 / a.rate if a.rate > 0 else 0.0
    lat, sched_lat = [], []
    mismatches = behind = 0
    t_start = time.perf_counter()
    end = t_start + a.seconds
    while True:
        i = len(lat)
        due = t_start + i * period
        if a.seconds > 0:
            if i and (due if period else time.perf_counter()) >= end:
                break
        elif i >= a.requests:
            break
        if period:
            left = due - time.perf_counter()
            if left > 0.002:
                time.sleep(left - 0.001)
            while time.perf_counter() < due:
                pass
        t0 = time.perf_counter()
        if not period:
            due = t0
        elif t0 - due > 1e-3:
            behind += 1
        out = forward()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        lat.append(t1 - t0)
        sched_lat.append(t1 - due)
        if len(lat) % CHECK_EVERY == 0 and not torch.allclose(out, ref, rtol=1e-3, atol=1e-3):
            mismatches += 1
    elapsed = time.perf_counter() - t_start
    ok = bool(torch.allclose(out, ref, rtol=1e-3, atol=1e-3)) and mismatches == 0
s = summary(lat)
ms = sorted(sched_lat)
result(workload="infer_resnet", ok=ok, **s,
       p50_ms=s["median_s"] * 1e3, p99_ms=s["p99_s"] * 1e3, max_ms=max(lat) * 1e3,
       sched_p50_ms=percentile(ms, 0.5) * 1e3, sched_p99_ms=percentile(ms, 0.99) * 1e3,
       busy_frac=sum(lat) / elapsed, elapsed_s=elapsed, rate=a.rate, behind=behind,
       mismatches=mismatches, late_s=late, graph=a.graph)
raise SystemExit(0 if ok else 1)
