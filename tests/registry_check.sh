#!/bin/sh
# tests/registry_check.sh: tests/registry against the files it names and the
# files that look like tests, so that a new test cannot be forgotten.
#
#   - every row is well formed (tests/registry.awk);
#   - every row's file exists (a bin row's PATH.c, a script executable);
#   - every file that looks like a test has a row (as a test, or as a
#     helper with the reason it is not one). Looking like a test:
#       tests/*/*.sh, tests/*/test_*.c, tests/hook/hook_*.c,
#       tests/fakecuda/fc_*_test.c, bench/*/smoke.sh
#
# Run from the repository root (run-suite.sh does); reads no build output.
set -eu
export LC_ALL=C
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0

# Rows are checked whatever their trees: a malformed registry stops here.
awk -v mode=files -f tests/registry.awk tests/registry >"$T/rows" || exit 1

while read -r kind file; do
    if [ ! -f "$file" ]; then
        echo "tests/registry: $kind row, but $file does not exist"
        fail=1
    elif [ "$kind" = script ] && [ ! -x "$file" ]; then
        echo "tests/registry: $file is not executable (run-suite.sh runs it directly)"
        fail=1
    fi
done <"$T/rows"

ls tests/*/*.sh tests/*/test_*.c tests/hook/hook_*.c tests/fakecuda/fc_*_test.c \
   bench/*/smoke.sh 2>/dev/null | sort -u >"$T/looks"
awk '{ print $2 }' "$T/rows" | sort -u >"$T/listed"
comm -23 "$T/looks" "$T/listed" >"$T/missing"
while read -r file; do
    echo "$file looks like a test but tests/registry has no row for it:" \
         "add it (bin/script, with its trees) or list it as a helper with a reason"
    fail=1
done <"$T/missing"

[ $fail -eq 0 ] || exit 1
echo "registry: $(grep -c . "$T/rows") rows, $(grep -c . "$T/looks") test-looking files, all listed"
