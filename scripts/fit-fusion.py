#!/usr/bin/env python3
"""Fits the hybrid fusion's two constants (D-K6: 1 / (K + text rank) plus
W x cosine) on LoCoMo conversations 0-4 only, from a dump written by
`eval-locomo.py --dump FILE`, and reports the recall the best pair would give
on 0-4 and on the held-out 5-9 (issue #25 item 1).

The dump holds each question's top 20 by full text (in rank order, each with
its cosine as `relevance_score`) and top 20 by vector (with their cosines);
the fusion is recomputed over their union, as the app fuses its 50 + 50
candidates. Items the app would reach only through ranks 21-50 are missing, so
the figures approximate the app's; the chosen pair is then checked with a real
`eval-locomo.py` run, whose figures are the ones BENCHMARKS reports.

The objective is recall@K on 0-4 (default @10, the issue's goal); each pair
also shows its @5 there, which must not fall below the shipped pair's.

Usage: fit-fusion.py DUMP [--at K]   (default @10)
"""

import json
import sys

FIT, HELD_OUT = range(0, 5), range(5, 10)
RANK_KS = [1, 2, 3, 5, 7, 10, 15, 20, 30, 40, 60]
COSINE_WEIGHTS = [0.0, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0]


def fused(row, k_rank, w):
    cos = {}
    for item, rel in row["vector"]:
        cos[item] = rel
    for item, rel in row["text"]:
        cos.setdefault(item, rel)
    score = {item: w * c for item, c in cos.items()}
    for r, (item, _) in enumerate(row["text"]):
        score[item] += 1.0 / (k_rank + r + 1)
    return [i for i, _ in sorted(score.items(), key=lambda kv: -kv[1])]


def recall(rows, convs, k_rank, w, at):
    got = []
    for row in rows:
        if row["conv"] in convs:
            gold = set(row["gold"])
            got.append(len(gold & set(fused(row, k_rank, w)[:at])) / len(gold))
    return round(sum(got) / len(got), 3) if got else None


def main():
    rows = json.load(open(sys.argv[1]))
    at = int(sys.argv[sys.argv.index("--at") + 1]) if "--at" in sys.argv else 10
    grid = [(recall(rows, FIT, k, w, at), k, w) for k in RANK_KS for w in COSINE_WEIGHTS]
    grid.sort(reverse=True)

    def show(k, w):
        return {
            "K": k,
            "W": w,
            f"fit@{at}": recall(rows, FIT, k, w, at),
            "fit@5": recall(rows, FIT, k, w, 5),
            f"held_out@{at}": recall(rows, HELD_OUT, k, w, at),
        }

    print(json.dumps({
        "best_on_fit": [show(k, w) for _, k, w in grid[:8]],
        "shipped": show(5, 0.4),  # TEXT_RANK_K, COSINE_WEIGHT (mneme-knowledge fusion.rs)
    }, indent=1))


if __name__ == "__main__":
    main()
