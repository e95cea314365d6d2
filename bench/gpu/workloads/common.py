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


def since_start():
    """Seconds since this process started (the kernel's start time, to its
    clock tick: /proc/self/stat against /proc/uptime); None where /proc
    does not say. Lets a benchmark split a job's wall time into its start-up
    (interpreter, imports, CUDA context), its work and its exit."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
        return up - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


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


def wait_until(epoch):
    """Waits until time.time() reaches epoch (seconds since the epoch, as
    bench/lc/cs_lcbench's --start-at: processes that warmed up apart start
    their measured window together). Sleeps, then spins the last
    millisecond. Returns how late the call came (seconds, 0.0 if on time or
    epoch is 0) and says so on stderr when it came late."""
    if not epoch:
        return 0.0
    late = time.time() - epoch
    if late > 0:
        print(f"{os.path.basename(sys.argv[0])}: --start-at passed {late * 1e3:.0f} ms ago; "
              "starting now", file=sys.stderr, flush=True)
        return late
    while True:
        left = epoch - time.time()
        if left <= 0:
            return 0.0
        if left > 0.002:
            time.sleep(left - 0.001)


def timed_window(step, steps, warmup, seconds=0.0, start_at=0.0):
    """Runs step() warmup times (as timed_steps), waits for start_at
    (wait_until), then runs it `steps` times or, with seconds > 0, until that
    many seconds have passed since the start (at least once), synchronizing
    after every step.
    Returns (per-step seconds, the window's seconds, how late it started)."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    late = wait_until(start_at)
    times = []
    t_start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        times.append(t1 - t0)
        if (t1 - t_start >= seconds) if seconds > 0 else len(times) >= steps:
            break
    return times, time.perf_counter() - t_start, late


def percentile(sorted_values, q):
    """The q-quantile (0..1) of an ascending list, as summary() takes p99."""
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))]


def summary(times):
    times = sorted(times)
    return {
        "median_s": statistics.median(times),
        "p99_s": times[min(len(times) - 1, int(len(times) * 0.99))],
        "mean_s": sum(times) / len(times),
        "n": len(times),
    }


BALLAST_TENSOR = 1 << 28  # int32 elements per ballast tensor (1 GiB)
SLICE = 1 << 26           # elements made or compared at once (int64 temporaries: 512 MiB)


def _pattern(seed, tensor, start, n, device):
    """Elements start..start+n of ballast tensor `tensor`, below 2^31."""
    i = torch.arange(start, start + n, dtype=torch.int64, device=device)
    return ((i * 2654435761 + (seed * 1000003 + tensor) * 97) % 2147483647).to(torch.int32)


def make_ballast(gib, seed, device="cuda"):
    """gib GiB of int32 tensors (1 GiB each) holding a pattern derived from
    seed: memory a job holds all along, to make it large, checked at the end
    with ballast_intact (the same seed and device)."""
    tensors, left = [], int(gib * (1 << 30) / 4)
    while left > 0:
        t = torch.empty(min(BALLAST_TENSOR, left), dtype=torch.int32, device=device)
        for s0 in range(0, t.numel(), SLICE):
            m = min(SLICE, t.numel() - s0)
            t[s0:s0 + m] = _pattern(seed, len(tensors), s0, m, device)
        tensors.append(t)
        left -= t.numel()
    return tensors


def ballast_intact(tensors, seed, device="cuda"):
    for k, t in enumerate(tensors):
        for s0 in range(0, t.numel(), SLICE):
            m = min(SLICE, t.numel() - s0)
            if not torch.equal(t[s0:s0 + m], _pattern(seed, k, s0, m, device)):
                return False
    return True
