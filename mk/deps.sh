#!/bin/sh
# Installs the Debian packages named on the command line that are missing.
# Used by the Makefile so `make demo` and `make test` work on a fresh Debian
# machine; does nothing (and needs no root) when everything is present.
# Host packages only: cross builds take the target's libraries from a
# sysroot (mk/sysroot.sh), never from dpkg's foreign architectures, so this
# never runs dpkg --add-architecture.
set -eu
missing=""
for p in "$@"; do
    case "$p" in
    *:*) echo "deps: $p: foreign-architecture packages are not installed here" \
              "(cross builds use mk/sysroot.sh)" >&2; exit 2 ;;
    esac
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$status" in
    *"install ok installed"*) continue ;;
    esac
    missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing:$missing" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=sudo
    else
        echo "deps: missing packages:$missing; run as root or install them" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
# A mirror caught mid-sync fails one index ("File has unexpected size"): try
# again once, then go on with what was fetched; apt-get install below still
# fails, with its own message, if a package cannot be had.
if ! $SUDO apt-get update -qq; then
    sleep 10
    $SUDO apt-get update -qq || echo "deps: apt-get update failed; trying the install anyway" >&2
fi
# --no-remove: never let an install take packages away (a host that has
# foreign-architecture -dev packages from older sfl versions: when a mirror
# lags for one architecture, apt would otherwise "solve" it by removing the
# native -dev packages and everything that depends on them).
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends --no-remove $missing >/dev/null
