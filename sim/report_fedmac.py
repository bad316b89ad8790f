"""The FedMac section of results/REPORT.md (seed 002): Table 1 on MNIST and
FedProx's Synthetic data, Fig. 2 (R and beta), wall time, and a centralized
check of the MLP against scikit-learn. Called by sim/report.py; helpers
(run, plot, RUNS, RES) come from there."""
import os
import sys
import time

import report as R

# Table 1 of the paper: (GM, PM) accuracy in %, None where not reported.
PAPER = {
    "mnist": {"fedavg": (96.8603, None), "fedprox": (96.8564, None),
              "perfedavg": (None, 98.1474), "pfedme": (96.8698, 98.9223),
              "fedmac": (96.8964, 98.9547)},
    "synth": {"fedavg": (84.6333, None), "fedprox": (84.5475, None),
              "perfedavg": (None, 88.7006), "pfedme": (83.5622, 87.4969),
              "fedmac": (84.8889, 89.0583)},
}
ALGOS = ("fedmac", "pfedme", "perfedavg", "fedavg", "fedprox")
PERSONAL = ("fedmac", "pfedme", "perfedavg")


def best(rows, key):
    v = [float(r[key]) for r in rows if key in r and r[key] not in ("", "nan")]
    return (max(v), v[-1]) if v else (float("nan"), float("nan"))


def pct(x):
    return "" if x is None or x != x else f"{100 * x:.2f}"


def paper(x):
    return "" if x is None else f"{x:.2f}"


def mnist_args(data):
    m = os.path.join(data, "mnist")
    imgs = os.path.join(m, "train-images-idx3-ubyte.gz")
    if not os.path.exists(imgs):
        return None
    return ["--data", f"idx:{imgs},{os.path.join(m, 'train-labels-idx1-ubyte.gz')}"]


def table1(sim, data):
    md = ["## Table 1: personalized (PM) and global (GM) test accuracy", "",
          "T = 800 rounds, |D| = 20, R = 20, beta = 1, each algorithm with Table 2's",
          "hyperparameters (sim/experiments/fedmac-*.ini). \"best\" is the highest accuracy",
          "over the evaluated rounds (every 10th, the first and the last: `--eval-every 10`),",
          "as the paper reports; \"last\" is round 800's. GM: the global model on the pooled",
          "test parts; PM: every client's own model on its own test part, pooled (pFedMe's",
          "rule). Algorithms without a personal model have no PM.", ""]
    walls = []
    for ds, title in (("mnist", "MNIST (pFedMe's split: 20 clients, 2 labels each, S = 10, "
                                "hidden 100)"),
                      ("synth", "Synthetic (FedProx's, alpha = beta = 0.5: 100 clients, "
                                "S = 20, hidden 20)")):
        extra = []
        if ds == "mnist":
            extra = mnist_args(data)
            if extra is None:
                md += [f"### {title}", "", f"Skipped: {data}/mnist not found.", ""]
                continue
        md += [f"### {title}", "",
               "| algorithm | GM best | GM last | PM best | PM last | paper GM | paper PM "
               "| wall s |", "|---|---|---|---|---|---|---|---|"]
        series_g, series_p = [], []
        for alg in ALGOS:
            name = f"fedmac-{ds}-{alg}"
            t = time.time()
            rows, ok, err = R.run(sim, name, extra)
            wall = time.time() - t
            walls.append(wall)
            if not ok or not rows:
                md.append(f"| {alg} | failed: {err[:200]} | | | | | | |")
                continue
            gb, gl = best(rows, "test_accuracy")
            pb, pl = best(rows, "personal_accuracy")
            pg, pp = PAPER[ds][alg]
            md.append(f"| {alg} | {pct(gb)} | {pct(gl)} | {pct(pb)} | {pct(pl)} | "
                      f"{paper(pg)} | {paper(pp)} | {wall:.0f} |")
            path = os.path.join(R.RUNS, name + ".csv")
            series_g.append((f"{alg} GM", path))
            if alg in PERSONAL:
                series_p.append((f"{alg} PM", path))
        md.append("")
        if series_g:
            R.plot(os.path.join(R.RES, f"fedmac-{ds}-gm.png"), f"{ds}: global model accuracy",
                   series_g, ylabel="test accuracy", logy=False, ycol="test_accuracy")
            R.plot(os.path.join(R.RES, f"fedmac-{ds}-pm.png"),
                   f"{ds}: personalized model accuracy", series_p, ylabel="test accuracy",
                   logy=False, ycol="personal_accuracy")
            md += [f"![{ds} GM](fedmac-{ds}-gm.png) ![{ds} PM](fedmac-{ds}-pm.png)", ""]
    if walls:
        md += [f"Wall time of these runs on this machine: {sum(walls):.0f} s in all "
               "(one core each, one after the other).", ""]
    return md


def fig2(sim, data):
    """Effect of R and of beta on FedMac, MNIST, 300 rounds."""
    extra = mnist_args(data)
    md = ["## Fig. 2: effect of R and beta (MNIST, FedMac, 300 rounds)", ""]
    if extra is None:
        return md + [f"Skipped: {data}/mnist not found.", ""]
    md += ["Paper: a larger R converges faster; a larger beta raises the global model's",
           "accuracy and lowers the personalized one's.", "",
           "| setting | GM best | PM best | GM at round 300 | PM at round 300 |",
           "|---|---|---|---|---|"]
    for what, values in (("local_steps", ("5", "10", "20")), ("beta", ("0.5", "1", "2"))):
        series = []
        for v in values:
            tag = f"fedmac-fig2-{what}-{v}"
            flag = "--" + what.replace("_", "-")
            rows, ok, err = R.run(sim, "fedmac-mnist-fedmac",
                                  extra + [flag, v, "--rounds", "300"], tag)
            if not ok or not rows:
                md.append(f"| {what} = {v} | failed: {err[:200]} | | | |")
                continue
            gb, gl = best(rows, "test_accuracy")
            pb, pl = best(rows, "personal_accuracy")
            md.append(f"| {'R' if what == 'local_steps' else what} = {v} | {pct(gb)} | "
                      f"{pct(pb)} | {pct(gl)} | {pct(pl)} |")
            series.append((f"{what}={v} PM", os.path.join(R.RUNS, tag + ".csv")))
        if series:
            R.plot(os.path.join(R.RES, f"fedmac-fig2-{what}.png"),
                   f"FedMac, MNIST: personalized accuracy by {what}", series,
                   ylabel="personalized accuracy", logy=False, ycol="personal_accuracy")
    md += ["", "![R](fedmac-fig2-local_steps.png) ![beta](fedmac-fig2-beta.png)", ""]
    return md


D_MLP = 79510  # parameters of the MNIST MLP (784-100-10)


def paper_bits(density):
    """Sec. 5.5's accounting, bits per client and round, upload + broadcast:
    nonzeros 64 bits, zeros 1 bit, plus a 1-bit index map."""
    return density * D_MLP * 2 * 64 + (1 - density) * D_MLP * 2 * 1 + D_MLP


def fig4(sim, data):
    """FedMac against modified pFedMe under sparsity (Fig. 4, Sec. 5.5)."""
    extra = mnist_args(data)
    md = ["## Fig. 4 and Sec. 5.5: FedMac against modified pFedMe under sparsity (MNIST)", ""]
    if extra is None:
        return md + [f"Skipped: {data}/mnist not found.", ""]
    sparse = ["--eta-p", "0.08", "--gamma", "0.01", "--rho", "0.01", "--prune", "0.001",
              "--min-density", "0.5", "--rounds", "300"]
    md += ["Both with the smoothed l1 on theta (gamma = 0.01, rho = 0.01; the paper gives",
           "neither), eta_p = 0.08, gamma_w = 0, beta = 1, S = 10, |D| = 20, 300 rounds.",
           "The sent model's entries below 1e-3 become 0 with at least 50 % kept (the",
           "paper's floor: `--prune 0.001 --min-density 0.5`). Density is the global",
           "model's nonzero fraction (what is broadcast); bytes are our codec's (f64",
           "values, gap-coded indices) per client and round, against Sec. 5.5's",
           "accounting (64 bits a nonzero, 1 bit a zero, a 1-bit index map) at the same",
           "density.", "",
           "| algorithm | PM best | PM last | GM last | density last | up + down bytes "
           "per client, last round | paper's accounting at that density | dense (codec) |",
           "|---|---|---|---|---|---|---|---|"]
    series_a, series_d = [], []
    for alg in ("fedmac", "pfedme"):
        tag = f"fedmac-fig4-{alg}"
        rows, ok, err = R.run(sim, f"fedmac-mnist-{alg}", extra + sparse, tag)
        if not ok or not rows:
            md.append(f"| {alg} | failed: {err[:200]} | | | | | | |")
            continue
        pb, pl = best(rows, "personal_accuracy")
        gb, gl = best(rows, "test_accuracy")
        dens = float(rows[-1]["nnz"]) / D_MLP
        per = (float(rows[-1]["bytes_up"]) + float(rows[-1]["bytes_down"])) / 10
        dense = 2 * 715597  # the codec's f64 bytes of a dense update, bench_mlp
        name = "FedMac" if alg == "fedmac" else "modified pFedMe"
        md.append(f"| {name} | {pct(pb)} | {pct(pl)} | {pct(gl)} | {dens:.3f} | "
                  f"{per:,.0f} | {paper_bits(dens) / 8:,.0f} | {dense:,} |")
        path = os.path.join(R.RUNS, tag + ".csv")
        series_a.append((f"{name} PM", path))
        series_d.append((name, path))
    if series_a:
        R.plot(os.path.join(R.RES, "fedmac-fig4-acc.png"), "sparse: personalized accuracy",
               series_a, ylabel="personalized accuracy", logy=False, ycol="personal_accuracy")
        R.plot(os.path.join(R.RES, "fedmac-fig4-nnz.png"), "sparse: global model nonzeros",
               series_d, ylabel="nonzeros (of 79510)", logy=False, ycol="nnz")
        md += ["", "![accuracy](fedmac-fig4-acc.png) ![nonzeros](fedmac-fig4-nnz.png)"]
    md += ["", f"Sec. 5.5's accounting for a dense model: {paper_bits(1.0) / 8:,.0f} bytes "
           f"per client and round; at 50 %: {paper_bits(0.5) / 8:,.0f} "
           f"({paper_bits(0.5) / paper_bits(1.0):.3f} of dense, the paper's \"almost half\").",
           ""]
    return md


def centralized_mlp(sim, data):
    """Our MLP trained centrally (sfl-sim --centralized, SGD) against
    scikit-learn's MLPClassifier on the same pooled rows."""
    extra = mnist_args(data)
    md = ["## Centralized reference: the MLP against scikit-learn's MLPClassifier", ""]
    if extra is None:
        return md + [f"Skipped: {data}/mnist not found.", ""]
    try:
        import numpy as np
        from sklearn.neural_network import MLPClassifier
    except ImportError as e:
        return md + [f"Skipped: {e}.", ""]
    # ours: all MNIST training rows in one client, plain minibatch SGD
    # (FedAvg, one local step per round), batch 20, lr 0.05, 15,000 steps.
    rows, ok, err = R.run(sim, "fedmac-mnist-fedavg",
                          extra + ["--centralized", "--partition", "iid", "--clients", "1",
                                   "--cohort", "0", "--lr", "0.05", "--rounds", "15000",
                                   "--eval-every", "1000", "--test-frac", "0.2"],
                          "fedmac-central-sfl")
    ours = float(rows[-1]["test_accuracy"]) if ok and rows else float("nan")
    # scikit-learn on the same kind of split (its own shuffle): sgd, batch 20,
    # lr 0.05, 5 epochs of 48,000 rows = 12,000 steps, no momentum, alpha 0.
    m = os.path.join(data, "mnist")

    def idx(name):
        import gzip
        with gzip.open(os.path.join(m, name)) as f:
            b = f.read()
        return np.frombuffer(b, dtype=np.uint8, offset=16 if "images" in name else 8)
    X = idx("train-images-idx3-ubyte.gz").reshape(-1, 784) / 255.0
    y = idx("train-labels-idx1-ubyte.gz")
    rng = np.random.default_rng(7)
    perm = rng.permutation(len(y))
    cut = int(0.8 * len(y))
    tr, te = perm[:cut], perm[cut:]
    t = time.time()
    clf = MLPClassifier(hidden_layer_sizes=(100,), solver="sgd", batch_size=20,
                        learning_rate_init=0.05, momentum=0.0, alpha=0.0, max_iter=5,
                        shuffle=True, random_state=7, tol=0.0, n_iter_no_change=1000)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X[tr], y[tr])
    sk = clf.score(X[te], y[te])
    md += ["Both train a 784-100-10 ReLU network with softmax cross-entropy by plain",
           "minibatch SGD (batch 20, step 0.05, no momentum, no l2) on 80% of MNIST's",
           "training images and test on the other 20%.", "",
           "| implementation | steps | held-out accuracy |", "|---|---|---|",
           f"| sfl-sim --centralized (mlp:100) | 15,000 | {pct(ours)} |",
           f"| scikit-learn MLPClassifier | 12,000 (5 epochs) | {100 * sk:.2f} "
           f"({time.time() - t:.0f} s) |", ""]
    print(f"  sklearn MLP: {sk:.4f}", file=sys.stderr)
    return md


def section(sim, data):
    print("fedmac:", file=sys.stderr)
    md = ["# FedMac (seed 002)", "",
          "FedMac (Alg. 1), pFedMe, Per-FedAvg (first order), FedAvg and FedProx with the",
          "same MLP (`--loss mlp:H`, libsfl/src/model/mlp.c) in sfl-sim. What matched and",
          "what did not is summarised at the end of this section.", ""]
    md += table1(sim, data)
    md += fig2(sim, data)
    md += fig4(sim, data)
    md += centralized_mlp(sim, data)
    md += [open(os.path.join(R.HERE, "report-fedmac-notes.md")).read(), ""]
    return md
