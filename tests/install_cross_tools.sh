#!/usr/bin/env bash
# Installs what the cross-target tests need from Debian's packages: a cross C
# compiler with its C library, and qemu-user to run the binaries.
#
#   bash tests/install_cross_tools.sh [--check] aarch64|riscv64 ...
#
# Exits 0 when every tool of the named architectures is present (installing the
# missing packages first, as root with apt-get), 1 when one is missing and
# cannot be installed (not root, no apt-get, or the install failed); --check
# only says whether they are present, installing nothing. Nothing outside the
# package manager is touched (no wrappers, no files in system paths by hand).
set -u

check_only=0
arches=()
for arg in "$@"; do
  case "$arg" in
    --check) check_only=1 ;;
    aarch64|riscv64) arches+=("$arg") ;;
    *) echo "install_cross_tools.sh: unknown argument '$arg' (expected --check, aarch64 or riscv64)" >&2; exit 2 ;;
  esac
done
[ ${#arches[@]} -gt 0 ] || arches=(aarch64)

tools=()
packages=()
for arch in "${arches[@]}"; do
  case "$arch" in
    aarch64)
      tools+=(aarch64-linux-gnu-gcc aarch64-linux-gnu-objcopy qemu-aarch64)
      packages+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils-aarch64-linux-gnu qemu-user) ;;
    riscv64)
      tools+=(riscv64-linux-gnu-gcc riscv64-linux-gnu-objcopy qemu-riscv64)
      packages+=(gcc-riscv64-linux-gnu libc6-dev-riscv64-cross binutils-riscv64-linux-gnu qemu-user) ;;
  esac
done

missing() {
  local m=()
  for t in "${tools[@]}"; do command -v "$t" >/dev/null 2>&1 || m+=("$t"); done
  echo "${m[@]:-}"
}

gone=$(missing)
[ -z "$gone" ] && exit 0
if [ "$check_only" = 1 ]; then
  echo "missing cross tools: $gone" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "missing cross tools: $gone; install the Debian packages ${packages[*]} (needs root and apt-get)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q --no-install-recommends "${packages[@]}" >/tmp/kiln-cross-apt.log 2>&1; then
  # The package lists may be stale or absent: refresh them once and retry.
  apt-get update -q >>/tmp/kiln-cross-apt.log 2>&1
  apt-get install -y -q --no-install-recommends "${packages[@]}" >>/tmp/kiln-cross-apt.log 2>&1
fi
gone=$(missing)
if [ -n "$gone" ]; then
  echo "could not install the cross tools ($gone still missing; see /tmp/kiln-cross-apt.log)" >&2
  exit 1
fi
exit 0
