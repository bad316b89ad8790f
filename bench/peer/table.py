"""Renders bench/peer/flower.sh's JSON lines as results/peer-flower.md."""
import datetime
import json
import os
import sys

path, ver, load_start, load_end, rounds = sys.argv[1:6]
rows = {}
for line in open(path):
    r = json.loads(line)
    key = (r["dim"], r["clients"])
    rows.setdefault(key, {})[r.get("system", "diff")] = r


def g(x):
    if x == 0:
        return "<0.01"  # CPU: clock ticks
    return f"{x:.3g}" if x < 1000 else f"{x:,.0f}"


def load(r):
    mark = "" if r.get("quiet_reached", True) else "*"
    return f"{r['load1']:.2f}{mark}"


def cell(f, s, scale=1.0):
    a, b = f * scale, s * scale
    ratio = f"{a / b:.3g}" if b > 0 else "-"
    return f"{g(a)} / {g(b)} ({ratio}x)"


print("# Flower and sfl on the same FedAvg job")
print()
print(f"Written by `bench/peer/flower.sh` (`make bench-peer`) on "
      f"{datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores; "
      f"load average (1, 5, 15 min) {load_start} at the start, {load_end} at the end. "
      f"Flower {ver} from its git tag's `src/py` on Debian bookworm's python3 packages; "
      f"sfl from this tree.")
print()
print(f"The job: FedAvg, least squares, d features, every client in each of {rounds} "
      "rounds, 5 local full-batch gradient steps (lr 0.2) from the global model, updates "
      "weighted by sample count; sfl-sim's synth:dpbcfw data, 100 rows per client, about "
      "50 nonzero features per row, the same LibSVM shards for both. Over gRPC on "
      "loopback with TLS: Flower's `start_server` (grpc-bidi) and one `start_client` "
      "process per client, server-authenticated TLS with sfl-pki's coordinator "
      "certificate; sfl's coordinator and one `sfl-agent` process per agent, mutual TLS, "
      "a SQLite commit and checkpoint per round.")
print()
print("Each cell is Flower / sfl (Flower's figure over sfl's). The window runs from "
      "all clients connected to the last round's aggregate:")
print("s/round is the window's first round opening to the last round's aggregate, "
      "over the rounds, by the server's own clock; CPU s is utime + stime "
      "(/proc/PID/stat, all threads) spent in the window, the server's and all "
      "clients' summed; peak RSS is each process's VmHWM (whole life), the server's "
      "and the clients' median; wire is every byte of IP packets to and from the "
      "server's port in the window, counted by nftables in the input hook, over the "
      "rounds (sfl's includes the `sflctl job create` that starts the job). "
      "max abs(w_flower - w_sfl) is the largest difference between the two final "
      "models; load is the 1-minute load average when each window started: each "
      "window waited, with every client connected and idle, for it to drop below "
      "QUIET (1.0 unless set; a load marked * did not get there within "
      "QUIET_MAX_S).")
print()
print("| d | clients | s/round | server CPU s | clients CPU s | server peak RSS MB "
      "| client peak RSS MB | wire MB/round | max abs(w_flower - w_sfl) | load |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for (d, n), r in sorted(rows.items()):
    f, s = r["flower"], r["sfl"]
    diff, wmax = r["diff"]["model_diff"].split()
    print(f"| {d:,} | {n} | {cell(f['s_per_round'], s['s_per_round'])} "
          f"| {cell(f['server_cpu_s'], s['server_cpu_s'])} "
          f"| {cell(f['clients_cpu_s'], s['clients_cpu_s'])} "
          f"| {cell(f['server_rss_kb'], s['server_rss_kb'], 1 / 1024)} "
          f"| {cell(f['client_rss_kb_median'], s['client_rss_kb_median'], 1 / 1024)} "
          f"| {cell(f['bytes_per_round'], s['bytes_per_round'], 1e-6)} "
          f"| {diff} (max abs(w) {wmax}) | {load(f)} / {load(s)} |")
fails = [(k, sysname, r[sysname]["failures"]) for k, r in sorted(rows.items())
         for sysname in ("flower", "sfl") if r[sysname]["failures"]]
print()
if fails:
    for (d, n), sysname, fl in fails:
        print(f"- d = {d}, {n} clients, {sysname}: {len(fl)} failed rounds: {fl[0]}")
else:
    print("No round failed on either system.")
print()
print("""## Which Flower, and how it runs on Debian's packages

Each tag's pyproject.toml was read from the newest down and its `src/py` (from
1.18 on `framework/py`) imported (`flwr.server`, `flwr.client`) with Debian
bookworm's python3 packages (grpcio 1.51.1, protobuf 3.21.12 whose Python
runtime is 4.21.12, numpy 1.24.2, cryptography 38.0.4, pycryptodome 3.11.0,
typer 0.7.0, tomli 2.0.1, typing-extensions 4.4.0):

| tags | what stops them |
| --- | --- |
| 1.24 .. 1.26.1 | generated `_pb2` files import `google.protobuf.runtime_version` (protobuf >= 5.26); and those below |
| 1.20 .. 1.23 | `flwr.common.grpc` imports `grpc_health` (grpcio-health-checking: not in bookworm); and the one below |
| 1.11 .. 1.19 | `flwr.client` imports `flwr.cli.install`, whose `typer.Argument(...)` without a default needs typer >= 0.9 (bookworm: 0.7.0) |
| **1.10.0** | runs, with the two stand-ins below |

1.10.0's pyproject asks for newer versions than Debian's (grpcio ^1.60,
protobuf ^4.25, cryptography ^42, pycryptodome ^3.18, typer ^0.9), but the
parts used here import and run on Debian's. Two imports are supplied by
`bench/peer/flwr_compat.py` (imported before flwr; Flower's code is not
changed): `Crypto` is aliased to Debian's python3-pycryptodome, which ships
PyCryptodome as `Cryptodome` (Flower imports it only for SecAgg+, unused
here), and `iterators.TimeoutIterator` (PyPI iterators 0.0.2, not in
Debian; used by the grpc-bidi server's Join stream) is a 60-line local
stand-in with the same behaviour (a reader thread per stream, next() with a
timeout). typer is imported only by `flwr.cli`, which 1.10.0's server and
client do not import.""")
