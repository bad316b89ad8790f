#!/bin/sh
# End-to-end checks of deploy/pki/sfl-pki: real openssl, real files,
# certificates checked with `openssl verify` and their fields read back.
set -eu
. tests/e2e/lib-step.sh
PKI=${SFL_PKI:-deploy/pki/sfl-pki}
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
pki() { sh "$PKI" "$@"; }
# mode of a file as ls shows it, e.g. -rw-------
mode() { ls -l "$1" | cut -c1-10; }
subject() { openssl x509 -in "$1" -noout -subject -nameopt RFC2253 | sed 's/^subject=//'; }
verify() { openssl verify -CAfile "$t/ca/ca.crt" "$@" >/dev/null 2>&1; }

# Usage and errors: --help succeeds, misuse exits 2 with a message.
step "Usage and errors: --help succeeds, misuse exits 2 with a message"
pki --help | grep -q 'coordinator DIR NAME' || fail "--help text"
for args in "" "frobnicate $t/x" "agent" "agent $t/ca" "--days" "--days 0 init $t/x" \
    "--bogus init $t/x"; do
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

# Another CA's agent does not verify against this one.
step "Another CA's agent does not verify against this one"
pki init "$t/other" >/dev/null
pki agent "$t/other" agent-7 >/dev/null
verify -purpose sslclient "$t/other/agent/agent-7.crt" && fail "other CA's agent verifies"

echo "pki: all checks passed"
