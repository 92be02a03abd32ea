#!/usr/bin/env bash
# Installs what the fuzz targets need when it is missing: clang with libFuzzer.
# Idempotent: does nothing when clang can already build a libFuzzer target.
#
# Debian/Ubuntu: `clang` (bookworm: clang-14), and libclang_rt.fuzzer comes from
# `libclang-rt-<major>-dev`, which clang only recommends, so it is installed
# explicitly when missing. Needs root (or sudo) for apt-get.
set -euo pipefail

can_build_fuzzer() {
  command -v clang >/dev/null 2>&1 || return 1
  local dir rc
  dir=$(mktemp -d)
  printf 'int LLVMFuzzerTestOneInput(const unsigned char* d, unsigned long n) {\n'\
'  (void)d; (void)n; return 0;\n}\n' >"$dir/t.c"
  clang -fsanitize=fuzzer,address,undefined "$dir/t.c" -o "$dir/t" >/dev/null 2>&1 && rc=0 || rc=1
  rm -rf "$dir"
  return $rc
}

if can_build_fuzzer; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "fuzz/setup.sh: need root or sudo to install clang" >&2; exit 1; }
  SUDO=sudo
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "fuzz/setup.sh: no apt-get: install clang with libFuzzer (compiler-rt) by hand" >&2
  exit 1
fi

echo "fuzz/setup.sh: installing clang with libFuzzer"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
command -v clang >/dev/null 2>&1 || $SUDO apt-get install -y -qq clang >/dev/null
if ! can_build_fuzzer; then
  major=$(clang --version | sed -n 's/.*clang version \([0-9][0-9]*\).*/\1/p' | head -n 1)
  $SUDO apt-get install -y -qq "libclang-rt-${major}-dev" >/dev/null
fi
if ! can_build_fuzzer; then
  echo "fuzz/setup.sh: clang cannot build a libFuzzer target (-fsanitize=fuzzer)" >&2
  exit 1
fi
echo "fuzz/setup.sh: $(clang --version | head -n 1)"
