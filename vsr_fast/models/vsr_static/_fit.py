"""The numerical pieces the builds share: logistic heads, a one-hidden-layer network, softmax, AUC, the zero-shot
calibration, the log."""
from __future__ import annotations

import time

import numpy as np

from ...systemone.presets import DOMAINS
from . import _sources
from ._embedding import StaticEmbedding


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def fit_logistic(x: np.ndarray, y: np.ndarray, classes: int, l2: float, steps: int = 300,
                 init: tuple[np.ndarray, np.ndarray] | None = None,
                 weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression with an L2 penalty on the weights, by full-batch Adam.

    Features are standardised while fitting and the scaling is folded back into
    (w, b), so the runtime takes raw embeddings. The loss is convex, so Adam with
    a decaying step reaches the optimum to well within what the metrics resolve;
    ``init`` (standardised-space weights of a previous fit) warm-starts a grid;
    ``weights`` (one per row) reweights the loss, uniform when None.
    Returns the raw-space (w, b) and the standardised-space pair for warm starts.
    """
    mu, sd = x.mean(0), x.std(0) + 1e-6
    z = ((x - mu) / sd).astype(np.float32)
    n, d = z.shape
    w, b = (np.zeros((d, classes), np.float32), np.zeros(classes, np.float32)) if init is None else (
        init[0].copy(), init[1].copy())
    onehot = np.eye(classes, dtype=np.float32)[y]
    share = (np.full(n, 1.0 / n) if weights is None else weights / weights.sum()).astype(np.float32)[:, None]
    m = [np.zeros_like(w), np.zeros_like(b)]
    v = [np.zeros_like(w), np.zeros_like(b)]
    for t in range(1, steps + 1):
        logits = z @ w + b
        logits -= logits.max(1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(1, keepdims=True)
        g = (p - onehot) * share
        grads = [z.T @ g + l2 * w, g.sum(0)]
        lr = 0.05 / np.sqrt(1 + t / 50)
        for i, (param, grad) in enumerate(zip((w, b), grads)):
            m[i] = 0.9 * m[i] + 0.1 * grad
            v[i] = 0.999 * v[i] + 0.001 * grad**2
            param -= lr * (m[i] / (1 - 0.9**t)) / (np.sqrt(v[i] / (1 - 0.999**t)) + 1e-8)
    w_raw = w / sd[:, None]
    return (w_raw.astype(np.float32), (b - mu @ w_raw).astype(np.float32)), (w, b)


class Ngrams:
    """Every row's n-gram buckets (``_artifacts.ngram_buckets``) as one flat array with offsets: a sparse matrix."""

    def __init__(self, rows: list[np.ndarray], buckets: int) -> None:
        self.buckets = buckets
        self.index = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        self.counts = np.array([len(r) for r in rows], np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.counts)])
        self.scale = 1.0 / np.sqrt(np.maximum(self.counts, 1))           # each row's sum over sqrt(count)
        self.row_of = np.repeat(np.arange(len(rows)), self.counts)

    def dot(self, w: np.ndarray) -> np.ndarray:
        """(rows, classes): each row's bucket weights summed and scaled."""
        cum = np.vstack([np.zeros((1, w.shape[1]), w.dtype), np.cumsum(w[self.index], 0)])
        return (cum[self.offsets[1:]] - cum[self.offsets[:-1]]) * self.scale[:, None]

    def grad(self, g: np.ndarray) -> np.ndarray:
        """(buckets, classes): the transpose product with a per-row gradient ``g``."""
        per = (g * self.scale[:, None])[self.row_of]
        return np.stack([np.bincount(self.index, weights=per[:, k], minlength=self.buckets)
                         for k in range(g.shape[1])], axis=1)


def fit_logistic_ngrams(x: np.ndarray, grams: Ngrams, y: np.ndarray, classes: int, l2: float, l2_ngrams: float,
                        steps: int = 500, weights: np.ndarray | None = None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``fit_logistic`` with a second, sparse input: one weight per n-gram bucket and class.

    Both parts are fitted together by the same full-batch Adam; the n-gram weights have
    their own L2 strength (they are many, and each sees few rows). Returns the raw-space
    (w, b) and the (buckets, classes) n-gram table.
    """
    mu, sd = x.mean(0), x.std(0) + 1e-6
    z = ((x - mu) / sd).astype(np.float32)
    n, d = z.shape
    params = [np.zeros((d, classes), np.float32), np.zeros(classes, np.float32),
              np.zeros((grams.buckets, classes), np.float32)]
    onehot = np.eye(classes, dtype=np.float32)[y]
    share = (np.full(n, 1.0 / n) if weights is None else weights / weights.sum()).astype(np.float32)[:, None]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t in range(1, steps + 1):
        logits = z @ params[0] + params[1] + grams.dot(params[2])
        g = (softmax(logits) - onehot) * share
        grads = [z.T @ g + l2 * params[0], g.sum(0), grams.grad(g) + l2_ngrams * params[2]]
        lr = 0.05 / np.sqrt(1 + t / 50)
        for i, (param, grad) in enumerate(zip(params, grads)):
            m[i] = 0.9 * m[i] + 0.1 * grad
            v[i] = 0.999 * v[i] + 0.001 * grad**2
            param -= (lr * (m[i] / (1 - 0.9**t)) / (np.sqrt(v[i] / (1 - 0.999**t)) + 1e-8)).astype(param.dtype)
    w_raw = params[0] / sd[:, None]
    return w_raw.astype(np.float32), (params[1] - mu @ w_raw).astype(np.float32), params[2]


def fit_mlp(x: np.ndarray, y: np.ndarray, classes: int, hidden: int, l2: float, epochs: tuple[int, ...],
            weights: np.ndarray | None = None, batch: int = 256, seed: int = 0):
    """A one-hidden-layer ReLU network, softmax over ``classes``, by minibatch Adam; yields each checkpoint.

    The nonlinear counterpart of ``fit_logistic``: features standardised while fitting and the
    scaling folded into the first layer, so the runtime takes raw features (``mlp_logits``). The
    step size decays with the epoch, not with the run's length, so the state after epoch k is the
    same whatever ``epochs`` holds: one run yields every checkpoint of ``epochs`` (ascending) as
    (epoch, (w1, b1, w2, b2)) in raw space. ``l2`` penalises both weight matrices; ``weights`` (one
    per row) reweights the loss within each minibatch. Everything random comes from ``seed``.
    """
    rng = np.random.default_rng(seed)
    mu, sd = x.mean(0), x.std(0) + 1e-6
    z = ((x - mu) / sd).astype(np.float32)
    n, d = z.shape
    params = [(rng.standard_normal((d, hidden)) * np.sqrt(2.0 / d)).astype(np.float32), np.zeros(hidden, np.float32),
              (rng.standard_normal((hidden, classes)) * np.sqrt(1.0 / hidden)).astype(np.float32),
              np.zeros(classes, np.float32)]
    onehot = np.eye(classes, dtype=np.float32)[y]
    rows = np.ones(n, np.float32) if weights is None else weights.astype(np.float32)
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    t = 0
    for epoch in range(1, max(epochs) + 1):
        lr = np.float32(1e-3 / np.sqrt(1 + (epoch - 1) / 4))
        order = rng.permutation(n)
        for start in range(0, n, batch):
            i = order[start:start + batch]
            zb, wb = z[i], rows[i]
            pre = zb @ params[0] + params[1]
            h = np.maximum(pre, 0)
            g = (softmax(h @ params[2] + params[3]) - onehot[i]) * (wb / wb.sum())[:, None]
            gh = (g @ params[2].T) * (pre > 0)
            grads = [zb.T @ gh + l2 * params[0], gh.sum(0), h.T @ g + l2 * params[2], g.sum(0)]
            t += 1
            for k, (param, grad) in enumerate(zip(params, grads)):
                m[k] = 0.9 * m[k] + 0.1 * grad
                v[k] = 0.999 * v[k] + 0.001 * grad * grad
                param -= lr * (m[k] / (1 - 0.9**t)) / (np.sqrt(v[k] / (1 - 0.999**t)) + 1e-8)
        if epoch in epochs:
            w1 = params[0] / sd[:, None]
            yield epoch, (w1.astype(np.float32), (params[1] - mu @ w1).astype(np.float32),
                          params[2].copy(), params[3].copy())


def mlp_logits(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray) -> np.ndarray:
    """The logits of ``fit_mlp``'s network on raw features ``x`` (rows, inputs)."""
    return np.maximum(x @ w1 + b1, 0) @ w2 + b2


def softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """ROC AUC by ranks (ties averaged)."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    for s in np.unique(scores[np.diff(np.sort(scores), prepend=np.nan) == 0]):
        tie = scores == s
        ranks[tie] = ranks[tie].mean()
    npos = positive.sum()
    return float((ranks[positive].sum() - npos * (npos + 1) / 2) / (npos * (len(scores) - npos)))


def zero_shot_calibration(emb: StaticEmbedding, data: list[_sources.Example]) -> dict:
    """Temperature and cosine->probability map, fit on MMLU train texts against DOMAINS' descriptions.

    The temperature minimises the negative log-likelihood of softmax(cos/T) over the
    14 descriptions. The logistic map sigmoid(a*cos + b) is fit on every (text,
    description) pair, the pairs of the text's own area weighted 13 to 1 so that a
    cosine with no other evidence lands at 0.5 where a match and a non-match are
    equally likely: it turns one cosine into a probability for set and yes/no questions.
    """
    rows = [e for e in data if e.split == "train"]
    labels = list(DOMAINS)
    y = np.array([labels.index(e.label) for e in rows])
    cos = emb.encode([e.text for e in rows]) @ emb.encode(list(DOMAINS.values())).T
    grid = np.exp(np.linspace(np.log(0.005), np.log(0.5), 200))
    nll = [-np.log(softmax(cos / t)[np.arange(len(y)), y]).mean() for t in grid]
    temperature = float(grid[int(np.argmin(nll))])
    zs_acc = float((cos.argmax(1) == y).mean())
    match = np.zeros_like(cos, dtype=bool)
    match[np.arange(len(y)), y] = True
    weight = np.where(match, len(labels) - 1, 1.0).ravel()
    c, t = cos.ravel(), match.ravel().astype(float)
    a, b = 1.0 / temperature, -float(np.median(c)) / temperature
    for _ in range(50):   # Newton on the weighted 1-D logistic loss
        p = 1 / (1 + np.exp(-(a * c + b)))
        g = np.array([(weight * (p - t) * c).sum(), (weight * (p - t)).sum()])
        h = weight * p * (1 - p)
        hess = np.array([[(h * c * c).sum(), (h * c).sum()], [(h * c).sum(), h.sum()]]) + 1e-9 * np.eye(2)
        a, b = np.array([a, b]) - np.linalg.solve(hess, g)
    log(f"zero-shot: T={temperature:.4f} (domain accuracy {zs_acc:.3f} on train), "
        f"cosine map sigmoid({a:.2f}*cos{b:+.2f}), p=0.5 at cos={-b / a:.3f}")
    return {"temperature": round(temperature, 5), "cosine_logit": [round(float(a), 4), round(float(b), 4)],
            "train_zero_shot_domain_accuracy": round(zs_acc, 4)}
