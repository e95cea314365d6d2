"""smoke_cupy.py: CuPy under libcushare.so (it reaches the driver through
dlopen + dlsym of libcuda and through cudart): allocation from its pool, an
elementwise operation, a raw CUDA kernel, all checked."""
import ctypes
import sys

import cupy as cp

ok = True


def check(name, cond, detail=""):
    global ok
    print("%-40s %s %s" % (name, "ok" if cond else "FAIL", detail), flush=True)
    ok = ok and bool(cond)


a = cp.arange(1 << 20, dtype=cp.float32)
b = a * 2 + 1
check("elementwise", float(b[12345]) == 12345 * 2 + 1)
k = cp.RawKernel(r'''
extern "C" __global__ void twice(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}''', "twice")
y = cp.empty_like(a)
k(((a.size + 255) // 256,), (256,), (a, y, cp.int32(a.size)))
check("raw kernel", bool(cp.all(y == 2 * a)))
lib = ctypes.CDLL(None)
check("libcushare.so loaded", hasattr(lib, "cushare_get_stats"))
sys.exit(0 if ok else 1)
