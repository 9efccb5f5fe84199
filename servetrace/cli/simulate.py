"""``servetrace simulate``: a seeded continuous-batching engine model writing a trace."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from servetrace.analysis.server_engines import EngineName
from servetrace.cli._app import app, emit, err_console, examples, guarded, warn
from servetrace.cli._options import COUNT, DURATION_MS, FRACTION, POSITIVE, SEED, in_range
from servetrace.render.formats import SimulateFormat
from servetrace.sim.config import EngineConfig, Policy
from servetrace.units import NS_PER_MS as MS


@app.command(
    "simulate",
    epilog=examples(
        "servetrace simulate -o trace.parquet",
        "servetrace simulate --policy chunked --requests 2000 --rate 8 -o chunked.parquet",
        "servetrace simulate --workload azure_conv.csv --limit 5000 -o azure.parquet",
        "servetrace simulate --workload azure_conv.csv --speed 0.8 -o azure.parquet -f json",
    ),
)
@guarded
def simulate_command(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Trace to write (.parquet, .csv, …).")
    ],
    policy: Annotated[Policy, typer.Option(help="Scheduler.")] = Policy.FCFS,
    workload: Annotated[
        Path | None,
        typer.Option(
            help="Replay a workload: Azure LLM 2023 CSV, Mooncake JSONL, or a "
            "table with arrival_ns, prompt_tokens, output_tokens."
        ),
    ] = None,
    requests: Annotated[
        int,
        typer.Option(help="Synthetic workload: number of requests.", callback=in_range(0, 10**9)),
    ] = 1000,
    rate: Annotated[
        float,
        typer.Option(help="Synthetic workload: mean arrivals per second.", callback=POSITIVE),
    ] = 4.0,
    burstiness: Annotated[
        float,
        typer.Option(help="Gamma shape of inter-arrival times (1 = Poisson).", callback=POSITIVE),
    ] = 1.0,
    limit: Annotated[
        int | None,
        typer.Option(help="Replay only the first N requests.", callback=in_range(0, 2**63 - 1)),
    ] = None,
    speed: Annotated[
        float,
        typer.Option(help="Multiply the arrival rate (2 = twice as fast).", callback=POSITIVE),
    ] = 1.0,
    max_batch_tokens: Annotated[
        int, typer.Option(help="Token budget per engine step.", callback=COUNT)
    ] = 4096,
    max_running: Annotated[
        int, typer.Option(help="Most requests in the running batch.", callback=COUNT)
    ] = 128,
    kv_blocks: Annotated[
        int, typer.Option(help="KV-cache capacity in blocks.", callback=COUNT)
    ] = 4096,
    block_size: Annotated[int, typer.Option(help="Tokens per KV block.", callback=COUNT)] = 16,
    cancel_fraction: Annotated[
        float, typer.Option(help="Share of clients that give up.", callback=FRACTION)
    ] = 0.0,
    bundle_prob: Annotated[
        float,
        typer.Option(
            help="Probability that a streamed chunk carries 2-4 tokens.", callback=FRACTION
        ),
    ] = 0.0,
    release_delay_ms: Annotated[
        float | None,
        typer.Option(help="Emit release events this long after the end.", callback=DURATION_MS),
    ] = None,
    horizon_s: Annotated[
        float | None,
        typer.Option(
            help="Stop the log here (s after the first arrival).", callback=in_range(0, 9.2e9)
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of every random draw.", callback=SEED)] = 0,
    steps_out: Annotated[
        Path | None,
        typer.Option(
            "--steps-out",
            metavar="FILE",
            help="Also write the engine's steps (canonical step schema, with each step's "
            "requests) for analyze --steps.",
        ),
    ] = None,
    fmt: Annotated[
        SimulateFormat,
        typer.Option(
            "--format",
            "-f",
            help="text: one line on stderr; json: what was written and the offered load "
            "against the engine's capacity, on stdout.",
        ),
    ] = SimulateFormat.text,
    metrics_out: Annotated[
        Path | None,
        typer.Option(
            help="Also write the server's Prometheus series (--metrics-engine's names) as "
            "one text exposition with millisecond timestamps on the trace clock."
        ),
    ] = None,
    metrics_engine: Annotated[
        EngineName,
        typer.Option(help="Whose families --metrics-out writes, observed by its rules."),
    ] = EngineName.vllm,
    scrape_interval_ms: Annotated[
        int,
        typer.Option(help="Scrape interval of --metrics-out.", callback=in_range(1, 86_400_000)),
    ] = 1000,
) -> None:
    """Simulate a continuous-batching engine and write its event log (seeded, exact)."""
    from servetrace.outputs import check_frame_output, refuse_overwriting_inputs, write_frame
    from servetrace.render.simulate import saturation_warning, simulate_json
    from servetrace.sim.capacity import offered_load
    from servetrace.sim.simulate import run_simulation, workload_for
    from servetrace.sim.steps_record import step_file

    check_frame_output(output, "--output")
    check_frame_output(steps_out, "--steps-out")
    outputs = [("--output", output), ("--steps-out", steps_out)]
    if metrics_out is not None:
        outputs.append(("--metrics-out", metrics_out))
    refuse_overwriting_inputs(outputs, [workload] if workload else [])
    load = workload_for(workload, requests, rate, seed, burstiness, limit, speed)
    config = EngineConfig(
        policy=policy.value,
        max_batch_tokens=max_batch_tokens,
        max_running=max_running,
        kv_blocks=kv_blocks,
        block_size=block_size,
        cancel_fraction=cancel_fraction,
        bundle_prob=bundle_prob,
        release_delay_ns=round(release_delay_ms * MS) if release_delay_ms is not None else None,
        horizon_ns=round(horizon_s * 1e9) if horizon_s is not None else None,
        seed=seed,
    )
    offered = offered_load(load, config)
    saturated = saturation_warning(offered, speed)
    if saturated:  # said before the run: a saturated replay is also a long one
        warn(saturated)
    sim = run_simulation(load, config)
    events = sim.events
    write_frame(events, output)
    if steps_out is not None:
        write_frame(step_file(sim, steps_out), steps_out)
    if metrics_out is not None:
        from servetrace.outputs import write_text
        from servetrace.sim.metrics import exposition

        write_text(exposition(events, scrape_interval_ms * MS, metrics_engine.value), metrics_out)
    err_console.print(
        f"wrote {output}: {events.height:,} events of {load.height:,} requests "
        f"(policy {policy.value}, seed {seed})",
        markup=False,
    )
    if fmt is SimulateFormat.json:
        emit(
            simulate_json(
                output=str(output),
                events=events.height,
                policy=policy.value,
                seed=seed,
                load=offered,
                speed=speed,
            ),
            end="",
        )
