#!/usr/bin/env python3
"""A design study for #25 item 3 (BENCHMARKS «Bounding the full-text read at a
million items»), outside the app: the app's FTS5 table and statements over
LoCoMo turns repeated to N rows, as `bench-knowledge --filler` writes them.

  fulltext-sqlite.py build N DB     writes N rows into a new SQLite file DB
  fulltext-sqlite.py exact DB       times today's statement on 300 questions
  fulltext-sqlite.py plan DB        times the bounded plan (D-K15) and its
                                    top-10 agreement with today's statement
"""
import sys
if sys.argv[1] == 'build':
    import json, sqlite3, random, time, sys
    from study_common import locomo, turn_texts
    texts = turn_texts(locomo())
    N = int(sys.argv[2])
    db = sqlite3.connect(sys.argv[3])
    db.executescript("""
    CREATE TABLE search_index (seq INTEGER PRIMARY KEY, corpus TEXT, title TEXT, body TEXT, context TEXT NOT NULL DEFAULT '');
    CREATE VIRTUAL TABLE search_fts USING fts5(title, body, context, content='search_index', content_rowid='seq', tokenize='porter unicode61');
    CREATE TRIGGER search_index_ai AFTER INSERT ON search_index BEGIN
        INSERT INTO search_fts (rowid, title, body, context) VALUES (new.seq, new.title, new.body, new.context);
    END;
    """)
    r = random.Random(7)
    t = time.time()
    rows = []
    for i in range(1, N+1):
        tx = texts[r.randrange(len(texts))]
        rows.append((i, 'knowledge', ' '.join(tx.split()[:6]), f'{tx} (filler {i})'))
    db.executemany("INSERT INTO search_index (seq, corpus, title, body) VALUES (?,?,?,?)", rows)
    db.commit()
    print('built', N, time.time()-t)
    sys.exit(0)
import json, sqlite3, re, time, sys, statistics
from study_common import terms, locomo, turn_texts, questions, percentile as p
qs = questions(locomo())
db = sqlite3.connect(sys.argv[2])
BASE = "SELECT s.seq FROM search_fts JOIN search_index s ON s.seq = search_fts.rowid WHERE search_fts MATCH ? AND s.corpus IN ('knowledge') ORDER BY bm25(search_fts, 2.0, 1.0, 0.25) LIMIT 50"
def exact(q):
    t = terms(q)
    if not t: return []
    return [r[0] for r in db.execute(BASE, (' OR '.join(f'"{w}"' for w in t),))]
mode = sys.argv[1]
times = []
if mode == 'exact':
    for q in qs:
        t0 = time.perf_counter()
        exact(q)
        times.append((time.perf_counter()-t0)*1000)
    print('exact p50 %.1f p95 %.1f' % (p(times,.5), p(times,.95)))
def capped(w, cap):
    return db.execute("SELECT count(*) FROM (SELECT rowid FROM search_fts WHERE search_fts MATCH ? LIMIT ?)", (f'"{w}"', cap)).fetchone()[0]
if mode == 'plan':
    import re as _re
    def texts_of(ids):
        if not ids: return []
        rows = db.execute(f"SELECT seq, body FROM search_index WHERE seq IN ({','.join(map(str,ids))})").fetchall()
        m = {s: _re.sub(r' \(filler \d+\)$', '', b) for s, b in rows}
        return [m[i] for i in ids]
    maxseq = db.execute("SELECT max(seq) FROM search_index").fetchone()[0]
    B2 = "SELECT s.seq FROM search_fts JOIN search_index s ON s.seq = search_fts.rowid WHERE search_fts MATCH ? AND search_fts.rowid >= ? AND s.corpus IN ('knowledge') ORDER BY bm25(search_fts, 2.0, 1.0, 0.25) LIMIT 50"
    for budget, window in ((2000, 20000), (5000, 20000), (5000, 50000), (10000, 50000)):
        tt = []; ov = []; kinds = {}
        for q in qs:
            t = terms(q)
            if not t: continue
            t0 = time.perf_counter()
            cs = sorted(((capped(w, budget+1), w) for w in t))
            rare = []; s = 0
            for c, w in cs:
                if s + c > budget: break
                rare.append(w); s += c
            allq = ' OR '.join(f'"{w}"' for w in t)
            rq = ' OR '.join(f'"{w}"' for w in rare)
            if len(rare) == len(t): k='exact'; r = [x[0] for x in db.execute(BASE, (allq,))]
            elif rare: k='rare'; r = [x[0] for x in db.execute(BASE, (f'({allq}) AND ({rq})',))]
            else: k='window'; r = [x[0] for x in db.execute(B2, (allq, maxseq - window))]
            tt.append((time.perf_counter()-t0)*1000)
            kinds[k] = kinds.get(k, 0) + 1
            e = exact(q)
            a, b = texts_of(r[:10]), texts_of(e[:10])
            if b: ov.append(len(set(a) & set(b)) / len(set(b)))
        print(budget, window, kinds, 'p50 %.1f p95 %.1f max %.1f' % (p(tt,.5), p(tt,.95), max(tt)), 'text overlap@10 %.3f' % statistics.mean(ov))
