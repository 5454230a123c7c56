"""What the full-text studies share: the app's query terms (as
`mneme_knowledge::fusion::terms` picks them), LoCoMo's turns and questions."""

import json
import re
import sys

ROOT = sys.path[0] + "/../.."


def _stopwords():
    src = open(ROOT + "/crates/mneme-text/src/stopwords.rs").read()
    block = src[src.index("pub const CONTENT") :]
    return set(re.findall(r'"([^"]*)"', block[: block.index("];")]))


STOP = _stopwords()


def terms(q):
    out = []
    for w in q.split():
        w = "".join(ch for ch in w if ch.isalnum()).lower()
        if len(w) > 1 and w not in STOP and w not in out and len(out) < 32:
            out.append(w)
    return out


def locomo():
    return json.load(open(ROOT + "/../shared/data/locomo10.json"))


def turn_texts(data):
    """Every turn of eight words or more, session by session, as
    `bench-knowledge` draws its filler from."""
    texts = []
    for conv in data:
        c = conv["conversation"]
        n = 1
        while f"session_{n}" in c:
            texts += [t["text"] for t in c[f"session_{n}"] if len(t.get("text", "").split()) >= 8]
            n += 1
    return texts


def questions(data):
    return [q["question"] for c in data for q in c["qa"] if "question" in q][:300]


def percentile(xs, f):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(f * len(xs)))]
