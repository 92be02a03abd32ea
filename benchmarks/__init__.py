"""kiln's comparison harness: workloads timed in kiln, numpy and peer compilers.

Run it with ``python -m benchmarks.run`` (see benchmarks/README.md). This
package imports nothing beyond numpy at import time, because the same
workload modules are imported by workers running in the peers' virtual
environment (benchmarks/.venv-peers), where kiln is not installed.
"""
