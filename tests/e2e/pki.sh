#!/bin/sh
# End-to-end checks of deploy/pki/sfl-pki: real openssl, real files,
# certificates checked with `openssl verify` and their fields read back.
#
# sfl-pki kit: the archive's members and modes (never the CA key), no
# overwrite without --force, no partial archive, bad input refused; then
# the kit unpacked into a scratch root by its README's own line, and
# sfl-agent started by the kit unit's ExecStart with the kit's agent.ini,
# untouched, joins a running coordinator.
set -eu
. tests/e2e/lib.sh
PKI=${SFL_PKI:-deploy/pki/sfl-pki}
pki() { sh "$PKI" "$@"; }
# mode of a file as ls shows it, e.g. -rw-------
mode() { ls -l "$1" | cut -c1-10; }
subject() { openssl x509 -in "$1" -noout -subject -nameopt RFC2253 | sed 's/^subject=//'; }
verify() { openssl verify -CAfile "$t/ca/ca.crt" "$@" >/dev/null 2>&1; }

# Usage and errors: --help succeeds, misuse exits 2 with a message.
step "Usage and errors: --help succeeds, misuse exits 2 with a message"
pki --help | grep -q 'coordinator DIR NAME' || fail "--help text"
for args in "" "frobnicate $t/x" "agent" "agent $t/ca" "--days" "--days 0 init $t/x" \
    "--bogus init $t/x" "--key-type" "--key-type rsa init $t/x"; do
    # shellcheck disable=SC2086
    if pki $args >"$t/out" 2>&1; then fail "'$args' succeeded"; else rc=$?; fi
    [ "$rc" -eq 2 ] || fail "'$args' exit $rc, want 2"
    grep -q "sfl-pki: " "$t/out" || fail "'$args' said nothing useful: $(cat "$t/out")"
done
pki agent "$t/none" a1 >"$t/out" 2>&1 && fail "agent without a CA succeeded"
grep -q "no CA in" "$t/out" || fail "missing CA message: $(cat "$t/out")"

# The CA: P-256 key mode 0600, self-signed, a CA that may sign leaves only.
step "The CA: P-256 key mode 0600, self-signed, a CA that may sign leaves only"
pki init "$t/ca" >/dev/null
[ "$(mode "$t/ca/ca.key")" = "-rw-------" ] || fail "ca.key mode $(mode "$t/ca/ca.key")"
openssl verify -CAfile "$t/ca/ca.crt" "$t/ca/ca.crt" >/dev/null || fail "CA does not verify"
openssl x509 -in "$t/ca/ca.crt" -noout -text > "$t/ca.txt"
grep -q 'CA:TRUE, pathlen:0' "$t/ca.txt" || fail "CA basicConstraints"
grep -q 'Certificate Sign' "$t/ca.txt" || fail "CA keyUsage"
grep -qE 'prime256v1|P-256' "$t/ca.txt" || fail "CA key is not P-256"
pki init "$t/ca" >"$t/out" 2>&1 && fail "init over an existing CA succeeded"
grep -q 'already holds a CA' "$t/out" || fail "init overwrite message"

# The coordinator: server-only, names localhost, 127.0.0.1, ::1, its name and extras.
step "The coordinator: server-only, names localhost, 127.0.0.1, ::1, its name and extras"
pki coordinator "$t/ca" coord extra.example.org 10.9.8.7 DNS:alt.example IP:fd00::1 >/dev/null
c=$t/ca/coordinator/coord.crt
[ "$(mode "$t/ca/coordinator/coord.key")" = "-rw-------" ] || fail "coordinator key mode"
verify -purpose sslserver "$c" || fail "coordinator does not verify as a server"
verify -purpose sslclient "$c" && fail "coordinator verifies as a client"
for h in localhost coord extra.example.org alt.example; do
    verify -verify_hostname "$h" "$c" || fail "coordinator does not carry DNS:$h"
done
for ip in 127.0.0.1 ::1 10.9.8.7 fd00::1; do
    verify -verify_ip "$ip" "$c" || fail "coordinator does not carry IP:$ip"
done
verify -verify_hostname evil.example.org "$c" && fail "coordinator matches evil.example.org"
verify -verify_ip 127.0.0.2 "$c" && fail "coordinator matches 127.0.0.2"
[ "$(subject "$c")" = "CN=coord,OU=coordinator,O=sfl" ] || fail "coordinator subject $(subject "$c")"

# Agents and admins: client-only, CN is the id, OU is the role.
# A fleet's front-end: server for the agents and client of the master, OU
# coordinator (agents accept only that role as their coordinator); a
# PostgreSQL server certificate: server-only, OU postgres.
step "Front-ends: server and client, OU coordinator; PostgreSQL: server-only, OU postgres"
pki frontend "$t/ca" fe1 frontend >/dev/null
c=$t/ca/frontend/fe1.crt
[ "$(mode "$t/ca/frontend/fe1.key")" = "-rw-------" ] || fail "front-end key mode"
verify -purpose sslserver "$c" || fail "front-end does not verify as a server"
verify -purpose sslclient "$c" || fail "front-end does not verify as a client"
verify -verify_hostname frontend "$c" || fail "front-end does not carry DNS:frontend"
verify -verify_hostname fe1 "$c" || fail "front-end does not carry DNS:fe1"
[ "$(subject "$c")" = "CN=fe1,OU=coordinator,O=sfl" ] || fail "front-end subject $(subject "$c")"
pki postgres "$t/ca" pg db.example >/dev/null
c=$t/ca/postgres/pg.crt
verify -purpose sslserver "$c" || fail "postgres does not verify as a server"
verify -purpose sslclient "$c" && fail "postgres verifies as a client"
verify -verify_hostname db.example "$c" || fail "postgres does not carry DNS:db.example"
[ "$(subject "$c")" = "CN=pg,OU=postgres,O=sfl" ] || fail "postgres subject $(subject "$c")"
pki frontend "$t/ca" "bad/name" >"$t/out" 2>&1 && fail "front-end with a bad name succeeded"

step "Agents and admins: client-only, CN is the id, OU is the role"
pki agent "$t/ca" agent-7 >"$t/agent.out"
pki admin "$t/ca" alice >/dev/null
a=$t/ca/agent/agent-7.crt
verify -purpose sslclient "$a" || fail "agent does not verify as a client"
verify -purpose sslserver "$a" && fail "agent verifies as a server"
verify -purpose sslclient "$t/ca/admin/alice.crt" || fail "admin does not verify"
[ "$(subject "$a")" = "CN=agent-7,OU=agent,O=sfl" ] || fail "agent subject $(subject "$a")"
[ "$(subject "$t/ca/admin/alice.crt")" = "CN=alice,OU=admin,O=sfl" ] || fail "admin subject"
[ "$(mode "$t/ca/agent/agent-7.key")" = "-rw-------" ] || fail "agent key mode"
[ "$(mode "$t/ca/admin/alice.key")" = "-rw-------" ] || fail "admin key mode"
# the key belongs to the certificate
[ "$(openssl pkey -in "$t/ca/agent/agent-7.key" -pubout)" = \
  "$(openssl x509 -in "$a" -noout -pubkey)" ] || fail "agent key does not match its certificate"

# The fingerprint is SHA-256 over the DER certificate, as sfl computes it.
step "The fingerprint is SHA-256 over the DER certificate, as sfl computes it"
fp=$(pki fingerprint "$a")
want=$(openssl x509 -in "$a" -outform DER | openssl dgst -sha256 -r | cut -d' ' -f1)
[ "$fp" = "$want" ] || fail "fingerprint $fp, want $want"
grep -q "fingerprint $fp" "$t/agent.out" || fail "agent creation does not print the fingerprint"
pki fingerprint "$t/nonexistent.crt" >/dev/null 2>&1 && fail "fingerprint of a missing file"

# No silent overwrite; --force replaces (a new key, a new fingerprint).
step "No silent overwrite; --force replaces (a new key, a new fingerprint)"
pki agent "$t/ca" agent-7 >/dev/null 2>&1 && fail "agent overwrite without --force"
pki --force agent "$t/ca" agent-7 >/dev/null
[ "$(pki fingerprint "$a")" != "$fp" ] || fail "--force kept the old certificate"

# Names that are not safe as a CN and a file name are refused, nothing written.
step "Names that are not safe as a CN and a file name are refused, nothing written"
for bad in ../evil "a b" -x .hidden "$(printf 'x%.0s' $(seq 65))" 'a/b' 'a$b'; do
    if pki agent "$t/ca" "$bad" >/dev/null 2>&1; then fail "agent name '$bad' accepted"; fi
done
[ "$(ls "$t/ca/agent")" = "$(printf 'agent-7.crt\nagent-7.key')" ] || fail "stray files: $(ls "$t/ca/agent")"
pki coordinator "$t/ca" c2 'bad name' >/dev/null 2>&1 && fail "bad SAN accepted"
pki coordinator "$t/ca" c2 IP:not-an-ip >/dev/null 2>&1 && fail "bad IP SAN accepted"
[ ! -e "$t/ca/coordinator/c2.crt" ] || fail "c2 written despite a bad SAN"

# Validity: --days sets the leaf lifetime.
step "Validity: --days sets the leaf lifetime"
pki --days 10 agent "$t/ca" short >/dev/null
s=$t/ca/agent/short.crt
openssl x509 -in "$s" -noout -checkend $((9 * 86400)) >/dev/null || fail "--days 10 expires too soon"
openssl x509 -in "$s" -noout -checkend $((11 * 86400)) >/dev/null && fail "--days 10 lasts too long"

step "--key-type ed25519: an Ed25519 agent under the P-256 CA, and an all-Ed25519 CA"
pki --key-type ed25519 agent "$t/ca" ed >/dev/null
openssl x509 -in "$t/ca/agent/ed.crt" -noout -text | grep -q "Public Key Algorithm: ED25519" ||
    fail "--key-type ed25519 did not make an Ed25519 key"
[ "$(stat -c %a "$t/ca/agent/ed.key")" = 600 ] || fail "Ed25519 key not mode 0600"
openssl verify -CAfile "$t/ca/ca.crt" "$t/ca/agent/ed.crt" >/dev/null || fail "Ed25519 leaf does not verify"
pki --key-type=ed25519 init "$t/edca" >/dev/null
pki --key-type ed25519 agent "$t/edca" a >/dev/null
openssl x509 -in "$t/edca/ca.crt" -noout -text | grep -q "Signature Algorithm: ED25519" ||
    fail "--key-type ed25519 init did not make an Ed25519 CA"
openssl verify -CAfile "$t/edca/ca.crt" "$t/edca/agent/a.crt" >/dev/null ||
    fail "Ed25519 CA's leaf does not verify"

# Another CA's agent does not verify against this one.
step "Another CA's agent does not verify against this one"
pki init "$t/other" >/dev/null
pki agent "$t/other" agent-7 >/dev/null
verify -purpose sslclient "$t/other/agent/agent-7.crt" && fail "other CA's agent verifies"


# The startup kit: one archive, the right members and modes, no CA key.
step "sfl-pki kit: one archive, its members and modes, never the CA key"
KPK=$(printf 'ab%.0s' $(seq 32))
kit() { pki kit "$t/ca" "$@"; }
mkdir "$t/kits"
kit pi-1 --coordinator coord.example.org:7443 --coordinator-pk "$KPK" --out "$t/kits/pi-1.tar.gz" \
    >"$t/kit.out" 2>&1 || fail "kit: $(cat "$t/kit.out")"
grep -q "^created $t/kits/pi-1.tar.gz " "$t/kit.out" || fail "kit does not print its archive: $(cat "$t/kit.out")"
grep -q "sudo tar -xzf pi-1.tar.gz -C /$" "$t/kit.out" || fail "kit does not print the commands"
[ "$(mode "$t/kits/pi-1.tar.gz")" = "-rw-------" ] || fail "archive mode $(mode "$t/kits/pi-1.tar.gz")"
tar -tvzf "$t/kits/pi-1.tar.gz" | awk '{ print $1, $2, $6 }' >"$t/members"
printf '%s\n' "drwxr-x--- 0/0 etc/sfl/" "-rw-r--r-- 0/0 etc/sfl/README.kit" \
    "-rw-r----- 0/0 etc/sfl/agent.ini" "-rwxr-xr-x 0/0 etc/sfl/kit-install.sh" \
    "drwxr-x--- 0/0 etc/sfl/pki/" "-rw-r--r-- 0/0 etc/sfl/pki/ca.crt" \
    "drwxr-x--- 0/0 etc/sfl/pki/agent/" "-rw-r--r-- 0/0 etc/sfl/pki/agent/pi-1.crt" \
    "-rw------- 0/0 etc/sfl/pki/agent/pi-1.key" \
    "-rw-r--r-- 0/0 etc/systemd/system/sfl-agent.service" >"$t/want"
diff "$t/want" "$t/members" >"$t/diff" || fail "kit members: $(cat "$t/diff")"
mkdir "$t/x"
tar -xzf "$t/kits/pi-1.tar.gz" -C "$t/x"
grep -rqF -- "$(sed -n 2p "$t/ca/ca.key")" "$t/x" && fail "the kit holds the CA key"
cmp -s "$t/x/etc/sfl/pki/ca.crt" "$t/ca/ca.crt" || fail "the kit's ca.crt is not the CA's"
cmp -s "$t/x/etc/sfl/pki/agent/pi-1.key" "$t/ca/agent/pi-1.key" || fail "the kit's key"
verify -purpose sslclient "$t/x/etc/sfl/pki/agent/pi-1.crt" || fail "the kit's certificate"
[ "$(subject "$t/x/etc/sfl/pki/agent/pi-1.crt")" = "CN=pi-1,OU=agent,O=sfl" ] || fail "kit subject"
cmp -s "$t/x/etc/systemd/system/sfl-agent.service" deploy/raspberrypi/sfl-agent.service ||
    fail "the kit's unit is not deploy/raspberrypi's"
for kv in "coordinator = coord.example.org:7443" "server_name = coord.example.org" \
    "ca = /etc/sfl/pki/ca.crt" "cert = /etc/sfl/pki/agent/pi-1.crt" \
    "key = /etc/sfl/pki/agent/pi-1.key" "coordinator_pk = $KPK" \
    "data = libsvm:/var/lib/sfl-agent/train.svm" "state_dir = /var/lib/sfl-agent"; do
    grep -qx "$kv" "$t/x/etc/sfl/agent.ini" || fail "agent.ini lacks '$kv': $(cat "$t/x/etc/sfl/agent.ini")"
done
[ "$(grep -c '^[123]\. ' "$t/x/etc/sfl/README.kit")" -eq 3 ] || fail "README.kit: not three commands"
sh -n "$t/x/etc/sfl/kit-install.sh" || fail "kit-install.sh does not parse"

step "sfl-pki kit: no overwrite without --force, an existing certificate reused, bad input refused"
cp "$t/kits/pi-1.tar.gz" "$t/kits/first"
kit pi-1 --coordinator coord.example.org:7443 --coordinator-pk "$KPK" --out "$t/kits/pi-1.tar.gz" \
    >"$t/out" 2>&1 && fail "kit overwrote an archive without --force"
grep -q "already exists (--force replaces it)" "$t/out" || fail "overwrite message: $(cat "$t/out")"
cmp -s "$t/kits/first" "$t/kits/pi-1.tar.gz" || fail "a refused kit changed the archive"
kit pi-1 --coordinator other.example.org:7443 --coordinator-pk "$KPK" --out "$t/kits/pi-1.tar.gz" \
    --force >"$t/out" 2>&1 || fail "kit --force: $(cat "$t/out")"
grep -q "^using $t/ca/agent/pi-1.crt" "$t/out" || fail "kit did not reuse pi-1's certificate"
tar -xzOf "$t/kits/pi-1.tar.gz" etc/sfl/agent.ini | grep -qx "coordinator = other.example.org:7443" ||
    fail "kit --force did not replace the archive"
for args in "../evil --coordinator h:1 --coordinator-pk $KPK" \
    "-x --coordinator h:1 --coordinator-pk $KPK" \
    "ok --coordinator-pk $KPK" "ok --coordinator h --coordinator-pk $KPK" \
    "ok --coordinator h:0 --coordinator-pk $KPK" "ok --coordinator h:65536 --coordinator-pk $KPK" \
    "ok --coordinator h\$x:1 --coordinator-pk $KPK" "ok --coordinator h:1" \
    "ok --coordinator h:1 --coordinator-pk abc" \
    "ok --coordinator h:1 --coordinator-pk $(printf '0%.0s' $(seq 64))" \
    "ok --coordinator h:1 --coordinator-pk $KPK --root rel" \
    "ok --coordinator h:1 --coordinator-pk $KPK --root /a/../b" \
    "ok --coordinator h:1 --coordinator-pk $KPK --out $t/kits/ok.zip" \
    "ok --coordinator h:1 --coordinator-pk $KPK --bogus"; do
    case $args in *--out*) out= ;; *) out="--out $t/kits/bad.tar.gz" ;; esac
    # shellcheck disable=SC2086
    if kit $args $out >"$t/out" 2>&1; then fail "kit $args succeeded"; else rc=$?; fi
    [ "$rc" -eq 2 ] || fail "kit $args: exit $rc, want 2: $(cat "$t/out")"
    grep -q "sfl-pki: " "$t/out" || fail "kit $args said nothing useful"
done
[ ! -e "$t/ca/agent/ok.crt" ] || fail "a refused kit issued a certificate"
[ "$(ls -A "$t/kits")" = "$(printf 'first\npi-1.tar.gz')" ] || fail "stray files: $(ls -A "$t/kits")"
# a tar that fails half way (a fake one first on PATH, in $t only) leaves
# no archive, partial or not
mkdir "$t/fakebin"
printf '#!/bin/sh\necho partial\nexit 1\n' >"$t/fakebin/tar"
chmod 755 "$t/fakebin/tar"
PATH="$t/fakebin:$PATH" kit pi-1 --coordinator h:1 --coordinator-pk "$KPK" \
    --out "$t/kits/cut.tar.gz" >"$t/out" 2>&1 && fail "kit succeeded with a failing tar"
grep -q "kit: tar failed" "$t/out" || fail "tar failure message: $(cat "$t/out")"
[ "$(ls -A "$t/kits")" = "$(printf 'first\npi-1.tar.gz')" ] || fail "partial archive left: $(ls -A "$t/kits")"

# What a Pi owner runs: README.kit's unpack line (the kit made with --root
# for a scratch root) and the kit unit's ExecStart with the kit's
# agent.ini; the agent joins a running coordinator.
step "sfl-pki kit: unpacked by its README's line, the unit's ExecStart joins a coordinator"
for p in sfl-coordinator sfl-agent; do [ -x "$BIN/$p" ] || fail "$BIN/$p missing (make first)"; done
printf '[coordinator]\nlisten = 127.0.0.1:0\nadmin_listen = 127.0.0.1:0\ncert = %s\nkey = %s\nca = %s\nstate_dir = %s\nmetrics_listen = off\n' \
    "$t/ca/coordinator/coord.crt" "$t/ca/coordinator/coord.key" "$t/ca/ca.crt" "$t/state" \
    >"$t/coordinator.ini"
start_coordinator_any_port
R=$t/pi
kit pi-2 --coordinator "127.0.0.1:$port" --coordinator-pk "$PK" --root "$R" \
    --out "$t/kits/pi-2.tar.gz" >"$t/kit2.out" 2>&1 || fail "kit pi-2: $(cat "$t/kit2.out")"
tar -xzOf "$t/kits/pi-2.tar.gz" etc/sfl/README.kit >"$t/README.kit"
unpack=$(sed -n 's/^1\. *unpack *sudo //p' "$t/README.kit")
[ "$unpack" = "tar -xzf pi-2.tar.gz -C $R" ] || fail "README.kit's unpack line: '$unpack'"
mkdir "$R"
# shellcheck disable=SC2086
(cd "$t/kits" && $unpack) || fail "unpack: $unpack"
mkdir -p "$R/var/lib/sfl-agent"
printf '1 1:0.5 3:1\n-1 2:0.25\n' >"$R/var/lib/sfl-agent/train.svm"
exec_start=$(sed -n 's/^ExecStart=//p' "$R/etc/systemd/system/sfl-agent.service")
[ "$exec_start" = "/usr/local/bin/sfl-agent --config $R/etc/sfl/agent.ini" ] ||
    fail "the kit unit's ExecStart: $exec_start"
# shellcheck disable=SC2086
"$BIN/sfl-agent" ${exec_start#/usr/local/bin/sfl-agent} >"$t/pi-2.log" 2>&1 &
pids="$pids $!"
joined() { grep -q "event=join agent=[0-9]* name=pi-2 " "$t/coord.log"; }
wait_for 5 joined || fail "the kit's agent did not join"

echo "pki: all checks passed"
