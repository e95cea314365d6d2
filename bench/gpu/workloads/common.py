"""common.py: helpers shared by the GPU workloads (timing, results, stats)."""
import json
import os
import statistics
import sys
import time

import torch


def result(**kw):
    """Prints one JSON line (the workloads' only stdout contract) and flushes."""
    kw.setdefault("pid", os.getpid())
    kw.setdefault("name", os.environ.get("CUSHARE_NAME", os.path.basename(sys.argv[0])))
    print(json.dumps(kw), flush=True)


def timed_steps(step, steps, warmup):
    """Runs step() warmup+steps times; returns per-step seconds (after warmup)."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def summary(times):
    times = sorted(times)
    return {
        "median_s": statistics.median(times),
        "p99_s": times[min(len(times) - 1, int(len(times) * 0.99))],
        "mean_s": sum(times) / len(times),
        "n": len(times),
    }
