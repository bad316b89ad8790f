#!/usr/bin/python3
"""The way out of make test-docker's private network namespace, for apt only.

    netns-proxy.py NETNS_PATH     (root; prints the port, then serves)

The private engine of tests/docker/compose.sh runs in a network namespace of
its own (loopback only), so the host's firewall never sees its containers'
traffic. `docker build --network host` (in that namespace) still needs
Debian's archive: this HTTP proxy listens on 127.0.0.1:PORT *inside* NETNS_PATH
and opens its upstream connections in the namespace it was started in (the
host's). Plain http:// requests only (what apt sends to a proxy: the request
line carries the absolute URI, which origin servers accept as it is); the
bytes are relayed unchanged. It exits with its parent (PR_SET_PDEATHSIG).
"""
import ctypes
import os
import select
import signal
import socket
import sys
import threading

CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
MAX_HEAD = 8192  # a request line longer than this is refused

libc = ctypes.CDLL(None, use_errno=True)


def setns(fd):
    if libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "setns: " + os.strerror(e))


def relay(a, b):
    """Copies both ways until either side closes."""
    socks = [a, b]
    while True:
        r, _, _ = select.select(socks, [], [], 300)
        if not r:
            return
        for s in r:
            d = s.recv(65536)
            if not d:
                return
            (b if s is a else a).sendall(d)


def serve(c):
    up = None
    try:
        c.settimeout(30)
        head = b""
        while b"\r\n" not in head:
            d = c.recv(4096)
            if not d:
                return
            head += d
            if len(head) > MAX_HEAD:
                c.sendall(b"HTTP/1.1 414 URI Too Long\r\nConnection: close\r\n\r\n")
                return
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split(" ")
        if len(parts) != 3 or not parts[1].startswith("http://"):
            c.sendall(b"HTTP/1.1 405 Only http:// GET\r\nConnection: close\r\n\r\n")
            return
        hostport = parts[1][len("http://"):].split("/", 1)[0]
        host, _, port = hostport.partition(":")
        port = int(port) if port.isdigit() and 0 < int(port) < 65536 else 80
        up = socket.create_connection((host, port), timeout=30)
        up.sendall(head)
        c.settimeout(None)
        up.settimeout(None)
        relay(c, up)
    except OSError as e:
        print(f"netns-proxy: {e}", file=sys.stderr, flush=True)
    finally:
        c.close()
        if up is not None:
            up.close()


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: netns-proxy.py NETNS_PATH")
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() == 1:  # the parent went before the prctl
        sys.exit(1)
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(sys.argv[1], os.O_RDONLY)
    # Single-threaded here: the listening socket belongs to the target
    # namespace, every later socket (upstream) to ours.
    setns(target)
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    setns(home)
    os.close(target)
    os.close(home)
    print(ls.getsockname()[1], flush=True)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


if __name__ == "__main__":
    main()
