#!/usr/bin/env bash
# Installs headless Chromium (Debian's `chromium`) when missing, for the test that loads
# `kiln dump --html`'s page in a real browser (tests/test_module_graph.py). Idempotent.
# Without root/sudo or apt-get it says so and exits 0: that one test then skips, naming why.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "tests/html/setup_browser.sh: no root or sudo: not installing Chromium (its test will skip)" >&2
    exit 0
  fi
  SUDO=sudo
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "tests/html/setup_browser.sh: no apt-get: install Chromium by hand (its test will skip)" >&2
  exit 0
fi
echo "tests/html/setup_browser.sh: installing chromium (headless browser for the HTML page test)"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium >/dev/null
