"""Words and JSON of ``servetrace simulate``: what it wrote, and whether the workload
saturates the engine model (``servetrace.sim.capacity``)."""

from __future__ import annotations

import json
from typing import Any

from servetrace.render._json import VERSIONS, clean
from servetrace.sim.capacity import OfferedLoad

# The share of the engine's capacity a replay slowed by the suggested --speed offers.
_TARGET = 0.8


def saturation_warning(load: OfferedLoad, speed: float) -> str | None:
    """Why the queue of this replay measures a backlog, with what to change; None when
    the engine keeps up."""
    if not load.saturated:
        return None
    rate, work, cap, util = (
        load.arrival_rate_per_s,
        load.work_s,
        load.capacity_per_s,
        load.utilisation,
    )
    assert rate is not None and work is not None and cap is not None and util is not None
    return (
        f"the workload offers {rate:.2f} req/s, each needing at least {work * 1000:.0f} ms of "
        f"engine time: {util:.0%} of what the modelled engine can serve (at most {cap:.2f} "
        "req/s, at its best batching), so its queue grows while the arrivals last and queue "
        "wait measures that backlog; replay it slower "
        f"(--speed {speed * _TARGET / util:.2f}) or give the engine more room "
        "(--max-running, --kv-blocks)"
    )


def offered_load_dict(load: OfferedLoad, speed: float) -> dict[str, Any]:
    work = load.work_s
    return {
        "requests": load.requests,
        "arrival_rate_per_s": load.arrival_rate_per_s,
        "work_ms": None if work is None else work * 1000,
        "batch_limit": load.batch_limit,
        "capacity_requests_per_s": load.capacity_per_s,
        "utilisation": load.utilisation,
        "saturated": load.saturated,
        "warning": saturation_warning(load, speed),
    }


def simulate_json(
    *, output: str, events: int, policy: str, seed: int, load: OfferedLoad, speed: float
) -> str:
    report = {
        **VERSIONS,
        "output": output,
        "events": events,
        "requests": load.requests,
        "policy": policy,
        "seed": seed,
        "offered_load": offered_load_dict(load, speed),
    }
    return json.dumps(clean(report), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
