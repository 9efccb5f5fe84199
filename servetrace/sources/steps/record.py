"""Recording an engine's ZMQ step publisher to a file (``servetrace record-steps``).

vLLM publishes one ``ForwardPassMetrics`` message per forward pass on a ZMQ PUB socket
(``--forward-pass-metrics-port``, one port per data-parallel rank; see `forward_pass`).
The recorder subscribes to everything, stamps each message with the time it arrived
(``time.time_ns()``, the one clock the messages lack) and writes the frames as they came.

The file is a MessagePack stream: a header map ``{"format": "servetrace-zmq-record",
"version": 1, "address": …, "started_ns": …}``, then one array per message,
``[received_ns, [frame, …]]``, each frame the bytes as published. Each message is
flushed as it is written, so an interrupted recording keeps every message received.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from servetrace.errors import InputError, UsageError, unwritable

RECORD_FORMAT = "servetrace-zmq-record"
RECORD_VERSION = 1
# How long the publisher's port gets to accept a connection before it counts as absent.
CONNECT_TIMEOUT_S = 5.0
# How often a recording bounded only by count wakes to notice Ctrl-C and its deadline.
_POLL_MS = 200


def require_extra(what: str, *modules: str) -> None:
    """Exit 2 with the install line when ``what`` needs a module of the steps extra."""
    missing = []
    for module in modules:
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise UsageError(
            f"{what} needs {', '.join(missing)}, which is not installed",
            hint="pip install 'servetrace[steps]'",
        )


@dataclass(frozen=True)
class Recording:
    """What a recording wrote: how many messages, and why it stopped."""

    messages: int
    stopped: str


def check_address(address: str) -> None:
    """Refuse an address that is malformed or has no listener (exit 3, one line)."""
    parts = urlsplit(address)
    if parts.scheme == "tcp":
        host = parts.hostname
        try:
            port = parts.port
        except ValueError:  # not a number, or out of range
            port = None
        if not host or port is None or host == "*":
            raise InputError(
                f"{address}: not a publisher address: expected tcp://HOST:PORT",
                hint="vLLM binds tcp://*:PORT; record from tcp://127.0.0.1:PORT",
            )
        try:
            with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
                pass
        except OSError as error:
            raise InputError(
                f"{address}: no publisher reachable: {error.strerror or error}",
                hint="is the engine running with its step publisher on that port?",
            ) from None
    elif parts.scheme == "ipc":
        where = Path(parts.netloc + parts.path)
        if not where.exists():
            raise InputError(f"{address}: no publisher: {where} does not exist")
    else:
        raise InputError(
            f"{address}: not a publisher address: expected tcp://HOST:PORT or ipc://PATH"
        )


def record(
    address: str, output: Path, seconds: float | None = None, count: int | None = None
) -> Recording:
    """Subscribe to ``address`` and write what arrives to ``output`` until ``seconds``
    have passed or ``count`` messages arrived (or Ctrl-C)."""
    require_extra("record-steps", "msgpack", "zmq")
    import msgpack
    import zmq

    check_address(address)
    context = zmq.Context()
    subscriber = context.socket(zmq.SUB)
    subscriber.setsockopt(zmq.LINGER, 0)
    try:
        subscriber.connect(address)
    except zmq.ZMQError as error:
        subscriber.close()
        context.term()
        raise InputError(f"{address}: not a publisher address: {error}") from None
    subscriber.setsockopt(zmq.SUBSCRIBE, b"")
    deadline = None if seconds is None else time.monotonic() + seconds
    received = 0
    stopped = "time" if seconds is not None else "count"
    try:
        out = output.open("wb")
    except OSError as error:
        subscriber.close()
        context.term()
        raise unwritable(f"--output {output}", error) from None
    try:
        header = {
            "format": RECORD_FORMAT,
            "version": RECORD_VERSION,
            "address": address,
            "started_ns": time.time_ns(),
        }
        out.write(msgpack.packb(header))
        out.flush()
        while count is None or received < count:
            wait = _POLL_MS
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                wait = min(wait, max(1, int(left * 1000)))
            if not subscriber.poll(wait):
                continue
            frames = subscriber.recv_multipart()
            out.write(msgpack.packb([time.time_ns(), frames]))
            out.flush()
            received += 1
        else:
            stopped = "count"
    except KeyboardInterrupt:
        stopped = "interrupted"
    except OSError as error:
        raise unwritable(f"--output {output}", error) from None
    finally:
        out.close()
        subscriber.close()
        context.term()
    return Recording(messages=received, stopped=stopped)
