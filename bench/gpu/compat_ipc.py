"""compat_ipc.py: CUDA IPC through torch.multiprocessing (the parent's
tensor is opened by a child with cuIpcOpenMemHandle, modified there and
checked here). Prints one JSON line; exit status 0 when it worked."""
import json
import os

import torch
import torch.multiprocessing as mp


def child(t, q):
    t.add_(1)
    torch.cuda.synchronize()
    q.put("done")


if __name__ == "__main__":
    mp.set_start_method("spawn")
    t = torch.zeros(1 << 20, device="cuda")
    q = mp.Queue()
    err = ""
    try:
        p = mp.Process(target=child, args=(t, q))
        p.start()
        msg = q.get(timeout=120)
        p.join()
        ok = msg == "done" and bool(torch.all(t == 1).item())
    except Exception as e:  # the export itself may fail: say how
        ok, err = False, repr(e)[:300]
    print(json.dumps({"workload": "compat_ipc", "ok": ok, "error": err, "pid": os.getpid()}),
          flush=True)
    raise SystemExit(0 if ok else 1)
