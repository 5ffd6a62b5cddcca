#!/usr/bin/env bash
# Install Debian's chromium for the test that renders the HTML reports (tests/test_report.py).
# Never fails the build: without chromium that one test skips, and this script says why.
set -u

for name in chromium chromium-browser google-chrome google-chrome-stable; do
    if command -v "$name" >/dev/null 2>&1; then
        echo "chromium.sh: found $name ($("$name" --version 2>/dev/null | head -n 1))"
        exit 0
    fi
done

if ! command -v apt-get >/dev/null 2>&1; then
    echo "chromium.sh: no chromium and no apt-get on this machine: the HTML rendering test will skip"
    exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo="sudo -n"
    else
        echo "chromium.sh: not root and no password-less sudo: cannot apt-get install chromium;" \
             "the HTML rendering test will skip"
        exit 0
    fi
fi

log=$(mktemp)
export DEBIAN_FRONTEND=noninteractive
# --no-install-recommends: the headless test needs the browser only (~100 MB less to fetch).
if $sudo apt-get update -qq >"$log" 2>&1 \
    && $sudo apt-get install -y -qq --no-install-recommends chromium >>"$log" 2>&1; then
    echo "chromium.sh: installed $(chromium --version 2>/dev/null | head -n 1)"
else
    echo "chromium.sh: apt-get could not install chromium (last lines below);" \
         "the HTML rendering test will skip"
    tail -n 5 "$log"
fi
rm -f "$log"
exit 0
