#!/usr/bin/env bash
# Creates benchmarks/.venv-peers with the peer systems the harness compares kiln
# against: JAX (jax.jit on CPU) and IREE (compiler + runtime). They live in their
# own virtual environment, never in kiln's dependencies; the harness runs them
# in subprocesses through this venv's python.
#
#   bash benchmarks/setup_peers.sh            # create or update the venv
#   PYTHON=python3.12 bash benchmarks/setup_peers.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv-peers"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet numpy jax jaxlib iree-base-compiler iree-base-runtime
"$venv/bin/python" - <<'PY'
import importlib.metadata as md
for name in ("numpy", "jax", "jaxlib", "iree-base-compiler", "iree-base-runtime"):
    try:
        print(f"{name} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name} missing")
PY
echo "peers installed in $venv"
