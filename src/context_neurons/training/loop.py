"""The training run: data, model, optimiser, loop, checkpoints, held-out losses, saved model.

``OUT/`` receives the final model in half precision (``config.json``, ``model.safetensors``), the
tokenizer files, ``training.json`` (configuration, environment, budget, timings, held-out losses,
the command that reproduces the run), ``loss.csv`` (one row per step), ``heldout.csv`` (held-out
loss per corpus at each checkpoint and at the end) and ``split.json`` (the document split).
``OUT/checkpoints/step-N/`` holds float32 checkpoints at log-spaced steps (not for shipping).

While the run is incomplete, ``OUT/RUNNING`` says so and ``OUT/resume.pt`` (one file, replaced
every ``resume_every`` steps: float32 weights, the optimiser's moments, the schedule's step, the
data mixture's position and generator, torch's generator) is what ``train --resume`` continues
from, to the same weights as a run without the interruption. Both are removed when the run
finishes, so a finished directory holds no resume state.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import platform
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import tokenizers
import torch
import transformers
from tqdm.auto import tqdm
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.utils import logging as hf_logging

from context_neurons import config as settings
from context_neurons.checks import DataError, InputError, writable_directory
from context_neurons.files import write_whole
from context_neurons.text.dataset import CODE_FOLDER, digest, load_manifest, verify_code_root
from context_neurons.text.dataset import verify_corpora
from context_neurons.training.config import (
    EOT,
    SHORT_DOCUMENT_CORPORA,
    SIZES,
    TrainConfig,
    config_problems,
    reproduce_command,
)
from context_neurons.training.corpus import corpus_names, split_corpora, stdlib_dir
from context_neurons.training.corpus import write_manifest
from context_neurons.training.stream import (
    DocumentMixture,
    eval_windows,
    group_short,
    pack_windows,
    tokenize_documents,
)
from context_neurons.training.tokenizer import (
    load_tokenizer,
    train_tokenizer,
    training_texts,
)


#: Marker of a run that has not finished (removed when it does).
RUNNING_FILE = "RUNNING"
#: The state an interrupted run continues from (``--resume``; removed when the run finishes).
RESUME_FILE = "resume.pt"
#: The files a run writes in its directory (``--overwrite`` removes them and ``checkpoints/``).
RUN_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
             "tokenizer_config.json", "special_tokens_map.json", "training.json", "loss.csv",
             "heldout.csv", "split.json", "development.json", RUNNING_FILE, RESUME_FILE)


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda was asked for but no CUDA device is available: use "
                         "--device cpu (or auto).")
    if device not in ("cpu", "cuda"):
        raise InputError(f"Unknown device {device!r}: choose auto, cpu or cuda.")
    return torch.device(device)


def checkpoint_steps(total: int, n_checkpoints: int = 0) -> list[int]:
    """Steps 0, 1, 2, 4, 8, ... and ``total`` (``n_checkpoints == 0``), else 0 and about
    ``n_checkpoints`` log-spaced steps up to ``total``."""
    if total < 1:
        return [0]
    if n_checkpoints > 0:
        steps = {0, total, *np.unique(np.round(np.geomspace(1, total, n_checkpoints))).astype(int)}
    else:
        steps = {0, total, *(2**k for k in range(int(math.log2(total)) + 1))}
    return sorted(int(s) for s in steps if s <= total)


def learning_rate(step: int, total: int, cfg: TrainConfig) -> float:
    """Linear warm-up over ``warmup_steps``, then cosine decay to ``min_lr_ratio * lr``."""
    warmup = min(cfg.warmup_steps, max(total - 1, 0))
    if step < warmup:
        return cfg.lr * (step + 1) / warmup
    progress = (step - warmup) / max(total - warmup, 1)
    cosine = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cosine)


def quiet_transformers() -> None:
    """No per-save progress bars from Hugging Face (the training bar is the one to read)."""

    hf_logging.disable_progress_bar()


def build_model(cfg: TrainConfig, vocab_size: int, eot_id: int):
    """A seeded, freshly initialised GPT-2-architecture model (learned absolute positions, tied
    embeddings, GELU, pre-LayerNorm)."""

    config = GPT2Config(
        vocab_size=vocab_size, n_positions=cfg.n_ctx, n_embd=cfg.d_model, n_layer=cfg.n_layer,
        n_head=cfg.n_head, n_inner=cfg.d_mlp, activation_function="gelu_new",
        resid_pdrop=cfg.dropout, embd_pdrop=cfg.dropout, attn_pdrop=cfg.dropout,
        bos_token_id=eot_id, eos_token_id=eot_id, tie_word_embeddings=True,
    )
    torch.manual_seed(cfg.seed)
    model = GPT2LMHeadModel(config)
    model.config._attn_implementation = "sdpa"
    model.loss_type = "ForCausalLM"  # what transformers falls back to, without its warning
    return model


def make_optimizer(model, cfg: TrainConfig) -> torch.optim.Optimizer:
    """AdamW; weight decay on the blocks' weight matrices only (not on the token and position
    embeddings, biases or LayerNorms: decay would pull the position embeddings towards zero)."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        is_block_matrix = param.ndim == 2 and ".h." in f".{name}" and "wpe" not in name
        (decay if is_block_matrix else no_decay).append(param)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=1e-8,
                             foreach=False)


@torch.no_grad()
def heldout_losses(model, windows: dict[str, np.ndarray], device: torch.device,
                   batch_size: int = 16) -> dict[str, float]:
    """Mean next-token loss on each corpus's held-out windows, and their unweighted mean."""
    was_training = model.training
    model.eval()
    losses = {}
    for corpus in sorted(windows):
        w = windows[corpus]
        if not len(w):
            continue
        total, count = 0.0, 0
        for start in range(0, len(w), batch_size):
            x = torch.from_numpy(w[start:start + batch_size].astype(np.int64)).to(device)
            logits = model(input_ids=x).logits.float()
            loss = torch.nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1),
                reduction="sum")
            total += loss.item()
            count += x[:, 1:].numel()
        losses[corpus] = total / count
    if losses:
        losses["mean"] = float(np.mean(list(losses.values())))
    model.train(was_training)
    return losses


def _autocast(device: torch.device):
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


def _train_step(model, optimizer, x: torch.Tensor, lr: float, cfg: TrainConfig,
                device: torch.device) -> float:
    for group in optimizer.param_groups:
        group["lr"] = lr
    with _autocast(device):
        loss = model(input_ids=x, labels=x).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip, foreach=False)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()


def measure_tokens_per_second(cfg: TrainConfig, vocab_size: int, eot_id: int,
                              device: torch.device, steps: int = 6) -> float:
    """Training throughput of a throw-away copy of the model (for a ``--minutes`` budget)."""
    model = build_model(cfg, vocab_size, eot_id).to(device).train()
    optimizer = make_optimizer(model, cfg)
    gen = torch.Generator().manual_seed(12345)
    x = torch.randint(0, vocab_size, (cfg.batch_size, cfg.n_ctx), generator=gen).to(device)
    with torch.enable_grad():
        _train_step(model, optimizer, x, cfg.lr, cfg, device)  # warm-up
        start = time.perf_counter()
        for _ in range(steps):
            _train_step(model, optimizer, x, cfg.lr, cfg, device)
        if device.type == "cuda":
            torch.cuda.synchronize()
    return steps * cfg.batch_size * cfg.n_ctx / (time.perf_counter() - start)


def set_determinism(cfg: TrainConfig, device: torch.device) -> None:
    torch.set_num_threads(cfg.threads)
    if device.type == "cuda":
        settings.deterministic_cublas()
        torch.backends.cudnn.benchmark = False
        torch.backends.cuda.matmul.allow_tf32 = False
        # cuDNN's and the fused attention kernels' backward passes are not deterministic: the
        # math kernel is (at n_ctx 256 it costs little).
        torch.backends.cuda.enable_cudnn_sdp(False)
        torch.backends.cuda.enable_flash_sdp(False)
        torch.backends.cuda.enable_mem_efficient_sdp(False)
    torch.use_deterministic_algorithms(True, warn_only=True)


def _save_checkpoint(model, path: Path, heldout: dict[str, float] | None, step: int,
                     tokens: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    (path / "state.json").write_text(json.dumps(
        {"step": step, "tokens": tokens, "heldout": heldout}, indent=1) + "\n")


def train(config: TrainConfig, resume: bool = False, overwrite: bool = False,
          verify: bool = True) -> Path:
    """Run ``config`` and return the output directory (see the module docstring).

    The configuration and the output directory are checked before any data is read. A directory
    that is not empty is refused unless ``resume`` (continue the interrupted run in it from its
    last saved state, to the same weights as a run without the interruption) or ``overwrite``
    (remove the files of the run it holds first). The corpora are checked against the dataset's
    manifest unless ``verify`` is False (:func:`corpora_dataset`). Sets the thread count and
    deterministic algorithms for the run and restores them after."""
    if resume and overwrite:
        raise InputError("--resume and --overwrite exclude each other: choose one.")
    saved = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled(),
             torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        return _train(config, resume, overwrite, verify)
    finally:
        torch.set_num_threads(saved[0])
        torch.use_deterministic_algorithms(saved[1], warn_only=saved[2])


def check_config(cfg: TrainConfig) -> None:
    """An :class:`InputError` listing what is wrong with a resolved configuration (corpus names
    against the corpora directory included), before anything is read or written."""
    corpora = Path(cfg.corpora).expanduser()
    if not corpora.is_dir():
        raise InputError(f"--corpora {cfg.corpora} is not a directory: pass the directory of the "
                         f"offline corpora (or set {settings.CORPORA.name}).")
    problems = config_problems(cfg, corpus_names(corpora))
    if problems:
        raise InputError("; ".join(problems) + ".")


def corpora_dataset(cfg: TrainConfig, verify: bool = True) -> dict:
    """The version of the corpora dataset (``assets/corpora.json``) the run reads, the folders
    checked against its checksums (the code corpus at the root it is read from,
    :func:`~context_neurons.training.corpus.stdlib_dir`), and those it does not hold (a reader's
    own text). A dataset folder whose files differ is refused unless ``verify`` is False
    (other text, deliberately: ``train --no-verify``), and then recorded as not verified."""
    manifest = load_manifest()
    read = sorted(c for c, w in cfg.corpus_weights.items() if w > 0)
    in_dataset = [c for c in read if c in manifest["folders"]]
    out = {"version": manifest["version"], "verified": [], "not_verified": [],
           "not_in_dataset": [c for c in read if c not in manifest["folders"]]}
    if not verify:
        return {**out, "not_verified": in_dataset}
    folders = [c for c in in_dataset if c != CODE_FOLDER]  # the code: at its root in use
    problems = verify_corpora(cfg.corpora, only=folders) if folders else []
    if CODE_FOLDER in in_dataset:
        problems += verify_code_root(stdlib_dir())
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise DataError(
            f"--corpora {cfg.corpora} does not match the corpora dataset, version "
            f"{manifest['version']}: {problems[0]}{more}. Fetch it with `python -m "
            "context_neurons fetch-corpora --dir DIR`, or pass --no-verify to train on other "
            "text deliberately.")
    return {**out, "verified": in_dataset}


def prepare_output(out: Path, resume: bool, overwrite: bool) -> dict | None:
    """Check ``out`` before the run; returns the resume state to continue from, if any.

    An existing run in ``out`` is never overwritten silently: a directory that is not empty needs
    ``resume`` or ``overwrite``; ``overwrite`` removes only the files a run writes
    (:data:`RUN_FILES` and ``checkpoints/``)."""
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file, not a directory: choose another path.")
    existing = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    state = None
    if resume and not existing:
        raise InputError(
            f"--out {out} {'is empty' if out.is_dir() else 'does not exist'}: there is no run to "
            "resume. Drop --resume to start a new run there (it takes as long as the whole run).")
    if resume and (out / RESUME_FILE).is_file():
        state = read_resume_state(out / RESUME_FILE)
    elif resume and existing and not (out / RUNNING_FILE).is_file():
        done = (out / "training.json").is_file()
        raise InputError(
            f"--out {out} holds {'a finished run' if done else 'no interrupted run'}: nothing to "
            "resume (pass --overwrite to replace it, or choose another directory).")
    elif existing and not (overwrite or resume):
        shown = ", ".join(existing[:6]) + (", ..." if len(existing) > 6 else "")
        raise InputError(
            f"--out {out} is not empty ({shown}): pass --resume to continue the interrupted run "
            "in it, --overwrite to replace the run it holds, or choose another directory.")
    if state is None and existing and resume:
        print(f"note: {out} holds an interrupted run that saved no state yet: it starts over.",
              file=sys.stderr)
    if state is None and existing:  # overwrite, or a resume with nothing saved yet: start over
        for name in RUN_FILES:
            (out / name).unlink(missing_ok=True)
        shutil.rmtree(out / "checkpoints", ignore_errors=True)
    writable_directory(out, "--out")
    return state


def read_resume_state(path: Path) -> dict:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a truncated or foreign file: say which and what to do
        raise DataError(f"{path} cannot be read ({type(err).__name__}: {err}): the saved state "
                        "is damaged; rerun with --overwrite to start the run again.") from None


def _continue_config(state: dict, requested: TrainConfig) -> TrainConfig:
    """The saved run's configuration, after checking that ``requested`` asks for the same run
    (``out``, ``progress``, ``stop_after_steps`` and ``resume_every`` may differ)."""
    free = ("out", "progress", "stop_after_steps", "resume_every")
    stored = state["requested"]
    differ = sorted(k for k, v in requested.to_dict().items()
                    if k not in free and stored.get(k) != v)
    if differ:
        raise InputError(
            f"--resume continues the run saved in {requested.out}, whose options differ in "
            f"{', '.join(differ)}: rerun its command with --resume ({state['command']}).")
    kept = {k: getattr(requested, k) for k in free}
    return dataclasses.replace(TrainConfig(**state["config"]), **kept)


def _train(config: TrainConfig, resume: bool, overwrite: bool, verify: bool = True) -> Path:
    t_start = time.perf_counter()
    quiet_transformers()
    cfg = config.resolved()
    check_config(cfg)
    dataset = corpora_dataset(cfg, verify)
    device = resolve_device(cfg.device)
    out = Path(cfg.out)
    state = prepare_output(out, resume, overwrite)
    requested = cfg
    if state is not None:
        cfg = _continue_config(state, requested)
    set_determinism(cfg, device)
    (out / RUNNING_FILE).write_text(
        "This training run is incomplete (interrupted, or stopped by --stop-after-steps). Continue "
        "it with its command and --resume; the file is removed when the run finishes.\n")
    log = _Logger(cfg.progress)

    # ---- data: split, tokenizer, windows
    corpora = [c for c, w in cfg.corpus_weights.items() if w > 0]
    split = split_corpora(corpora, cfg.corpora, cfg.heldout_fraction)
    write_manifest(split, out / "split.json")
    log(f"split: {sum(len(v) for v in split.train.values())} train / "
        f"{sum(len(v) for v in split.heldout.values())} held-out documents")
    if state is not None:  # the tokenizer the interrupted run trained and saved
        tokenizer = load_tokenizer(out)
        if digest(out / "tokenizer.json")[0] != state["tokenizer_sha256"]:
            raise DataError(f"{out / 'tokenizer.json'} is not the tokenizer of the saved run: "
                            "rerun with --overwrite to start again.")
    elif cfg.tokenizer:
        tokenizer = load_tokenizer(cfg.tokenizer)
    else:
        t0 = time.perf_counter()
        tokenizer = train_tokenizer(training_texts(split.train, cfg.tokenizer_chars_per_corpus),
                                    cfg.vocab_size, model_max_length=cfg.n_ctx)
        log(f"tokenizer: {len(tokenizer)} ids trained in {time.perf_counter() - t0:.0f} s")
    tokenizer.model_max_length = cfg.n_ctx
    if state is None:
        tokenizer.save_pretrained(out)
    eot_id = tokenizer.convert_tokens_to_ids(EOT)
    vocab_size = len(tokenizer)

    t0 = time.perf_counter()
    train_units, heldout_windows, n_tokens = {}, {}, {}
    for corpus in corpora:
        docs = tokenize_documents(split.train[corpus], tokenizer, eot_id)
        if corpus in SHORT_DOCUMENT_CORPORA:
            docs = group_short(docs, cfg.n_ctx // 2)
        train_units[corpus] = docs
        held = tokenize_documents(split.heldout[corpus], tokenizer, eot_id)
        held = pack_windows(np.concatenate(held) if held else np.zeros(0, dtype=np.int32),
                            cfg.n_ctx, eot_id)
        heldout_windows[corpus] = held
        n_tokens[corpus] = {"train_tokens": int(sum(len(d) for d in docs)),
                            "train_units": len(docs), "heldout_windows": int(len(held))}
    log(f"tokenized {sum(v['train_tokens'] for v in n_tokens.values())} training tokens in "
        f"{time.perf_counter() - t0:.0f} s")
    eval_final = {c: eval_windows(w, cfg.eval_windows) for c, w in heldout_windows.items()}
    eval_ckpt = {c: eval_windows(w, cfg.eval_windows_checkpoint) for c, w in heldout_windows.items()}

    # ---- budget
    tokens_per_step = cfg.batch_size * cfg.n_ctx
    measured_rate = None if state is None else state["measured_rate"]
    if cfg.tokens is None:
        measured_rate = measure_tokens_per_second(cfg, vocab_size, eot_id, device)
        budget = cfg.minutes * 60 * measured_rate
        cfg = dataclasses.replace(cfg, tokens=int(budget // tokens_per_step) * tokens_per_step,
                                  minutes=None)
        log(f"--minutes {config.minutes}: {measured_rate:.0f} tokens/s measured -> "
            f"--tokens {cfg.tokens}")
    total_steps = max(cfg.tokens // tokens_per_step, 1)
    ckpt_steps = set(checkpoint_steps(total_steps, cfg.n_checkpoints))

    # ---- model and optimiser
    model = build_model(cfg, vocab_size, eot_id).to(device).train()
    optimizer = make_optimizer(model, cfg)
    sampler = DocumentMixture(train_units, cfg.corpus_weights, cfg.seed, cfg.n_ctx, eot_id,
                              cfg.batch_size)

    heldout_rows: list[dict] = []
    train_seconds, eval_seconds = 0.0, 0.0
    losses_seen: list[float] = []
    start = 0
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        sampler.load_state_dict(state["sampler"])
        torch.set_rng_state(state["torch_rng"])
        if device.type == "cuda" and state.get("cuda_rng") is not None:
            torch.cuda.set_rng_state(state["cuda_rng"], device)
        start, losses_seen = state["step"], list(state["losses"])
        heldout_rows = list(state["heldout_rows"])
        train_seconds, eval_seconds = state["train_seconds"], state["eval_seconds"]
        log(f"resuming at step {start} of {total_steps} from {out / RESUME_FILE}")
    loss_file = _open_loss_log(out / "loss.csv", start)
    loss_csv = csv.writer(loss_file)

    def checkpoint(step: int) -> None:
        if not cfg.save_checkpoints:
            return
        losses = heldout_losses(model, eval_ckpt, device) if cfg.eval_windows_checkpoint else {}
        for corpus, value in losses.items():
            heldout_rows.append({"step": step, "tokens": step * tokens_per_step,
                                 "windows": "checkpoint", "corpus": corpus, "loss": value})
        _save_checkpoint(model, out / "checkpoints" / f"step-{step}", losses, step,
                         step * tokens_per_step)

    def save_state(step: int) -> None:
        """What continues the run at ``step`` exactly (float32 weights and the optimiser's
        moments: one file, replaced each time, removed when the run finishes)."""
        loss_file.flush()
        resume_state = {
            "step": step, "config": cfg.to_dict(), "requested": requested.to_dict(),
            "command": reproduce_command(cfg, device.type),
            "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "sampler": sampler.state_dict(), "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
            "losses": list(losses_seen), "heldout_rows": list(heldout_rows),
            "train_seconds": train_seconds, "eval_seconds": eval_seconds,
            "measured_rate": measured_rate,
            "tokenizer_sha256": digest(out / "tokenizer.json")[0],
        }
        write_whole(out / RESUME_FILE, lambda tmp: torch.save(resume_state, tmp))

    progress = _progress(total_steps, cfg.progress, initial=start)
    t_loop = time.perf_counter()
    with torch.enable_grad():
        for step in range(start, total_steps + 1):
            if step in ckpt_steps and not (state is not None and step == start):
                t0 = time.perf_counter()
                checkpoint(step)
                eval_seconds += time.perf_counter() - t0
            stop = step == cfg.stop_after_steps
            if step != start and step < total_steps and (stop or step % cfg.resume_every == 0):
                save_state(step)
            if step == total_steps or stop:
                break
            t0 = time.perf_counter()
            x = sampler.batch(cfg.batch_size).to(device)
            lr = learning_rate(step, total_steps, cfg)
            loss = _train_step(model, optimizer, x, lr, cfg, device)
            train_seconds += time.perf_counter() - t0
            losses_seen.append(loss)
            tokens = (step + 1) * tokens_per_step
            loss_csv.writerow([step + 1, tokens, repr(loss), repr(lr),
                               f"{time.perf_counter() - t_loop:.2f}"])
            if (step + 1) % 20 == 0:
                loss_file.flush()
            if progress is not None:
                progress.update(1)
                progress.set_postfix(loss=f"{loss:.3f}",
                                     tok_s=f"{(step + 1 - start) * tokens_per_step / train_seconds:.0f}"
                                     if train_seconds else "")
            if not math.isfinite(loss):
                raise FloatingPointError(f"Loss became {loss} at step {step + 1}.")
    if progress is not None:
        progress.close()
    loss_file.close()
    steps_done = len(losses_seen)

    # ---- final evaluation and saving
    t0 = time.perf_counter()
    final_heldout = heldout_losses(model, eval_final, device)
    eval_seconds += time.perf_counter() - t0
    for corpus, value in final_heldout.items():
        heldout_rows.append({"step": steps_done, "tokens": steps_done * tokens_per_step,
                             "windows": "final", "corpus": corpus, "loss": value})
    with (out / "heldout.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["step", "tokens", "windows", "corpus", "loss"])
        writer.writeheader()
        writer.writerows(heldout_rows)

    model.eval()
    model.half()
    model.config.dtype = torch.float16
    model.save_pretrained(out)
    if not (out / "model.safetensors").exists():
        raise RuntimeError(f"save_pretrained wrote no model.safetensors in {out}")

    tail = losses_seen[-min(50, len(losses_seen)):]
    record = {
        "config": cfg.to_dict(),
        "size": dataclasses.asdict(SIZES[cfg.size]),
        "command": reproduce_command(cfg, device.type),
        "command_module": reproduce_command(cfg, device.type).replace(
            "-m context_neurons train", "-m context_neurons.training", 1),
        "seed": cfg.seed,
        "corpora_dataset": dataset,
        "threads": cfg.threads,
        "device": str(device),
        "device_name": (torch.cuda.get_device_name(device) if device.type == "cuda"
                        else platform.processor() or platform.machine()),
        "versions": _versions(),
        "model": {"parameters": sum(p.numel() for p in model.parameters()),
                  "vocab_size": vocab_size, "eot_id": eot_id},
        "tokenizer_sha256": digest(out / "tokenizer.json")[0],
        "steps": total_steps,
        "stopped_after_steps": cfg.stop_after_steps,
        "resumed_from_step": start or None,
        "tokens_per_step": tokens_per_step,
        "steps_done": steps_done,
        "tokens_seen": steps_done * tokens_per_step,
        "train_seconds": train_seconds,
        "eval_checkpoint_seconds": eval_seconds,
        "wall_seconds": time.perf_counter() - t_start,
        "tokens_per_second": steps_done * tokens_per_step / max(train_seconds, 1e-9),
        "tokens_per_second_measured_for_budget": measured_rate,
        "final_train_loss_last50_mean": float(np.mean(tail)) if tail else None,
        "heldout_loss": final_heldout,
        "heldout_windows_per_corpus": {c: int(len(w)) for c, w in eval_final.items()},
        "corpus_weights": cfg.corpus_weights,
        "corpus_epochs_seen": sampler.epochs_seen(),
        "corpus_token_share_seen": sampler.tokens_seen_share(),
        "corpus_tokens": n_tokens,
        "split_counts": split.counts(),
        "checkpoint_steps": sorted(ckpt_steps) if cfg.save_checkpoints else [],
    }
    write_whole(out / "training.json",
                  lambda tmp: tmp.write_text(json.dumps(record, indent=1) + "\n"))
    if steps_done == total_steps:  # finished: no marker, no resume state
        (out / RESUME_FILE).unlink(missing_ok=True)
        (out / RUNNING_FILE).unlink(missing_ok=True)
    log(f"done: {record['tokens_seen']} tokens in {record['wall_seconds']:.0f} s "
        f"({record['tokens_per_second']:.0f} tokens/s training); held-out mean loss "
        f"{final_heldout.get('mean', float('nan')):.3f}; saved to {out}"
        + ("" if steps_done == total_steps else
           f" (stopped at step {steps_done} of {total_steps}: --resume continues it)"))
    return out


def _open_loss_log(path: Path, start: int):
    """``loss.csv`` opened for the rows after step ``start`` (the rows up to it kept)."""
    kept = []
    if start and path.is_file():
        with path.open(newline="") as handle:
            kept = [row for row in csv.reader(handle)][1:]
        kept = [row for row in kept if row and int(row[0]) <= start]
        if len(kept) != start:
            raise DataError(f"{path} holds {len(kept)} rows up to step {start}, not {start}: the "
                            "run's loss log is damaged; rerun with --overwrite.")
    handle = path.open("w", newline="")
    writer = csv.writer(handle)
    writer.writerow(["step", "tokens", "loss", "lr", "seconds"])
    writer.writerows(kept)
    handle.flush()
    return handle


def _versions() -> dict[str, str]:
    return {"python": sys.version.split()[0], "torch": torch.__version__,
            "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
            "numpy": np.__version__, "platform": platform.platform()}


def _progress(total: int, enabled: bool, initial: int = 0):
    if not enabled:
        return None

    return tqdm(total=total, initial=initial, desc="training", unit="step", dynamic_ncols=True)


class _Logger:
    """Progress messages on stderr (always; ``progress`` only switches the bar)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __call__(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)
