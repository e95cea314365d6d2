#!/usr/bin/env python3
"""gen-hooks.py: generate the interposer's gated wrappers and coverage table.

Inputs
  src/hook/api_classes.txt      how each API is treated (first matching glob)
  src/hook/api_addresses.txt    what each API does with a device address
  src/common/cuda_api_table.h   every versioned symbol of each API
  cuda.h (preprocessed with __CUDA_API_VERSION_INTERNAL) for the prototypes

Outputs (committed)
  src/hook/hooks_gated.c        one wrapper per symbol of every `gated` and
                                `placed` API
  src/hook/hook_symbols.h       CS_HOOK(symbol) for every symbol the hook defines
  docs/coverage.md              every entry point with its class, address class
                                and notes, and a summary of each

Usage
  scripts/gen-hooks.py [--cuda-include DIR]     regenerate
  scripts/gen-hooks.py --check [...]            exit 1 if an entry point is
                                                unclassified, an address class is
                                                missing or contradicts the class,
                                                or an output is stale
  --addresses FILE                              read the address classes from FILE
                                                (tests/hook/coverage_check.sh)
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
ap.add_argument("--addresses", default=os.path.join(ROOT, "src/hook/api_addresses.txt"))
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


CLASSES = ("gated", "gated-manual", "placed", "retried", "tracked", "virtualized", "exempt",
           "passthrough")
ADDR_CLASSES = ("work", "mapping", "placed", "answered", "unchecked", "managed", "alloc", "-")


def load_rules(path, classes, reason_needed):
    """[(pattern, class, reason)] of a `PATTERN CLASS [-- reason]` file."""
    rules = []
    name = os.path.basename(path)
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            head, _, reason = line.partition(" -- ")
            parts = head.split()
            if len(parts) != 2:
                sys.exit("%s:%d: expected PATTERN CLASS [-- reason]" % (name, lineno))
            pat, cls = parts
            if cls not in classes:
                sys.exit("%s:%d: unknown class %s" % (name, lineno, cls))
            if cls in reason_needed and not reason.strip():
                sys.exit("%s:%d: %s needs a reason" % (name, lineno, cls))
            rules.append((pat, cls, reason.strip()))
    return rules


def load_table():
    rows = []
    with open(os.path.join(ROOT, "src/common/cuda_api_table.h")) as f:
        for m in re.finditer(r"^CS_API\((\w+), (\w+), (\d+), (\w+)\)", f.read(), re.M):
            rows.append((m.group(1), m.group(2), int(m.group(3)), m.group(4)))
    return rows


def preprocess():
    """cuda.h after the preprocessor, all white space runs made one blank."""
    src = '#include "cuda.h"\n'
    out = subprocess.run(["gcc", "-E", "-P", "-x", "c", "-I", INC, "-D__CUDA_API_VERSION_INTERNAL", "-"],
                         input=src, capture_output=True, text=True, check=True).stdout
    return re.sub(r"\s+", " ", out)


def load_prototypes(text):
    protos = {}
    for m in re.finditer(r"CUresult (\w+)\(([^)]*)\);", text):
        protos[m.group(1)] = m.group(2).strip()
    return protos


# What carries a device address. Types: the address itself, and structs whose
# void pointers are device memory (a decompression's source and destination).
# Names: void pointers that hold device addresses by what they are for
# (kernel arguments, a tensor map's global address, cuMemRetainAllocationHandle).
ADDR_SEED_TYPES = {"CUdeviceptr", "CUdeviceptr_v1", "CUdeviceptr_v2", "CUmemDecompressParams"}
ADDR_VOID_NAMES = re.compile(r"\bvoid\s*\*+\s*(kernelParams|globalAddress|addr)\b")


def address_types(text):
    """Every type name that is, or (transitively) contains, a device address:
    structs and unions with such a member, and their typedef aliases."""
    aggs = []  # (names, body) of each top-level typedef struct/union
    for m in re.finditer(r"typedef (?:struct|union) (\w+ )?\{", text):
        depth, j = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        names = set(re.findall(r"\w+", text[j:text.index(";", j)]))
        if m.group(1):
            names.add(m.group(1).strip())
        aggs.append((names, text[m.end():j - 1]))
    alias = [(m.group(1), m.group(2)) for m in
             re.finditer(r"typedef (?:struct |union |const )?(\w+) \*?\s*(\w+) ?;", text)]
    addr = set(ADDR_SEED_TYPES)
    grown = True
    while grown:
        n = len(addr)
        for names, body in aggs:
            if set(re.findall(r"\w+", body)) & addr or ADDR_VOID_NAMES.search(body):
                addr |= names
        addr |= set(b for a, b in alias if a in addr)
        grown = len(addr) != n
    return addr


def takes_address(proto, addr_types):
    return bool(set(re.findall(r"\w+", proto)) & addr_types or ADDR_VOID_NAMES.search(proto))


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


def gen_wrapper(sym, proto, cls):
    """A gated wrapper waits for the lease as work on its stream; a placed
    one only for the job's memory to be on the GPU (gate.h)."""
    params = split_params(proto)
    call_args = ", ".join(n for _, n, _ in params)
    if cls == "placed":
        enter = "cs_gate_enter_placed(&t)"
    else:
        s = stream_expr(sym, params)
        ptds = 1 if sym.endswith(("_ptds", "_ptsz")) else 0
        enter = "cs_gate_enter(&t, %s, %d)" % (s if s else "(CUstream)0", ptds)
    return ("CS_EXPORT CUresult CUDAAPI %s(%s)\n{\n"
            "    struct cs_ticket t;\n"
            "    CUresult r = %s;\n"
            "    if (r == CUDA_SUCCESS) {\n"
            "        r = cs_real.%s(%s);\n"
            "        cs_gate_exit(&t);\n"
            "    }\n"
            "    return r;\n}\n" % (sym, proto if proto else "void", enter, sym, call_args))


def gen_retried(sym, proto):
    """A retried wrapper calls the driver and, when the call failed while
    one of cushare's segments was between two mappings (seg.h,
    cs_seg_remapped_since), calls it again once the move is over."""
    params = split_params(proto)
    call_args = ", ".join(n for _, n, _ in params)
    return ("CS_EXPORT CUresult CUDAAPI %s(%s)\n{\n"
            "    if (cs_unlikely(!cs_real_ready()) && cs_hook_init_slow() < 0)\n"
            "        return CUDA_ERROR_NOT_INITIALIZED;\n"
            "    uint32_t seq = cs_seg_remap_seq();\n"
            "    CUresult r = cs_real.%s(%s);\n"
            "    while (cs_unlikely(r != CUDA_SUCCESS) && cs_seg_remapped_since(&seq))\n"
            "        r = cs_real.%s(%s);\n"
            "    return r;\n}\n" % (sym, proto if proto else "void", sym, call_args, sym, call_args))


def address_errors(api, cls, addr, takes):
    """Why api's address class cannot be right, or None. `work` is for
    calls that pass the lease gate; `placed` goes with the placed class both
    ways; a gated call's address is checked when its work runs (or it is
    managed memory); `answered` needs a hook to answer; an address-taking
    call must say what happens to the address, and one that takes none has
    none to classify (a launch aside: its work uses addresses given before)."""
    gated = cls in ("gated", "gated-manual")
    if takes and addr == "-":
        return "takes a device address but has no address class"
    if not takes and addr not in ("work", "-"):
        return "takes no device address but has address class %s" % addr
    if addr == "work" and not gated:
        return "has address class work but class %s" % cls
    if (addr == "placed") != (cls == "placed"):
        return "has address class %s but class %s" % (addr, cls)
    if cls == "retried" and addr != "mapping":
        return "is retried but has address class %s" % addr
    if gated and addr not in ("work", "managed", "-"):
        return "is %s but has address class %s" % (cls, addr)
    if addr == "answered" and cls not in HOOKED:
        return "has address class answered but is not hooked (class %s)" % cls
    return None


HOOKED = ("gated", "gated-manual", "placed", "retried", "tracked", "virtualized")
CLASS_MEANING = {
    "gated": "puts work on the GPU: waits for the lease (generated wrapper)",
    "gated-manual": "puts work on the GPU on two devices: waits for both leases",
    "placed": "records where memory is (a memcpy node's operand types): waits until the job's memory is on the GPU (generated wrapper)",
    "retried": "checks that an address is mapped, runs no work: called again if a segment was between two mappings meanwhile (generated wrapper)",
    "tracked": "allocates/frees device memory or ends a context: recorded for quota, footprint, swap",
    "virtualized": "answer adjusted (quota view, proc-address mapping)",
    "exempt": "deliberately not gated or tracked (reason given)",
    "passthrough": "not hooked: reaches the driver untouched",
}
ADDR_MEANING = {
    "work": "submits work: the address is used when the work runs, with the memory resident (the gate)",
    "mapping": "inspects that the address is mapped, runs no work: served by cushare keeping every address mapped",
    "placed": "records where the memory is: waits for it to be on the GPU (class placed)",
    "answered": "hooked: cushare answers for its own memory (note says where)",
    "unchecked": "the driver does not inspect the address at this call",
    "managed": "managed memory only: any other memory is refused natively, cushare or not",
    "alloc": "allocates, frees or maps memory: the allocator's business",
    "-": "takes no device address",
}


def coverage_md(coverage):
    counts, acounts, aapis = {}, {}, {}
    for _, cls, syms, _, addr, _ in coverage:
        counts[cls] = counts.get(cls, 0) + len(syms)
        acounts[addr] = acounts.get(addr, 0) + len(syms)
        aapis[addr] = aapis.get(addr, 0) + 1
    md = ["# CUDA driver API coverage", "",
          "Generated by `scripts/gen-hooks.py` from `src/hook/api_classes.txt`, "
          "`src/hook/api_addresses.txt` and the CUDA headers (CUDA_VERSION %s). Every entry point "
          "`cuda.h` declares is listed with what `libcushare.so` does with it and with a device "
          "address it is given; `make test` fails if one is unclassified, or takes a device address "
          "and has no address class. NVML's entry points: [coverage-nvml.md](coverage-nvml.md)."
          % cuda_version(), "",
          "| class | meaning | symbols |", "|---|---|---|"]
    for cls in CLASSES:
        md.append("| %s | %s | %d |" % (cls, CLASS_MEANING[cls], counts.get(cls, 0)))
    md += ["", "| address | meaning | APIs | symbols |", "|---|---|---|---|"]
    for addr in ADDR_CLASSES:
        md.append("| %s | %s | %d | %d |" % (addr, ADDR_MEANING[addr], aapis.get(addr, 0),
                                             acounts.get(addr, 0)))
    md += ["", "| API | class | address | symbols | note | address note |", "|---|---|---|---|---|---|"]
    for api, cls, syms, reason, addr, anote in coverage:
        md.append("| `%s` | %s | %s | %s | %s | %s |" % (api, cls, addr, ", ".join("`%s`" % s for s in syms),
                                                        reason, anote))
    return "\n".join(md) + "\n"


def main():
    rules = load_rules(os.path.join(ROOT, "src/hook/api_classes.txt"), CLASSES, ("exempt",))
    arules = load_rules(args.addresses, ADDR_CLASSES, ())
    rows = load_table()
    text = preprocess()
    protos = load_prototypes(text)
    addr_types = address_types(text)
    by_api = {}
    for api, sym, ver, var in rows:
        by_api.setdefault(api, []).append((sym, ver, var))
    # Declared symbols that belong to no API row (none today) are APIs of their own.
    known = set(s for _, s, _, _ in rows)
    for sym in protos:
        if sym not in known:
            by_api.setdefault(sym, []).append((sym, 0, "NONE"))

    errors = []
    wrappers, hooked, coverage = [], [], []
    for api in sorted(by_api):
        cls, reason = classify(api, rules)
        syms = sorted(set(s for s, _, _ in by_api[api]))
        if cls is None:
            errors.append("%s is not classified in src/hook/api_classes.txt" % api)
            continue
        addr, anote = classify(api, arules)
        if addr is None:
            addr, anote = "-", ""
        takes = any(takes_address(protos.get(s, ""), addr_types) for s in syms)
        why = address_errors(api, cls, addr, takes)
        if why:
            errors.append("%s %s (%s)" % (api, why, os.path.basename(args.addresses)))
        coverage.append((api, cls, syms, reason, addr, anote))
        if cls in HOOKED:
            hooked += syms
        if cls in ("gated", "placed"):
            for sym in syms:
                if sym not in protos:
                    sys.exit("gen-hooks: no prototype for %s" % sym)
                wrappers.append(gen_wrapper(sym, protos[sym], cls))
        if cls == "retried":
            for sym in syms:
                if sym not in protos:
                    sys.exit("gen-hooks: no prototype for %s" % sym)
                wrappers.append(gen_retried(sym, protos[sym]))

    for e in errors:
        print("gen-hooks: %s" % e, file=sys.stderr)

    outputs = {}
    outputs["src/hook/hooks_gated.c"] = (
        "/* hooks_gated.c: GENERATED by scripts/gen-hooks.py from src/hook/api_classes.txt\n"
        " * and cuda.h. Do not edit: change the classes file and regenerate.\n"
        " *\n"
        " * Every entry point that puts work on the GPU, each versioned and\n"
        " * per-thread-stream symbol separately, wrapped in the lease gate. The gate\n"
        " * costs two uncontended atomic operations while the lease is held\n"
        " * (see gate.h); nothing here synchronizes, so stream capture is unaffected.\n"
        " * The `placed` entry points (graph nodes that record where their memory\n"
        " * is) pass the gate only to wait for the job's memory to be on the GPU;\n"
        " * the `retried` ones (a check that an address is mapped) are called\n"
        " * again when they failed while a segment was between two mappings.\n"
        " */\n"
        "#include \"hook/hook.h\"\n"
        "#include \"hook/gate.h\"\n"
        "#include \"hook/seg.h\"\n\n" + "\n".join(wrappers))
    outputs["src/hook/hook_symbols.h"] = (
        "/* hook_symbols.h: GENERATED by scripts/gen-hooks.py. Do not edit.\n"
        " * CS_HOOK(symbol): every driver symbol libcushare.so defines. */\n" +
        "".join("CS_HOOK(%s)\n" % s for s in hooked))
    outputs["docs/coverage.md"] = coverage_md(coverage)

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
        print("gen-hooks: %d gated and placed wrappers, %d hooked symbols, %d APIs classified"
              % (len(wrappers), len(hooked), len(coverage)))
    if errors or stale:
        sys.exit(1)


main()
