#!/bin/sh
# What a user sees of a networked job's progress, with real processes on
# loopback: three agents hold out a fifth of their rows (eval_fraction) and
# report their train loss and held-out accuracy; the coordinator folds them
# per round and shows them in sflctl jobs and watch, on /metrics, as the
# per-round CSV of sflctl job history (one row per committed round, finite
# train loss), and on the status page at / (headless Chromium: its DOM has
# the job, a plot point and a table row per round; its screenshot a drawn
# plot); sflctl model export writes text, libsvm, npy (read back with
# numpy when python3-numpy is installed) and spcodec. Every wait is bounded
# by an observed event.
set -eu
. tests/e2e/lib.sh

port=$(pick_port)
mport=$((port + 1))
step "PKI and data: three shards of a logistic problem (labels 0, 1)"
pki_federation agent-0 agent-1 agent-2
"$PKI" admin "$t/pki" ops > /dev/null
mkdir -p "$t/data"
"$BIN/sfl-sim" --data synth:sim2 --clients 3 --samples 200 --seed 5 --dump-shards "$t/data"

ROUNDS=6
{ coordinator_section "127.0.0.1:$port" "127.0.0.1:$mport"; cat <<EOF2
select_wait_ms = 300
tick_ms = 50
pace_min_ms = 100
idle_retry_ms = 300

[job progress]
algo = fediterht
loss = logistic
features = 1000
labels = 0,1
tau = 100
local_steps = 2
lr = 0.03
batch = 20
rounds = $ROUNDS
cohort = 3
overselect = 0
min_quorum = 3
deadline_ms = 30000
seed = 5
EOF2
} > "$t/coordinator.ini"
mkdir -p "$t/state"
PK=$("$BIN/sfl-coordinator" --config "$t/coordinator.ini" --public-key 2>> "$t/coord.log")

step "coordinator and three agents with eval_fraction = 0.2"
"$BIN/sfl-coordinator" --config "$t/coordinator.ini" >> "$t/coord.log" 2>&1 &
pids="$pids $!"
for i in 0 1 2; do
    "$BIN/sfl-agent" --coordinator "127.0.0.1:$port" --server_name 127.0.0.1 \
        --ca "$t/pki/ca.crt" --cert "$t/pki/agent/agent-$i.crt" --key "$t/pki/agent/agent-$i.key" \
        --coordinator_pk "$PK" --data "libsvm:$t/data/client-$i.svm" --eval_fraction 0.2 \
        --state_dir "$t/agent-$i" --backoff_min_ms 100 --backoff_max_ms 500 \
        >> "$t/agent-$i.log" 2>&1 &
    eval "agent_$i=$!"
    pids="$pids $!"
done
# 200 rows each: 40 held out, 160 trained on (and reported at Join).
for i in 0 1 2; do
    wait_for 20 grep -q "event=starting .*samples=160 eval_samples=40 " "$t/agent-$i.log" ||
        fail "agent-$i did not split its data 160/40"
done

step "the job runs its $ROUNDS rounds"
finished() { grep -q "event=job_state job=1 state=finished" "$t/coord.log"; }
wait_for 120 finished || fail "job did not finish"
committed=$(grep -c "event=round_committed job=1 " "$t/coord.log")
[ "$committed" -eq "$ROUNDS" ] || fail "$committed commits logged, want $ROUNDS"
grep -q "event=round_committed job=1 round=1 .* train_loss=0.69314" "$t/coord.log" ||
    fail "round 1's train loss is not log(2) at the zero model"
grep -q "event=round_committed job=1 round=$ROUNDS .* eval_samples=120 " "$t/coord.log" ||
    fail "the last round did not fold 3 x 40 held-out rows"

sflctl_config

step "sflctl job history: one CSV row per committed round, finite train loss"
$CTL job history 1 > "$t/history.csv" 2> "$t/ctl.log" || fail "sflctl job history: $(cat "$t/ctl.log")"
head -1 "$t/history.csv" | grep -qx \
    'round,objective,test_accuracy,test_mse,eval_samples,nnz,bytes_up,bytes_down,accepted,selected,samples,attempt,round_ms,wall_ms,personal_accuracy,privacy_iterations,privacy_spent,privacy_spent_rdp,support_churn' ||
    fail "history header: $(head -1 "$t/history.csv")"
[ "$(($(wc -l < "$t/history.csv") - 1))" -eq "$ROUNDS" ] ||
    fail "history has $(($(wc -l < "$t/history.csv") - 1)) rows, want $ROUNDS"
awk -F, -v n="$ROUNDS" '
    NR == 1 { next }
    {
        if ($1 != NR - 1) { print "round " $1 " at row " NR - 1; bad = 1 }
        # finite: a number, not nan or inf
        if ($2 !~ /^[0-9.eE+-]+$/ || $2 + 0 <= 0) { print "objective " $2; bad = 1 }
        if ($3 == "" || $3 < 0 || $3 > 1) { print "test_accuracy " $3; bad = 1 }
        if ($4 != "n/a") { print "test_mse of a logistic job: " $4; bad = 1 }
        if ($5 != 120 || $9 != 3 || $10 != 3 || $11 != 480) { print "counts " $0; bad = 1 }
        if ($7 <= 0 || $8 <= 0 || $14 < $13) { print "bytes or times " $0; bad = 1 }
        if ($15 != "n/a") { print "personal_accuracy of fediterht: " $15; bad = 1 }
        # support churn: a count; round 1 starts from the zero model, so all
        # of its support entered
        if ($19 !~ /^[0-9]+$/ || (NR == 2 && $19 != $6)) { print "support_churn " $0; bad = 1 }
    }
    END { exit bad }' "$t/history.csv" || fail "history rows: $(cat "$t/history.csv")"
# the loss falls from log(2) at the zero model
awk -F, 'NR == 2 { first = $2 } END { exit !($2 < first) }' "$t/history.csv" ||
    fail "train loss did not fall: $(cat "$t/history.csv")"

step "sflctl jobs and status show the last round's loss and accuracy"
$CTL jobs > "$t/ctl.log" 2>&1 || fail "sflctl jobs: $(cat "$t/ctl.log")"
grep -Eq "^1 +progress +fediterht +finished +$ROUNDS/$ROUNDS .* loss [0-9.e-]+, accuracy [0-9.]+ \(120 held out\)$" \
    "$t/ctl.log" || fail "sflctl jobs: $(cat "$t/ctl.log")"
$CTL status > "$t/ctl.log" 2>&1 || fail "sflctl status: $(cat "$t/ctl.log")"
grep -q "accuracy [0-9.]* (120 held out)" "$t/ctl.log" || fail "sflctl status: $(cat "$t/ctl.log")"

step "/metrics: per-job progress gauges"
metrics() {
    if command -v curl > /dev/null; then
        curl -sf --max-time 5 "http://127.0.0.1:$mport/metrics"
    else
        /usr/bin/python3 -c "import urllib.request, sys; sys.stdout.write(urllib.request.urlopen(
            'http://127.0.0.1:$mport/metrics', timeout=5).read().decode())"
    fi
}
metrics > "$t/metrics.out" || fail "GET /metrics"
grep -q '^sfl_job_committed_round{job="1",name="progress"} '"$ROUNDS"'$' "$t/metrics.out" ||
    fail "no sfl_job_committed_round"
grep -q '^sfl_job_running{job="1",name="progress"} 0$' "$t/metrics.out" ||
    fail "the finished job is not sfl_job_running 0"
grep -Eq '^sfl_job_train_loss\{job="1",name="progress"\} [0-9.e-]+$' "$t/metrics.out" ||
    fail "no sfl_job_train_loss"
grep -Eq '^sfl_job_eval_accuracy\{job="1",name="progress"\} [0-9.e-]+$' "$t/metrics.out" ||
    fail "no sfl_job_eval_accuracy"

step "the status page: GET / in headless Chromium shows the job, its $ROUNDS rounds, plots"
# The HTML as served: a page of its own (no script, nothing loaded from
# elsewhere), read-only.
/usr/bin/python3 - "$mport" "$t/status.html" <<'EOF3' || fail "status page over HTTP: see above"
import http.client, re, sys
port, out = int(sys.argv[1]), sys.argv[2]
def req(method, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request(method, path)
    r = c.getresponse()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
def need(cond, what):
    if not cond:
        sys.exit("status page: " + what)
code, h, body = req("GET", "/")
need(code == 200 and h["content-type"] == "text/html; charset=utf-8", "GET / %d %s" % (code, h))
need(h.get("content-security-policy", "").startswith("default-src 'none'"), "no policy: %s" % h)
need("<script" not in body.lower(), "a script")
need(not re.findall(r'(?:src|href|action)="[^"#]', body), "loads or links elsewhere")
need(set(re.findall(r'https?://[^" ]*', body)) <= {"http://www.w3.org/2000/svg"}, "an outside URL")
open(out, "w").write(body)
code, h, page = req("GET", "/status?x=1")
need(code == 200 and "<h1>sfl coordinator</h1>" in page, "GET /status %d" % code)
code, h, body = req("HEAD", "/")
need(code == 200 and body == "", "HEAD / %d, %d bytes" % (code, len(body)))
code, h, body = req("POST", "/")
need(code == 405 and h.get("allow") == "GET, HEAD", "POST / %d %s" % (code, h))
need(req("GET", "/nope")[0] == 404, "GET /nope")
print("status page over HTTP: %d bytes of HTML; HEAD 200, POST 405, /nope 404" % len(open(out).read()))
EOF3
# Chromium renders it: its DOM and a 1200x900 screenshot (kept in
# build/status.png; docs/img/status.png is one), in one run. A private
# profile, bounded by timeout; no sandbox (root in CI, no user namespaces in
# containers), no GPU.
chrome() {
    timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
        --no-first-run --user-data-dir="$t/chromium" --window-size=1200,900 "$@" \
        2>> "$t/chromium.log"
}
shot="$ROOT/build/status.png"
rm -f "$shot"
if ! command -v chromium > /dev/null; then
    echo "skipped: status page in Chromium (chromium not installed: make deps-test)"
elif ! chrome --dump-dom --screenshot="$shot" "http://127.0.0.1:$mport/" > "$t/status.dom" ||
    ! grep -q "<body" "$t/status.dom"; then
    # Chromium that cannot start at all (no /dev/shm, a broken install) is a
    # skip; one that starts but cannot render the page is a failure.
    chrome --dump-dom about:blank > "$t/blank.dom" && grep -q "<body" "$t/blank.dom" ||
        skip_chromium=1
    [ -n "${skip_chromium:-}" ] || fail "chromium cannot render the status page: $(tail -3 "$t/chromium.log")"
    echo "skipped: status page in Chromium (chromium cannot start here: $(tail -2 "$t/chromium.log" | tr '\n' ' '))"
else
    [ -s "$shot" ] || fail "chromium wrote no screenshot: $(tail -3 "$t/chromium.log")"
    /usr/bin/python3 - "$t/status.dom" "$ROUNDS" <<'EOF3' || fail "status page DOM: see above"
import re, sys
dom, rounds = open(sys.argv[1]).read(), int(sys.argv[2])
def need(cond, what):
    if not cond:
        sys.exit("status page: " + what)
row = re.search(r'<tr id="job-row-1">(.*?)</tr>', dom, re.S)
need(row, "no row of job 1")
cells = re.findall(r"<td>(.*?)</td>", row.group(1))
need(cells[1:6] == ["progress", "fediterht", "logistic", "finished", "%d/%d" % (rounds, rounds)],
     "job row " + str(cells))
need(re.search(r"loss [0-9.e-]+, accuracy [0-9.]+ \(120 held out\)", row.group(1)), "progress")
for series in ("train loss", "accuracy"):
    m = re.search(r'<polyline[^>]*data-series="%s"[^>]*points="([^"]*)"' % series, dom)
    need(m, "no polyline of " + series)
    pts = m.group(1).split()
    need(len(pts) == rounds, "%s: %d points, want %d" % (series, len(pts), rounds))
    xs = [float(p.split(",")[0]) for p in pts]
    need(xs == sorted(xs) and xs[0] < xs[-1], series + ": x not ascending")
sec = re.search(r'<section class="job" id="job-1">(.*?)</section>', dom, re.S)
need(sec, "no section of job 1")
trs = re.findall(r"<tr><td>(\d+)</td>", sec.group(1))
need(trs == [str(r) for r in range(rounds, 0, -1)], "rounds table: " + str(trs))
need(len(re.findall(r"<td>agent-\d</td><td>yes</td>", dom)) == 3, "three connected agents")
print("status page DOM: job 1 finished %d/%d, %d points per plot, %d rounds in its table"
      % (rounds, rounds, rounds, len(trs)))
EOF3
    if /usr/bin/python3 -c "import PIL" 2> /dev/null; then
        /usr/bin/python3 - "$shot" <<'EOF3' || fail "status page screenshot: see above"
import sys
from PIL import Image, ImageChops
im = Image.open(sys.argv[1])
if im.format != "PNG" or im.size != (1200, 900):
    sys.exit("screenshot: %s %s, want a PNG of 1200x900" % (im.format, im.size))
rgb = im.convert("RGB")
# Where the pixels of a line's colour are (within a little: antialiasing):
# its bounding box and how many.
def where(colour, tol=12):
    m = None
    for band, c in zip(rgb.split(), colour):
        b = band.point(lambda v, lo=c - tol, hi=c + tol: 255 if lo <= v <= hi else 0)
        m = b if m is None else ImageChops.multiply(m, b)
    return m.getbbox(), m.histogram()[255]
# A line across its plot, more than a legend swatch; the loss falls from
# log(2) (checked above), so its line is not flat.
for name, colour, tall in (("train loss", (0x1f, 0x77, 0xb4), 40),
                           ("accuracy", (0x2c, 0xa0, 0x2c), 0)):
    b, n = where(colour)
    if b is None or b[2] - b[0] < 300 or b[3] - b[1] < tall or n < 400:
        sys.exit("screenshot: no %s line drawn (box %s, %d pixels)" % (name, b, n))
b, n = where((0x1f, 0x77, 0xb4))
colours = len(set(rgb.crop(b).getdata()))
if colours < 8:
    sys.exit("screenshot: the loss plot has %d colours" % colours)
print("screenshot: PNG 1200x900, loss line over %dx%d px (%d pixels), %d colours in its box"
      % (b[2] - b[0], b[3] - b[1], n, colours))
EOF3
    else
        echo "skipped: status page screenshot check (python3-pil not installed: make deps-test)"
    fi
fi

step "sflctl model export in every format"
for f in text libsvm npy spcodec; do
    $CTL model export 1 "$t/model.$f" --format $f > "$t/ctl.log" 2>&1 ||
        fail "model export --format $f: $(cat "$t/ctl.log")"
    grep -q "^job 1 round $ROUNDS: dimension 1000, nnz [1-9][0-9]*, hash [0-9a-f]*, [0-9]* bytes -> .*($f)$" \
        "$t/ctl.log" || fail "model export --format $f: $(cat "$t/ctl.log")"
done
$CTL model export 1 "$t/model.default" > "$t/ctl.log" 2>&1 || fail "model export: $(cat "$t/ctl.log")"
cmp -s "$t/model.default" "$t/model.text" || fail "the default format is not text"
head -2 "$t/model.text" | grep -q "^# sfl model: job 1, round $ROUNDS, algorithm fediterht, loss logistic$" ||
    fail "text header: $(head -3 "$t/model.text")"
grep -q "^# dimension 1000, nnz [1-9]" "$t/model.text" || fail "text header: $(head -3 "$t/model.text")"
nnz=$(grep -vc "^#" "$t/model.text")
[ "$(wc -l < "$t/model.libsvm")" -eq 1 ] || fail "libsvm: not one line"
[ "$(($(wc -w < "$t/model.libsvm") - 1))" -eq "$nnz" ] || fail "libsvm and text disagree on nnz"
# the same values and 1-based indices
grep -v "^#" "$t/model.text" | awk '{ printf "%d:%s\n", $1, $2 }' > "$t/text.pairs"
tr ' ' '\n' < "$t/model.libsvm" | tail -n +2 > "$t/libsvm.pairs"
cmp -s "$t/text.pairs" "$t/libsvm.pairs" || fail "libsvm and text values differ"
rc=0
$CTL model export 1 "$t/model.x" --format csv > "$t/ctl.log" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q "unknown --format 'csv' (text, libsvm, npy or spcodec)" "$t/ctl.log" ||
    fail "unknown format: exit $rc: $(cat "$t/ctl.log")"
[ ! -e "$t/model.x" ] || fail "an unknown format wrote a file"
# an older round while its checkpoint is kept (keep_checkpoints 3: rounds
# 4..6): that round's model, its nnz the history's for the round, not the
# last model; a pruned round and one not committed say so (issue 24 item 8)
old=$((ROUNDS - 2))
$CTL model export 1 "$t/model.old" --round $old > "$t/ctl.log" 2>&1 ||
    fail "model export --round $old: $(cat "$t/ctl.log")"
head -1 "$t/model.old" | grep -q "^# sfl model: job 1, round $old," || fail "--round $old: $(head -1 "$t/model.old")"
hnnz=$(awk -F, -v r=$old '$1 == r { print $6 }' "$t/history.csv")
[ "$(grep -vc "^#" "$t/model.old")" = "$hnnz" ] ||
    fail "round $old's model has $(grep -vc "^#" "$t/model.old") nonzeros, the history $hnnz"
grep -v "^#" "$t/model.old" > "$t/old.pairs"
grep -v "^#" "$t/model.text" > "$t/last.pairs"
cmp -s "$t/old.pairs" "$t/last.pairs" && fail "--round $old exported the last round's model"
rc=0
$CTL model export 1 "$t/model.x" --round 1 > "$t/ctl.log" 2>&1 || rc=$?
[ "$rc" -eq 1 ] && grep -q "no checkpoint of round 1: not kept (keep_checkpoints = 3 in coordinator.ini .*; kept: rounds $((ROUNDS - 2)), $((ROUNDS - 1)), $ROUNDS" "$t/ctl.log" ||
    fail "--round 1: exit $rc: $(cat "$t/ctl.log")"
rc=0
$CTL model export 1 "$t/model.x" --round 99 > "$t/ctl.log" 2>&1 || rc=$?
[ "$rc" -eq 1 ] && grep -q "no checkpoint of round 99: not committed (the last committed is $ROUNDS)" "$t/ctl.log" ||
    fail "--round 99: exit $rc: $(cat "$t/ctl.log")"
[ ! -e "$t/model.x" ] || fail "a round not kept wrote a file"

step "sflctl watch shows a running job's last round"
cat > "$t/job2.ini" <<EOF2
[job second]
algo = fediterht
loss = logistic
features = 1000
labels = 0,1
tau = 100
local_steps = 2
lr = 0.03
batch = 20
rounds = 100000
cohort = 3
overselect = 0
min_quorum = 3
deadline_ms = 30000
EOF2
$CTL job create "$t/job2.ini" > "$t/ctl.log" 2>&1 || fail "sflctl job create: $(cat "$t/ctl.log")"
wait_for 60 grep -q "event=round_committed job=2 round=1 " "$t/coord.log" ||
    fail "job 2 committed no round"
# Without agent-2 no cohort of 3 can form: job 2 stays running, mid-job.
kill "$agent_2"
# Ctrl-C once the watch has printed its line (not after a fixed time: a
# loaded machine may take longer to start it, and a SIGINT before its
# handler exists kills it with 130, as it would any program).
rc=0
$CTL watch > "$t/watch.log" 2>&1 &
watch_pid=$!
pids="$pids $watch_pid"
wait_for 60 grep -q "^job 2 second: " "$t/watch.log" || fail "sflctl watch printed nothing: $(cat "$t/watch.log")"
kill -INT "$watch_pid"
wait "$watch_pid" || rc=$?
# Ctrl-C ends a watch normally: exit 0 (130 would mean SIGINT killed it).
[ "$rc" -eq 0 ] || fail "sflctl watch exited $rc after SIGINT: $(cat "$t/watch.log")"
grep -Eq "^job 2 second: round [0-9]+/100000 .*; last round loss [0-9.e+-]+, accuracy [0-9.]+ \(120 held out\)$" \
    "$t/watch.log" || fail "sflctl watch: $(cat "$t/watch.log")"
$CTL job cancel 2 > "$t/ctl.log" 2>&1 || fail "sflctl job cancel: $(cat "$t/ctl.log")"

if /usr/bin/python3 -c "import numpy" 2>/dev/null; then
    step "numpy reads the npy export: the text export's values, zeros elsewhere"
    /usr/bin/python3 - "$t/model.npy" "$t/model.text" <<'EOF3' || fail "numpy check failed"
import sys
import numpy as np
x = np.load(sys.argv[1])
assert x.dtype == np.float64 and x.shape == (1000,), (x.dtype, x.shape)
want = np.zeros(1000)
for line in open(sys.argv[2]):
    if not line.startswith("#"):
        i, v = line.split()
        want[int(i) - 1] = float(v)
assert np.array_equal(x, want), "values differ"
print(f"numpy: shape {x.shape}, {np.count_nonzero(x)} nonzeros, equal to the text export")
EOF3
else
    echo "skipped: numpy check of the npy export (python3-numpy not installed)"
fi
echo "progress e2e: ok ($ROUNDS rounds, history $(($(wc -l < "$t/history.csv") - 1)) rows)"
