#!/bin/sh
# Installs the Debian packages named on the command line that are missing.
# Used by the Makefile so `make demo` and `make test` work on a fresh Debian
# machine; does nothing (and needs no root) when everything is present.
# A name PKG:ARCH (e.g. libuv1-dev:arm64, for `make CROSS=...`) is the
# package of a foreign architecture: ARCH is added to dpkg's architectures
# (multiarch) first if it is not there yet.
set -eu
missing=""
archs=""
native=$(dpkg --print-architecture)
known=" $native $(dpkg --print-foreign-architectures | tr '\n' ' ') "
for p in "$@"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$status" in
    *"install ok installed"*) continue ;;
    esac
    missing="$missing $p"
    case "$p" in
    *:*)
        a=${p##*:}
        case "$known $archs " in
        *" $a "*) ;;
        *) archs="$archs $a" ;;
        esac
        ;;
    esac
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
for a in $archs; do
    echo "deps: dpkg --add-architecture $a" >&2
    $SUDO dpkg --add-architecture "$a"
done
export DEBIAN_FRONTEND=noninteractive
# A mirror caught mid-sync fails one index ("File has unexpected size"): try
# again once, then go on with what was fetched; apt-get install below still
# fails, with its own message, if a package cannot be had.
if ! $SUDO apt-get update -qq; then
    sleep 10
    $SUDO apt-get update -qq || echo "deps: apt-get update failed; trying the install anyway" >&2
fi
# --no-remove: never let an install take packages away. Multi-Arch: same
# packages must have one version across architectures; when a mirror lags
# for one of them, apt would otherwise "solve" it by removing the native
# -dev packages (and everything that depends on them).
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends --no-remove $missing >/dev/null
