"""Part ``lookups`` of benchmarks/run.py: chapter 7's look-ups at GPT-2 Small's depth (issue 15).

The model is a randomly initialised GPT-2-Small-shaped checkpoint (12 layers, 12 heads, d_model
768, 3072 neurons, 50257 tokens; ``save_gpt2_shaped_checkpoint``, seed 0) loaded through the
loader GPT-2 uses (``load_model("gpt2", weights=...)``): a forward pass costs what GPT-2 Small's
costs. Each project way is set beside two earlier ways: **straightforward** (one full forward
pass, all 12 layers and the unembedding, per ablated head and per suffix) and the code **as it
was at 6a9c7ff**, before issue 15 (one head per pass, suffixes in groups of 8 one prompt at a
time, every pass stopping at the neuron's layer), rewritten here.

1. **Ablation drops** of one neuron (mean-ablation, at the prompts' final tokens). Project:
   attribute the neuron to every head in one pass, then ``ablation_drops`` of the heads that
   matter (the 3 reported and those with the largest mean ``|attribution|``, 8 in all, as
   ``examine_neuron`` chooses them), batched, every pass stopping at the neuron's layer; also
   ``ablation_drops`` of every head. The earlier ways ablate every head of layers ``0..layer``,
   ``1 + 12 (layer + 1)`` passes. Checks: the drops equal, head by head.
2. **Truncation** of the same prompts. Project: ``truncate_prompts``. Earlier: per prompt, one
   pass of the prompt, then its suffixes, shortest first, one per pass (straightforward) or 8
   per pass (6a9c7ff), until one keeps 80% of the activation. Checks: the same suffix and the
   same activations.
3. **The main job's look-up section**, ``reproduce.pipeline.lookup_row`` of
   ``lookups.examine_best_neurons`` (token-prediction scores, the domain-text pool, its scan, then
   ``examine_neuron`` for the top 4 neurons), timed as the main job runs it. The earlier sections
   are estimated, not run in full (about half an hour on one core): the project's section minus the
   time it spent in truncation and ablation, plus the earlier way's truncation and ablation of the
   same prompts and neurons. 6a9c7ff's truncation is run; ablation is counted in passes, each
   costed by timing a clean and two ablated passes of the neuron's prompts; the straightforward
   truncation is counted in full passes costed by a linear fit of timed full passes (the whole and
   the truncated prompts). Part 1 checks the estimate against the measured straightforward
   ablation. The sampled passes are checked against the project's numbers.

Mean ``hook_z`` for mean-ablation comes from the scan of the pool (as ``examine_neuron`` takes
it), computed once outside the timings and shared by every way.
"""

from __future__ import annotations

import functools
import tempfile
import time
from pathlib import Path
from typing import Self

from measure import Meter, _sync, best_of, checks_md, close, emit, mib

N_HEADS_REPORTED = 3  # examine_neuron's defaults
N_ABLATE = 8


# ----------------------------------------------------------------------------------------------
# The model, and counting forward passes
# ----------------------------------------------------------------------------------------------


def gpt2_shaped(device: str, directory: Path):
    """A random GPT-2-Small-shaped checkpoint written to ``directory``, loaded as GPT-2 is."""
    import torch

    from context_neurons.models.loading import load_model, save_gpt2_shaped_checkpoint

    torch.set_grad_enabled(False)
    path = save_gpt2_shaped_checkpoint(directory / "gpt2-shaped", seed=0, n_layer=12)
    return load_model("gpt2", weights=path, device=device).model


class Passes:
    """Counts forward passes of ``model`` (their sequences and padded tokens), and those that reach
    the unembedding."""

    def __init__(self, model):
        self.model = model

    def __enter__(self) -> Self:
        self.passes = self.sequences = self.tokens = self.full = 0

        def start(module, inputs):
            self.passes += 1
            self.sequences += int(inputs[0].shape[0])
            self.tokens += int(inputs[0].numel())

        def end(module, inputs, output):
            self.full += 1

        self._handles = [
            self.model.embed.register_forward_pre_hook(start),
            self.model.unembed.register_forward_hook(end),
        ]
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()

    def record(self) -> dict:
        return {
            "passes": self.passes,
            "sequences": self.sequences,
            "tokens": self.tokens,
            "full_passes": self.full,
        }


# ----------------------------------------------------------------------------------------------
# The straightforward way (before issue 15)
# ----------------------------------------------------------------------------------------------


def full_pass_pre(model, tokens, layer: int, hooks=(), full: bool = True):
    """One forward pass with ``hooks``; the neuron layer's ``hook_pre``. ``full``: every layer and
    the unembedding (the straightforward way); else the pass stops at ``hook_pre`` (6a9c7ff)."""
    from context_neurons.hooks import run_until

    name = f"blocks.{layer}.mlp.hook_pre"
    if not full:
        return run_until(model, tokens, name, extra_hooks=hooks)[name]
    store = {}

    def save(act, hook):
        store["pre"] = act

    model.run_with_hooks(tokens, fwd_hooks=[*hooks, (name, save)])
    return store["pre"]


def ablate_head(head: int, value):
    def hook(z, hook):
        z[:, :, head] = value
        return z

    return hook


def ablation_straightforward(
    model, prompts, layer: int, neuron: int, mean_z, heads=None, full: bool = True
):
    """Every head of layers ``0..layer`` (or ``heads``) mean-ablated alone, one full pass each
    (``full=False``: each pass stops at the neuron's layer, as the code was at 6a9c7ff).

    Returns:
        ``clean - ablated`` at the prompts' final tokens, ``[prompt, head]``.
    """
    import torch

    from context_neurons.lookups.prompts import as_batch

    if heads is None:
        heads = [(l, h) for l in range(layer + 1) for h in range(model.cfg.n_heads)]
    batch, lengths = as_batch(model, [p.tokens for p in prompts])
    rows, ends = torch.arange(len(batch), device=batch.device), lengths - 1
    clean = full_pass_pre(model, batch, layer, full=full)[rows, ends, neuron]
    drops = []
    for l, h in heads:
        hooks = [(f"blocks.{l}.attn.hook_z", ablate_head(h, mean_z[l, h]))]
        pre = full_pass_pre(model, batch, layer, hooks, full=full)
        drops.append(clean - pre[rows, ends, neuron])
    return torch.stack(drops, dim=-1)


def final_full(model, tokens, layer: int, neuron: int) -> float:
    """The neuron's pre-activation at the final token of one sequence, by a full forward pass."""
    return float(full_pass_pre(model, tokens[None].to(model.cfg.device), layer)[0, -1, neuron])


def truncation_straightforward(model, prompts, layer: int, neuron: int) -> list[dict]:
    """Per prompt: one full pass of the prompt, then one per suffix ``[BOS] + tokens[s:]``,
    shortest first, until one keeps ``KEEP_FRACTION`` of the activation."""
    import torch

    from context_neurons.lookups.prompts import KEEP_FRACTION

    out = []
    for prompt in prompts:
        tokens = prompt.tokens
        full = final_full(model, tokens, layer, neuron)
        if full <= 0:
            out.append({"full": full, "start": None, "kept": None})
            continue
        start, kept = 1, full
        for s in range(len(tokens) - 1, 0, -1):
            value = final_full(model, torch.cat([tokens[:1], tokens[s:]]), layer, neuron)
            if value >= KEEP_FRACTION * full:
                start, kept = s, value
                break
        out.append({"full": full, "start": start, "kept": kept})
    return out


def truncation_as_it_was(model, prompts, layer: int, neuron: int, chunk: int = 8) -> list[dict]:
    """The code at 6a9c7ff (``truncate_prompt`` per prompt): one pass of the prompt, then its
    suffixes, shortest first, in groups of ``chunk``, one padded pass per group; every pass stops
    at the neuron's layer."""
    import torch

    from context_neurons.lookups.prompts import KEEP_FRACTION, as_batch

    out = []
    for prompt in prompts:
        tokens = prompt.tokens
        full = float(
            full_pass_pre(model, tokens[None].to(model.cfg.device), layer, full=False)[
                0, -1, neuron
            ]
        )
        if full <= 0:
            out.append({"full": full, "start": None, "kept": None})
            continue
        start, kept = 1, full
        starts = list(range(len(tokens) - 1, 0, -1))
        for i in range(0, len(starts), chunk):
            group = starts[i : i + chunk]
            batch, lengths = as_batch(model, [torch.cat([tokens[:1], tokens[s:]]) for s in group])
            pre = full_pass_pre(model, batch, layer, full=False)
            last = pre[torch.arange(len(group), device=pre.device), lengths - 1, neuron]
            ok = torch.nonzero(last >= KEEP_FRACTION * full).flatten()
            if len(ok):
                start, kept = group[int(ok[0])], float(last[int(ok[0])])
                break
        out.append({"full": full, "start": start, "kept": kept})
    return out


def truncation_passes(tokens_len: int, start: int) -> list[int]:
    """The lengths of the full passes :func:`truncation_straightforward` runs for a prompt of
    ``tokens_len`` tokens whose shortest sufficient suffix starts at ``start``."""
    n = tokens_len - 1
    return [tokens_len] + [1 + n - s + 1 for s in range(n, start - 1, -1)]


def ablation_passes(n_heads: int, layer: int) -> int:
    return 1 + n_heads * (layer + 1)


# ----------------------------------------------------------------------------------------------
# The project's way
# ----------------------------------------------------------------------------------------------


def heads_to_ablate(head_attr, n_heads: int = N_HEADS_REPORTED, n_ablate: int = N_ABLATE):
    """The heads ``examine_neuron`` ablates: the reported ones, then by mean ``|attribution|``."""
    from context_neurons.lookups.attribution import rank_heads

    chosen = [(l, h) for l, h, _ in rank_heads(head_attr, n_heads)]
    for l, h, _ in rank_heads(head_attr.abs(), head_attr[0].numel()):
        if len(chosen) >= n_ablate:
            break
        if (l, h) not in chosen:
            chosen.append((l, h))
    return chosen


def ablation_project(model, prompts, layer: int, neuron: int, mean_z):
    """Attribute first (one pass), then ablate the heads that matter (batched, to the layer)."""
    import torch

    from context_neurons.lookups.attribution import ablation_drops, attribute_neuron

    attr = attribute_neuron(model, [p.tokens for p in prompts], layer, neuron)
    rows = torch.arange(len(prompts), device=attr.pre.device)
    ends = torch.tensor([len(p.tokens) - 1 for p in prompts], device=attr.pre.device)
    chosen = heads_to_ablate(attr.heads[rows, ends].cpu())
    drops = ablation_drops(model, prompts, layer, neuron, heads=chosen, mode="mean", mean_z=mean_z)
    return chosen, drops


# ----------------------------------------------------------------------------------------------
# The case
# ----------------------------------------------------------------------------------------------


def pick_neuron(model, windows, layer: int) -> int:
    """The neuron of ``layer`` with the largest pre-activation anywhere on ``windows``."""
    from context_neurons.lookups.prompts import neuron_activations

    acts = neuron_activations(model, windows, layer, list(range(model.cfg.d_mlp)))[:, 1:]
    return int(acts.nan_to_num(float("-inf")).amax((0, 1)).argmax())


def case_lookups(args) -> None:
    """Ablation and truncation per neuron both ways, then the main job's look-up section."""
    from context_neurons.lookups.prompts import top_activating_prompts
    from context_neurons.lookups.report import scan_pool
    from context_neurons.text.windows import lookup_windows

    with tempfile.TemporaryDirectory() as directory:
        model = gpt2_shaped(args.device, Path(directory))
    all_windows, all_labels = lookup_windows(model.tokenizer)
    step = max(1, len(all_windows) // args.lookup_windows)
    windows = [w.to(model.cfg.device) for w in all_windows[::step][: args.lookup_windows]]
    labels = all_labels[::step][: args.lookup_windows]
    neurons = [(layer, pick_neuron(model, windows, layer)) for layer in args.lookup_layers]
    pool = scan_pool(model, windows, labels, neurons)  # mean hook_z, shared by both ways
    emit(
        ["lookups", "work"],
        {
            "model": "random GPT-2-Small-shaped checkpoint (seed 0) through the GPT-2 loader",
            "layers": model.cfg.n_layers,
            "heads": model.cfg.n_heads,
            "d_model": model.cfg.d_model,
            "pool_windows": len(windows),
            "window_tokens": len(windows[0]),
            "prompts": args.lookup_prompts,
            "neurons": [f"{l}.{n}" for l, n in neurons],
            "section": not args.skip_section,
        },
    )
    full_pass_pre(model, windows[0][None], 0)  # warm-up, not counted
    for layer, neuron in neurons:
        key = f"{layer}.{neuron}"
        prompts = top_activating_prompts(
            model,
            windows,
            layer,
            neuron,
            k=args.lookup_prompts,
            acts=pool.attributions[(layer, neuron)].pre,
        )
        mean_z = pool.mean_z[layer]
        lengths = [len(p.tokens) for p in prompts]
        work = {"layer": layer, "neuron": neuron, "prompt_tokens": lengths}
        emit(["lookups", f"ablation {key}", "work"], work)
        ablation_project(model, prompts[:1], layer, neuron, mean_z)  # warm-up
        with Passes(model) as passes:
            record, (chosen, ours) = best_of(
                functools.partial(ablation_project, model, prompts, layer, neuron, mean_z),
                args.repeat,
                args.device,
            )
        emit(
            ["lookups", f"ablation {key}", "project"],
            {**record, **passes.record(), "heads": len(chosen)},
        )
        with Passes(model) as passes:
            record, every = best_of(
                functools.partial(_ablation_drops_all, model, prompts, layer, neuron, mean_z),
                1,  # as long as the straightforward way: once, as it runs once
                args.device,
            )
        emit(
            ["lookups", f"ablation {key}", "project_all"],
            {**record, **passes.record(), "heads": every.shape[1]},
        )
        with Passes(model) as passes, Meter(args.device) as meter:
            theirs = ablation_straightforward(model, prompts, layer, neuron, mean_z)
        one = _time_pass(model, prompts, layer, args.device)
        emit(
            ["lookups", f"ablation {key}", "straightforward"],
            meter.record(
                **passes.record(),
                heads=theirs.shape[1],
                estimate_s=one * ablation_passes(model.cfg.n_heads, layer),
            ),
        )
        with Passes(model) as passes, Meter(args.device) as meter:
            was = ablation_straightforward(model, prompts, layer, neuron, mean_z, full=False)
        emit(
            ["lookups", f"ablation {key}", "as_it_was"],
            meter.record(**passes.record(), heads=was.shape[1]),
        )
        index = [l * model.cfg.n_heads + h for l, h in chosen]
        emit(
            ["lookups", f"ablation {key}", "checks"],
            [
                close(
                    f"{key}: drops of the {len(chosen)} heads the project ablates == one full "
                    "pass per head",
                    ours,
                    theirs[:, index],
                ),
                close(
                    f"{key}: drops of all {theirs.shape[1]} heads, batched == one full pass per "
                    "head",
                    every,
                    theirs,
                ),
                close(
                    f"{key}: drops of all {theirs.shape[1]} heads, passes stopping at the layer "
                    "(6a9c7ff) == one full pass per head",
                    was,
                    theirs,
                ),
            ],
        )
        if args.skip_truncation:
            continue
        emit(["lookups", f"truncation {key}", "work"], work)
        with Passes(model) as passes:
            record, (cut, left) = best_of(
                functools.partial(_truncate, model, prompts, layer, neuron), 1, args.device
            )
        emit(["lookups", f"truncation {key}", "project"], {**record, **passes.record()})
        with Passes(model) as passes, Meter(args.device) as meter:
            theirs = truncation_straightforward(model, prompts, layer, neuron)
        emit(["lookups", f"truncation {key}", "straightforward"], meter.record(**passes.record()))
        with Passes(model) as passes, Meter(args.device) as meter:
            was = truncation_as_it_was(model, prompts, layer, neuron)
        emit(["lookups", f"truncation {key}", "as_it_was"], meter.record(**passes.record()))
        emit(
            ["lookups", f"truncation {key}", "checks"],
            _truncation_checks(f"{key} straightforward", prompts, cut, left, theirs)
            + _truncation_checks(f"{key} 6a9c7ff", prompts, cut, left, was),
        )
    if not args.skip_section:
        case_section(args, model)


def _ablation_drops_all(model, prompts, layer, neuron, mean_z):
    from context_neurons.lookups.attribution import ablation_drops

    return ablation_drops(model, prompts, layer, neuron, mode="mean", mean_z=mean_z)


def _truncate(model, prompts, layer, neuron):
    from context_neurons.lookups.prompts import truncate_prompts

    return truncate_prompts(model, prompts, layer, neuron)


def _time_pass(model, prompts, layer: int, device: str, repeat: int = 2) -> float:
    """Seconds of one full forward pass of the prompts' padded batch (fastest of ``repeat``)."""
    from context_neurons.lookups.prompts import as_batch

    batch, _ = as_batch(model, [p.tokens for p in prompts])
    times = []
    for _ in range(repeat):
        _sync(device)
        start = time.perf_counter()
        full_pass_pre(model, batch, layer)
        _sync(device)
        times.append(time.perf_counter() - start)
    return min(times)


def _truncation_checks(key, prompts, cut, left, theirs) -> list:
    firing = [t for t in theirs if t["start"] is not None]
    same_cut = len(firing) == len(cut) and all(
        len(c.tokens) == len(p.tokens) - t["start"] + 1
        for c, p, t in zip(cut, [p for p, t in zip(prompts, theirs) if t["start"]], firing)
    )
    checks = [
        {
            "name": f"{key} == truncate_prompts: same suffix for every prompt ({len(cut)} truncated, "
            f"{len(left)} not firing)",
            "passed": same_cut,
            "detail": "suffix lengths " + ", ".join(str(len(c.tokens)) for c in cut),
        }
    ]
    if same_cut and cut:
        checks += [
            close(
                f"{key}: kept activation", [c.activation for c in cut], [t["kept"] for t in firing]
            ),
            close(
                f"{key}: whole prompt's activation",
                [c.full_activation for c in cut],
                [t["full"] for t in firing],
            ),
        ]
    return checks


# ----------------------------------------------------------------------------------------------
# The main job's look-up section
# ----------------------------------------------------------------------------------------------


class Recorder:
    """Wraps ``report.truncate_prompts`` and ``report.ablation_drops``: their seconds, inputs and
    outputs, per call (``examine_neuron`` reads them from its module's globals)."""

    def __init__(self, device: str):
        self.device = device
        self.calls: list[dict] = []

    def wrap(self, name: str, fn):
        def wrapped(*a, **k):
            _sync(self.device)
            start = time.perf_counter()
            out = fn(*a, **k)
            _sync(self.device)
            self.calls.append(
                {
                    "name": name,
                    "seconds": time.perf_counter() - start,
                    "args": a,
                    "kwargs": k,
                    "out": out,
                }
            )
            return out

        return wrapped


def case_section(args, model) -> None:
    """``lookup_row(examine_best_neurons(...))`` timed as the main job runs it; the
    straightforward section estimated."""
    import numpy as np
    import torch

    from context_neurons.lookups import examine_best_neurons, report
    from context_neurons.reproduce.pipeline import lookup_row

    recorder = Recorder(args.device)
    originals = {name: getattr(report, name) for name in ("truncate_prompts", "ablation_drops")}
    for name, fn in originals.items():
        setattr(report, name, recorder.wrap(name, fn))
    try:
        with Passes(model) as passes, Meter(args.device) as meter:
            rows = lookup_row(examine_best_neurons(model, n=4, progress=False), None)
    finally:
        for name, fn in originals.items():
            setattr(report, name, fn)
    found = rows[0].value
    inner = {
        name: sum(c["seconds"] for c in recorder.calls if c["name"] == name) for name in originals
    }
    emit(
        ["lookups", "section", "project"],
        meter.record(
            **passes.record(),
            truncation_s=inner["truncate_prompts"],
            ablation_s=inner["ablation_drops"],
            neurons=[f"{r['layer']}.{r['neuron']}" for r in found],
            errors=[r["error"] for r in found if "error" in r],
        ),
    )
    # The straightforward truncation and ablation of the same prompts, costed in full passes.
    # As the code was at 6a9c7ff: its truncation run (measured), its ablation costed the same way.
    samples, checks, truncation_lengths, ablation_cost, ablation_count = [], [], [], 0.0, 0
    ablation_neurons, was_truncation, was_ablation, same_cuts = 0, 0.0, 0.0, True
    for call in recorder.calls:
        a = call["args"]
        if call["name"] == "truncate_prompts":
            prompts, layer, neuron = a[1:4]
            cut, _ = call["out"]
            _sync(args.device)
            t0 = time.perf_counter()
            was = truncation_as_it_was(model, prompts, layer, neuron)
            _sync(args.device)
            was_truncation += time.perf_counter() - t0
            same_cuts &= [len(c.tokens) for c in cut] == [
                len(p.tokens) - w["start"] + 1 for p, w in zip(prompts, was) if w["start"]
            ]
            by_window = {p.window: p for p in prompts}
            for c in cut:
                whole = by_window[c.window]
                start = len(whole.tokens) - len(c.tokens) + 1
                truncation_lengths += truncation_passes(len(whole.tokens), start)
                for tokens, want in ((whole.tokens, c.full_activation), (c.tokens, c.activation)):
                    t0 = time.perf_counter()
                    got = final_full(model, tokens, layer, neuron)
                    _sync(args.device)
                    samples.append((len(tokens), time.perf_counter() - t0))
                    checks.append((f"{layer}.{neuron}", got, want))
        else:
            prompts, layer, neuron = a[1:4]
            heads, mean_z = call["kwargs"]["heads"], call["kwargs"]["mean_z"]
            _sync(args.device)
            t0 = time.perf_counter()
            theirs = ablation_straightforward(model, prompts, layer, neuron, mean_z, heads[:2])
            _sync(args.device)
            per_pass = (time.perf_counter() - t0) / 3
            ablation_neurons += 1
            ablation_count += ablation_passes(model.cfg.n_heads, layer)
            ablation_cost += per_pass * ablation_passes(model.cfg.n_heads, layer)
            _sync(args.device)
            t0 = time.perf_counter()
            was = ablation_straightforward(
                model, prompts, layer, neuron, mean_z, heads[:2], full=False
            )
            _sync(args.device)
            was_ablation += (
                (time.perf_counter() - t0) / 3 * ablation_passes(model.cfg.n_heads, layer)
            )
            ours = call["out"][:, :2]
            checks.append(
                close(
                    f"section {layer}.{neuron}: drops of its top 2 heads == one "
                    "full pass per head",
                    ours,
                    theirs,
                )
            )
            checks.append(
                close(
                    f"section {layer}.{neuron}: drops of its top 2 heads == one pass per "
                    "head stopping at the layer (6a9c7ff)",
                    ours,
                    was,
                )
            )
    lengths, seconds = np.array([s[0] for s in samples]), np.array([s[1] for s in samples])
    slope, intercept = (
        np.polyfit(lengths, seconds, 1) if len(set(lengths)) > 1 else (0.0, float(seconds.mean()))
    )
    truncation_cost = float(sum(intercept + slope * n for n in truncation_lengths))
    project = meter.seconds
    shared = project - inner["truncate_prompts"] - inner["ablation_drops"]
    estimate = shared + truncation_cost + ablation_cost
    emit(
        ["lookups", "section", "straightforward_estimate"],
        {
            "estimated_s": estimate,
            "shared_s": shared,
            "truncation_s": truncation_cost,
            "ablation_s": ablation_cost,
            "truncation_passes": len(truncation_lengths),
            "ablation_passes": ablation_count,
            "sampled_passes": len(samples),
            "ablation_sampled_passes": 3 * ablation_neurons,
            "seconds_per_token_pass": [float(intercept), float(slope)],
        },
    )
    emit(
        ["lookups", "section", "as_it_was_estimate"],
        {
            "estimated_s": shared + was_truncation + was_ablation,
            "shared_s": shared,
            "truncation_s": was_truncation,
            "truncation_measured": True,
            "ablation_s": was_ablation,
            "ablation_passes": ablation_count,
        },
    )
    got = torch.tensor([g for _, g, _ in (c for c in checks if isinstance(c, tuple))])
    want = torch.tensor([w for _, _, w in (c for c in checks if isinstance(c, tuple))])
    emit(
        ["lookups", "section", "checks"],
        [
            close(
                "section: activations of the whole and truncated prompts, full pass == "
                "truncate_prompts",
                got,
                want,
            ),
            *[c for c in checks if isinstance(c, dict)],
            {
                "name": "section: truncation as at 6a9c7ff keeps the same suffixes as "
                "truncate_prompts",
                "passed": same_cuts,
                "detail": f"{sum(c['name'] == 'truncate_prompts' for c in recorder.calls)} neurons",
            },
        ],
    )


# ----------------------------------------------------------------------------------------------
# Markdown
# ----------------------------------------------------------------------------------------------


def _ratio(slow: dict | None, fast: dict, key: str = "seconds") -> str:
    if not slow:
        return "-"
    ratio = slow[key] / fast["seconds"]
    return f"**{ratio:.0f}x**" if ratio >= 10 else f"**{ratio:.1f}x**"


def _way_rows(part: dict, prefix: str, labels: dict, ablation: bool) -> list[str]:
    """One table row per neuron and way, with the speed-ups over the two earlier ways."""
    lines = []
    for key in [k.split(" ", 1)[1] for k in part if k.startswith(prefix)]:
        row = part[f"{prefix}{key}"]
        for kind, label in labels.items():
            if kind not in row:
                continue
            r = row[kind]
            cells = [key]
            if ablation:
                cells += [", ".join(map(str, row["work"]["prompt_tokens"])), label, r["heads"]]
            else:
                cells += [label]
            old = kind in ("as_it_was", "straightforward")
            cells += [
                (
                    f"{r['passes']} ({r['sequences']}, {r.get('tokens', '?')}), "
                    f"{r['full_passes']} full"
                ),
                f"{r['seconds']:.2f}",
                mib_of(r),
                "-" if old else _ratio(row.get("as_it_was"), r),
                "-" if old else _ratio(row.get("straightforward"), r),
            ]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return lines


def mib_of(record: dict) -> str:
    return mib(record)


def lookups_md(part: dict) -> list[str]:
    work = part["work"]
    head = (
        "| forward passes (sequences, padded tokens) | seconds | peak memory | speed-up over 6a9c7ff | "
        "speed-up over straightforward |"
    )
    lines = [
        "",
        f"## 5. Look-ups (chapter 7) at GPT-2 Small's depth: {work['layers']} layers",
        "",
        (
            f"Model: a {work['model']} ({work['layers']} layers, {work['heads']} heads, d_model "
            f"{work['d_model']}): a forward pass costs what GPT-2 Small's costs. Per neuron (a, "
            f"b): the neuron of its layer with the largest pre-activation on "
            f"{work['pool_windows']} windows of {work['window_tokens']} tokens from the domain "
            f"texts, and its {work['prompts']} top-activating prompts, each ending at its most "
            "activating token (the chapter and the main job take 10: fewer here so that the "
            "straightforward way runs in minutes). Mean-ablation values from the scan of those "
            "windows, shared by every way and not timed. Three ways before the project's: "
            "**straightforward** (one full forward pass, all 12 layers and the unembedding, per "
            "ablated head and per suffix), and the code **as it was at 6a9c7ff** (before issue "
            "15: one head per pass, suffixes in groups of 8 one prompt at a time, every pass "
            "stopping at the neuron's layer)."
        ),
        "",
        (
            "**a. Ablation drops** at the prompts' final tokens (mean-ablation). Project: "
            "attribute the neuron to every head in one pass, then `ablation_drops` of the "
            f"{N_ABLATE} heads that matter (as `examine_neuron` chooses them), batched, every "
            "pass stopping at the neuron's layer; and `ablation_drops` of every head of layers "
            "0..layer, batched. The two earlier ways ablate every head of layers 0..layer, "
            "1 + 12 (layer + 1) passes."
        ),
        "",
        "| neuron | prompt tokens | way | heads " + head,
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += _way_rows(
        part,
        "ablation ",
        {
            "project": "project: attribute, ablate the heads that matter",
            "project_all": "project: every head, batched",
            "as_it_was": "6a9c7ff: one head per pass, stopping at the layer",
            "straightforward": "straightforward: one full pass per head",
        },
        ablation=True,
    )
    estimates = [
        (k.split(" ", 1)[1], v["straightforward"])
        for k, v in part.items()
        if k.startswith("ablation ") and "straightforward" in v
    ]
    if estimates:
        lines += [
            "",
            "Check of the estimate used in c (passes x one timed full pass) against the "
            "measured straightforward ablation: "
            + "; ".join(
                f"{k}: {r['estimate_s']:.0f} s vs {r['seconds']:.0f} s" for k, r in estimates
            )
            + ".",
        ]
    if any(k.startswith("truncation ") for k in part):
        lines += [
            "",
            (
                "**b. Truncation** of the same prompts to their shortest suffix keeping 80% of "
                "the activation. Project: `truncate_prompts` (each round, the next 8 suffixes of "
                "every unfinished prompt in shared passes of similar lengths, stopping at the "
                "layer). 6a9c7ff: per prompt, "
                "one pass of the prompt, then groups of 8 suffixes, shortest first, one pass per "
                "group, stopping at the layer. Straightforward: per prompt, one full pass of the "
                "prompt, then one full pass per suffix, shortest first, until one keeps 80%."
            ),
            "",
            "| neuron | way " + head,
            "|---|---|---|---|---|---|---|",
        ]
        lines += _way_rows(
            part,
            "truncation ",
            {
                "project": "project: `truncate_prompts`",
                "as_it_was": "6a9c7ff: groups of 8, one prompt at a time",
                "straightforward": "straightforward: one full pass per suffix",
            },
            ablation=False,
        )
        padded = [
            (k.split(" ", 1)[1], v["project"], v["as_it_was"])
            for k, v in part.items()
            if k.startswith("truncation ") and {"project", "as_it_was"} <= v.keys()
        ]
        if padded:
            lines += [
                "",
                "Padded tokens read, project against 6a9c7ff (the same suffixes): "
                + "; ".join(f"{k}: {p['tokens']} vs {w['tokens']}" for k, p, w in padded)
                + ". `final_activations` packs the sequences of a round, sorted by length, into "
                "passes of at most 4096 padded tokens and closes a pass once padding would exceed "
                "`PADDING_SLACK` (1.25) times its real tokens; 6a9c7ff padded only within a group "
                "of 8 consecutive suffixes of one prompt.",
            ]
    section = part.get("section", {})
    if "project" in section:
        ours = section["project"]
        lines += [
            "",
            (
                "**c. The main job's look-up section** "
                "(`lookup_row(examine_best_neurons(...))`, as "
                "`reproduce --model gpt2` runs it: token-prediction scores of layers 6-11, the "
                "pool of domain windows, its scan, then `examine_neuron` for the top 4 neurons, "
                f"{', '.join(ours['neurons'])}, 10 prompts each). The earlier ways are "
                "**estimated**, not run in full: the project's section minus the time it spent "
                "in truncation and ablation (the shared steps, counted once at the project's "
                "cost, although 6a9c7ff scanned the pool once per layer), plus the earlier way's "
                "truncation and ablation of the same prompts and neurons. 6a9c7ff's truncation "
                "is run and measured; ablation is counted in passes (1 + 12 (layer + 1) per "
                "neuron), each costed by timing a clean and two ablated passes of that neuron's "
                "prompts; the straightforward truncation is counted in full passes, costed by a "
                "linear fit (seconds against tokens) of timed full passes of the whole and the "
                "truncated prompts."
            ),
            "",
            "| way | seconds | of which truncation | of which ablation | ratio to project |",
            "|---|---|---|---|---|",
            (
                f"| project, measured ({ours['passes']} passes, {ours['sequences']} sequences, "
                f"{ours.get('tokens', '?')} padded tokens, "
                f"peak memory {mib_of(ours)} MiB) | {ours['seconds']:.0f} | "
                f"{ours['truncation_s']:.1f} | {ours['ablation_s']:.1f} | 1x |"
            ),
        ]
        was = section.get("as_it_was_estimate")
        if was:
            lines.append(
                f"| as at 6a9c7ff, estimated (truncation measured) | {was['estimated_s']:.0f} | "
                f"{was['truncation_s']:.0f} | {was['ablation_s']:.0f} "
                f"({was['ablation_passes']} passes) | "
                f"**{was['estimated_s'] / ours['seconds']:.1f}x** |"
            )
        est = section.get("straightforward_estimate")
        if est:
            lines.append(
                f"| straightforward, estimated | {est['estimated_s']:.0f} | "
                f"{est['truncation_s']:.0f} ({est['truncation_passes']} passes) | "
                f"{est['ablation_s']:.0f} ({est['ablation_passes']} passes) | "
                f"**{est['estimated_s'] / ours['seconds']:.1f}x** |"
            )
        inner = ours["truncation_s"] + ours["ablation_s"]
        if was and est and inner > 0:
            lines += [
                "",
                (
                    f"- truncation and ablation alone: project {inner:.0f} s, 6a9c7ff "
                    f"{was['truncation_s'] + was['ablation_s']:.0f} s "
                    f"(**{(was['truncation_s'] + was['ablation_s']) / inner:.0f}x**), "
                    f"straightforward {est['truncation_s'] + est['ablation_s']:.0f} s "
                    f"(**{(est['truncation_s'] + est['ablation_s']) / inner:.0f}x**); shared steps "
                    f"{est['shared_s']:.0f} s"
                ),
            ]
        if ours.get("errors"):
            lines.append(f"- neurons reported as not firing: {len(ours['errors'])}")
    checks = [c for v in part.values() if isinstance(v, dict) for c in v.get("checks", [])]
    if checks:
        lines += [""] + checks_md(checks)
    return lines
