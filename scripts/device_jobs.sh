#!/usr/bin/env bash
# Device jobs: what this project runs the first time a GPU is lent (one NVIDIA H100, 16 cores, no
# network, 10 minutes a command, about 15 minutes of device time in all).
#
#   scripts/device_jobs.sh --prepare          HERE, once, before the device call (see "Before")
#   scripts/device_jobs.sh [STEP ...]         ON THE DEVICE: steps 1 to 5 (default: 1 2 3)
#   scripts/device_jobs.sh --smoke [STEP ...] here, on the CPU: the same plumbing, tiny budgets
#
# Steps, in the order of their value (each timed, each one's outputs packed under $OUT as it ends):
#   1  Train the seed-1 model: the shipped trained model's recorded command with --seed 1 (96M
#      tokens, batch 64, --threads 4, the shipped tokenizer, the corpora at /tmp/data/corpora and
#      Python 3.11.7's standard library as the code corpus, as the shipped run had them), then its
#      development.json from the checkpoints the shipped one kept (0, 128, 512, 2048, last) with
#      the package's summarize_run and add_development_view (protocols v1 and v3).
#      -> $OUT/trained-seed1.tar.gz: the
#      directory trained-seed1/ as the shipped model's (config.json, generation_config.json,
#      model.safetensors in half precision, tokenizer.json, tokenizer_config.json, training.json
#      with an "environment" note, loss.csv, heldout.csv, development.json).
#   2  Train a model whose layer 0 has GPT-2 Small's shape (2 blocks, d_model 768, 12 heads,
#      d_mlp 3072, context 1024, batch 16 x 1024 = 16,384 tokens a step as in step 1) with GPT-2's
#      tokenizer (vocab.json and merges.txt of shared/gpt2-tokenizer, 50,257 ids), on the same
#      mixture, seed 0; then the method's view of its final model on the GPU (scripts/device_steps.py
#      summary), then protocol v3 on it on the CPU cores (12 threads, without the parts timed
#      apart and the exploratory arm: verdict-v3.json, in whatever time is left).
#      -> $OUT/gpt2-layer0.tar.gz: training.json, loss.csv, heldout.csv, config.json,
#      generation_config.json, tokenizer_config.json, summary.json, verdict-v3.json. Its weights (53.6M
#      parameters, 107 MB in half precision) cannot come back: a device call returns at most 16 MiB
#      a file and 64 MiB in all; they stay in runs/gpt2-layer0 on the machine.
#      Budget: GPT2_LAYER0_TOKENS, default 7,000,000 (427 steps). Measured rate on an H100:
#      about 192,600 tokens/s (an estimate from parameter counts, 38,600, was 5 times low), so
#      40M tokens take about 210 s of training. If less time is left, the budget is cut to fit at
#      that rate (100 steps at least). Its v3 result came back and ships in the package
#      (assets/gpt2-layer0-shape): there is no need to run step 2 again.
#   3  Every chapter on the planted model on the GPU (run-chapters; chapters pick CUDA when present),
#      compared cell by cell with the CPU outputs stored in tests/notebooks/ by the project's
#      comparison (scripts/compare_chapters.py, which imports output_difference from
#      context_neurons.book.stored_outputs) -> $OUT/chapters-cuda.tar.gz (executed notebooks,
#      timings.json, comparison.md, comparison.json); then the main job,
#      `reproduce --model planted --texts 20 --device cuda` and `--model trained` -> tables, JSON
#      and logs in $OUT/reproduce-cuda.tar.gz. Caveat for the comparison: the chapters' code domain
#      reads six modules of the running Python's standard library (text.corpora.code_documents),
#      and three of them (fractions.py, bisect.py, shlex.py) differ between the stored outputs'
#      Python 3.11.7 and the device's 3.12, so a code-domain cell may differ for that reason alone
#      (CONTEXT_NEURONS_CODE, set to the carried 3.11.7 library, covers the trained model's
#      held-out text only).
#   4  The GPT-2 evaluation on the 12-layer GPT-2-shaped stand-in (scripts/simulate_online.py
#      --no-chapters: GPT-2's loader, OpenWebText from a local stand-in, no corpora), timed on
#      the GPU -> $OUT/gpt2-standin-cuda.tar.gz (timings.json, results-online.json, the log).
#      Runs first in lane B. Measured on an H200 (2026-11-28): 36 s for the main job.
#   5  Protocol discovery-verdict-gpt2's whole evaluation on the same stand-in WITH the corpora
#      (benchmarks/verdict_gpt2.py --device cuda: issue 52's 60 s GPU target, phase by phase),
#      after step 4 in lane B; its phases and verdict lines are copied into device_jobs.log
#      (the whole output in logs.tar.gz). Not yet run on a device. Left out of --smoke (its whole
#      evaluation takes minutes on the CPU: `python benchmarks/verdict_gpt2.py` is that run).
#
# Also under $OUT: timings.tsv (step, status, exit code, start and wall seconds from the script's
# start, lane, note), device_jobs.log (environment, progress, the end of each failing step's log)
# and logs.tar.gz (every step's full log). Seven files: a device call returns at most eight.
#
# Steps are independent: a failing step is recorded and the script goes on (only what needs a
# failed step's output is skipped). Every step runs under `timeout` against one deadline,
# DEVICE_JOBS_BUDGET_S after the start (default 570 s, for a call with timeout_s 600): a step that
# would end after it is stopped, or skipped when too little time is left, and everything already
# packed comes back. On the device the steps run in two lanes at once, because their sum does not
# fit one 10-minute command: lane A trains (1, then 2; step 1's development summary runs on the CPU
# beside step 2), lane B runs step 3 (chapters, comparison, main jobs). Wall times are measured
# under that sharing (timings.tsv says which lane); DEVICE_JOBS_SERIAL=1 runs everything in order.
#
# Time estimate on one H100, concurrent lanes: setup 30 s; lane A: step 1 about 200-230 s (189 s
# alone for seed 0), step 2 at most about 220 s with 7M tokens, its summary about 40 s: ends near
# 500-530 s; lane B: chapters about 200-300 s, main jobs about 120 s: ends near 450 s. With the
# machine's start (1-2 minutes) and the transfers, about 11-12 of the 15 minutes: no time for a
# second try, so run it once, as below, and give the machine back.
#
# Measured on the first lent H100 (2026-11-27; artifacts of that session: the issue 32 note):
#   step 1 (seed 1) trained in 158.5 s (754,556 tokens/s, 96M tokens) and came back: it is
#   done, do not run it again (`scripts/device_jobs.sh 2 3`). Step 2 trained at 192,918
#   tokens/s (28.8 s of training in 78 s of wall: GPT-2's tokenizer on the corpora and the
#   evaluations take about 50 s); 5.5M tokens left it at held-out loss 5.29 with no contextual
#   head, so v3 could not test it: give it GPT2_LAYER0_TOKENS=40000000 (about 210 s of
#   training). The chapters took 30-64 s each on the GPU beside training (ch01 36, ch02 30,
#   ch03 64, ch04 35, ch05_gallery 40, ch05_neurons 44 s): all eleven do not fit one call beside
#   step 2; the main jobs took 38 s (planted) and 61 s (trained) with --texts 20.
# Measured on the second lent H100 (2026-11-27, 22:47 UTC): `GPT2_LAYER0_TOKENS=40000000
#   scripts/device_jobs.sh 2 3`. Step 2: 39,993,344 tokens at 192,609 tokens/s (208 s of training
#   in 275 s of wall), summary 32 s, v3 on the GPU (--device cuda) 62 s: done; its records and v3
#   result are in the package (scripts/device_steps.py import-v3), do not run it again. Step 3:
#   ch06 39, ch07 34, ch08 81, ch09 35 s beside step 2; the appendix failed on CUDA (fixed since)
#   and ran on an H200 in 37 s (ch01 29, ch02 28). Main jobs: planted 34 s, trained 70 s.
#   Next time: `scripts/device_jobs.sh 4 5 3` (the GPT-2 main job, then the GPT-2 protocol
#   timed, then the chapters): the eleven chapters took about 470 s in all, so give step 3 the
#   chapters that matter first (DEVICE_JOBS_CHAPTERS) and expect its main jobs to be cut.
#
# Before (here, once; needs ../shared, the network for pip and this project's venv with Python
# 3.11.7, whose standard library the shipped model read): `scripts/device_jobs.sh --prepare`
# writes artifacts/device-bundle/ (ignored through /artifacts/; scripts/device_bundle.py says
# what is in it): the corpora and GPT-2 tokenizer packed (13 MB), the code corpus (2 MB), 35
# wheels the device lacks (TransformerLens and what it imports, jupytext, nbclient, ipykernel;
# 12 MB); the working tree plus the bundle is about 52 MiB of the 64 MiB a call may carry.
#
# The device call (the `run` tool), from the repository root:
#   command:   bash scripts/device_jobs.sh
#   carry:     ["artifacts/device-bundle"]
#   timeout_s: 600
# The device's python3 (3.12, PyTorch with CUDA) is used; the wheels go to /tmp/device-jobs/site
# (pip --no-index --no-deps --target), the data to /tmp/data. Environment knobs: OUT (required on
# the device), PYTHON, DEVICE_JOBS_BUDGET_S, DEVICE_JOBS_SERIAL, GPT2_LAYER0_TOKENS,
# DEVICE_JOBS_WORK (scratch, default /tmp/device-jobs), DEVICE_JOBS_DATA (default /tmp/data),
# DEVICE_JOBS_CHAPTERS (step 3's chapters, in order).
#
# --smoke: on the CPU here, with this checkout's venv, tiny budgets (a few training steps on two
# small corpora, a tiny step-2 shape with GPT-2's tokenizer, one chapter, reproduce --model planted
# --texts 2 only), serial, OUT defaulting to artifacts/device-smoke-out: checks the plumbing, not
# the numbers. About 6 minutes on 2 busy cores, most of it the main job.

set -uo pipefail  # no -e: a failing step is recorded and the next one runs

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"

SMOKE=0
STEPS=()
for arg in "$@"; do
    case $arg in
        --prepare)
            [ -x .venv/bin/python ] && default=.venv/bin/python || default=python3
            exec "${PYTHON:-$default}" scripts/device_bundle.py prepare ;;
        --smoke) SMOKE=1 ;;
        1 | 2 | 3 | 4 | 5) STEPS+=("$arg") ;;
        -h | --help) sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument: $arg (scripts/device_jobs.sh --help)" >&2; exit 2 ;;
    esac
done
[ ${#STEPS[@]} -eq 0 ] && STEPS=(1 2 3)  # steps 4 and 5 when asked
want() { [[ " ${STEPS[*]} " == *" $1 "* ]]; }

BUNDLE=${DEVICE_JOBS_BUNDLE:-$REPO/artifacts/device-bundle}
WORK=${DEVICE_JOBS_WORK:-/tmp/device-jobs}
if [ "$SMOKE" = 1 ]; then
    PY=${PYTHON:-$REPO/.venv/bin/python}
    OUT=${OUT:-$REPO/artifacts/device-smoke-out}
    WORK=${DEVICE_JOBS_WORK:-$REPO/artifacts/device-smoke-work}
    DATA=${DEVICE_JOBS_DATA:-$WORK/data}
    RUNS=$WORK/runs
    DEVICE=cpu
    SERIAL=${DEVICE_JOBS_SERIAL:-1}
    BUDGET=${DEVICE_JOBS_BUDGET_S:-480}
else
    PY=${PYTHON:-python3}
    if [ -z "${OUT:-}" ]; then echo "OUT is not set (the device call sets it)" >&2; exit 2; fi
    DATA=${DEVICE_JOBS_DATA:-/tmp/data}
    RUNS=runs  # in the device's copy of the repository: the recorded commands say runs/s1
    DEVICE=cuda
    SERIAL=${DEVICE_JOBS_SERIAL:-0}
    BUDGET=${DEVICE_JOBS_BUDGET_S:-570}
fi
RESERVE=12  # seconds kept after the last step for packing
V3_THREADS=$([ "$SMOKE" = 1 ] && echo 1 || echo 12)  # step 2's v3 on the CPU cores
LOGS=$WORK/logs
mkdir -p "$OUT" "$WORK" "$LOGS" "$RUNS"
rm -f "$OUT"/*.tar.gz "$OUT/timings.tsv"  # (the device empties $OUT; a second smoke run here)
T0=$(date +%s.%N)
MAIN_LOG=$OUT/device_jobs.log
: >"$MAIN_LOG"

# ---- bookkeeping ------------------------------------------------------------------------------

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
left() { awk -v t0="$T0" -v budget="$BUDGET" -v n="$(now)" 'BEGIN { printf "%d", t0 + budget - n }'; }
say() { echo "[$(since "$T0") s] $*" | tee -a "$MAIN_LOG"; }
record() {  # step status rc start wall lane note
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$OUT/timings.tsv"
}
printf 'step\tstatus\trc\tstart_s\twall_s\tlane\tnote\n' >"$OUT/timings.tsv"

pack_logs() {  # every step's log so far, in one file (written whole, then renamed)
    local tmp=$OUT/.logs.tar.gz.$BASHPID
    tar -C "$WORK" -czf "$tmp" logs 2>/dev/null && mv -f "$tmp" "$OUT/logs.tar.gz"
}

# run_step NAME LANE MIN_SECONDS STDOUT_FILE COMMAND...: runs COMMAND under the deadline with its
# stderr (and its stdout, when STDOUT_FILE is -) in $LOGS/NAME.log, or skips it when fewer than
# MIN_SECONDS are left; records it in timings.tsv.
run_step() {
    local name=$1 lane=$2 min=$3 stdout=$4
    shift 4
    local log=$LOGS/$name.log available start started rc status wall
    available=$(( $(left) - RESERVE ))
    started=$(since "$T0")
    if (( available < min )); then
        record "$name" skipped - "$started" 0 "$lane" "${available} s left before the deadline, ${min} s needed"
        say "$name: skipped (${available} s left, ${min} s needed)"
        return 99
    fi
    [ "$stdout" = - ] && stdout=$log
    say "$name: start (lane $lane, ${available} s left)"
    start=$(now)
    # a step allowed to start past the deadline (MIN_SECONDS below 0) gets 15 s
    timeout -k 10 "$(( available > 15 ? available : 15 ))" "$@" >"$stdout" 2>>"$log"
    rc=$?
    wall=$(since "$start")
    case $name:$rc in
        *:0) status=ok ;;
        3-compare:1) status=differs ;;  # compare_chapters.py: some cell differs or is missing
        *:124 | *:137) status=timeout ;;
        *) status=failed ;;
    esac
    local note=$*
    note=${note//$'\n'/ }
    record "$name" "$status" "$rc" "$started" "$wall" "$lane" "${note//$'\t'/ }"
    say "$name: $status (exit $rc) in $wall s"
    if [ "$status" = failed ] || [ "$status" = timeout ]; then
        { echo "---- end of $log"; tail -n 25 "$log"; echo "----"; } >>"$MAIN_LOG"
    fi
    pack_logs
    return $rc
}

skip() {  # NAME LANE WHY
    record "$1" skipped - "$(since "$T0")" 0 "$2" "$3"
    say "$1: skipped ($3)"
}

# ---- setup: data, packages, environment -----------------------------------------------------

setup() {
    {
        echo "device jobs: steps ${STEPS[*]}, smoke $SMOKE, serial $SERIAL, budget $BUDGET s"
        echo "repository: $REPO ($(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo 'no git'))"
        command -v nvidia-smi >/dev/null && nvidia-smi -L
        "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "| torch", torch.__version__, "| cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")'
        echo "cores: $(nproc)"
    } >>"$MAIN_LOG" 2>&1
    run_step 0-unpack setup 5 - "$PY" scripts/device_bundle.py unpack --bundle "$BUNDLE" --into "$DATA"
    if [ "$SMOKE" = 1 ]; then
        export PYTHONPATH=$REPO/src  # the venv holds every package
    else
        run_step 0-wheels setup 5 - "$PY" -m pip install -q --no-index --no-deps --no-compile \
            --no-cache-dir --upgrade --target "$WORK/site" "$BUNDLE"/wheels/*.whl
        export PYTHONPATH=$WORK/site:$REPO/src
    fi
    export CONTEXT_NEURONS_CORPORA=$DATA/corpora CONTEXT_NEURONS_TOKENIZER=$DATA/gpt2-tokenizer
    export CONTEXT_NEURONS_CODE=$DATA/code CONTEXT_NEURONS_CACHE=$WORK/cache
    export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
    run_step 0-imports setup 5 - "$PY" -c 'import importlib.metadata as m, transformer_lens, jupytext, nbclient, ipykernel, context_neurons.models
print({n: m.version(n) for n in ("torch", "transformers", "tokenizers", "transformer-lens", "datasets", "numpy", "nbclient", "ipykernel")})'
    cat "$LOGS/0-imports.log" >>"$MAIN_LOG"
}

# ---- step 1: the seed-1 model -----------------------------------------------------------------

RUN1=$RUNS/s1
SHIPPED_FILES=config.json,generation_config.json,model.safetensors,tokenizer.json,tokenizer_config.json,training.json,loss.csv,heldout.csv,development.json

step1_train() {
    # The shipped model's command (src/context_neurons/assets/trained-model/training.json) with
    # --seed 1 and --out runs/s1; --no-progress as its recorded config (progress false).
    local args=(--out "$RUN1" --corpora "$DATA/corpora" --size default --seed 1 --threads 4
                --device "$DEVICE" --tokens 96000000 --batch-size 64
                --tokenizer src/context_neurons/assets/trained-model --no-progress)
    [ "$SMOKE" = 1 ] && args+=(--tokens 8192 --batch-size 8 --threads 1
                                --weights nltk_inaugural_us=1,pokemon_showdown=1)
    rm -rf "$RUN1"
    local rc=0
    run_step 1-train A 60 - "$PY" -m context_neurons.training "${args[@]}" || rc=$?
    if [ $rc -ne 0 ]; then
        pack1  # what there is (loss.csv of an interrupted run, say)
        return $rc
    fi
    run_step 1-annotate A 2 - "$PY" scripts/device_steps.py annotate "$RUN1" \
        --note "CONTEXT_NEURONS_CODE=the Python 3.11.7 standard library (the code corpus CI and the shipped model read), carried to the GPU machine in artifacts/device-bundle/code.tar.xz and unpacked to $DATA/code, read by the device's Python $("$PY" -c 'import platform; print(platform.python_version())')" \
        --note "CONTEXT_NEURONS_CORPORA=the offline corpora (../shared/corpora), carried to the GPU machine in artifacts/device-bundle/shared.tar.xz and unpacked to $DATA/corpora" \
        --note "runner=scripts/device_jobs.sh, step 1"
    pack1  # the weights come back even if the development summary does not finish
}

# pack_run NAME RUN_DIR FILES: the comma-separated FILES of RUN_DIR that exist -> $OUT/NAME.tar.gz
pack_run() {
    local name=$1 run=$2 files=$3 f
    rm -rf "$WORK/pack/$name" && mkdir -p "$WORK/pack/$name"
    for f in ${files//,/ }; do
        [ -f "$run/$f" ] && cp "$run/$f" "$WORK/pack/$name/"
    done
    "$PY" scripts/device_steps.py pack "$OUT/$name.tar.gz" "$WORK/pack/$name" >>"$MAIN_LOG" 2>&1
}

pack1() {
    pack_run trained-seed1 "$RUN1" "$SHIPPED_FILES"
}

step1_development() {
    if [ ! -f "$RUN1/training.json" ] || [ -f "$RUN1/RUNNING" ]; then
        skip 1-development C "step 1's training did not finish"
        return 1
    fi
    run_step 1-development C 30 - "$PY" scripts/device_steps.py development "$RUN1" --threads 6 \
        && pack1
}

# ---- step 2: GPT-2 Small's layer-0 shape, GPT-2's tokenizer -------------------------------------

RUN2=$RUNS/gpt2-layer0
STEP2_FILES=training.json,loss.csv,heldout.csv,config.json,generation_config.json,tokenizer_config.json,summary.json,verdict-v3.json
STEP2_RATE=192609  # tokens/s, step 2 on an H100 (2026-11-27, the second lent H100)

step2_tokens() {
    # GPT2_LAYER0_TOKENS (default 7M), cut so that training fits the time left at step 2's own
    # rate as measured on the lent H100s (192,918 and 192,609 tokens/s; the parameter-ratio
    # estimate from step 1's rate, 38,600, was 5 times low).
    local wanted=${GPT2_LAYER0_TOKENS:-7000000} overhead=150
    "$PY" - "$wanted" "$(left)" "$overhead" "$STEP2_RATE" <<'EOF'
import sys
wanted, left, overhead, rate = int(sys.argv[1]), *map(float, sys.argv[2:])
fits = int(rate * max(left - overhead, 0))
step = 16 * 1024
print(max(min(wanted, fits) // step, 100) * step)
EOF
}

step2() {
    local tokens
    tokens=$(step2_tokens)
    local args=(--out "$RUN2" --corpora "$DATA/corpora" --size default --seed 0 --threads 4
                --device "$DEVICE" --tokens "$tokens" --n-layer 2 --d-model 768 --n-head 12
                --d-mlp 3072 --n-ctx 1024 --batch-size 16 --tokenizer "$DATA/gpt2-tokenizer"
                --no-progress)
    [ "$SMOKE" = 1 ] && args+=(--d-model 32 --n-head 4 --d-mlp 64 --n-ctx 64 --batch-size 2
                                --tokens 512 --threads 1
                                --weights nltk_inaugural_us=1,pokemon_showdown=1)
    say "step 2: --tokens $tokens"
    rm -rf "$RUN2"
    run_step 2-train A 90 - "$PY" -m context_neurons.training "${args[@]}"
    if [ -f "$RUN2/training.json" ] && [ ! -f "$RUN2/RUNNING" ]; then
        run_step 2-summary A 20 - "$PY" scripts/device_steps.py summary "$RUN2" \
            --out "$RUN2/summary.json" --device "$DEVICE"
        pack_run gpt2-layer0 "$RUN2" "$STEP2_FILES"  # the summary comes back whatever v3 does
        # Protocol v3 on it, here, because its weights cannot come back, without the parts timed
        # apart (untrained and planted controls) and the exploratory arm: on the GPU first (62 s
        # on the second lent H100; the CPU path's estimate did not fit beside training), then on
        # the device's CPU cores if that fails. Bring the result home with
        # `scripts/device_steps.py import-v3` (it ships in assets/gpt2-layer0-shape).
        run_step 2-v3-cuda A 60 - "$PY" -m context_neurons v3 --model "$RUN2" --no-apart \
            --no-label-free --threads "$V3_THREADS" --device "$DEVICE" \
            --out "$RUN2/verdict-v3.json" \
        || run_step 2-v3 A 60 - "$PY" -m context_neurons v3 --model "$RUN2" --no-apart \
            --no-label-free --threads "$V3_THREADS" --out "$RUN2/verdict-v3.json"
    else
        skip 2-summary A "step 2's training did not finish"
    fi
    pack_run gpt2-layer0 "$RUN2" "$STEP2_FILES"
}

# ---- step 3: chapters on the GPU against the stored CPU outputs; the main job ----------------------

step3() {
    # DEVICE_JOBS_CHAPTERS: chapter names in the order to run them (default: all, in book order)
    local chapters=(${DEVICE_JOBS_CHAPTERS:-}) texts=20 compare=() fresh=$WORK/chapters-cuda
    if [ "$SMOKE" = 1 ]; then
        chapters=(ch01_decomposition)
        texts=2
        compare=(--executed-only)
    fi
    rm -rf "$fresh" "$WORK/reproduce-cuda"
    mkdir -p "$fresh" "$WORK/reproduce-cuda"
    run_step 3-chapters B 60 - "$PY" -m context_neurons run-chapters "${chapters[@]}" \
        --model planted --out "$fresh"
    # the chapters written so far are compared even when the run stopped at the deadline
    run_step 3-compare B -30 - "$PY" scripts/compare_chapters.py "$fresh" --out "$fresh" \
        "${compare[@]}"
    "$PY" scripts/device_steps.py pack "$OUT/chapters-cuda.tar.gz" "$fresh" >>"$MAIN_LOG" 2>&1
    local model models=(planted trained)
    if [ "$SMOKE" = 1 ]; then  # 2-3 minutes more on 2 busy cores; the same command as planted's
        models=(planted)
        skip 3-reproduce-trained B "smoke: left out (the same command with --model trained)"
    fi
    for model in "${models[@]}"; do
        run_step "3-reproduce-$model" B 20 "$WORK/reproduce-cuda/$model.txt" \
            "$PY" -m context_neurons reproduce --model "$model" --texts "$texts" \
            --device "$DEVICE" --no-progress --out "$WORK/reproduce-cuda/$model.json"
        cp "$LOGS/3-reproduce-$model.log" "$WORK/reproduce-cuda/$model.log" 2>/dev/null
        "$PY" scripts/device_steps.py pack "$OUT/reproduce-cuda.tar.gz" "$WORK/reproduce-cuda" \
            >>"$MAIN_LOG" 2>&1
    done
}

# ---- step 4: the GPT-2 evaluation on the 12-layer stand-in -----------------------------------

step4() {
    # The main job on GPT-2 Small's path, simulated (scripts/simulate_online.py: the 12-layer
    # GPT-2-shaped stand-in through GPT-2's loader, OpenWebText from a local stand-in, no corpora),
    # `reproduce --model gpt2 --texts 20` on the device's GPU (--device auto), timed.
    local out4=$WORK/gpt2-standin
    rm -rf "$out4" && mkdir -p "$out4"
    run_step 4-gpt2-standin B 60 - "$PY" scripts/simulate_online.py --out "$out4" --no-chapters
    cp "$LOGS/4-gpt2-standin.log" "$out4/simulate_online.log" 2>/dev/null
    rm -rf "$out4/gpt2-shaped" "$out4"/*.parquet  # the checkpoint and the text: rebuilt anywhere
    "$PY" scripts/device_steps.py pack "$OUT/gpt2-standin-cuda.tar.gz" "$out4" >>"$MAIN_LOG" 2>&1
}

# ---- step 5: the GPT-2 protocol's whole evaluation, timed on the GPU --------------------------

step5() {
    if [ "$SMOKE" = 1 ]; then
        skip 5-verdict-gpt2 B "smoke: left out (the whole evaluation takes minutes on the CPU)"
        return 0
    fi
    run_step 5-verdict-gpt2 B 120 - "$PY" benchmarks/verdict_gpt2.py --device cuda --threads 4
    { echo "---- step 5 (benchmarks/verdict_gpt2.py --device cuda): phases and verdict"
      grep -E '^  |^data|^bag|^previous|^whole|: primary|the paper.s claim' \
          "$LOGS/5-verdict-gpt2.log" | cut -c1-300
      echo "----"; } >>"$MAIN_LOG"
}

# ---- the lanes --------------------------------------------------------------------------------

lane_training() {
    local development=
    if want 1; then
        if step1_train; then
            if [ "$SERIAL" = 1 ]; then
                step1_development
            else
                step1_development &
                development=$!
            fi
        else
            skip 1-development C "step 1's training failed"
        fi
    fi
    want 2 && step2
    [ -n "$development" ] && wait "$development"
    return 0
}

lane_checks() {
    want 4 && step4
    want 5 && step5
    want 3 && step3
    return 0
}

setup
if [ "$SERIAL" = 1 ]; then
    lane_training
    lane_checks
else
    lane_training &
    training=$!
    lane_checks &
    checks=$!
    wait "$training" "$checks"
fi
pack_logs
say "done: $(awk -F'\t' 'NR > 1 { n[$2]++ } END { for (s in n) printf "%s %d  ", s, n[s] }' "$OUT/timings.tsv")"
column -t -s $'\t' "$OUT/timings.tsv" 2>/dev/null | tee -a "$MAIN_LOG" || cat "$OUT/timings.tsv"
ls -la "$OUT" | tee -a "$MAIN_LOG"
exit 0
