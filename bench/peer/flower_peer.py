"""The Flower half of bench/peer: FedAvg on a least-squares problem, Flower's
own server (flwr.server.start_server, grpc-bidi, TLS) and clients
(flwr.client.start_client), on Debian's python3 packages.

  flower_peer.py server --port P --clients N --rounds R --dim D
                        --ca F --cert F --key F --model-out F
  flower_peer.py client --port P --dim D --data SHARD.svm --lr G --steps K --ca F

Run with PYTHONPATH=$FLOWER_SRC/src/py (a checkout of Flower's git tag
v1.10.0). The server talks to bench/peer/run.py on stdin/stdout: when all N
clients are connected it prints `ready`, waits for a line on stdin, then
prints `round R START END` per round (time.time(), after aggregation) and
`done` after round R; then it returns and the clients are told to go.

The local step is sfl's (libsfl/src/model/loss.c, algo.c): K full-batch
gradient steps x -= lr * (2/n) X'(Xx - y) from the global model; the
server's FedAvg weights each update by its sample count, as sfl's
fedavg does.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flwr_compat  # noqa: E402,F401  (before flwr)

import numpy as np  # noqa: E402
import flwr as fl  # noqa: E402
from flwr.common import ndarrays_to_parameters, parameters_to_ndarrays  # noqa: E402
from flwr.server.strategy import FedAvg  # noqa: E402


def load_libsvm(path, dim):
    """A LibSVM shard as COO arrays (row, col 0-based, value) and labels."""
    rows, cols, vals, y = [], [], [], []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            i = len(y)
            y.append(float(parts[0]))
            for tok in parts[1:]:
                j, v = tok.split(":")
                rows.append(i)
                cols.append(int(j) - 1)
                vals.append(float(v))
    cols = np.asarray(cols, dtype=np.int64)
    if cols.size and cols.max() >= dim:
        raise SystemExit(f"{path}: a feature past --dim {dim}")
    return (np.asarray(rows, dtype=np.int64), cols, np.asarray(vals), np.asarray(y))


class LsqClient(fl.client.NumPyClient):
    def __init__(self, shard, dim, lr, steps):
        self.r, self.c, self.v, self.y = shard
        self.n = len(self.y)
        self.dim, self.lr, self.steps = dim, lr, steps

    def get_parameters(self, config):
        return [np.zeros(self.dim)]

    def fit(self, parameters, config):
        x = np.array(parameters[0], dtype=np.float64)
        for _ in range(self.steps):
            m = np.bincount(self.r, weights=self.v * x[self.c], minlength=self.n)
            coef = 2.0 * (m - self.y) / self.n
            g = np.bincount(self.c, weights=self.v * coef[self.r], minlength=self.dim)
            x -= self.lr * g
        return [x], self.n, {}


class Timed(FedAvg):
    def __init__(self, nclients, rounds, model_out, **kw):
        super().__init__(**kw)
        self.nclients, self.rounds, self.model_out = nclients, rounds, model_out
        self.t0 = 0.0

    def configure_fit(self, server_round, parameters, client_manager):
        if server_round == 1:
            if not client_manager.wait_for(self.nclients, timeout=3600):
                raise SystemExit("not all clients connected")
            print("ready", flush=True)
            sys.stdin.readline()
        self.t0 = time.time()
        return super().configure_fit(server_round, parameters, client_manager)

    def aggregate_fit(self, server_round, results, failures):
        if failures or len(results) != self.nclients:
            print(f"failed round {server_round}: {len(results)} results, "
                  f"{len(failures)} failures", flush=True)
        agg, metrics = super().aggregate_fit(server_round, results, failures)
        print(f"round {server_round} {self.t0:.6f} {time.time():.6f}", flush=True)
        if server_round == self.rounds:
            print("done", flush=True)
            np.save(self.model_out, parameters_to_ndarrays(agg)[0])
        return agg, metrics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("server", "client"))
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--dim", type=int, required=True)
    ap.add_argument("--clients", type=int)
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--ca")
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--model-out")
    ap.add_argument("--data")
    ap.add_argument("--lr", type=float)
    ap.add_argument("--steps", type=int)
    a = ap.parse_args()
    addr = f"127.0.0.1:{a.port}"
    if a.mode == "server":
        n = a.clients
        strategy = Timed(n, a.rounds, a.model_out, fraction_fit=1.0, fraction_evaluate=0.0,
                         min_fit_clients=n, min_available_clients=n,
                         initial_parameters=ndarrays_to_parameters([np.zeros(a.dim)]))
        certs = tuple(open(p, "rb").read() for p in (a.ca, a.cert, a.key))
        fl.server.start_server(server_address=addr, strategy=strategy, certificates=certs,
                               config=fl.server.ServerConfig(num_rounds=a.rounds))
    else:
        client = LsqClient(load_libsvm(a.data, a.dim), a.dim, a.lr, a.steps)
        fl.client.start_client(server_address=addr, client=client.to_client(),
                               root_certificates=open(a.ca, "rb").read(),
                               transport="grpc-bidi")


if __name__ == "__main__":
    main()
