"""smoke_torch.py: PyTorch under libcushare.so, checked step by step.

Run with LD_PRELOAD=build/lib/libcushare.so (and optionally
CUSHARE_MEM_LIMIT). Prints one line per check and exits non-zero on the
first failure. Used by bench/gpu/run.sh.
"""
import ctypes
import os
import sys

import torch

ok = True


def check(name, cond, detail=""):
    global ok
    print("%-42s %s %s" % (name, "ok" if cond else "FAIL", detail), flush=True)
    ok = ok and bool(cond)


class Stats(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint), ("device", ctypes.c_int), ("state", ctypes.c_int),
                ("reserved", ctypes.c_int)] + [(n, ctypes.c_ulonglong) for n in (
                    "lease_id", "submissions", "grants", "revokes", "wait_ns", "drain_ns",
                    "mem_used", "mem_peak", "mem_limit", "allocs", "ooms", "mem_resident",
                    "mem_swapped", "mem_reserved", "mem_pinned", "swap_out_bytes", "swap_out_ns",
                    "swap_outs", "swap_in_bytes", "swap_in_ns", "swap_ins", "device_free",
                    "device_total")]


def stats():
    lib = ctypes.CDLL(None)
    s = Stats()
    s.size = ctypes.sizeof(Stats)
    if not hasattr(lib, "cushare_get_stats") or lib.cushare_get_stats(0, ctypes.byref(s)) != 0:
        return None
    return s


hooked = stats() is not None
check("libcushare.so loaded", hooked or os.environ.get("CUSHARE_EXPECT_NATIVE") == "1")

x = torch.randn(2048, 2048, device="cuda")
y = (x @ x).sum().item()
check("matmul runs", y == y, "sum=%.3g" % y)
s0 = stats()
if hooked:
    check("launches pass the gate", s0.submissions > 0, "submissions=%d" % s0.submissions)
    check("allocations tracked", s0.mem_used > 0, "mem_used=%d" % s0.mem_used)

free, total = torch.cuda.mem_get_info()
limit = os.environ.get("CUSHARE_MEM_LIMIT")
if limit and hooked:
    lim = s0.mem_limit
    check("mem_get_info shows the quota", total == lim, "total=%d limit=%d" % (total, lim))
    try:
        torch.empty(int(lim * 1.2) // 4, dtype=torch.float32, device="cuda")
        check("over-quota allocation raises", False)
    except torch.OutOfMemoryError:
        check("over-quota allocation raises OutOfMemoryError", True)
else:
    check("mem_get_info", total > 0, "free=%d total=%d" % (free, total))

# CUDA graph capture and replay.
static_in = torch.randn(1024, device="cuda")
static_out = torch.empty_like(static_in)
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        static_out.copy_(static_in * 2 + 1)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    static_out.copy_(static_in * 2 + 1)
static_in.copy_(torch.arange(1024, device="cuda", dtype=torch.float32))
g.replay()
torch.cuda.synchronize()
exp = torch.arange(1024, device="cuda", dtype=torch.float32) * 2 + 1
check("CUDA graph replays correctly", torch.equal(static_out, exp))

# A few training steps of a small conv net, bf16 autocast.
model = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(32 * 30 * 30, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(5):
    inp = torch.randn(16, 3, 32, 32, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(inp).float().pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
torch.cuda.synchronize()
check("training steps", loss.item() == loss.item(), "loss=%.4f" % loss.item())
if hooked:
    s1 = stats()
    print("cushare stats: submissions=%d allocs=%d mem_used=%d peak=%d state=%d" %
          (s1.submissions, s1.allocs, s1.mem_used, s1.mem_peak, s1.state))
sys.exit(0 if ok else 1)
