#!/usr/bin/env bash
# Renders a run's reports/report.html with headless Chromium into a PNG, to check by eye that
# the page draws (it is not part of `swift test`).
#
#   Scripts/screenshot-report.sh <report.html> [out.png] [width] [height]
#
# Chromium is the Debian package `chromium`; when it is missing and we are root, it is installed.
set -euo pipefail

if [[ $# -lt 1 || ! -f $1 ]]; then
    echo "usage: $0 <report.html> [out.png] [width=1000] [height=2600]" >&2
    exit 64
fi
html=$(realpath "$1")
out=$(realpath -m "${2:-${html%.html}.png}")
width=${3:-1000}
height=${4:-2600}

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
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$profile" --window-size="$width,$height" \
    --screenshot="$out" "file://$html" 2>/dev/null
[[ -s $out ]] || { echo "$0: no screenshot written" >&2; exit 70; }
echo "$out"
