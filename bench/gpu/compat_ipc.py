"""compat_ipc.py: CUDA IPC through torch.multiprocessing. The parent's
tensor is opened by a child with cuIpcOpenMemHandle, modified there and
checked here.

With --private-gb and --child-gb the two processes' memory does not fit the
GPU together: while the parent waits for the child (idle, so the scheduler
takes its lease back), the child's own tensor needs the room the parent's
private tensor holds. cushare must then swap the private tensor out and
keep the exported one in place: the child keeps using it, and both tensors
hold the right values at the end. Under cushare the parent's swap counters
(cushare_get_stats) are printed with the result.

Prints one JSON line; exit status 0 when it worked."""
import argparse
import ctypes
import json
import os
import time

import torch
import torch.multiprocessing as mp

GB = 1 << 30


def child(t, child_gb, rounds, q):
    try:
        x = None
        if child_gb:
            x = torch.full((int(child_gb * GB) // 4,), 3.0, device="cuda")
        for _ in range(rounds):
            t.add_(1)
            if x is not None:
                x.add_(1)
        torch.cuda.synchronize()
        ok = x is None or bool(torch.all(x == 3 + rounds).item())
        q.put("done" if ok else "child tensor wrong")
    except Exception as e:  # say how it failed rather than hang the parent
        q.put(repr(e)[:300])


class Stats(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint), ("device", ctypes.c_int), ("state", ctypes.c_int),
                ("reserved", ctypes.c_int)] + \
               [(n, ctypes.c_ulonglong) for n in (
                   "lease_id submissions grants revokes wait_ns drain_ns mem_used mem_peak "
                   "mem_limit allocs ooms mem_resident mem_swapped mem_reserved mem_pinned "
                   "swap_out_bytes swap_out_ns swap_outs swap_in_bytes swap_in_ns swap_ins "
                   "device_free device_total mem_unswappable").split()]


def cushare_stats():
    """The hook's counters for device 0, or None when not under cushare."""
    try:
        fn = ctypes.CDLL(None).cushare_get_stats
    except AttributeError:
        return None
    s = Stats()
    s.size = ctypes.sizeof(Stats)
    if fn(0, ctypes.byref(s)) != 0:
        return None
    return {"swap_out_bytes": s.swap_out_bytes, "swap_in_bytes": s.swap_in_bytes,
            "revokes": s.revokes, "mem_unswappable": s.mem_unswappable}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--share-gb", type=float, default=0.004)
    ap.add_argument("--private-gb", type=float, default=0)
    ap.add_argument("--child-gb", type=float, default=0)
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    mp.set_start_method("spawn")
    t = torch.zeros(int(a.share_gb * GB) // 4, device="cuda")
    priv = None
    if a.private_gb:
        priv = torch.full((int(a.private_gb * GB) // 4,), 2.0, device="cuda")
    torch.cuda.synchronize()
    q = mp.Queue()
    err, ok = "", False
    t0 = time.time()
    try:
        p = mp.Process(target=child, args=(t, a.child_gb, a.rounds, q))
        p.start()
        msg = q.get(timeout=300)
        p.join()
        err = "" if msg == "done" else msg
        ok = msg == "done" and bool(torch.all(t == a.rounds).item())
        if priv is not None and not bool(torch.all(priv == 2).item()):
            ok, err = False, "the private tensor changed"
    except Exception as e:  # the export itself may fail: say how
        ok, err = False, repr(e)[:300]
    print(json.dumps({"workload": "compat_ipc", "ok": ok, "error": err, "pid": os.getpid(),
                      "elapsed_s": round(time.time() - t0, 2), "share_gb": a.share_gb,
                      "private_gb": a.private_gb, "child_gb": a.child_gb,
                      "cushare": cushare_stats()}), flush=True)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
