"""One way in: what the user pointed at, as runs (``resolve(texts) -> list[RunSource]``).

Every command that reads traces resolves its arguments here, once, so every command
accepts the same inputs and refuses them with the same errors:

- every per-request export of a benchmark client (``RUN_FORMATS``: a ``vllm bench
  serve`` result, AIPerf ``profile_export.jsonl``, GenAI-Perf ``profile_export.json``,
  GuideLLM ``benchmarks.json``, LLMPerf individual responses) is **one run**, with its
  own request ids, even when several are given at once (``qps_*.json``);
- a folder holding such exports is a run folder (one run per export); a folder of run
  folders (a sweep, vLLM's ``01_tp8_pp1/ 02_…``) is searched one level at a time;
- a tool's summary file (``profile_export_aiperf.json``, ``profile_export_genai_perf.json``,
  LLMPerf ``summary/*.json``, vLLM's ``benchmark_results.json`` and the
  ``cumulative_results.md`` next to the sweep) is noted and skipped when its per-request
  file is there too; alone, it is a *reported* run (``summary_only``);
- partial results (directories written by ``analyze --partial-out``) are one run, merged;
- everything else (canonical event logs and their parts, object-store URIs, engine
  exports) is one trace, read by the canonical reader or the engine's importer.
"""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from servetrace.errors import InputError, UsageError
from servetrace.sources import blis_files, llmd_report
from servetrace.sources.file_scan import resolve_paths
from servetrace.sources.guidellm_csv import count_rows, is_benchmarks_csv
from servetrace.sources.objectstore import is_uri
from servetrace.sources.paths import entries_of, has_magic
from servetrace.sources.reading import read_text, strip_suffixes
from servetrace.sources.registry import detect_format, format_of_inputs
from servetrace.sources.summary_files import summary_kind

# The file that makes a directory a partial result (``analysis.partial_io``).
PARTIAL_MANIFEST = "manifest.json"


@dataclass(frozen=True)
class RunSource:
    """What one run is read from.

    ``fmt`` is the importer (``--from`` name), or None for a canonical event log read
    from ``texts`` (files, globs, directories of parts, as the canonical reader takes
    them). ``benchmark`` picks one benchmark of a GuideLLM file holding several.
    ``summary`` is the tool's summary file when one was found beside the export (or
    is all there is: ``summary_only``). ``partials``: ``paths`` are partial results to
    merge. ``notes`` say what resolving decided.
    """

    paths: tuple[Path, ...]
    fmt: str | None
    texts: tuple[str, ...] = ()
    benchmark: int | None = None
    summary: Path | None = None
    summary_only: bool = False
    notes: tuple[str, ...] = ()
    # A summary file may hold several runs (vLLM's benchmark_results.json): which one.
    summary_row: int | None = None
    partials: bool = False

    @property
    def where(self) -> Path:
        """The path that names this run (for labels)."""
        if self.paths:
            return self.paths[0]
        assert self.summary is not None
        return self.summary

    @property
    def trace_texts(self) -> list[str]:
        """The arguments the canonical reader takes for this run."""
        return list(self.texts) or [str(p) for p in self.paths]


def is_partial(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a directory holding a partial result's manifest."""
    return (Path(path) / PARTIAL_MANIFEST).is_file()


RUN_FORMATS = frozenset({"aiperf", "genai-perf", "vllm-bench", "guidellm", "llmperf", "blis"})

# File names each tool gives its per-request export inside a run folder.
_NAMED_EXPORTS = {
    "profile_export.jsonl": "aiperf",
    "profile_export.json": "genai-perf",
    "benchmarks.json": "guidellm",
}
# Companions that are never runs: commands, inputs, the tools' console logs.
_NOT_RUNS = re.compile(
    r"(^inputs\.json|^run_info\.json|^client_stdout|\.commands$|\.txt$|\.csv$|\.pdf$|"
    r"^profile_export_raw\.jsonl)",
)
_JSONISH = (".json", ".jsonl", ".gz")


def _visible(folder: Path) -> tuple[list[Path], list[Path]]:
    """The files and the folders (not symlinked ones) of ``folder``, hidden ones skipped."""
    entries = [e for e in entries_of(folder) if not e.name.startswith(".")]
    files = [Path(e.path) for e in entries if e.is_file()]
    return files, [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]


def per_request_beside(summary: Path, kind: str) -> list[Path]:
    """The per-request files a summary summarises, when they exist."""
    bare = strip_suffixes(summary, ".gz", ".json")
    folder = summary.parent
    candidates: list[Path] = []
    if kind == "aiperf":
        stem = bare.removesuffix("_aiperf")
        candidates = [folder / f"{stem}.jsonl", folder / f"{stem}.jsonl.gz"]
    elif kind == "genai-perf":
        stem = bare.removesuffix("_genai_perf")
        candidates = [folder / f"{stem}.json", folder / f"{stem}.json.gz"]
    elif kind == "guidellm":
        stem = strip_suffixes(summary, ".csv")
        candidates = [folder / f"{stem}.json", folder / f"{stem}.json.gz"]
    elif kind == "llmperf":
        stem = bare.removesuffix("_summary")
        candidates = [
            folder / f"{stem}_individual_responses.json",
            folder.parent / "individual" / f"{bare}.json",
            folder.parent / "individual" / f"{bare}.json.gz",
        ]
    elif kind == llmd_report.KIND:
        return [p for p in llmd_report.native_beside(summary) if _export_format(p) is not None]
    elif kind == "vllm-bench":
        files, dirs = _visible(folder)
        found = [f for f in files if _export_format(f) == "vllm-bench"]
        if summary.name.lower() == "cumulative_results.md":
            for sub in dirs:
                found += [f for f in _visible(sub)[0] if _export_format(f) == "vllm-bench"]
        return found
    return [c for c in candidates if c.is_file()]


def _export_format(path: Path) -> str | None:
    """The run format of a per-request export, or None (not one, or a summary)."""
    name = path.name.lower()
    if _NOT_RUNS.search(name) or not name.endswith(_JSONISH):
        return None
    bare = strip_suffixes(path, ".gz")
    if bare in _NAMED_EXPORTS:
        return _NAMED_EXPORTS[bare] if detect_format(path) == _NAMED_EXPORTS[bare] else None
    if summary_kind(path) is not None:
        return None
    try:
        fmt = detect_format(path)
    except InputError:
        return None
    return fmt if fmt in RUN_FORMATS else None


def _summary_source(
    path: Path, kind: str, note: str | None = None, row: int | None = None
) -> RunSource:
    return RunSource(
        paths=(),
        fmt=kind,
        summary=path,
        summary_only=True,
        notes=(note or f"{path}: only {kind}'s summary: its own numbers are reported",),
        summary_row=row,
    )


def _folder_runs(folder: Path, depth: int = 0) -> list[RunSource] | None:
    """Runs in a run folder or a folder of run folders; None when it holds no run."""
    files, dirs = _visible(folder)
    exports = [(f, fmt) for f in files if (fmt := _export_format(f)) is not None]
    summaries = [(f, k) for f in files if (k := summary_kind(f)) is not None]
    twins = llmd_report.superseded([f for f, k in summaries if k == llmd_report.KIND])
    summaries = [(f, k) for f, k in summaries if f not in twins]
    found: list[RunSource] = []
    covered: set[Path] = set()
    for path, fmt in exports:
        found.append(RunSource(paths=(path,), fmt=fmt))
        covered.add(path)
    for data, header in blis_files.in_folder(files):
        found.append(_blis_source(data, header))
        covered.add(data)
    if depth < 3:
        for sub in dirs:
            inner = _folder_runs(sub, depth + 1)
            if inner:
                found += inner
                covered.update(p for source in inner for p in source.paths)
    if not found and not summaries:
        return None
    notes: list[str] = list(twins.values())
    for path, kind in summaries:
        beside = [p for p in per_request_beside(path, kind) if p in covered or p.exists()]
        for other in beside:  # the per-request file lives elsewhere (LLMPerf's individual/)
            if other not in covered and (fmt := _export_format(other)) is not None:
                found.append(RunSource(paths=(other,), fmt=fmt))
                covered.add(other)
        if beside:
            verb = "is" if len(beside) == 1 else "are"
            listed = ", ".join(p.name for p in beside[:3]) + (", …" if len(beside) > 3 else "")
            notes.append(
                f"{path}: {kind}'s summary, not a per-request file: the per-request "
                f"file{'s' if len(beside) > 1 else ''} beside it ({listed}) {verb} "
                "analysed instead"
            )
        else:
            found.extend(_summary_sources(path, kind))
    if notes and found:
        found[0] = replace(found[0], notes=(*found[0].notes, *notes))
    return found or None


def _summary_sources(path: Path, kind: str) -> list[RunSource]:
    """A summary alone: one reported run (vLLM's benchmark_results.json: one per row)."""
    if kind == "vllm-bench" and path.name.lower().startswith("benchmark_results"):
        try:
            rows = json.loads(read_text(path))
        except (InputError, json.JSONDecodeError, RecursionError):
            rows = None
        if isinstance(rows, list) and rows:
            note = f"{path}: only vLLM's summary: its own numbers are reported"
            return [_summary_source(path, kind, note, index) for index in range(len(rows))]
    if kind == "guidellm":  # benchmarks.csv: one run per benchmark row
        return [_summary_source(path, kind, row=index) for index in range(max(1, count_rows(path)))]
    if kind == "vllm-bench":  # cumulative_results.md alone: a table, not a run
        return []
    return [_summary_source(path, kind)]


def _blis_source(data: Path, header: Path | None) -> RunSource:
    """A BLIS trace: its CSV, read with its YAML header (kept as its ``summary``)."""
    return RunSource(paths=(data,), fmt="blis", summary=header)


def _unique(sources: list[RunSource]) -> list[RunSource]:
    """Each run once: a per-request file found from its folder and from its summary's."""
    seen: dict[tuple[object, ...], int] = {}
    out: list[RunSource] = []
    for source in sources:
        key = (
            tuple(p.resolve() for p in source.paths),
            source.fmt,
            source.benchmark,
            source.summary.resolve() if source.summary_only and source.summary else None,
            source.summary_row,
        )
        if key in seen:
            kept = out[seen[key]]
            out[seen[key]] = replace(kept, notes=(*kept.notes, *source.notes))
            continue
        seen[key] = len(out)
        out.append(source)
    return out


def _expand(text: str) -> list[Path]:
    path = Path(text)
    if path.exists() or not has_magic(text) or is_uri(text):  # a URI is resolved when read
        return [path]
    return resolve_paths([text])


def discover(texts: Sequence[str], from_format: str | None = None) -> list[RunSource]:
    """The runs of the user's inputs, in the order given (``InputError`` on bad input)."""
    sources: list[RunSource] = []
    rest: list[str] = []
    notes: list[str] = []
    for text in texts:
        path = Path(text)
        if from_format is None and path.is_dir():
            found = _folder_runs(path)
            if found is not None:
                sources += found
                continue
            rest.append(text)
            continue
        if from_format is not None:
            if from_format == "guidellm" and path.is_file() and is_benchmarks_csv(path):
                sources.extend(_summary_sources(path, "guidellm"))  # no JSON to import
            else:
                rest.append(text)
            continue
        expanded = _expand(text)
        kinds = {p: summary_kind(p) for p in expanded if p.is_file()}
        if not any(kinds.values()):
            rest.append(text)
            continue
        given = {p.resolve() for p in expanded}
        for p in expanded:
            kind = kinds.get(p)
            if kind is None:
                rest.append(str(p))
                continue
            beside = per_request_beside(p, kind)
            if beside:
                chosen = [b for b in beside if b.resolve() not in given]
                notes.append(
                    f"{p}: {kind}'s summary, not a per-request file: using "
                    f"{', '.join(str(b) for b in beside[:3])}{', …' if len(beside) > 3 else ''}"
                    " beside it"
                )
                rest.extend(str(b) for b in chosen)
                given.update(b.resolve() for b in chosen)
            else:
                sources.extend(_summary_sources(p, kind))
    if rest:
        fmt, paths = format_of_inputs(rest, from_format)
        if fmt == "blis":
            sources += [_blis_source(data, header) for data, header in blis_files.pair(paths)]
        elif fmt in RUN_FORMATS:
            names = {p.name for p in paths}
            for p in paths:
                # AIPerf's raw file is read with its profile_export.jsonl, not apart.
                if p.name.startswith("profile_export_raw") and any(
                    n.startswith("profile_export.jsonl") for n in names
                ):
                    continue
                sources.append(RunSource(paths=(p,), fmt=fmt))
        else:
            sources.append(RunSource(paths=tuple(paths), fmt=fmt, texts=tuple(rest)))
    sources = _unique(sources)
    if not sources:
        raise InputError(
            f"{', '.join(texts)}: nothing to analyse: "
            + ("; ".join(notes) if notes else "no run, trace or summary servetrace can read"),
            hint="cumulative_results.md is a table of runs: give the folder of runs beside it"
            if any(t.lower().endswith("cumulative_results.md") for t in texts)
            else "servetrace reads canonical traces and the exports listed by --from",
        )
    if notes and sources:
        sources[0] = replace(sources[0], notes=(*sources[0].notes, *notes))
    return sources


def _partials(texts: Sequence[str]) -> list[Path] | None:
    """The partial directories ``texts`` name (globs expanded), or None when none is one;
    a mix of partials and traces is refused."""
    found: list[Path] = []
    others: list[str] = []
    for text in texts:
        matches = sorted(glob.glob(text)) if has_magic(text) and not is_uri(text) else [text]
        for match in matches or [text]:
            (found.append(Path(match)) if is_partial(match) else others.append(match))
    if not found:
        return None
    if others:
        raise InputError(
            f"{found[0]} is a partial result but {others[0]} is not: partials merge only "
            "with partials",
            hint="give the partials of one trace's shards, or the traces themselves",
        )
    return found


def resolve(texts: Sequence[str], from_format: str | None = None) -> list[RunSource]:
    """The runs of the user's inputs, in the order given: the one way in of every
    command (``InputError`` on bad input, ``UsageError`` when nothing was given)."""
    if not texts:
        raise UsageError("no trace given")
    partials = _partials(texts) if from_format is None else None
    if partials is not None:
        return [RunSource(paths=tuple(partials), fmt=None, texts=tuple(texts), partials=True)]
    return discover(texts, from_format)
