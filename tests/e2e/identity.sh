#!/bin/sh
# End-to-end: an agent's identity is bound to the certificate it first
# joined with (issue 11, item 8; docs/pki.md, "Revocation").
#
# A second certificate from the same CA with CN=agent-0, used with agent-0's
# own identity key (a copy of its state directory: more than an attacker who
# read the public key in a log has), is refused at Join, and the real
# agent-0 keeps its id and its rounds. `sflctl agent revoke agent-0` revokes
# the bound certificate: its connection closes, it is refused at connect from
# then on (also after a coordinator restart: persisted), and the new
# certificate binds at its next Join (a renewed certificate), finishing the
# job. Bounded: every wait has a timeout.
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

step "sflctl agent revoke agent-0: the old certificate is cut off, the new one binds"
fp_old=$("$PKI" fingerprint "$t/old.crt")
$CTL agent revoke agent-0 > "$t/revoke.out" 2>&1 || fail "sflctl agent revoke: $(cat "$t/revoke.out")"
cat "$t/revoke.out"
grep -q "^revoked certificate $fp_old (agent agent-0); 1 connection closed$" "$t/revoke.out" ||
    fail "unexpected sflctl output"
refused() { grep -q "event=conn_refused .*cn=agent-0 error=revoked" "$t/coord.log"; }
wait_for 5 refused || fail "the revoked certificate was not refused at connect"
kill "$agent_0" 2> /dev/null || true
second
rejoined() { grep -q "event=joined agent_id=$id0 " "$t/second.log"; }
wait_for 5 rejoined || fail "the new certificate did not bind as agent $id0"

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
pids="$pids $!"
refused_again() { [ "$(grep -c "event=conn_refused .*cn=agent-0 error=revoked" "$t/coord.log")" -ge 2 ]; }
wait_for 5 refused_again || fail "the revoked certificate is accepted after a restart"
echo "PASS: a second certificate for agent-0 refused at Join; revoked: cut off, refused at" \
    "connect after a restart too; the new certificate bound as agent $id0"
