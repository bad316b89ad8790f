#!/bin/sh
# The layers (docs/design.md section 1): tests/layers.py resolves every
# include of libsfl/, server/, ctl/, client-agent/ and sim/ the way the
# compiler does and fails on one that runs up a layer, into another program
# or into libsfl's internals from a program. First it must catch planted
# violations, each in a copy of the sources, one at a time; then the tree.
set -eu
. tests/e2e/lib-step.sh
fail() { echo "FAIL: $*"; exit 1; }

t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

# The sources and the Makefile the checker asks for -I folders: a copy.
find libsfl server ctl client-agent sim -name '*.[ch]' -o -name '*.inc' -o -name '*.def' > "$t/list"
mkdir "$t/tree"
tar -cf - Makefile mk -T "$t/list" | tar -xf - -C "$t/tree"

# plant FILE LINE MESSAGE: LINE appended to FILE in the copy. The check
# judges each include line on its own, so all plants go into one run (the
# run must fail) and each must have its own line: MESSAGE at FILE:N.
: > "$t/want"
plant() {
    printf '%s\n' "$2" >> "$t/tree/$1"
    n=$(wc -l < "$t/tree/$1")
    case $3 in WARN*) lvl=WARN; msg=${3#WARN } ;; *) lvl=FAIL; msg=$3 ;; esac
    printf '%s %s:%s: %s\n' "$lvl" "$1" "$n" "$msg" >> "$t/want"
}

step "planted upward, cross-program and internal includes fail the check, each named"
plant libsfl/src/core/vec.c '#include "model/loss_int.h"' \
    'upward include libsfl/core -> libsfl/model'
plant libsfl/include/sfl/core/vec.h '#include <sfl/algo/algo.h>' \
    'upward include libsfl/core -> libsfl/algo'
plant libsfl/src/net/grpc.c '#  include "../../../server/store/store.h"' \
    'libsfl includes a program: libsfl/net -> server/store'
plant libsfl/src/crypto/seal.c '#include "ctl.h"' \
    'libsfl includes a program: libsfl/crypto -> ctl'
plant client-agent/agent.c '#include "../../server/coord.h"' \
    'one program includes another: client-agent -> server'
plant sim/options.c '  # include "store/store.h"' \
    'one program includes another: sim -> server/store'
plant sim/sim.h '#include "data/readfile.h"' \
    'sim -> libsfl internals libsfl/data'
plant libsfl/src/dp/dp.c '#include "sfl/sfl.h"' \
    'upward include libsfl/dp -> libsfl/umbrella'
plant server/store/store.c '#include "job/round.h"' \
    'upward include server/store -> server/job'
plant server/job/model.c '#include "coord_int.h"' \
    'upward include server/job -> server'
plant server/round/plain.c '#include "service/admin.h"' \
    'WARN upward include server/round -> server/service'
plant ctl/print.c '#include "round/driver.h"' \
    'one program includes another: ctl -> server/round'
plant libsfl/src/core/rng.c '/* #include "model/loss.h" */' 'NONE'
grep -v ' NONE$' "$t/want" > "$t/want2"
if tests/layers.py --root "$t/tree" > "$t/out" 2>&1; then
    cat "$t/out"; fail "the check passed over the planted includes"
fi
while read -r want; do
    grep -F "$want" "$t/out" || { cat "$t/out"; fail "no line '$want'"; }
done < "$t/want2"
! grep -F libsfl/src/core/rng.c "$t/out" || fail "an include in a comment was checked"

step "every include of libsfl, server/, ctl/, client-agent/ and sim/ runs down its layers"
tests/layers.py || fail "layering violated (the FAIL lines above)"
