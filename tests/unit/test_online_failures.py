"""Issue 15: one test per failure of the online GPT-2 path, each failing on the code as it was.

The online path is simulated offline: the corpora are hidden (``$CONTEXT_NEURONS_CORPORA`` is ``none``,
as ``scripts/simulate_online.py`` sets it) and OpenWebText is replaced
by a few planted documents (the module's document source is monkeypatched), so nothing here needs
the network or GPT-2's weights.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import sys
import tomllib
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from context_neurons import config
from context_neurons.checks import DataError
from context_neurons.text import corpora
from context_neurons.text import windows as windows_module
from context_neurons.text.corpora import CALIBRATION_TEXTS, CODE_CORPUS, Document

REPO = Path(__file__).resolve().parents[2]

#: OpenWebText stand-in: long documents (over 8,000 characters, as calibration needs), one dense
#: in the keywords of each domain a calibration text has (general prose carries none of them).
FAKE_OPENWEBTEXT = [
    Document("openwebtext", "0", "The weather was fine and the market rose again today. " * 200),
    Document("openwebtext", "1", "And God said unto them, thou shalt pray to the Lord. " * 200),
    Document("openwebtext", "2", "el perro de la casa que es para los chicos con una bola. " * 200),
    Document(
        "openwebtext", "3",
        "The licensee shall hereby indemnify the licensor against liability and damages. " * 150,
    ),
]


@pytest.fixture
def online(monkeypatch, tmp_path):
    """Corpora hidden, OpenWebText served by :data:`FAKE_OPENWEBTEXT`; returns the reads made."""
    reads: list[int] = []

    def fake_openwebtext(n: int, seed: int = 0) -> list[Document]:
        reads.append(n)
        return list(FAKE_OPENWEBTEXT[:n])

    monkeypatch.setenv(config.CORPORA.name, config.NO_DIRECTORY)  # no corpora: online
    monkeypatch.setattr(corpora, "openwebtext_documents", fake_openwebtext)
    monkeypatch.setattr(windows_module, "openwebtext_documents", fake_openwebtext)
    corpora._openwebtext_calibration.cache_clear()
    assert corpora.corpora_dir(required=False) is None
    yield reads
    corpora._openwebtext_calibration.cache_clear()  # built from the fake stream: forget it


@pytest.mark.parametrize("name", list(CALIBRATION_TEXTS))
def test_every_calibration_text_has_an_online_stand_in(online, name):
    """Issue 15, chapter 6 crashed without the corpora: every calibration text has an online one."""
    document = corpora.calibration_text(name)  # old code: DataError "Corpora directory not found"
    spec = CALIBRATION_TEXTS[name]
    if spec.corpus == CODE_CORPUS:  # the running Python's standard library: no corpora needed
        assert (document.corpus, document.id) == (spec.corpus, spec.doc_id)
    else:
        assert document.corpus == f"openwebtext~{spec.domain}"
        assert len(document.text) > 8000
        assert online, "read from the (fake) OpenWebText stream"


def test_calibration_texts_of_one_domain_are_different_documents_online(online):
    """Issue 15 follow-up: online, ``prose`` and ``news`` (both general) were the same document,
    so chapters 3, 4 and 6 compared a calibration text with itself."""
    prose, news = corpora.calibration_text("prose"), corpora.calibration_text("news")
    assert CALIBRATION_TEXTS["prose"].domain == CALIBRATION_TEXTS["news"].domain
    assert (prose.corpus, prose.id) != (news.corpus, news.id)


def test_calibration_text_without_a_stand_in_is_a_clear_error(online, monkeypatch):
    """Issue 15, chapter 6 crashed without the corpora: no stand-in is a DataError saying so."""
    monkeypatch.setattr(corpora, "openwebtext_documents", lambda n, seed=0: FAKE_OPENWEBTEXT[:1])
    with pytest.raises(DataError, match=r"(?s)'spanish'.*CONTEXT_NEURONS_CORPORA"):
        corpora.calibration_text("spanish")  # the stream holds no Spanish keyword


def test_named_corpus_is_never_silently_replaced_online(online):
    """Issue 15, chapter 3's Bible column: a named corpus without the corpora is a DataError."""
    from context_neurons.models import load_tokenizer

    tokenizer = load_tokenizer()
    with pytest.raises(DataError, match=r"(?s)bible_kjv.*offline corpora.*CONTEXT_NEURONS_CORPORA"):
        windows_module.corpus_windows(tokenizer, "bible_kjv", n=2, n_ctx=64, min_tokens=8)
    assert online == []  # refused before any OpenWebText document is read in its place
    # General text (no corpus named) still comes from OpenWebText, labelled as such.
    _, labels, _ = windows_module.corpus_windows(tokenizer, None, n=2, n_ctx=64, min_tokens=8)
    assert labels == ["openwebtext:0", "openwebtext:1"]


ONLINE_CALIBRATIONS = [name for name, s in CALIBRATION_TEXTS.items() if s.corpus != CODE_CORPUS]


@pytest.mark.parametrize("name", ONLINE_CALIBRATIONS)
def test_calibration_label_names_the_online_stand_in(online, name):
    """Issue 15, "Brown corpus popular lore" printed online: the label names what was used."""
    label = corpora.describe(corpora.calibration_text(name))
    assert "OpenWebText stand-in" in label
    assert CALIBRATION_TEXTS[name].description not in label  # not the offline document's name
    assert "Brown" not in label and "King James" not in label


def test_examine_neuron_ablates_at_most_n_ablate_heads_in_few_passes(monkeypatch, planted):
    """Issue 15, look-ups at 1 + heads x layers forward passes: ablation is bounded and batched."""
    from context_neurons import lookups as lk
    from context_neurons.lookups import attribution, report

    model = planted.model
    layer, neuron, n_ablate = 1, 777, 4  # planted: 1.777 predicts ' telescope' (head 1.2)
    windows, labels = lk.lookup_windows(model.tokenizer, ("astronomy", "general"), per_domain=12)
    pool = lk.scan_pool(model, windows, labels, [(layer, neuron)])
    passes: list[str] = []  # the stop hook of every forward pass
    seen: dict = {}  # what ablation_drops was asked for and the passes it ran
    real_run_until, real_drops = attribution.run_until, report.ablation_drops

    def counting_run_until(model_, tokens, stop, *args, **kwargs):
        passes.append(stop)
        return real_run_until(model_, tokens, stop, *args, **kwargs)

    def recording_drops(model_, prompts, layer_, neuron_, heads=None, **kwargs):
        passes.clear()
        drops = real_drops(model_, prompts, layer_, neuron_, heads=heads, **kwargs)
        seen.update(heads=list(heads), passes=list(passes))
        return drops

    monkeypatch.setattr(attribution, "run_until", counting_run_until)
    monkeypatch.setattr(report, "ablation_drops", recording_drops)
    lookup = lk.examine_neuron(model, layer, neuron, pool, n_prompts=3, n_ablate=n_ablate)
    all_heads = (layer + 1) * model.cfg.n_heads  # 24: the old code ablated every one, 25 passes
    assert len(seen["heads"]) == n_ablate < all_heads
    assert sorted(lookup.ablated) == sorted(seen["heads"])
    assert len(seen["passes"]) <= 2  # the clean pass and one batched pass (3 prompts x 4 heads)
    assert set(seen["passes"]) == {f"blocks.{layer}.mlp.hook_pre"}  # each stops at the neuron
    assert torch.isnan(lookup.ablation).sum() == len(lookup.prompts) * (all_heads - n_ablate)


def test_reproduce_command_line_defaults_to_device_auto(monkeypatch):
    """Issue 15, the command line defaulted to --device cpu: it is auto (a GPU when present)."""
    import context_neurons.reproduce as reproduce_package
    from context_neurons.__main__ import main

    called = {}

    def fake_reproduce(model, n_texts, **kwargs):
        called.update(kwargs, model=model, n_texts=n_texts)
        return {}

    monkeypatch.setattr(reproduce_package, "reproduce", fake_reproduce)
    monkeypatch.setattr(reproduce_package, "format_table", lambda results: "")
    assert main(["reproduce", "--model", "planted", "--texts", "1"]) == 0
    assert called["model"] == "planted" and called["n_texts"] == 1
    assert called["device"] == "auto"


def test_paper_heads_are_put_beside_the_computed_ones(planted):
    """Issue 15, thresholds may not transfer: the paper's six heads beside the computed, loudly."""
    from context_neurons.reproduce.paper import PAPER_CONTEXTUAL_HEADS
    from context_neurons.reproduce.pipeline import paper_heads_rows

    gpt2 = dataclasses.replace(planted, name="gpt2", truth=None)
    computed = sorted({*PAPER_CONTEXTUAL_HEADS} - {10} | {11})  # head 10 lost, head 11 gained
    (row,) = paper_heads_rows(gpt2, computed)
    assert row.key == "contextual_heads_vs_paper"
    assert row.value == {"computed only": [11], "paper only": [10]}
    assert "DIFFER" in row.label and "computed" in row.label
    (same,) = paper_heads_rows(gpt2, list(PAPER_CONTEXTUAL_HEADS))
    assert same.value == {"computed only": [], "paper only": []} and "AGREE" in same.label
    # Documented: the paper's heads are GPT-2 Small's, so no other model gets the row.
    assert paper_heads_rows(planted, computed) == []


class _PretendAccelerator(torch.Tensor):
    """A tensor standing for one on an accelerator: only ``.cpu()`` makes a plain CPU tensor."""

    def cpu(self, *args, **kwargs):
        return self.as_subclass(torch.Tensor)


def test_truth_cache_keeps_true_activations_off_the_accelerator(monkeypatch):
    """Issue 15, true pre-activations kept on the device: the truth cache holds CPU copies."""
    from context_neurons import circuit as C
    from context_neurons.evaluation import accuracy
    from context_neurons.models.toy import exact_toy_model

    model, heads = exact_toy_model(seed=2)
    gen = torch.Generator().manual_seed(5)
    calibration = torch.randint(0, model.cfg.d_vocab, (model.cfg.n_ctx,), generator=gen)
    circuit = C.build_circuit(model, calibration, heads=heads, dest_token=7, n_min=4)
    texts = list(torch.randint(0, model.cfg.d_vocab, (4, model.cfg.n_ctx), generator=gen))
    real_truth = accuracy.true_pre_activations

    def on_accelerator(*args, **kwargs):
        return real_truth(*args, **kwargs).as_subclass(_PretendAccelerator)

    monkeypatch.setattr(accuracy, "true_pre_activations", on_accelerator)
    cache: dict = {}
    first = accuracy.evaluate(circuit, model, texts, [0, 1], batch_size=2, truth_cache=cache)
    assert len(cache) == 2
    for value in cache.values():  # the old code stored the device tensor itself
        assert type(value) is torch.Tensor and value.device.type == "cpu"
    second = accuracy.evaluate(circuit, model, texts, [0, 1], batch_size=2, truth_cache=cache)
    torch.testing.assert_close(first.pearson, second.pearson, equal_nan=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_truth_cache_on_cuda_is_on_the_cpu():
    """Issue 15, true pre-activations kept on the device: on a GPU the cache is on the CPU."""
    from context_neurons import circuit as C
    from context_neurons.evaluation import accuracy
    from context_neurons.models.toy import exact_toy_model

    model, heads = exact_toy_model(seed=2)
    model = model.to("cuda")
    gen = torch.Generator().manual_seed(5)
    calibration = torch.randint(0, model.cfg.d_vocab, (model.cfg.n_ctx,), generator=gen)
    circuit = C.build_circuit(model, calibration.cuda(), heads=heads, dest_token=7, n_min=4)
    texts = list(torch.randint(0, model.cfg.d_vocab, (4, model.cfg.n_ctx), generator=gen))
    cache: dict = {}
    accuracy.evaluate(circuit, model, texts, [0, 1], batch_size=2, truth_cache=cache)
    assert cache and all(value.device.type == "cpu" for value in cache.values())


def _floor(specifier: SpecifierSet) -> Version:
    """The lowest Python release ``specifier`` admits (3.0 to 3.30; patch releases ignored)."""
    admitted = [Version(f"3.{minor}") for minor in range(31) if Version(f"3.{minor}") in specifier]
    assert admitted, f"requires-python {specifier} admits no Python 3 release"
    return admitted[0]


def test_python_floor_admitted_by_every_dependency():
    """Issue 15, "Python >= 3.10; the transformers it requires needs 3.11": floors agree."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    floor = _floor(SpecifierSet(pyproject["project"]["requires-python"]))
    if Version(f"{sys.version_info.major}.{sys.version_info.minor}") != floor:
        # the installed releases are those pip chose for this interpreter: on a newer Python it may
        # pick a release that needs that Python (numpy 2.5 needs 3.12), which says nothing about
        # the floor (seen on the GPU machine's Python 3.12; CI runs the floor, 3.11)
        pytest.skip(f"installed packages were resolved for Python {sys.version_info[:2]}, "
                    f"not for the floor {floor}")
    checked, refused = [], {}
    for line in pyproject["project"]["dependencies"]:
        name = Requirement(line).name
        try:
            requires = importlib.metadata.metadata(name).get("Requires-Python")
        except importlib.metadata.PackageNotFoundError:
            continue
        checked.append(name)
        if requires and floor not in SpecifierSet(requires):
            refused[name] = requires
    assert {"torch", "transformers"} <= set(checked), "the main dependencies are installed"
    assert not refused, f"requires-python's floor {floor} is below {refused}"


# ----------------------------------------------------------------------------------------------
# GPT-2 with no network: one clear error at once, not the hub client's retries (issue 54)
# ----------------------------------------------------------------------------------------------


def test_gpt2_without_network_or_cache_fails_at_once(monkeypatch):
    """With the hub unreachable and nothing cached, ``load_hf_gpt2`` raises its one-line error
    before any download is tried (the hub client would retry for about 30 s first)."""
    from context_neurons.checks import ModelLoadError
    from context_neurons.models import loading

    def never(*args, **kwargs):
        raise AssertionError("the hub client was called")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(loading, "hub_reachable", lambda: False)
    monkeypatch.setattr(loading, "_cached", lambda name: False)
    monkeypatch.setattr(loading, "_from_pretrained", never)
    with pytest.raises(ModelLoadError, match=r"cannot be reached.*no local copy"):
        loading.load_hf_gpt2("gpt2")


def test_gpt2_without_network_reads_the_cache(monkeypatch):
    """Unreachable hub, a cached copy: loaded from the cache only, and the source says so."""
    from context_neurons.models import loading

    from transformers import GPT2Config, GPT2LMHeadModel

    tiny = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=10,
                                      n_positions=8))
    calls = []
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(loading, "hub_reachable", lambda: False)
    monkeypatch.setattr(loading, "_cached", lambda name: True)
    monkeypatch.setattr(loading, "_from_pretrained",
                        lambda name, local_only=False: calls.append((name, local_only)) or tiny)
    assert loading.load_hf_gpt2("gpt2") == (tiny, "Hugging Face cache (hub unreachable)")
    assert calls == [("gpt2", True)]


def test_hub_reachable(monkeypatch):
    """A closed port answers at once (False); behind a proxy no plain connection is tried."""
    from context_neurons.models import loading

    for name in config.PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert loading.hub_reachable("127.0.0.1", timeout=1.0) is False
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert loading.hub_reachable("127.0.0.1", timeout=1.0) is True
