"""The pooled moments sfl-sim --standardize computes, by an independent
reimplementation: each client's vector from zeros (its rows in order, its
features ascending, count, sum x, sum x*x), then the clients' vectors added
in client order from zeros, in IEEE float64 as libsfl does
(sfl_dataset_moments; the coordinator's statistics round in agent-id
order). Compares them, bit for bit, with a `sflctl model export`
FILE.moments.

    moments.py D EXPORTED.moments CLIENT.svm ...   (clients in agent-id order)
"""
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


def main():
    d, exported, files = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    total = [0.0] * (1 + 2 * d)
    for p in files:
        m = client(p, d)
        total = [a + b for a, b in zip(total, m)]
    got = [float(l) for l in open(exported) if not l.startswith("#")]
    assert len(got) == len(total), (len(got), len(total))
    diff = [i for i in range(len(total)) if got[i] != total[i]]
    print(f"stored moments vs the ordered sum over {len(files)} clients: {int(total[0])} rows, "
          f"{len(total)} values, {len(diff)} differ")
    assert not diff, [(i, got[i], total[i]) for i in diff[:5]]


main()
