"""The FedMac section of results/REPORT.md (seed 002): Table 1 on MNIST and
FedProx's Synthetic data, pFedMe's 2020 split like for like, Fig. 2 (R and
beta), Fig. 4 (sparsity), and a centralized check of the MLP against
scikit-learn. Called by sim/report.py; helpers (run, plot, RUNS, RES) come
from there. The closing notes (sim/report-fedmac-notes.md) name numbers as
{key} fields that this script fills from the runs (VALUES below), so no
number in them is typed by hand.

Seeds: every Synthetic row and FedAvg's split comparison average three
seeds. MNIST's T = 800 runs are standardised (dense rows, ten minutes or
more each on this shared machine); SFL_FEDMAC_SEEDS="7 8 9" (default "7")
runs Table 1's MNIST rows with more seeds, shown as mean (min-max)."""
import csv
import os
import re
import statistics
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
SYNTH_SEEDS = (7, 8, 9)
SPLIT_SEEDS = (7, 8, 9)  # the clean split against pFedMe's 2020 one
SPLIT_ROUNDS = 100
EPS_PFEDME = "3.92156862745098e-06"  # 0.001 / 255, as in the MNIST inis
VALUES = {}  # {key} fields of report-fedmac-notes.md
WALL = []    # every run's seconds


def mnist_seeds():
    return [int(s) for s in os.environ.get("SFL_FEDMAC_SEEDS", "7").split()]


def best(rows, key):
    v = [float(r[key]) for r in rows if key in r and r[key] not in ("", "nan")]
    return (100 * max(v), 100 * v[-1]) if v else (float("nan"), float("nan"))


def mnist_args(data):
    m = os.path.join(data, "mnist")
    imgs = os.path.join(m, "train-images-idx3-ubyte.gz")
    if not os.path.exists(imgs):
        return None
    return ["--data", f"idx:{imgs},{os.path.join(m, 'train-labels-idx1-ubyte.gz')}"]


OVERLAP = re.compile(r"data: (\d+) training rows \((\d+) distinct\), (\d+) test rows, "
                     r"(\d+) of them \(([\d.]+)%\)")


def run(sim, name, extra, tag):
    """One sfl-sim run: (rows, ok, stderr, seconds)."""
    t = time.time()
    rows, ok, err = R.run(sim, name, extra, tag)
    WALL.append(time.time() - t)
    return rows, ok, err, WALL[-1]


def cmd(name, flags):
    return f"`sfl-sim --config sim/experiments/{name}.ini {' '.join(flags)}`".replace("  ", " ")


def stat(xs):
    """(mean, lo, hi) of the finite xs."""
    xs = [x for x in xs if x == x]
    if not xs:
        return (float("nan"),) * 3
    return statistics.mean(xs), min(xs), max(xs)


def fmt(s, digits=2):
    m, lo, hi = s
    if m != m:
        return ""
    if lo == hi:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


def paper(x):
    return "" if x is None else f"{x:.2f}"


def diff(s, p):
    return "" if p is None or s[0] != s[0] else f"{s[0] - p:+.2f}"


def seeds_runs(sim, name, extra, seeds, tag):
    """Runs name over seeds; returns per-metric stats, wall, stderr, paths."""
    gb, gl, pb, pl, walls, errs, paths = [], [], [], [], [], [], []
    for s in seeds:
        t = f"{tag}-s{s}"
        rows, ok, err, w = run(sim, name, extra + ["--seed", str(s)], t)
        walls.append(w)
        errs.append(err)
        if not ok or not rows:
            return None, err
        g = best(rows, "test_accuracy")
        p = best(rows, "personal_accuracy")
        gb.append(g[0]), gl.append(g[1]), pb.append(p[0]), pl.append(p[1])
        paths.append(os.path.join(R.RUNS, t + ".csv"))
    return {"gb": stat(gb), "gl": stat(gl), "pb": stat(pb), "pl": stat(pl),
            "wall": sum(walls), "errs": errs, "paths": paths}, ""


def table1(sim, data):
    md = ["## Table 1: personalized (PM) and global (GM) test accuracy", "",
          "T = 800 rounds, |D| = 20, R = 20, beta = 1, each algorithm with Table 2's",
          "hyperparameters (sim/experiments/fedmac-*.ini). \"best\" is the highest accuracy",
          "over the evaluated rounds (the first, the last and every 10th on Synthetic, every",
          "20th on MNIST to halve the cost of evaluating standardised, dense rows:",
          "`--eval-every 20`), as the paper reports; \"last\" is round 800's. GM: the",
          "global model on the pooled test parts; PM: every client's own model on its own",
          "test part, pooled (pFedMe's rule). Algorithms without a personal model have no PM. Several seeds: mean",
          "(min-max). \"- paper\": our mean less the paper's figure.", ""]
    head = ["| algorithm | seeds | GM best | GM last | PM best | PM last | paper GM | paper PM "
            "| GM - paper | PM - paper | wall s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for ds in ("mnist", "synth"):
        if ds == "mnist":
            extra = mnist_args(data)
            if extra is not None:
                extra += ["--eval-every", "20"]
            seeds = mnist_seeds()
            title = ("MNIST (pFedMe's split, the clean one: 20 clients, 2 labels each, S = 10, "
                     "hidden 100; pixels standardised as pFedMe's generator did)")
            if extra is None:
                md += [f"### {title}", "", f"Skipped: {data}/mnist not found.", ""]
                continue
        else:
            extra, seeds = [], SYNTH_SEEDS
            title = ("Synthetic (FedProx's, alpha = beta = 0.5: 100 clients, S = 20, hidden 20; "
                     "not standardised, as neither FedProx's nor pFedMe's generator does)")
        md += [f"### {title}", ""] + head
        series_g, series_p, overlap = [], [], ""
        for alg in ALGOS:
            name = f"fedmac-{ds}-{alg}"
            r, err = seeds_runs(sim, name, extra, seeds, name)
            if r is None:
                md.append(f"| {alg} | failed: {err[:200]} | | | | | | | | | |")
                continue
            pg, pp = PAPER[ds][alg]
            md.append(f"| {alg} | {len(seeds)} | {fmt(r['gb'])} | {fmt(r['gl'])} | "
                      f"{fmt(r['pb'])} | {fmt(r['pl'])} | {paper(pg)} | {paper(pp)} | "
                      f"{diff(r['gb'], pg)} | {diff(r['pb'], pp)} | {r['wall']:.0f} |")
            for k in ("gb", "gl", "pb", "pl"):
                VALUES[f"{ds}.{alg}.{k}"] = fmt(r[k])
                VALUES[f"{ds}.{alg}.{k}.mean"] = f"{r[k][0]:.2f}"
            VALUES[f"{ds}.{alg}.gdiff"] = diff(r["gb"], pg)
            VALUES[f"{ds}.{alg}.pdiff"] = diff(r["pb"], pp)
            m = OVERLAP.search(r["errs"][0])
            if m and not overlap:
                overlap = (f"The clean split (seed {seeds[0]}): {int(m[1]):,} training rows, "
                           f"{int(m[2]):,} distinct; {int(m[3]):,} test rows, {int(m[4])} of "
                           "them in some client's training part.")
            series_g.append((f"{alg} GM", r["paths"][0]))
            if alg in PERSONAL:
                series_p.append((f"{alg} PM", r["paths"][0]))
        flags = (["--data", "idx:TRAIN-IMAGES,TRAIN-LABELS", "--eval-every", "20"]
                 if ds == "mnist" else [])
        md += ["", "Produced by: " + cmd(f"fedmac-{ds}-ALGO", flags + ["--seed S"]) +
               f" for ALGO in {', '.join(ALGOS)} and S in {', '.join(map(str, seeds))}; "
               "`make reproduce ONLY=fedmac`.", ""]
        if overlap:
            md += [overlap, ""]
        if series_g:
            R.plot(os.path.join(R.RES, f"fedmac-{ds}-gm.png"),
                   f"{ds}: global model accuracy (seed {seeds[0]})", series_g,
                   ylabel="test accuracy", logy=False, ycol="test_accuracy")
            R.plot(os.path.join(R.RES, f"fedmac-{ds}-pm.png"),
                   f"{ds}: personalized model accuracy (seed {seeds[0]})", series_p,
                   ylabel="test accuracy", logy=False, ycol="personal_accuracy")
            md += [f"![{ds} GM](fedmac-{ds}-gm.png) ![{ds} PM](fedmac-{ds}-pm.png)", ""]
    return md


SHORT = 100  # rounds of the split and input comparisons
SPLIT_SEEDS = {"fedavg": (7, 8, 9), "fedmac": (7,)}


def short_horizon(sim, data):
    """pFedMe's 2020 split (overlapping copies) against the clean one, and
    the inputs (/255, standardised with either eps), at SHORT rounds."""
    extra = mnist_args(data)
    md = [f"## pFedMe's 2020 split and the inputs, like for like (MNIST, {SHORT} rounds)", ""]
    if extra is None:
        return md + [f"Skipped: {data}/mnist not found.", ""]
    md += ["`--partition pfedme2020` replays the split of pFedMe's public generator as it",
           "stood in 2020 (docs/algorithms.md): clients that share a label hold copies of",
           "the same first images of it, so after each client's 75/25 split most test",
           "images are also in some client's training part. Both splits standardised as",
           f"in Table 1, {SHORT} rounds (a T = 800 run of standardised MNIST takes many",
           "minutes here), evaluated every 10th round; FedAvg over seeds "
           f"{', '.join(map(str, SPLIT_SEEDS['fedavg']))} (mean (min-max)), FedMac seed "
           f"{', '.join(map(str, SPLIT_SEEDS['fedmac']))}. Row counts: sfl-sim's stderr line.",
           "", "| split | training rows (distinct) | test rows also in training | "
           "FedAvg GM best | FedMac GM best | FedMac PM best |", "|---|---|---|---|---|---|"]
    res = {}
    for part in ("pfedme", "pfedme2020"):
        ov, cells = [], []
        for alg in ("fedavg", "fedmac"):
            r, err = seeds_runs(sim, f"fedmac-mnist-{alg}",
                                extra + ["--partition", part, "--rounds", str(SHORT)],
                                SPLIT_SEEDS[alg], f"fedmac-split-{part}-{alg}")
            if r is None:
                cells += [f"failed: {err[:120]}"] + ([""] if alg == "fedmac" else [])
                continue
            res[(part, alg)] = r
            if alg == "fedavg":
                for e in r["errs"]:
                    m = OVERLAP.search(e)
                    if m:
                        ov.append((int(m[1]), int(m[2]), int(m[3]), int(m[4])))
                cells.append(fmt(r["gb"]))
            else:
                cells += [fmt(r["gb"]), fmt(r["pb"])]
        rows_s = fmt(stat([o[0] for o in ov]), 0)
        dist_s = fmt(stat([o[1] for o in ov]), 0)
        share = stat([100.0 * o[3] / o[2] for o in ov if o[2]])
        VALUES[f"split.{part}.rows"] = rows_s
        VALUES[f"split.{part}.distinct"] = dist_s
        VALUES[f"split.{part}.leak"] = fmt(share, 1)
        md.append(f"| {part} | {rows_s} ({dist_s}) | {fmt(share, 1)} % | " +
                  " | ".join(cells) + " |")
    for alg, k in (("fedavg", "gb"), ("fedmac", "gb"), ("fedmac", "pb")):
        a, b = res.get(("pfedme", alg)), res.get(("pfedme2020", alg))
        if a and b:
            VALUES[f"split.{alg}.{k}.gain"] = f"{b[k][0] - a[k][0]:+.2f}"
            VALUES[f"split.{alg}.{k}.clean"] = fmt(a[k])
            VALUES[f"split.{alg}.{k}.2020"] = fmt(b[k])
    md += ["", "Produced by: " + cmd("fedmac-mnist-ALGO", [
        "--data idx:TRAIN-IMAGES,TRAIN-LABELS --partition P --rounds", str(SHORT),
        "--seed S"]) + " for P in pfedme, pfedme2020, ALGO = fedavg with S in 7, 8, 9 and "
        "ALGO = fedmac with S = 7; `make reproduce ONLY=fedmac`.", ""]

    md += ["The inputs: FedAvg on the clean split, seed 7, the same rounds. The idx reader",
           "gives pixels / 255; pFedMe's generator standardised every pixel over the pooled",
           "images with eps = 0.001 on raw 0..255 pixels, which is 0.001/255 in the",
           "reader's units (the inis' `standardize_eps`).", "",
           "| FedAvg inputs | GM best | GM last |", "|---|---|---|"]
    cmds = []
    base = res.get(("pfedme", "fedavg"))
    for label, name, flags, key in (
            ("pixels / 255 (the reader's, no standardisation)", "fedmac-mnist-fedavg-raw255",
             [], "raw255"),
            ("standardised, eps 0.001/255 (pFedMe's transform; the run above)",
             "fedmac-mnist-fedavg", [], "eps_pfedme"),
            ("standardised, eps 0.001 in the reader's units (sfl's default)",
             "fedmac-mnist-fedavg", ["--standardize-eps", "0.001"], "eps_default")):
        fl = ["--rounds", str(SHORT), "--seed", "7"] + flags
        if key == "eps_pfedme":
            path = base["paths"][0] if base else ""
            rows = list(csv.DictReader(open(path))) if path and os.path.exists(path) else []
            ok, err = bool(rows), "" if rows else "the split run failed"
            m = re.search(r"standardize: .*sigma ([^ ]+) \.\. ([^,]+), eps", base["errs"][0]) \
                if base else None
            if m:
                VALUES["inputs.sigma_min"], VALUES["inputs.sigma_max"] = m[1], m[2]
        else:
            rows, ok, err, _ = run(sim, name, extra + fl, f"fedmac-inputs-{key}")
        if not ok or not rows:
            md.append(f"| {label} | failed: {err[:200]} | |")
            continue
        g = best(rows, "test_accuracy")
        md.append(f"| {label} | {g[0]:.2f} | {g[1]:.2f} |")
        VALUES[f"inputs.{key}.gb"] = f"{g[0]:.2f}"
        VALUES[f"inputs.{key}.gl"] = f"{g[1]:.2f}"
        cmds.append(cmd(name, ["--data idx:TRAIN-IMAGES,TRAIN-LABELS"] + fl))
    md += ["", "Produced by: " + ", ".join(cmds) + "; `make reproduce ONLY=fedmac`.", ""]
    return md


FIG_ROUNDS = 100  # Fig. 4's rounds
FIG2_ROUNDS = 50


def fig2(sim, data):
    """Effect of R and of beta on FedMac, MNIST."""
    extra = mnist_args(data)
    md = [f"## Fig. 2: effect of R and beta (MNIST standardised, FedMac, {FIG2_ROUNDS} rounds)", ""]
    if extra is None:
        return md + [f"Skipped: {data}/mnist not found.", ""]
    md += ["Paper: a larger R converges faster; a larger beta raises the global model's",
           "accuracy and lowers the personalized one's. Seed 7 only (each run is minutes);",
           "differences of a few tenths are within seed-to-seed noise (see the seeds above).",
           "", f"| setting | GM best | PM best | GM at round {FIG2_ROUNDS} | "
           f"PM at round {FIG2_ROUNDS} | PM at round 20 |", "|---|---|---|---|---|---|"]
    r20 = ([], False, "not run")
    for what, values in (("local_steps", ("5", "10", "20")), ("beta", ("0.5", "1", "2"))):
        series = []
        for v in values:
            tag = f"fedmac-fig2-{what}-{v}"
            flag = "--" + what.replace("_", "-")
            if (what, v) == ("beta", "1"):  # the same run as R = 20
                rows, ok, err = r20
                tag = "fedmac-fig2-local_steps-20"
            else:
                rows, ok, err, _ = run(sim, "fedmac-mnist-fedmac",
                                       extra + [flag, v, "--rounds", str(FIG2_ROUNDS)], tag)
            if (what, v) == ("local_steps", "20"):
                r20 = (rows, ok, err)
            if not ok or not rows:
                md.append(f"| {what} = {v} | failed: {err[:200]} | | | | |")
                continue
            gb, gl = best(rows, "test_accuracy")
            pb, pl = best(rows, "personal_accuracy")
            p50 = next((100 * float(r["personal_accuracy"]) for r in rows
                        if r["round"] == "20"), float("nan"))
            label = f"{'R' if what == 'local_steps' else what} = {v}"
            md.append(f"| {label} | {gb:.2f} | {pb:.2f} | {gl:.2f} | {pl:.2f} | {p50:.2f} |")
            key = f"fig2.{'R' if what == 'local_steps' else 'beta'}{v}"
            VALUES[f"{key}.gb"], VALUES[f"{key}.pb"] = f"{gb:.2f}", f"{pb:.2f}"
            VALUES[f"{key}.p20"] = f"{p50:.2f}"
            series.append((f"{what}={v} PM", os.path.join(R.RUNS, tag + ".csv")))
        if series:
            R.plot(os.path.join(R.RES, f"fedmac-fig2-{what}.png"),
                   f"FedMac, MNIST: personalized accuracy by {what}", series,
                   ylabel="personalized accuracy", logy=False, ycol="personal_accuracy")
    md += ["", "Produced by: " + cmd("fedmac-mnist-fedmac", [
        "--data idx:TRAIN-IMAGES,TRAIN-LABELS --rounds", str(FIG2_ROUNDS),
        "--local-steps R"]) + " for R in 5, 10, 20, and the same with `--beta B` for B in "
        "0.5, 2 (beta = 1 is the R = 20 run); `make reproduce ONLY=fedmac`.", "",
        "![R](fedmac-fig2-local_steps.png) ![beta](fedmac-fig2-beta.png)", ""]
    return md


D_MLP = 79510  # parameters of the MNIST MLP (784-100-10)


def paper_bits(density):
    """Sec. 5.5's accounting, bits per client and round, upload + broadcast:
    nonzeros 64 bits, zeros 1 bit, plus a 1-bit index map."""
    return density * D_MLP * 2 * 64 + (1 - density) * D_MLP * 2 * 1 + D_MLP


def fig4(sim, data):
    """FedMac against modified pFedMe under sparsity (Fig. 4, Sec. 5.5)."""
    extra = mnist_args(data)
    md = ["## Fig. 4 and Sec. 5.5: FedMac against modified pFedMe under sparsity "
          "(MNIST standardised)", ""]
    if extra is None:
        return md + [f"Skipped: {data}/mnist not found.", ""]
    sparse = ["--eta-p", "0.08", "--gamma", "0.01", "--rho", "0.01", "--prune", "0.001",
              "--min-density", "0.5", "--rounds", str(FIG_ROUNDS)]
    md += ["Both with the smoothed l1 on theta (gamma = 0.01, rho = 0.01; the paper gives",
           f"neither), eta_p = 0.08, gamma_w = 0, beta = 1, S = 10, |D| = 20, {FIG_ROUNDS} "
           "rounds, seed 7.",
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
        rows, ok, err, _ = run(sim, f"fedmac-mnist-{alg}", extra + sparse, tag)
        if not ok or not rows:
            md.append(f"| {alg} | failed: {err[:200]} | | | | | | |")
            continue
        pb, pl = best(rows, "personal_accuracy")
        gb, gl = best(rows, "test_accuracy")
        dens = float(rows[-1]["nnz"]) / D_MLP
        per = (float(rows[-1]["bytes_up"]) + float(rows[-1]["bytes_down"])) / 10
        dense = 2 * 715597  # the codec's f64 bytes of a dense update, bench_mlp
        name = "FedMac" if alg == "fedmac" else "modified pFedMe"
        md.append(f"| {name} | {pb:.2f} | {pl:.2f} | {gl:.2f} | {dens:.3f} | "
                  f"{per:,.0f} | {paper_bits(dens) / 8:,.0f} | {dense:,} |")
        VALUES[f"fig4.{alg}.pb"], VALUES[f"fig4.{alg}.gl"] = f"{pb:.2f}", f"{gl:.2f}"
        VALUES[f"fig4.{alg}.density"] = f"{dens:.3f}"
        path = os.path.join(R.RUNS, tag + ".csv")
        series_a.append((f"{name} PM", path))
        series_d.append((name, path))
    md += ["", "Produced by: " + cmd("fedmac-mnist-ALGO", ["--data idx:TRAIN-IMAGES,TRAIN-LABELS"]
                                     + sparse) + " for ALGO in fedmac, pfedme; "
           "`make reproduce ONLY=fedmac`."]
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
    VALUES["fig4.half"] = f"{paper_bits(0.5) / paper_bits(1.0):.3f}"
    return md


def centralized_mlp(sim, data):
    """Our MLP trained centrally (sfl-sim --centralized, SGD) against
    scikit-learn's MLPClassifier on the same kind of split, on /255 and on
    standardised pixels."""
    extra = mnist_args(data)
    md = ["## Centralized reference: the MLP against scikit-learn's MLPClassifier", ""]
    if extra is None:
        return md + [f"Skipped: {data}/mnist not found.", ""]
    try:
        import numpy as np
        from sklearn.neural_network import MLPClassifier
    except ImportError as e:
        return md + [f"Skipped: {e}.", ""]
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
    # ours: all MNIST training rows in one client, plain minibatch SGD
    # (FedAvg, one local step per round), batch 20, lr 0.05, 15,000 steps.
    flags = ["--centralized", "--partition", "iid", "--clients", "1", "--cohort", "0",
             "--lr", "0.05", "--rounds", "15000", "--eval-every", "1000", "--test-frac", "0.2"]
    md += ["Both train a 784-100-10 ReLU network with softmax cross-entropy by plain",
           "minibatch SGD (batch 20, step 0.05, no momentum, no l2) on 80% of MNIST's",
           "training images and test on the other 20%; standardised: mean and deviation",
           "of the 80% (eps 0.001/255, pFedMe's), applied to both parts.", "",
           "| inputs | implementation | steps | held-out accuracy | wall s |",
           "|---|---|---|---|---|"]
    import warnings
    for label, name, std in (("pixels / 255", "fedmac-mnist-fedavg-raw255", False),
                             ("standardised", "fedmac-mnist-fedavg", True)):
        rows, ok, err, w = run(sim, name, extra + flags,
                               f"fedmac-central-sfl-{'std' if std else 'raw255'}")
        ours = 100 * float(rows[-1]["test_accuracy"]) if ok and rows else float("nan")
        # scikit-learn on the same kind of split (its own shuffle): sgd, batch 20,
        # lr 0.05, 5 epochs of 48,000 rows = 12,000 steps, no momentum, alpha 0.
        Xtr, Xte = X[tr], X[te]
        if std:
            mu = Xtr.mean(0)
            sd = Xtr.std(0) + float(EPS_PFEDME)
            Xtr, Xte = (Xtr - mu) / sd, (Xte - mu) / sd
        t = time.time()
        clf = MLPClassifier(hidden_layer_sizes=(100,), solver="sgd", batch_size=20,
                            learning_rate_init=0.05, momentum=0.0, alpha=0.0, max_iter=5,
                            shuffle=True, random_state=7, tol=0.0, n_iter_no_change=1000)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf.fit(Xtr, y[tr])
        sk = 100 * clf.score(Xte, y[te])
        sw = time.time() - t
        WALL.append(sw)
        key = "std" if std else "raw255"
        VALUES[f"central.{key}.sfl"], VALUES[f"central.{key}.sk"] = f"{ours:.2f}", f"{sk:.2f}"
        md += [f"| {label} | sfl-sim --centralized (mlp:100) | 15,000 | {ours:.2f} | {w:.0f} |",
               f"| {label} | scikit-learn MLPClassifier | 12,000 (5 epochs) | {sk:.2f} | "
               f"{sw:.0f} |"]
        print(f"  sklearn MLP ({label}): {sk:.2f}", file=sys.stderr)
    md += ["", "Produced by: " + cmd("fedmac-mnist-fedavg-raw255", ["--data",
           "idx:TRAIN-IMAGES,TRAIN-LABELS"] + flags) + " and the same with "
           "fedmac-mnist-fedavg.ini (standardised); scikit-learn in "
           "sim/report_fedmac.py (`centralized_mlp`); `make reproduce ONLY=fedmac`.", ""]
    return md


def fill(text):
    """report-fedmac-notes.md with each {key} replaced by VALUES[key]."""
    def one(m):
        if m[1] not in VALUES:
            print(f"  report-fedmac-notes.md: no value for {m[0]}", file=sys.stderr)
            return "(not measured)"
        return VALUES[m[1]]
    return re.sub(r"\{([a-z0-9_.]+)\}", one, text)


def section(sim, data):
    print("fedmac:", file=sys.stderr)
    del WALL[:]
    t0 = time.time()
    md = ["# FedMac (seed 002)", "",
          "FedMac (Alg. 1), pFedMe, Per-FedAvg (first order), FedAvg and FedProx with the",
          "same MLP (`--loss mlp:H`, libsfl/src/model/mlp.c) in sfl-sim. What matched and",
          "what did not is summarised at the end of this section. TRAIN-IMAGES and",
          "TRAIN-LABELS below are MNIST's training files (train-images-idx3-ubyte.gz,",
          "train-labels-idx1-ubyte.gz in the shared data folder).", ""]
    md += table1(sim, data)
    md += short_horizon(sim, data)
    md += fig2(sim, data)
    md += fig4(sim, data)
    md += centralized_mlp(sim, data)
    total = time.time() - t0
    VALUES["wall.total_min"] = f"{total / 60:.0f}"
    md += [f"Wall time of this section on this machine: {total:.0f} s ({len(WALL)} runs, "
           "one after the other, one core each, on a machine shared with other jobs).", ""]
    notes = open(os.path.join(R.HERE, "report-fedmac-notes.md")).read()
    md += [fill(notes), ""]
    return md
