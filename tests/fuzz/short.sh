#!/bin/sh
# tests/fuzz/short.sh: the short fuzzing run of the optimized suite.
exec "$(dirname "$0")/run.sh" short
