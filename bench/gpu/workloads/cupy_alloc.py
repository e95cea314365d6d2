"""cupy_alloc.py: CuPy's own path to the driver (dlopen + dlsym of libcuda,
its memory pool, NVRTC-compiled raw kernels). Rounds of many allocations of
mixed sizes, an elementwise kernel and a RawKernel over each, every result
checked. Prints one JSON line like the torch workloads."""
import argparse
import json
import os
import time

import cupy as cp

p = argparse.ArgumentParser()
p.add_argument("--rounds", type=int, default=200)
p.add_argument("--arrays", type=int, default=32)
a = p.parse_args()

twice = cp.RawKernel(r'''
extern "C" __global__ void twice(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i] + 1.0f;
}''', "twice")
ok = True
cp.cuda.Device().synchronize()
t0 = time.perf_counter()
for r in range(a.rounds):
    xs = [cp.arange((1 << (10 + (i + r) % 12)), dtype=cp.float32) for i in range(a.arrays)]
    for x in xs:
        y = cp.empty_like(x)
        twice(((x.size + 255) // 256,), (256,), (x, y, cp.int32(x.size)))
        z = y - x  # = x + 1
        if r % 50 == 0:
            ok = ok and bool(cp.all(z == x + 1))
    del xs
    cp.get_default_memory_pool().free_all_blocks()
cp.cuda.Device().synchronize()
elapsed = time.perf_counter() - t0
print(json.dumps({"workload": "cupy_alloc", "ok": ok, "elapsed_s": elapsed, "pid": os.getpid()}),
      flush=True)
raise SystemExit(0 if ok else 1)
