#!/usr/bin/env python3
"""nvml_xtab_gen.py: the trampolines of bench/gpu/nvml_xtab.c (one function
per table and entry, each forwarding six integer arguments to call())."""
MAXT, MAXE = 2, 288
for t in range(MAXT):
    for i in range(MAXE):
        print(f"static long tr_{t}_{i}(long a, long b, long c, long d, long e, long f)"
              f" {{ return call({t}, {i}, a, b, c, d, e, f); }}")
print("static const fn6 tramp[MAXT][MAXE] = {")
for t in range(MAXT):
    print("    {" + ", ".join(f"tr_{t}_{i}" for i in range(MAXE)) + "},")
print("};")
