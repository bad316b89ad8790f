#!/bin/sh
# Makes a sysroot for cross builds: Debian's packages of one architecture,
# unpacked into DIR, with no change to the host's dpkg or apt state.
#
#   mk/sysroot.sh ARCH DIR PKG...      e.g. mk/sysroot.sh armhf build/sysroot-armhf libuv1-dev
#
# apt-get runs with a private configuration (APT::Architecture=ARCH, its own
# sources, lists, package cache and an empty dpkg status file, all under
# DIR.apt/), resolves PKG... and their dependencies within that one
# architecture, downloads the .debs into DIR.apt/archives and unpacks them
# with dpkg-deb -x. Nothing is configured (no maintainer scripts run), so the
# links those would make (the BLAS/LAPACK alternatives) are made here, and
# absolute symlinks are rewritten to point inside DIR.
#
# Every package comes from one Release of one architecture, so the versions
# agree with each other whatever the host has installed; the host's dpkg
# architectures and packages stay as they were.
#
# DIR/.sfl-sysroot records what DIR was made from: when it matches, the
# script returns at once without the network. SYSROOT_UPDATE=1 fetches the
# indexes again (security updates) and remakes DIR; the .debs already
# downloaded are kept, so a remake downloads only what changed.
#
# Environment: SYSROOT_MIRROR (http://deb.debian.org/debian),
# SYSROOT_SECURITY (http://deb.debian.org/debian-security; empty: none),
# SYSROOT_SUITE (bookworm), SYSROOT_KEYRING
# (/usr/share/keyrings/debian-archive-keyring.gpg).
set -eu

if [ $# -lt 3 ]; then
    echo "usage: mk/sysroot.sh ARCH DIR PKG..." >&2
    exit 2
fi
arch=$1
dir=$2
shift 2
case "$arch" in
*[!a-z0-9]*|"") echo "sysroot: bad architecture '$arch'" >&2; exit 2 ;;
esac

mirror=${SYSROOT_MIRROR:-http://deb.debian.org/debian}
security=${SYSROOT_SECURITY-http://deb.debian.org/debian-security}
suite=${SYSROOT_SUITE:-bookworm}
keyring=${SYSROOT_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}

want=$(printf '%s\n' "sfl-sysroot 1" "arch $arch" "mirror $mirror" \
    "security $security" "suite $suite" "packages $(printf '%s\n' "$@" | sort -u | tr '\n' ' ')")
if [ "${SYSROOT_UPDATE:-0}" != 1 ] && [ -f "$dir/.sfl-sysroot" ] &&
   [ "$(sed '/^deb /,$d' "$dir/.sfl-sysroot")" = "$want" ]; then
    exit 0
fi

for t in apt-get dpkg-deb realpath; do
    if ! command -v "$t" >/dev/null 2>&1; then
        echo "sysroot: $t is missing (Debian's apt, dpkg and coreutils)" >&2
        exit 1
    fi
done
if [ ! -r "$keyring" ]; then
    echo "sysroot: $keyring is missing: apt-get install debian-archive-keyring" >&2
    exit 1
fi

apt=$(realpath -m "$dir.apt")
mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$apt/dpkg/updates" \
    "$apt/etc/sources.list.d" "$apt/etc/preferences.d" "$apt/log"
: > "$apt/dpkg/status"
{
    echo "deb [arch=$arch signed-by=$keyring] $mirror $suite main"
    echo "deb [arch=$arch signed-by=$keyring] $mirror $suite-updates main"
    [ -n "$security" ] &&
        echo "deb [arch=$arch signed-by=$keyring] $security $suite-security main"
} > "$apt/etc/sources.list"

# The host's apt.conf(.d) still apply (a proxy, say); everything that names
# a package, an architecture or a state file is private. The dpkg status
# file's directory is also where apt takes dpkg's lock, so the host's
# /var/lib/dpkg is never locked either. APT::Sandbox::User=root: the _apt
# user may not be able to write into the build tree.
aptget() {
    apt-get -q \
        -o APT::Architecture="$arch" -o APT::Architectures="$arch" \
        -o Dir::State="$apt" -o Dir::State::Lists="$apt/lists" \
        -o Dir::State::status="$apt/dpkg/status" \
        -o Dir::Cache="$apt" -o Dir::Cache::Archives="$apt/archives" \
        -o Dir::Etc::sourcelist="$apt/etc/sources.list" \
        -o Dir::Etc::sourceparts="$apt/etc/sources.list.d" \
        -o Dir::Etc::preferences="$apt/etc/preferences" \
        -o Dir::Etc::preferencesparts="$apt/etc/preferences.d" \
        -o Dir::Log="$apt/log" \
        -o APT::Sandbox::User=root -o Acquire::Languages=none \
        -o APT::Install-Recommends=false -o APT::Install-Suggests=false \
        -o Debug::NoLocking=true \
        "$@"
}

echo "sysroot: $arch packages of Debian $suite into $dir" >&2
# A mirror caught mid-sync fails one index ("File has unexpected size"):
# try once more before giving up.
# If one index still fails (seen: bookworm-security's armhf Packages behind
# its Release for days), go on without it: apt then takes those packages
# from the other suites, older but still one consistent set. Without the
# main suite's index there is nothing to build against.
indexes=complete
if ! aptget update -qq; then
    echo "sysroot: apt-get update failed; trying again in 10 s" >&2
    sleep 10
    if ! aptget update -qq; then
        indexes=incomplete
        echo "sysroot: warning: going on without the indexes that failed above;" \
             "SYSROOT_UPDATE=1 make ... tries again" >&2
    fi
fi
if ! ls "$apt/lists/"*"_dists_${suite}_main_binary-${arch}_Packages"* >/dev/null 2>&1; then
    echo "sysroot: no $suite $arch package index from $mirror" >&2
    exit 1
fi

# The packages to unpack: PKG... and everything they depend on, as apt
# resolves them against an empty system ("Inst NAME [OLD] (VERSION ...").
plan=$(aptget -s install "$@") || {
    echo "$plan" >&2
    echo "sysroot: apt cannot resolve these packages for $arch" >&2
    exit 1
}
# A package in a dependency cycle (libc6, libgcc-s1) has " []" after it.
list=$(echo "$plan" | sed -n 's/^Inst \([^ ]*\) (\([^ ]*\) [^[]*\[\([a-z0-9]*\)\]).*/\1 \2 \3/p')
if [ -z "$list" ] ||
   [ "$(echo "$list" | wc -l)" != "$(echo "$plan" | grep -c '^Inst ')" ]; then
    echo "$plan" >&2
    echo "sysroot: cannot read apt's plan above" >&2
    exit 1
fi
aptget -y -qq --download-only install "$@" >/dev/null

tmp="$dir.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
echo "$list" | while read -r name version parch; do
    # The pool's file name has the epoch's colon as %3a.
    deb="$apt/archives/${name}_$(echo "$version" | sed 's/:/%3a/')_$parch.deb"
    if [ ! -f "$deb" ]; then
        echo "sysroot: $deb was not downloaded" >&2
        exit 1
    fi
    dpkg-deb -x "$deb" "$tmp"
done

# Absolute symlinks (/usr/lib/.../libfoo.so -> /lib/.../libfoo.so.1) would
# point into the host: make them relative, within the root.
find "$tmp" -type l | while read -r link; do
    target=$(readlink "$link")
    case "$target" in
    /*) ln -sfn "$(realpath -ms --relative-to="$(dirname "$link")" "$tmp$target")" "$link" ;;
    esac
done

# update-alternatives, run by libblas3's and liblapack3's postinst, makes
# libblas.so.3 -> blas/libblas.so.3 (and libblas.so, liblapack.*): the
# reference implementations, as a fresh system has them.
for f in "$tmp"/usr/lib/*/blas/lib*.so* "$tmp"/usr/lib/*/lapack/lib*.so*; do
    [ -e "$f" ] || continue
    up=$(dirname "$(dirname "$f")")/$(basename "$f")
    [ -e "$up" ] || ln -s "$(basename "$(dirname "$f")")/$(basename "$f")" "$up"
done

# No ld.so.cache (ldconfig is not run): an empty one keeps the loader, under
# qemu-user -L DIR, from reading the host's /etc/ld.so.cache instead; it
# then searches the root's multiarch directories.
mkdir -p "$tmp/etc"
: > "$tmp/etc/ld.so.cache"

rm -rf "$tmp/usr/share/doc" "$tmp/usr/share/man" "$tmp/usr/share/locale" \
    "$tmp/usr/share/info" "$tmp/usr/share/lintian"
{
    echo "$want"
    echo "deb indexes: $indexes"
    echo "$list" | sed 's/^/deb /'
} > "$tmp/.sfl-sysroot"
rm -rf "$dir"
mv "$tmp" "$dir"
echo "sysroot: $dir: $(echo "$list" | wc -l) packages" >&2
