"""nvml_job.py: what a job sees of its GPU through CUDA and NVML (issue 22).

Allocates --gb GiB on cuda:0 (patterned), then prints one JSON line with
torch.cuda.mem_get_info and NVML's memory info for the same GPU, read in
this process through ctypes (libnvidia-ml.so.1 loaded as pynvml loads it:
CDLL, then nvmlInit_v2, nvmlDeviceGetHandleByIndex_v2,
nvmlDeviceGetMemoryInfo and nvmlDeviceGetComputeRunningProcesses_v3), and
pynvml's answer too if pynvml is installed. Then holds the memory for
--hold seconds (for nvidia-smi to look at it from outside) and checks it.
"""
import argparse
import ctypes
import json
import os
import sys
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--gb", type=float, default=4.0)
p.add_argument("--hold", type=float, default=20.0)
a = p.parse_args()


class Mem(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class Proc(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong),
                ("gi", ctypes.c_uint), ("ci", ctypes.c_uint)]


def nvml_view():
    lib = ctypes.CDLL("libnvidia-ml.so.1")
    assert lib.nvmlInit_v2() == 0
    h = ctypes.c_void_p()
    assert lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)) == 0
    m = Mem()
    assert lib.nvmlDeviceGetMemoryInfo(h, ctypes.byref(m)) == 0
    n = ctypes.c_uint(64)
    procs = (Proc * 64)()
    r = lib.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), procs)
    plist = [(procs[i].pid, procs[i].used) for i in range(n.value)] if r == 0 else f"rc {r}"
    return {"total": m.total, "free": m.free, "used": m.used, "procs": plist}


def pynvml_view():
    try:
        import pynvml
    except ImportError:
        return None
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    m = pynvml.nvmlDeviceGetMemoryInfo(h)
    return {"total": m.total, "free": m.free, "used": m.used}


x = torch.full((int(a.gb * (1 << 30)) // 4,), 7.0, device="cuda:0")
torch.cuda.synchronize()
free, total = torch.cuda.mem_get_info(0)
out = {"workload": "nvml_job", "pid": os.getpid(), "torch_free": free, "torch_total": total,
       "nvml": nvml_view(), "pynvml": pynvml_view()}
print(json.dumps(out), flush=True)
time.sleep(a.hold)
ok = bool((x == 7.0).all().item())
print(json.dumps({"workload": "nvml_job", "ok": ok}), flush=True)
sys.exit(0 if ok else 1)
