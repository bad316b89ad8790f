#!/usr/bin/python3
"""Checks deploy/k8s/ without a cluster (tests/e2e/k8s.sh runs it).

Every manifest must parse (python3-yaml) and everything it names must
exist: the Secrets and their keys (made by deploy/k8s/secrets.sh: read from
its `secret NAME TYPE KEY=FILE...` lines), ConfigMaps and their keys,
Services (a StatefulSet's serviceName, the host names in the coordinator
configs: NAME.NS.svc and POD.NAME.NS.svc with POD an ordinal of the
StatefulSet behind NAME), named ports, volumes; selectors of Services and
PodDisruptionBudgets must select a workload, and a workload's selector
its own pods; every container has an image, resource requests and
readiness and liveness probes; everything is in one namespace.

    tests/k8s/check.py [DIR]     (default deploy/k8s)

One line per problem, "FAIL file: what"; the last line is "ok: ..." or
"N problems". Exit 0 or 1.
"""
import os
import re
import sys

import yaml

d = sys.argv[1] if len(sys.argv) > 1 else "deploy/k8s"
problems = []


def fail(where, what):
    problems.append(f"FAIL {where}: {what}")


objs = []  # (file, obj)
for f in sorted(os.listdir(d)):
    if not f.endswith((".yaml", ".yml")):
        continue
    try:
        with open(os.path.join(d, f)) as fh:
            for o in yaml.safe_load_all(fh):
                if o is None:
                    continue
                if not isinstance(o, dict) or "kind" not in o or "apiVersion" not in o:
                    fail(f, "a document without kind/apiVersion")
                    continue
                objs.append((f, o))
    except yaml.YAMLError as e:
        fail(f, f"does not parse: {e}")
if not objs:
    fail(d, "no manifests")

# Secrets: those secrets.sh prints.
secrets = {}
sp = os.path.join(d, "secrets.sh")
if os.path.exists(sp):
    for line in open(sp):
        m = re.match(r"^secret (\S+) (\S+) (.*)$", line.strip())
        if m:
            secrets[m.group(1)] = set(re.findall(r'"([A-Za-z0-9._-]+)=', m.group(3)))
else:
    fail(d, "no secrets.sh")

by_kind = {}
for f, o in objs:
    md = o.get("metadata") or {}
    name = md.get("name")
    if not name:
        fail(f, f"a {o['kind']} without metadata.name")
        continue
    by_kind.setdefault(o["kind"], {})[name] = (f, o)
    if o["kind"] == "Secret":
        secrets[name] = set((o.get("data") or {}).keys()) | set((o.get("stringData") or {}).keys())

namespaces = set(by_kind.get("Namespace", {}))
ns_used = set()
for f, o in objs:
    if o["kind"] != "Namespace":
        ns = (o.get("metadata") or {}).get("namespace")
        if not ns:
            fail(f, f"{o['kind']} {o['metadata'].get('name')} has no namespace")
        else:
            ns_used.add(ns)
if len(ns_used) > 1:
    fail(d, f"more than one namespace: {sorted(ns_used)}")
for ns in ns_used - namespaces:
    fail(d, f"namespace {ns} is used but no Namespace manifest makes it")
NS = next(iter(ns_used)) if ns_used else "sfl"

configmaps = {n: set((o.get("data") or {}).keys()) for n, (f, o) in by_kind.get("ConfigMap", {}).items()}
services = by_kind.get("Service", {})
workloads = {}
for kind in ("Deployment", "StatefulSet", "DaemonSet"):
    for n, (f, o) in by_kind.get(kind, {}).items():
        workloads[n] = (kind, f, o)


def subset(sel, labels):
    return bool(sel) and all(labels.get(k) == v for k, v in sel.items())


def pod_labels(o):
    return ((o["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}


def need_secret(where, name, keys=()):
    if name not in secrets:
        fail(where, f"Secret {name} does not exist (not made by secrets.sh)")
        return
    for k in keys:
        if k not in secrets[name]:
            fail(where, f"Secret {name} has no key {k} (it has {sorted(secrets[name])})")


def need_cm(where, name, keys=()):
    if name not in configmaps:
        fail(where, f"ConfigMap {name} does not exist")
        return
    for k in keys:
        if k not in configmaps[name]:
            fail(where, f"ConfigMap {name} has no key {k}")


def items_keys(src):
    return [i["key"] for i in src.get("items") or []]


container_ports = {}  # workload -> set of port names
for n, (kind, f, o) in workloads.items():
    w = f"{f} {kind} {n}"
    spec = o["spec"]
    sel = (spec.get("selector") or {}).get("matchLabels") or {}
    if not subset(sel, pod_labels(o)):
        fail(w, f"selector {sel} does not select its own pods {pod_labels(o)}")
    if kind == "StatefulSet":
        sn = spec.get("serviceName")
        if sn not in services:
            fail(w, f"serviceName {sn} is not a Service")
    pspec = spec["template"]["spec"]
    vols = {}
    for v in pspec.get("volumes") or []:
        vols[v["name"]] = v
        if "secret" in v:
            need_secret(w, v["secret"].get("secretName"), items_keys(v["secret"]))
        if "configMap" in v:
            need_cm(w, v["configMap"].get("name"), items_keys(v["configMap"]))
        for src in (v.get("projected") or {}).get("sources") or []:
            if "secret" in src:
                need_secret(w, src["secret"].get("name"), items_keys(src["secret"]))
            if "configMap" in src:
                need_cm(w, src["configMap"].get("name"), items_keys(src["configMap"]))
    claims = {c["metadata"]["name"] for c in spec.get("volumeClaimTemplates") or []}
    names = set()
    for c in (pspec.get("initContainers") or []) + pspec.get("containers", []):
        cw = f"{w} container {c.get('name')}"
        if not c.get("image"):
            fail(cw, "no image")
        ports = {p.get("name") for p in c.get("ports") or [] if p.get("name")}
        names |= ports
        if not ((c.get("resources") or {}).get("requests")):
            fail(cw, "no resource requests")
        for probe in ("readinessProbe", "livenessProbe"):
            p = c.get(probe)
            if not p:
                fail(cw, f"no {probe}")
                continue
            for how in ("tcpSocket", "httpGet", "grpc"):
                port = (p.get(how) or {}).get("port")
                if isinstance(port, str) and port not in ports:
                    fail(cw, f"{probe} names port {port}, not a port of the container")
        mounts = {}
        for m in c.get("volumeMounts") or []:
            if m["name"] not in vols and m["name"] not in claims:
                fail(cw, f"volumeMount {m['name']} is no volume")
            mounts[m["mountPath"]] = m["name"]
        for e in c.get("env") or []:
            ref = (e.get("valueFrom") or {})
            if "secretKeyRef" in ref:
                need_secret(cw, ref["secretKeyRef"]["name"], [ref["secretKeyRef"]["key"]])
            if "configMapKeyRef" in ref:
                need_cm(cw, ref["configMapKeyRef"]["name"], [ref["configMapKeyRef"]["key"]])
            if e.get("name") == "SFL_COORDINATOR_INI":
                path = e.get("value", "")
                v = vols.get(mounts.get(os.path.dirname(path), ""), {})
                cm = (v.get("configMap") or {}).get("name")
                if not cm or os.path.basename(path) not in configmaps.get(cm, ()):
                    fail(cw, f"SFL_COORDINATOR_INI={path} is not a key of a mounted ConfigMap")
    container_ports[n] = names


def selected(sel):
    return [n for n, (k, f, o) in workloads.items() if subset(sel, pod_labels(o))]


for n, (f, o) in services.items():
    w = f"{f} Service {n}"
    sel = o["spec"].get("selector") or {}
    hit = selected(sel)
    if not hit:
        fail(w, f"selector {sel} selects no workload")
    for p in o["spec"].get("ports") or []:
        tp = p.get("targetPort")
        if isinstance(tp, str) and not any(tp in container_ports.get(h, ()) for h in hit):
            fail(w, f"targetPort {tp} is not a port of {hit}")
        if p.get("protocol", "TCP") != "TCP":
            fail(w, "not TCP")
for n, (f, o) in by_kind.get("PodDisruptionBudget", {}).items():
    sel = (o["spec"].get("selector") or {}).get("matchLabels") or {}
    if not selected(sel):
        fail(f"{f} PodDisruptionBudget {n}", f"selector {sel} selects no workload")


def check_host(where, host):
    parts = host.split(".")
    if len(parts) < 3 or parts[-1] != "svc" or parts[-2] != NS:
        fail(where, f"host {host} is not NAME.{NS}.svc or POD.NAME.{NS}.svc")
        return
    svc = parts[-3]
    if svc not in services:
        fail(where, f"host {host}: no Service {svc}")
        return
    if len(parts) == 4:
        pod = parts[0]
        sts = [(n, o) for n, (k, f, o) in workloads.items()
               if k == "StatefulSet" and o["spec"].get("serviceName") == svc]
        ok = any(pod.startswith(n + "-") and pod[len(n) + 1:].isdigit()
                 and int(pod[len(n) + 1:]) < o["spec"].get("replicas", 1) for n, o in sts)
        if not ok:
            fail(where, f"host {host}: {pod} is no pod of a StatefulSet behind Service {svc}")


# Host names in the coordinator configs: master = H:P,... and the store's host=.
for n, (f, o) in by_kind.get("ConfigMap", {}).items():
    for k, text in (o.get("data") or {}).items():
        if not k.endswith(".ini"):
            continue
        w = f"{f} ConfigMap {n} {k}"
        for line in text.splitlines():
            m = re.match(r"^\s*master\s*=\s*(.*)$", line)
            if m:
                for hp in m.group(1).split(","):
                    check_host(w, hp.strip().rsplit(":", 1)[0])
            m = re.match(r"^\s*store\s*=\s*postgresql:(.*)$", line)
            if m:
                h = re.search(r"\bhost=(\S+)", m.group(1))
                if not h:
                    fail(w, "store = postgresql: without host=")
                else:
                    check_host(w, h.group(1))
                if "password=" in m.group(1):
                    fail(w, "a password in the ConfigMap (use PGPASSWORD from a Secret)")

for p in problems:
    print(p)
if problems:
    print(f"{len(problems)} problems")
    sys.exit(1)
print(f"ok: {len(objs)} objects in {d}, {len(secrets)} Secrets from secrets.sh, "
      f"{len(workloads)} workloads, {len(services)} Services: every name they use exists")
