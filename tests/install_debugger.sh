#!/usr/bin/env bash
# Installs GDB (Debian's `gdb`) when missing, for tests/test_gdb_jit.py, which runs gdb in batch mode
# on kiln-run to check that kernels registered through GDB's JIT interface are named in a backtrace
# (`make debugger`). Idempotent. Without root/sudo or apt-get it says so and exits 0: that test then
# skips, naming why.
set -euo pipefail

if command -v gdb >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "tests/install_debugger.sh: no root or sudo: not installing gdb (its test will skip)" >&2
    exit 0
  fi
  SUDO=sudo
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "tests/install_debugger.sh: no apt-get: install gdb by hand (its test will skip)" >&2
  exit 0
fi
echo "tests/install_debugger.sh: installing gdb (for the GDB JIT interface test)"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq gdb >/dev/null
