"""Runs: the unit a benchmark user thinks in.

A **run** is one tool export (a ``vllm bench serve`` result file, an AIPerf / GenAI-Perf /
GuideLLM run folder, one benchmark of a multi-benchmark GuideLLM file, an LLMPerf result)
or one canonical event log (a file, a glob of its shards, a directory of Parquet parts).
Each run has its own request-id space: runs are never pooled by accident; ``--pool``
pools them on purpose, with every ``request_id`` prefixed by its run's label.

- ``servetrace.sources.inputs.resolve(texts)`` → ``list[RunSource]``: what the user
  pointed at, split into runs (summary files beside a per-request file are noted and
  skipped; a summary alone becomes a *reported* run);
- ``servetrace.runs.declared``: each export's run-level facts (``DECLARED_KEYS``);
- ``servetrace.runs.load``: one source → its ``Analysis`` (the same way for every command);
- ``servetrace.runs.analyze.analyze_runs`` → ``Runs``: one ``Run`` per source, labelled
  (``servetrace.runs.labels``) and sorted by declared load;
- ``servetrace.render.runs``: the one-row-per-run table (text, Markdown, CSV, JSON).

The model (``servetrace.runs.model``) is the stable interface other packages build on.
"""

from servetrace.runs.model import DECLARED_KEYS, Run, Runs, empty_declared

__all__ = ["DECLARED_KEYS", "Run", "Runs", "empty_declared"]
