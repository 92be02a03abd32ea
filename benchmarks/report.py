"""Formatting the measurements as Markdown tables (printed, and pasted into the README).

Table 1 gives time per call: median with the minimum in parentheses (kiln-run's
from its --benchmark statistics), then kiln.jit's time over each other system's
(above 1: kiln is slower), from the medians or, with basis "min", from the
minima. Table 2 gives the first call (compilation included), the peak RSS
growth and the page faults per timed call (a steady-state call that allocates
its intermediates afresh shows here). Cells say WRONG,
error or skip where a system did not produce a checked time.
"""
from __future__ import annotations

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
