"""Inventory for protocol discovery-verdict-gpt2 (issue 52): which corpus documents the chapters'
and the main job's text readers consume on GPT-2's tokenizer at n_ctx 1024, and the
UNIGRAM/CONFIRM split (sha256('gpt2-split:' + key) < 0.5) of the rest, with document, token and
unit counts. Counts only: no model, no activation. Written to /tmp/gpt2inv/inventory.json; the
protocol's data.inventory and discovery-verdict-gpt2-excluded.json were written from it on
2026-11-28, before any GPT-2 number. The readers are replayed as scripts/confirm_inventory.py
replays them for v3 (patched document iterators). About four minutes on one core.

    PYTHONPATH=src python scripts/gpt2_inventory.py
"""
import hashlib, json, os, sys, time
from pathlib import Path
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from pathlib import Path
from context_neurons import config as settings
from context_neurons.models.loading import load_tokenizer
from context_neurons.training.config import DOMAINS
from context_neurons.training.corpus import iter_documents, stdlib_dir
from context_neurons.text.dataset import code_files
from confirm_inventory import recording, group_units
t0 = time.time()
tok = load_tokenizer()
print("model_max_length", tok.model_max_length, file=sys.stderr)
N = 1024
from context_neurons import respelling as rs
from context_neurons.evaluation import texts as ev
from context_neurons.text import corpora as data
from context_neurons.text import windows as tw
calls = {
 "ch01 evaluation_windows(1)": lambda: tw.evaluation_windows(tok, 1, n_ctx=N),
 "ch03 corpus_windows(1000, min_tokens=512)": lambda: tw.corpus_windows(tok, None, n=1000, min_tokens=N//2, n_ctx=N),
 "ch03 domain_windows(bible, 200, min_tokens=512)": lambda: tw.domain_windows(tok, "bible", n=200, min_tokens=N//2, n_ctx=N),
 "ch04 evaluation_windows(4)": lambda: tw.evaluation_windows(tok, 4, n_ctx=N),
 "ch05 domain_texts(4)": lambda: tw.domain_texts(tok, n=4, n_ctx=N),
 "ch06/ch09 held_out_general_windows(200)": lambda: ev.held_out_general_windows(tok, 200, n_ctx=N),
 "ch06/ch09 held_out_domain_sets(4)": lambda: ev.held_out_domain_sets(tok, data.DOMAINS, n=4, n_ctx=N),
 "ch07/main job lookup_windows(48)": lambda: tw.lookup_windows(tok, per_domain=48),
 "main job evaluation_windows(100)": lambda: tw.evaluation_windows(tok, 100, n_ctx=N),
 "main job evaluation_windows(1000) (--texts 1000)": lambda: tw.evaluation_windows(tok, 1000, n_ctx=N),
}
readers = {}
for name, call in calls.items():
    sink = set()
    with recording(sink):
        call()
    readers[name] = sink
    print(name, len(sink), round(time.time()-t0), file=sys.stderr)
pairs, source = rs.spelling_pairs()
aligned = rs.length_preserving_pairs(pairs, tok)
resp = rs.respelled_texts(tok, data.domain_documents("american"), aligned, n=8, pairs_source=source)
readers["ch05 respelled_texts(8)"] = {l.split("#")[0] for l in resp.labels}
readers["calibration texts"] = {f"{c.corpus}:{c.doc_id}" for c in data.CALIBRATION_TEXTS.values()}
readers["code modules (CODE_MODULES)"] = {f"python_stdlib:{m}" for m in data.CODE_MODULES}
excluded = set().union(*readers.values())

def h(prefix, key):
    return int.from_bytes(hashlib.sha256((prefix + key).encode()).digest()[:8], "big") / 2**64

owner = {}
for d, cs in DOMAINS.items():
    for c in cs:
        owner.setdefault(c, []).append(d)
single = {c: ds[0] for c, ds in owner.items() if len(ds) == 1}
root = settings.corpora_root()
eot = tok.convert_tokens_to_ids("<|endoftext|>")
per_folder, units_dom = {}, {}
excluded_keys = {}
for corpus in sorted(single):
    if corpus == "python_stdlib":
        sroot = stdlib_dir()
        docs = [(f"python_stdlib:{p}", (sroot / p).read_text(encoding="utf-8", errors="replace")) for p in code_files(sroot)]
        docs = [(k, t) for k, t in docs if t.strip()]
    else:
        docs = [(d.key, d.text) for d in iter_documents(corpus, root)]
    keys = [k for k, _ in docs]
    lens = {k: len(e) + 1 for (k, _), e in zip(docs, tok(list(t for _, t in docs), add_special_tokens=False)["input_ids"])}
    exc = sorted({k for k in keys if k in excluded})
    excluded_keys[corpus] = exc
    free = sorted(set(keys) - set(exc))
    uni = [k for k in free if h("gpt2-split:", k) < 0.5]
    con = [k for k in free if h("gpt2-split:", k) >= 0.5]
    row = {"domain": single[corpus], "documents": len(keys), "distinct_keys": len(set(keys)),
           "excluded_read_on_gpt2": len(exc), "unigram_documents": len(uni), "confirm_documents": len(con),
           "unigram_tokens": int(sum(lens[k]-1 for k in uni)), "confirm_tokens": int(sum(lens[k]-1 for k in con))}
    # units of CONFIRM documents in key order (documents sharing a key: same key in `lens` anyway)
    g = group_units(con, [lens[k] for k in con], N)
    gu = group_units(uni, [lens[k] for k in uni], N)
    row["confirm_units_1024"] = len(g); row["unigram_units_1024"] = len(gu)
    units_dom.setdefault(single[corpus], [0, 0]); units_dom[single[corpus]][0] += len(g); units_dom[single[corpus]][1] += len(gu)
    per_folder[corpus] = row
    print(corpus, row, round(time.time()-t0), file=sys.stderr)
out = {"readers": {k: len(v) for k, v in readers.items()}, "excluded_total": len(excluded),
       "excluded_in_protocol_folders": sum(len(v) for v in excluded_keys.values()),
       "excluded_outside_protocol_folders": sorted({k.split(':',1)[0] for k in excluded} - set(single)),
       "per_folder": per_folder,
       "per_domain_units_1024": {d: {"confirm_units": u[0], "unigram_units": u[1], "confirm_windows": min(u[0], 50), "pooled": u[0] >= 20} for d, u in sorted(units_dom.items())},
       "excluded_keys": excluded_keys, "seconds": round(time.time()-t0)}
Path("/tmp/gpt2inv").mkdir(parents=True, exist_ok=True)
json.dump(out, open("/tmp/gpt2inv/inventory.json", "w"), indent=1)
print(json.dumps({k: v for k, v in out.items() if k != "excluded_keys"}, indent=1))
