#!/bin/sh
# make install into a DESTDIR, then use what it installed as a user would
# (docs/library.md; no coordinator, a few seconds):
#   - libsfl.so.X.Y.Z with soname libsfl.so.X (X.Y.Z from sfl/core/version.h)
#     and its dev link, libsfl.a, the headers, sfl.pc, the completions;
#   - the ABI: nm -D exports exactly public names (sfl_ and declared in an
#     installed header), each in the version node SFL_*; nothing internal
#     (sfl__, protobuf-c's code) leaks;
#   - every installed header compiles alone with -Wall -Werror as C11 and
#     as C++ (g++), and a C++ program links and runs against libsfl.so;
#   - examples/sfl-hello, as installed in DOCDIR/examples, built with its
#     3-line Makefile through pkg-config
#     (PKG_CONFIG_SYSROOT_DIR, PKG_CONFIG_PATH into DESTDIR): dynamically
#     (needs libsfl.so.X, runs with LD_LIBRARY_PATH into DESTDIR) and
#     statically (pkg-config --static, libsfl.a: no libsfl.so needed), both
#     run and recover the sparse model;
#   - every program's --version prints sfl/core/version.h's version, and the man
#     pages carry it;
#   - bash completion, loaded in a plain bash: every --word of each
#     program's --help is offered (or its _/- twin), every command of
#     sflctl's and sfl-pki's, and one completion per program.
set -eu
. tests/e2e/lib.sh

vh=libsfl/include/sfl/core/version.h
ver() { sed -n "s/^#define SFL_VERSION_$1 \([0-9]*\)$/\1/p" "$vh"; }
MAJOR=$(ver MAJOR)
VERSION=$MAJOR.$(ver MINOR).$(ver PATCH)
case $VERSION in [0-9]*.[0-9]*.[0-9]*) ;; *) fail "no version in $vh: '$VERSION'" ;; esac
D=$t/dest
P=/usr/local

step "make install DESTDIR=\$t/dest PREFIX=$P (version $VERSION)"
make --no-print-directory BUILD="$BIN" DESTDIR="$D" PREFIX=$P install > "$t/install.log" 2>&1 ||
    fail "make install: $(tail -5 "$t/install.log")"
grep -q '^ldconfig' "$t/install.log" && fail "ldconfig ran for a DESTDIR install"
L=$D$P/lib
{ [ -f "$L/libsfl.so.$VERSION" ] && [ ! -L "$L/libsfl.so.$VERSION" ]; } || fail "no $L/libsfl.so.$VERSION"
[ "$(readlink "$L/libsfl.so.$MAJOR")" = "libsfl.so.$VERSION" ] || fail "libsfl.so.$MAJOR link"
[ "$(readlink "$L/libsfl.so")" = "libsfl.so.$MAJOR" ] || fail "libsfl.so dev link"
for f in "$L/libsfl.a" "$L/pkgconfig/sfl.pc" "$D$P/include/sfl/core/version.h" "$D$P/bin/sfl-pki" \
    "$D$P/share/bash-completion/completions/sflctl"; do
    [ -f "$f" ] || fail "not installed: $f"
done
soname=$(readelf -d "$L/libsfl.so.$VERSION" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libsfl.so.$MAJOR" ] || fail "soname '$soname', not libsfl.so.$MAJOR"
echo "soname $soname"

step "the ABI: only public sfl_ names, in a version node"
nm -D --defined-only "$L/libsfl.so.$VERSION" > "$t/nm"
# "ADDR T name@@SFL_0.1"; the node itself is an absolute symbol "A SFL_0.1".
awk '$2 != "A" { print $3 }' "$t/nm" > "$t/exported"
n=$(wc -l < "$t/exported")
[ "$n" -ge 300 ] || fail "only $n exported symbols"
grep -v '@@SFL_[0-9][0-9.]*$' "$t/exported" > "$t/unversioned" && fail "without a version node: $(head -3 "$t/unversioned")"
sed 's/@@.*//' "$t/exported" | sort > "$t/names"
grep -v '^sfl_[a-z0-9]' "$t/names" > "$t/leaked" && fail "internal symbols exported: $(head -5 "$t/leaked")"
# Each name declared in an installed header (as a word: a call or a table).
cat "$D$P"/include/sfl/*.h "$D$P"/include/sfl/*/*.h "$D$P"/include/sfl/*/*.def | grep -o 'sfl_[a-z0-9_]*' | sort -u > "$t/declared"
comm -23 "$t/names" "$t/declared" > "$t/undeclared"
[ -s "$t/undeclared" ] && fail "exported but in no public header: $(head -5 "$t/undeclared")"
grep -qx sfl_version "$t/names" || fail "sfl_version not exported"
echo "$n symbols exported, all sfl_ and in the headers, node $(awk '$2 == "A" { print $3 }' "$t/nm")"

step "each installed header compiles alone (C11$(command -v g++ > /dev/null && echo ', C++11'))"
# <uv.h> (sfl/net/transport.h) needs POSIX's types under a strict -std=c11.
for h in "$D$P"/include/sfl/*.h "$D$P"/include/sfl/*/*.h; do
    h=${h#"$D$P"/include/sfl/}
    printf '#include <sfl/%s>\n' "$h" > "$t/h.c"
    gcc -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -pedantic -I"$D$P/include" \
        -fsyntax-only "$t/h.c" > "$t/h.log" 2>&1 || fail "C: sfl/$h: $(head -5 "$t/h.log")"
    if command -v g++ > /dev/null; then
        g++ -std=c++11 -x c++ -Wall -Wextra -Werror -I"$D$P/include" -fsyntax-only "$t/h.c" \
            > "$t/h.log" 2>&1 || fail "C++: sfl/$h: $(head -5 "$t/h.log")"
    fi
done
echo "$(find "$D$P/include/sfl" -name "*.h" | wc -l) headers"

export PKG_CONFIG_SYSROOT_DIR="$D" PKG_CONFIG_PATH="$L/pkgconfig"
[ "$(pkg-config --modversion sfl)" = "$VERSION" ] || fail "pkg-config --modversion sfl: $(pkg-config --modversion sfl 2>&1)"
echo "pkg-config --cflags --libs sfl: $(pkg-config --cflags --libs sfl)"
echo "pkg-config --static --libs sfl: $(pkg-config --static --libs sfl)"

if command -v g++ > /dev/null; then
    step "a C++ program links against libsfl.so"
    cat > "$t/cxx.cc" <<'CXX'
#include <cstdio>
#include <cstring>
#include <sfl/core/error.h>
#include <sfl/core/version.h>
int main() {
    std::printf("%s %s\n", sfl_version(), sfl_strerror(SFL_EDIM));
    return std::strcmp(sfl_version(), SFL_VERSION) != 0;
}
CXX
    # shellcheck disable=SC2046
    g++ -Wall -Werror -o "$t/cxx" "$t/cxx.cc" $(pkg-config --cflags --libs sfl) > "$t/cxx.log" 2>&1 ||
        fail "C++ build: $(head -5 "$t/cxx.log")"
    out=$(LD_LIBRARY_PATH="$L" "$t/cxx") || fail "C++ program: $out"
    [ "$out" = "$VERSION dimension mismatch" ] || fail "C++ program printed '$out'"
fi

step "examples/sfl-hello against the installed tree: shared"
# The installed copy (DOCDIR/examples), as a user without the source has it.
cp -r "$D$P/share/doc/sfl/examples/sfl-hello" "$t/hello"
cmp "$t/hello/sfl-hello.c" examples/sfl-hello/sfl-hello.c || fail "installed example differs"
make --no-print-directory -C "$t/hello" > "$t/hello.log" 2>&1 || fail "build: $(tail -5 "$t/hello.log")"
readelf -d "$t/hello/sfl-hello" | grep -q "(NEEDED).*\[libsfl.so.$MAJOR\]" ||
    fail "sfl-hello does not need libsfl.so.$MAJOR: $(readelf -d "$t/hello/sfl-hello" | grep NEEDED)"
LD_LIBRARY_PATH="$L" "$t/hello/sfl-hello" > "$t/hello.out" 2>&1 || fail "sfl-hello (shared): $(tail -3 "$t/hello.out")"
head -1 "$t/hello.out" | grep -qx "libsfl $VERSION (built against $VERSION)" || fail "$(head -1 "$t/hello.out")"
tail -1 "$t/hello.out"

step "examples/sfl-hello: static (pkg-config --static, libsfl.a)"
rm -f "$t/hello/sfl-hello"
make --no-print-directory -C "$t/hello" \
    LDLIBS="$(pkg-config --static --libs sfl | sed 's/-lsfl /-l:libsfl.a /')" > "$t/hello.log" 2>&1 ||
    fail "static build: $(tail -5 "$t/hello.log")"
readelf -d "$t/hello/sfl-hello" | grep -q 'libsfl' && fail "the static sfl-hello needs libsfl.so"
"$t/hello/sfl-hello" > "$t/hello.out" 2>&1 || fail "sfl-hello (static): $(tail -3 "$t/hello.out")"
tail -1 "$t/hello.out"

step "--version of every program: $VERSION"
for p in sfl-coordinator sfl-agent sflctl sfl-sim sfl-pki; do
    out=$("$D$P/bin/$p" --version) || fail "$p --version: exit $?"
    [ "$out" = "$p $VERSION" ] || fail "$p --version printed '$out'"
    grep -q "^\.TH .*\"$p $VERSION\"" "$D$P/share/man/man1/$p.1" || fail "$p.1 without the version"
done
out=$(deploy/pki/sfl-pki --version)
[ "$out" = "sfl-pki $VERSION" ] || fail "deploy/pki/sfl-pki --version printed '$out'"

step "bash completion of each program, in a bash without bash-completion"
C=$D$P/share/bash-completion/completions
# complete NAME WORD...: what bash offers for the last word.
complete_words() {
    _c=$C/$1
    shift
    bash --norc --noprofile -c '. "$1"; shift
        COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
        f=$(complete -p "$1" | sed "s/.*-F \([^ ]*\) .*/\1/")
        "$f" && printf "%s\n" "${COMPREPLY[@]}"' sh "$_c" "$@"
}
for p in sfl-coordinator sfl-agent sflctl sfl-sim sfl-pki; do
    bash --norc --noprofile -c ". '$C/$p' && complete -p $p" > /dev/null || fail "$p: no completion"
    complete_words "$p" "$p" - > "$t/offered" || fail "$p: completing '-' failed"
    "$D$P/bin/$p" --help | grep -o -- '--[a-z][a-z0-9_-]*' | sort -u > "$t/flags"
    while read -r f; do
        twin=$(echo "$f" | sed 's/^--//; y/_-/-_/; s/^/--/')
        grep -qx -- "$f" "$t/offered" || grep -qx -- "$twin" "$t/offered" ||
            fail "$p --help lists $f, the completion does not offer it"
    done < "$t/flags"
    # The commands: the indented first words of a "Commands:" section.
    "$D$P/bin/$p" --help | awk '/^Commands:$/ { c = 1; next } /^$/ { c = 0 }
        c && /^  [a-z]/ { print $1 }' | sort -u > "$t/cmds"
    complete_words "$p" "$p" '' > "$t/offered"
    while read -r c; do
        grep -qx -- "$c" "$t/offered" || fail "$p --help lists command $c, not completed"
    done < "$t/cmds"
    echo "$p: $(wc -l < "$t/flags") flags, $(wc -l < "$t/cmds") commands, all completed"
done
expect() { # expected-word NAME WORD...
    w=$1; shift
    complete_words "$@" > "$t/offered"
    grep -qx -- "$w" "$t/offered" || fail "'$*' completes to $(tr '\n' ' ' < "$t/offered"), not $w"
}
expect pause sflctl sflctl --config x.ini job pa
expect npy sflctl sflctl model export 1 out --format n
expect fediterht sfl-sim sfl-sim --clients 4 --algo fedi
expect fingerprint sfl-pki sfl-pki --days 30 'fi'
expect --check sfl-coordinator sfl-coordinator --ch
mkdir -p "$t/certs" && : > "$t/certs/agent-1.crt"
expect "$t/certs/agent-1.crt" sfl-agent sfl-agent --cert "$t/certs/ag"
echo "completions: sflctl job pa -> pause, --format n -> npy, --algo fedi -> fediterht, ..."
