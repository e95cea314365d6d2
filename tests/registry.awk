# tests/registry.awk: reads tests/registry (its header describes the rows),
# refuses a malformed one (a message per bad row on stderr, exit 1, nothing
# printed), and prints, one per line:
#
#   -v tree=opt|asan|tsan -v build=DIR [-v have="NAME..."] [-v bins="PATH..."]
#      [-v part=early|late]
#       the tests that tree runs, in order: DIR/PATH for a bin row, PATH for
#       a script row; rows with needs=NAME only where NAME is in `have`.
#       With `bins` (the tree's TEST_BINS), a bin row the build does not
#       make is an error rather than a stale or missing program run. With
#       `part`, only the rows marked `early` (part=early) or only the others
#       (part=late).
#   -v mode=files
#       "KIND FILE" for every row: the source a bin row is built from
#       (PATH.c), the script of a script row, the file a helper row names.
#
# Used by mk/tests.mk (make check, make print-tests) and
# tests/registry_check.sh.

BEGIN {
    # The conditions mk/tests.mk can report in `have`.
    known_needs["fuzz-cc"] = 1
    if (mode != "files" && tree !~ /^(opt|asan|tsan)$/)
        bad("", "tree must be opt, asan or tsan (got '" tree "')")
    if (part !~ /^(early|late|)$/)
        bad("", "part must be early or late (got '" part "')")
    nb = split(bins, b)
    for (i = 1; i <= nb; i++)
        built[b[i]] = 1
    nh = split(have, h)
    for (i = 1; i <= nh; i++)
        holds[h[i]] = 1
}

function bad(where, msg) {
    printf "%s%s\n", (where == "" ? "tests/registry.awk: " : where ": "), msg > "/dev/stderr"
    failed = 1
}

# Comments and blank lines.
/^[ \t]*(#|$)/ { next }

{
    at = FILENAME ":" FNR
    if (NF < 2) {
        bad(at, "a row is KIND PATH ...")
        next
    }
    if ($2 in seen)
        bad(at, $2 " is already listed at line " seen[$2])
    seen[$2] = FNR
}

$1 == "helper" {
    if (NF < 3)
        bad(at, "helper " $2 " needs a reason: what the file is, if not a test")
    files[++n] = "helper " $2
    next
}

$1 == "bin" || $1 == "script" {
    files[++n] = $1 " " $2 ($1 == "bin" ? ".c" : "")
    runs = 0
    ok = 1
    ntrees = 0
    early = 0
    for (i = 3; i <= NF; i++) {
        if ($i == "early") {
            early = 1
        } else if ($i ~ /^(opt|asan|tsan)$/) {
            ntrees++
            if ($i == tree)
                runs = 1
        } else if ($i ~ /^needs=/ && (substr($i, 7) in known_needs)) {
            if (!(substr($i, 7) in holds))
                ok = 0
        } else {
            bad(at, "'" $i "' is neither a tree (opt, asan, tsan), early, nor a known needs=NAME")
        }
    }
    if (ntrees == 0)
        bad(at, $2 " runs in no tree")
    if (!runs || !ok || (part == "early" && !early) || (part == "late" && early))
        next
    path = ($1 == "bin" ? build "/" $2 : $2)
    if ($1 == "bin" && nb > 0 && !(path in built))
        bad(at, path " is not among the programs the build makes (TEST_BINS of mk/*.mk)")
    list[++m] = path
    next
}

{ bad(at, "a row starts with bin, script or helper (got '" $1 "')") }

END {
    if (failed)
        exit 1
    if (mode == "files")
        for (i = 1; i <= n; i++)
            print files[i]
    else
        for (i = 1; i <= m; i++)
            print list[i]
}
