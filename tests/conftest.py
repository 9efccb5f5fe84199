"""Builders that write request lifecycles in one line, in milliseconds.

``make_request("r1", arrival=0, admission=30, first=80, ticks=[85, 90], complete=90)``
gives the canonical event rows of one request; ``events(...)`` turns rows into a frame.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import polars as pl
import pytest

MS = 1_000_000

Row = dict[str, Any]


def make_request(
    rid: str | int,
    *,
    arrival: float | None = 0,
    admission: float | Sequence[float] | None = None,
    first: float | None = None,
    ticks: Iterable[float] = (),
    tokens: Sequence[int] | None = None,
    preempt: Sequence[float] = (),
    complete: float | None = None,
    cancel: float | None = None,
    release: float | None = None,
    prompt_tokens: int | None = None,
    output_tokens: int | None = None,
    **attributes: Any,
) -> list[Row]:
    """Event rows of one request; times in ms, stored as integer ns."""
    rows: list[Row] = []

    def add(event: str, t: float, **extra: Any) -> None:
        rows.append({"request_id": rid, "event": event, "ts": round(t * MS), **extra})

    if arrival is not None:
        add("arrival", arrival, prompt_tokens=prompt_tokens, **attributes)
    admissions = [admission] if isinstance(admission, (int, float)) else list(admission or [])
    for t in admissions:
        add("admission", t)
    for t in preempt:
        add("preemption", t)
    tick_times = ([first] if first is not None else []) + list(ticks)
    chunk = list(tokens) if tokens is not None else [1] * len(tick_times)
    for i, t in enumerate(tick_times):
        kind = "first_token" if i == 0 and first is not None else "token"
        add(kind, t, tokens=chunk[i])
    if complete is not None:
        add("completion", complete, output_tokens=output_tokens)
    if cancel is not None:
        add("cancellation", cancel)
    if release is not None:
        add("release", release)
    return rows


SCHEMA = {
    "request_id": pl.String,
    "event": pl.String,
    "ts": pl.Int64,
    "tokens": pl.Int64,
    "prompt_tokens": pl.Int64,
    "output_tokens": pl.Int64,
}


def events(*requests: list[Row], id_type: type[pl.DataType] = pl.String) -> pl.DataFrame:
    rows = [row for request in requests for row in request]
    extra = sorted({k for row in rows for k in row} - set(SCHEMA))
    schema = {**SCHEMA, "request_id": id_type, **{k: pl.String for k in extra}}
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def worked_example_rows() -> list[Row]:
    """The lesson's worked example: arrival 0, admission 30, first token 80, then 100
    tokens 5 ms apart (last at 580 ms)."""
    return make_request(
        "r1",
        arrival=0,
        admission=30,
        first=80,
        ticks=[80 + 5 * i for i in range(1, 101)],
        complete=580,
        prompt_tokens=512,
        output_tokens=101,
    )


@pytest.fixture
def worked_example() -> pl.DataFrame:
    return events(worked_example_rows())


# ----------------------------------------------------------------- what the default run skips
# A test that needs one of these fixtures gets its marker, and every such test is ``slow``:
# the default ``pytest`` deselects them (``-m "not slow"`` in pyproject.toml) and CI runs
# them with ``pytest -m slow``. Keyed on fixtures so a new Ray, S3 or browser test is
# marked without anyone remembering to.
MARKER_OF_FIXTURE = {
    "ray_session": "ray",
    "s3_server": "objectstore",
    "browser": "browser",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        for fixture, marker in MARKER_OF_FIXTURE.items():
            if fixture in fixtures:
                item.add_marker(marker)
        if any(item.get_closest_marker(m) for m in {*MARKER_OF_FIXTURE.values(), "slow"}):
            item.add_marker("slow")


# ----------------------------------------------------------------- a local object store
class S3:
    """A moto S3 server on 127.0.0.1 (one per session) and how a user points at it."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.buckets = 0

    @property
    def env(self) -> dict[str, str]:
        # What a MinIO/Ceph/moto user sets: the standard AWS variables, nothing of ours.
        # AWS_EC2_METADATA_DISABLED: never ask an instance-metadata address for credentials.
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "servetrace-test",
            "AWS_SECRET_ACCESS_KEY": "servetrace-test",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_MAX_ATTEMPTS": "1",
        }

    def bucket(self) -> str:
        """A new, empty bucket (tests never share one)."""
        import boto3

        self.buckets += 1
        name = f"bucket-{self.buckets}"
        client = boto3.client("s3", endpoint_url=self.endpoint, **self._keys())
        client.create_bucket(Bucket=name)
        return name

    def _keys(self) -> dict[str, str]:
        env = self.env
        return {
            "aws_access_key_id": env["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
            "region_name": env["AWS_DEFAULT_REGION"],
        }

    def put(self, local: Any, uri: str) -> None:
        """Upload a local file to ``s3://bucket/key``."""
        import boto3

        bucket, _, key = uri.removeprefix("s3://").partition("/")
        client = boto3.client("s3", endpoint_url=self.endpoint, **self._keys())
        client.upload_file(str(local), bucket, key)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        import boto3

        client = boto3.client("s3", endpoint_url=self.endpoint, **self._keys())
        listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"] for o in listed.get("Contents", []))

    def get(self, uri: str, local: Any) -> None:
        import boto3

        bucket, _, key = uri.removeprefix("s3://").partition("/")
        client = boto3.client("s3", endpoint_url=self.endpoint, **self._keys())
        client.download_file(bucket, key, str(local))


@pytest.fixture(scope="session")
def s3_server() -> Any:
    """moto's S3 on a free loopback port, for the whole session (skips without moto)."""
    import logging
    import socket

    server_module = pytest.importorskip("moto.server")
    pytest.importorskip("boto3")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield S3(f"http://127.0.0.1:{port}")
    server.stop()


@pytest.fixture
def s3(s3_server: S3, monkeypatch: pytest.MonkeyPatch) -> S3:
    """The session's S3, with this test's environment pointing at it (AWS_ENDPOINT_URL…)."""
    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    return s3_server
