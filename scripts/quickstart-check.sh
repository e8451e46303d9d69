#!/usr/bin/env bash
# Runs the README's first quick-start command exactly as written (taken from README.md, not
# copied here) and checks that it printed the audit report: the metric table and the
# function table of the bundled workload. Part of scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=$(awk '/<!-- quickstart:audit -->/{getline; getline; print; exit}' README.md)
[ -n "$cmd" ] || { echo "quickstart-check: README.md has no '<!-- quickstart:audit -->' block" >&2; exit 1; }
echo "+ $cmd"
out=$(bash -c "$cmd" 2>&1) || { echo "$out"; echo "quickstart-check: the command failed" >&2; exit 1; }
for want in 'epsilon (function)' 'NRMSE_SR' 'Kendall tau-b' 'price_rows' '95% CI' 'seed:'; do
  grep -qF -- "$want" <<<"$out" || { echo "$out"; echo "quickstart-check: output lacks '$want'" >&2; exit 1; }
done
echo "quickstart-check: ok"
