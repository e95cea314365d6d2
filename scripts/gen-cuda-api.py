#!/usr/bin/env python3
"""gen-cuda-api.py: derive the driver API's versioned entry-point table.

cuGetProcAddress resolves (name, cudaVersion, flags) to an exported symbol:
"cuMemAlloc" at 3020+ is cuMemAlloc_v2, with the per-thread-stream flag
"cuLaunchKernel" is cuLaunchKernel_ptsz, and so on. NVIDIA publishes the
version each variant appeared in as the PFN typedef names of cudaTypedefs.h
(PFN_cuMemAlloc_v3020, PFN_cuLaunchKernel_v7000_ptsz); the symbol each one
maps to follows from the declarations cuda.h makes under
__CUDA_API_VERSION_INTERNAL. This script joins the two and writes

  src/common/cuda_api_table.h   X-macro list: CS_API(api, symbol, version, variant)
  src/fakecuda/fc_stubs.c       weak NOT_SUPPORTED definitions of every symbol

Usage: scripts/gen-cuda-api.py [CUDA_INCLUDE_DIR]   (default /usr/local/cuda/include)
The outputs are committed; rerun after moving to a new CUDA release.
"""
import os
import re
import subprocess
import sys

inc = sys.argv[1] if len(sys.argv) > 1 else "/usr/local/cuda/include"
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def preprocess(header, internal):
    defs = ["-D__CUDA_API_VERSION_INTERNAL"] if internal else []
    src = '#include "%s"\n' % header
    out = subprocess.run(["gcc", "-E", "-P", "-x", "c", "-I", inc] + defs + ["-"],
                         input=src, capture_output=True, text=True, check=True).stdout
    return re.sub(r"\s+", " ", out)


def param_types(params):
    """Normalized parameter list (types only, names dropped) for comparison."""
    params = params.strip()
    if params in ("", "void"):
        return ()
    out = []
    for p in params.split(","):
        p = p.strip().replace("const ", "")
        # typedef aliases such as CUDA_MEMCPY3D_v2 / CUdevice_v1 name the
        # same type as the unsuffixed one in this header generation
        p = re.sub(r"\b(\w+?)_v\d+\b", r"\1", p)
        toks = re.findall(r"[A-Za-z_]\w*|\*+", p)
        if len(toks) > 1 and re.match(r"[A-Za-z_]", toks[-1]) and toks[-2] not in ("unsigned", "long", "struct"):
            toks = toks[:-1]  # drop the parameter name
        out.append(" ".join(toks))
    return tuple(out)


internal = preprocess("cuda.h", True)
decls = {}
for m in re.finditer(r"CUresult (\w+)\(([^)]*)\);", internal):
    decls[m.group(1)] = param_types(m.group(2))
public = set(re.findall(r"CUresult (\w+)\(", preprocess("cuda.h", False)))

typedefs = preprocess("cudaTypedefs.h", True)
pfns = []
for m in re.finditer(r"typedef CUresult \( \*PFN_(\w+?)_v(\d+)(_ptds|_ptsz)?\)\(([^)]*)\);", typedefs):
    pfns.append((m.group(1), int(m.group(2)), (m.group(3) or "")[1:], param_types(m.group(4))))

by_api = {}
for api, ver, var, params in pfns:
    by_api.setdefault(api, []).append((ver, var, params))

# Where the numbering rule does not hold, NVIDIA's own mapping (checked
# against the real driver's cuGetProcAddress on driver 580).
OVERRIDES = {
}

rows, problems = [], []
for api in sorted(by_api):
    plain = sorted(v for v, var, _ in by_api[api] if var == "")
    names = {}
    for i, v in enumerate(plain):
        names[v] = api if i == 0 else "%s_v%d" % (api, i + 1)
    for ver, var, params in sorted(by_api[api]):
        if (api, ver, var) in OVERRIDES:
            sym = OVERRIDES[(api, ver, var)]
        elif var == "":
            sym = names[ver]
        else:
            base = [v for v in plain if v <= ver]
            base_sym = names[base[-1]] if base else api
            sym = "%s_%s" % (base_sym, var)
            if sym not in decls and base:
                # a per-thread variant of a symbol that changed later keeps
                # the newest *matching* base, e.g. X_v2_ptsz
                for v in reversed(plain):
                    cand = "%s_%s" % (names[v], var)
                    if cand in decls and decls[cand] == params:
                        sym = cand
                        break
        if sym not in decls:
            problems.append("%s v%d %s -> %s: not declared" % (api, ver, var, sym))
            continue
        if decls[sym] != params:
            # try any declared name of this api with the same parameters
            cands = [n for n in decls if (n == api or n.startswith(api + "_")) and decls[n] == params
                     and n.endswith(("_" + var) if var else "") and not (not var and n.endswith(("_ptds", "_ptsz")))]
            if len(cands) == 1:
                sym = cands[0]
            else:
                problems.append("%s v%d %s -> %s: parameters differ %s vs %s (candidates %s)"
                                % (api, ver, var, sym, decls[sym], params, cands))
                continue
        rows.append((api, sym, ver, var))

# Entry points the header declares but cudaTypedefs.h gives no PFN for: the
# version each appeared in, from the CUDA release notes (checked against the
# H100's driver 580: it refuses every one of them at 12000).
INTRODUCED = {
    "cuCoredump": 12010, "cuGreenCtx": 12040, "cuCtxFromGreenCtx": 12040,
    "cuCtxGetDevResource": 12040, "cuDeviceGetDevResource": 12040,
    "cuDevResourceGenerateDesc": 12040, "cuDevSmResourceSplitByCount": 12040,
    "cuStreamGetGreenCtx": 12040, "cuDeviceRegisterAsyncNotification": 12040,
    "cuDeviceUnregisterAsyncNotification": 12040, "cuCtxRecordEvent": 12050,
    "cuCtxWaitEvent": 12050,
}
covered = set(r[1] for r in rows)
for sym in sorted(decls):
    if sym not in covered and not sym.endswith(("_ptds", "_ptsz")) and not re.search(r"_v\d+$", sym):
        ver = next((v for k, v in INTRODUCED.items() if sym.startswith(k)), 12000)
        rows.append((sym, sym, ver, ""))

for p in problems:
    print("gen-cuda-api: " + p, file=sys.stderr)

syms = sorted(set(r[1] for r in rows) | set(decls))
out = os.path.join(root, "src/common/cuda_api_table.h")
with open(out, "w") as f:
    f.write("/* cuda_api_table.h: GENERATED by scripts/gen-cuda-api.py from the CUDA %s\n"
            " * headers (cudaTypedefs.h PFN names + cuda.h declarations). Do not edit.\n"
            " *\n"
            " * CS_API(api, symbol, version, variant): cuGetProcAddress(api, version' >= version,\n"
            " * flags) resolves to `symbol`, the newest row whose version <= the caller's\n"
            " * winning; variant is NONE, PTDS or PTSZ (the per-thread-default-stream\n"
            " * forms, chosen by CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM).\n"
            " * CS_API_SYMBOL(symbol): every CUresult function the header declares.\n"
            " */\n" % os.path.basename(os.path.realpath(os.path.join(inc, ".."))))
    for api, sym, ver, var in rows:
        f.write("CS_API(%s, %s, %d, %s)\n" % (api, sym, ver, var.upper() or "NONE"))
    for s in sorted(decls):
        f.write("CS_API_SYMBOL(%s)\n" % s)
stubs = os.path.join(root, "src/fakecuda/fc_stubs.c")
os.makedirs(os.path.dirname(stubs), exist_ok=True)
with open(stubs, "w") as f:
    f.write("/* fc_stubs.c: GENERATED by scripts/gen-cuda-api.py. Do not edit.\n"
            " *\n"
            " * A weak definition of every entry point cuda.h declares, so that the\n"
            " * simulated driver exports the whole API: whatever the simulator does not\n"
            " * implement (a strong definition elsewhere wins at link time) answers\n"
            " * CUDA_ERROR_NOT_SUPPORTED and is logged once. cuda.h is deliberately not\n"
            " * included: the stubs ignore their arguments, which the x86-64 and\n"
            " * AArch64 calling conventions make safe.\n"
            " */\n"
            "#include \"fakecuda/fc_unsupported.h\"\n\n")
    for i, s_ in enumerate(sorted(decls)):
        f.write("FC_STUB(%s)\n" % s_)
print("gen-cuda-api: %d versioned entries, %d symbols, %d problems -> %s"
      % (len(rows), len(decls), len(problems), out))
