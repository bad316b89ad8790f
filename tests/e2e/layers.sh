#!/bin/sh
# libsfl's layers (docs/design.md section 1): each area of libsfl/src and
# each public header includes only headers of its own area and the areas
# below it, so no include cycle can form:
#   core <- data <- model <- algo;  core <- dp <- algo;  core <- crypto <- wire;
#   core <- net
# (wire takes the sizes of what it carries from crypto's headers: sfl/wire/msg.h)
# (dp, noise and privacy accounting, needs nothing but core; the vertical
# algorithms draw their noise from it. wire carries parameters as plain
# name/value lists, param.h, and never needs an algorithm or a loss).
set -eu
. tests/e2e/lib-step.sh
fail() { echo "FAIL: $*"; exit 1; }

area_of() { # header stem -> area
    case $1 in
    alloc | error | file | ini | rng | topk | vec | param | log | suggest | version) echo core ;;
    csr | csv | dataset | idx | libsvm | partition | synth | readfile) echo data ;;
    dict | eval | loss | loss_int) echo model ;;
    algo | algo_int | client | fold | vertical) echo algo ;;
    msg | msg_int | spcodec | roundmetrics) echo wire ;;
    seal | savec | shamir | secagg) echo crypto ;;
    dp) echo dp ;;
    grpc | grpcconn | grpcframe | srcmap | transport | transport_int) echo net ;;
    *) echo unknown ;;
    esac
}
allowed() { # area -> areas it may include
    case $1 in
    core) echo "core" ;;
    data) echo "core data" ;;
    model) echo "core data model" ;;
    algo) echo "core data model algo dp" ;;
    wire) echo "core crypto wire" ;;
    crypto) echo "core crypto" ;;
    net) echo "core net" ;;
    dp) echo "core dp" ;;
    esac
}

step "libsfl's sources and headers include only their own layer and those below"
bad=0
for f in libsfl/src/*/*.c libsfl/src/*/*.h libsfl/include/sfl/*.h; do
    [ -f "$f" ] || continue
    case $f in
    libsfl/include/*) from=$(area_of "$(basename "$f" .h)") ;;
    *) from=$(basename "$(dirname "$f")") ;;
    esac
    [ "$from" = unknown ] && { echo "no layer for $f"; bad=1; continue; }
    ok=$(allowed "$from")
    for h in $(sed -n 's/^#include "\(sfl\/\|data\/\|net\/\)\{0,1\}\([a-z_]*\)\.h".*/\2/p' "$f"); do
        to=$(area_of "$h")
        case " $ok " in
        *" $to "*) ;;
        *) echo "$f ($from) includes $h.h ($to)"; bad=1 ;;
        esac
    done
done
[ "$bad" -eq 0 ] || fail "layering violated (see above)"
echo "layers: ok"
