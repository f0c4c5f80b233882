"""Topic word lists. This module holds the word lists the planted model plants and the book studies.

British and American spellings come from ``shared/corpora/wordlists_en_gb_us/gb_us_pairs.tsv``
(SCOWL) when it is available; the other lists are short hand-written lists of characteristic words
of each domain. Only words that GPT-2's tokenizer encodes as a single token (with a leading space,
lower-case or capitalised) are planted.
"""

from __future__ import annotations

import re
from pathlib import Path

WAR = """war wars army armies soldiers soldier troops battle battles tanks infantry regiment artillery
bombing bombers invasion Nazi Nazis Allied Allies German Germans enemy military combat wartime fleet
navy submarine trenches casualties cavalry garrison offensive generals 1914 1915 1916 1917 1918 1939
1940 1941 1942 1943 1944 1945 Sherman Confederate Hitler Churchill Luftwaffe Wehrmacht division
divisions battalion brigade commander bombardment raid raids frontline weapons ammunition rifles
fought surrender""".split()

MODERN = """internet online smartphone smartphones app apps Facebook Twitter Google email website websites
blog digital 2010 2011 2012 2013 2014 2015 2016 2017 2018 2019 YouTube Instagram iPhone software
streaming tweet tweets startup""".split()

RELIGION = """God Lord Jesus Christ church churches faith pray prayer prayers holy sin sins heaven gospel
Bible biblical prophet prophets priest priests salvation worship divine sacred apostle apostles
disciples angel angels temple Moses Abraham spiritual righteous righteousness soul souls blessed
Israel Jerusalem psalm scripture""".split()

BIBLE_ARCHAIC = """thou thee thy thine hath unto shalt saith ye doth art begat""".split()

MEDICINE = """patients patient clinical disease diseases treatment treatments symptoms diagnosis therapy
surgery hospital cancer tumor tumour infection infections dose doses medication medications chronic
cardiac blood syndrome mortality cohort tablets doctor doctors pharmacist medicine medicines
prescribed pregnancy diabetes insulin kidney liver""".split()

LAW = """shall pursuant hereby thereof herein hereunder licensee licensor liability warranty warranties
damages provisions jurisdiction statute plaintiff defendant court lawful License licence licenses
copyright notwithstanding indemnify arbitration tort covenant contractual""".split()

CODE = """def return import self None True False elif kwargs args isinstance len str int dict raise
assert lambda yield except tuple param bool init foo""".split()

SPANISH = """de la que el en los del las por con una para es se su al lo como más pero sus le ya
este porque esta entre cuando muy sin sobre también hasta hay donde quien desde todo nos durante
todos uno les ni contra otros ese eso ante ellos esto antes algunos unos yo otro otras otra tanto
esa estos mucho quienes nada muchos cual poco ella estar estas algunas algo nosotros""".split()

ASTRONOMY = """stars star planet planets constellation constellations galaxy galaxies telescope orbit
Moon moon Sun solar lunar Venus Mars Jupiter Saturn asteroid comet sky celestial Orion Pleiades
astronomers astronomy NASA spacecraft eclipse horizon Milky nebula""".split()

CLIMATE = """climate carbon emissions warming greenhouse fossil renewable temperatures drought CO2
environmental sustainability glaciers rainfall""".split()

POKEMON = """Pokemon Pokémon foe HP Psychic Dragon Fairy Ghost Electric Poison evolves opponent""".split()

STOPWORDS = """the of and to a in is that for it was on with as at by be this from or an are but not
have has had were which his her their they he she we you I its will would can all there been one so
if no more than who what when about into up out do also my our them some any other only just""".split()
STOP_TOKENS = [",", ".", "\n", " \"", "'s", ":", ";", " (", ")", " -", "\n\n", " The", "The"]

BUILTIN_TOPICS: dict[str, list[str]] = {
    "war": WAR,
    "modern": MODERN,
    "religion": RELIGION,
    "bible_archaic": BIBLE_ARCHAIC,
    "medicine": MEDICINE,
    "law": LAW,
    "code": CODE,
    "spanish": SPANISH,
    "astronomy": ASTRONOMY,
    "climate": CLIMATE,
    "pokemon": POKEMON,
}

# A fallback when the SCOWL pair list is not available (planted model built without corpora).
BUILTIN_GB_US = [
    ("colour", "color"), ("favour", "favor"), ("centre", "center"), ("labour", "labor"),
    ("defence", "defense"), ("behaviour", "behavior"), ("honour", "honor"), ("organisation",
    "organization"), ("realise", "realize"), ("recognise", "recognize"), ("neighbour", "neighbor"),
    ("harbour", "harbor"), ("humour", "humor"), ("flavour", "flavor"), ("analyse", "analyze"),
    ("armour", "armor"), ("offence", "offense"), ("favourite", "favorite"),
]


def read_gb_us_pairs(wordlist_dir: Path | None) -> tuple[list[tuple[str, str]], str]:
    """British/American spelling pairs and where they came from."""
    if wordlist_dir is not None and (wordlist_dir / "gb_us_pairs.tsv").is_file():
        lines = (wordlist_dir / "gb_us_pairs.tsv").read_text(encoding="utf-8").splitlines()[1:]
        pairs = [tuple(line.split("\t")[:2]) for line in lines if "\t" in line]
        # Relative to the corpora directory: outputs must not depend on where the checkout lives.
        return pairs, f"<corpora>/{wordlist_dir.name}/gb_us_pairs.tsv"
    return list(BUILTIN_GB_US), "built-in list (gb_us_pairs.tsv not found)"


def single_token_variants(words: list[str], tokenizer) -> dict[str, int]:
    """Map ``' word'`` and ``' Word'`` to their token id, for variants that are a single token."""
    found: dict[str, int] = {}
    for word in words:
        for variant in {f" {word}", f" {word[:1].upper()}{word[1:]}"}:
            ids = tokenizer.encode(variant, add_special_tokens=False)
            if len(ids) == 1:
                found[variant] = ids[0]
    return found


def gb_us_token_lists(pairs, tokenizer) -> tuple[dict[str, int], dict[str, int]]:
    """Single-token British and American spellings, keeping only pairs where both are one token."""
    british: dict[str, int] = {}
    american: dict[str, int] = {}
    for gb, us in pairs:
        for case in (str, str.capitalize):
            gb_ids = tokenizer.encode(f" {case(gb)}", add_special_tokens=False)
            us_ids = tokenizer.encode(f" {case(us)}", add_special_tokens=False)
            if len(gb_ids) == 1 and len(us_ids) == 1 and gb_ids != us_ids:
                british[f" {case(gb)}"] = gb_ids[0]
                american[f" {case(us)}"] = us_ids[0]
    return british, american


def stopword_ids(tokenizer) -> list[int]:
    """Token ids of common function words and punctuation (single tokens only)."""
    ids = set(single_token_variants(STOPWORDS, tokenizer).values())
    for token in STOP_TOKENS:
        encoded = tokenizer.encode(token, add_special_tokens=False)
        if len(encoded) == 1:
            ids.add(encoded[0])
    return sorted(ids)


def swap_spellings(text: str, pairs, to: str = "british") -> tuple[str, int]:
    """``text`` with every spelling of one variety replaced by the other's (a minimal pair).

    Whole words only, keeping an initial capital. The result differs from ``text`` only in
    spelling, so a neuron's response to the swap isolates what it reads of British versus
    American spelling.

    Args:
        text: the text to respell.
        pairs: ``(british, american)`` spelling pairs (:func:`read_gb_us_pairs`).
        to: ``"british"`` (respell American words) or ``"american"``.

    Returns:
        The respelled text and the number of words replaced.
    """
    if to not in ("british", "american"):
        raise ValueError(f"to must be 'british' or 'american', got {to!r}.")
    source_index = 1 if to == "british" else 0
    mapping = {}
    for pair in pairs:
        source, target = pair[source_index], pair[1 - source_index]
        if source.lower() != target.lower():
            mapping[source.lower()] = target.lower()
    count = 0

    def replace(match: re.Match) -> str:
        nonlocal count
        word = match.group(0)
        target = mapping.get(word.lower())
        if target is None or not (word.islower() or word[1:].islower()):
            return word
        count += 1
        return target if word[0].islower() else target[:1].upper() + target[1:]

    respelled = re.sub(r"[A-Za-z]+", replace, text)
    return respelled, count
