#!/usr/bin/env bash
# bench/gpu/ab_oversub.sh: the oversub section for two builds side by side,
# in the order given: ORDER="old new old new" (entries new and old).
#
# new is build/, old is build-old/ (gitignored): bin/ and lib/ of a tree
# built at the commit to compare against, e.g.
#   git worktree add /tmp/wt-old COMMIT && make -C /tmp/wt-old -j2 &&
#   mkdir -p build-old && cp -r /tmp/wt-old/build/{bin,lib} build-old/
# then carry build/bin build/lib build/gpu-libs build-old to the GPU
# machine. Each entry is `bench/gpu/run.sh oversub` with OVERSUB_CASES
# (default add4x45), OVERSUB_FLOOR_MS=default and OVERSUB_CONF
# "pool_min_mb = POOLMIN" (default 8192: a pool that grows while the jobs
# swap); its summary lines are printed, its logs land in $OUT/I-NAME and
# are tarred into $OUT/ab.tgz: this call's entries only (a call of
# 2026-11-30 found in its tarball a 6-old it had not made, whose daemon had
# started hours before the call).
#
# Each entry gets ENTRY_S seconds (280; add4x30 with 33 s jobs and a warm-up
# takes ~230). A knob's A/B in one build: OLD_BUILD=build runs `old` from build/ too, and
# CONF_OLD / CONF_NEW add lines to that entry's OVERSUB_CONF, e.g.
#   OLD_BUILD=build CONF_NEW="prepare_holder_lead_ms = 5000" bench/gpu/ab_oversub.sh
set -u
OUT=${OUT:-/tmp/ab}
OLD_BUILD=${OLD_BUILD:-build-old}
[ "$OLD_BUILD" = build ] || ln -sfn ../build/gpu-libs "$OLD_BUILD/gpu-libs"
i=0
made=()
for v in ${ORDER:-old new}; do
    i=$((i + 1))
    b=build conf=${CONF_NEW:-}
    [ "$v" = old ] && b=$OLD_BUILD conf=${CONF_OLD:-}
    pkill cushared
    pkill -f workloads/occupy.py # OVERSUB_GPU_MB's, of an entry its timeout cut
    rm -rf "${OUT:?}/$i-$v"
    mkdir -p "$OUT/$i-$v"
    made+=("./$i-$v")
    CUSHARE_BUILD=$b OUT=$OUT/$i-$v OVERSUB_FLOOR_MS=default \
        OVERSUB_CONF="pool_min_mb = ${POOLMIN:-8192}${conf:+
$conf}" OVERSUB_CASES=${OVERSUB_CASES:-add4x45} \
        timeout "${ENTRY_S:-280}" bench/gpu/run.sh oversub >/dev/null 2>&1
    echo "== $i $v rc=$?"
    grep -E 'makespan|GPU held|solo runs|swap-out|switches|backing|warm-up|pool:' "$OUT/$i-$v/summary.md" | cut -c1-400
done
cd "$OUT" && tar czf ab.tgz "${made[@]}" && rm -rf "${made[@]}"
