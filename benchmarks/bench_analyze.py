"""Measure `servetrace analyze` against a plain Parquet read: time, events/s, peak memory.

    python benchmarks/bench_analyze.py --sizes 1e6 1e7 --repeat 3
    python benchmarks/bench_analyze.py --sizes 1e8 --repeat 1 --no-phases

For every size N the trace ``benchmarks/out/trace_<N>.parquet`` is generated first if
missing (``benchmarks/generate.py``, seed 0). Then, each in a **fresh process**, with
the approaches alternated (the order rotates every repeat; the machine is noisy):

* ``pyarrow read``  — ``pyarrow.parquet.read_table(path)`` (the reference of the target)
* ``pyarrow read (dict)`` — the same with ``read_dictionary=["event"]``: how much of the
  read is materialising the ``event`` strings
* ``polars read``   — ``polars.read_parquet(path)``
* ``analyze``       — ``servetrace analyze PATH --format json`` through the CLI entry
  point, in-process after the imports (so its timer starts where the reads' do)
* ``analyze (exe)`` — the real ``servetrace`` console script as a user runs it; its
  time includes interpreter start-up, imports and teardown
* ``import-*``      — processes that only import (pyarrow / polars / servetrace.cli +
  polars): the interpreter + import baseline subtracted for the *net* memory figures.

Per run: wall time of the process (spawn → exit), the in-process work time, and the
peak RSS of the process (``os.wait4`` → ``ru_maxrss``). Medians over the repeats are
reported. A phase breakdown of the analysis (library calls timed in-process, each with
its own RSS high-water mark) runs ``--repeat`` times as well.

Results: a Markdown report on stdout and ``benchmarks/out/results.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
RUNNER = HERE / "_runner.py"
GENERATOR = HERE / "generate.py"

APPROACHES = ("pyarrow", "pyarrow-dict", "polars", "analyze", "analyze-streaming", "analyze-exe")
LABELS = {
    "pyarrow": "pyarrow read_table",
    "pyarrow-dict": "pyarrow read_table(read_dictionary=['event'])",
    "polars": "polars read_parquet",
    "analyze": "servetrace analyze --format json --no-streaming",
    "analyze-streaming": "servetrace analyze --format json --streaming",
    "analyze-exe": "servetrace analyze (console script, end to end)",
    "import-pyarrow": "import pyarrow (baseline)",
    "import-polars": "import polars (baseline)",
    "import-servetrace": "import servetrace.cli + polars (baseline)",
}
BASELINE_OF = {
    "pyarrow": "import-pyarrow",
    "pyarrow-dict": "import-pyarrow",
    "polars": "import-polars",
    "analyze": "import-servetrace",
    "analyze-streaming": "import-servetrace",
    "analyze-exe": "import-servetrace",
}
ANALYZE_MODES = ("analyze", "analyze-streaming", "analyze-exe")


def size_label(n: int) -> str:
    exp = len(str(n)) - 1
    return f"1e{exp}" if n == 10**exp else str(n)


def parse_count(text: str) -> int:
    value = float(text)
    if value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(f"not a positive whole number: {text}")
    return int(value)


# ------------------------------------------------------------------------- machine info
def machine_info() -> dict:
    info: dict = {
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": None,
        "mem_total_gib": None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "POLARS_MAX_THREADS": os.environ.get("POLARS_MAX_THREADS"),
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    info["mem_total_gib"] = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    versions = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, polars, pyarrow, numpy, servetrace;"
            "print(json.dumps({'polars': polars.__version__, 'pyarrow': pyarrow.__version__,"
            "'numpy': numpy.__version__, 'servetrace': servetrace.__version__,"
            "'polars_threads': polars.thread_pool_size()}))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    info.update(json.loads(versions.stdout))
    try:
        commit = subprocess.run(
            ["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        dirty = subprocess.run(
            [
                "git",
                "-C",
                str(HERE.parent),
                "status",
                "--porcelain",
                "--untracked-files=no",
                "servetrace",
            ],
            capture_output=True,
            text=True,
            timeout=10,
        )
        info["git_commit"] = commit.stdout.strip() or None
        info["servetrace_modified_vs_commit"] = bool(dirty.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        info["git_commit"] = None
    return info


# ----------------------------------------------------------------------- one measurement
def cpu_busy(interval: float = 0.3) -> float | None:
    """Share of all CPUs busy (any process) over ``interval`` seconds, from /proc/stat."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as handle:
            fields = [int(x) for x in handle.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields), idle

    try:
        total0, idle0 = sample()
        time.sleep(interval)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    total = total1 - total0
    return 1.0 - (idle1 - idle0) / total if total > 0 else None


def wait_for_quiet(threshold: float, max_wait: float) -> tuple[float | None, float]:
    """Wait (up to ``max_wait`` s) until other work uses less than ``threshold`` of the
    CPUs; return the last busy share seen and the seconds waited."""
    t0 = time.perf_counter()
    busy = cpu_busy()
    while busy is not None and busy > threshold and time.perf_counter() - t0 < max_wait:
        time.sleep(0.5)
        busy = cpu_busy()
    return busy, time.perf_counter() - t0


class RssWatchdog(threading.Thread):
    """Kill the child if its RSS passes a limit (protects a shared machine)."""

    def __init__(self, pid: int, limit_kb: int | None) -> None:
        super().__init__(daemon=True)
        self.pid, self.limit_kb, self.killed = pid, limit_kb, False
        self.stop = threading.Event()

    def run(self) -> None:
        if not self.limit_kb:
            return
        while not self.stop.wait(0.1):
            try:
                with open(f"/proc/{self.pid}/status") as handle:
                    for line in handle:
                        if line.startswith("VmRSS:"):
                            if int(line.split()[1]) > self.limit_kb:
                                self.killed = True
                                os.kill(self.pid, 9)
                            break
            except (OSError, ProcessLookupError):
                return


def measure(mode: str, trace: Path, args: argparse.Namespace) -> dict:
    """Run one mode in a fresh process; wall time and peak RSS measured from outside."""
    max_rss_gb, timeout = args.max_rss_gb, args.timeout
    busy, waited = wait_for_quiet(args.quiet_threshold, args.quiet_wait)
    with tempfile.TemporaryDirectory(prefix="servetrace-bench-") as tmp:
        result_path = Path(tmp) / "result.json"
        stdout_path = Path(tmp) / "stdout"
        if mode == "analyze-exe":
            exe = shutil.which("servetrace") or str(Path(sys.executable).with_name("servetrace"))
            argv = [exe, "analyze", str(trace), "--format", "json", "--no-streaming"]
        elif mode == "analyze-streaming":
            argv = [
                sys.executable,
                str(RUNNER),
                "analyze",
                str(trace),
                str(result_path),
                "--streaming",
            ]
        elif mode == "analyze":
            # in memory, whatever the size (the CLI streams 30M+ events by default)
            argv = [
                sys.executable,
                str(RUNNER),
                mode,
                str(trace),
                str(result_path),
                "--no-streaming",
            ]
        else:
            argv = [sys.executable, str(RUNNER), mode, str(trace), str(result_path)]
        with open(stdout_path, "wb") as out, open(Path(tmp) / "stderr", "wb") as err:
            t0 = time.perf_counter()
            proc = subprocess.Popen(argv, stdout=out, stderr=err)
            dog = RssWatchdog(proc.pid, int(max_rss_gb * 2**20) if max_rss_gb else None)
            dog.start()
            deadline = t0 + timeout
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() > deadline:
                    proc.kill()
                    pid, status, usage = os.wait4(proc.pid, 0)
                    break
                time.sleep(0.005)
            wall = time.perf_counter() - t0
            dog.stop.set()
            proc.returncode = os.waitstatus_to_exitcode(status)
        row: dict = {
            "mode": mode,
            "wall_s": wall,
            "peak_rss_kb": usage.ru_maxrss,
            "user_s": usage.ru_utime,
            "sys_s": usage.ru_stime,
            "returncode": proc.returncode,
            "killed_for_memory": dog.killed,
            "timed_out": wall > timeout,
            "cpu_busy_before": busy,
            "waited_for_quiet_s": waited,
        }
        if result_path.exists():
            row.update(
                {k: v for k, v in json.loads(result_path.read_text()).items() if k != "mode"}
            )
        if mode in ANALYZE_MODES:
            row["report_ok"], row["report_rows"] = _check_report(stdout_path)
        if proc.returncode != 0 or (mode in ANALYZE_MODES and not row["report_ok"]):
            row["stderr_tail"] = (Path(tmp) / "stderr").read_text(errors="replace")[-2000:]
        return row


def _check_report(path: Path) -> tuple[bool, int | None]:
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return False, None
    rows = _find_rows(report)
    return True, rows


def _find_rows(report: dict) -> int | None:
    accounting = report.get("accounting") if isinstance(report, dict) else None
    if isinstance(accounting, dict):
        for key in ("rows", "events"):
            if isinstance(accounting.get(key), int):
                return accounting[key]
    return None


# ---------------------------------------------------------------------------- the study
def ensure_trace(n: int, seed: int) -> tuple[Path, dict | None]:
    path = OUT / f"trace_{size_label(n)}.parquet"
    if path.exists():
        return path, None
    print(f"generating {path} ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(GENERATOR), "--events", str(n), "-o", str(path), "--seed", str(seed)],
        capture_output=True,
        text=True,
        check=True,
    )
    info = json.loads(done.stdout)
    info["wall_s"] = time.perf_counter() - t0
    return path, info


def trace_info(path: Path) -> dict:
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    schema = pq.read_schema(path)
    return {
        "path": str(path),
        "rows": meta.num_rows,
        "row_groups": meta.num_row_groups,
        "bytes": path.stat().st_size,
        "bytes_per_event_on_disk": path.stat().st_size / meta.num_rows,
        "schema": {f.name: str(f.type) for f in schema},
    }


def median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def code_digest() -> str:
    """Digest of the servetrace sources in the checkout, to notice edits during a run."""
    import hashlib

    digest = hashlib.sha1()
    for file in sorted((HERE.parent / "servetrace").rglob("*.py")):
        digest.update(str(file.relative_to(HERE.parent)).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()[:12]


def git_head() -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return done.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def bench_size(n: int, args: argparse.Namespace) -> dict:
    digest_before, head_before = code_digest(), git_head()
    path, generated = ensure_trace(n, args.seed)
    info = trace_info(path)
    n = info["rows"]
    modes = [m for m in APPROACHES if m in args.approaches]
    baselines = sorted({BASELINE_OF[m] for m in modes})
    runs: dict[str, list[dict]] = {m: [] for m in [*baselines, *modes]}
    phase_runs: list[dict] = []
    for r in range(args.repeat):
        order = modes[r % len(modes) :] + modes[: r % len(modes)]  # rotate each repeat
        for mode in [*baselines, *order]:
            row = measure(mode, path, args)
            if mode in ANALYZE_MODES and row.get("report_rows") not in (None, n):
                row["returncode"] = row["returncode"] or -1
                row["stderr_tail"] = f"report accounts for {row['report_rows']} rows, not {n}"
            runs[mode].append(row)
            print(
                f"  {size_label(n)} repeat {r + 1}: {mode:18s} wall {row['wall_s']:7.2f} s"
                f"  work {row.get('work_s') or 0:7.2f} s  peak {row['peak_rss_kb'] / 1024:8.0f} MB"
                + ("" if row["returncode"] == 0 else f"  rc={row['returncode']}"),
                file=sys.stderr,
                flush=True,
            )
        if args.phases:
            row = measure("phases", path, args)
            phase_runs.append(row)
            print(
                f"  {size_label(n)} repeat {r + 1}: phases             total "
                f"{row.get('work_s') or 0:7.2f} s",
                file=sys.stderr,
                flush=True,
            )
    summary = summarise(n, runs)
    phases = summarise_phases(phase_runs)
    digest_after = code_digest()
    if digest_after != digest_before:
        print(
            f"  WARNING: servetrace sources changed while {size_label(n)} was measured",
            file=sys.stderr,
            flush=True,
        )
    return {
        "code_digest": digest_before,
        "code_changed_during_run": digest_after != digest_before,
        "git_commit_at_start": head_before,
        "git_commit_at_end": git_head(),
        "events": n,
        "trace": info,
        "generated": generated,
        "runs": runs,
        "summary": summary,
        "phase_runs": phase_runs,
        "phases": phases,
    }


def summarise(n: int, runs: dict[str, list[dict]]) -> dict:
    out: dict = {}
    for mode, rows in runs.items():
        ok = [r for r in rows if r["returncode"] == 0 and not r["killed_for_memory"]]
        out[mode] = {
            "runs": len(rows),
            "ok_runs": len(ok),
            "wall_s": median([r["wall_s"] for r in ok]),
            "work_s": median([r.get("work_s") for r in ok]),
            "import_s": median([r.get("import_s") for r in ok]),
            "peak_rss_mb": median([r["peak_rss_kb"] / 1024 for r in ok]),
            "cpu_s": median([r["user_s"] + r["sys_s"] for r in ok]),
            "user_s": median([r["user_s"] for r in ok]),
            "sys_s": median([r["sys_s"] for r in ok]),
            "cpu_busy_before": median([r.get("cpu_busy_before") for r in rows]),
            "failures": [
                {
                    k: r.get(k)
                    for k in ("returncode", "killed_for_memory", "timed_out", "stderr_tail")
                }
                for r in rows
                if r not in ok
            ],
        }
    for mode, base in BASELINE_OF.items():
        if mode not in out or out[mode]["ok_runs"] == 0:
            continue
        s, b = out[mode], out[base]
        time_s = s["work_s"] if mode != "analyze-exe" else s["wall_s"]
        s["events_per_s"] = n / time_s if time_s else None
        s["baseline_rss_mb"] = b["peak_rss_mb"]
        s["net_rss_mb"] = s["peak_rss_mb"] - b["peak_rss_mb"]
        s["bytes_per_event_raw"] = s["peak_rss_mb"] * 2**20 / n
        s["bytes_per_event_net"] = s["net_rss_mb"] * 2**20 / n
    read = out.get("pyarrow", {})
    pl_read = out.get("polars", {})
    for mode in APPROACHES:
        if mode not in out or not out[mode]["ok_runs"]:
            continue
        s = out[mode]
        if mode == "analyze-exe":
            # end to end against end to end: the pyarrow process's wall time
            s["ratio_vs_pyarrow"] = _ratio(s["wall_s"], read.get("wall_s"))
            s["ratio_vs_polars"] = _ratio(s["wall_s"], pl_read.get("wall_s"))
        else:
            s["ratio_vs_pyarrow"] = _ratio(s["work_s"], read.get("work_s"))
            s["ratio_vs_polars"] = _ratio(s["work_s"], pl_read.get("work_s"))
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def summarise_phases(phase_runs: list[dict]) -> list[dict]:
    ok = [r for r in phase_runs if r["returncode"] == 0 and r.get("phases")]
    if not ok:
        return []
    names = [p["phase"] for p in ok[0]["phases"]]
    total = median([r["work_s"] for r in ok])
    rows = []
    for i, name in enumerate(names):
        secs = median([r["phases"][i]["seconds"] for r in ok])
        rows.append(
            {
                "phase": name,
                "seconds": secs,
                "share": secs / total if total else None,
                "peak_mb": median([r["phases"][i]["peak_mb"] for r in ok]),
                "rss_after_mb": median([r["phases"][i]["rss_after_mb"] for r in ok]),
            }
        )
    rows.append(
        {
            "phase": "total (in-process)",
            "seconds": total,
            "share": 1.0,
            "peak_mb": median([max((p["peak_mb"] or 0) for p in r["phases"]) for r in ok]),
            "rss_after_mb": None,
        }
    )
    return rows


# ------------------------------------------------------------------------------ report
def _cpu(r: dict) -> str:
    if r.get("user_s") is None:  # results written before user/sys were kept apart
        return fmt(r.get("cpu_s"), ".2f")
    return f"{r['user_s']:.2f}+{r['sys_s']:.2f}"


def fmt(value, spec: str = ".2f", none: str = "—") -> str:
    return none if value is None else format(value, spec)


def markdown(results: dict) -> str:
    m = results["machine"]
    lines = [
        "# servetrace analyze benchmark",
        "",
        f"Machine: {m['cpu_count']} CPUs ({m['cpu_model']}), {m['mem_total_gib']} GiB; "
        f"Python {m['python']}, polars {m['polars']} ({m['polars_threads']} threads), "
        f"pyarrow {m['pyarrow']}, numpy {m['numpy']}; servetrace {m['servetrace']} "
        f"@ {m.get('git_commit')}"
        f"{' + local changes' if m.get('servetrace_modified_vs_commit') else ''}; "
        f"{m['date_utc']}. Fresh process per run, approaches alternated, medians.",
        "",
    ]
    for size in results["sizes"]:
        n, t, s = size["events"], size["trace"], size["summary"]
        lines += [
            f"## {size_label(n)} events ({n:,} rows, {t['row_groups']} row groups, "
            f"{t['bytes'] / 2**20:.1f} MiB on disk = {t['bytes_per_event_on_disk']:.2f} B/event)",
            "",
            f"Measured {size.get('measured_at', '?')} at {size.get('git_commit', '?')} "
            f"(sources {size.get('code_digest', '?')}"
            + (", **changed during the run**" if size.get("code_changed_during_run") else "")
            + "), "
            f"median of {size.get('repeat', results['repeat'])} run(s)"
            + (
                f"; trace generated in {size['generated']['seconds']:.1f} s"
                if size.get("generated")
                else ""
            )
            + ".",
            "",
            "| approach | time s | wall s | CPU user+sys s | events/s | peak RSS MB | net MB "
            "| B/event raw | B/event net | × pyarrow read | × polars read |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for mode in APPROACHES:
            if mode not in s:
                continue
            r = s[mode]
            if not r["ok_runs"]:
                lines.append(f"| {LABELS[mode]} | failed: {r['failures'][:1]} |")
                continue
            time_s = r["wall_s"] if mode == "analyze-exe" else r["work_s"]
            lines.append(
                f"| {LABELS[mode]} | {fmt(time_s, '.3f')} | {fmt(r['wall_s'], '.3f')} | "
                f"{_cpu(r)} | "
                f"{fmt(r.get('events_per_s') and r['events_per_s'] / 1e6, '.2f')} M | "
                f"{fmt(r['peak_rss_mb'], '.0f')} | {fmt(r.get('net_rss_mb'), '.0f')} | "
                f"{fmt(r.get('bytes_per_event_raw'), '.0f')} | "
                f"{fmt(r.get('bytes_per_event_net'), '.0f')} | "
                f"{fmt(r.get('ratio_vs_pyarrow'), '.2f')} | "
                f"{fmt(r.get('ratio_vs_polars'), '.2f')} |"
            )
        for base in ("import-pyarrow", "import-polars", "import-servetrace"):
            if base in s and s[base]["ok_runs"]:
                b = s[base]
                lines.append(
                    f"| {LABELS[base]} | — | {fmt(b['wall_s'], '.3f')} | "
                    f"{_cpu(b)} | — | "
                    f"{fmt(b['peak_rss_mb'], '.0f')} | 0 | — | — | — | — |"
                )
        lines.append("")
        for mode in ("analyze", "analyze-streaming"):
            a = s.get(mode)
            if not a or a.get("bytes_per_event_net") is None:
                continue
            ok_time = a["ratio_vs_pyarrow"] is not None and a["ratio_vs_pyarrow"] <= 3
            ok_mem = a["bytes_per_event_net"] < 150
            lines += [
                f"Targets, `{LABELS[mode]}`: time ≤ 3× plain read → "
                f"**{a['ratio_vs_pyarrow']:.2f}× pyarrow read_table** "
                f"({'met' if ok_time else 'NOT met'}; "
                f"{fmt(a.get('ratio_vs_polars'))}× polars read_parquet); "
                f"peak memory < 150 B/event → **{a['bytes_per_event_net']:.0f} B/event net** "
                f"({'met' if ok_mem else 'NOT met'}; {a['bytes_per_event_raw']:.0f} raw).",
                "",
            ]
        if size["phases"]:
            lines += [
                f"Phase breakdown ({size_label(n)}, library calls in one process, "
                f"medians of {len(size['phase_runs'])}):",
                "",
                "| phase | s | share | peak RSS in phase MB | RSS after MB |",
                "|---|---:|---:|---:|---:|",
            ]
            for p in size["phases"]:
                lines.append(
                    f"| {p['phase']} | {fmt(p['seconds'], '.3f')} | "
                    f"{fmt(p['share'] and 100 * p['share'], '.0f')} % | "
                    f"{fmt(p['peak_mb'], '.0f')} | {fmt(p['rss_after_mb'], '.0f')} |"
                )
            lines.append("")
    lines += [
        "time s: in-process timer around the work (after imports); for the console script, "
        "the process wall time. wall s: process spawn → exit (interpreter start-up and "
        "imports included). CPU: user + system time of the whole process (less "
        "sensitive to other load than wall time; in this VM, first-touch page faults "
        "sometimes add seconds of system time). Net = peak RSS − peak RSS of a process "
        "that only does the same "
        "imports. × read: analysis time / read time (same kind of time).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", type=parse_count, default=[10**6, 10**7])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--approaches", nargs="+", default=list(APPROACHES), choices=APPROACHES)
    parser.add_argument(
        "--phases",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the in-process phase breakdown (default: on)",
    )
    parser.add_argument(
        "--max-rss-gb",
        type=float,
        default=20.0,
        help="kill a run whose RSS passes this (GiB); 0 = no limit",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    parser.add_argument(
        "--quiet-threshold",
        type=float,
        default=0.25,
        help="before each run, wait until other work uses less than this share of all CPUs ...",
    )
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=20.0,
        help="... but at most this many seconds (0: never wait)",
    )
    parser.add_argument("-o", "--output", type=Path, default=OUT / "results.json")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="overwrite --output instead of keeping the sizes it holds that this run skips",
    )
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    results = {"machine": machine_info(), "repeat": args.repeat, "sizes": []}
    for n in args.sizes:
        size = bench_size(n, args)
        size["measured_at"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        size["repeat"] = args.repeat
        size["git_commit"] = size["git_commit_at_start"]
        results["sizes"].append(size)
    if args.output.exists() and not args.fresh:
        # keep the sizes measured by earlier invocations (e.g. a separate 1e8 run)
        try:
            old = json.loads(args.output.read_text())
            new_sizes = {s["events"] for s in results["sizes"]}
            kept = [s for s in old.get("sizes", []) if s["events"] not in new_sizes]
            for size in kept:  # re-derive medians with this version's summary fields
                size["summary"] = summarise(size["events"], size["runs"])
            results["sizes"] = sorted(kept + results["sizes"], key=lambda s: s["events"])
        except (OSError, ValueError, KeyError):
            pass
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2))
    print(markdown(results))
    print(f"results written to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
