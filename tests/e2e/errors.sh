#!/bin/sh
# Errors a user can act on, from the real programs: unknown options, INI
# errors naming file, line, key and reason, the state directory lock, the
# coordinator's --check of its certificates, and the agent giving up (exit
# 3) on errors that retrying cannot fix (another CA, an expired certificate,
# a wrong server_name or role, another coordinator key) while it keeps
# retrying others.
set -eu
. tests/e2e/lib.sh

# expect STATUS TEXT CMD...: CMD exits with STATUS and its stderr has TEXT.
expect() {
    want=$1 text=$2
    shift 2
    set +e
    "$@" > "$t/out" 2> "$t/err"
    rc=$?
    set -e
    [ "$rc" = "$want" ] || fail "$*: exit $rc, want $want: $(cat "$t/err")"
    grep -qF -- "$text" "$t/err" || fail "$*: no '$text' in: $(cat "$t/err")"
}

step "unknown options and missing values, every program"
for p in sfl-coordinator sfl-agent sflctl sfl-sim; do
    expect 2 "unknown option '--bogus'" "$BIN/$p" --bogus
    expect 2 "unknown option '--bogus'" "$BIN/$p" --bogus=1
    expect 2 "unknown option '-x'" "$BIN/$p" -x
done
# ... with the valid ones and the nearest (issue 24 item 8)
expect 2 "unknown option '--rouds'; did you mean '--rounds'? (valid: --algo," "$BIN/sfl-sim" --rouds 3
expect 2 "unknown option '--lisen'; did you mean '--listen'? (valid: --listen," \
    "$BIN/sfl-coordinator" --lisen 127.0.0.1:1
expect 2 "unknown option '--dat'; did you mean '--data'? (valid: --coordinator," \
    "$BIN/sfl-agent" --dat x
expect 2 "unknown option '--timout-ms'; did you mean '--timeout_ms'? (valid: --coordinator," \
    "$BIN/sflctl" --timout-ms 5 jobs
expect 2 "unknown algorithm 'fedavgg'; did you mean 'fedavg'? (valid: fedht," "$BIN/sfl-sim" \
    --algo fedavgg
# sflctl without a file at the default path and without flags: where it looked
mkdir -p "$t/home"
expect 2 "no --config FILE and no file at $t/home/.config/sfl/sflctl.ini" env HOME="$t/home" \
    "$BIN/sflctl" jobs
grep -qF "Pass --config FILE" "$t/err" || fail "sflctl without a config: $(cat "$t/err")"
expect 2 "option '--config' needs a value" "$BIN/sfl-coordinator" --config
expect 2 "option '--ca' needs a value" "$BIN/sfl-agent" --ca
expect 2 "log_level: 'loud' is not debug, info, warn or error" "$BIN/sfl-agent" --log-level loud
expect 2 "option '--ca' needs a value" "$BIN/sflctl" --ca
expect 2 "option '--tau' needs a value" "$BIN/sfl-sim" --tau

step "INI errors name file, line, key and reason"
pki_federation agent-0
cat > "$t/c.ini" <<EOF
; a coordinator
[coordinator]
listen = 127.0.0.1:0
metrics_listen = off
cert = $t/pki/coordinator/coord.crt
key = $t/pki/coordinator/coord.key
ca = $t/pki/ca.crt
state_dir = $t/state
listn = 127.0.0.1:1
EOF
expect 2 "$t/c.ini:9: unknown key 'listn'" "$BIN/sfl-coordinator" --config "$t/c.ini" --check
sed -i '$d' "$t/c.ini"
printf '[job a]\nfeatures = 10\ntau = twenty\n' >> "$t/c.ini"
expect 2 "$t/c.ini:11: tau: invalid value 'twenty'" "$BIN/sfl-coordinator" --config "$t/c.ini" --check
sed -i '$d' "$t/c.ini"
printf 'algo = fedavgg\n' >> "$t/c.ini"
expect 2 "$t/c.ini:11: algo: unknown algorithm 'fedavgg'; did you mean 'fedavg'? (valid: fedht, fediterht," \
    "$BIN/sfl-coordinator" --config "$t/c.ini" --check
# the same from sflctl job create, before anything goes out
printf '[job a]\nfeatures = 10\nalgo = fedprx\n' > "$t/job.ini"
expect 2 "$t/job.ini:3: algo: unknown algorithm 'fedprx'; did you mean 'fedprox'?" "$BIN/sflctl" \
    --coordinator 127.0.0.1:1 --ca "$t/pki/ca.crt" --cert x --key y job create "$t/job.ini"
sed -i '$d' "$t/c.ini"
printf 'tau = 2\ntau = 3\n' >> "$t/c.ini"
expect 2 "$t/c.ini:12: duplicate key 'tau' (first set on line 11)" \
    "$BIN/sfl-coordinator" --config "$t/c.ini" --check
sed -i '$d' "$t/c.ini"
printf '[job a]\nfeatures = 10\ntau = twenty\n' > "$t/job.ini"
expect 2 "$t/job.ini:3: tau: invalid value 'twenty'" "$BIN/sflctl" --coordinator 127.0.0.1:1 \
    --ca "$t/pki/ca.crt" --cert x --key y job create "$t/job.ini"
printf '[agent]\ncoordinator = 127.0.0.1:1\ncert_file = a.crt\n' > "$t/a.ini"
expect 2 "$t/a.ini:3: unknown key 'cert_file'" "$BIN/sfl-agent" --config "$t/a.ini"
printf '[sim]\nrounds = 3\nrounds = 4\n' > "$t/s.ini"
expect 2 "$t/s.ini:3: duplicate key 'rounds' (first set on line 2)" "$BIN/sfl-sim" \
    --config "$t/s.ini"
expect 2 "$t/none.ini: cannot open: No such file or directory" "$BIN/sfl-agent" \
    --config "$t/none.ini"
# the system's reason once
expect 1 "/nonexistent.svm: No such file or directory" "$BIN/sfl-sim" \
    --data libsvm:/nonexistent.svm --quiet
[ "$(grep -o 'No such file or directory' "$t/err" | wc -l)" = 1 ] ||
    fail "reason said twice: $(cat "$t/err")"

step "sfl-coordinator --check checks the certificate, key and CA"
"$BIN/sfl-coordinator" --config "$t/c.ini" --check > "$t/out" 2> "$t/err" ||
    fail "--check of good files: $(cat "$t/err")"
grep -q "role coordinator" "$t/out" || fail "--check: $(cat "$t/out")"
P="$t/pki"
chk() { # STATUS TEXT flags...: --check with the files of c.ini, then flags
    want=$1 text=$2
    shift 2
    expect "$want" "$text" "$BIN/sfl-coordinator" --config "$t/c.ini" "$@" --check
}
chk 1 "$P/missing.crt: cannot open: No such file or directory" --cert "$P/missing.crt"
chk 1 "$P/agent/agent-0.crt: the certificate's role (subject OU) is agent, not coordinator" \
    --cert "$P/agent/agent-0.crt" --key "$P/agent/agent-0.key"
chk 1 "$P/agent/agent-0.key: not the private key of the certificate $P/coordinator/coord.crt" \
    --key "$P/agent/agent-0.key"
chk 1 "$P/ca.key: no PEM CA certificate" --ca "$P/ca.key"
chk 1 "$P/coordinator/coord.crt: not a PEM private key" --key "$P/coordinator/coord.crt"
chk 1 "$P/ca.key: not a PEM certificate" --cert "$P/ca.key"
"$PKI" init "$t/other" > /dev/null
chk 1 "$P/coordinator/coord.crt: does not verify against the CA $t/other/ca.crt: unable to get local issuer certificate" \
    --ca "$t/other/ca.crt"
# Expired and not yet valid: certificates signed by the CA with python3-cryptography.
if /usr/bin/python3 -c "import cryptography" 2>/dev/null; then
    /usr/bin/python3 - "$P" <<'PY' || fail "cannot make dated certificates"
import datetime, sys
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
d = sys.argv[1]
ca_key = serialization.load_pem_private_key(open(d + "/ca.key", "rb").read(), None)
ca = x509.load_pem_x509_certificate(open(d + "/ca.crt", "rb").read())
now = datetime.datetime.now(datetime.timezone.utc)
for name, start, end in (("expired", now - datetime.timedelta(days=30), now - datetime.timedelta(days=1)),
                         ("future", now + datetime.timedelta(days=1), now + datetime.timedelta(days=30))):
    key = ec.generate_private_key(ec.SECP256R1())
    subj = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "sfl"),
                      x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "coordinator"),
                      x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (x509.CertificateBuilder().subject_name(subj).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end).sign(ca_key, hashes.SHA256()))
    open(d + "/" + name + ".crt", "wb").write(cert.public_bytes(serialization.Encoding.PEM))
    open(d + "/" + name + ".key", "wb").write(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
PY
    chk 1 "$P/expired.crt: certificate has expired (valid until " \
        --cert "$P/expired.crt" --key "$P/expired.key"
    chk 1 "$P/future.crt: certificate is not yet valid (valid from " \
        --cert "$P/future.crt" --key "$P/future.key"
else
    echo "no python3-cryptography: expired and not yet valid certificates not checked"
fi

step "a second coordinator on the same state directory refuses to start"
: > "$t/coord.log"
# (its admin_listen on a port the kernel picks: not the default 7444, which
# another test or coordinator on this machine may hold)
"$BIN/sfl-coordinator" --config "$t/c.ini" --admin_listen 127.0.0.1:0 > "$t/coord.log" 2>&1 &
coord=$!
pids="$pids $coord"
wait_for 20 grep -q "event=started" "$t/coord.log" || fail "coordinator did not start"
expect 1 "state directory $t/state is in use by another sfl-coordinator (pid $coord)" \
    "$BIN/sfl-coordinator" --config "$t/c.ini"
# its port, taken: each listener's error names the setting that moves it
busy=$(sed -n 's/.*event=started .* port=\([0-9]*\).*/\1/p' "$t/coord.log")
[ -n "$busy" ] || fail "no port in the log"
for key in listen admin_listen metrics_listen; do
    # admin_listen's default (127.0.0.1:7444) is the running one's too
    admin=off
    [ $key = admin_listen ] && admin=127.0.0.1:$busy
    expect 1 "$key 127.0.0.1:$busy: address already in use: another coordinator? change \`$key\` in coordinator.ini or --$key" \
        "$BIN/sfl-coordinator" --config "$t/c.ini" --state_dir "$t/state-$key" --admin_listen $admin \
        --$key "127.0.0.1:$busy"
    [ "$(grep -ci 'address already in use' "$t/err")" = 1 ] || fail "$key: $(cat "$t/err")"
done
kill "$coord"
wait "$coord" || fail "coordinator did not stop cleanly"

step "the agent gives up (exit 3) on errors retrying cannot fix, retries the others"
mkdir -p "$t/data"
"$BIN/sfl-sim" --data synth:sim1 --clients 1 --dim 20 --samples 20 --support 5 --quiet \
    --dump-shards "$t/data" > /dev/null 2>&1 || fail "no shard"
"$PKI" agent "$t/other" intruder > /dev/null
: > "$t/coord2.log"
"$BIN/sfl-coordinator" --config "$t/c.ini" --admin_listen 127.0.0.1:0 > "$t/coord2.log" 2>&1 &
coord=$!
pids="$pids $coord"
wait_for 20 grep -q "event=started" "$t/coord2.log" || fail "coordinator did not restart"
port=$(sed -n 's/.*event=started .* port=\([0-9]*\).*/\1/p' "$t/coord2.log")
PK=$(sed -n 's/.*event=started .*public_key=\([0-9a-f]*\).*/\1/p' "$t/coord2.log")
[ -n "$port" ] && [ -n "$PK" ] || fail "no port or key in the log"
# agent CA SERVER_NAME CERT KEY PK LOG: runs an agent to its end (at most 30 s).
agent() {
    set +e
    timeout 30 "$BIN/sfl-agent" --coordinator "127.0.0.1:$port" --ca "$1" --server_name "$2" \
        --cert "$3" --key "$4" --coordinator_pk "$5" --data "libsvm:$t/data/client-0.svm" \
        --state_dir "$t/agent-st" --backoff_min_ms 50 --backoff_max_ms 100 > "$t/$6" 2>&1
    rc=$?
    set -e
    [ "$rc" = 3 ] || fail "agent ($6): exit $rc, want 3"
    [ "$(grep -c "event=fatal" "$t/$6")" = 1 ] || fail "agent ($6): not one fatal line"
    grep -q "event=disconnected" "$t/$6" && fail "agent ($6) retried"
    return 0
}
A="$t/pki/agent/agent-0"
agent "$t/pki/ca.crt" 127.0.0.1 "$t/other/agent/intruder.crt" "$t/other/agent/intruder.key" \
    "$PK" other-ca.log
grep -q 'refused this agent.s certificate' "$t/other-ca.log" || fail "other CA: no hint"
# A certificate of the federation's CA that expired in 2020 (openssl ca sets
# past dates): the coordinator's alert says so, this machine's clock agrees,
# so retrying cannot help (issue 24, item 4).
cat > "$t/ca.cnf" <<EOF_CA
[ ca ]
default_ca = d
[ d ]
database = $t/ca-index
new_certs_dir = $t
serial = $t/ca-serial
policy = any
default_md = sha256
unique_subject = no
[ any ]
organizationName = optional
organizationalUnitName = optional
commonName = supplied
[ v3_client ]
basicConstraints = critical, CA:false
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF_CA
: > "$t/ca-index"
echo 01 > "$t/ca-serial"
{ openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$t/old.key" &&
  openssl req -new -key "$t/old.key" -subj "/O=sfl/OU=agent/CN=agent-old" -out "$t/old.csr" &&
  openssl ca -batch -config "$t/ca.cnf" -cert "$t/pki/ca.crt" -keyfile "$t/pki/ca.key" \
      -preserveDN -startdate 20200101000000Z -enddate 20200108000000Z -extensions v3_client \
      -notext -in "$t/old.csr" -out "$t/old.crt"; } > "$t/expired-ca.out" 2>&1 ||
    fail "cannot make an expired certificate: $(cat "$t/expired-ca.out")"
agent "$t/pki/ca.crt" 127.0.0.1 "$t/old.crt" "$t/old.key" "$PK" expired.log
grep -q "alert certificate expired" "$t/expired.log" || fail "expired: not the coordinator's alert"
grep -q "fix=\"this agent's certificate is outside its validity dates by the coordinator's clock and by this device's" "$t/expired.log" ||
    fail "expired: no hint"
grep "event=fatal" "$t/expired.log"
agent "$t/other/ca.crt" 127.0.0.1 "$A.crt" "$A.key" "$PK" wrong-ca.log
grep -q "certificate verify failed" "$t/wrong-ca.log" || fail "wrong CA: no reason"
agent "$t/pki/ca.crt" coordinator.example.org "$A.crt" "$A.key" "$PK" wrong-name.log
grep -q "hostname mismatch" "$t/wrong-name.log" || fail "wrong server_name: no reason"
grep -q "fix=\"server_name" "$t/wrong-name.log" || fail "wrong server_name: no hint"
"$PKI" admin "$t/pki" ops > /dev/null
agent "$t/pki/ca.crt" 127.0.0.1 "$t/pki/admin/ops.crt" "$t/pki/admin/ops.key" "$PK" admin-cert.log
grep -q "status=PERMISSION_DENIED" "$t/admin-cert.log" || fail "admin certificate: no status"
grep -q "refused this certificate's role" "$t/admin-cert.log" || fail "admin certificate: no hint"
other_pk=$("$BIN/sfl-coordinator" --state_dir "$t/other-state" --public-key 2>/dev/null)
agent "$t/pki/ca.crt" 127.0.0.1 "$A.crt" "$A.key" "$other_pk" wrong-pk.log
grep -q "event=coordinator_key_mismatch" "$t/wrong-pk.log" || fail "wrong pk: no mismatch line"
grep -q -- "--public-key" "$t/wrong-pk.log" || fail "wrong pk: no hint"
# Transient: nothing listens; the agent keeps retrying until stopped.
kill "$coord"
wait "$coord" || true
"$BIN/sfl-agent" --coordinator "127.0.0.1:$port" --ca "$t/pki/ca.crt" --server_name 127.0.0.1 \
    --cert "$A.crt" --key "$A.key" --coordinator_pk "$PK" --data "libsvm:$t/data/client-0.svm" \
    --state_dir "$t/agent-st" --backoff_min_ms 50 --backoff_max_ms 100 > "$t/refused.log" 2>&1 &
ag=$!
pids="$pids $ag"
retries() { [ "$(grep -c "event=disconnected" "$t/refused.log")" -ge 3 ]; }
wait_for 30 retries || fail "agent did not retry a refused connection"
kill -0 "$ag" || fail "agent exited on a refused connection"
kill "$ag"
wait "$ag" || fail "agent did not stop cleanly after retries"
grep -q "event=fatal" "$t/refused.log" && fail "a refused connection was fatal"
true
