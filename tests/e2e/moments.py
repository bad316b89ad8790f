"""The pooled moments sfl-sim --standardize computes, by an independent
reimplementation: each client's vector from zeros (its rows in order, its
features ascending, count, sum x, sum x*x), then the clients' vectors added
in client order from zeros, in IEEE float64 as libsfl does
(sfl_dataset_moments; the coordinator's statistics round in agent-id
order). Compares them, bit for bit, with a `sflctl model export`
FILE.moments.

    moments.py D EXPORTED.moments CLIENT.svm ...   (clients in agent-id order)

With secure aggregation (update mode 2) the stored sum is not bit for bit:
each member's moments went through mode 2's stochastic fixed point
(sfl/crypto/savec.h, sfl_sa_moments_error), so they are compared within

    |stored - sum| < count * w_max * 2^-f / s,  s = B^2, B, 1

for the count, the sums and the sums of squares, with 2^-f the quantizer's
step at clip B^2 and n_max = count (bits = 30 - floor(log2 n_max)):

    moments.py --secagg N_MAX W_MAX B D EXPORTED.moments CLIENT.svm ...
"""
import math
import sys


def client(path, d):
    m = [0.0] * (1 + 2 * d)
    rows = 0
    for line in open(path):
        f = line.split()
        if not f:
            continue
        rows += 1
        for tok in f[1:]:
            j, v = tok.split(":")
            j, v = int(j) - 1, float(v)
            if j >= d:
                break
            m[1 + j] += v
            m[1 + d + j] += v * v
    m[0] += rows
    return m


def step(n_max, clip):
    """2^-f of sfl_sa_quant_init: the largest f with clip 2^f <= 2^bits."""
    bits = 30 - (n_max.bit_length() - 1)
    f = math.floor(bits - math.log2(clip))
    while math.ldexp(clip, f) > math.ldexp(1.0, bits):
        f -= 1
    while math.ldexp(clip, f + 1) <= math.ldexp(1.0, bits):
        f += 1
    return math.ldexp(1.0, -f)


def within(n_max, w_max, b, d, got, total, nfiles):
    q = step(n_max, b * b)
    worst = 0.0
    for i, (g, w) in enumerate(zip(got, total)):
        s = b * b if i == 0 else b if i <= d else 1.0
        bound = nfiles * w_max * q / s
        err = abs(g - w)
        assert err < bound * (1 + 1e-9) + 1e-9 * abs(w), (i, g, w, bound)
        if i > d:
            worst = max(worst, err / bound)
    sq = nfiles * w_max * q
    print(f"stored moments vs the ordered sum over {nfiles} clients (secure aggregation): "
          f"{int(total[0])} rows, count exact: {got[0] == total[0]}, bound on a sum of squares "
          f"{sq:.3g} ({sq / (total[0] * b * b):.3g} of rows x B^2), largest error "
          f"{worst:.3g} of it")
    assert got[0] == total[0]


def main():
    args = sys.argv[1:]
    sa = args[0] == "--secagg"
    if sa:
        n_max, w_max, b = int(args[1]), float(args[2]), float(args[3])
        args = args[4:]
    d, exported, files = int(args[0]), args[1], args[2:]
    total = [0.0] * (1 + 2 * d)
    for p in files:
        m = client(p, d)
        total = [a + b for a, b in zip(total, m)]
    got = [float(l) for l in open(exported) if not l.startswith("#")]
    assert len(got) == len(total), (len(got), len(total))
    if sa:
        within(n_max, w_max, b, d, got, total, len(files))
        return
    diff = [i for i in range(len(total)) if got[i] != total[i]]
    print(f"stored moments vs the ordered sum over {len(files)} clients: {int(total[0])} rows, "
          f"{len(total)} values, {len(diff)} differ")
    assert not diff, [(i, got[i], total[i]) for i in diff[:5]]


main()
