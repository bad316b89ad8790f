#!/bin/sh
# rootfs-check.sh: the runtime stage of Dockerfile without a container
# engine. A Debian bookworm minbase tree (the base image's tarball from
# deploy/docker/base-image.sh: debootstrap, the packages of
# debian:bookworm-slim) gets the stage's RUN line exactly as written in
# Dockerfile, the programs as `COPY --from=build` puts them (this tree's
# build/, stripped: the build stage runs the same `make` on the same
# release), the image's ENV; then the compose services run in it as the
# image's user 10001 with the image's paths: pki, data, coordinator (and its
# health check), three agents (shard claims, certificates), sflctl; a job
# must finish. It shows that the runtime package list is complete and that
# the entrypoint works with what the slim image has (dash, bash, coreutils,
# openssl). Needs root, debootstrap and the Debian mirror (DEBIAN_MIRROR);
# about a minute.
#
#   deploy/docker/rootfs-check.sh [ROOTFS]    (default /tmp/sfl-rootfs; an
#                                              existing tree is reused)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
R=${1:-/tmp/sfl-rootfs}
BIN=${SFL_BIN:-$ROOT/build}
say() { echo "rootfs-check: $*"; }
die() {
    echo "rootfs-check: FAIL: $*" >&2
    exit 1
}
[ "$(id -u)" -eq 0 ] || die "needs root (chroot)"
for b in sfl-coordinator sfl-agent sflctl sfl-sim; do
    [ -x "$BIN/$b" ] || die "no $BIN/$b (run make)"
done

pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    sleep 0.5
    for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
    umount "$R/proc" 2>/dev/null || true
    umount "$R/dev" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ ! -x "$R/bin/sh" ]; then
    # The image's base as make docker-base makes it (its cached tarball).
    say "the base image's tree (deploy/docker/base-image.sh --tarball-only) in $R"
    "$ROOT/deploy/docker/base-image.sh" --tarball-only >"$R.log" 2>&1 || die "base-image.sh: $(tail -n 3 "$R.log")"
    tarball=$(sed -n 's/^base-image: \(.*\.tar\.gz\) ready .*/\1/p' "$R.log")
    [ -s "$tarball" ] || die "base-image.sh named no tarball: $(tail -n 1 "$R.log")"
    mkdir -p "$R"
    tar -C "$R" --numeric-owner -xzf "$tarball" || die "cannot unpack $tarball into $R"
fi
mountpoint -q "$R/proc" || mount -t proc proc "$R/proc"
mountpoint -q "$R/dev" || mount --bind /dev "$R/dev"
cp /etc/resolv.conf "$R/etc/resolv.conf"

# The runtime stage: its first RUN instruction, continuation lines joined,
# run by /bin/sh -c as docker does.
run=$(awk '
    /^FROM / { stage++ }
    stage == 2 && /^RUN / { on = 1; sub(/^RUN /, "") }
    on { line = line " " $0; if ($0 !~ /\\$/) { print line; exit } }' "$ROOT/Dockerfile" | sed 's/\\$//; s/\\ / /g')
[ -n "$run" ] || die "no RUN instruction in the runtime stage of Dockerfile"
if ! chroot "$R" id sfl >/dev/null 2>&1; then
    say "RUN (runtime stage)"
    chroot "$R" /bin/sh -c "$run" >"$R.run.log" 2>&1 || die "the runtime RUN failed: $(tail -5 "$R.run.log")"
fi
# COPY --from=build /out/ /usr/local/bin/
install -m 0755 -s "$BIN/sfl-coordinator" "$BIN/sfl-agent" "$BIN/sflctl" "$BIN/sfl-sim" "$R/usr/local/bin/"
install -m 0755 "$ROOT/deploy/pki/sfl-pki" "$R/usr/local/bin/sfl-pki"
install -m 0755 "$ROOT/deploy/docker/entrypoint.sh" "$R/usr/local/bin/sfl-entrypoint"
for b in sfl-coordinator sfl-agent sflctl sfl-sim; do
    if chroot "$R" ldd "/usr/local/bin/$b" | grep "not found"; then
        die "$b: shared libraries missing from the runtime stage"
    fi
done
say "runtime stage: every library the programs need is installed"

# Fresh volumes, owned as the image makes them; the service name resolves
# (the compose network's DNS).
for d in pki data var/lib/sfl var/lib/sfl-agent; do
    rm -rf "${R:?}/$d"
    install -d -o 10001 -g 10001 -m 0700 "$R/$d"
done
echo "127.0.0.1 localhost coordinator" >"$R/etc/hosts"
rm -f "$R/tmp/sfl-role"

# As in the image: ENV, USER 10001:10001, WORKDIR /var/lib/sfl.
# [VAR=value...] ROLE [ARGS...]: the entrypoint as the image runs it; with
# bg=1 (in a background subshell) the subshell becomes the service, so its
# pid is the one to stop.
svc() {
    # shellcheck disable=SC2016 # expanded by the inner sh
    set -- chroot --userspec=10001:10001 "$R" /usr/bin/env -i HOME=/var/lib/sfl \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        SFL_BIN_DIR=/usr/local/bin SFL_PKI_DIR=/pki SFL_DATA_DIR=/data \
        SFL_STATE_DIR=/var/lib/sfl SFL_AGENT_STATE_DIR=/var/lib/sfl-agent \
        SFL_SHARDS=3 SFL_DIM=200 SFL_SUPPORT=5 SFL_SAMPLES=60 SFL_JOB_ROUNDS=10 \
        SFL_JOB_COHORT=3 SFL_JOB_OVERSELECT=0 SFL_JOB_TAU=5 SFL_JOB_MIN_QUORUM=2 \
        SFL_METRICS_LISTEN=127.0.0.1:29464 SFL_LISTEN=127.0.0.1:27443 SFL_ADMIN_LISTEN=127.0.0.1:27444 \
        SFL_COORDINATOR=coordinator:27443 \
        /bin/sh -c 'while [ $# -gt 0 ]; do case $1 in *=*) export "$1"; shift ;; *) break ;; esac; done
            cd /var/lib/sfl && exec sfl-entrypoint "$@"' sh "$@"
    if [ "${bg:-0}" = 1 ]; then exec "$@"; fi
    "$@"
}
L=$R.logs
rm -rf "$L"
mkdir -p "$L"
svc pki >"$L/pki.log" 2>&1 || die "pki: $(tail -3 "$L/pki.log")"
svc data >"$L/data.log" 2>&1 || die "data: $(tail -3 "$L/data.log")"
(bg=1 svc SFL_COORDINATOR_ARGS="--select_wait_ms 300 --pace_min_ms 100 --tick_ms 50" coordinator) \
    >"$L/coordinator.log" 2>&1 &
pids="$pids $!"
n=0
until svc SFL_RUN_DIR=/tmp health >/dev/null 2>&1; do
    n=$((n + 1))
    [ $n -le 100 ] || die "the health check did not pass: $(tail -3 "$L/coordinator.log")"
    sleep 0.1
done
say "coordinator healthy (sfl-entrypoint health: GET /metrics over bash /dev/tcp)"
for i in 1 2 3; do
    (bg=1 svc SFL_AGENT_NAME="agent-$i" SFL_AGENT_STATE_DIR="/var/lib/sfl-agent/$i" \
        SFL_RUN_DIR="/var/lib/sfl-agent" SFL_AGENT_ARGS="--backoff_min_ms 100" agent) \
        >"$L/agent-$i.log" 2>&1 &
    pids="$pids $!"
done
n=0
until grep -q "event=job_state job=1 state=finished" "$L/coordinator.log"; do
    n=$((n + 1))
    [ $n -le 300 ] || die "the job did not finish: $(tail -5 "$L/coordinator.log")"
    sleep 0.1
done
svc ctl jobs >"$L/ctl.log" 2>&1 || die "sflctl: $(cat "$L/ctl.log")"
grep -Eq "^1 +demo +fediterht +finished +10/10 " "$L/ctl.log" || die "sflctl jobs: $(cat "$L/ctl.log")"
owner=$(stat -c %u "$R/var/lib/sfl/coordinator.db")
[ "$owner" = 10001 ] || die "coordinator.db is owned by uid $owner, not 10001"
say "pki, data, coordinator, 3 agents and sflctl ran as uid 10001 in the runtime stage; job 1 finished (logs: $L)"
