#!/usr/bin/env bash
# Installs one Debian package when none of its commands is on PATH, for a test that needs a tool
# kiln does not depend on (`make browser`: chromium; `make debugger`: gdb). Idempotent. Without
# root/sudo or apt-get it says so and exits 0: the test that needs the tool then skips, naming why.
#
#   bash tests/install_debian_package.sh PACKAGE "COMMAND [COMMAND...]" "what it is for"
set -euo pipefail

package="$1" commands="$2" purpose="$3"
for command in $commands; do
  if command -v "$command" >/dev/null 2>&1; then
    exit 0
  fi
done
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "$0: no root or sudo: not installing $package (its test will skip)" >&2
    exit 0
  fi
  SUDO=sudo
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "$0: no apt-get: install $package by hand (its test will skip)" >&2
  exit 0
fi
echo "$0: installing $package ($purpose)"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "$package" >/dev/null
