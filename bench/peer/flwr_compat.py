"""Makes Flower 1.10.0 (src/py of its git tag) import on Debian bookworm's
python3 packages alone. Imported by flower_peer.py before flwr; two things,
nothing of Flower's own code is changed:

1. `Crypto`: Flower imports PyCryptodome as `Crypto` (only for SecAgg+'s
   Shamir sharing, which this benchmark does not use, but flwr.client's
   package __init__ imports it). Debian's python3-pycryptodome ships the same
   library (3.11.0) under the name `Cryptodome`; the names are aliased.
2. `iterators` (PyPI "iterators" 0.0.2, not packaged by Debian): its one
   class TimeoutIterator is used by the grpc-bidi server's Join stream. The
   class below is a local stand-in with the same behaviour: a reader thread
   per stream fills a queue, next() waits at most `timeout` seconds (0: no
   limit) and returns the sentinel when the wait runs out; reset_on_next sets
   the timeout back to 0 after each next().
"""
import importlib
import queue
import sys
import threading
import types


def _alias_crypto():
    if "Crypto" in sys.modules:
        return
    try:
        importlib.import_module("Crypto")
        return
    except ImportError:
        pass
    cd = importlib.import_module("Cryptodome")
    sys.modules["Crypto"] = cd
    for sub in ("Protocol", "Protocol.SecretSharing", "Util", "Util.Padding"):
        sys.modules["Crypto." + sub] = importlib.import_module("Cryptodome." + sub)


class TimeoutIterator:
    _DONE = object()

    def __init__(self, iterator, timeout=0.0, sentinel=object(), reset_on_next=False):
        self._iterator = iterator
        self._timeout = timeout
        self._sentinel = sentinel
        self._reset_on_next = reset_on_next
        self._interrupt = False
        self._done = False
        self._buffer = queue.Queue()
        self._thread = threading.Thread(target=self._lookahead, daemon=True)
        self._thread.start()

    def get_sentinel(self):
        return self._sentinel

    def set_reset_on_next(self, reset_on_next):
        self._reset_on_next = reset_on_next

    def set_timeout(self, timeout):
        self._timeout = timeout

    def interrupt(self):
        self._interrupt = True

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        data = self._sentinel
        try:
            if self._timeout:
                data = self._buffer.get(timeout=self._timeout)
            else:
                data = self._buffer.get()
        except queue.Empty:
            pass
        finally:
            if self._reset_on_next:
                self._timeout = 0.0
        if data is TimeoutIterator._DONE:
            self._done = True
            raise StopIteration
        if isinstance(data, BaseException):
            self._done = True
            raise data
        return data

    def _lookahead(self):
        try:
            for data in self._iterator:
                self._buffer.put(data)
                if self._interrupt:
                    break
            self._buffer.put(TimeoutIterator._DONE)
        except BaseException as e:  # the stream's error goes to the reader
            self._buffer.put(e)


def _iterators_stand_in():
    try:
        importlib.import_module("iterators")
        return
    except ImportError:
        pass
    m = types.ModuleType("iterators")
    m.TimeoutIterator = TimeoutIterator
    m.__doc__ = "bench/peer/flwr_compat.py's stand-in for PyPI iterators 0.0.2"
    sys.modules["iterators"] = m


_alias_crypto()
_iterators_stand_in()
