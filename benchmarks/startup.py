"""Start-up of the ``servetrace`` command: wall time of fresh processes.

    python benchmarks/startup.py [--repeat 15] [--importtime]

Times, in one run and interleaved (so that load from other processes falls on all alike),
``python -c "import polars"`` (the floor any analysis pays), ``python -m servetrace --help``
and ``python -m servetrace analyze sample_traces/worked_example.csv``, and prints the
median, min and max of each and the ratio of each median to the Polars baseline. Goals:
``--help`` ≤ 0.3 s, ``analyze`` of the worked example ≤ 0.6 s. With ``--importtime`` it
also prints the ten slowest top-level imports of each command (``python -X importtime``).
``CPU med`` is the median user + system CPU time of the process: on a loaded machine the
wall time mostly measures the wait for a core, the CPU time what the command costs.
Not a test: a timed assertion on a shared machine would be noise.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = "sample_traces/worked_example.csv"
CASES: dict[str, list[str]] = {
    "import polars": ["-c", "import polars"],
    "servetrace --help": ["-m", "servetrace", "--help"],
    f"servetrace analyze {SAMPLE}": ["-m", "servetrace", "analyze", SAMPLE],
}
GOALS = {"servetrace --help": 0.3, f"servetrace analyze {SAMPLE}": 0.6}


def checkout_env() -> dict[str, str]:
    """The checkout first on the path, and bytecode allowed: an installed package runs from
    the ``.pyc`` files pip writes at install, but with ``PYTHONDONTWRITEBYTECODE`` set (as on
    this project's VMs) a checkout compiles its ~190 modules in every process (~0.2 s)."""
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


CPU: dict[str, list[float]] = {}


def _once(args: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one fresh process; its user + system CPU goes to ``CPU``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=ROOT, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    CPU.setdefault(" ".join(args), []).append(cpu)
    return wall


def _slowest_imports(args: list[str], env: dict[str, str], count: int = 10) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|")
        if cumulative.strip().isdigit() and not name.startswith("  "):  # top level only
            rows.append((int(cumulative), name.strip()))
    return [f"{us / 1000:8.1f} ms  {name}" for us, name in sorted(rows, reverse=True)[:count]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--importtime", action="store_true")
    options = parser.parse_args()
    env = checkout_env()
    for args in CASES.values():  # warm the file cache and write the bytecode
        _once(args, env)
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(options.repeat):
        for name, args in CASES.items():
            times[name].append(_once(args, env))
    base = statistics.median(times["import polars"])
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f}, {options.repeat} runs each (wall, s)"
    )
    print(
        f"{'command':<50} {'median':>7} {'min':>7} {'max':>7} {'÷ polars':>9} {'CPU med':>8}  goal"
    )
    for name, values in times.items():
        median = statistics.median(values)
        goal = GOALS.get(name)
        verdict = "" if goal is None else f"≤ {goal} s {'met' if median <= goal else 'MISSED'}"
        cpu = statistics.median(CPU[" ".join(CASES[name])][1:])  # [0]: the warm-up run
        print(
            f"{name:<50} {median:7.3f} {min(values):7.3f} {max(values):7.3f} "
            f"{median / base:9.2f} {cpu:8.3f}  {verdict}"
        )
    if options.importtime:
        for name, args in CASES.items():
            print(f"\nslowest top-level imports: {name}")
            print("\n".join(_slowest_imports(args, env)))


if __name__ == "__main__":
    main()
