"""compare on real LLMPerf results: Together vs Groq puts the metrics the files
cannot express under "Unavailable:" (never "no significant change"); four configurations
at once give one table with a verdict per candidate, labelled; run folders whose files
share one name are told apart by their folders; ``--label`` names them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app

DATA = Path(__file__).resolve().parent.parent / "data"
LLMPERF = DATA / "real" / "llmperf-leaderboard" / "individual"
TOGETHER, GROQ = str(LLMPERF / "together_70b.json"), str(LLMPERF / "groq_70b.json")
LEPTON, ANYSCALE = str(LLMPERF / "lepton_7b.json"), str(LLMPERF / "anyscale_70b.json")
# What an LLMPerf individual-responses file cannot express, with the reason code's words.
UNAVAILABLE = ("queue_wait", "prefill", "preemptions", "itl", "throughput")

runner = CliRunner()


def _run(*args: str) -> str:
    result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_together_vs_groq_lists_what_the_files_lack_as_unavailable() -> None:
    out = _run("compare", TOGETHER, GROQ)
    unchanged = next(line for line in out.splitlines() if line.startswith("No significant"))
    for name in UNAVAILABLE:
        assert name not in unchanged, name
    gone = out[out.index("Unavailable:") :].split("\n\n")[0].replace("\n", " ")
    assert "itl (request-level export)" in gone and "preemptions (client trace)" in gone
    assert "throughput (no send times)" in gone
    doc = json.loads(_run("compare", TOGETHER, GROQ, "-f", "json"))
    (label,) = doc["candidates"]
    assert set(UNAVAILABLE) <= set(doc["unavailable"][label])
    for row in doc["rows"]:  # a row of such a metric says so, never "no significant change"
        if row["metric"] in UNAVAILABLE:
            assert row["verdict"] == "unavailable" and row["unavailable"], row
            assert row["words"] == f"unavailable: {row['unavailable']}"
        else:
            assert row["unavailable"] is None
    # Groq is faster on every latency the files do have
    verdict = doc["verdicts"][0]
    assert verdict["verdict"] == "better" and "ttft.p50" in verdict["better"]
    gone = sum(1 for r in doc["rows"] if r["metric"] in UNAVAILABLE)
    assert verdict["unavailable"] == gone > 0
    assert verdict["unchanged"] == len(doc["rows"]) - gone - len(verdict["better"])


def test_four_configurations_give_one_table_with_a_verdict_each() -> None:
    out = _run("compare", TOGETHER, GROQ, LEPTON, ANYSCALE)
    lines = out.splitlines()
    assert lines[0] == "baseline: together_70b; 3 candidates"
    table = {line.split()[0]: line.split() for line in lines[2:5]}
    assert set(table) == {"groq_70b", "lepton_7b", "anyscale_70b"}
    assert table["groq_70b"][1] == "better"
    assert table["lepton_7b"][1] == "worse"  # 130 × HTTP 429 and slower
    labelled = _run(
        "compare",
        TOGETHER,
        GROQ,
        LEPTON,
        ANYSCALE,
        *("--label", "Together"),
        *("--label", "Groq"),
        *("--label", "Lepton"),
        *("--label", "Anyscale"),
        "-f",
        "json",
    )
    doc = json.loads(labelled)
    assert doc["baseline"] == "Together"
    assert doc["candidates"] == ["Groq", "Lepton", "Anyscale"]
    assert [v["candidate"] for v in doc["verdicts"]] == ["Groq", "Lepton", "Anyscale"]


@pytest.mark.slow
def test_same_file_names_in_four_folders_are_labelled_by_folder(tmp_path: Path) -> None:
    peer = DATA / "peers" / "aiperf_s1_conc8"
    for name in ("tp1", "tp2", "tp4", "tp8"):
        (tmp_path / name).mkdir()
        shutil.copy(peer / "profile_export.jsonl.gz", tmp_path / name)
    files = [str(tmp_path / n / "profile_export.jsonl.gz") for n in ("tp1", "tp2", "tp4", "tp8")]
    out = _run("compare", *files)
    assert out.splitlines()[0] == "baseline: tp1; 3 candidates"
    assert {line.split()[0] for line in out.splitlines()[2:5]} == {"tp2", "tp4", "tp8"}
    wrong = runner.invoke(app, ["compare", *files, "--label", "a"])
    assert wrong.exit_code == 2 and "1 --label for 4 traces" in wrong.stderr
