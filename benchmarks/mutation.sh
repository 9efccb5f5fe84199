#!/usr/bin/env bash
# Mutation testing of the numeric core (configured in pyproject.toml [tool.mutmut]; the
# score and the judged survivors are in benchmarks/mutation.md).
#
#   benchmarks/mutation.sh [WORKDIR]
#
# Runs in WORKDIR (default: a new temporary directory) on a copy of the working tree's
# tracked and untracked-but-not-ignored files, so the checkout gets no mutants/ folder
# and you can keep editing while it runs. Niced; MUTMUT_CHILDREN workers (default 2).
# At the end it prints the summary and the surviving mutants; `mutmut show NAME` in
# WORKDIR shows one of them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d -t servetrace-mutation.XXXXXX)}
mkdir -p "$work"
(cd "$root" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) |
    tar -xf - -C "$work"
cd "$work"
echo "mutation run in $work"
start=$(date +%s)
nice -n 10 mutmut run --max-children "${MUTMUT_CHILDREN:-2}" || true
echo "wall time: $(( $(date +%s) - start )) s"
mutmut export-cicd-stats >/dev/null 2>&1 && cat mutants/mutmut-cicd-stats.json && echo
mutmut results
