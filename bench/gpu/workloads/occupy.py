"""occupy.py: holds GPU memory outside cushare, so that the GPU looks as
small as another one (bench/gpu/run.sh's OVERSUB_GPU_MB: issue 20's H100
scenarios on an H200, whose 141 GB would fit them).

--take-mb N: takes N MiB of the driver's memory, its own CUDA context
included, as nvidia-smi counts used memory (what the other processes then
cannot have): the context first, then 1 GiB tensors, then one tensor of
the rest rounded down to 2 MiB (the caching allocator's granule). Prints one
JSON line when it holds them (took_mb, free_mb: the GPU's free memory
then), and holds them until it is killed. Run it natively, not under
cushare: it stands for memory the scheduler does not manage, which the
daemon is told of with mem_reserve_mb."""
import argparse
import ctypes
import signal
import subprocess
import sys
import time

import torch

from common import result


def used_mb(dev):
    """The GPU's used and free memory in MiB, as nvidia-smi reports them."""
    out = subprocess.run(["nvidia-smi", "-i", str(dev), "--query-gpu=memory.used,memory.free",
                          "--format=csv,noheader,nounits"],
                         check=True, capture_output=True, text=True).stdout
    used, free = (int(v) for v in out.strip().split(","))
    return used, free


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--take-mb", type=int, required=True)
    p.add_argument("--device", type=int, default=0)
    a = p.parse_args()
    # Gone with its parent (PR_SET_PDEATHSIG): a benchmark killed by its
    # timeout must not leave the GPU small for the next one.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
    u0, _ = used_mb(a.device)
    torch.cuda.set_device(a.device)
    held = [torch.empty(1, dtype=torch.uint8, device="cuda")]  # the context
    torch.cuda.synchronize()
    used, _ = used_mb(a.device)
    while a.take_mb - (used - u0) >= 1024:
        held.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))
        used += 1024
    rest = (a.take_mb - (used_mb(a.device)[0] - u0)) // 2 * 2
    if rest > 0:
        held.append(torch.empty(rest << 20, dtype=torch.uint8, device="cuda"))
    torch.cuda.synchronize()
    used, free = used_mb(a.device)
    took = used - u0
    ok = abs(took - a.take_mb) <= 64
    result(workload="occupy", ok=ok, take_mb=a.take_mb, took_mb=took, free_mb=free)
    if not ok:
        print(f"occupy.py: took {took} MiB, asked {a.take_mb}", file=sys.stderr, flush=True)
        raise SystemExit(1)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
