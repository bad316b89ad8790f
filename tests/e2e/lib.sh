# Shared setup of the e2e scripts that run a coordinator and agents on
# loopback; sourced from the repository root (`. tests/e2e/lib.sh`), not a
# test itself (make e2e skips it). Gives BIN, ROOT, PKI, a scratch directory
# $t that is removed on exit after every process in $pids is killed, and
# fail, wait_for, pki_federation, fast_rounds, start_agent,
# start_coordinator_any_port,
# sflctl_config and same_model, and step and skip from
# lib-step.sh.
. tests/e2e/lib-step.sh
BIN=${SFL_BIN:-build}
ROOT=$(pwd)
PKI="$ROOT/deploy/pki/sfl-pki"
t=$(mktemp -d)
pids=""
cleanup() {
    for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$t"
}
trap cleanup EXIT
# sh runs the EXIT trap on `exit`, not when a signal ends it.
trap 'exit 1' INT TERM

# Prints the message and the tail of every log, and fails the test.
fail() {
    echo "FAIL: $*"
    for f in "$t"/*.log "$t"/*.out; do
        [ -e "$f" ] || continue
        echo "== $f"
        tail -n 30 "$f"
    done
    exit 1
}

# Waits until the condition holds, polling every 0.1 s. $1 is about what the
# wait needs on an idle machine, to the second; the bound is SFL_WAIT_SCALE
# (default 10) times that, so a loaded machine never fails a test (STYLE
# rule 22) and only a real hang costs the whole bound.
wait_for() { # $1 = seconds, rest = condition command
    n=$(($1 * 10 * ${SFL_WAIT_SCALE:-10})); shift
    while [ $n -gt 0 ]; do
        if "$@"; then return 0; fi
        sleep 0.1; n=$((n - 1))
    done
    return 1
}

# Prints the [coordinator] section head of a loopback test's coordinator.ini:
# listen on $1, metrics on $2 (or off), admin_listen on a port the kernel
# picks (start_coordinator reads it), the certificates of pki_federation,
# state in $t/state. The script appends its own keys and jobs.
coordinator_section() {
    printf '[coordinator]\nlisten = %s\ncert = %s\nkey = %s\nca = %s\nstate_dir = %s\nmetrics_listen = %s\nadmin_listen = 127.0.0.1:0\n' \
        "$1" "$t/pki/coordinator/coord.crt" "$t/pki/coordinator/coord.key" "$t/pki/ca.crt" \
        "$t/state" "$2"
}

# The [coordinator] keys of a loopback test whose rounds follow each other
# at once: a short select wait, tick and pace, idle agents told to come
# back soon, Subscribe held 1 s. Print after coordinator_section.
fast_rounds() {
    printf 'select_wait_ms = 300\ntick_ms = 50\npace_min_ms = 100\nidle_retry_ms = 300\nsubscribe_hold_ms = 1000\n'
}

pki_federation() { # agent names: a CA in $t/pki, coordinator "coord", the agents
    "$PKI" init "$t/pki" > /dev/null
    "$PKI" coordinator "$t/pki" coord > /dev/null
    for a in "$@"; do "$PKI" agent "$t/pki" "$a" > /dev/null; done
}

# Starts agent-$1 (certificate from pki_federation, shard client-$1.svm of
# $t/data) against 127.0.0.1:$port pinned to $PK; sets agent_$1 to its pid.
# AGENT_BACKOFF_MAX_MS (default 500) caps its reconnection backoff.
start_agent() { # $1 = agent number; further arguments go to sfl-agent
    _n=$1
    shift
    "$BIN/sfl-agent" --coordinator "127.0.0.1:$port" --server_name 127.0.0.1 \
        --ca "$t/pki/ca.crt" --cert "$t/pki/agent/agent-$_n.crt" --key "$t/pki/agent/agent-$_n.key" \
        --coordinator_pk "$PK" --data "libsvm:$t/data/client-$_n.svm" \
        --state_dir "$t/agent-$_n" --backoff_min_ms 100 \
        --backoff_max_ms "${AGENT_BACKOFF_MAX_MS:-500}" "$@" \
        >> "$t/agent-$_n.log" 2>&1 &
    eval "agent_$_n=$!"
    pids="$pids $!"
}

# Starts the coordinator of $t/coordinator.ini (listening on port 0: the
# kernel picks one) with its log in $t/coord.log; sets PK (its public key),
# coord (its pid) and port (from its started line).
start_coordinator_any_port() {
    start_coordinator
    port=$(sed -n 's/.*event=started .* port=\([0-9]*\) .*/\1/p' "$t/coord.log" | tail -1)
    case $port in ''|0|*[!0-9]*) fail "no port in the coordinator's started line" ;; esac
}

# A loopback port p with p and p + 1 free now, in 20000..31999: below the
# kernel's ephemeral range (32768 and up on Linux), where the tests' own
# outgoing connections take theirs, so a port picked here is not taken by
# one of them later. tests/run.sh runs scripts side by side and gives each
# a slot (SFL_PORT_SLOT of SFL_PORT_SLOTS): the range is cut in that many
# parts and a script picks in its own, so a port one script left free for
# a moment (a coordinator killed and restarted on it) is never another's.
pick_port() {
    /usr/bin/python3 - "$$" "${SFL_PORT_SLOT:-0}" "${SFL_PORT_SLOTS:-1}" <<'EOF_PORT'
import random, socket, sys
r = random.Random(int(sys.argv[1]) * 7919 + random.SystemRandom().randrange(1 << 30))
slots = max(1, int(sys.argv[3]))
slot = min(max(0, int(sys.argv[2])), slots - 1)
width = 12000 // slots
lo = 20000 + slot * width
for _ in range(2000):
    p = r.randrange(lo, lo + width - 1)
    try:
        for q in (p, p + 1):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", q))
            s.close()
    except OSError:
        continue
    print(p)
    sys.exit(0)
sys.exit(1)
EOF_PORT
}

# Starts (or restarts) the coordinator of $t/coordinator.ini with its log
# appended to $t/coord.log, and waits for its started line; sets PK (its
# public key), coord (its pid) and admin_port (its admin_listen port, 0 if
# off), and points an existing $t/sflctl.ini at that port.
start_coordinator() {
    PK=$("$BIN/sfl-coordinator" --config "$t/coordinator.ini" --public-key 2>> "$t/coord.log")
    _started=$(grep -c "event=started" "$t/coord.log" 2> /dev/null || true)
    "$BIN/sfl-coordinator" --config "$t/coordinator.ini" >> "$t/coord.log" 2>&1 &
    coord=$!
    pids="$pids $coord"
    wait_for 10 _started_after "$_started" || fail "coordinator did not start"
    admin_port=$(sed -n 's/.*event=started .* admin_port=\([0-9]*\) .*/\1/p' "$t/coord.log" | tail -1)
    if [ -f "$t/sflctl.ini" ]; then sflctl_config; fi
}
_started_after() { [ "$(grep -c "event=started" "$t/coord.log" 2> /dev/null)" -gt "$1" ]; }

# Writes $t/sflctl.ini: the admin certificate "ops" of pki_federation
# (made here if missing) against the coordinator's admin_listen,
# 127.0.0.1:$admin_port (its agents' port $port when admin_listen is off);
# sets CTL.
sflctl_config() {
    [ -f "$t/pki/admin/ops.crt" ] || "$PKI" admin "$t/pki" ops > /dev/null
    case ${admin_port:-0} in 0) _ctl_port=$port ;; *) _ctl_port=$admin_port ;; esac
    printf '[sflctl]\ncoordinator = 127.0.0.1:%s\nserver_name = 127.0.0.1\nca = %s\ncert = %s\nkey = %s\ntimeout_ms = 5000\n' \
        "$_ctl_port" "$t/pki/ca.crt" "$t/pki/admin/ops.crt" "$t/pki/admin/ops.key" > "$t/sflctl.ini"
    CTL="$BIN/sflctl --config $t/sflctl.ini"
}

# Fails unless the models in $1 (the network's, sflctl model export's text)
# and $2 (sfl-sim --model-out) are equal bit for bit: "index value" lines,
# '#' headers and zeros left out.
same_model() {
    /usr/bin/python3 - "$1" "$2" <<'EOF3' || fail "network and simulation models differ"
import sys
def load(p):
    return {int(a): float(b) for a, b in (l.split() for l in open(p) if not l.startswith("#"))
            if float(b) != 0.0}
net, sim = load(sys.argv[1]), load(sys.argv[2])
assert net.keys() == sim.keys(), (sorted(net), sorted(sim))
diff = [k for k in sim if net[k] != sim[k]]
print(f"network vs sfl-sim: same support ({len(sim)} nonzeros), {len(diff)} values differ")
assert not diff, [(k, net[k], sim[k]) for k in diff[:5]]
EOF3
}
