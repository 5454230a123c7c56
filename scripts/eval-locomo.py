#!/usr/bin/env python3
"""Retrieval evaluation on LoCoMo (../shared/data/locomo10.json) against a
running Mneme: every dialogue turn becomes a document (`speaker: text`, plus
its image caption, dated by its session as `source_date`), each question
with evidence (categories 1-4) is asked through GET /search in each mode,
and recall@k is the mean fraction of the question's evidence turns found in
the top k. One conversation at a time:
the store is emptied between conversations, so a question only sees its own
conversation, as in the dataset's baselines.

Recall is reported for conversations 0-4 (`fit`: the only ones any constant,
weight or choice of the retrieval may be fitted on), 5-9 (`held_out`) and all
ten (issue #25).

Usage: eval-locomo.py BASE_URL API_KEY (--bare | --context N) [--batch N] [--dump FILE] [--convs A-B]
--bare sends each turn as a person would: `id`, `title`, `text` and `source_date`
only, in batches of 128 in the order of the conversation (--batch 1: one turn a
request, as a chat's turns arrive), so whatever context a turn is found by is the
app's own (D-K29). --context N sends each turn with the
text of the N turns before and after it in its session as the document's
`context` (D-K13), so the app indexes it below the turn's own words and its
embedding reads it; --context 0 sends an empty `context`, a turn with no words
but its own (the baseline before D-K29). --convs A-B runs conversations A to B
only (say 0-4 while fitting a constant); the summary's splits then count only
those. Reads nothing but the dataset and the API; prints a JSON summary, with
the seconds spent adding the documents apart from the whole.
"""

import json
import re
import sys
import time
import urllib.parse
import urllib.request

MODES = ["text", "vector", "hybrid"]
KS = [1, 5, 10, 20]
SPLITS = {"fit": range(0, 5), "held_out": range(5, 10), "all": range(0, 10)}


def call(base, key, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("authorization", f"Bearer {key}")
    if data is not None:
        req.add_header("content-type", "application/json")
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def mean(xs):
    return round(sum(xs) / len(xs), 3) if xs else None


MONTHS = "January February March April May June July August September October November December".split()


def session_date(text):
    """`1:56 pm on 8 May, 2023` as `2023-05-08`; None when it is not that form."""
    m = re.search(r"(\d{1,2}) (\w+), (\d{4})", text or "")
    if not m or m.group(2) not in MONTHS:
        return None
    return f"{m.group(3)}-{MONTHS.index(m.group(2)) + 1:02d}-{int(m.group(1)):02d}"


def turns(conv, context=None):
    """The conversation's turns as documents; `context` None sends none (the
    app builds it), 0 an empty one, N the N turns on each side."""
    c = conv["conversation"]
    n = 1
    while f"session_{n}" in c:
        session = c[f"session_{n}"]
        date = session_date(c.get(f"session_{n}_date_time"))
        texts = []
        for t in session:
            text = f"{t['speaker']}: {t['text']}"
            if t.get("blip_caption"):
                text += f" [image: {t['blip_caption']}]"
            texts.append(text)
        for i, t in enumerate(session):
            doc = {"id": t["dia_id"], "title": t["speaker"], "text": texts[i]}
            if date:
                doc["source_date"] = date
            if context is not None:
                around = texts[max(0, i - context) : i] + texts[i + 1 : i + 1 + context] if context else []
                doc["context"] = " ".join(around)
            yield doc
        n += 1


def main():
    base, key = sys.argv[1].rstrip("/"), sys.argv[2]
    dump = sys.argv[sys.argv.index("--dump") + 1] if "--dump" in sys.argv else None
    bare = "--bare" in sys.argv
    if bare == ("--context" in sys.argv):
        sys.exit("say --bare, or --context N for the client to send each turn's neighbours")
    context = None if bare else int(sys.argv[sys.argv.index("--context") + 1])
    batch = int(sys.argv[sys.argv.index("--batch") + 1]) if "--batch" in sys.argv else 128
    first, last = 0, 9
    if "--convs" in sys.argv:
        first, last = (int(x) for x in sys.argv[sys.argv.index("--convs") + 1].split("-"))
    data = json.load(open(sys.path[0] + "/../../shared/data/locomo10.json"))
    hits = {m: {k: [] for k in KS} for m in MODES}
    conv_of = []
    latency = {m: [] for m in MODES}
    raw = []
    started = time.time()
    adding = 0.0
    for ci, conv in enumerate(data):
        if not first <= ci <= last:
            continue
        call(base, key, "DELETE", "/privacy/delete-all?confirm=true")
        docs = list(turns(conv, context))
        t0 = time.perf_counter()
        for i in range(0, len(docs), batch):
            call(base, key, "POST", "/documents", {"documents": docs[i : i + batch]})
        adding += time.perf_counter() - t0
        for qa in conv["qa"]:
            if qa.get("category") not in (1, 2, 3, 4) or not qa.get("evidence"):
                continue
            gold = set(e.strip() for e in qa["evidence"])
            row = {"conv": ci, "q": qa["question"], "gold": sorted(gold)}
            conv_of.append(ci)
            for m in MODES:
                q = urllib.parse.urlencode({"q": qa["question"], "k": 20, "corpus": "document", "mode": m})
                t0 = time.perf_counter()
                res = call(base, key, "GET", f"/search?{q}")["results"]
                latency[m].append((time.perf_counter() - t0) * 1000)
                ids = [r["id"] for r in res]
                row[m] = [[r["id"], r["relevance_score"]] for r in res]
                for k in KS:
                    hits[m][k].append(len(gold & set(ids[:k])) / len(gold))
            raw.append(row)
    summary = {
        "questions": len(raw),
        "documents": "bare" if bare else f"context {context}",
        "batch": batch,
        "seconds": round(time.time() - started, 1),
        "adding_seconds": round(adding, 1),
        "questions_per_split": {s: sum(1 for c in conv_of if c in r) for s, r in SPLITS.items()},
        "recall": {
            split: {
                m: {f"@{k}": mean([h for h, c in zip(v, conv_of) if c in convs]) for k, v in hits[m].items()}
                for m in MODES
            }
            for split, convs in SPLITS.items()
        },
        "search_ms_p50": {m: round(sorted(v)[len(v) // 2], 1) for m, v in latency.items()},
        "search_ms_p95": {m: round(sorted(v)[int(len(v) * 0.95)], 1) for m, v in latency.items()},
    }
    if dump:
        json.dump(raw, open(dump, "w"))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
