"""The summary of benchmarks/run.py's results: the markdown tables and ratios of each part (printed
and written to ``--markdown``, e.g. RESULTS.md), the JSON of all results (``--out``, e.g.
results.json) and the merge of one run's parts into earlier results (``--merge-into``).
"""

from __future__ import annotations

import json
from pathlib import Path

from cases import GPT2_SMALL_LAYERS  # benchmarks/cases.py, beside this module
from measure import checks_md, mib  # benchmarks/measure.py

BOOK_TARGET_S = 15 * 60
EVAL_TARGET = 10.0
GEMM_TARGET = 2.0


def header_md(results: dict) -> list[str]:
    m, args = results["machine"], results["args"]
    device = m["gpu"] if args["device"] == "cuda" else "CPU"
    lines = [
        "# Benchmark results",
        "",
        f"- date: {m['date']}; commit {m['commit']}",
        f"- command: `{results['command']}`",
        (
            f"- machine: {m['cores']} CPU cores ({m['cores_usable']} usable), {m['cpu']}, "
            f"{m['memory_gib']} GiB memory; load average at start {m['load_average_start'][0]:.1f}"
        ),
        (
            f"- software: Python {m['python']}, torch {m['torch']} ({m['torch_threads']} threads); "
            f"device: {device}"
        ),
        "- memory columns: peak resident memory above the start of the measurement, MiB"
        + (" (host / device)" if args["device"] == "cuda" else ""),
    ]
    elapsed = results.get("elapsed_s", {})
    if elapsed:
        parts = ", ".join(f"{part} {seconds / 60:.1f}" for part, seconds in elapsed.items())
        lines.append(
            f"- run time: {sum(elapsed.values()) / 60:.1f} min ({parts}); load average "
            f"at the end {m.get('load_average_end', [float('nan')])[0]:.1f}"
        )
    return lines


def contributions_md(part: dict) -> list[str]:
    work = part["work"]
    lines = [
        "",
        (
            f"## 1. Contributions: {work['neurons']} neurons x {work['tokens']} tokens "
            f"(d_model {work['d_model']}, {work['gflop']:.0f} GFLOP)"
        ),
        "",
        "| way | seconds | GFLOP/s | peak memory |",
        "|---|---|---|---|",
    ]
    labels = {
        "project": "project: `discovery.contributions` (one GEMM)",
        "loop": "straightforward: per-neuron loop (GEMV each)",
        "plain": "plain GEMM of the same shape (random matrices)",
    }
    for kind, label in labels.items():
        if kind in part:
            r = part[kind]
            lines.append(f"| {label} | {r['seconds']:.3f} | {r['gflops']:.1f} | {mib(r)} |")
    if {"project", "loop", "plain"} <= part.keys():
        ratio = part["project"]["seconds"] / part["plain"]["seconds"]
        lines += [
            "",
            (
                f"- speed-up over the per-neuron loop: "
                f"**{part['loop']['seconds'] / part['project']['seconds']:.1f}x**"
            ),
            (
                f"- time relative to the plain GEMM: **{ratio:.2f}x** (target <= "
                f"{GEMM_TARGET:g}x: {'met' if ratio <= GEMM_TARGET else 'MISSED'})"
            ),
        ]
    return lines + ([""] + checks_md(part["checks"]) if "checks" in part else [])


def scoring_md(part: dict) -> list[str]:
    work = part["work"]
    lines = [
        "",
        (
            f"## 2. Scoring neurons: median, MAD and top-{work['k']} over "
            f"{work['tokens']} tokens"
        ),
        "",
        "| way | neurons | seconds | ms per neuron | peak memory |",
        "|---|---|---|---|---|",
    ]
    for kind, label, n in [
        ("project", "project: `discovery.score_neurons` (chunked GEMM)", work["neurons_project"]),
        ("loop", "straightforward: neuron by neuron", work["neurons_loop"]),
    ]:
        if kind in part:
            r = part[kind]
            lines.append(
                f"| {label} | {n} | {r['seconds']:.2f} | "
                f"{1e3 * r['seconds_per_neuron']:.2f} | {mib(r)} |"
            )
    if {"project", "loop"} <= part.keys():
        speedup = part["loop"]["seconds_per_neuron"] / part["project"]["seconds_per_neuron"]
        lines += [
            "",
            f"- speed-up per neuron: **{speedup:.1f}x**"
            + (
                ""
                if work["neurons_loop"] == work["neurons_project"]
                else f" (the loop scored the first {work['neurons_loop']} neurons only)"
            ),
        ]
    return lines + ([""] + checks_md(part["checks"]) if "checks" in part else [])


def evaluation_md(part: dict) -> list[str]:
    work = part["work"]
    depth = work["layers"]
    lines = [
        "",
        (
            f"## 3. Evaluation: {work['neurons']} discovered neurons, texts of "
            f"{work['tokens_per_text']} tokens"
        ),
        "",
        (
            f"Texts: {work['texts']}. Project: `evaluation.evaluate` (layer 0 only, batches of "
            f"{work['batch_size']}). Straightforward: `run_with_cache` of the full {depth}-layer "
            "model text by text, the approximation per text, r and FVU of every neuron."
        ),
        "",
    ]
    if depth < GPT2_SMALL_LAYERS:
        lines += [
            (
                f"**Caveat:** the model has {depth} layers, GPT-2 Small {GPT2_SMALL_LAYERS}: "
                "the straightforward way is cheaper here than on GPT-2, so the speed-up is "
                "conservative (run with `--layers 12` for GPT-2 Small's cost)."
            ),
            "",
        ]
    else:
        lines += [
            (
                f"The model has {depth} layers (GPT-2 Small's depth): layer 0 and the "
                "embeddings are the planted model's, the other blocks copies of its layer 1."
            ),
            "",
        ]
    lines += [
        (
            "| N | project s | project tok/s | project peak | straightforward s | "
            "straightforward tok/s | straightforward peak | speed-up | checks |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rows = sorted((k for k in part if k.isdigit()), key=int)
    for n in rows:
        row = part[n]
        ours, theirs = row.get("project"), row.get("straightforward")
        cells = [n] + (
            [f"{ours['seconds']:.2f}", f"{ours['tokens_per_s']:.0f}", mib(ours)]
            if ours
            else ["-"] * 3
        )
        if theirs:
            cells += [
                f"{theirs['seconds']:.2f}",
                f"{theirs['tokens_per_s']:.0f}",
                mib(theirs),
                f"**{theirs['seconds'] / ours['seconds']:.1f}x**" if ours else "-",
            ]
        else:
            cells += ["not run"] + ["-"] * 3
        checks = row.get("checks")
        cells.append(
            "-" if checks is None else f"{sum(c['passed'] for c in checks)}/{len(checks)} pass"
        )
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    if "100" in part and "straightforward" in part["100"] and "project" in part["100"]:
        speedup = part["100"]["straightforward"]["seconds"] / part["100"]["project"]["seconds"]
        lines += [
            "",
            (
                f"- target: >= {EVAL_TARGET:g}x at N = 100; measured **{speedup:.1f}x** "
                f"({'met' if speedup >= EVAL_TARGET else 'MISSED'})"
            ),
        ]
    for n in rows:
        if "checks" in part[n]:
            lines += ["", f"Checks at N = {n}:", ""] + checks_md(part[n]["checks"])
            break  # one table: every N runs the same checks (counts in the table above)
    return lines


def book_md(part: dict) -> list[str]:
    work = part["work"]
    lines = [
        "",
        (
            f"## 4. The whole book on the planted model ({work['threads']} threads, "
            f"{'CUDA' if work['device'] == 'cuda' else 'CPU only'})"
        ),
        "",
        "| chapter | seconds | kernel peak resident memory (MiB) |",
        "|---|---|---|",
    ]
    chapters = part.get("chapters", {})
    for name, r in chapters.items():
        lines.append(f"| {name} | {r['seconds']:.0f} | {r['kernel_peak_mib']:.0f} |")
    total = sum(r["seconds"] for r in chapters.values())
    complete = len(chapters) == part["work"]["all_chapters"]
    lines += [
        "",
        f"- total: **{total / 60:.1f} min** for {len(chapters)} of "
        f"{part['work']['all_chapters']} chapters (each including its kernel's start)"
        + (
            f" (target < {BOOK_TARGET_S // 60} min: "
            f"{'met' if total < BOOK_TARGET_S else 'MISSED'})"
            if complete
            else ""
        ),
    ]
    if chapters:
        lines.append(
            f"- largest kernel peak: "
            f"{max(r['kernel_peak_mib'] for r in chapters.values()):.0f} MiB"
        )
    return lines


def lookups_md(part: dict) -> list[str]:
    from lookups import lookups_md as render

    return render(part)


def markdown(results: dict) -> str:
    lines = header_md(results)
    renderers = {
        "contributions": contributions_md,
        "scoring": scoring_md,
        "evaluation": evaluation_md,
        "book": book_md,
        "lookups": lookups_md,
    }
    for part, render in renderers.items():
        if part in results and "work" in results[part]:
            lines += render(results[part])
            lines += measured_md(results[part].get("measured"))
    for part, tail in results.get("errors", {}).items():
        lines += ["", f"**Part {part} FAILED:**", "", "```", tail.strip()[-1500:], "```"]
    return "\n".join(lines) + "\n"


def measured_md(measured: dict | None) -> list[str]:
    """The run a part merged from another run (``--merge-into``) was measured in."""
    if not measured:
        return []
    m = measured["machine"]
    return [
        "",
        (
            f"Measured separately from the header's run: {m['date']}, commit {m['commit']}, "
            f"`{measured['command']}`; {m['cores']} cores, {measured['threads']} torch threads, "
            f"load average {m['load_average_start'][0]:.1f} at the start and "
            f"{m.get('load_average_end', [float('nan')])[0]:.1f} at the end; "
            f"{measured['elapsed_s'] / 60:.1f} min."
        ),
    ]


def merge_into(path: Path, results: dict, parts: list[str]) -> dict:
    """``path``'s results with ``parts`` replaced by this run's, each with its run recorded."""
    merged = json.loads(path.read_text())
    for part in parts:
        if part in results:
            merged[part] = {
                **results[part],
                "measured": {
                    "command": results["command"],
                    "machine": results["machine"],
                    "threads": results["args"]["threads"] or results["machine"]["torch_threads"],
                    "elapsed_s": results.get("elapsed_s", {}).get(part, float("nan")),
                },
            }
        merged.setdefault("errors", {}).pop(part, None)
        if part in results.get("errors", {}):
            merged["errors"][part] = results["errors"][part]
    if not merged.get("errors"):
        merged.pop("errors", None)
    return merged


def all_checks(results: dict) -> list[dict]:
    found = []
    for part in results.values():
        if isinstance(part, dict):
            for key, value in part.items():
                if key == "checks":
                    found += value
                elif isinstance(value, dict) and "checks" in value:
                    found += value["checks"]
    return found


def write_json(path: Path | None, results: dict) -> None:
    """All results as JSON (``--out``), rewritten after every measurement."""
    if path:
        path.write_text(json.dumps(results, indent=2))


def finish(args, results: dict) -> list[str]:
    """Merge into ``--merge-into``, print the summary and write it to ``--markdown``; the names
    of the checks that failed in this run."""
    failed = [c["name"] for c in all_checks(results) if not c["passed"]]
    if args.merge_into:
        results = merge_into(args.merge_into, results, args.only)
        args.merge_into.write_text(json.dumps(results, indent=2))
        print(f"merged {', '.join(args.only)} into {args.merge_into}")
    summary = markdown(results)
    print("\n" + summary)
    if args.markdown:
        args.markdown.write_text(summary)
        print(f"wrote {args.markdown}")
    if args.out:
        print(f"wrote {args.out}")
    if failed:
        print(f"FAILED checks: {failed}")
    return failed
