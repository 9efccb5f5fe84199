"""One measurement, run in a fresh process by bench_analyze.py (not meant to be run by hand).

    python benchmarks/_runner.py MODE TRACE RESULT_JSON [EXTRA CLI ARGS]

MODE is one of

* ``import-pyarrow`` / ``import-polars`` / ``import-servetrace``: the imports only
  (the interpreter + import baseline of each approach);
* ``pyarrow``: ``pyarrow.parquet.read_table(TRACE)``;
* ``pyarrow-dict``: the same with ``read_dictionary=["event"]`` (event kept as a
  dictionary column instead of materialised strings);
* ``polars``: ``polars.read_parquet(TRACE)``;
* ``analyze``: ``servetrace analyze TRACE --format json``, run in-process through the
  CLI's own entry point (``servetrace.cli.main``) after importing it, so the timer
  covers exactly the command and not the interpreter start-up; the JSON report goes
  to this process's stdout, which the parent points at a file; extra arguments are
  passed on (``--streaming``);
* ``phases``: the analysis as library calls, each timed with ``time.perf_counter``,
  with the RSS high-water mark of each phase (reset between phases through
  ``/proc/self/clear_refs`` where the kernel allows it).

RESULT_JSON receives ``import_s`` (time spent importing), ``work_s`` (the timed work),
``maxrss_self_kb`` and, for ``phases``, the per-phase figures. The parent measures wall
time and the peak RSS of the whole process itself (``os.wait4``).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time

T_START = time.perf_counter()


def _status() -> dict[str, int]:
    """VmRSS / VmHWM of this process in kB (Linux)."""
    out = {}
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key, value = line.split(":", 1)
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def _reset_hwm() -> bool:
    """Reset the peak-RSS counter (VmHWM) to the current RSS; False if not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def run_pyarrow(path: str) -> dict:
    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    table = pq.read_table(path)
    t1 = time.perf_counter()
    return {"import_s": t0 - T_START, "work_s": t1 - t0, "rows": table.num_rows}


def run_pyarrow_dict(path: str) -> dict:
    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    table = pq.read_table(path, read_dictionary=["event"])
    t1 = time.perf_counter()
    return {"import_s": t0 - T_START, "work_s": t1 - t0, "rows": table.num_rows}


def run_polars(path: str) -> dict:
    import polars as pl

    t0 = time.perf_counter()
    frame = pl.read_parquet(path)
    t1 = time.perf_counter()
    return {"import_s": t0 - T_START, "work_s": t1 - t0, "rows": frame.height}


def run_analyze(path: str, extra: list[str]) -> dict:
    # servetrace.cli first, as the console script does: it configures Polars' allocator,
    # which only works before Polars is loaded.
    from servetrace.cli import main

    t0 = time.perf_counter()
    sys.argv = ["servetrace", "analyze", path, "--format", "json", *extra]
    code = 0
    try:
        main()
    except SystemExit as exc:  # typer/click always exit
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    sys.stdout.flush()
    t1 = time.perf_counter()
    return {"import_s": t0 - T_START, "work_s": t1 - t0, "exit_code": code}


def run_phases(path: str) -> dict:
    import polars as pl

    from servetrace.analysis import lifecycle, metrics, summary
    from servetrace.analysis import memory as pipeline
    from servetrace.render.summary import render_json, report_dict
    from servetrace.sources import canonical as ingest

    t_import = time.perf_counter() - T_START
    can_reset = _reset_hwm()
    phases: list[dict] = []
    state: dict = {}

    def phase(name: str, fn):
        if can_reset:
            _reset_hwm()
        before = _status()
        t0 = time.perf_counter()
        result = fn()
        dt = time.perf_counter() - t0
        after = _status()
        phases.append(
            {
                "phase": name,
                "seconds": dt,
                "rss_before_mb": before.get("VmRSS", 0) / 1024,
                "rss_after_mb": after.get("VmRSS", 0) / 1024,
                "peak_mb": after.get("VmHWM", 0) / 1024 if can_reset else None,
            }
        )
        return result

    t0 = time.perf_counter()
    trace = phase("ingest.read_events (resolve, scan, schema)", lambda: ingest.read_events([path]))
    events = phase("collect (parquet read + normalise)", lambda: trace.events.collect())
    attributes = [
        c
        for c in events.columns
        if c not in ("request_id", "event", "ts", "tokens", "prompt_tokens", "output_tokens")
    ]
    timeline = phase(
        "lifecycle.build_timeline", lambda: lifecycle.build_timeline(events, attributes)
    )
    requests = phase(
        "metrics.request_metrics", lambda: metrics.request_metrics(timeline, attributes)
    )
    gaps_fn = getattr(pipeline, "_gaps_with_ids", None)
    if gaps_fn is not None:
        gaps = phase(
            "pipeline._gaps_with_ids (gap_frame + id join)", lambda: gaps_fn(timeline, requests)
        )
    else:
        gaps = phase("metrics.gap_frame", lambda: metrics.gap_frame(timeline, requests))
    span = getattr(pipeline, "span_warnings", None) or getattr(pipeline, "_span_warnings", None)
    warnings = span(timeline) if span else []
    result = phase(
        "summary.summarize", lambda: summary.summarize(timeline, requests, gaps, warnings=warnings)
    )
    text = phase(
        "render.report_dict + render_json", lambda: render_json(report_dict(result, (path,)))
    )
    total = time.perf_counter() - t0
    state["rows"] = events.height
    state["requests"] = requests.height
    state["gaps"] = gaps.height
    state["report_chars"] = len(text)
    del pl
    return {
        "import_s": t_import,
        "work_s": total,
        "phases": phases,
        "hwm_reset": can_reset,
        **state,
    }


def run_import(mode: str) -> dict:
    if mode == "import-pyarrow":
        import pyarrow.parquet  # noqa: F401
    elif mode == "import-polars":
        pass
    else:
        import servetrace.cli  # noqa: F401  (loads polars after configuring its allocator)
    return {"import_s": time.perf_counter() - T_START, "work_s": 0.0}


def main() -> None:
    mode, path, out = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode.startswith("import-"):
        result = run_import(mode)
    elif mode == "pyarrow":
        result = run_pyarrow(path)
    elif mode == "pyarrow-dict":
        result = run_pyarrow_dict(path)
    elif mode == "polars":
        result = run_polars(path)
    elif mode == "analyze":
        result = run_analyze(path, sys.argv[4:])
    elif mode == "phases":
        result = run_phases(path)
    else:
        raise SystemExit(f"unknown mode {mode}")
    result["maxrss_self_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result["mode"] = mode
    with open(out, "w") as handle:
        json.dump(result, handle)
    sys.stdout.flush()
    # Skip interpreter teardown (freeing GBs of frames): the parent measures the run,
    # not the clean-up, and every approach gets the same treatment.
    os._exit(0)


if __name__ == "__main__":
    main()
