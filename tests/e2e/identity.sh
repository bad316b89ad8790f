#!/bin/sh
# End-to-end: an agent's identity is bound to the certificate it first
# joined with (issue 11, item 8; docs/pki.md, "Revocation"), and its name
# cannot be taken with its public key alone (issue 23, finding 6).
#
# A second certificate from the same CA with CN=agent-0, used with agent-0's
# own identity key (a copy of its state directory: more than an attacker who
# read the public key in a log has), is refused at Join, and the real
# agent-0 keeps its id and its rounds. An impostor certificate with
# CN=agent-0 that presents agent-0's *public* key (sfl-replay --impostor)
# cannot prove it holds the key: refused at Join without a proof, with a
# proof by its own key, and with a proof replayed from another connection,
# before the revocation and after it. `sflctl agent revoke agent-0` revokes
# the bound certificate: its connection closes, every later connection of it
# is answered PERMISSION_DENIED "certificate revoked (fingerprint ...)" over
# TLS and closed (also after a coordinator restart: persisted), so the agent
# says so once and exits 3 (issue 24, item 4) -- also when it comes back
# by resuming its TLS session (ticket) --, and the new
# certificate binds at its next Join with agent-0's own key (a renewed
# certificate), keeping agent-0's id. The coordinator refuses to revoke its
# own certificate and the admin certificate the call comes with (issue 23,
# finding 9). Bounded: every wait has a timeout.
set -eu
. tests/e2e/lib.sh
pki_federation agent-0 agent-1
mkdir -p "$t/data" "$t/state"
"$BIN/sfl-sim" --data synth:sparse --clients 2 --samples 40 --dim 50 --support 3 --seed 5 \
    --dump-shards "$t/data"

step "start: a coordinator and two agents on a job"
{ coordinator_section "127.0.0.1:0" "off"; fast_rounds; cat <<EOT
[job bound]
algo = fediterht
features = 50
tau = 3
local_steps = 2
lr = 0.1
batch = 40
rounds = 60
cohort = 2
min_quorum = 2
seed = 5
EOT
} > "$t/coordinator.ini"
start_coordinator_any_port
sflctl_config
for i in 0 1; do start_agent $i; done
commits() { grep -c "event=round_committed job=1 " "$t/coord.log" || true; }
wait_for 10 sh -c "[ \$(grep -c 'event=round_committed job=1 ' '$t/coord.log') -ge 2 ]" ||
    fail "no rounds committed"
id0=$(sed -n 's/.*event=join agent=\([0-9]*\) name=agent-0 .*/\1/p' "$t/coord.log" | head -1)
[ -n "$id0" ] || fail "agent-0 did not join"

step "a second CA certificate with CN=agent-0 and agent-0's identity key: refused at Join"
mv "$t/pki/agent/agent-0.crt" "$t/old.crt"
mv "$t/pki/agent/agent-0.key" "$t/old.key"
# The impostor's certificate: the same CA, CN=agent-0, its own key pair.
"$PKI" agent "$t/pki" agent-0 > /dev/null
mkdir -p "$t/imp/agent"
cp "$t/pki/ca.crt" "$t/imp/ca.crt"
mv "$t/pki/agent/agent-0.crt" "$t/pki/agent/agent-0.key" "$t/imp/agent/"
# The renewed certificate the real agent-0 will use.
"$PKI" agent "$t/pki" agent-0 > /dev/null
cp -r "$t/agent-0" "$t/second"
second() { # runs the second certificate's agent with a copy of agent-0's state
    "$BIN/sfl-agent" --coordinator "127.0.0.1:$port" --server_name 127.0.0.1 \
        --ca "$t/pki/ca.crt" --cert "$t/pki/agent/agent-0.crt" \
        --key "$t/pki/agent/agent-0.key" --coordinator_pk "$PK" \
        --data "libsvm:$t/data/client-0.svm" --state_dir "$t/second" \
        --backoff_min_ms 100 --backoff_max_ms 500 >> "$t/second.log" 2>&1 &
    second=$!
    pids="$pids $second"
}
second
gone() { ! kill -0 "$second" 2> /dev/null; }
wait_for 5 gone || fail "the second certificate's agent did not give up"
grep -q "PERMISSION_DENIED.*agent-0 is bound to the certificate it first joined with.*fix=\"this agent's name is bound to another certificate" \
    "$t/second.log" || fail "no PERMISSION_DENIED (with the fix) for the second certificate"
grep -q "event=join_refused name=agent-0 .*error=certificate_not_bound" "$t/coord.log" ||
    fail "the refusal is not logged"
n=$(commits)
wait_for 5 sh -c "[ \$(grep -c 'event=round_committed job=1 ' '$t/coord.log') -gt $n ]" ||
    fail "the real agent-0 stopped committing rounds"
[ "$(grep -c "event=join agent=[0-9]* name=agent-0 " "$t/coord.log")" -eq \
  "$(grep -c "event=join agent=$id0 name=agent-0 " "$t/coord.log")" ] ||
    fail "agent-0 joined under another id"

# agent-0's public key, as anyone who reads a log or its Join could know it.
pk0=$(sed -n 3p "$t/agent-0/identity.key")
[ ${#pk0} -eq 64 ] || fail "cannot read agent-0's public key"
impostor() { # $1: the run's name
    "$BIN/tests/e2e/sfl-replay" --coordinator "127.0.0.1:$port" --server-name 127.0.0.1 \
        --pki "$t/imp" --coordinator-pk "$PK" --agent agent-0 --impostor "$pk0" \
        --timeout-ms 20000 > "$t/impostor-$1.out" 2>&1 && rc=0 || rc=$?
    cat "$t/impostor-$1.out"
    [ "$rc" -eq 0 ] || fail "sfl-replay --impostor ($1) exited with $rc"
    grep -q "^sfl-replay: 3 checks, 0 failed$" "$t/impostor-$1.out" ||
        fail "sfl-replay --impostor ($1) did not run its 3 checks"
}

step "an impostor certificate with CN=agent-0 and agent-0's public key: no proof, refused"
impostor before
grep -q "event=join_refused name=agent-0 .*error=no_join_proof" "$t/coord.log" ||
    fail "the Join without a proof is not logged"
grep -q "event=join_refused name=agent-0 .*error=bad_join_proof" "$t/coord.log" ||
    fail "the Join with a bad proof is not logged"

step "the coordinator's own certificate and the caller's admin certificate cannot be revoked"
fp_coord=$("$PKI" fingerprint "$t/pki/coordinator/coord.crt")
fp_admin=$("$PKI" fingerprint "$t/pki/admin/ops.crt")
for fp in "$fp_coord" "$fp_admin"; do
    if $CTL agent revoke "$fp" > "$t/self.out" 2>&1; then
        fail "sflctl revoked $fp: $(cat "$t/self.out")"
    fi
    cat "$t/self.out"
    grep -q "FAILED_PRECONDITION" "$t/self.out" || fail "not FAILED_PRECONDITION: $(cat "$t/self.out")"
done
grep -q "own certificate" "$t/self.out" || fail "the refusal does not say why"
$CTL status > /dev/null 2>&1 || fail "sflctl locked out"

step "sflctl agent revoke agent-0: the old certificate is cut off, the new one binds"
fp_old=$("$PKI" fingerprint "$t/old.crt")
$CTL agent revoke agent-0 > "$t/revoke.out" 2>&1 || fail "sflctl agent revoke: $(cat "$t/revoke.out")"
cat "$t/revoke.out"
grep -q "^revoked certificate $fp_old (agent agent-0); 1 connection closed$" "$t/revoke.out" ||
    fail "unexpected sflctl output"
refused() { grep -q "event=conn_refused .*cn=agent-0 fingerprint=$fp_old error=revoked answer=PERMISSION_DENIED" "$t/coord.log"; }
wait_for 5 refused || fail "the revoked certificate was not refused at connect"
# agent-0 came back with the TLS session (ticket) of its revoked
# certificate: resumed, and refused all the same (docs/security.md).
grep -q "event=conn_refused .*cn=agent-0 fingerprint=$fp_old error=revoked .*resumed=1" "$t/coord.log" ||
    fail "the revoked certificate's resumed session was not refused"
# The running agent-0 is told, over TLS, and gives up for good (issue 24, item 4).
gone0() { ! kill -0 "$agent_0" 2> /dev/null; }
wait_for 5 gone0 || fail "the revoked agent-0 did not exit"
wait "$agent_0" && rc=0 || rc=$?
[ "$rc" -eq 3 ] || fail "the revoked agent-0 exited with $rc, not 3"
said="event=fatal during=join status=PERMISSION_DENIED .*fix=\"the coordinator revoked this agent's certificate (fingerprint $fp_old): ask the operator for a new one; exiting\" exit_status=3"
[ "$(grep -c "$said" "$t/agent-0.log")" -eq 1 ] || fail "agent-0 did not say once that it was revoked"
[ "$(grep -c "event=fatal" "$t/agent-0.log")" -eq 1 ] || fail "agent-0 logged more than one fatal line"
grep "$said" "$t/agent-0.log"
# The window the review used: the name is released, the impostor comes first.
impostor after-revoke
second
rejoined() { grep -q "event=joined agent_id=$id0 " "$t/second.log"; }
wait_for 5 rejoined || fail "the new certificate did not bind as agent $id0"
impostor after-rebind
[ "$(grep -c "event=join agent=[0-9]* name=agent-0 " "$t/coord.log")" -eq \
  "$(grep -c "event=join agent=$id0 name=agent-0 " "$t/coord.log")" ] ||
    fail "agent-0 joined under another id"

step "after a coordinator restart the revocation holds"
kill "$coord"; wait "$coord" 2> /dev/null || true
"$BIN/sfl-coordinator" --config "$t/coordinator.ini" >> "$t/coord.log" 2>&1 &
coord=$!
pids="$pids $coord"
restarted() { [ "$(grep -c "event=started" "$t/coord.log")" -ge 2 ]; }
wait_for 10 restarted || fail "coordinator did not restart"
port=$(sed -n 's/.*event=started .* port=\([0-9]*\) .*/\1/p' "$t/coord.log" | tail -1)
# The old certificate, by hand: refused at connect.
"$BIN/sfl-agent" --coordinator "127.0.0.1:$port" --server_name 127.0.0.1 \
    --ca "$t/pki/ca.crt" --cert "$t/old.crt" --key "$t/old.key" --coordinator_pk "$PK" \
    --data "libsvm:$t/data/client-0.svm" --state_dir "$t/old-state" \
    --backoff_min_ms 100 --backoff_max_ms 500 >> "$t/old.log" 2>&1 &
old=$!
pids="$pids $old"
refused_again() { [ "$(grep -c "event=conn_refused .*cn=agent-0 fingerprint=$fp_old error=revoked" "$t/coord.log")" -ge 2 ]; }
wait_for 5 refused_again || fail "the revoked certificate is accepted after a restart"
gone_old() { ! kill -0 "$old" 2> /dev/null; }
wait_for 5 gone_old || fail "the revoked certificate's agent did not exit after the restart"
wait "$old" && rc=0 || rc=$?
[ "$rc" -eq 3 ] || fail "the revoked certificate's agent exited with $rc, not 3"
[ "$(grep -c "$said" "$t/old.log")" -eq 1 ] || fail "the revoked certificate's agent did not say why"
echo "PASS: a second certificate for agent-0 refused at Join; an impostor with agent-0's public" \
    "key refused before and after the revocation; the coordinator's and the caller's" \
    "certificates not revocable; revoked: cut off, told so, exit 3, after a restart too;" \
    "the new certificate bound as agent $id0 with agent-0's key"
