"""``servetrace record-steps`` against a real ZMQ PUB socket in a thread, publishing as
vLLM's ``ZmqForwardPassMetricsPublisher`` does (three frames: empty, 8-byte sequence,
MessagePack ``ForwardPassMetrics``): the recording stops at --count and the
``forward-pass`` importer reads it back; a bad or unreachable address is exit 3 in one
line."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest
import zmq
from typer.testing import CliRunner

from servetrace.cli import app
from servetrace.sources.steps.formats import read_steps

runner = CliRunner()


def _message(counter: int) -> list[bytes]:
    payload = {
        "version": 1,
        "worker_id": "w",
        "dp_rank": 1,
        "counter_id": counter,
        "timing_scope": "execute_model_cuda",
        "wall_time": 0.001 * (counter + 1),
        "scheduled_requests": {"num_decode_requests": counter + 1},
        "queued_requests": {"num_prefill_requests": 2},
    }
    return [b"", counter.to_bytes(8, "big"), msgpack.packb(payload)]


@pytest.fixture
def publisher() -> Iterator[str]:
    """A PUB socket publishing one message every 5 ms until the test ends."""
    context = zmq.Context()
    socket = context.socket(zmq.PUB)
    socket.bind("tcp://127.0.0.1:*")
    address = socket.getsockopt_string(zmq.LAST_ENDPOINT)
    stop = threading.Event()

    def run() -> None:
        counter = 0
        while not stop.wait(0.005):
            socket.send_multipart(_message(counter))
            counter += 1

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield address
    stop.set()
    thread.join(timeout=5)
    socket.close(linger=0)
    context.term()


def test_recording_stops_at_count_and_reads_back_as_steps(publisher: str, tmp_path: Path) -> None:
    out = tmp_path / "steps.fpm"
    done = runner.invoke(app, ["record-steps", publisher, "-o", str(out), "--count", "3"])
    assert done.exit_code == 0, done.stderr
    assert done.stderr.strip() == f"wrote {out}: 3 messages from {publisher} (count reached)"
    steps = read_steps(out, "forward-pass").frame
    assert steps.height == 3
    # A subscriber joins late (ZMQ drops what was sent before): consecutive messages.
    first = steps["step"][0]
    assert steps["step"].to_list() == [first, first + 1, first + 2]
    assert steps["replica"].to_list() == ["1"] * 3
    durations = (steps["ts_end"] - steps["ts_start"]).to_list()
    assert durations == [1_000_000 * (s + 1) for s in steps["step"].to_list()]
    assert steps["decode_requests"].to_list() == [s + 1 for s in steps["step"].to_list()]
    assert steps["queued_requests"].to_list() == [2, 2, 2]
    assert steps["ts_end"].is_sorted()


def test_recording_bounded_by_time_keeps_what_arrived(publisher: str, tmp_path: Path) -> None:
    out = tmp_path / "steps.fpm"
    done = runner.invoke(app, ["record-steps", publisher, "-o", str(out), "--seconds", "0.3"])
    assert done.exit_code == 0, done.stderr
    assert done.stderr.strip().endswith("(time is up)")
    assert read_steps(out, "forward-pass").frame.height >= 1


def test_unreachable_address_is_exit_3_in_one_line(tmp_path: Path) -> None:
    with zmq.Context() as context, context.socket(zmq.PUB) as socket:
        socket.bind("tcp://127.0.0.1:*")
        address = socket.getsockopt_string(zmq.LAST_ENDPOINT)
    # The port was just released: nothing listens on it now.
    done = runner.invoke(app, ["record-steps", address, "-o", str(tmp_path / "x"), "--count", "1"])
    assert done.exit_code == 3
    first, *rest = done.stderr.splitlines()
    assert first.startswith(f"error: {address}: no publisher reachable")
    assert all(line.startswith("hint:") for line in rest)
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("address", ["localhost:5600", "tcp://127.0.0.1", "tcp://*:5600"])
def test_malformed_address_is_exit_3(address: str, tmp_path: Path) -> None:
    done = runner.invoke(app, ["record-steps", address, "-o", str(tmp_path / "x"), "--count", "1"])
    assert done.exit_code == 3
    assert done.stderr.startswith(f"error: {address}: not a publisher address")


def test_a_recording_needs_a_bound(tmp_path: Path) -> None:
    done = runner.invoke(app, ["record-steps", "tcp://127.0.0.1:9", "-o", str(tmp_path / "x")])
    assert done.exit_code == 2
    assert "give --seconds or --count" in done.stderr


def test_ctrl_c_keeps_what_was_received(
    publisher: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from servetrace.sources.steps.record import record

    original = zmq.Socket.recv_multipart
    calls = []

    def interrupted_after_two(self: zmq.Socket, *args: object, **kwargs: object) -> list[bytes]:
        calls.append(1)
        if len(calls) > 2:
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(zmq.Socket, "recv_multipart", interrupted_after_two)
    out = tmp_path / "steps.fpm"
    done = record(publisher, out, count=10)
    assert (done.messages, done.stopped) == (2, "interrupted")
    assert read_steps(out, "forward-pass").frame.height == 2


def test_output_in_a_missing_folder_is_exit_2(publisher: str, tmp_path: Path) -> None:
    out = tmp_path / "missing" / "steps.fpm"
    done = runner.invoke(app, ["record-steps", publisher, "-o", str(out), "--count", "1"])
    assert done.exit_code == 2
    assert done.stderr.strip() == f"error: --output {out}: cannot write: No such file or directory"
