#!/usr/bin/env bash
# Renders a run's reports/report.html with headless Chromium into a PNG of the whole page, to
# check by eye that it draws (it is not part of `swift test`).
#
#   Scripts/screenshot-report.sh <report.html> [out.png] [width]
#
# out.png defaults to report.png in the current folder: a published run is never written to.
# The height is the page's own, measured first with the same browser and width.
# Chromium is the Debian package `chromium`; when it is missing and we are root, it is installed.
set -euo pipefail

if [[ $# -lt 1 || ! -f $1 ]]; then
    echo "usage: $0 <report.html> [out.png=./report.png] [width=1000]" >&2
    exit 64
fi
html=$(realpath "$1")
out=$(realpath -m "${2:-report.png}")
width=${3:-1000}
# A page in a run's reports/ folder: the screenshot must not land in that run.
if [[ $(basename "$(dirname "$html")") == reports ]]; then
    case $out in
    "$(dirname "$(dirname "$html")")"/*)
        echo "$0: $out is inside the published run; write the screenshot elsewhere" >&2
        exit 64
        ;;
    esac
fi

browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $browser ]]; then
    if [[ $(id -u) -eq 0 ]]; then
        apt-get update -qq && apt-get install -y -qq chromium >/dev/null
        browser=$(command -v chromium)
    else
        echo "$0: chromium is not installed (sudo apt-get install -y chromium)" >&2
        exit 69
    fi
fi

# A throwaway profile, so nothing is read from or left in the user's; --no-sandbox because CI
# and containers run as root, where Chromium's sandbox refuses to start.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run --user-data-dir="$work/profile")

# The page has no script of its own; a copy with one line that records its height is measured.
sed 's#</body>#<script>document.body.setAttribute("data-height", document.documentElement.scrollHeight)</script></body>#' \
    "$html" >"$work/measure.html"
height=$("$browser" "${flags[@]}" --window-size="$width,800" --dump-dom "file://$work/measure.html" 2>/dev/null \
    | grep -o 'data-height="[0-9]*"' | grep -o '[0-9]*' || true)
if [[ -z $height ]]; then
    echo "$0: could not measure the page's height" >&2
    exit 70
fi

"$browser" "${flags[@]}" --window-size="$width,$height" --screenshot="$out" "file://$html" 2>/dev/null
[[ -s $out ]] || { echo "$0: no screenshot written" >&2; exit 70; }
echo "$out ($width × $height)"
