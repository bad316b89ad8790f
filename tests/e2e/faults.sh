#!/bin/sh
# End-to-end faults with real processes on loopback: a coordinator and 5
# agents run a FedIter-HT job (cohort 5, 20 % over-selection, quorum 3,
# deadline 1500 ms) through
#   (b) garbage while rounds run: raw non-TLS bytes to the port; over mutual
#       TLS with a valid agent certificate, bytes that are not HTTP/2, an
#       HTTP/2 frame beyond the frame size limit, gRPC length prefixes of
#       2 GiB and of max_message + 1 (only that stream is refused: the
#       connection still answers PING), and a real message of max_message + 1
#       bytes from python3-grpcio (RESOURCE_EXHAUSTED). The coordinator logs
#       the protocol errors and refusals, and rounds keep committing with all
#       five agents;
#   (a) agents that die mid-round: two agents are frozen, selected, then
#       killed with SIGKILL, and the round still commits at its deadline
#       with 3 updates (the quorum); a third is killed the same way and the
#       attempt fails below quorum (round_failed), no round starts with 2
#       agents, and once the three are restarted the round is retried
#       (attempt + 1) with a fresh cohort and the job finishes.
# Freezing first (SIGSTOP) is what makes "mid-round" certain: a frozen agent
# stays subscribed, is selected, and cannot answer before it is killed.
# Bounded: every wait has a timeout; about 30 s in all.
set -eu
. tests/e2e/lib.sh

port=$(pick_port)
MAXMSG=1048576
pki_federation agent-0 agent-1 agent-2 agent-3 agent-4 mallory
mkdir -p "$t/data" "$t/state"
"$BIN/sfl-sim" --data synth:sparse --clients 5 --samples 40 --dim 50 --support 3 --seed 3 \
    --dump-shards "$t/data"

# Over-selection makes the full selection 6 > 5 agents, so every round
# gathers subscribers for select_wait_ms: at most ~3 rounds a second, which
# keeps the 50 rounds from finishing before the faults are done.
step "start: a coordinator and 5 agents run a FedIter-HT job"
ROUNDS=50
{ coordinator_section "127.0.0.1:$port" "off"; cat <<EOF
max_message = $MAXMSG
select_wait_ms = 300
tick_ms = 50
pace_min_ms = 100
idle_retry_ms = 300

[job faults]
algo = fediterht
features = 50
tau = 3
local_steps = 2
lr = 0.1
batch = 40
rounds = $ROUNDS
cohort = 5
overselect = 0.2
min_quorum = 3
deadline_ms = 1500
seed = 3
EOF
} > "$t/coordinator.ini"
PK=$("$BIN/sfl-coordinator" --config "$t/coordinator.ini" --public-key 2>> "$t/coord.log")
"$BIN/sfl-coordinator" --config "$t/coordinator.ini" >> "$t/coord.log" 2>&1 &
coord=$!
pids="$pids $coord"

agent_pid() { eval "echo \$agent_$1"; }
count() { grep -c "$1" "$t/coord.log" 2>/dev/null || true; }
commits() { count "event=round_committed"; }
opens() { count "event=round_open"; }
more() { [ "$($1)" -ge "$2" ]; }
alive() { for i in "$@"; do kill -0 "$(agent_pid "$i")" 2>/dev/null || return 1; done; }
# Commits with `accepted=$1` after line $2 of the log.
since() { tail -n +"$(($1 + 1))" "$t/coord.log"; }
commits_with() { since "$2" | grep "event=round_committed" | grep -c " accepted=$1 " || true; }
lines() { wc -l < "$t/coord.log"; }

for i in 0 1 2 3 4; do start_agent $i; done
wait_for 20 more commits 3 || fail "no 3 committed rounds with 5 agents"
grep -q "event=round_committed .* accepted=5 " "$t/coord.log" || fail "no round with all 5 agents"

# ---- (b) garbage and oversized input while the federation runs ------------------------
step "(b) garbage and oversized input while the federation runs"
mark=$(lines)
cat > "$t/garbage.py" <<'EOF'
import os, socket, ssl, struct, sys, time

port, pki, maxmsg = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def check(cond, what):
    if not cond:
        print("FAIL: " + what)
        sys.exit(1)


def frame(ftype, flags, stream, payload):
    return (struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) +
            struct.pack(">I", stream) + payload)


def hpack(headers):
    # literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2)
    out = b""
    for k, v in headers:
        out += b"\x00" + bytes([len(k)]) + k.encode() + bytes([len(v)]) + v.encode()
    return out


def read_frames(s, until, timeout=5.0):
    """Frames (type, flags, stream) until until(frames) or EOF; (frames, eof)."""
    buf, frames, end = b"", [], time.time() + timeout
    s.settimeout(0.2)
    while time.time() < end and not until(frames):
        try:
            d = s.recv(65536)
        except socket.timeout:
            continue
        except (ConnectionError, ssl.SSLError, OSError):
            return frames, True
        if not d:
            return frames, True
        buf += d
        while len(buf) >= 9:
            n = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + n:
                break
            frames.append((buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF))
            buf = buf[9 + n:]
    return frames, False


def tls():
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=f"{pki}/ca.crt")
    ctx.load_cert_chain(f"{pki}/agent/mallory.crt", f"{pki}/agent/mallory.key")
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.set_alpn_protocols(["h2"])
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5),
                        server_hostname="127.0.0.1")
    check(s.selected_alpn_protocol() == "h2", "ALPN h2 not negotiated")
    return s


def closed(s, what):
    frames, eof = read_frames(s, lambda f: False, 5.0)
    check(eof, f"{what}: the connection stayed open")
    s.close()
    return frames


# 1. Not TLS at all: an HTTP/1 request and random bytes.
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + os.urandom(4096))
closed(s, "raw garbage")
print("raw non-TLS garbage: connection closed")

# 2. TLS with a valid agent certificate, then bytes that are not HTTP/2.
s = tls()
s.sendall(os.urandom(512))
closed(s, "HTTP/2 garbage")
print("garbage instead of the HTTP/2 preface: connection closed")

# 3. A valid preface, then a frame header announcing 16 MiB - 1 bytes.
s = tls()
s.sendall(PREFACE + frame(4, 0, 0, b"") + b"\xff\xff\xff\x00\x00\x00\x00\x00\x01" +
          os.urandom(1024))
frames = closed(s, "oversized HTTP/2 frame")
check(any(f[0] == 7 for f in frames), f"oversized HTTP/2 frame: no GOAWAY in {frames}")
print("HTTP/2 frame beyond the frame size limit: GOAWAY, connection closed")

# 4. gRPC length prefixes of 2 GiB - 1 and max_message + 1 on two streams of
# one connection, a few body bytes each: both streams are refused, and the
# connection still answers PING (no 2 GiB allocation, nobody else affected).
s = tls()
hdrs = hpack([(":method", "POST"), (":scheme", "https"),
              (":path", "/sfl.v1.Coordinator/SubmitUpdate"), (":authority", "127.0.0.1"),
              ("content-type", "application/grpc"), ("te", "trailers")])
out = PREFACE + frame(4, 0, 0, b"")
for sid, n in ((1, 0x7FFFFFFF), (3, maxmsg + 1)):
    out += frame(1, 0x4, sid, hdrs) + frame(0, 0, sid, b"\x00" + struct.pack(">I", n) + b"junk")
out += frame(6, 0, 0, b"sflping1")


def done(fr):
    ended = {f[2] for f in fr if (f[0] == 1 and f[1] & 1) or f[0] == 3}
    return {1, 3} <= ended and any(f[0] == 6 and f[1] & 1 for f in fr)


s.sendall(out)
frames, eof = read_frames(s, done, 5.0)
check(done(frames),
      f"oversized gRPC prefixes: streams not both refused or no PING ack: {frames} eof={eof}")
check(not any(f[0] == 7 for f in frames), "oversized gRPC prefix: the whole connection was dropped")
s.close()
print("gRPC prefixes of 2 GiB and max_message + 1: both streams refused, connection alive")

# 5. A real message of max_message + 1 bytes from a stock gRPC client.
try:
    import grpc
except ImportError:
    print("skipped: python3-grpcio is not installed")
    sys.exit(0)


def read(p):
    with open(f"{pki}/{p}", "rb") as f:
        return f.read()


creds = grpc.ssl_channel_credentials(read("ca.crt"), read("agent/mallory.key"),
                                     read("agent/mallory.crt"))
with grpc.secure_channel(f"127.0.0.1:{port}", creds,
                         options=[("grpc.ssl_target_name_override", "127.0.0.1")]) as ch:
    call = ch.unary_unary("/sfl.v1.Coordinator/SubmitUpdate")
    try:
        call(b"\x08" * (maxmsg + 1), timeout=10)
        check(False, "a message beyond max_message was accepted")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED,
              f"oversized message: {e.code()} {e.details()}")
        print(f"python3-grpcio, {maxmsg + 1}-byte message: RESOURCE_EXHAUSTED ({e.details()})")
EOF
/usr/bin/python3 "$t/garbage.py" $port "$t/pki" $MAXMSG > "$t/garbage.log" 2>&1 ||
    fail "garbage: $(cat "$t/garbage.log")"
cat "$t/garbage.log"
kill -0 $coord 2>/dev/null || fail "the coordinator died on garbage"
alive 0 1 2 3 4 || fail "an agent died during the garbage"
since "$mark" | grep -q "event=conn_refused" || fail "raw garbage: no conn_refused logged"
[ "$(since "$mark" | grep -c "event=protocol_error addr=127.0.0.1")" -ge 2 ] ||
    fail "HTTP/2 garbage: no protocol_error logged twice"
# Each refused request is logged with its path and status.
[ "$(since "$mark" | grep -c "event=call_refused .*status=RESOURCE_EXHAUSTED")" -ge 2 ] ||
    fail "oversized messages: no call_refused RESOURCE_EXHAUSTED logged"
# The other agents are unaffected: rounds go on with all five of them.
after_garbage() { [ "$(commits_with 5 "$mark")" -ge 3 ]; }
wait_for 15 after_garbage || fail "rounds with all 5 agents did not continue after the garbage"
echo "garbage: coordinator alive, protocol errors logged, rounds continue with 5 agents"

# Freezes agents "$@", waits for the next round to open (they stay subscribed,
# so it selects them) or for the open round to fail, then kills them.
freeze_and_kill() {
    o=$(opens) f=$(count "event=round_failed")
    for i in "$@"; do kill -STOP "$(agent_pid "$i")"; done
    moved() { [ "$(opens)" -gt "$o" ] || [ "$(count "event=round_failed")" -gt "$f" ]; }
    wait_for 5 moved || fail "no round opened or failed after freezing agents $*"
    for i in "$@"; do kill -9 "$(agent_pid "$i")"; done
}

# ---- (a) two agents die mid-round: the quorum carries the round --------------------------
step "(a) two agents die mid-round: the quorum carries the round"
mark=$(lines)
freeze_and_kill 3 4
# A round that selected 5 (the dead two included) commits with 3 at its deadline.
quorum_round() {
    since "$mark" | awk '
        /event=round_open / { sel = $0; sub(/.* selected=/, "", sel); sub(/ .*/, "", sel) }
        /event=round_committed / && / accepted=3 / && sel == 5 { ok = 1 }
        END { exit !ok }'
}
wait_for 10 quorum_round || fail "no round with 5 selected committed with the quorum of 3"
quorum3() { [ "$(commits_with 3 "$mark")" -ge 3 ]; }
wait_for 10 quorum3 || fail "rounds did not go on with 3 agents"
echo "two agents killed mid-round: rounds commit with the quorum of 3"

# ---- three dead: below quorum the attempt fails; restarted agents finish the job ---------
step "three dead: below quorum the attempt fails; restarted agents finish the job"
mark=$(lines)
freeze_and_kill 2
failed() { since "$mark" | grep -q "event=round_failed"; }
wait_for 5 failed || fail "no round_failed below quorum"
line=$(since "$mark" | grep -m1 "event=round_failed")
echo "$line" | grep -q 'reason=.*deadline with 2 of' || fail "unexpected failure reason: $line"
r=$(echo "$line" | sed 's/.* round=\([0-9]*\) .*/\1/')
a=$(echo "$line" | sed 's/.* attempt=\([0-9]*\) .*/\1/')
# Two agents are below the quorum: no attempt starts, and none is used up.
c=$(commits) o=$(opens)
sleep 1.5
if [ "$(commits)" -ne "$c" ] || [ "$(opens)" -ne "$o" ]; then fail "a round ran with 2 agents"; fi
grep -q "event=job_paused" "$t/coord.log" && fail "the job paused while waiting for agents"
[ "$(count "event=job_state job=1 state=finished")" -eq 0 ] ||
    fail "the job finished too early; make it longer"
for i in 2 3 4; do start_agent $i; done
retried() { grep -q "event=round_committed job=1 round=$r attempt=$((a + 1)) " "$t/coord.log"; }
wait_for 15 retried || fail "round $r was not retried and committed as attempt $((a + 1))"
finished() { grep -q "event=job_state job=1 state=finished" "$t/coord.log"; }
wait_for 40 finished || fail "the job did not finish after the agents came back ($(commits))"
grep -q "event=round_committed job=1 round=$ROUNDS " "$t/coord.log" ||
    fail "last round not committed"
kill -0 $coord 2>/dev/null || fail "the coordinator died"
echo "three killed: round $r failed below quorum (attempt $a), retried as attempt $((a + 1))" \
    "after the restart; job finished"
echo "faults e2e: ok ($(commits) commits, $(count "event=round_failed") failed attempts)"
