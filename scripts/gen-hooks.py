#!/usr/bin/env python3
"""gen-hooks.py: generate the interposer's gated wrappers and coverage table.

Inputs
  src/hook/api_classes.txt      how each API is treated (first matching glob)
  src/common/cuda_api_table.h   every versioned symbol of each API
  cuda.h (preprocessed with __CUDA_API_VERSION_INTERNAL) for the prototypes

Outputs (committed)
  src/hook/hooks_gated.c        one wrapper per symbol of every `gated` API
  src/hook/hook_symbols.h       CS_HOOK(symbol) for every symbol the hook defines
  docs/coverage.md              every entry point with its class and reason

Usage
  scripts/gen-hooks.py [--cuda-include DIR]     regenerate
  scripts/gen-hooks.py --check [...]            exit 1 if an entry point is
                                                unclassified or an output is stale
"""
import argparse
import fnmatch
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--check", action="store_true")
ap.add_argument("--cuda-include", default=None)
args = ap.parse_args()


def find_cuda_include():
    cands = []
    if args.cuda_include:
        cands.append(args.cuda_include)
    if os.environ.get("CUDA_HOME"):
        cands.append(os.path.join(os.environ["CUDA_HOME"], "include"))
    cands += ["/usr/local/cuda/include", "/usr/include"]
    for c in cands:
        if os.path.exists(os.path.join(c, "cuda.h")):
            return c
    sys.exit("gen-hooks: cuda.h not found (set CUDA_HOME)")


INC = find_cuda_include()


def load_classes():
    rules = []
    with open(os.path.join(ROOT, "src/hook/api_classes.txt")) as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            head, _, reason = line.partition(" -- ")
            parts = head.split()
            if len(parts) != 2:
                sys.exit("api_classes.txt:%d: expected PATTERN CLASS [-- reason]" % lineno)
            pat, cls = parts
            if cls not in ("gated", "gated-manual", "tracked", "virtualized", "passthrough", "exempt"):
                sys.exit("api_classes.txt:%d: unknown class %s" % (lineno, cls))
            if cls == "exempt" and not reason.strip():
                sys.exit("api_classes.txt:%d: exempt needs a reason" % lineno)
            rules.append((pat, cls, reason.strip()))
    return rules


def load_table():
    rows = []
    with open(os.path.join(ROOT, "src/common/cuda_api_table.h")) as f:
        for m in re.finditer(r"^CS_API\((\w+), (\w+), (\d+), (\w+)\)", f.read(), re.M):
            rows.append((m.group(1), m.group(2), int(m.group(3)), m.group(4)))
    return rows


def load_prototypes():
    src = '#include "cuda.h"\n'
    out = subprocess.run(["gcc", "-E", "-P", "-x", "c", "-I", INC, "-D__CUDA_API_VERSION_INTERNAL", "-"],
                         input=src, capture_output=True, text=True, check=True).stdout
    out = re.sub(r"\s+", " ", out)
    protos = {}
    for m in re.finditer(r"CUresult (\w+)\(([^)]*)\);", out):
        protos[m.group(1)] = m.group(2).strip()
    return protos


def cuda_version():
    with open(os.path.join(INC, "cuda.h")) as f:
        m = re.search(r"#define CUDA_VERSION (\d+)", f.read())
    return m.group(1) if m else "?"


def split_params(params):
    """[(text, name, type)] for a C parameter list."""
    if params in ("", "void"):
        return []
    res = []
    for p in params.split(","):
        p = p.strip()
        m = re.match(r"(.*?)(\w+)\s*$", p)
        res.append((p, m.group(2), m.group(1).strip()))
    return res


def classify(api, rules):
    for pat, cls, reason in rules:
        if fnmatch.fnmatchcase(api, pat):
            return cls, reason
    return None, None


def stream_expr(sym, params):
    for text, name, typ in params:
        if typ == "CUstream":
            return name
    if sym.startswith("cuLaunchKernelEx"):
        return "(config ? config->hStream : (CUstream)0)"
    return None


def gen_wrapper(sym, proto):
    params = split_params(proto)
    s = stream_expr(sym, params)
    ptds = 1 if sym.endswith(("_ptds", "_ptsz")) else 0
    call_args = ", ".join(n for _, n, _ in params)
    stream = s if s else "(CUstream)0"
    return ("CS_EXPORT CUresult CUDAAPI %s(%s)\n{\n"
            "    struct cs_ticket t;\n"
            "    CUresult r = cs_gate_enter(&t, %s, %d);\n"
            "    if (r == CUDA_SUCCESS) {\n"
            "        r = cs_real.%s(%s);\n"
            "        cs_gate_exit(&t);\n"
            "    }\n"
            "    return r;\n}\n" % (sym, proto if proto else "void", stream, ptds, sym, call_args))


def main():
    rules = load_classes()
    rows = load_table()
    protos = load_prototypes()
    by_api = {}
    for api, sym, ver, var in rows:
        by_api.setdefault(api, []).append((sym, ver, var))
    # Declared symbols that belong to no API row (none today) are APIs of their own.
    known = set(s for _, s, _, _ in rows)
    for sym in protos:
        if sym not in known:
            by_api.setdefault(sym, []).append((sym, 0, "NONE"))

    unclassified = []
    wrappers, hooked, coverage = [], [], []
    for api in sorted(by_api):
        cls, reason = classify(api, rules)
        syms = sorted(set(s for s, _, _ in by_api[api]))
        if cls is None:
            unclassified.append(api)
            continue
        coverage.append((api, cls, syms, reason))
        if cls in ("gated", "gated-manual", "tracked", "virtualized"):
            hooked += syms
        if cls == "gated":
            for sym in syms:
                if sym not in protos:
                    sys.exit("gen-hooks: no prototype for %s" % sym)
                wrappers.append(gen_wrapper(sym, protos[sym]))

    if unclassified:
        for api in unclassified:
            print("gen-hooks: %s is not classified in src/hook/api_classes.txt" % api, file=sys.stderr)

    outputs = {}
    outputs["src/hook/hooks_gated.c"] = (
        "/* hooks_gated.c: GENERATED by scripts/gen-hooks.py from src/hook/api_classes.txt\n"
        " * and cuda.h. Do not edit: change the classes file and regenerate.\n"
        " *\n"
        " * Every entry point that puts work on the GPU, each versioned and\n"
        " * per-thread-stream symbol separately, wrapped in the lease gate. The gate\n"
        " * costs two uncontended atomic operations while the lease is held\n"
        " * (see gate.h); nothing here synchronizes, so stream capture is unaffected.\n"
        " */\n"
        "#include \"hook/hook.h\"\n"
        "#include \"hook/gate.h\"\n\n" + "\n".join(wrappers))
    outputs["src/hook/hook_symbols.h"] = (
        "/* hook_symbols.h: GENERATED by scripts/gen-hooks.py. Do not edit.\n"
        " * CS_HOOK(symbol): every driver symbol libcushare.so defines. */\n" +
        "".join("CS_HOOK(%s)\n" % s for s in hooked))
    counts = {}
    for _, cls, syms, _ in coverage:
        counts[cls] = counts.get(cls, 0) + len(syms)
    md = ["# CUDA driver API coverage", "",
          "Generated by `scripts/gen-hooks.py` from `src/hook/api_classes.txt` and the CUDA headers "
          "(CUDA_VERSION %s). Every entry point `cuda.h` declares is listed with what `libcushare.so` "
          "does with it; `make test` fails if one is unclassified." % cuda_version(), "",
          "| class | meaning | symbols |", "|---|---|---|"]
    meaning = {
        "gated": "puts work on the GPU: waits for the lease (generated wrapper)",
        "gated-manual": "puts work on the GPU on two devices: waits for both leases",
        "tracked": "allocates/frees device memory or ends a context: recorded for quota, footprint, swap",
        "virtualized": "answer adjusted (quota view, proc-address mapping)",
        "exempt": "deliberately not gated or tracked (reason given)",
        "passthrough": "not hooked: reaches the driver untouched",
    }
    for cls in ("gated", "gated-manual", "tracked", "virtualized", "exempt", "passthrough"):
        md.append("| %s | %s | %d |" % (cls, meaning[cls], counts.get(cls, 0)))
    md += ["", "| API | class | symbols | note |", "|---|---|---|---|"]
    for api, cls, syms, reason in coverage:
        md.append("| `%s` | %s | %s | %s |" % (api, cls, ", ".join("`%s`" % s for s in syms), reason))
    outputs["docs/coverage.md"] = "\n".join(md) + "\n"

    stale = []
    for path, text in outputs.items():
        full = os.path.join(ROOT, path)
        old = open(full).read() if os.path.exists(full) else None
        if args.check:
            if old != text:
                stale.append(path)
        else:
            with open(full, "w") as f:
                f.write(text)
    for p in stale:
        print("gen-hooks: %s is stale: run scripts/gen-hooks.py" % p, file=sys.stderr)
    if not args.check:
        print("gen-hooks: %d gated wrappers, %d hooked symbols, %d APIs classified"
              % (len(wrappers), len(hooked), len(coverage)))
    if unclassified or stale:
        sys.exit(1)


main()
