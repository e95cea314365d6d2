#!/usr/bin/env bash
# e2e_files.sh: issue 17, attack 5. Without XDG_RUNTIME_DIR a user's runtime
# directory is /tmp/cushare-<uid>; another user who creates it first (mode
# 777) and plants links there used to have the victim's cushare-run write
# the state file over one of the victim's files and append the daemon's log
# (with a job name the attacker chose) to the victim's ~/.bashrc. Two users
# are created for the test (a victim and an attacker); the attacker's part
# (a directory of theirs, links of theirs) is laid out by root with chown,
# the victim's commands run as the victim:
#
#  1. a planted /tmp/cushare-<victim> (the attacker's, mode 777 or 755, or the
#     victim's but 777): cushare-run refuses with the reason and the remedy,
#     and so does cushared; the victim's files are untouched;
#  2. the attacker's daemon in it: the victim's job does not connect (one
#     error, runs unmanaged; with CUSHARE_REQUIRE_DAEMON=1 it waits, saying
#     why), also with CUSHARE_SOCKET naming it; the daemon saw no client;
#  3. links planted in a directory the victim owns: the log is not opened
#     through one; the state file replaces a link at its name and never
#     writes through the old predictable <state>.tmp;
#  4. a fresh start makes /tmp/cushare-<victim> 0700 and a 0600 log.
#
# Needs root (CI runs as root): skipped otherwise. Touches only paths of the
# two users it creates, and removes them and the users at the end.
set -eu
B=${CUSHARE_BUILD:-build}
SAN=${CUSHARE_SAN:-}
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: e2e_files needs root (to create the victim and attacker users)"
    exit 0
fi
for t in useradd userdel setpriv; do
    command -v "$t" >/dev/null || { echo "SKIP: e2e_files needs $t"; exit 0; }
done
T=${TEST_TMP:-$(mktemp -d "${TMPDIR:-/tmp}/cushare-files.XXXXXX")}
export LD_LIBRARY_PATH=$B/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FAKECUDA_SHM=${FAKECUDA_SHM:-files-$$}
unset CUSHARE_PRIORITY CUSHARE_WEIGHT CUSHARE_NAME CUSHARE_MEM_LIMIT CUSHARE_DISABLE \
      CUSHARE_REQUIRE_DAEMON CUSHARE_DAEMON_WAIT_MS CUSHARE_SWAP CUSHARE_SOCKET LD_PRELOAD \
      XDG_RUNTIME_DIR
VICTIM=cs-files-victim
ATTACKER=cs-files-attack
PIDS=()

fail() {
    echo "FAIL: e2e_files: $*" >&2
    for f in "$T"/*.err "$T"/*.out; do
        [ -s "$f" ] && { echo "------ $f"; tail -n 8 "$f"; } >&2
    done
    exit 1
}

cleanup() {
    local rc=$? p
    set +e
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do # gone before their users are
        for i in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.02; done
    done
    [ -n "${VU:-}" ] && rm -rf "/tmp/cushare-$VU"
    userdel "$VICTIM" 2>/dev/null
    userdel "$ATTACKER" 2>/dev/null
    rm -f "/dev/shm/fakecuda-$FAKECUDA_SHM"
    exit $rc
}
trap cleanup EXIT

# ---- the two users and what they may run ----------------------------------------------
userdel "$VICTIM" 2>/dev/null || true
userdel "$ATTACKER" 2>/dev/null || true
useradd -M -r -s /usr/sbin/nologin "$VICTIM"
useradd -M -r -s /usr/sbin/nologin "$ATTACKER"
VU=$(id -u "$VICTIM")
AU=$(id -u "$ATTACKER")
RUNDIR=/tmp/cushare-$VU
rm -rf "$RUNDIR" # a leftover of an earlier run: the test's own user's

# The programs in a directory both users can reach (the build tree may not
# be): cushare-run with a stand-in libcushare.so (an empty object: its CMD
# is /bin/true, and a sanitizer build would refuse the real one ahead of
# its runtime), the real hook for the jobs, and the simulated driver.
chmod 0711 "$T"
S=$T/stage
mkdir -p "$S/bin" "$S/lib" "$S/hook" "$S/fakecuda"
cp "$B/bin/cushared" "$B/bin/cushare-run" "$B/bin/cusharectl" "$B/bin/cs_job" "$S/bin/"
cp "$B/tests/sched/libempty.so" "$S/lib/libcushare.so"
cp "$B/lib/libcushare.so" "$S/hook/"
cp -P "$B"/fakecuda/libcuda.so* "$S/fakecuda/"
chmod -R a+rX "$S"
HOOKPRE="${SAN_RUNTIME:+$SAN_RUNTIME }$S/hook/libcushare.so"
# In a sanitizer tree the inherited LD_PRELOAD puts another object ahead of
# the runtime in cushare-run's CMD: allowed here (the CMD is /bin/true).
ASAN="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}verify_asan_link_order=0"

# The victim's files an attacker would like written.
H=$T/home-victim
mkdir -p "$H"
printf 'export PATH=/usr/bin:/bin\n' >"$H/.bashrc"
printf 'secret one\n' >"$H/secret1"
printf 'secret two\n' >"$H/secret2"
chown -R "$VU:$VU" "$H"
chmod 0700 "$H"
sums() { sha256sum "$H/.bashrc" "$H/secret1" "$H/secret2"; }
SUMS=$(sums)
untouched() { [ "$(sums)" = "$SUMS" ] || fail "$1: a file of the victim's was written"; }

# as USER [VAR=value...] CMD...: runs CMD as USER (no supplementary groups),
# in the victim's home, with a clean cushare environment.
as() {
    local u=$1
    shift
    (cd "$H" 2>/dev/null || cd /
     exec setpriv --reuid="$u" --regid="$u" --clear-groups env HOME="$H" "$@")
}

# vrun NAME [VAR=value...] CMD...: as the victim; output in $T/NAME.out/.err,
# the exit status in RC.
vrun() {
    local name=$1
    shift
    set +e
    as "$VU" "$@" >"$T/$name.out" 2>"$T/$name.err"
    RC=$?
    set -e
}

expect_err() { # NAME TEXT: the run's stderr says TEXT
    grep -qF -- "$2" "$T/$1.err" || fail "$1: stderr does not say '$2'"
}

# plant MODE OWNER: /tmp/cushare-<victim> as the attacker would leave it,
# with their links to the victim's files where cushare puts its own.
plant() {
    rm -rf "$RUNDIR"
    mkdir "$RUNDIR"
    ln -s "$H/.bashrc" "$RUNDIR/cushared.log"
    ln -s "$H/secret1" "$RUNDIR/cushared.state"
    ln -s "$H/secret2" "$RUNDIR/cushared.state.tmp"
    ln -s "$H/secret2" "$RUNDIR/cushared.sock.lock"
    chown -h "$2:$2" "$RUNDIR" "$RUNDIR"/*
    chmod "$1" "$RUNDIR"
}

# ---- 1. a planted runtime directory: refused ----------------------------------------------
# refused NAME TEXT CMD...: as the victim, CMD exits 1 saying TEXT, and
# nothing of the victim's was written.
refused() {
    local name=$1 text=$2
    shift 2
    vrun "$name" "$@"
    [ "$RC" = 1 ] || fail "$name: exit $RC, not 1"
    expect_err "$name" "$text"
    untouched "$name"
}
plant 0777 "$AU"
refused run777 "$RUNDIR is owned by uid $AU, not $VU or root: someone else created it" \
    "$S/bin/cushare-run" --name evil -- /bin/true
expect_err run777 "set XDG_RUNTIME_DIR or --socket"
plant 0755 "$AU"
refused run755 "is owned by uid $AU, not $VU" "$S/bin/cushare-run" -- /bin/true
refused daemon755 "$RUNDIR is owned by uid $AU, not $VU: someone else created it" \
    "$S/bin/cushared" --socket "$RUNDIR/cushared.sock"
plant 0777 "$VU"
refused runmine777 "$RUNDIR is writable by group or others (mode 0777)" \
    "$S/bin/cushare-run" -- /bin/true

# ---- 2. the attacker's daemon there: the victim's jobs do not talk to it ------------------------
rm -rf "$RUNDIR"
mkdir -m 0755 "$RUNDIR"
chown "$AU:$AU" "$RUNDIR"
(cd / && exec setpriv --reuid="$AU" --regid="$AU" --clear-groups "$S/bin/cushared" \
     --socket "$RUNDIR/cushared.sock" >"$T/evil.out" 2>"$T/evil.err") &
PIDS+=($!) # the subshell became the daemon (exec)
for i in $(seq 200); do
    [ -S "$RUNDIR/cushared.sock" ] && break
    sleep 0.025
done
[ -S "$RUNDIR/cushared.sock" ] || fail "the attacker's daemon did not start"
JOB=("$S/bin/cs_job" --mem-mb 8 --iters 3 --kernel-ns 100000)
vrun job LD_LIBRARY_PATH="$S/fakecuda" LD_PRELOAD="$HOOKPRE" "${JOB[@]}"
[ "$RC" = 0 ] || fail "the victim's job: exit $RC"
grep -q '^cs_job: ok' "$T/job.out" || fail "the victim's job did not finish correctly"
expect_err job "not connecting to the scheduler: $RUNDIR is owned by uid $AU, not $VU or root"
expect_err job "running unmanaged"
[ "$(grep -c 'not connecting' "$T/job.err")" = 1 ] || fail "the job said it more than once"
vrun jobexplicit LD_LIBRARY_PATH="$S/fakecuda" LD_PRELOAD="$HOOKPRE" \
    CUSHARE_SOCKET="$RUNDIR/cushared.sock" "${JOB[@]}"
[ "$RC" = 0 ] || fail "the victim's job with CUSHARE_SOCKET: exit $RC"
expect_err jobexplicit "not connecting to the scheduler: $RUNDIR is owned by uid $AU"
vrun jobwait LD_LIBRARY_PATH="$S/fakecuda" LD_PRELOAD="$HOOKPRE" CUSHARE_REQUIRE_DAEMON=1 \
    timeout 3 "${JOB[@]}"
[ "$RC" = 124 ] || fail "with CUSHARE_REQUIRE_DAEMON the job should wait (exit $RC)"
expect_err jobwait "waiting until that is fixed (CUSHARE_REQUIRE_DAEMON)"
as "$AU" "$S/bin/cusharectl" --socket "$RUNDIR/cushared.sock" status >"$T/evil-status.out"
grep -q " 0 client(s)" "$T/evil-status.out" || fail "the attacker's daemon saw a client"
kill "${PIDS[0]}"
untouched "the attacker's daemon"

# ---- 3. links in a directory the victim owns ---------------------------------------------------
X=$T/xdg-victim
mkdir -p "$X/cushare"
ln -s "$H/.bashrc" "$X/cushare/cushared.log"
chown -hR "$VU:$VU" "$X"
chmod 0700 "$X" "$X/cushare"
refused xdglog "a symbolic link: not following it" XDG_RUNTIME_DIR="$X" \
    LD_PRELOAD="$S/lib/libcushare.so" ASAN_OPTIONS="$ASAN" "$S/bin/cushare-run" -- /bin/true

rm "$X/cushare/cushared.log"
ln -s "$H/secret1" "$X/cushare/cushared.state"
ln -s "$H/secret2" "$X/cushare/cushared.state.tmp"
chown -h "$VU:$VU" "$X/cushare/cushared.state" "$X/cushare/cushared.state.tmp"
SOCK=$X/cushare/cushared.sock
# The daemon it starts finds the node's GPU through the (simulated) driver.
vrun xdgrun XDG_RUNTIME_DIR="$X" LD_PRELOAD="$S/lib/libcushare.so" ASAN_OPTIONS="$ASAN" \
    LD_LIBRARY_PATH="$S/fakecuda" "$S/bin/cushare-run" -- /bin/true
[ "$RC" = 0 ] || fail "cushare-run in the victim's own directory: exit $RC"
expect_err xdgrun "started a private one"
DPID=$(as "$VU" "$S/bin/cusharectl" --socket "$SOCK" status --json |
       grep -o '"pid": [0-9]*' | head -n 1 | sed 's/.*: //')
PIDS+=("$DPID")
# A job that takes the GPU: the daemon writes its state (holders changed).
vrun xdgjob LD_LIBRARY_PATH="$S/fakecuda" LD_PRELOAD="$HOOKPRE" CUSHARE_SOCKET="$SOCK" "${JOB[@]}"
[ "$RC" = 0 ] || fail "a job on the victim's own daemon: exit $RC"
st=$X/cushare/cushared.state
for i in $(seq 200); do
    [ -L "$st" ] || break
    sleep 0.025
done
[ -f "$st" ] && [ ! -L "$st" ] || fail "the state file did not replace the link at its name"
head -n 1 "$st" | grep -q '^cushared-state 1$' || fail "the state file: $(head -n 1 "$st")"
[ -L "$X/cushare/cushared.state.tmp" ] || fail "the old temporary name was touched"
[ "$(stat -c '%a %u' "$st")" = "600 $VU" ] || fail "state file: $(stat -c '%a %u' "$st")"
[ "$(stat -c '%a %u' "$X/cushare/cushared.log")" = "600 $VU" ] ||
    fail "log: $(stat -c '%a %u' "$X/cushare/cushared.log")"
kill "$DPID"
untouched "links in the victim's own directory"

# ---- 4. a fresh start makes the directory private ------------------------------------------
# fresh NAME DIR [VAR=value...]: cushare-run creates DIR (missing) 0700 with a
# 0600 log, and its daemon is stopped again.
fresh() {
    local name=$1 dir=$2
    shift 2
    rm -rf "$dir"
    vrun "$name" "$@" LD_PRELOAD="$S/lib/libcushare.so" ASAN_OPTIONS="$ASAN" \
        "$S/bin/cushare-run" -- /bin/true
    [ "$RC" = 0 ] || fail "$name: cushare-run creating $dir: exit $RC"
    [ "$(stat -c '%a %u' "$dir")" = "700 $VU" ] || fail "$dir: $(stat -c '%a %u' "$dir")"
    [ "$(stat -c '%a %u' "$dir/cushared.log")" = "600 $VU" ] || fail "$name: the log's mode"
    local pid
    pid=$(as "$VU" "$S/bin/cusharectl" --socket "$dir/cushared.sock" status --json |
          grep -o '"pid": [0-9]*' | head -n 1 | sed 's/.*: //')
    PIDS+=("$pid")
    kill "$pid"
}
fresh freshxdg "$X/cushare" XDG_RUNTIME_DIR="$X"
# /tmp/cushare-<uid> where the victim may create it (on some CI machines
# /tmp is not writable by other users).
if [ "$(stat -c '%a' /tmp)" = 1777 ]; then
    fresh freshtmp "$RUNDIR"
else
    echo "/tmp is mode $(stat -c '%a' /tmp) here: the victim cannot create $RUNDIR; that step skipped"
fi
untouched "a fresh start"
echo "e2e_files: ok"
