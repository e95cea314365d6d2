#!/bin/sh
# Every entry point of the installed cuda.h is classified in
# src/hook/api_classes.txt, and the generated wrappers, symbol list and
# docs/coverage.md are up to date with it. A new CUDA release that adds a
# work-submitting call fails here until someone decides what it is.
set -eu
cd "$(dirname "$0")/../.."
exec python3 scripts/gen-hooks.py --check
