"""Formatting the measurements as Markdown tables (printed, and pasted into the README).

Table 1 gives time per call: median with the minimum in parentheses (kiln-run's
from its --benchmark statistics), then kiln.jit's time over each other system's
(above 1: kiln is slower), from the medians or, with basis "min", from the
minima. Table 2 gives the first call (compilation included), the peak RSS
growth and the page faults per timed call (a steady-state call that allocates
its intermediates afresh shows here). Cells say WRONG,
error or skip where a system did not produce a checked time. Table 3 gives, per workload,
kiln-run's achieved bandwidth on memory-bound workloads (the workload's bytes_moved over its
minimum time, in GB/s) and the measured STREAM bandwidth over it (issue 10's target: at most
1.3x), beside its planned memory bound (the function's transient arena), its ΔRSS and page faults
per call.

    python -m benchmarks.report --markdown out.json     # the report of a `benchmarks.run --json` file
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SYSTEMS = ("numpy", "kiln", "kiln-run", "jax", "iree")
RATIO_TO = ("numpy", "jax", "iree")


def format_seconds(s: float | None) -> str:
    if s is None:
        return "—"
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1.0:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def _same_unit(s: float, like: float) -> str:
    if like < 1e-3:
        return f"{s * 1e6:.1f}"
    if like < 1.0:
        return f"{s * 1e3:.2f}"
    return f"{s:.2f}"


def format_bytes(n: int | None) -> str:
    if n is None:
        return "—"
    return f"{n / 2**20:.1f} MiB"


def format_size(n: int | None) -> str:
    """Bytes in the unit that keeps small sizes readable (B, KiB, MiB, GiB)."""
    if n is None:
        return "—"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def gb_per_s(r: dict | None) -> float | None:
    """Achieved bandwidth of a checked result: its bytes_moved over its minimum time (best of the
    calls, as STREAM takes its best repetition), in 10^9 bytes/s; None when not memory-bound."""
    if not r or r.get("bytes_moved") is None or r.get("status") != "ok" or r.get("check") != "ok":
        return None
    return r["bytes_moved"] / r["min_s"] / 1e9 if r.get("min_s") else None


def stream_ratio(r: dict | None, stream: dict | None) -> float | None:
    """STREAM's bandwidth over the achieved one (1.0: as fast as STREAM; the target is <= 1.3)."""
    achieved = gb_per_s(r)
    if not achieved or not stream or not stream.get("reference_gb_per_s"):
        return None
    return stream["reference_gb_per_s"] / achieved


def typical_time(r: dict, basis: str = "median") -> float | None:
    """The time a ratio compares: the minimum for basis "min"; otherwise the median, or the
    mean where only that exists (kiln-run). None unless the result ran and checked ok."""
    if r.get("status") != "ok" or r.get("check") != "ok":
        return None
    if basis == "min":
        return r["min_s"]
    return r["median_s"] if r.get("median_s") is not None else r.get("mean_s")


def time_cell(r: dict | None) -> str:
    if r is None:
        return "—"
    if r.get("status") == "skipped":
        return "skip"
    if r.get("status") != "ok":
        return "error"
    t = r["median_s"] if r.get("median_s") is not None else r["mean_s"]
    cell = f"{format_seconds(t)} ({_same_unit(r['min_s'], t)})"
    return cell if r.get("check") == "ok" else f"WRONG {cell}"


def ratio_cell(kiln: dict | None, other: dict | None, basis: str = "median") -> str:
    a = typical_time(kiln, basis) if kiln else None
    b = typical_time(other, basis) if other else None
    if not a or not b:
        return "—"
    return f"{a / b:.2f}x"


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    return "\n".join(lines)


def group_rows(results: list[dict]) -> list[tuple[str, str, dict]]:
    """(workload, size, {system: result}) in the order the results were measured."""
    groups: dict[tuple[str, str], dict] = {}
    for r in results:
        groups.setdefault((r["workload"], r["size"]), {})[r["system"]] = r
    return [(w, s, by_system) for (w, s), by_system in groups.items()]


def time_table(results: list[dict], systems=SYSTEMS, basis: str = "median") -> str:
    header = ["workload", "size", *systems]
    ratios = [o for o in RATIO_TO if o in systems and "kiln" in systems]
    header += [f"kiln/{o}" for o in ratios]
    rows = []
    for workload, size, by in group_rows(results):
        row = [workload, size, *(time_cell(by.get(s)) for s in systems)]
        row += [ratio_cell(by.get("kiln"), by.get(o), basis) for o in ratios]
        rows.append(row)
    return _table(header, rows)


def first_call_and_memory_table(results: list[dict], systems=SYSTEMS) -> str:
    compiled = [s for s in systems if s != "numpy"]
    header = ["workload", "size", *(f"{s} first call" if s != "kiln-run" else "kiln export" for s in compiled),
              *(f"ΔRSS {s}" for s in systems), *(f"faults/call {s}" for s in systems)]
    rows = []
    for workload, size, by in group_rows(results):
        row = [workload, size]
        for s in compiled:
            r = by.get(s)
            row.append(format_seconds(r.get("first_call_s")) if r and r.get("status") == "ok" else "—")
        for s in systems:
            r = by.get(s)
            row.append(format_bytes(r.get("peak_rss_delta")) if r and r.get("status") == "ok" else "—")
        for s in systems:
            r = by.get(s)
            faults = r.get("page_faults_per_call") if r and r.get("status") == "ok" else None
            row.append("—" if faults is None else f"{faults:.1f}")
        rows.append(row)
    return _table(header, rows)


def bandwidth_and_memory_table(results: list[dict], stream: dict | None, system: str = "kiln-run") -> str:
    """Per workload and size: the bytes a call moves, the system's GB/s and STREAM/its GB/s (memory-bound
    workloads), its planned transient arena, ΔRSS and page faults per call."""
    header = ["workload", "size", "moved", f"{system} GB/s", f"STREAM/{system}", "planned arena",
              f"ΔRSS {system}", f"faults/call {system}"]
    rows = []
    for workload, size, by in group_rows(results):
        r = by.get(system)
        ok = bool(r) and r.get("status") == "ok"
        moved = next((x.get("bytes_moved") for x in by.values() if x.get("bytes_moved") is not None), None)
        bandwidth, ratio = gb_per_s(r), stream_ratio(r, stream)
        faults = r.get("page_faults_per_call") if ok else None
        rows.append([workload, size, format_size(moved),
                     "—" if bandwidth is None else f"{bandwidth:.2f}",
                     "—" if ratio is None else f"{ratio:.2f}x",
                     format_size(r.get("transient_bytes")) if ok else "—",
                     format_bytes(r.get("peak_rss_delta")) if ok else "—",
                     "—" if faults is None else f"{faults:.1f}"])
    return _table(header, rows)


def stream_line(stream: dict | None) -> str:
    if not stream:
        return "STREAM bandwidth: not measured."
    if stream.get("error"):
        return f"STREAM bandwidth: not measured ({stream['error']})."
    one, every = stream["single"], stream["all"]
    kernels = ("copy", "scale", "add", "triad")
    per = lambda r: ", ".join(f"{k} {r[f'{k}_gb_per_s']:.1f}" for k in kernels)  # noqa: E731
    return (f"STREAM bandwidth (benchmarks/stream.c, 3 arrays of {format_size(stream['array_bytes'])}, best of "
            f"{stream['repetitions']}; GB/s): 1 thread: {per(one)}; {every['threads']} threads: {per(every)}. "
            f"Reference: {stream['reference']}, {stream['reference_gb_per_s']:.2f} GB/s.")


def render(data: dict) -> str:
    """The whole report of one run (the --json file's contents) as Markdown."""
    results, systems = data["results"], data.get("systems") or list(SYSTEMS)
    basis = data.get("ratios", "median")
    m = data.get("machine", {})
    out = [f"# kiln benchmarks, {data.get('date')}, {m.get('cpu')}, {m.get('cores')} cores"
           f"{' (--quick: not a measurement)' if data.get('quick') else ''}", ""]
    loads = [m.get("load_average_start"), m.get("load_average_end")]
    out.append(f"Load average (1 min) at start {loads[0]}, at end {loads[1]}.")
    if any(x is not None and x > 0.5 * (m.get("cores") or 1) for x in loads):
        out.append("WARNING: the machine was busy with other work: times are inflated and noisy; "
                   "the minima are the steadier numbers.")
    out += ["", f"Time per call: median (min), kiln-run's after its warm-up calls. "
                f"kiln/X = kiln.jit {basis} / X {basis}.", "", time_table(results, systems, basis), "",
            "First call (compile included) and peak RSS growth (see benchmarks/README.md):", "",
            first_call_and_memory_table(results, systems)]
    if "kiln-run" in systems:
        out += ["", stream_line(data.get("stream")), "",
                "kiln-run: bandwidth (bytes moved / min time) and memory, beside the planned arena:", "",
                bandwidth_and_memory_table(results, data.get("stream"))]
    lines = notes(results)
    if lines:
        out += [""] + [f"- {line}" for line in lines]
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report",
                                     description="Renders a `benchmarks.run --json` file as Markdown.")
    parser.add_argument("--markdown", metavar="JSON", required=True, help="the file `benchmarks.run --json` wrote")
    args = parser.parse_args(argv)
    try:
        data = json.loads(Path(args.markdown).read_text())
    except (OSError, ValueError) as e:
        print(f"benchmarks.report: cannot read {args.markdown}: {e}", file=sys.stderr)
        return 2
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        print(f"benchmarks.report: {args.markdown} is not a `benchmarks.run --json` file (no results list)",
              file=sys.stderr)
        return 2
    print(render(data))
    return 0


def notes(results: list[dict]) -> list[str]:
    """One line per distinct skip/error reason and per wrong result."""
    lines, seen = [], set()
    for r in results:
        if r.get("status") == "ok" and r.get("check") != "ok":
            lines.append(f"WRONG: {r['system']} {r['workload']} {r['size']}: {r['check']}")
        elif r.get("status") in ("skipped", "error"):
            key = (r["system"], r["status"], r.get("reason"))
            if key not in seen:
                seen.add(key)
                lines.append(f"{r['status']}: {r['system']} {r['workload']} {r['size']}: {r.get('reason')}")
    return lines


if __name__ == "__main__":
    sys.exit(main())
