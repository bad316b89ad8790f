#!/bin/sh
# make docker-base: the Dockerfile's base image without a registry.
#
#   deploy/docker/base-image.sh [--tarball-only] [--force]      (root)
#
# The Dockerfile builds FROM debian:$DEBIAN_TAG (its ARG line). This script
# makes that image with debootstrap --variant=minbase from a Debian mirror
# (the slim image's package set; the current bookworm, whatever the point
# release in the tag says) and imports it under exactly that name, so that
# `docker-compose build` and `docker-compose up` find it locally and never
# ask a registry. tests/docker/compose.sh (make test-docker) uses it too.
#
#   --tarball-only  stop after the root file system tarball (no engine needed)
#   --force         import again even if the engine already has the image
#
# Environment: DOCKER (the client, default docker; DOCKER_HOST as usual),
# SFL_DOCKER_DIR (where the tarball is cached, default build/docker: a second
# run takes seconds), DEBIAN_MIRROR (default http://deb.debian.org/debian).
# The last line says what was done; exit 0 or 1.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PROG="base-image"
B=${SFL_DOCKER_DIR:-$ROOT/build/docker}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DOCKER=${DOCKER:-docker}
T_BASE=${SFL_BASE_TIMEOUT:-900}

die() {
    echo "$PROG: error: $*" >&2
    exit 1
}
say() { echo "$PROG: $*"; }

tarball_only=0 force=0
for a in "$@"; do
    case $a in
    --tarball-only) tarball_only=1 ;;
    --force) force=1 ;;
    -h | --help)
        sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *) die "unknown argument '$a' (valid: --tarball-only, --force, --help)" ;;
    esac
done

tag=$(sed -n 's/^ARG DEBIAN_TAG=//p' "$ROOT/Dockerfile" | head -n 1)
case $tag in
'') die "no 'ARG DEBIAN_TAG=...' line in $ROOT/Dockerfile" ;;
12.* | 12) suite=bookworm ;;
*) die "DEBIAN_TAG=$tag in the Dockerfile: only bookworm (12.x) is made with debootstrap here" ;;
esac
base=debian:$tag
tarball=$B/debian-$tag.tar.gz
rfs=$B/rootfs.new
mkdir -p "$B"

if [ $tarball_only = 0 ]; then
    command -v "$DOCKER" >/dev/null 2>&1 || die "no docker client '$DOCKER' (Debian: apt-get install docker.io)"
    "$DOCKER" version >/dev/null 2>&1 ||
        die "the Docker engine does not answer ($DOCKER version: $("$DOCKER" version 2>&1 | tail -n 1)); start it (systemctl start docker) or set DOCKER_HOST"
    if [ $force = 0 ] && "$DOCKER" image inspect "$base" >/dev/null 2>&1; then
        say "$base is already in the engine (--force imports it again)"
        exit 0
    fi
fi

# Unmounts what an interrupted debootstrap left under $rfs (proc, sys, ...).
unmount_rfs() {
    awk -v d="$rfs" 'index($2, d) == 1 && (length($2) == length(d) || substr($2, length(d) + 1, 1) == "/") { print $2 }' /proc/mounts |
        sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
}

if [ -s "$tarball" ]; then
    how="cached $tarball"
else
    [ "$(id -u)" -eq 0 ] || die "debootstrap needs root: sudo make docker-base"
    command -v debootstrap >/dev/null 2>&1 || die "debootstrap is not installed (apt-get install debootstrap)"
    trap 'unmount_rfs; rm -rf --one-file-system "$rfs" "$tarball.tmp"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    unmount_rfs
    rm -rf --one-file-system "$rfs"
    say "debootstrap --variant=minbase $suite from $MIRROR (a minute or two; log $B/debootstrap.log)"
    # (not --foreground: on time-out its dpkg and wget go too)
    timeout "$T_BASE" debootstrap --variant=minbase "$suite" "$rfs" "$MIRROR" >"$B/debootstrap.log" 2>&1 ||
        die "debootstrap: $(tail -n 3 "$B/debootstrap.log")"
    # As the slim image: no package caches or lists, no host files.
    rm -rf "$rfs"/var/cache/apt/archives/*.deb "$rfs"/var/lib/apt/lists/* "$rfs"/tmp/* \
        "$rfs"/var/log/*.log "$rfs"/etc/hostname "$rfs"/etc/resolv.conf
    tar -C "$rfs" --numeric-owner -czf "$tarball.tmp" . || die "cannot write $tarball.tmp"
    mv -f "$tarball.tmp" "$tarball"
    unmount_rfs
    rm -rf --one-file-system "$rfs"
    trap - EXIT INT TERM
    how="debootstrap $suite, cached in $tarball"
fi
if [ $tarball_only = 1 ]; then
    say "$tarball ready ($how; not imported: --tarball-only)"
    exit 0
fi
"$DOCKER" import --change 'CMD ["bash"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    "$tarball" "$base" >"$B/import.log" 2>&1 || die "docker import: $(tail -n 3 "$B/import.log")"
size=$("$DOCKER" image inspect -f '{{.Size}}' "$base" | awk '{ printf "%.0f MB", $1 / 1e6 }')
say "$base imported ($how, $size): docker-compose build needs no registry now"
