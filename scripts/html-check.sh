#!/usr/bin/env bash
# Loads a proftrust HTML report in headless Chromium and checks that it renders without
# console errors and that its inline SVG plots are present.
#
#   bash scripts/html-check.sh REPORT.html [PLOT_ID...]
#
# PLOT_ID defaults to: plot-functions plot-instructions (any element id: the audit's flame
# graphs are flame-sampled, flame-exact, flame-diff; annotated functions annotate-N).
# SCREENSHOT=FILE.png also saves a 1200x3000 screenshot; DOM_OUT=FILE.html saves the
# rendered DOM (Chromium's --dump-dom) for the caller to inspect. Exit 0 = good, 1 = problem,
# 77 = Chromium is not installed (callers print SKIP). Install: apt-get install -y chromium
set -euo pipefail
file="${1:?usage: html-check.sh REPORT.html [PLOT_ID...]}"
shift
ids=("$@")
[ ${#ids[@]} -eq 0 ] && ids=(plot-functions plot-instructions)
chrome=""
for c in chromium chromium-browser google-chrome; do
  if command -v "$c" >/dev/null 2>&1; then chrome="$c"; break; fi
done
if [ -z "$chrome" ]; then
  echo "SKIP: html-check: chromium not installed (apt-get install -y chromium)" >&2
  exit 77
fi
[ -f "$file" ] || { echo "html-check: no such file: $file" >&2; exit 1; }
abs="$(cd "$(dirname "$file")" && pwd)/$(basename "$file")"
profile="$(mktemp -d)"
out="$(mktemp)"; log="$(mktemp)"
trap 'rm -rf "$profile" "$out" "$log"' EXIT
timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --disable-background-networking \
  --disable-component-update --no-first-run --user-data-dir="$profile" \
  --enable-logging=stderr --v=0 --dump-dom "file://$abs" >"$out" 2>"$log" || {
  echo "html-check: chromium failed:" >&2; tail -20 "$log" >&2; exit 1; }
status=0
if grep -E "CONSOLE|Uncaught|Refused to" "$log" | grep -v "^$" >/dev/null; then
  echo "html-check: console errors while loading $file:" >&2
  grep -E "CONSOLE|Uncaught|Refused to" "$log" >&2
  status=1
fi
if ! grep -q "</html>\|</body>" "$out"; then
  echo "html-check: the DOM dump is incomplete" >&2; status=1
fi
n=$(grep -o '<svg class="plot"' "$out" | wc -l)
[ -n "${DOM_OUT:-}" ] && cp "$out" "$DOM_OUT"
for id in "${ids[@]}"; do
  if ! grep -q "id=\"$id\"" "$out"; then
    echo "html-check: plot $id missing from the rendered DOM" >&2; status=1
  fi
done
if [ -n "${SCREENSHOT:-}" ]; then
  timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --no-first-run --user-data-dir="$profile" --hide-scrollbars \
    --window-size=1200,3000 --screenshot="$SCREENSHOT" "file://$abs" >/dev/null 2>>"$log" || {
    echo "html-check: screenshot failed:" >&2; tail -20 "$log" >&2; status=1; }
  [ -s "$SCREENSHOT" ] || { echo "html-check: no screenshot written" >&2; status=1; }
fi
if [ "$status" -eq 0 ]; then
  echo "html-check: ok: $file rendered, $n svg plots (${ids[*]})"
fi
exit "$status"
