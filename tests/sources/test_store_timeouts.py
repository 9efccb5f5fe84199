"""An object store that cannot be reached fails in seconds, with exit 3 and one line
naming the URI: a ``gs://`` URI without network used to retry for minutes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from servetrace.sources import objectstore

ROOT = Path(__file__).parents[2]
# The CLI with GCS retries cut to a second, so the test is quick; the default is small too.
DRIVER = (
    "from servetrace.sources import objectstore\n"
    "objectstore.GCS_RETRY_LIMIT_S = 1\n"
    "from servetrace.cli import main\n"
    "main()\n"
)


def _options(uri: str) -> dict[str, object]:
    store, _ = objectstore.filesystem(uri)
    return dict(store.__reduce__()[1][0])


def test_gcs_retries_are_bounded_unless_the_uri_says_otherwise() -> None:
    limit = timedelta(seconds=objectstore.GCS_RETRY_LIMIT_S)
    assert _options("gs://bucket/trace.parquet")["retry_time_limit"] == limit
    given = _options("gs://bucket/trace.parquet?retry_limit_seconds=30")
    assert given["retry_time_limit"] == timedelta(seconds=30)


def test_s3_connections_have_a_timeout() -> None:
    uri = "s3://bucket/trace.parquet?region=us-east-1"
    assert _options(uri)["connect_timeout"] == objectstore.CONNECT_TIMEOUT_S


def _analyze(uri: str, **env_vars: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GCE_"))}
    env.update(PYTHONPATH=str(ROOT), **env_vars)
    return subprocess.run(
        [sys.executable, "-c", DRIVER, "analyze", uri],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def _one_line(done: subprocess.CompletedProcess[str], uri: str) -> str:
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    first = done.stderr.strip().splitlines()[0]
    assert first.startswith(f"error: {uri}: "), first
    return first


def test_unusable_gcs_credentials_are_one_line(tmp_path: Path) -> None:
    uri = "gs://servetrace-no-such-bucket/trace.parquet"
    done = _analyze(uri, GOOGLE_APPLICATION_CREDENTIALS=str(tmp_path / "none.json"))
    assert "no credentials for the store" in _one_line(done, uri)


@pytest.mark.slow
def test_an_unreachable_gcs_store_fails_in_seconds_naming_the_uri() -> None:
    uri = "gs://servetrace-no-such-bucket/trace.parquet"
    started = time.monotonic()
    done = _analyze(uri)
    assert time.monotonic() - started < 20
    _one_line(done, uri)


def test_unusable_azure_credentials_are_one_line_in_words() -> None:
    uri = "abfs://container@servetracenosuchaccount.dfs.core.windows.net/trace.parquet"
    done = _analyze(uri, AZURE_STORAGE_ACCOUNT_KEY="")
    assert done.returncode == 3, done.stderr
    # the Azure SDK's credential chain shells out to `az`, whose shell may complain first
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert line.startswith(f"error: {uri}: ")
    assert "no credentials for the store" in line
    assert "N5Azure" not in line
