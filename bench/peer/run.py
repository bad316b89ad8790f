"""Runs one configuration of bench/peer's job on one system and prints one
JSON line of figures; bench/peer/flower.sh drives it. Standard library only
(numpy for `compare`).

  run.py flower|sfl --dim D --clients N --rounds R --steps K --lr G
         --data DIR --pki DIR --build B --work DIR [--flower-src DIR]
  run.py compare MODEL_A MODEL_B        max |a - b| and max |b|

Every process (server or coordinator, and one per client or agent) is a
child of this script. The measured window runs from the moment every client
is connected (Flower: the server's round 1 waits for the word; sfl: the
agents have joined, then `sflctl job create` starts the job) to round R's
aggregate (Flower's aggregate_fit returned; sfl: the round_committed line).
Over it:
  cpu        utime + stime from /proc/PID/stat (all threads), server and
             clients summed
  bytes      nftables counters on the server's port in the input hook:
             tcp dport = client to server, tcp sport = server to client
             (IP packet lengths on loopback, headers included), and the
             packets they came in (packets_up, packets_down)
  per round  from the server's own clock: Flower's configure_fit of round 1
             to aggregate_fit of round R; sfl's round_open of round 1 to
             round_committed of round R (coordinator log, ms)
Peak RSS is VmHWM of each process at the window's end (whole life); load1
is the 1-minute load average at the window's start. Before the window opens
(every client connected and idle) the script waits until that load average
is below QUIET (environment, default 1.0), polling every 2 s for at most
QUIET_MAX_S (default 480) seconds; quiet_wait_s says how long it waited, and
a window that opened above QUIET says so in quiet_reached.
"""
import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    for _ in range(1000):
        p = 20000 + int.from_bytes(os.urandom(2), "little") % 12000
        try:
            s = socket.socket()
            s.bind(("127.0.0.1", p))
            s.close()
            return p
        except OSError:
            continue
    raise SystemExit("no free port")


class Counters:
    """An nftables table of our own counting the port's packets."""

    def __init__(self, port):
        self.table = f"sflpeer_{os.getpid()}"
        self.port = port
        script = (f"add table inet {self.table}\n"
                  f"add chain inet {self.table} in {{ type filter hook input priority 0; }}\n"
                  f"add rule inet {self.table} in tcp dport {port} counter\n"
                  f"add rule inet {self.table} in tcp sport {port} counter\n")
        subprocess.run(["nft", "-f", "-"], input=script.encode(), check=True)

    def read(self):
        out = subprocess.run(["nft", "-j", "list", "table", "inet", self.table],
                             check=True, capture_output=True).stdout
        up = down = 0
        for item in json.loads(out)["nftables"]:
            rule = item.get("rule")
            if not rule:
                continue
            cnt = next(e["counter"] for e in rule["expr"] if "counter" in e)
            field = next(e["match"]["left"]["payload"]["field"] for e in rule["expr"]
                         if "match" in e)
            if field == "dport":
                up = (cnt["bytes"], cnt["packets"])
            else:
                down = (cnt["bytes"], cnt["packets"])
        return up, down

    def close(self):
        subprocess.run(["nft", "delete", "table", "inet", self.table], check=False)


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def hwm_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def load1():
    return float(open("/proc/loadavg").read().split()[0])


def quiet_wait():
    """Waits for a 1-minute load average below QUIET (bounded); returns
    (seconds waited, whether it was reached)."""
    quiet = float(os.environ.get("QUIET", "1.0"))
    limit = float(os.environ.get("QUIET_MAX_S", "480"))
    t0 = time.time()
    while load1() >= quiet and time.time() - t0 < limit:
        time.sleep(2)
    return round(time.time() - t0, 1), load1() < quiet


def snapshot(server, clients, counters):
    return {"server_cpu": cpu_s(server.pid),
            "clients_cpu": sum(cpu_s(c.pid) for c in clients),
            "bytes": counters.read(), "t": time.time(),
            "load1": load1()}


def figures(a, b, server, clients, rounds, per_round, round_ms, extra):
    rss = sorted(hwm_kb(c.pid) for c in clients)
    return dict(extra,
                s_per_round=per_round, load1=a["load1"],
                round_ms_median=statistics.median(round_ms) if round_ms else None,
                server_cpu_s=b["server_cpu"] - a["server_cpu"],
                clients_cpu_s=b["clients_cpu"] - a["clients_cpu"],
                server_rss_kb=hwm_kb(server.pid),
                client_rss_kb_median=rss[len(rss) // 2], client_rss_kb_max=rss[-1],
                bytes_up=b["bytes"][0][0] - a["bytes"][0][0],
                bytes_down=b["bytes"][1][0] - a["bytes"][1][0],
                packets_up=b["bytes"][0][1] - a["bytes"][0][1],
                packets_down=b["bytes"][1][1] - a["bytes"][1][1],
                bytes_per_round=(b["bytes"][0][0] + b["bytes"][1][0]
                                 - a["bytes"][0][0] - a["bytes"][1][0]) / rounds)


def wait_listen(port, proc, secs):
    end = time.time() + secs
    while time.time() < end:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("server not listening")


def stop(procs, sig=signal.SIGTERM, secs=30):
    for p in procs:
        if p.poll() is None:
            p.send_signal(sig)
    end = time.time() + secs
    for p in procs:
        try:
            p.wait(timeout=max(0.1, end - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run_flower(a, port, counters):
    env = dict(os.environ, PYTHONPATH=os.path.join(a.flower_src, "src", "py"))
    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.join(here, "flower_peer.py")
    pki = a.pki
    model = os.path.join(a.work, "flower-model.npy")
    server = subprocess.Popen(
        [sys.executable, script, "server", "--port", str(port), "--clients", str(a.clients),
         "--rounds", str(a.rounds), "--dim", str(a.dim), "--ca", f"{pki}/ca.crt",
         "--cert", f"{pki}/coordinator/coord.crt", "--key", f"{pki}/coordinator/coord.key",
         "--model-out", model],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=open(os.path.join(a.work, "flower-server.err"), "w"), text=True)
    clients = []
    try:
        wait_listen(port, server, 120)
        for i in range(a.clients):
            log = open(os.path.join(a.work, f"flower-client-{i}.log"), "w")
            clients.append(subprocess.Popen(
                [sys.executable, script, "client", "--port", str(port), "--dim", str(a.dim),
                 "--data", f"{a.data}/client-{i}.svm", "--lr", str(a.lr),
                 "--steps", str(a.steps), "--ca", f"{pki}/ca.crt"],
                env=env, stdout=log, stderr=subprocess.STDOUT))
        rounds, failed = [], []
        for line in server.stdout:
            if line.startswith("ready"):
                break
        else:
            raise SystemExit("Flower server ended before its clients were all connected")
        quiet = quiet_wait()
        t_a = snapshot(server, clients, counters)
        server.stdin.write("go\n")
        server.stdin.flush()
        for line in server.stdout:
            w = line.split()
            if w[:1] == ["round"]:
                rounds.append((float(w[2]), float(w[3])))
            elif w[:1] == ["failed"]:
                failed.append(line.strip())
            elif w[:1] == ["done"]:
                break
        else:
            raise SystemExit("Flower server ended before round %d" % a.rounds)
        t_b = snapshot(server, clients, counters)
        per_round = (rounds[-1][1] - rounds[0][0]) / a.rounds
        res = figures(t_a, t_b, server, clients, a.rounds, per_round,
                      [(e - s) * 1000 for s, e in rounds],
                      {"system": "flower", "failures": failed, "model": model,
                       "quiet_wait_s": quiet[0], "quiet_reached": quiet[1]})
        server.stdin.close()
        server.wait(timeout=120)
        for c in clients:
            c.wait(timeout=120)
        return res
    finally:
        stop([server] + clients, signal.SIGKILL, 1)


def log_ms(line):
    m = re.search(r"ts=\S+T(\d\d):(\d\d):(\d\d\.\d+)Z", line)
    return ((int(m[1]) * 60 + int(m[2])) * 60 + float(m[3])) * 1000


def run_sfl(a, port, counters):
    B, pki, w = a.build, a.pki, a.work
    state = os.path.join(w, "sfl-state")
    os.makedirs(state, exist_ok=True)
    ini = os.path.join(w, "coordinator.ini")
    with open(ini, "w") as f:
        f.write(f"""[coordinator]
listen = 127.0.0.1:{port}
cert = {pki}/coordinator/coord.crt
key = {pki}/coordinator/coord.key
ca = {pki}/ca.crt
state_dir = {state}
metrics_listen = off
admin_listen = off
max_agents = {a.clients + 100}
max_conns = {a.clients + 600}
select_wait_ms = 300
tick_ms = 50
pace_min_ms = 100
idle_retry_ms = 300
subscribe_hold_ms = 1000
""")
    job = os.path.join(w, "job.ini")
    with open(job, "w") as f:
        f.write(f"""[job peer]
algo = fedavg
loss = lsq
features = {a.dim}
lr = {a.lr}
local_steps = {a.steps}
batch = 1000000
rounds = {a.rounds}
cohort = {a.clients}
overselect = 0
min_quorum = {a.clients}
deadline_ms = 600000
seed = 7
""")
    ctl_ini = os.path.join(w, "sflctl.ini")
    with open(ctl_ini, "w") as f:
        f.write(f"[sflctl]\ncoordinator = 127.0.0.1:{port}\nserver_name = 127.0.0.1\n"
                f"ca = {pki}/ca.crt\ncert = {pki}/admin/ops.crt\nkey = {pki}/admin/ops.key\n"
                "timeout_ms = 60000\n")
    ctl = [f"{B}/sflctl", "--config", ctl_ini]
    log_path = os.path.join(w, "coord.log")
    log = open(log_path, "w")
    pk = subprocess.run([f"{B}/sfl-coordinator", "--config", ini, "--public-key"],
                        check=True, capture_output=True, text=True).stdout.strip()
    coord = subprocess.Popen([f"{B}/sfl-coordinator", "--config", ini],
                             stdout=log, stderr=subprocess.STDOUT)
    agents = []

    def grep(pat):
        with open(log_path) as f:
            return [l for l in f if pat in l]

    try:
        wait_listen(port, coord, 60)
        for i in range(a.clients):
            alog = open(os.path.join(w, f"agent-{i}.log"), "w")
            agents.append(subprocess.Popen(
                [f"{B}/sfl-agent", "--coordinator", f"127.0.0.1:{port}",
                 "--server_name", "127.0.0.1", "--ca", f"{pki}/ca.crt",
                 "--cert", f"{pki}/agent/agent-{i}.crt", "--key", f"{pki}/agent/agent-{i}.key",
                 "--coordinator_pk", pk, "--data", f"libsvm:{a.data}/client-{i}.svm",
                 "--state_dir", os.path.join(w, f"agent-{i}"), "--backoff_min_ms", "100",
                 "--backoff_max_ms", "500"], stdout=alog, stderr=subprocess.STDOUT))
        end = time.time() + 600
        while len(grep("event=join ")) < a.clients:
            if time.time() > end or coord.poll() is not None:
                raise SystemExit(f"sfl: {len(grep('event=join '))} of {a.clients} agents joined")
            time.sleep(0.2)
        time.sleep(1)  # their Subscribe calls are in
        quiet = quiet_wait()
        t_a = snapshot(coord, agents, counters)
        subprocess.run(ctl + ["job", "create", job], check=True, capture_output=True)
        end = time.time() + 3600
        while not grep(f"event=round_committed job=1 round={a.rounds} "):
            if time.time() > end or coord.poll() is not None:
                raise SystemExit("sfl: the job did not finish")
            time.sleep(0.02)
        t_b = snapshot(coord, agents, counters)
        opened, committed = {}, {}
        for line in grep("event=round_"):
            r = re.search(r" round=(\d+)", line)
            if not r:
                continue
            if "event=round_open " in line and int(r[1]) not in opened:
                opened[int(r[1])] = log_ms(line)
            elif "event=round_committed " in line:
                committed[int(r[1])] = log_ms(line)
        per_round = (committed[a.rounds] - opened[1]) / 1000 / a.rounds
        failed = grep("event=round_failed")
        res = figures(t_a, t_b, coord, agents, a.rounds, per_round,
                      [committed[r] - opened[r] for r in sorted(committed)],
                      {"system": "sfl", "failures": [l.strip() for l in failed],
                       "quiet_wait_s": quiet[0], "quiet_reached": quiet[1]})
        model = os.path.join(w, "sfl-model.txt")
        subprocess.run(ctl + ["model", "export", "1", model], check=True, capture_output=True)
        res["model"] = model
        return res
    finally:
        stop(agents + [coord])


def load_model(path, dim=None):
    import numpy as np
    if path.endswith(".npy"):
        return np.load(path)
    vals = {}
    for line in open(path):
        if line.startswith("#"):
            m = re.search(r"dimension (\d+)|dim=(\d+)", line)
            if m:
                dim = int(m[1] or m[2])
            continue
        i, v = line.split()
        vals[int(i) - 1] = float(v)
    x = np.zeros(dim)
    for i, v in vals.items():
        x[i] = v
    return x


def main():
    if sys.argv[1:2] == ["compare"]:
        import numpy as np
        x, y = load_model(sys.argv[2]), load_model(sys.argv[3])
        print(f"{float(np.abs(x - y).max()):.3g} {float(np.abs(y).max()):.3g}")
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("system", choices=("flower", "sfl"))
    for k in ("dim", "clients", "rounds", "steps"):
        ap.add_argument("--" + k, type=int, required=True)
    ap.add_argument("--lr", type=float, required=True)
    for k in ("data", "pki", "build", "work", "flower-src"):
        ap.add_argument("--" + k)
    a = ap.parse_args()
    a.build = os.path.abspath(a.build or "build")
    os.makedirs(a.work, exist_ok=True)
    port = free_port()
    counters = Counters(port)
    try:
        res = run_flower(a, port, counters) if a.system == "flower" else run_sfl(a, port, counters)
    finally:
        counters.close()
    res.update(dim=a.dim, clients=a.clients, rounds=a.rounds)
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
