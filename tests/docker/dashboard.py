#!/usr/bin/python3
"""The Grafana dashboard deploy/monitoring/grafana-sfl.json, checked without
Grafana (Debian does not package it).

  dashboard.py check DASHBOARD [COORDMETRICS_C]
      structure: every panel has a unique id, a title, a gridPos inside the
      24 columns, the dashboard's datasource variable, targets with an expr
      and a unique refId; every $variable an expr uses is defined; every
      metric it names is one the coordinator renders (server/service/coordmetrics.c)
      and the panels cover what docs/operations.md promises.
  dashboard.py query DASHBOARD http://HOST:PORT [--timeout S] [--rate-interval D]
                   [--absent REGEX]
      Prometheus's HTTP API: each query variable resolved as Grafana would
      (label_values(SELECTOR, LABEL), all values, as a regex), then every
      panel's every target, with the template variables substituted, until
      each returns data or S seconds (default 180) have passed. Prints one
      line per target, exit 0 when all have data, 1 otherwise. --absent:
      the panels whose title matches REGEX are named and not run (a job
      kind the federation under test does not have).

  dashboard.py render DASHBOARD http://HOST:PORT OUT.html [MINUTES]
      The panels drawn from the same queries' ranges (last MINUTES, default
      5) as an HTML page of inline SVG, laid out by gridPos: a picture of the
      dashboard where Grafana cannot run (make test-monitoring screenshots it
      in Chromium to build/dashboard.png).

Standard library only (python3 -I safe).
"""
import json
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

# What the dashboard must show (issue 24, item 10; docs/operations.md).
REQUIRED = ["sfl_rounds_committed_total", "sfl_rounds_failed_total", "sfl_updates_total",
            "sfl_job_train_loss", "sfl_job_eval_accuracy", "sfl_job_privacy_epsilon_spent",
            "sfl_loop_lag_seconds_bucket", "sfl_agents_connected", "sfl_job_quarantined"]
PANEL_TYPES = {"timeseries", "stat", "gauge", "table", "bargauge"}
# Grafana's built-in variables, and the values this test gives them.
BUILTIN = {"__rate_interval", "__interval", "__range"}
VAR_RE = re.compile(r"\$(\w+)|\$\{(\w+)(?::\w+)?\}")


def fail(msg):
    print("dashboard: " + msg)
    sys.exit(1)


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")


def known_metrics(src_path):
    """Every family name server/service/coordmetrics.c renders, histograms expanded,
    and the round metrics' gauges it renders from the table beside it
    (libsfl/include/sfl/wire/roundmetrics.def, found from the source's path)."""
    src = open(src_path, encoding="utf-8").read()
    table = os.path.join(os.path.dirname(src_path), "../../libsfl/include/sfl/wire/roundmetrics.def")
    if os.path.exists(table):
        src += open(table, encoding="utf-8").read()
    names = set(re.findall(r'"(sfl_[a-z0-9_]+)', src))
    for h in re.findall(r'coord_hist_render\(t, "(sfl_[a-z0-9_]+)"', src):
        names |= {h + "_bucket", h + "_sum", h + "_count"}
    names.add("up")
    return names


def check(dash, src_path):
    errs = []
    for key in ("title", "uid", "panels", "templating", "schemaVersion"):
        if key not in dash:
            errs.append(f"no '{key}'")
    variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    ds_vars = [n for n, v in variables.items() if v.get("type") == "datasource"]
    if len(ds_vars) != 1 or variables[ds_vars[0]].get("query") != "prometheus":
        errs.append("want one datasource variable of type prometheus")
    want_ds = {"type": "prometheus", "uid": "${%s}" % (ds_vars[0] if ds_vars else "?")}
    metrics = known_metrics(src_path) if src_path else None
    ids, used = set(), set()
    panels = dash.get("panels", [])
    if not panels:
        errs.append("no panels")
    for p in panels:
        where = f"panel {p.get('id')} '{p.get('title')}'"
        if not isinstance(p.get("id"), int) or p["id"] in ids:
            errs.append(f"{where}: id missing or not unique")
        ids.add(p.get("id"))
        if not p.get("title"):
            errs.append(f"{where}: no title")
        if p.get("type") not in PANEL_TYPES:
            errs.append(f"{where}: type {p.get('type')!r}")
        if p.get("datasource") != want_ds:
            errs.append(f"{where}: datasource {p.get('datasource')!r}, want {want_ds}")
        g = p.get("gridPos", {})
        if not all(isinstance(g.get(k), int) for k in "xywh") or g["x"] + g["w"] > 24 or g["w"] < 1:
            errs.append(f"{where}: gridPos {g}")
        targets = p.get("targets") or []
        if not targets:
            errs.append(f"{where}: no targets")
        refs = set()
        for tg in targets:
            expr = tg.get("expr", "")
            if not expr.strip():
                errs.append(f"{where}: a target without expr")
            if not tg.get("refId") or tg["refId"] in refs:
                errs.append(f"{where}: refId missing or repeated")
            refs.add(tg.get("refId"))
            if tg.get("datasource", want_ds) != want_ds:
                errs.append(f"{where}: target datasource {tg.get('datasource')!r}")
            for a, b in VAR_RE.findall(expr):
                name = a or b
                if name not in variables and name not in BUILTIN:
                    errs.append(f"{where}: undefined variable ${name}")
            names = set(re.findall(r"\b(sfl_[a-z0-9_]+)", expr))
            if not names and "up{" not in expr:
                errs.append(f"{where}: expr names no sfl metric: {expr}")
            used |= names
            if metrics is not None:
                for n in names - metrics:
                    errs.append(f"{where}: {n} is not a metric of {src_path}")
    for q in (v for v in variables.values() if v.get("type") == "query"):
        if q.get("datasource") != want_ds or not parse_label_values(q):
            errs.append(f"variable {q.get('name')}: want label_values(...) on {want_ds}")
    for n in REQUIRED:
        if n not in used:
            errs.append(f"no panel shows {n}")
    for e in errs:
        print("dashboard: " + e)
    if errs:
        sys.exit(1)
    print(f"dashboard: {len(panels)} panels, "
          f"{sum(len(p['targets']) for p in panels)} targets, {len(variables)} variables: ok")


def parse_label_values(var):
    q = var.get("query")
    q = q.get("query", "") if isinstance(q, dict) else (q or "")
    m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", q)
    return (m.group(1), m.group(2)) if m else None


def api(base, path, params):
    url = base + path + "?" + urllib.parse.urlencode(params, doseq=True)
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
    except urllib.error.HTTPError as e:
        return {"status": "error", "error": f"HTTP {e.code}: {e.read()[:300]!r}"}
    except (OSError, ValueError) as e:
        return {"status": "error", "error": str(e)}
    return body


def substitute(expr, values):
    def one(m):
        name = m.group(1) or m.group(2)
        return values.get(name, m.group(0))
    return VAR_RE.sub(one, expr)


def regex_of(vals):
    """A multi-value variable in a regex matcher, as Grafana formats it."""
    esc = [re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\1", v) for v in sorted(vals)]
    return "(" + "|".join(esc) + ")" if len(esc) > 1 else esc[0]


def resolve_vars(dash, base, values):
    """Each query variable, in order: its values from Prometheus, or None."""
    for v in dash["templating"]["list"]:
        if v.get("type") != "query":
            continue
        sel, label = parse_label_values(v)
        sel = substitute(sel, values)
        r = api(base, "/api/v1/series", {"match[]": sel})
        vals = {s[label] for s in r.get("data", []) if label in s} if r.get("status") == "success" else set()
        if not vals:
            return v["name"], sel
        # Promql string escaping: a value's backslashes and quotes.
        values[v["name"]] = regex_of(vals).replace("\\", "\\\\").replace('"', '\\"')
    return None, None


def query(dash, base, timeout, rate_interval, absent=None):
    values = {"__rate_interval": rate_interval, "__interval": "15s", "__range": "1h"}
    deadline = time.monotonic() + timeout
    while True:
        r = api(base, "/api/v1/status/buildinfo", {})
        if r.get("status") == "success":
            break
        if time.monotonic() > deadline:
            print(f"prometheus at {base} does not answer: {r.get('error')}")
            return 1
        time.sleep(1)
    print(f"prometheus {r['data'].get('version')} at {base}")
    while True:
        vals = dict(values)
        missing, sel = resolve_vars(dash, base, vals)
        if missing is None:
            results = []
            for p in dash["panels"]:
                if absent and re.search(absent, p["title"]):
                    continue
                for tg in p["targets"]:
                    expr = substitute(tg["expr"], vals)
                    r = api(base, "/api/v1/query", {"query": expr})
                    n = len(r["data"]["result"]) if r.get("status") == "success" else 0
                    results.append((p, tg, expr, n, r.get("error")))
            if all(n > 0 for *_, n, _e in results) or time.monotonic() > deadline:
                break
        elif time.monotonic() > deadline:
            print(f"variable ${missing}: no values for {sel}")
            return 1
        time.sleep(1)
    bad = 0
    if absent:
        skipped = [p["title"] for p in dash["panels"] if re.search(absent, p["title"])]
        print(f"not run here (--absent {absent!r}, no such job in this federation): "
              + ", ".join(repr(t) for t in skipped))
    for p, tg, expr, n, err in results:
        ok = n > 0
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} panel {p['id']:2} {p['title']!r} {tg['refId']}: "
              f"{n} series  {expr}" + (f"  ({err})" if err else ""))
    print(f"{len(results) - bad} of {len(results)} panel queries return data "
          f"(variables: " + ", ".join(f"{k}={v}" for k, v in vals.items() if not k.startswith("__"))
          + ")")
    return 1 if bad else 0


COLOURS = ["#3b7dd8", "#e0732f", "#2f9e44", "#c2255c", "#7048e8", "#868e96"]


def esc(t):
    return (str(t).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def render(dash, base, out, minutes, rate_interval):
    """An HTML page of the dashboard's panels, laid out by gridPos, each
    target's range over the last MINUTES drawn as an SVG line per series (a
    stat panel: its last values): a picture of what Grafana would show, made
    from the same queries (Grafana itself is not packaged for Debian)."""
    vals = {"__rate_interval": rate_interval, "__interval": "15s", "__range": "1h"}
    missing, sel = resolve_vars(dash, base, vals)
    if missing is not None:
        print(f"variable ${missing}: no values for {sel}")
        return 1
    end = time.time()
    start = end - 60 * minutes
    step = max(1.0, (end - start) / 120)
    ux, uy = 49, 24
    fetched = []
    for p in dash["panels"]:
        series = []
        for tg in p.get("targets", []):
            expr = substitute(tg["expr"], vals)
            r = api(base, "/api/v1/query_range", {"query": expr, "start": start, "end": end,
                                                   "step": step})
            for res in r.get("data", {}).get("result", []) if r.get("status") == "success" else []:
                pts = [(float(t), float(v)) for t, v in res["values"]
                       if v not in ("NaN", "+Inf", "-Inf")]
                name = tg.get("legendFormat") or expr
                for k, lv in res["metric"].items():
                    name = name.replace("{{" + k + "}}", lv).replace("{{ " + k + " }}", lv)
                series.append((name, pts))
        fetched.append((p, series))
    # the time axis: from the first sample of any panel (a Prometheus that
    # started a minute ago has nothing before that) to now
    first = [pts[0][0] for _, ss in fetched for _, pts in ss if pts]
    t0 = min(first) if first else start
    t1 = end if end > t0 else t0 + 1
    height = max(pg["gridPos"]["y"] + pg["gridPos"]["h"] for pg in dash["panels"]) * uy + 40
    html = ["<!doctype html><meta charset=utf-8><title>" + esc(dash["title"]) + "</title>",
            "<body style='margin:0;background:#111217;font:12px sans-serif;color:#ccc'>",
            f"<div style='padding:6px 10px;font-size:15px'>{esc(dash['title'])} "
            f"<span style='color:#888'>(drawn from Prometheus by tests/docker/dashboard.py, "
            f"{t1 - t0:.0f} s of samples)</span></div>"
            f"<div style='position:relative;height:{height}px'>"]
    for p, series in fetched:
        g = p["gridPos"]
        w, h = g["w"] * ux - 6, g["h"] * uy - 6
        body = []
        if p.get("type") == "stat":
            for i, (name, pts) in enumerate(series[:4]):
                v = pts[-1][1] if pts else float("nan")
                body.append(f"<text x='{w / 2}' y='{h / 2 + 10 + 26 * i}' fill='{COLOURS[i]}' "
                            f"font-size='26' text-anchor='middle'>{v:.4g}</text>")
        else:
            allp = [pt for _, pts in series for pt in pts]
            if allp:
                lo = min(v for _, v in allp)
                hi = max(v for _, v in allp)
                hi = hi if hi > lo else lo + 1
                px, py, pw, ph = 40, 24, w - 50, h - 34
                for i, (name, pts) in enumerate(series[:6]):
                    c = COLOURS[i % len(COLOURS)]
                    xy = " ".join(f"{px + pw * (t - t0) / (t1 - t0):.1f},"
                                  f"{py + ph * (1 - (v - lo) / (hi - lo)):.1f}" for t, v in pts)
                    body.append(f"<polyline fill='none' stroke='{c}' stroke-width='1.5' "
                                f"points='{xy}'/>")
                    body.append(f"<text x='{px + 4}' y='{py + 12 + 12 * i}' fill='{c}' "
                                f"font-size='10'>{esc(name[:60])}</text>")
                body.append(f"<text x='2' y='{py + 8}' fill='#888' font-size='9'>{hi:.3g}</text>")
                body.append(f"<text x='2' y='{py + ph}' fill='#888' font-size='9'>{lo:.3g}</text>")
            else:
                body.append(f"<text x='{w / 2}' y='{h / 2}' fill='#888' "
                            "text-anchor='middle'>No data</text>")
        html.append(f"<svg style='position:absolute;left:{g['x'] * ux + 3}px;top:{g['y'] * uy + 3}px;"
                    f"background:#181b1f;border:1px solid #2c3235' width='{w}' height='{h}'>"
                    f"<text x='8' y='15' fill='#ddd' font-size='12'>{esc(p['title'])}</text>"
                    + "".join(body) + "</svg>")
    html.append("</div></body>")
    with open(out, "w") as f:
        f.write("\n".join(html))
    print(f"rendered {len(dash['panels'])} panels to {out}")
    return 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "check":
        dash = load(argv[1])
        check(dash, argv[2] if len(argv) > 2 else None)
        return 0
    if len(argv) >= 3 and argv[0] == "query":
        timeout, ri, absent = 180.0, "1m", None
        rest = argv[3:]
        while rest:
            if rest[0] == "--timeout" and len(rest) > 1:
                timeout = float(rest[1])
            elif rest[0] == "--rate-interval" and len(rest) > 1:
                ri = rest[1]
            elif rest[0] == "--absent" and len(rest) > 1:
                absent = rest[1]
            else:
                print(f"dashboard.py: unknown argument {rest[0]!r}")
                return 2
            rest = rest[2:]
        return query(load(argv[1]), argv[2].rstrip("/"), timeout, ri, absent)
    if len(argv) >= 4 and argv[0] == "render":
        minutes = float(argv[4]) if len(argv) > 4 else 5
        return render(load(argv[1]), argv[2].rstrip("/"), argv[3], minutes, "1m")
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
