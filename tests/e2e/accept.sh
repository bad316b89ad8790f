#!/bin/sh
# End-to-end: the accept path keeps serving while a flood holds every
# handshake slot (issue 23, finding 7), and a request of exactly the
# message limit is answered (finding 8).
#
# The coordinator has max_handshakes = 32, max_handshakes_per_ip = 8 and a
# handshake timeout of 120 s, longer than every bound below: nothing here
# waits for the flood's handshakes to time out. tests/e2e/flood.py opens 8
# half-open TLS connections (100 bytes of a ClientHello, then silence) from
# each of 127.0.0.2..127.0.0.5 (all 32 slots) plus 2 more from each, past
# their address's cap (few enough that the 20 refusal lines a second the
# log allows show them all), and 16 + 2 from 127.0.0.6 against admin_listen
# (its 16 slots), and holds them. Before, the extra ones waited in the listen
# backlog and sflctl and honest Joins queued behind them for as long as the
# flood held (sflctl status timed out). Now, while it holds:
#   - the extra connections are refused at accept ("handshakes in progress
#     from its address");
#   - sflctl status, over admin_listen, succeeds (its 5 s timeout is 10x
#     what it needs);
#   - an honest agent from 127.0.0.1 joins: its connection evicts the
#     oldest handshake of an address holding more slots than it.
# Then, with python3-grpcio as the client and the default max_message and
# max_buffered (64 MiB each), SubmitUpdate requests of 64 MiB - 1 and
# 64 MiB get the handler's answer and 64 MiB + 1 gets RESOURCE_EXHAUSTED;
# before, the one of exactly 64 MiB got no answer at all. Last, with
# max_handshakes_per_ip = 2, 8 agents start at once from 127.0.0.1: those
# refused retry with their backoff and all join (tests and a NAT share an
# address).
set -eu
. tests/e2e/lib.sh
PY=/usr/bin/python3
if ! $PY -c 'import grpc' 2> /dev/null; then
    echo "SKIP: python3-grpcio is not installed (make deps-test)"
    exit 0
fi
pki_federation agent-0 agent-1 agent-2 agent-3 agent-4 agent-5 agent-6 agent-7 flooder
mkdir -p "$t/data" "$t/state"
"$BIN/sfl-sim" --data synth:sparse --clients 8 --samples 40 --dim 50 --support 3 --seed 5 \
    --dump-shards "$t/data"

step "start: a coordinator with 32 handshake slots, 8 per address, 120 s handshake timeout"
{ coordinator_section "127.0.0.1:0" "off"; fast_rounds; cat <<EOT
max_handshakes = 32
max_handshakes_per_ip = 8
handshake_timeout_ms = 120000
EOT
} > "$t/coordinator.ini"
start_coordinator_any_port
[ "${admin_port:-0}" -gt 0 ] || fail "no admin_port in the coordinator's started line"
sflctl_config
$CTL status > "$t/ctl.log" 2>&1 || fail "sflctl status before the flood: $(cat "$t/ctl.log")"

step "a flood holds every handshake slot of both listeners, from five addresses"
AG="--ca $t/pki/ca.crt --cert $t/pki/agent/flooder.crt --key $t/pki/agent/flooder.key"
# shellcheck disable=SC2086
$PY tests/e2e/flood.py --host 127.0.0.1 --port "$port" $AG --path /x --mode halfopen \
    --src 127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5 --conns 8 --extra 2 --hold 300 \
    > "$t/flood-agents.out" 2>&1 &
pids="$pids $!"
# shellcheck disable=SC2086
$PY tests/e2e/flood.py --host 127.0.0.1 --port "$admin_port" $AG --path /x --mode halfopen \
    --src 127.0.0.6 --conns 16 --extra 2 --hold 300 > "$t/flood-admin.out" 2>&1 &
pids="$pids $!"
wait_for 5 grep -q "^halfopen" "$t/flood-agents.out" || fail "the flood did not open"
wait_for 5 grep -q "^halfopen" "$t/flood-admin.out" || fail "the admin flood did not open"
sed 's/^/        agents listener: /' "$t/flood-agents.out"
sed 's/^/        admin listener: /' "$t/flood-admin.out"
# Each address's extra connections are refused: its 8 (16) were taken.
for a in 2 3 4 5 6; do
    wait_for 5 grep -q "event=conn_refused .*127.0.0.$a:[0-9]* refused: [0-9]* handshakes in progress from its address" \
        "$t/coord.log" || fail "127.0.0.$a: its connections past the cap were not refused"
done

step "while it holds: sflctl status over admin_listen, and an honest agent's Join"
$CTL status > "$t/ctl.log" 2>&1 || fail "sflctl status under the flood: $(cat "$t/ctl.log")"
grep -q "^coordinator  sfl-coordinator" "$t/ctl.log" || fail "sflctl status: $(cat "$t/ctl.log")"
start_agent 0
wait_for 5 grep -q "event=join .*name=agent-0" "$t/coord.log" ||
    fail "the honest agent did not join while the flood held"
grep -q "event=conn_refused .*evicted: its source holds" "$t/coord.log" ||
    fail "no handshake was evicted for the honest agent"
kill -0 "$coord" || fail "the coordinator died"
for f in agents admin; do
    # still holding: the floods sleep out their --hold
    grep -q "^closed" "$t/flood-$f.out" && fail "the $f flood ended early"
done
echo "        sflctl status and agent-0's Join done with every slot held"

step "messages at the 64 MiB limit: limit - 1 and limit answered by the handler, limit + 1 refused"
$PY - "$port" "$t/pki" > "$t/limit.out" 2>&1 <<'EOF_PY' || fail "at-limit client: $(cat "$t/limit.out")"
import sys, grpc
port, pki = sys.argv[1], sys.argv[2]
rd = lambda p: open(pki + "/" + p, "rb").read()
creds = grpc.ssl_channel_credentials(rd("ca.crt"), rd("agent/agent-0.key"), rd("agent/agent-0.crt"))
opts = [("grpc.ssl_target_name_override", "127.0.0.1"),
        ("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
LIMIT = 64 << 20
with grpc.secure_channel("127.0.0.1:" + port, creds, options=opts) as ch:
    call = ch.unary_unary("/sfl.v1.Coordinator/SubmitUpdate")
    for n in (LIMIT - 1, LIMIT, LIMIT + 1):
        try:
            call(b"\xff" * n, timeout=60)  # 10x and more what it needs
            code, msg = grpc.StatusCode.OK, ""
        except grpc.RpcError as e:
            code, msg = e.code(), e.details()
        print("size %d: %s %s" % (n, code.name, msg))
        if code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
            sys.exit("size %d: no answer (%s)" % (n, code.name))
        if (code == grpc.StatusCode.RESOURCE_EXHAUSTED) != (n > LIMIT):
            sys.exit("size %d: %s" % (n, code.name))
EOF_PY
sed 's/^/        /' "$t/limit.out"

step "a storm from one address past max_handshakes_per_ip = 2: the refused agents retry and all join"
kill "$coord"
wait "$coord" 2> /dev/null || true
sed -i 's/^max_handshakes_per_ip = 8$/max_handshakes_per_ip = 2/' "$t/coordinator.ini"
start_coordinator_any_port
refused() { grep -c "event=conn_refused .*handshakes in progress from its address" "$t/coord.log"; }
r0=$(refused)
for i in 0 1 2 3 4 5 6 7; do start_agent $i; done
joined() { [ "$(grep -c "event=join .*name=agent-" "$t/coord.log")" -ge "$1" ]; }
n0=$(grep -c "event=join .*name=agent-" "$t/coord.log")
wait_for 5 joined $((n0 + 8)) || fail "not every agent of the storm joined"
echo "        8 agents joined from 127.0.0.1 ($(($(refused) - r0)) of their connections refused and retried)"
echo "PASS: with every handshake slot held sflctl and an honest Join were served; messages of" \
    "64 MiB - 1 and 64 MiB answered, 64 MiB + 1 refused RESOURCE_EXHAUSTED; a storm of 8 agents" \
    "from one address past its cap all joined"
