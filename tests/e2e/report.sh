#!/bin/sh
# The plumbing of sim/report.py (make reproduce): each top-level section can be
# regenerated alone and lands in its place, run_until() ends a run at its
# target or on divergence, and the helpers the sections share format as the
# report's convention says. No experiment runs: sections are stand-ins, the
# runs a few rounds of a tiny synthetic job (well under a second in all).
set -eu
. tests/e2e/lib-step.sh
BIN=${SFL_BIN:-build}
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

step "make reproduce ONLY=<section>: every section in place, the others untouched"
SIM="$BIN/sfl-sim" T="$t" /usr/bin/python3 - <<'EOF'
import os, sys
sys.path.insert(0, "sim")
import report as R

R.RES, R.RUNS = os.environ["T"], os.path.join(os.environ["T"], "runs")
os.makedirs(R.RUNS)
path = os.path.join(R.RES, "REPORT.md")
body = {n: [f"# {n} heading", "", f"{n} text", ""] for n in R.SECTIONS}
body["notes"] = ["## Notes", "", "notes text", ""]
R.writer = lambda name: (lambda sim, data: body[name])

def sections(text):
    """The order of the sections' first text lines in the report."""
    return [line.split()[0] for line in text.split("\n") if line.endswith(" text")]

# A report written before the section markers (and before fedht had a
# heading of its own): the preamble holds the Fed-HT tables.
open(path, "w").write("# Reproduction report\n\nold sim1 table\n\n"
                      "# FedGradMP (seed 004)\n\nold gradmp\n\n"
                      "# FedMac (seed 002)\n\nfedmac text\n\n## Notes\n\nold notes\n")
R.only_section("preamble", "sfl-sim", "data")
R.only_section("fedht", "sfl-sim", "data")
text = open(path).read()
assert "old sim1 table" not in text, text
assert sections(text) == ["preamble", "fedht", "fedmac"], sections(text)
assert "old gradmp" in text and "old notes" in text, text
assert text.index("fedht text") < text.index("# FedGradMP"), text

# Every section, in the order of SECTIONS, each replaced alone.
for name in R.SECTIONS:
    R.only_section(name, "sfl-sim", "data")
text = open(path).read()
assert sections(text) == list(R.SECTIONS), sections(text)
assert "old" not in text, text
body["gradmp"] = ["# gradmp heading", "", "gradmp text", "", "| a |", "|---|", "| 1 |"]
R.only_section("gradmp", "sfl-sim", "data")
again = open(path).read()
assert sections(again) == list(R.SECTIONS), sections(again)
assert again.replace("| a |\n|---|\n| 1 |\n\n", "") == text, again
# A table at a section's end is followed by a blank line, not the next marker.
assert "| 1 |\n\n<!-- section: fedmac -->" in again, again

# The Produced by line and the notes' placeholders.
line = R.produced_by(["sfl-sim --config a.ini", ("sfl-sim --config b.ini", "S in {7, 8}")],
                     "fedht")
assert line == ("Produced by: `sfl-sim --config a.ini`; `sfl-sim --config b.ini` "
                "(S in {7, 8}); `make reproduce ONLY=fedht`."), line
notes = os.path.join(os.environ["T"], "n.md")
open(notes, "w").write("a {{x}} b {{y}} c {{lr_0.001}}\n")
assert R.fill(notes, {"x": 1, "lr_0.001": 2}) == "a 1 b n/a c 2\n"
assert R.stats([1.0, 2.0, 6.0]) == "3 [1-6]" and R.stats([]) == "-"
EOF

step "run_until: a run ends at its target, on divergence, or at its last round"
SIM="$BIN/sfl-sim" T="$t" /usr/bin/python3 - <<'EOF'
import os, sys
sys.path.insert(0, "sim")
import report as R

R.RUNS = os.environ["T"]
sim = os.path.abspath(os.environ["SIM"])
tiny = ["--clients", "2", "--samples", "20", "--dim", "50", "--support", "5", "--tau", "10",
        "--local-steps", "2", "--no-wall-clock"]
rows, status = R.run_until(sim, "sim1-fediterht", tiny + ["--lr", "0.001", "--rounds", "30"],
                           "t-full", lambda r: False)
assert status == "ok" and len(rows) == 30, (status, len(rows))
target = float(rows[9]["objective"])
rows, status = R.run_until(sim, "sim1-fediterht", tiny + ["--lr", "0.001", "--rounds", "30"],
                           "t-stop", lambda r: float(r["objective"]) <= target)
assert status == "stopped" and len(rows) <= 10, (status, len(rows))
assert R.first_round_at_most(rows, target) == len(rows)
rows, status = R.run_until(sim, "sim1-fediterht", tiny + ["--lr", "10", "--rounds", "30"],
                           "t-div", lambda r: False)
assert status == "diverged" and len(rows) < 30, (status, len(rows))
# What was read is what the CSV holds.
assert open(os.path.join(R.RUNS, "t-div.csv")).read().count("\n") == len(rows) + 1
EOF
