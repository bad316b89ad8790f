#!/usr/bin/python3
"""Runs the experiments in sim/experiments/ with sfl-sim and writes
results/REPORT.md: for each claim of the papers, their figure, ours and a
plot. Real-data experiments are skipped (and say so) when ../shared/data is
absent. Each top-level section has a name (SECTIONS below); --only NAME
(make reproduce ONLY=NAME) reruns that section alone and puts it in place in
the existing report. Usage: sim/report.py --sim build/sfl-sim [--data DIR]
[--only NAME]"""
import argparse
import configparser
import csv
import importlib
import math
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXP = os.path.join(HERE, "experiments")
RES = os.path.join(ROOT, "results")
RUNS = os.path.join(RES, "runs")

# Objective above which (or not finite) a run counts as diverged: the grid
# criterion of sim/tune.sh.
DIVERGED = 1e6


def run(sim, name, extra=(), tag=None):
    """Runs experiment NAME (an .ini) with extra flags; returns rows as dicts."""
    tag = tag or name
    out = os.path.join(RUNS, tag + ".csv")
    cmd = [sim, "--config", os.path.join(EXP, name + ".ini"), "--quiet", *extra]
    t = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    with open(out, "w") as f:
        f.write(p.stdout)
    rows = list(csv.DictReader(p.stdout.splitlines()))
    status = "ok" if p.returncode == 0 else "FAILED: " + p.stderr.strip()
    print(f"  {tag}: {len(rows)} rounds in {time.time() - t:.1f}s {status}", file=sys.stderr)
    return rows, p.returncode == 0, p.stderr.strip()


def run_until(sim, name, extra, tag, stop):
    """Like run(), but reads the CSV as it is written and ends the run (its
    own child, by its handle) after the first row for which stop(row) is
    true, or when the objective diverges (not finite or above DIVERGED).
    Returns (rows, status): status "ok" (ran to its last round), "stopped"
    (stop() held), "diverged" or "failed: <stderr>"."""
    out = os.path.join(RUNS, tag + ".csv")
    cmd = [sim, "--config", os.path.join(EXP, name + ".ini"), "--quiet", *extra]
    t = time.time()
    rows, status = [], "ok"
    with open(out, "w") as f, subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT) as p:
        header = None
        for line in p.stdout:
            f.write(line)
            if header is None:
                header = line.strip().split(",")
                continue
            row = dict(zip(header, line.strip().split(",")))
            rows.append(row)
            obj = float(row["objective"])
            if not math.isfinite(obj) or obj > DIVERGED:
                status = "diverged"
            elif stop(row):
                status = "stopped"
            if status != "ok":
                p.kill()
                break
        err = p.stderr.read().strip()
        rc = p.wait()
    if status == "ok" and rc != 0:
        # sfl-sim refuses an update whose norm overflows: that is divergence too.
        status = "diverged" if "max_update_norm" in err else "failed: " + err
    print(f"  {tag}: {len(rows)} rounds in {time.time() - t:.1f}s {status}", file=sys.stderr)
    return rows, status


def sim_cmd(name, extra=()):
    """The sfl-sim command line of run(sim, name, extra), as the report shows it."""
    return " ".join(["sfl-sim --config", f"sim/experiments/{name}.ini", *extra])


def produced_by(cmds, only):
    """The line that goes directly under a table (common convention): the
    commands that produced its numbers, each shown in backticks (a string, or
    (command, remark) with the remark in parentheses after it), and the make
    target that regenerates them."""
    parts = []
    for c in cmds:
        cmd, remark = (c, None) if isinstance(c, str) else c
        parts.append(f"`{cmd}`" + (f" ({remark})" if remark else ""))
    return f"Produced by: {'; '.join(parts)}; `make reproduce ONLY={only}`."


def stats(xs, digits=4, lo_hi=True):
    """'mean [min-max]' of the finite values of xs ('-' when there is none)."""
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    if not xs:
        return "-"
    m = sum(xs) / len(xs)
    g = lambda v: f"{v:.{digits}g}"
    if len(xs) == 1 or not lo_hi:
        return g(m)
    return f"{g(m)} [{g(min(xs))}-{g(max(xs))}]"


def col(rows, key):
    return [float(r[key]) for r in rows]


def first_round_at_most(rows, target):
    for r in rows:
        if float(r["objective"]) <= target:
            return int(r["round"])
    return None


def plot(png, title, series, ylabel="objective", logy=True, xcol="round", ycol="objective"):
    """series: list of (label, csv path)."""
    lines = [
        "set terminal pngcairo size 800,480 noenhanced",
        f"set output '{png}'",
        "set datafile separator ','",
        f"set title '{title}'",
        f"set xlabel '{xcol}'",
        f"set ylabel '{ylabel}'",
        "set grid",
        "set key top right",
    ]
    if logy:
        lines.append("set logscale y")
    plots = []
    for label, path in series:
        plots.append(f"'{path}' using '{xcol}':'{ycol}' with lines lw 2 title '{label}'")
    lines.append("plot " + ", ".join(plots))
    subprocess.run(["gnuplot"], input="\n".join(lines) + "\n", text=True, check=True)


def fmt(x):
    if x is None:
        return "not reached"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def ini(name):
    c = configparser.ConfigParser(inline_comment_prefixes=(";",))
    c.read(os.path.join(EXP, name + ".ini"))
    return c["sim"]


def defaults_for(preset, algo):
    with open(os.path.join(HERE, "defaults.inc")) as f:
        for line in f:
            if line.startswith("{") and f'"{preset}", "{algo}"' in line:
                parts = line.strip("{},\n").split(",")
                return float(parts[2]), int(parts[3])
    return None


def last(rows, key):
    return float(rows[-1][key]) if rows else float("nan")


def first_round_below(rows, key, target):
    for r in rows:
        if float(r[key]) <= target:
            return int(r["round"]), float(r["wall_ms"])
    return None, None


def fill(template, values):
    """Hand-written notes with the section's numbers: each {{key}} in the
    file sim/TEMPLATE becomes values[key]; a key the section did not produce
    (a run failed or was skipped) becomes 'n/a' and is reported on stderr."""
    text = open(os.path.join(HERE, template)).read()

    def one(m):
        if m.group(1) not in values:
            print(f"  {template}: no value for {{{{{m.group(1)}}}}}", file=sys.stderr)
            return "n/a"
        return str(values[m.group(1)])
    return re.sub(r"\{\{([\w.]+)\}\}", one, text)


def preamble(sim, data):
    names = ", ".join(f"`{n}`" for n in SECTIONS)
    return ["# Reproduction report", "",
            "Generated by `make reproduce` (sim/report.py and the sim/report_*.py it calls) from",
            "the experiments in sim/experiments/. Each top-level section can be regenerated",
            f"alone with `make reproduce ONLY=<name>` ({names}); every table names the",
            "commands that produced it in a `Produced by:` line under it. Each run's CSV is",
            "written to results/runs/ in the checkout where `make reproduce` ran; that",
            "directory is ignored by git and not committed, so a fresh clone has only this",
            "report and its figures until a section is rerun. Step sizes and K are the best",
            "of the papers' grid for each algorithm (sim/tune.sh -> sim/defaults.inc) unless",
            "a row says otherwise. Where a table backs a claimed effect with several seeds it",
            "shows the mean and [min-max] over them; a table of one seed says so.", ""]


def notes(sim, data):
    return ["## Notes", "", open(os.path.join(HERE, "report-notes.md")).read()]


# The report's top-level sections in order, by the name make reproduce ONLY=
# takes. Section NAME is written by report_NAME.section(sim, data) (markdown
# lines), preamble and notes by this file.
SECTIONS = ("preamble", "fedht", "gradmp", "fedmac", "dpbcfw", "secagg", "notes")


def writer(name):
    # Imported here, not at the top: those modules import this one.
    return {"preamble": preamble, "notes": notes}.get(name) or \
        importlib.import_module("report_" + name).section


MARK = "<!-- section: {} -->"


def timed(name, sim, data):
    t = time.time()
    md = writer(name)(sim, data)
    print(f"section {name}: {time.time() - t:.0f} s", file=sys.stderr)
    return [MARK.format(name)] + md + ([""] if md and md[-1] != "" else [])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", default="build/sfl-sim")
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--only", choices=SECTIONS,
                    help="run one section and replace it in the existing REPORT.md")
    a = ap.parse_args()
    sim = os.path.abspath(a.sim)
    os.makedirs(RUNS, exist_ok=True)
    if a.only:
        return only_section(a.only, sim, a.data)
    md = []
    for name in SECTIONS:
        md += timed(name, sim, a.data)
    with open(os.path.join(RES, "REPORT.md"), "w") as f:
        f.write("\n".join(md).rstrip("\n") + "\n")
    print("wrote results/REPORT.md", file=sys.stderr)


def span(old, name, head=None):
    """[i, j): the lines of section NAME in the report OLD (lines), found by its
    marker or, in a report written before the markers, by its heading HEAD or
    the one it had then (HEADS); None when absent. It ends at the next marker
    or top-level heading."""
    mark = MARK.format(name)
    for want in (mark, head, HEADS.get(name)):
        i = next((k for k, line in enumerate(old) if want and line == want), None)
        if i is not None:
            break
    else:
        return None
    first = i + 2 if old[i] == mark else i + 1
    j = next((k for k in range(first, len(old))
              if old[k].startswith(("<!-- section: ", "# ")) or old[k] == "## Notes"), len(old))
    return i, j


# Headings of the sections as they stand in a report written before the
# markers, to find where a new section goes.
HEADS = {"preamble": "# Reproduction report", "gradmp": "# FedGradMP (seed 004)",
         "fedmac": "# FedMac (seed 002)", "dpbcfw": "# DP-BCFW (seed 003)",
         "secagg": "# Secure aggregation (update mode 2)", "notes": "## Notes"}


def only_section(name, sim, data):
    """Runs one top-level section and puts it in place of the same section of
    results/REPORT.md; a section the report lacks goes before the first
    section that follows it in SECTIONS."""
    new = timed(name, sim, data)
    path = os.path.join(RES, "REPORT.md")
    old = open(path).read().rstrip("\n").split("\n") if os.path.exists(path) else []
    where = span(old, name, new[1])
    if where is None:
        later = [span(old, n) for n in SECTIONS[SECTIONS.index(name) + 1:]]
        i = min([s[0] for s in later if s] + [len(old)])
        where = (i, i)
    i, j = where
    with open(path, "w") as f:
        f.write("\n".join(old[:i] + new + old[j:]).rstrip("\n") + "\n")
    print(f"wrote the {name} section of results/REPORT.md", file=sys.stderr)


if __name__ == "__main__":
    main()
