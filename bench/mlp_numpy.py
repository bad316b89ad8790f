#!/usr/bin/python3
"""numpy reference for bench/bench_mlp.c: the mlp:H gradient (mean
cross-entropy, no ridge) on dense float64 minibatches, the arithmetic of
bench_mlp's dgemm path. bench_mlp writes the data and runs it as a
coprocess, so that its passes interleave with the C ones:

    mlp_numpy.py DIR N H C R

DIR/X.f64 holds R x N rows (row-major), DIR/y.f64 R class ids, DIR/model.f64
the parameters in libsfl/src/model/mlp.c's layout (W1 N x H, b1, W2 C x H,
b2), all native float64. Each line B on stdin asks for one pass over the R
rows in batches of B, answered by

    numpy batch=B seconds=T

The first request for a B also writes the gradient of the first batch to
DIR/grad_B.f64 and warms up. Exits at EOF; exits 77 when numpy is not
installed. One core: run it with OPENBLAS_NUM_THREADS=1 (bench_mlp does).
By hand: echo 20 | OPENBLAS_NUM_THREADS=1 bench/mlp_numpy.py DIR 784 100 10 5120
"""
import os
import sys
import time

try:
    import numpy as np
except ImportError:
    print("numpy skipped: python3-numpy is not installed", flush=True)
    sys.exit(77)


def blas_path():
    """The BLAS library this process loaded (libblas.so.3 is an alternative)."""
    with open("/proc/self/maps") as f:
        for line in f:
            name = os.path.basename(line.split()[-1])
            if "blas" in name and ".so" in name:
                return os.path.realpath(line.split()[-1])
    return "?"


def grad(xb, yb, w1, b1, w2, b2, g):
    """g (views gw1, gb1, gw2, gb2) = the gradient over the batch xb, yb."""
    gw1, gb1, gw2, gb2 = g
    b = xb.shape[0]
    z1 = xb @ w1
    z1 += b1
    a = np.maximum(z1, 0.0)
    s = a @ w2.T
    s += b2
    s -= s.max(axis=1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=1, keepdims=True)
    s[np.arange(b), yb] -= 1.0
    s *= 1.0 / b
    np.matmul(s.T, a, out=gw2)
    np.sum(s, axis=0, out=gb2)
    dz = s @ w2
    dz *= z1 > 0.0
    np.matmul(xb.T, dz, out=gw1)
    np.sum(dz, axis=0, out=gb1)


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    d = sys.argv[1]
    n, h, c, r = (int(v) for v in sys.argv[2:6])
    x = np.fromfile(os.path.join(d, "X.f64"), dtype=np.float64).reshape(r, n)
    y = np.fromfile(os.path.join(d, "y.f64"), dtype=np.float64).astype(np.intp)
    m = np.fromfile(os.path.join(d, "model.f64"), dtype=np.float64)
    dim = h * (n + 1) + c * (h + 1)
    if x.size != r * n or y.size != r or m.size != dim:
        sys.exit("mlp_numpy: data files do not match the arguments")
    w1 = m[: n * h].reshape(n, h)
    b1 = m[n * h : n * h + h]
    w2 = m[n * h + h : n * h + h + c * h].reshape(c, h)
    b2 = m[n * h + h + c * h :]
    gv = np.empty(dim)
    g = (gv[: n * h].reshape(n, h), gv[n * h : n * h + h],
         gv[n * h + h : n * h + h + c * h].reshape(c, h), gv[n * h + h + c * h :])
    print("numpy version=%s blas=%s" % (np.__version__, blas_path()), flush=True)
    seen = set()
    for line in sys.stdin:
        b = int(line)
        if b not in seen:
            seen.add(b)
            grad(x[:b], y[:b], w1, b1, w2, b2, g)
            gv.tofile(os.path.join(d, "grad_%d.f64" % b))
        t0 = time.perf_counter()
        for r0 in range(0, r - b + 1, b):
            grad(x[r0 : r0 + b], y[r0 : r0 + b], w1, b1, w2, b2, g)
        print("numpy batch=%d seconds=%.9f" % (b, time.perf_counter() - t0), flush=True)


if __name__ == "__main__":
    main()
