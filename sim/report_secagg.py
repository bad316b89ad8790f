"""The secure aggregation section of results/REPORT.md: what update mode 2
(docs/security.md) costs in accuracy, measured with sfl-sim --secagg
(docs/algorithms.md, "Secure aggregation in sfl-sim"). A plain run and a
--secagg run of the same job, same seed, differ only by mode 2: the common
support S_t, each client's top-k inside it with error feedback, and the
quantization mod 2^32. Called by sim/report.py; helpers (run, plot, RUNS,
RES, defaults_for) come from there."""
import math
import os
import sys
import time

import re

import report as R

NRUNS = [0]  # sfl-sim runs of this section, for its cost


def run(sim, name, extra, tag):
    NRUNS[0] += 1
    return R.run(sim, name, extra, tag)

SEEDS = ("7", "8", "9")
SIM1_ROUNDS = 200
GRADMP_SIM1_ROUNDS = 10  # a FedGradMP round on Sim I costs 2-3 s (LS solves)
GRADMP_VC_ROUNDS = 20
CHURN_TAIL = 50  # the last rounds, where the support has had time to settle

# Figures the notes (report-secagg-notes.md) quote as {{name}}: filled by the
# section's functions from the runs, so no number in the notes is typed by hand.
V = {}


def g(x, digits=4):
    if x is None or x != x:
        return "-"
    return f"{x:.{digits}g}"


def mean(xs):
    xs = [x for x in xs if x == x]
    return sum(xs) / len(xs) if xs else float("nan")


def last(rows, key="objective"):
    return float(rows[-1][key]) if rows and key in rows[-1] else float("nan")


def at(rows, rnd, key="objective"):
    for r in rows:
        if int(r["round"]) == rnd:
            return float(r[key])
    return float("nan")


def seeds(xs, digits=4):
    return " / ".join(g(x, digits) for x in xs)


def spread(xs, digits=3):
    """Mean (min-max) over the seeds that have a value."""
    xs = [x for x in xs if x == x]
    if not xs:
        return "-"
    return f"{g(mean(xs), digits)} ({g(min(xs), digits)}-{g(max(xs), digits)})"


def churn_rate(rows, tail=None):
    """Support churn per round (sfl-sim's support_churn column): over rounds
    2..T, or over the last `tail` rounds. Round 1 is left out: it is the
    support formed from the zero start (its churn is x_2's nnz). A row sums
    the rounds since the previous row, so this holds whatever --eval-every."""
    if not rows or "support_churn" not in rows[0]:
        return float("nan")
    T = int(rows[-1]["round"])
    lo = 1 if tail is None else max(1, T - tail)
    n = T - lo
    tot = sum(int(r["support_churn"]) for r in rows if int(r["round"]) > lo)
    return tot / n if n > 0 else float("nan")


def sfl_sim_cmd(name, extra, mode="[--secagg]"):
    """The command line a run of this section is, for the Produced by lines:
    the seed as S, mode 2's flags in brackets when both modes ran."""
    return " ".join(["sfl-sim --config", f"sim/experiments/{name}.ini", *extra]
                    + ([mode] if mode else []) + ["--seed S"])


def produced_by(cmds):
    return ("Produced by: " + ", ".join(f"`{c}`" for c in cmds)
            + f" for S = {', '.join(SEEDS)}; `make reproduce ONLY=secagg`.")


def run_pair(sim, name, extra, tag, sa_flags=("--secagg",)):
    """Plain and mode-2 runs of one job for every seed: {"plain"|"sa": [rows]}."""
    out = {"plain": [], "sa": []}
    for s in SEEDS:
        for mode, flags in (("plain", []), ("sa", list(sa_flags))):
            rows, ok, err = run(sim, name, list(extra) + flags + ["--seed", s],
                                  f"secagg-{tag}-{mode}-s{s}")
            if not ok:
                print(f"  secagg-{tag}-{mode}-s{s}: {err[:200]}", file=sys.stderr)
            out[mode].append(rows if ok else [])
    return out


# -- 1. Simulation I ------------------------------------------------------

SIM1_ALGOS = (("fediterht", "FedIter-HT"), ("fedht", "Fed-HT"), ("fedavg", "FedAvg"))
# FedAvg's tuned lr (0.001, the grid's smallest) is at its stability edge on
# Sim I: seed 8 diverges with it. A slightly smaller step shows mode 2 on a
# FedAvg run that converges for every seed.
FEDAVG_SAFE_LR = "0.0008"


def diverged(rows):
    """No rows, a value not finite, or a final objective above round 1's."""
    if not rows:
        return True
    f1, fT = float(rows[0]["objective"]), float(rows[-1]["objective"])
    return not (math.isfinite(fT) and fT <= f1)


def objs(runs):
    """Per-seed final objectives (diverged runs marked) and the mean over the
    seeds that did not diverge."""
    txt, ok = [], []
    for r in runs:
        if not r:
            txt.append("failed")
        elif diverged(r):
            txt.append(f"diverged ({g(last(r), 2)})")
        else:
            txt.append(g(last(r)))
            ok.append(last(r))
    n = len(ok)
    m = g(mean(ok)) + ("" if n == len(runs) else f" ({n} of {len(runs)} seeds)")
    return " / ".join(txt), m


def sim1_extra(alg):
    # sim1-fediterht.ini / sim1-fedht.ini as the Sim I section runs them;
    # FedAvg has no .ini of its own: the same preset with --algo fedavg
    # (sfl-sim takes its lr and K from sim/defaults.inc, as for the others).
    if alg in ("fediterht", "fedht"):
        return f"sim1-{alg}", []
    return "sim1-fediterht", ["--algo", alg]


def sim1_cases():
    """(algorithm, label, ini name, flags, tag) of the Sim I pairs."""
    cases = []
    for alg, label in SIM1_ALGOS:
        name, extra = sim1_extra(alg)
        cases.append((alg, label, name, extra + ["--rounds", str(SIM1_ROUNDS)], f"sim1-{alg}"))
    name, extra = sim1_extra("fedavg")
    cases.append(("fedavg", f"FedAvg, lr {FEDAVG_SAFE_LR}", name,
                  extra + ["--lr", FEDAVG_SAFE_LR, "--rounds", str(SIM1_ROUNDS)],
                  f"sim1-fedavg-lr{FEDAVG_SAFE_LR}"))
    return cases


def key(tag):
    """The notes' name of a Sim I case: fediterht, fedht, fedavg, fedavg_safe."""
    return tag.replace("sim1-", "").replace(f"-lr{FEDAVG_SAFE_LR}", "_safe")


def reldiff(a_runs, b_runs):
    """Largest |b - a| / |a| of the final objectives over the seeds where
    neither run diverged."""
    d = [abs(last(b) - last(a)) / abs(last(a)) for a, b in zip(a_runs, b_runs)
         if not diverged(a) and not diverged(b) and last(a) != 0]
    return max(d) if d else float("nan")


def sim1(sim):
    print("secagg sim1:", file=sys.stderr)
    md = [f"## Simulation I, {SIM1_ROUNDS} rounds: plain against mode 2", "",
          "The Sim I presets (sim/experiments/sim1-*.ini: 100 clients x 100 samples, d = 1000,",
          "tau = 200, lr and K from sim/defaults.inc), each run plain and with `--secagg` at",
          "its defaults: |S_t| = 2k (k = tau = 200 for the sparse algorithms, so 400; d for",
          "FedAvg, so S_t is every coordinate), top-k = k, clip 100. Final objective per seed",
          "(7 / 8 / 9) and mean; the ratio is mode 2 over plain, per seed and its mean",
          "(below 1: mode 2 ends lower). A run whose final objective is above its round-1",
          "objective is marked diverged and left out of the means and ratios. Support",
          "recall: the fraction of the truth's 100 nonzeros in the final model's support",
          "(mean over seeds). Bytes up: per round, all clients, last round (plain: the",
          "sparse codec, f64 values; mode 2: the masked vectors, 4 bytes per slot).", "",
          "| algorithm | lr, K | plain: objective (7 / 8 / 9) | mean | mode 2: objective "
          "(7 / 8 / 9) | mean | ratio (7 / 8 / 9) | mean ratio | support recall plain, mode 2 "
          "| bytes up plain, mode 2 |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    results, cmds = {}, []
    for alg, label, name, extra, tag in sim1_cases():
        res = run_pair(sim, name, extra, tag)
        results[tag] = res
        cmds.append(sfl_sim_cmd(name, extra))
        ptxt, pm = objs(res["plain"])
        stxt, sm = objs(res["sa"])
        ratio = [last(b) / last(a) if not diverged(a) and not diverged(b) else float("nan")
                 for a, b in zip(res["plain"], res["sa"])]
        lk = R.defaults_for("sim1", alg)
        if "--lr" in extra:
            lk = (float(FEDAVG_SAFE_LR), lk[1] if lk else None)
        rp = mean([last(r, "support_recall") for r in res["plain"]])
        rs = mean([last(r, "support_recall") for r in res["sa"]])
        bp = last(res["plain"][0], "bytes_up")
        bs = last(res["sa"][0], "bytes_up")
        md.append(f"| {label} | {g(lk[0]) + ', ' + str(lk[1]) if lk else 'default'} | "
                  f"{ptxt} | {pm} | {stxt} | {sm} | "
                  f"{seeds(ratio, 3)} | {g(mean(ratio), 3)} | {g(rp, 3)}, {g(rs, 3)} | "
                  f"{bp:,.0f}, {bs:,.0f} |")
        V[f"{key(tag)}_ratio"] = g(mean(ratio), 3)
        V[f"{key(tag)}_ratios"] = seeds(ratio, 3)
        V[f"{key(tag)}_recall"] = f"{g(rp, 3)} plain against {g(rs, 3)} in mode 2"
        V[f"{key(tag)}_reldiff"] = g(reldiff(res["plain"], res["sa"]), 2)
        V[f"{key(tag)}_bytes"] = f"{bp:,.0f}"
    series = []
    for alg, label in SIM1_ALGOS:
        for mode, what in (("plain", "plain"), ("sa", "mode 2")):
            series.append((f"{label} {what}",
                           os.path.join(R.RUNS, f"secagg-sim1-{alg}-{mode}-s{SEEDS[0]}.csv")))
    R.plot(os.path.join(R.RES, "secagg-sim1.png"),
           f"Simulation I, seed {SEEDS[0]}: plain and mode 2 (--secagg)", series)
    md += ["", produced_by(cmds), "",
           "![secagg sim1](secagg-sim1.png)", "",
           "FedAvg's two curves coincide (S_t is every coordinate: only the rounding differs).",
           ""]
    return md, results


# -- 1b. Support churn -----------------------------------------------------

def churn_cell(runs, tail=None):
    """Per seed and mean (min-max) of the churn per round."""
    xs = [churn_rate(r, tail) for r in runs]
    return seeds(xs, 3), spread(xs)


def churn(results):
    """The support churn of the Sim I pairs above (no new runs)."""
    md = ["## Support churn, Simulation I: plain against mode 2", "",
          "Mode 2 has been explained as changing the global support less from round to",
          "round. sfl-sim's `support_churn` column measures it: the coordinates that enter",
          "or leave the global model's support in a round (|supp(x_t) xor supp(x_{t+1})|,",
          "docs/algorithms.md). Round 1 is left out (the support formed from the zero",
          "start: tau = 200 entries, or d = 1000 for FedAvg); per round over rounds",
          f"2-{SIM1_ROUNDS} and over the last {CHURN_TAIL}, per seed (7 / 8 / 9) and mean "
          "(min-max) over the seeds. The same runs as the table above. FedAvg's row at",
          "the tuned lr is left out (seed 8 diverges); the lr 0.0008 row stands for it.", "",
          f"| algorithm | mode | churn per round, rounds 2-{SIM1_ROUNDS} (7 / 8 / 9) | mean "
          f"(min-max) | churn per round, last {CHURN_TAIL} rounds (7 / 8 / 9) | mean (min-max) |",
          "|---|---|---|---|---|---|"]
    cmds = []
    for alg, label, name, extra, tag in sim1_cases():
        if tag == "sim1-fedavg":
            continue
        cmds.append(sfl_sim_cmd(name, extra))
        for mode, what in (("plain", "plain"), ("sa", "mode 2")):
            runs = results[tag][mode]
            a, am = churn_cell(runs)
            b, bm = churn_cell(runs, CHURN_TAIL)
            md.append(f"| {label} | {what} | {a} | {am} | {b} | {bm} |")
            V[f"{key(tag)}_churn_{mode}"] = am
            V[f"{key(tag)}_churn_tail_{mode}"] = bm
    # Cumulative churn from round 2 on: a smooth curve whose slope is the
    # churn per round (the per-round column is mostly 0s and 2s when plain).
    series = []
    for alg, label in SIM1_ALGOS[:2]:
        for mode, what in (("plain", "plain"), ("sa", "mode 2")):
            rows = results[f"sim1-{alg}"][mode][0]
            path = os.path.join(R.RUNS, f"secagg-churn-{alg}-{mode}-s{SEEDS[0]}.csv")
            with open(path, "w") as f:
                f.write("round,cumulative_churn\n")
                tot = 0
                for r in rows:
                    if int(r["round"]) > 1:
                        tot += int(r["support_churn"])
                        f.write(f"{r['round']},{max(tot, 1)}\n")
            series.append((f"{label} {what}", path))
    R.plot(os.path.join(R.RES, "secagg-churn.png"),
           f"Simulation I, seed {SEEDS[0]}: support churn summed from round 2 (log; 1 = none)",
           series, ylabel="entries entered + left since round 1", ycol="cumulative_churn")
    md += ["", produced_by(cmds) + " The churn is the runs' `support_churn` column.", "",
           "![secagg churn](secagg-churn.png)", ""]
    return md


# -- 4. Sensitivity: S_t = everything ------------------------------------

def sensitivity(sim, base):
    print("secagg sensitivity:", file=sys.stderr)
    md = ["## Which part of mode 2 costs what (FedIter-HT, Simulation I)", "",
          "From plain to mode 2 one ingredient at a time, same seeds. `--sa-support 1000`",
          "(the dimension) makes S_t every coordinate, so the support rule is gone; each",
          "client still keeps its top k = 200 changes with error feedback. Adding",
          "`--sa-topk 1000` keeps every change too, so only the quantization (clip 100,",
          "step 2^-17, stochastic rounding) is left. Churn: support churn per round over",
          f"rounds 2-{SIM1_ROUNDS}, mean (min-max) over the seeds.", "",
          "| setting | objective (7 / 8 / 9) | mean | ratio to plain (mean) | support recall "
          "| churn per round |",
          "|---|---|---|---|---|---|"]
    plain = [last(r) for r in base["plain"]]

    def row(label, runs, name):
        o = [last(r) for r in runs]
        ratio = mean([b / a for a, b in zip(plain, o) if a == a and b == b and a != 0])
        rec = mean([last(r, "support_recall") for r in runs])
        _, ch = churn_cell(runs)
        md.append(f"| {label} | {seeds(o)} | {g(mean(o))} | {g(ratio, 3)} | {g(rec, 3)} "
                  f"| {ch} |")
        V[f"sens_{name}_ratio"] = g(ratio, 3)
        V[f"sens_{name}_churn"] = ch

    rounds = ["--rounds", str(SIM1_ROUNDS)]
    cmds = [sfl_sim_cmd("sim1-fediterht", rounds)]
    row("plain", base["plain"], "plain")
    for flags, tag, label in (
            (["--sa-support", "1000", "--sa-topk", "1000"], "quant",
             "quantization only (`--sa-support 1000 --sa-topk 1000`)"),
            (["--sa-support", "1000"], "all",
             "S_t = everything, client top-k = 200 (`--sa-support 1000`)")):
        runs = []
        for s in SEEDS:
            rows, ok, err = run(sim, "sim1-fediterht",
                                [*rounds, "--secagg", *flags, "--seed", s],
                                f"secagg-sim1-fediterht-{tag}-s{s}")
            runs.append(rows if ok else [])
        cmds.append(sfl_sim_cmd("sim1-fediterht", rounds, " ".join(["--secagg", *flags])))
        row(label, runs, tag)
    row("mode 2 defaults (\\|S_t\\| = 400, top-k = 200)", base["sa"], "sa")
    return md + ["", produced_by(cmds), ""]


# -- 3. FedGradMP ---------------------------------------------------------

def first_below(rows, key, target):
    for r in rows:
        if float(r[key]) <= target:
            return int(r["round"])
    return None


def gradmp(sim):
    print("secagg fedgradmp:", file=sys.stderr)
    md = ["## FedGradMP in mode 2", "",
          f"Simulation I as above with `--algo fedgradmp` (tau = 200, K = 5, batch 10), "
          f"{GRADMP_SIM1_ROUNDS} rounds (a FedGradMP round on Sim I takes seconds), and, where",
          "FedGradMP does converge plain, the Sec. V-C problem of the FedGradMP section",
          f"(sim/experiments/gradmp-vc-fedgradmp.ini: d = 1000, tau = 10, so |S_t| = 20), "
          f"{GRADMP_VC_ROUNDS} rounds. Per seed (7 / 8 / 9); Sim I's CSV has no relative error.",
          "",
          "| problem | mode | objective round 1 | objective last round | rel. error last "
          "round | support recall last round |",
          "|---|---|---|---|---|---|"]
    t = time.time()
    sim1_extra_ = ["--algo", "fedgradmp", "--rounds", str(GRADMP_SIM1_ROUNDS)]
    res_sim1 = run_pair(sim, "sim1-fediterht", sim1_extra_, "gradmp-sim1")
    V["gradmp_sim1_wall"] = f"{time.time() - t:.0f}"
    vc_extra = ["--rounds", str(GRADMP_VC_ROUNDS)]
    res_vc = run_pair(sim, "gradmp-vc-fedgradmp", vc_extra, "gradmp-vc")
    for prob, res in ((f"Sim I, {GRADMP_SIM1_ROUNDS} rounds", res_sim1),
                      (f"V-C, {GRADMP_VC_ROUNDS} rounds", res_vc)):
        for mode, what in (("plain", "plain"), ("sa", "mode 2")):
            runs = res[mode]
            md.append(f"| {prob} | {what} | {seeds([at(r, 1) for r in runs])} | "
                      f"{seeds([last(r) for r in runs])} | "
                      f"{seeds([last(r, 'rel_error') for r in runs], 3)} | "
                      f"{seeds([last(r, 'support_recall') for r in runs], 3)} |")
    # What the notes quote.
    hit = [first_below(r, "rel_error", 1e-10) if r else None for r in res_vc["plain"]]
    V["vc_plain_rounds"] = " / ".join("not reached" if h is None else str(h) for h in hit)
    V["vc_sa_relerr"] = seeds([last(r, "rel_error") for r in res_vc["sa"]], 2)
    V["vc_sa_recall"] = seeds([last(r, "support_recall") for r in res_vc["sa"]], 2)
    for mode in ("plain", "sa"):
        ch = [100 * (last(r) / at(r, 1) - 1) for r in res_sim1[mode]]
        V[f"gradmp_sim1_{mode}_change"] = " / ".join(f"{x:+.0f} %" for x in ch)
        V[f"gradmp_sim1_{mode}_recall"] = seeds([last(r, "support_recall")
                                                 for r in res_sim1[mode]], 2)
    series = []
    for mode, what in (("plain", "plain"), ("sa", "mode 2")):
        series.append((f"FedGradMP V-C {what}",
                       os.path.join(R.RUNS, f"secagg-gradmp-vc-{mode}-s{SEEDS[0]}.csv")))
    R.plot(os.path.join(R.RES, "secagg-gradmp-vc.png"),
           f"FedGradMP, Sec. V-C problem, seed {SEEDS[0]}: plain and mode 2",
           series, ylabel="relative error", ycol="rel_error")
    md += ["", produced_by([sfl_sim_cmd("sim1-fediterht", sim1_extra_),
                            sfl_sim_cmd("gradmp-vc-fedgradmp", vc_extra)]), "",
           "![secagg fedgradmp](secagg-gradmp-vc.png)", ""]
    return md


# -- 2. a9a ---------------------------------------------------------------

def a9a(sim, data):
    print("secagg a9a:", file=sys.stderr)
    md = ["## a9a (logistic): FedIter-HT plain against mode 2", ""]
    full = os.path.join(data, "a9a")
    for k in ("a9a_acc", "a9a_obj", "a9a_churn"):
        V[k] = "(a9a skipped: data not found)"
    if not os.path.exists(full):
        return md + [f"Skipped: {full} not found.", ""]
    md += ["sim/experiments/real-a9a-fediterht.ini as the real-data section runs it (k-means",
           "partition, 100 clients, tau = 30, so |S_t| = 60 of 123, 100 rounds, 20 % held",
           "out; the seed also draws the split and the partition). Churn: support churn per",
           "round over rounds 2-100, per seed and mean (min-max).", "",
           "| mode | objective (7 / 8 / 9) | mean | test accuracy (7 / 8 / 9) | mean "
           "| churn per round (7 / 8 / 9) | mean (min-max) |",
           "|---|---|---|---|---|---|---|"]
    extra = ["--data", "libsvm:" + full]
    res = run_pair(sim, "real-a9a-fediterht", extra, "a9a-fediterht")
    obj, acc, chs = {}, {}, {}
    for mode, what in (("plain", "plain"), ("sa", "mode 2")):
        o = [last(r) for r in res[mode]]
        a = [last(r, "test_accuracy") for r in res[mode]]
        c, cm = churn_cell(res[mode])
        obj[mode], acc[mode], chs[mode] = g(mean(o)), g(mean(a), 4), cm
        md.append(f"| {what} | {seeds(o)} | {g(mean(o))} | {seeds(a, 3)} | "
                  f"{g(mean(a), 4)} | {c} | {cm} |")
    dacc = [abs(last(b, "test_accuracy") - last(a, "test_accuracy"))
            for a, b in zip(res["plain"], res["sa"])]
    V["a9a_acc"] = (f"mean {acc['sa']} in mode 2 against {acc['plain']} plain, the largest "
                    f"per-seed difference {g(max(dacc), 2)}")
    V["a9a_obj"] = f"{obj['sa']} against {obj['plain']}"
    V["a9a_churn"] = f"{chs['sa']} entries a round in mode 2 against {chs['plain']} plain"
    return md + ["", produced_by([sfl_sim_cmd("real-a9a-fediterht", extra)]), ""]


def fill(text):
    """The notes with every {{name}} replaced by V[name]; an unknown name is
    an error, so a note cannot quote a figure the runs did not produce."""
    def sub(m):
        if m.group(1) not in V:
            raise KeyError(f"report-secagg-notes.md quotes {{{{{m.group(1)}}}}}, "
                           "which report_secagg.py does not compute")
        return V[m.group(1)]
    return re.sub(r"\{\{(\w+)\}\}", sub, text)


def section(sim, data):
    print("secagg:", file=sys.stderr)
    t = time.time()
    V.clear()
    NRUNS[0] = 0
    md = ["# Secure aggregation (update mode 2)", "",
          "What update mode 2 (secure aggregation, docs/security.md) costs in accuracy,",
          "measured with `sfl-sim --secagg` (docs/algorithms.md): the masks cancel exactly",
          "in the sum mod 2^32, so the simulator leaves out the cryptography and keeps what",
          "changes the numbers: the round's common support S_t (the global model's support",
          "plus an exploration set drawn from the round nonce), each client's top-k change",
          "inside S_t with an error-feedback residual, and the quantization mod 2^32 (clip,",
          "weights, stochastic rounding). A plain run and a `--secagg` run of the same job",
          "and seed differ only by that. Seeds 7, 8, 9. Mode 2 is ours, not the papers':",
          "no paper makes a claim about it, so nothing here is a reproduction; every row is",
          "our own measurement, read at the end of this section.", ""]
    sim1_md, base = sim1(sim)
    md += sim1_md
    md += churn(base)
    md += a9a(sim, data)
    md += gradmp(sim)
    md += sensitivity(sim, base["sim1-fediterht"])
    V["wall"] = f"{time.time() - t:.0f}"
    V["nruns"] = str(NRUNS[0])
    md += [f"Wall time of this section's {NRUNS[0]} runs on this machine: {V['wall']} s "
           "(one run after the other).", ""]
    md += [fill(open(os.path.join(R.HERE, "report-secagg-notes.md")).read()), ""]
    return md
