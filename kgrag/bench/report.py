"""Writing ``kgrag bench`` figures: ``report.md``, ``figures.json`` and PNG plots.

The plots need matplotlib (the ``bench`` extra); without it the report and the
JSON are still written and the report says why there are no plots.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kgrag.errors import Unsupported

PLOTS = {
    "ingest": "ingest_stages.png",
    "query": "query_latency.png",
    "http": "http_qps.png",
}


def write_report(figures: dict[str, Any], out: Path) -> Path:
    """Write the plots, ``figures.json`` and ``report.md`` under ``out``; the report path."""
    out.mkdir(parents=True, exist_ok=True)
    try:
        figures["plots"] = write_plots(figures, out)
    except Unsupported as exc:
        figures["plots"] = []
        figures["plots_missing"] = exc.message
    (out / "figures.json").write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    path = out / "report.md"
    path.write_text(render_markdown(figures), encoding="utf-8")
    return path


def render_markdown(figures: dict[str, Any]) -> str:
    """The report: machine header, the reproducing command, one table per section."""
    m = figures["machine"]
    lines = [
        "# kgrag bench",
        "",
        f"- machine: {m['platform']}, {m['cpus']} CPUs, {m['ram_gib']} GiB RAM, "
        f"torch threads {m['torch_threads']}, Python {m['python']}",
        f"- kgrag {m['kgrag']}, measured {m['date']}",
        "",
        "Reproduce:",
        "",
        "```bash",
        figures["command"],
        "```",
        "",
    ]
    for section, render in (("ingest", _ingest_md), ("query", _query_md), ("http", _http_md)):
        if section in figures:
            lines += render(figures[section])
            plot = PLOTS[section]
            if plot in figures.get("plots", []):
                lines += [f"![{section}]({plot})", ""]
    if figures.get("plots_missing"):
        lines += [f"No plots: {figures['plots_missing']}", ""]
    return "\n".join(lines)


def _ingest_md(f: dict[str, Any]) -> list[str]:
    lines = [
        "## Ingest",
        "",
        f"{f['corpus']}: {f['passages']:,} passages into {f['graph']}.",
        "",
        "| stage | seconds | resident MiB at its end | peak MiB by then |",
        "|---|---|---|---|",
    ]
    memory = f.get("stages_mib", {})
    for name, s in f["stages_s"].items():
        rss, peak = memory.get(name, ("", ""))
        lines.append(f"| {name} | {s} | {rss} | {peak} |")
    lines += [
        f"| **total (wall)** | {f['total_s']} |",
        f"| bare encoding (same passages, same model) | {f['bare_encode_s']} |",
        f"| total / bare | {f['ratio']} |",
        "",
        "| peak RSS MiB (bench process) | peak RSS MiB (largest child) | disk bytes "
        "| disk bytes / passage |",
        "|---|---|---|---|",
        f"| {f['peak_rss_mib']} | {f['peak_rss_children_mib']} | {f['disk_bytes']:,} "
        f"| {f['disk_bytes_per_passage']:,} |",
        "",
    ]
    return lines


def _query_md(f: dict[str, Any]) -> list[str]:
    lines = [
        "## Query latency",
        "",
        f"{f['chunks']:,} chunks, {f['entities']:,} entities; {f['questions']} questions "
        f"x {f['repeat']}, k {f['k']}, interleaved across modes after one warm-up each "
        f"(open + warm-up {f['setup_s']} s).",
        "",
        "| mode | p50 ms | p95 ms | p50 / bare | first-ask p50 ms |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['mode']} | {r['p50_ms']} | {r['p95_ms']} | {r['ratio_p50']} "
        f"| {r.get('first_p50_ms', '')} |"
        for r in f["rows"]
    ]
    return [*lines, ""]


def _http_md(f: dict[str, Any]) -> list[str]:
    lines = [
        "## HTTP throughput",
        "",
        f"{f['requests']} `retrieve` hybrid calls per measurement, k {f['k']}; the same "
        "engine answers in-process and over loopback HTTP (keep-alive, one connection "
        "per client thread).",
        "",
        "| op | concurrency | in-process qps | in-process p50 ms | HTTP qps | HTTP p50 ms "
        "| HTTP / in-process qps |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in f["rows"]:
        a, b = r["in-process"], r["http"]
        lines.append(
            f"| {r['op']} | {r['concurrency']} | {a['qps']} | {a['p50_ms']} | {b['qps']} "
            f"| {b['p50_ms']} | {r['ratio_qps']} |"
        )
    return [*lines, ""]


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise Unsupported(
            "matplotlib is not installed; install the bench extra: pip install 'kgrag[bench]'",
            option="plots",
        ) from exc
    return plt


def write_plots(figures: dict[str, Any], out: Path) -> list[str]:
    """One PNG per measured section; the file names written."""
    plt = _pyplot()
    drawers = {"ingest": _plot_ingest, "query": _plot_query, "http": _plot_http}
    written = []
    for section, draw in drawers.items():
        if section not in figures:
            continue
        fig, ax = plt.subplots(figsize=(8, 4.5))
        try:
            draw(ax, figures[section])
            fig.tight_layout()
            fig.savefig(out / PLOTS[section], dpi=110)
        finally:
            plt.close(fig)
        written.append(PLOTS[section])
    return written


def _plot_ingest(ax: Any, f: dict[str, Any]) -> None:
    names = [*f["stages_s"], "total", "bare encoding"]
    values = [*f["stages_s"].values(), f["total_s"], f["bare_encode_s"]]
    colours = ["tab:blue"] * len(f["stages_s"]) + ["tab:gray", "tab:orange"]
    ax.barh(names[::-1], values[::-1], color=colours[::-1])
    ax.set_xlabel("seconds")
    ax.set_title(f"ingest of {f['passages']:,} passages (total / bare {f['ratio']})")


def _plot_query(ax: Any, f: dict[str, Any]) -> None:
    rows = f["rows"]
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["p50_ms"] for r in rows], 0.4, label="p50")
    ax.bar([x + 0.2 for x in xs], [r["p95_ms"] for r in rows], 0.4, label="p95")
    ax.axhline(rows[0]["p50_ms"], color="tab:red", linestyle="--", label="bare p50")
    ax.set_xticks(list(xs), [r["mode"] for r in rows], rotation=30, ha="right")
    ax.set_ylabel("ms")
    ax.set_yscale("log")
    ax.set_title(f"query latency, {f['questions']} questions x {f['repeat']}")
    ax.legend()


def _plot_http(ax: Any, f: dict[str, Any]) -> None:
    rows = f["rows"]
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["in-process"]["qps"] for r in rows], 0.4, label="in-process")
    ax.bar([x + 0.2 for x in xs], [r["http"]["qps"] for r in rows], 0.4, label="HTTP")
    ax.set_xticks(list(xs), [f"c={r['concurrency']}" for r in rows])
    ax.set_ylabel("queries per second")
    ax.set_title("retrieve hybrid: HTTP against in-process")
    ax.legend()
