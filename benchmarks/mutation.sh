#!/usr/bin/env bash
# Mutation testing of the numeric core (configured in pyproject.toml [tool.mutmut]; the
# score and the judged survivors are in benchmarks/mutation.md).
#
#   benchmarks/mutation.sh [WORKDIR [MUTANT-PATTERN ...]]
#
# e.g. benchmarks/mutation.sh ../mutation-work 'servetrace.analysis.formula*' runs one module's
# mutants (mutmut's names: module.function__mutmut_N; patterns are fnmatch globs).
#
# MUTMUT_TESTS="tests/a.py tests/b" replaces the test selection of [tool.mutmut] in the
# copy (the tests each mutant may run: fewer, faster files make a module's run finish on
# a loaded machine), e.g. for the lifecycle, metrics and streaming run of mutation.md.
#
# MUTMUT_ONLY="servetrace/analysis/summary.py servetrace/stats/*" replaces only_mutate in
# the copy: mutants are generated for those files alone (5 s instead of 6 min).
#
# Runs in WORKDIR (default: a new temporary directory) on a copy of the working tree's
# tracked and untracked-but-not-ignored files, so the checkout gets no mutants/ folder
# and you can keep editing while it runs. Niced; MUTMUT_CHILDREN workers (default 2).
# At the end it prints the summary and the surviving mutants; `mutmut show NAME` in
# WORKDIR shows one of them. Run it with the project's virtualenv active (mutmut is in
# the dev extra).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d -t servetrace-mutation.XXXXXX)}
shift || true
mkdir -p "$work"
(cd "$root" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) |
    tar -xf - -C "$work"
cd "$work"
if [ -n "${MUTMUT_ONLY:-}" ]; then
    MUTMUT_ONLY="$MUTMUT_ONLY" python - <<'PY'
import json, os, pathlib, re
p = pathlib.Path("pyproject.toml")
files = json.dumps(os.environ["MUTMUT_ONLY"].split())
text = re.sub(r"^only_mutate = \[.*?\]", lambda _: "only_mutate = " + files, p.read_text(),
              count=1, flags=re.M | re.S)
p.write_text(text)
PY
fi
if [ -n "${MUTMUT_TESTS:-}" ]; then
    MUTMUT_TESTS="$MUTMUT_TESTS" python - <<'PY'
import json, os, pathlib, re
p = pathlib.Path("pyproject.toml")
tests = json.dumps(os.environ["MUTMUT_TESTS"].split())
text = re.sub(r"^pytest_add_cli_args_test_selection = .*$",
              "pytest_add_cli_args_test_selection = " + tests, p.read_text(), flags=re.M)
p.write_text(text)
PY
fi
echo "mutation run in $work"
start=$(date +%s)
nice -n "${MUTMUT_NICE:-10}" python -m mutmut run --max-children "${MUTMUT_CHILDREN:-2}" "$@" || true
echo "wall time: $(( $(date +%s) - start )) s"
# Score by module, from mutmut's own records (exit code per mutant; None = not run yet).
python - <<'PY'
import collections, json, pathlib
from mutmut.stats import status_by_exit_code
print("| module | killed | survived | no tests | timeout/other | not run | total |")
print("|---|---:|---:|---:|---:|---:|---:|")
for meta in sorted(pathlib.Path("mutants").rglob("*.py.meta")):
    codes = json.loads(meta.read_text())["exit_code_by_key"].values()
    n = collections.Counter(status_by_exit_code[c] for c in codes)
    other = sum(v for k, v in n.items() if k not in ("killed", "survived", "no tests", "not checked"))
    name = str(meta.relative_to("mutants"))[: -len(".meta")]
    print(f"| {name} | {n['killed']} | {n['survived']} | {n['no tests']} | {other} "
          f"| {n['not checked']} | {sum(n.values())} |")
PY
python -m mutmut results
