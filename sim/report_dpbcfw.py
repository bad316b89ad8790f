"""The DP-BCFW section of results/REPORT.md (seed 003: Lou and Cheung,
featurewise distributed sparse optimization with differential privacy):
Figs. 1, 2, 4, 5, 6, 8 and 9 with sfl-sim's vertical driver
(--partition features:K, algorithms bcfw and dpbcfw). Called by
sim/report.py; helpers (run, RUNS, RES) come from there."""
import math
import os
import subprocess
import sys
import time

import report as R

# Private runs are averaged over these seeds (data and noise drawn anew
# each time, as the paper repeats its realizations); the others use the
# first.
SEEDS = ("7", "8", "9", "10", "11")
# Figs. 1 and 2 (non-private) over three of them
FIG12_SEEDS = SEEDS[:3]


def obj_at(rows, rnd):
    for r in rows:
        if int(r["round"]) == rnd:
            return float(r["objective"])
    return float("nan")


def last(rows, key="objective"):
    return float(rows[-1][key]) if rows else float("nan")


def g(x, digits=4):
    if x is None or x != x:
        return "-"
    return f"{x:.{digits}g}"


def mean_sd(xs):
    xs = [x for x in xs if x == x]
    if not xs:
        return float("nan"), float("nan")
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
    return m, sd


def pm(xs, digits=4):
    m, sd = mean_sd(xs)
    return f"{g(m, digits)} ± {g(sd, 2)}" if len(xs) > 1 else g(m, digits)


def run_seeds(sim, name, extra, tag, seeds=SEEDS):
    """The runs of one setting over seeds; writes the mean curve to
    RUNS/tag.csv (round, objective[, test_accuracy]) for plotting."""
    by_seed = {}
    for s in seeds:
        rows, ok, err = R.run(sim, name, list(extra) + ["--seed", s], f"{tag}-s{s}")
        if not ok or not rows:
            print(f"  {tag}: seed {s} failed: {err}", file=sys.stderr)
            continue
        by_seed[s] = rows
    all_rows = list(by_seed.values())
    if all_rows:
        keys = [k for k in ("objective", "test_accuracy") if k in all_rows[0][0]]
        with open(os.path.join(R.RUNS, tag + ".csv"), "w") as f:
            f.write("round," + ",".join(keys) + "\n")
            for i, r in enumerate(all_rows[0]):
                vals = [mean_sd([float(rs[i][k]) for rs in all_rows if len(rs) > i])[0]
                        for k in keys]
                f.write(r["round"] + "," + ",".join(f"{v:.10g}" for v in vals) + "\n")
    return by_seed


def gp(lines):
    subprocess.run(["gnuplot"], input="\n".join(lines) + "\n", text=True, check=True)


def multiplot(png, title, panels, rows, cols, ylabel="objective", ycol="objective"):
    """panels: list of (title, [(label, csv path)]), objective vs round."""
    lines = ["set terminal pngcairo size 1300,900 noenhanced font ',9'",
             f"set output '{png}'", "set datafile separator ','",
             f"set multiplot layout {rows},{cols} title '{title}'", "set grid",
             "set logscale y", "set key top right", "set xlabel 'iteration'",
             f"set ylabel '{ylabel}'"]
    for ptitle, series in panels:
        lines.append(f"set title '{ptitle}'")
        lines.append("plot " + ", ".join(
            f"'{p}' using 'round':'{ycol}' with lines lw 2 title '{lab}'" for lab, p in series))
    lines.append("unset multiplot")
    gp(lines)


def plot_points(png, title, series, xlabel, ylabel, logx=True, logy=True):
    """series: list of (label, [(x, y)]): lines with points."""
    lines = ["set terminal pngcairo size 800,520 noenhanced", f"set output '{png}'",
             f"set title '{title}'", f"set xlabel '{xlabel}'", f"set ylabel '{ylabel}'",
             "set grid", "set key bottom left"]
    if logx:
        lines.append("set logscale x")
    if logy:
        lines.append("set logscale y")
    plots = []
    for i, (label, pts) in enumerate(series):
        dat = os.path.join(R.RUNS, f"{os.path.basename(png)}.{i}.dat")
        with open(dat, "w") as f:
            for x, y in pts:
                if y == y and (y > 0 or not logy):
                    f.write(f"{x} {y}\n")
        plots.append(f"'{dat}' using 1:2 with linespoints lw 2 title '{label}'")
    lines.append("plot " + ", ".join(plots))
    gp(lines)


def slope(pts):
    """Least-squares slope of log y against log x."""
    pts = [(math.log(x), math.log(y)) for x, y in pts if y == y and y > 0]
    if len(pts) < 2:
        return float("nan")
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


# -- Fig. 1 ---------------------------------------------------------------

SAMPLINGS = (("elementary", "elem", ["--sampling", "0"]),
             ("tau-nice", "nice", ["--sampling", "1", "--tau", "4000"]),
             ("(K,tau)-distributed", "dist", ["--sampling", "2", "--tau", "800"]),
             ("importance", "imp", ["--sampling", "3", "--tau", "800", "--mix", "0.5"]))


def fig1(sim):
    print("dpbcfw fig. 1:", file=sys.stderr)
    md = ["## Fig. 1: BCFW-AS under three samplings (non-private, exact)", "",
          "Paper: BCFW converges under every sampling, faster the larger p_min: elementary",
          "(p_min 1) before tau-nice (0.4) before (K, tau)-distributed (0.16). Ours: n = 1000,",
          "d = 10,000 on K = 2 clients, T = 500, gamma^t = 2 / (p_min t + 2); eta per block =",
          "0.4 x the number of nonzero variables (about the truth's l1 norm per block). tau-nice",
          "draws tau = 4000 of the 10,000 columns; (K, tau)-distributed 800 of each block of",
          "5000 (the paper's K = 2 and tau = 4000 would give p_min = 0.8, not its 0.16: we",
          "take tau so that p_min is 0.16); importance sampling (ours, not the paper's) draws",
          "column i with p_i = min(1, tau (mix / 5000 + (1 - mix) ||a_i|| / sum ||a||)),",
          "mix 0.5, step with the bound p_min >= 0.08. Objective f(x) = mean (a'x - y)^2;",
          f"means over {len(FIG12_SEEDS)} seeds (new data each).", "",
          "| feature density | variable sparsity | " +
          " | ".join(f"{s} f(100) / f(500)" for s, _, _ in SAMPLINGS) +
          " | seeds ordered at 500 |",
          "|---|---|" + "---|" * len(SAMPLINGS) + "---|"]
    panels, agree = [], 0
    for dens in ("0.1", "0.01", "0.001"):
        for vs, supp in (("0.1", 1000), ("0.01", 100), ("0.001", 10)):
            eta = f"{0.4 * supp:g}"
            cells, series, ends = [], [], []
            for label, short, flags in SAMPLINGS:
                tag = f"dpbcfw-fig1-d{dens}-v{vs}-{short}"
                runs = run_seeds(sim, "dpbcfw-fig1",
                                 ["--density", dens, "--support", str(supp), "--eta",
                                  eta] + flags, tag, FIG12_SEEDS)
                cells.append(f"{g(mean_sd([obj_at(r, 100) for r in runs.values()])[0])} / "
                             f"{g(mean_sd([obj_at(r, 500) for r in runs.values()])[0])}"
                             if runs else "failed")
                ends.append({sd: obj_at(r, 500) for sd, r in runs.items()})
                series.append((label, os.path.join(R.RUNS, tag + ".csv")))
            ok = sum(1 for sd in FIG12_SEEDS
                     if ends[0].get(sd, math.nan) <= ends[1].get(sd, math.nan) <=
                     ends[2].get(sd, math.nan))
            agree += ok
            md.append(f"| {dens} | {vs} | " + " | ".join(cells) +
                      f" | {ok} of {len(FIG12_SEEDS)} |")
            panels.append((f"density {dens}, sparsity {vs}", series))
    multiplot(os.path.join(R.RES, "dpbcfw-fig1.png"),
              "Fig. 1: BCFW-AS, objective vs iteration (rows: feature density 0.1, 0.01, "
              "0.001; columns: variable sparsity 0.1, 0.01, 0.001)", panels, 3, 3)
    md += ["", produced("sfl-sim --config sim/experiments/dpbcfw-fig1.ini --density F "
                        "--support S --eta E --seed SEED [--sampling 1 --tau 4000 | --sampling "
                        "2 --tau 800 | --sampling 3 --tau 800 --mix 0.5]"),
           "", f"The ordering elementary <= tau-nice <= (K, tau)-distributed holds at "
           f"iteration 500 in {agree} of {9 * len(FIG12_SEEDS)} (setting, seed) pairs.", "",
           "![Fig. 1](dpbcfw-fig1.png)", ""]
    return md


# -- Fig. 2 ---------------------------------------------------------------

def fig2(sim):
    print("dpbcfw fig. 2:", file=sys.stderr)
    md = ["## Fig. 2: BCFW-AS under (K, tau)-distributed sampling, K = 2 to 16", "",
          "Paper: with more clients BCFW-AS converges faster (each iteration adds K atoms).",
          "Ours: n = 1000, d = 10,000, feature and variable sparsity 1 %, every client samples",
          "40 % of its block (p_min 0.4 for every K), T = 500. With the paper's eta per block",
          "the feasible set grows with K (the product of K balls of radius eta, ||x||_1 <= K",
          f"eta); the control keeps K eta = 40 fixed. Mean ± sd over {len(FIG12_SEEDS)} seeds.",
          "",
          "| K | eta per block | f(50) | f(100) | f(500) | nnz | control: eta = 40 / K, "
          "f(100) | control f(500) |", "|---|---|---|---|---|---|---|---|"]
    series, ctrl = [], []
    for K in (2, 4, 8, 16):
        tau = str(int(0.4 * (10000 // K)))
        base = ["--partition", f"features:{K}", "--tau", tau]
        runs = run_seeds(sim, "dpbcfw-fig2", base + ["--eta", "20"], f"dpbcfw-fig2-K{K}",
                         FIG12_SEEDS)
        cruns = run_seeds(sim, "dpbcfw-fig2", base + ["--eta", f"{40 / K:g}"],
                          f"dpbcfw-fig2-K{K}-ctrl", FIG12_SEEDS)

        def at(rs, t):
            return pm([obj_at(r, t) for r in rs.values()], 3)
        nnz = pm([float(r[-1]["nnz"]) for r in runs.values()], 3)
        md.append(f"| {K} | 20 | {at(runs, 50)} | {at(runs, 100)} | {at(runs, 500)} | "
                  f"{nnz} | {at(cruns, 100)} | {at(cruns, 500)} |")
        series.append((f"K = {K}", os.path.join(R.RUNS, f"dpbcfw-fig2-K{K}.csv")))
        ctrl.append((f"K = {K}, eta = {40 / K:g}",
                     os.path.join(R.RUNS, f"dpbcfw-fig2-K{K}-ctrl.csv")))
    multiplot(os.path.join(R.RES, "dpbcfw-fig2.png"), "Fig. 2: (K, tau)-distributed BCFW-AS",
              [("eta = 20 per block (the paper)", series),
               ("control: K eta = 40", ctrl)], 1, 2)
    return md + ["", produced("sfl-sim --config sim/experiments/dpbcfw-fig2.ini --partition "
                              "features:K --tau T --eta E --seed SEED"),
                 "", "![Fig. 2](dpbcfw-fig2.png)", ""]


# -- the noise against the signal ----------------------------------------

def read_libsvm(path):
    rows, y = [], []
    for line in open(path):
        t = line.split()
        y.append(float(t[0]))
        rows.append([(int(a) - 1, float(b)) for a, b in (p.split(":") for p in t[1:])])
    return rows, y


def synth_f0(sim):
    """f(0) = mean y^2 of the Figs. 5, 6, 8 data for every seed (the data
    change with the seed), and the first seed's rows."""
    f0, first = {}, None
    for s in SEEDS:
        dump = os.path.join(R.RUNS, f"dpbcfw-synth-s{s}.svm")
        R.run(sim, "dpbcfw-synth", ["--rounds", "1", "--seed", s, "--dump-data", dump],
              f"dpbcfw-synth-dump-s{s}")
        rows, y = read_libsvm(dump)
        f0[s] = sum(v * v for v in y) / len(y)
        if first is None:
            first = (rows, y)
    return f0, first


def noise_table(f0, first):
    """Sec. IV-C's noise scales against the gradient they perturb, on the
    Figs. 5/6/8 data (its first seed)."""
    rows, y = first
    n, d = len(y), 8000
    grad = [0.0] * d
    for r, yi in zip(rows, y):
        for j, v in r:
            grad[j] += -2.0 * v * yi / n
    gmax = max(abs(v) for v in grad)
    eta, K, T, m, delta = 5.0, 4, 300, 80, 1.0 / n
    sigma = 1 + math.sqrt(n / m)  # sigma(J) of a Gaussian sketch, about
    md = ["### The noise against what it perturbs", "",
          f"On the Figs. 5, 6, 8 data of seed {SEEDS[0]} (n = {n}, d = {d}, K = {K}, "
          f"T = {T}, eta = {eta:g}, G = 1,",
          f"delta = 1/n, m = {m}): f(0) = {f0[SEEDS[0]]:.4g}; the largest partial gradient "
          f"at x = 0 is",
          f"max_i |g_i| = {gmax:.3g}, the LO's value eta |g_i| = {eta * gmax:.3g}. Sec. "
          "IV-C's scales (beta on the",
          "LO's values; pi on J a, whose entries have sd about ||a_i|| / sqrt(m) = "
          f"{math.sqrt(0.01 * n / m):.2g};",
          "pi as printed, what the runs above add (dp_noise 3; the private dp_noise 1 is",
          "calibrated for one sample's clipped contribution instead: the privacy-utility",
          "section below):", "",
          "| epsilon | Laplace beta | beta / (eta max g) | Gaussian pi (sigma(J) ~ "
          f"{sigma:.2f}) |", "|---|---|---|---|"]
    for eps in (0.001, 0.1, 1, 10, 100, 1000, 10000):
        beta = 8 * eta * math.sqrt(2 * T * math.log(2 / delta)) / (n * eps)
        pi = sigma * math.sqrt(K * T) * math.sqrt(2 * (math.log(1 / delta) + eps / 2)) / \
            (n * eps / 2)
        md.append(f"| {eps:g} | {beta:.3g} | {beta / (eta * gmax):.3g} | {pi:.3g} |")
    md += ["", produced(f"sfl-sim --config sim/experiments/dpbcfw-synth.ini --rounds 1 --seed "
                        f"{SEEDS[0]} --dump-data FILE") +
           " beta and pi are Sec. IV-C's formulas evaluated by the script on that data.",
           "", "A ratio beta / (eta max g) well above 1 means the noisy max is close to a",
           "uniform draw among the 2 x 2000 directions of a block: the private index",
           "carries next to no information.", ""]
    return md


# -- Fig. 4 ---------------------------------------------------------------

NS = (500, 1000, 2000, 4000, 8000)
FIG4_K = (1, 2, 4, 8, 16)
FIG4_SEEDS = SEEDS[:3]


def fig4(sim):
    print("dpbcfw fig. 4:", file=sys.stderr)
    md = ["## Fig. 4: excess empirical risk against n (log-log)", "",
          "Paper: the excess empirical risk falls with n, about as n^(-2/3) (Theorem 4),",
          "more clients doing better; not a strict line. Ours: d = 2000, feature density 0.1,",
          "20 nonzero variables, the first n rows of one generated set, eta 5 per block,",
          "sketch length m = n / 10, T = (n epsilon)^(2/3) (Theorem 4's order, at most",
          f"2000), mean over {len(FIG4_SEEDS)} seeds. K = 1 is the centralized DP-FW of [31] "
          "(the index mechanism alone, no",
          "feature leaves the one party); K = 2..16 DP-BCFW. Excess = f(x_T) - f*, f* the",
          "objective of 2000 exact non-private iterations on the same feasible set (the",
          "product of K balls; eq. 18's min over it, approached from above).", ""]
    fstar = {}
    for n in NS:
        for K in FIG4_K:
            refs = run_seeds(sim, "dpbcfw-fig4",
                             ["--algo", "bcfw", "--samples", str(n), "--partition",
                              f"features:{K}", "--rounds", "2000", "--eval-every", "2000"],
                             f"dpbcfw-fig4-ref-n{n}-K{K}", FIG4_SEEDS)
            for sd, rows in refs.items():
                fstar[n, K, sd] = last(rows)
    images = []
    for eps in ("1", "10"):
        series, slopes = [], []
        table = {}
        for K in FIG4_K:
            pts = []
            for n in NS:
                T = min(2000, max(20, round((n * float(eps)) ** (2 / 3))))
                flags = ["--samples", str(n), "--partition", f"features:{K}",
                         "--epsilon", eps, "--rounds", str(T), "--eval-every", str(T),
                         "--m", str(n // 10)]
                if K == 1:
                    flags += ["--sketch", "0", "--dp-noise", "2"]
                runs = run_seeds(sim, "dpbcfw-fig4", flags, f"dpbcfw-fig4-e{eps}-n{n}-K{K}",
                                 FIG4_SEEDS)
                ex = [last(r) - fstar.get((n, K, sd), float("nan"))
                      for sd, r in runs.items()]
                table[K, n] = ex
                pts.append((n, mean_sd(ex)[0]))
            series.append((f"K = {K}" + (" (DP-FW)" if K == 1 else ""), pts))
            slopes.append(slope(pts))
        md += [f"### epsilon = {eps}", "",
               "| n | T | " + " | ".join(f"K = {K}" for K in FIG4_K) + " |",
               "|---|---|" + "---|" * len(FIG4_K)]
        for n in NS:
            T = min(2000, max(20, round((n * float(eps)) ** (2 / 3))))
            md.append(f"| {n} | {T} | " +
                      " | ".join(g(mean_sd(table[K, n])[0]) for K in FIG4_K) + " |")
        md.append("| fitted slope | | " + " | ".join(f"{s:.2f}" for s in slopes) + " |")
        md += ["", produced("sfl-sim --config sim/experiments/dpbcfw-fig4.ini --samples N "
                            "--partition features:K --epsilon E --rounds T --eval-every T "
                            "--m N/10 --seed S (K = 1: --sketch 0 --dp-noise 2)",
                            "sfl-sim --config sim/experiments/dpbcfw-fig4.ini --algo bcfw "
                            "--samples N --partition features:K --rounds 2000 --seed S (f*)"),
               ""]
        png = f"dpbcfw-fig4-eps{eps}.png"
        plot_points(os.path.join(R.RES, png), f"Fig. 4: excess risk vs n, epsilon = {eps}",
                    series + [("slope -2/3 (from K = 4 at n = 500)",
                               [(n, series[2][1][0][1] * (n / NS[0]) ** (-2 / 3))
                                for n in NS])],
                    "n (training rows)", "excess empirical risk")
        images.append(f"![Fig. 4, epsilon {eps}]({png})")
    md += [f"f* for reference (K = 4, seed {FIG4_SEEDS[0]}): " +
           ", ".join(f"n = {n}: {g(fstar.get((n, 4, FIG4_SEEDS[0])))}" for n in NS) + ".",
           "", " ".join(images), ""]
    return md


# -- Figs. 5, 6, 8 --------------------------------------------------------

def ratios(runs, f0, ref=None):
    """Per seed: f(T) / f(0), and (with ref, the same seeds' runs without
    noise) the fraction of ref's decrease reached."""
    rel = [last(r) / f0[s] for s, r in runs.items()]
    if ref is None:
        return rel, None
    frac = [(f0[s] - last(r)) / (f0[s] - last(ref[s])) for s, r in runs.items() if s in ref]
    return rel, frac


def fig5(sim, f0):
    print("dpbcfw fig. 5:", file=sys.stderr)
    md = ["## Fig. 5: DP-BCFW for K = 2 to 16 against centralized FW and DP-FW", "",
          "Paper ([n, d] = [800, 8000], sparsity 1 %): the private runs stay above the",
          "non-private FW; more clients do better. Ours: epsilon 1, delta 1/n, m = 80, eta 5",
          f"per block, T = 300, mean ± sd over {len(SEEDS)} seeds (data and noise drawn anew).",
          "f(T) / f(0): 1 is no progress. Non-private: the same exchange with exact features",
          "and no noise, the reference of the last column. Bytes: what the K clients send in",
          "one iteration (4-byte index + m or n float64 each).", "",
          "| algorithm | K | f(300) / f(0) | fraction of the non-private decrease | bytes up "
          "per iteration |", "|---|---|---|---|---|"]
    private, clean, base, fw_rows, dp_rows = [], [], {}, [], []
    for K in (1, 2, 4, 8, 16):
        tag = f"dpbcfw-fig5-fw-K{K}"
        base[K] = run_seeds(sim, "dpbcfw-synth", ["--algo", "bcfw", "--partition",
                                                  f"features:{K}"], tag)
        rel, _ = ratios(base[K], f0)
        label = "centralized FW (non-private)" if K == 1 else "non-private BCFW (exact)"
        up = next(iter(base[K].values()))[-1]["bytes_up"] if base[K] else "-"
        fw_rows.append(f"| {label} | {K} | {pm(rel, 3)} | 1 | {up} |")
        (private if K == 1 else clean).append((f"{label} K={K}",
                                               os.path.join(R.RUNS, tag + ".csv")))
    for label, K, flags in (
            [("centralized DP-FW [31]", 1, ["--sketch", "0", "--dp-noise", "2"])] +
            [("DP-BCFW", K, []) for K in (2, 4, 8, 16)]):
        tag = f"dpbcfw-fig5-dp-K{K}"
        runs = run_seeds(sim, "dpbcfw-synth", ["--partition", f"features:{K}"] + flags, tag)
        rel, frac = ratios(runs, f0, base[K])
        up = next(iter(runs.values()))[-1]["bytes_up"] if runs else "-"
        dp_rows.append(f"| {label} | {K} | {pm(rel, 3)} | {pm(frac, 2)} | {up} |")
        private.append((f"{label} K={K}", os.path.join(R.RUNS, tag + ".csv")))
    md += fw_rows[:1] + dp_rows + fw_rows[1:]
    multiplot(os.path.join(R.RES, "dpbcfw-fig5.png"),
              "Fig. 5: objective vs iteration (mean over seeds)",
              [("private, and centralized FW", private), ("non-private BCFW", clean)], 1, 2)
    return md + ["", produced("sfl-sim --config sim/experiments/dpbcfw-synth.ini --partition "
                              "features:K --seed S [--algo bcfw | --sketch 0 --dp-noise 2]"),
                 "", "![Fig. 5](dpbcfw-fig5.png)", ""]


def fig6(sim, f0):
    print("dpbcfw fig. 6:", file=sys.stderr)
    ref = run_seeds(sim, "dpbcfw-synth", ["--dp-noise", "0"], "dpbcfw-fig6-nonpriv")
    md = ["## Fig. 6: the privacy budget epsilon", "",
          "Paper: from epsilon = 0.001 to 10 the loss curves hardly move. Ours: K = 4, the",
          f"Fig. 5 setting, mean ± sd over {len(SEEDS)} seeds; the reference is the same run "
          "without",
          f"noise (sketched, m = 80: f(300) / f(0) = {pm(ratios(ref, f0)[0], 3)}); epsilons "
          "past 10 are ours.", "",
          "| epsilon | f(300) / f(0) | fraction of the no-noise decrease | nnz (seed 7) |",
          "|---|---|---|---|"]
    series, pts = [("no noise", os.path.join(R.RUNS, "dpbcfw-fig6-nonpriv.csv"))], []
    for eps in ("0.001", "0.01", "0.1", "1", "10", "100", "1000", "10000"):
        tag = f"dpbcfw-fig6-e{eps}"
        runs = run_seeds(sim, "dpbcfw-synth", ["--epsilon", eps], tag)
        rel, frac = ratios(runs, f0, ref)
        nnz = runs[SEEDS[0]][-1]["nnz"] if SEEDS[0] in runs else "-"
        md.append(f"| {eps} | {pm(rel, 3)} | {pm(frac, 2)} | {nnz} |")
        series.append((f"epsilon {eps}", os.path.join(R.RUNS, tag + ".csv")))
        pts.append((float(eps), mean_sd(rel)[0]))
    noref = mean_sd(ratios(ref, f0)[0])[0]
    multiplot(os.path.join(R.RES, "dpbcfw-fig6.png"), "Fig. 6: DP-BCFW by epsilon (K = 4)",
              [("objective vs iteration (mean over seeds)", series)], 1, 1)
    plot_points(os.path.join(R.RES, "dpbcfw-fig6-eps.png"), "Fig. 6: f(300) / f(0) vs epsilon",
                [("DP-BCFW, K = 4", pts), ("no noise", [(p[0], noref) for p in pts])],
                "epsilon", "f(300) / f(0)", logy=False)
    return md + ["", produced("sfl-sim --config sim/experiments/dpbcfw-synth.ini --epsilon E "
                              "--seed S [--dp-noise 0]"),
                 "", "![Fig. 6](dpbcfw-fig6.png) ![Fig. 6 by epsilon](dpbcfw-fig6-eps.png)",
                 ""]


def fig8(sim, f0):
    print("dpbcfw fig. 8:", file=sys.stderr)
    ex = run_seeds(sim, "dpbcfw-synth", ["--dp-noise", "0", "--sketch", "0"],
                   "dpbcfw-fig8-exact")
    exr = ratios(ex, f0)[0]
    md = ["## Fig. 8: the sketch length m", "",
          "Paper: the loss hardly changes with m, down to 1 % of n: sketching is free.",
          "Ours: K = 4, the Fig. 5 setting, m from 1 % to 100 % of n = 800, private (epsilon",
          f"1) and without noise, mean ± sd over {len(SEEDS)} seeds; the exact exchange "
          "(features",
          f"of n = 800 doubles, no noise) reaches f(300) / f(0) = {pm(exr, 3)}.", "",
          "| m | % of n | private f(300) / f(0) | no noise f(300) / f(0) | bytes up per "
          "iteration |", "|---|---|---|---|---|"]
    priv, clean = [], []
    for m in (8, 40, 80, 400, 800):
        runs = run_seeds(sim, "dpbcfw-synth", ["--m", str(m)], f"dpbcfw-fig8-m{m}")
        nr = run_seeds(sim, "dpbcfw-synth", ["--m", str(m), "--dp-noise", "0"],
                       f"dpbcfw-fig8-m{m}-clean")
        rp, rc = ratios(runs, f0)[0], ratios(nr, f0)[0]
        up = next(iter(nr.values()))[-1]["bytes_up"] if nr else "-"
        md.append(f"| {m} | {100 * m / 800:g} | {pm(rp, 3)} | {pm(rc, 3)} | {up} |")
        priv.append((m, mean_sd(rp)[0]))
        clean.append((m, mean_sd(rc)[0]))
    plot_points(os.path.join(R.RES, "dpbcfw-fig8.png"), "Fig. 8: f(300) / f(0) vs sketch length",
                [("private, epsilon 1", priv), ("no noise", clean),
                 ("exact features, no noise", [(p[0], mean_sd(exr)[0]) for p in priv])],
                "m (n = 800)", "f(300) / f(0)", logy=False)
    return md + ["", produced("sfl-sim --config sim/experiments/dpbcfw-synth.ini --m M --seed S "
                              "[--dp-noise 0] [--sketch 0]"),
                 "", "![Fig. 8](dpbcfw-fig8.png)", ""]


# -- Fig. 9 ---------------------------------------------------------------

def fig9(sim, data):
    print("dpbcfw fig. 9:", file=sys.stderr)
    md = ["## Fig. 9: colon-cancer and leukemia", "",
          "Paper: on real data the same trend as on synthetic data: more clients do better,",
          "and the private runs lose a reasonable amount against the non-private FW. Ours:",
          "logistic loss, 20 % of the rows held out (a new split per seed), eta 1 per block,",
          "epsilon 1 (and 100), m = 50, T = 100, mean over "
          f"{len(SEEDS)} seeds. rcv1, the paper's third set, is not in ../shared/data: not run.",
          ""]
    images = []
    for ds, path in (("colon-cancer", "derived/colon-cancer.libsvm"),
                     ("leukemia", "derived/leukemia_ALLAML.libsvm")):
        full = os.path.join(data, path)
        if not os.path.exists(full):
            md += [f"Skipped {ds}: {full} not found.", ""]
            continue
        md += [f"### {ds}", "",
               "| algorithm | K | objective (train) | test accuracy |", "|---|---|---|---|"]
        series = []
        cases = ([("centralized FW (non-private)", 1, ["--algo", "bcfw"], "fw"),
                  ("centralized DP-FW [31]", 1, ["--sketch", "0", "--dp-noise", "2"], "dpfw")] +
                 [(f"non-private BCFW", K, ["--algo", "bcfw"], "bcfw") for K in (2, 4, 8, 16)] +
                 [(f"DP-BCFW", K, [], "dp") for K in (2, 4, 8, 16)] +
                 [(f"DP-BCFW, epsilon 100", K, ["--epsilon", "100"], "dp100")
                  for K in (4, 16)])
        for label, K, flags, short in cases:
            tag = f"dpbcfw-fig9-{ds}-{short}-K{K}"
            runs = run_seeds(sim, "dpbcfw-real", ["--data", "libsvm:" + full, "--partition",
                                                  f"features:{K}"] + flags, tag)
            md.append(f"| {label} | {K} | {pm([last(r) for r in runs.values()])} | "
                      f"{pm([last(r, 'test_accuracy') for r in runs.values()], 3)} |")
            if short in ("fw", "dpfw", "dp"):
                series.append((f"{label} K={K}", os.path.join(R.RUNS, tag + ".csv")))
        md += ["", produced(f"sfl-sim --config sim/experiments/dpbcfw-real.ini --data "
                            f"libsvm:{path} --partition features:K --seed S [--algo bcfw | "
                            "--sketch 0 --dp-noise 2 | --epsilon 100]")]
        png = f"dpbcfw-fig9-{ds}.png"
        multiplot(os.path.join(R.RES, png), f"Fig. 9: {ds}",
                  [("training objective", series)], 1, 1)
        images.append(f"![{ds}]({png})")
        md.append("")
    return md + [" ".join(images), ""]



# -- privacy-utility curves (issue 25) -----------------------------------

PU_EPS = ("0.1", "0.3", "1", "3", "10", "30", "100")
PU_SEEDS = SEEDS[:3]
PU_T = (10, 30, 100, 300)
PU_SETS = (("a9a", "a9a", "dpbcfw-pu-a9a"),
           ("colon-cancer", "derived/colon-cancer.libsvm", "dpbcfw-pu-colon"))
# (label, short, flags): mode 1 protects the index and the shared features,
# mode 2 (unsketched) the model alone
PU_FULL = (("(a) the paper: report-noisy-max, its accounting, sketched", "a", []),
           ("(b) (a) calibrated by the RDP accountant", "b", ["--calib", "1"]),
           ("(c) (b) with the exponential mechanism", "c", ["--calib", "1", "--select", "1"]))
PU_FULL_D = ["--calib", "1", "--select", "1", "--sketch", "0"]
PU_MODEL = (("(a) report-noisy-max, the paper's accounting", "a2",
             ["--dp-noise", "2", "--sketch", "0"]),
            ("(b) (a) calibrated by the RDP accountant", "b2",
             ["--dp-noise", "2", "--sketch", "0", "--calib", "1"]),
            ("(c) (b) with the exponential mechanism", "c2",
             ["--dp-noise", "2", "--sketch", "0", "--calib", "1", "--select", "1"]))
PU_MODEL_D = ["--dp-noise", "2", "--sketch", "0", "--calib", "1", "--select", "1"]


def produced(*cmds):
    return ("Produced by: " + ", ".join(f"`{c}`" for c in cmds) +
            " (sim/report_dpbcfw.py), `make reproduce ONLY=dpbcfw`.")


def privacy_of(err):
    """The `sfl-sim: privacy:` line's key=value pairs as floats."""
    for line in err.splitlines():
        if line.startswith("sfl-sim: privacy:"):
            return {k: float(v) for k, v in
                    (t.split("=", 1) for t in line.split()[2:] if "=" in t)}
    return {}


def pu_runs(sim, ini, flags, tag):
    """seed -> (held-out accuracy, privacy dict)."""
    out = {}
    for s in PU_SEEDS:
        rows, ok, err = R.run(sim, ini, list(flags) + ["--seed", s], f"{tag}-s{s}")
        if ok and rows and "test_accuracy" in rows[-1]:
            out[s] = (float(rows[-1]["test_accuracy"]), privacy_of(err))
        else:
            print(f"  {tag}: seed {s} failed: {err}", file=sys.stderr)
    return out


def majority(sim, ini, data_flag, seed):
    """Held-out accuracy of predicting the training set's majority class (the
    same split as the runs: --dump-shards with the same seed)."""
    d = os.path.join(R.RUNS, f"{ini}-shards-s{seed}")
    subprocess.run([sim, "--config", os.path.join(R.EXP, ini + ".ini"), "--data", data_flag,
                    "--seed", seed, "--dump-shards", d, "--quiet"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=R.ROOT)

    def labels(path):
        return [line.split(None, 1)[0] for line in open(path) if line.strip()]
    train, test = labels(os.path.join(d, "client-0.svm")), labels(os.path.join(d, "client-0.test.svm"))
    top = max(set(train), key=train.count)
    return sum(1 for y in test if y == top) / len(test)


def spread(xs, digits=3):
    xs = [x for x in xs if x == x]
    if not xs:
        return "-"
    m = sum(xs) / len(xs)
    return f"{m:.{digits}f} ({min(xs):.{digits}f}-{max(xs):.{digits}f})"


def mean(xs):
    xs = [x for x in xs if x == x]
    return sum(xs) / len(xs) if xs else float("nan")


def privacy_utility(sim, data):
    print("dpbcfw privacy-utility:", file=sys.stderr)
    md = ["## Privacy-utility: learning under privacy that holds for any data", "",
          "Held-out accuracy against epsilon (delta 1e-5), feature-partitioned K = 4,",
          f"logistic loss, 20 % of the rows held out (a new split per seed), {len(PU_SEEDS)} "
          "seeds; mean (min-max).",
          "Every private run clips each feature entry to [-1, 1] and each residual to [-1, 1]",
          "(`clip_a`, `clip_r`: each client its own block) and calibrates its noise for one",
          "sample's contribution (docs/privacy.md): private for any data, with the epsilon",
          "its accounting states. Two guarantees:",
          "- **index and features private** (`dp_noise 1`, Alg. 2): the noisy index and the",
          "  noisy shared feature, so neither the other clients nor the server learn more than",
          "  epsilon allows;",
          "- **model private** (`dp_noise 2`, unsketched): only the index is noisy; the model,",
          "  a function of the indices alone, is (epsilon, delta)-DP, but the features travel",
          "  in the clear inside the federation.",
          "Variants: (a) the paper's report-noisy-max and accounting (Sec. IV-C) with the",
          "per-sample sensitivities; (b) the same noise shape scaled until the RDP accountant",
          "(tight conversion) spends exactly epsilon (`calib 1`); (c) (b) with the exponential",
          "mechanism instead of Laplace report-noisy-max (`select 1`); (d) (c) unsketched with",
          f"the number of iterations T chosen per epsilon from {', '.join(map(str, PU_T))}",
          "(the best mean; chosen on the held-out rows, so optimistic by a selection the",
          "accounting does not pay for). The paper's T is 100.", ""]
    images = []
    for name, path, ini in PU_SETS:
        full = os.path.join(data, path)
        if not os.path.exists(full):
            md += [f"Skipped {name}: {full} not found.", ""]
            continue
        dflag = "libsvm:" + full
        base = [majority(sim, ini, dflag, s) for s in PU_SEEDS]
        ref = pu_runs(sim, ini, ["--data", dflag, "--dp-noise", "0", "--sketch", "0"],
                      f"{ini}-nonpriv")
        res = {}   # (short, eps) -> {seed: (acc, priv)}
        for label, short, flags in PU_FULL + PU_MODEL:
            for eps in PU_EPS:
                res[short, eps] = pu_runs(sim, ini, ["--data", dflag, "--epsilon", eps] + flags,
                                          f"{ini}-{short}-e{eps}")
        sweep = {}  # (mode, T, eps) -> runs
        for mode, flags in (("d", PU_FULL_D), ("d2", PU_MODEL_D)):
            for T in PU_T:
                for eps in PU_EPS:
                    sweep[mode, T, eps] = pu_runs(
                        sim, ini, ["--data", dflag, "--epsilon", eps, "--rounds", str(T),
                                   "--eval-every", str(T)] + flags,
                        f"{ini}-{mode}-T{T}-e{eps}")
        best = {}
        for mode in ("d", "d2"):
            for eps in PU_EPS:
                T = max(PU_T, key=lambda t: mean([a for a, _ in sweep[mode, t, eps].values()]))
                best[mode, eps] = T
                res[mode, eps] = sweep[mode, T, eps]

        def accs(key):
            return [a for a, _ in res[key].values()]
        base_m = mean(base)
        md += [f"### {name}", "",
               "| variant | " + " | ".join(f"eps {e}" for e in PU_EPS) + " |",
               "|---|" + "---|" * len(PU_EPS),
               f"| majority class (baseline) | " + " | ".join([spread(base)] * len(PU_EPS)) + " |",
               f"| non-private (dp_noise 0, unsketched, T = 100) | " +
               " | ".join([spread([a for a, _ in ref.values()])] * len(PU_EPS)) + " |"]
        rows_of = ((("index and features private", PU_FULL, "d"),
                    ("model private", PU_MODEL, "d2")))
        for title, variants, dshort in rows_of:
            for label, short, _ in variants:
                md.append(f"| {title}: {label} | " +
                          " | ".join(spread(accs((short, e))) for e in PU_EPS) + " |")
            md.append(f"| {title}: (d) (c) unsketched, T per epsilon | " +
                      " | ".join(f"{spread(accs((dshort, e)))} T={best[dshort, e]}"
                                 for e in PU_EPS) + " |")
        flags_a = " ".join(PU_FULL_D)
        md += ["", produced(f"sfl-sim --config sim/experiments/{ini}.ini --data libsvm:{path} "
                            "--epsilon E --seed S [variant flags]",
                            f"sfl-sim --config sim/experiments/{ini}.ini --data libsvm:{path} "
                            "--seed S --dump-shards DIR"),
               "Variant flags: index and features private (a) none, (b) `--calib 1`, (c) "
               "`--calib 1 --select 1`, (d) `" + flags_a + " --rounds T`; model private the "
               "same with `--dp-noise 2 --sketch 0`; non-private `--dp-noise 0 --sketch 0`. "
               "The baseline predicts the training rows' majority class.", ""]
        # the T sweep
        md += [f"Accuracy by T for (d) on {name} (mean over the seeds):", "",
               "| guarantee | T | " + " | ".join(f"eps {e}" for e in PU_EPS) + " |",
               "|---|---|" + "---|" * len(PU_EPS)]
        for mode, title in (("d", "index and features"), ("d2", "model")):
            for T in PU_T:
                md.append(f"| {title} | {T} | " + " | ".join(
                    f"{mean([a for a, _ in sweep[mode, T, e].values()]):.3f}" for e in PU_EPS) + " |")
        md += ["", produced(f"sfl-sim --config sim/experiments/{ini}.ini --data libsvm:{path} "
                            "--epsilon E --seed S --rounds T --eval-every T " + flags_a +
                            " [--dp-noise 2]"), ""]
        # what was spent and drawn at epsilon 1
        md += [f"At epsilon = 1 on {name} (seed {PU_SEEDS[0]}): what each run spent by both "
               "accountings, its noise against one sample's contribution, and what it clipped "
               "(summed over the 4 clients):", "",
               "| variant | eps (paper) | eps (RDP) | index scale / sensitivity | feature sd / "
               "sensitivity | clipped entries | clipped residuals |",
               "|---|---|---|---|---|---|---|"]
        for title, variants, dshort in rows_of:
            for label, short, _ in list(variants) + [("(d)", dshort, None)]:
                pr = res[short, "1"].get(PU_SEEDS[0], (0, {}))[1]
                if not pr:
                    continue
                fs = (f"{pr['feature_sd'] / pr['feature_sens']:.3g}"
                      if pr.get("feature_sens", 0) > 0 else "-")
                md.append(f"| {title}: {label.split(')')[0]}) | {pr['eps_paper']:.3g} | "
                          f"{pr['eps_rdp_tight']:.3g} | "
                          f"{pr['index_scale'] / pr['index_sens']:.3g} | {fs} | "
                          f"{pr['clipped_entries']:.0f} | {pr['clipped_residuals']:.0f} of "
                          f"{pr['residuals']:.0f} |")
        md += ["", produced(f"sfl-sim --config sim/experiments/{ini}.ini --data libsvm:{path} "
                            f"--epsilon 1 --seed {PU_SEEDS[0]} [variant flags]") +
               " The numbers are its `sfl-sim: privacy:` line.", ""]
        # the goal, stated from the numbers
        def verdict(short):
            a = accs((short, "1"))
            if not a:
                return "no runs"
            m = mean(a)
            return (f"{m:.3f} against the baseline's {base_m:.3f}: "
                    + (f"beats it by {m - base_m:.3f} (every seed above: "
                       f"{'yes' if min(a) > max(base) else 'no'})" if m > base_m
                       else f"misses it by {base_m - m:.3f}"))
        md += [f"At epsilon = 1 on {name}: index and features private, best variant (d) "
               f"{verdict('d')}; model private, (d) {verdict('d2')}; the paper's (a) "
               f"{verdict('a')}.", ""]
        series = []
        for title, variants, dshort in rows_of:
            for label, short, _ in list(variants) + [("(d)", dshort, None)]:
                series.append((f"{'full' if dshort == 'd' else 'model'} {label.split(')')[0]})",
                               [(float(e), mean(accs((short, e)))) for e in PU_EPS]))
        series.append(("majority class", [(float(e), base_m) for e in PU_EPS]))
        series.append(("non-private", [(float(e), mean([a for a, _ in ref.values()]))
                                       for e in PU_EPS]))
        png = f"dpbcfw-pu-{name}.png"
        plot_points(os.path.join(R.RES, png), f"DP-BCFW on {name}: held-out accuracy vs epsilon",
                    series, "epsilon (delta 1e-5)", "held-out accuracy", logx=True, logy=False)
        images.append(f"![{name}]({png})")
    return md + [" ".join(images), ""]


def section(sim, data):
    print("dpbcfw:", file=sys.stderr)
    t = time.time()
    md = ["# DP-BCFW (seed 003)", "",
          "BCFW-AS (Alg. 1: `--algo bcfw`, exact partial gradients, a sampling of the",
          "coordinates) and DP-BCFW (Alg. 2: `--algo dpbcfw`, report-noisy-max on the index,",
          "the active feature through a Gaussian sketch with Gaussian noise) in sfl-sim's",
          "vertical driver: `--partition features:K` gives K clients contiguous column blocks",
          "of the same rows (eq. 11). Synthetic data as Sec. V describes it: `synth:dpbcfw`,",
          "rows with a fraction `--density` of N(0, 1) entries, a `--support`-sparse N(0, 1)",
          "truth, y = A x* + N(0, 0.001). x lives in the product of K l1 balls of radius eta",
          "(one per client: Alg. 2 adds one eta-vertex per client). What matched and what",
          "did not is summarised at the end of this section.", "",
          "The DP-BCFW runs of Figs. 4-9 use `dp_noise = 3`: Alg. 2 as printed (the index",
          "sensitivity 2 G eta / (K n), eq. 17's pi added to J a, no clipping), which is n",
          "times too little feature noise and no bound on one sample's contribution, so",
          "**not private**; we keep it only to compare with the paper's figures. Their",
          "centralized DP-FW (K = 1, `dp_noise = 2`) is the private one: entries and",
          "residuals clipped to 1 (on the synthetic N(0, 1) data and colon-cancer the clip",
          "binds), the index noise calibrated for one sample's contribution. `dp_noise = 1`,",
          "the default, is private for any data with the epsilon its accounting states",
          "(docs/privacy.md, \"One sample's contribution\"); the last part of this section",
          "measures what it learns.", ""]
    md += fig1(sim)
    md += fig2(sim)
    f0, first = synth_f0(sim)
    md += fig4(sim)
    md += fig5(sim, f0)
    md += fig6(sim, f0)
    md += noise_table(f0, first)
    md += fig8(sim, f0)
    md += fig9(sim, data)
    md += privacy_utility(sim, data)
    md += [f"Wall time of this section's runs on this machine: {time.time() - t:.0f} s "
           "(one core, one run after the other).", ""]
    md += [open(os.path.join(R.HERE, "report-dpbcfw-notes.md")).read(), ""]
    return md
