#!/usr/bin/env python3
"""The PostgreSQL half of the #25 item 3 design study (BENCHMARKS «Bounding
the full-text read at a million items»): the app's tsvector, GIN index and
statements over LoCoMo turns repeated to N rows, in a database of its own.

  fulltext-postgres.py build N DBNAME     loads N rows and a term table (ts_stat)
  fulltext-postgres.py exact DBNAME       times today's statements (D-K10)
  fulltext-postgres.py count|table DBNAME BUDGET WINDOW
        the bounded plan (D-K15) with document frequencies counted through the
        GIN index (count) or read from a kept term table (table), and its top-10
        agreement with today's statements. Needs psycopg2 (pip install psycopg2-binary).
"""
import json, re, time, sys, statistics, psycopg2
from study_common import terms, locomo, turn_texts, questions, percentile as p
def build(n, dbname):
    """N rows as `bench-knowledge --filler` writes them, the app's tsvector
    and GIN index (migration 0015), and a term table from `ts_stat`."""
    import random, subprocess
    texts = turn_texts(locomo())
    r = random.Random(7)
    esc = lambda s: s.replace('\\', '\\\\').replace('\t', ' ').replace('\n', ' ')
    rows = []
    for i in range(1, n + 1):
        tx = texts[r.randrange(len(texts))]
        rows.append(f"{i}\tknowledge\t{esc(' '.join(tx.split()[:6]))}\t{esc(f'{tx} (filler {i})')}\n")
    psql = ['psql', '-q', '-h', '127.0.0.1', '-U', 'postgres']
    subprocess.run(psql + ['-c', f'DROP DATABASE IF EXISTS {dbname}', '-c', f'CREATE DATABASE {dbname}'], check=True)
    setup = """CREATE TABLE si (seq bigint primary key, corpus text not null, title text not null, body text not null, context text not null default '');
COPY si (seq, corpus, title, body) FROM STDIN;
""" + ''.join(rows) + """\\.
ALTER TABLE si ADD COLUMN tsv tsvector GENERATED ALWAYS AS (setweight(to_tsvector('english', title || ' ' || body), 'A') || setweight(to_tsvector('english', context), 'D')) STORED;
CREATE INDEX si_tsv ON si USING GIN (tsv);
CREATE TABLE terms_df AS SELECT word AS lexeme, ndoc AS df FROM ts_stat('SELECT tsv FROM si');
ALTER TABLE terms_df ADD PRIMARY KEY (lexeme);
VACUUM ANALYZE;
"""
    subprocess.run(psql + ['-d', dbname], input=setup, text=True, check=True)

if sys.argv[1] == 'build':
    build(int(sys.argv[2]), sys.argv[3])
    sys.exit(0)
qs = questions(locomo())
db = psycopg2.connect(host='127.0.0.1', user='postgres', dbname=sys.argv[2]); db.autocommit = True
cur = db.cursor()
RANK = "SELECT seq FROM si, to_tsquery('english', %s) AS q, to_tsquery('english', %s) AS f WHERE tsv @@ f AND corpus = 'knowledge' {extra} ORDER BY ts_rank_cd('{{0.25, 0.2, 0.4, 1}}', tsv, q) DESC, seq DESC LIMIT 50"
def run(any_, filt, extra='', args=()):
    cur.execute(RANK.format(extra=extra), (any_, filt) + args); return [r[0] for r in cur.fetchall()]
def exact(t):
    any_ = ' | '.join(t)
    if len(t) < 2: return run(any_, any_)
    pairs = ' | '.join(f'({a} & {b})' for i, a in enumerate(t[:12]) for b in t[i+1:12])
    found = run(any_, pairs)
    if len(found) < 50:
        for s in run(any_, any_):
            if len(found) < 50 and s not in found: found.append(s)
    return found
def texts_of(ids):
    if not ids: return []
    cur.execute("SELECT seq, body FROM si WHERE seq = ANY(%s)", (ids,))
    m = {s: re.sub(r' \(filler \d+\)$', '', b) for s, b in cur.fetchall()}
    return [m[i] for i in ids]
COUNT = "SELECT w, (SELECT count(*) FROM (SELECT 1 FROM si WHERE tsv @@ to_tsquery('english', w) AND corpus = 'knowledge' LIMIT %s) x) FROM unnest(%s::text[]) w"
cur.execute("SELECT max(seq) FROM si"); maxseq = cur.fetchone()[0]
mode = sys.argv[1]
if mode == "table": COUNT = "SELECT w, least(%s, coalesce((SELECT sum(df) FROM terms_df WHERE lexeme = ANY(tsvector_to_array(to_tsvector('english', w)))), 0)) FROM unnest(%s::text[]) w"
if mode == 'exact':
    tt = []
    for q in qs:
        t = terms(q)
        if not t: continue
        t0 = time.perf_counter(); exact(t); tt.append((time.perf_counter()-t0)*1000)
    print('exact p50 %.1f p95 %.1f' % (p(tt,.5), p(tt,.95)))
else:
    budget, window = int(sys.argv[3]), int(sys.argv[4])
    tt = []; ct = []; ov = []; kinds = {}
    for q in qs:
        t = terms(q)
        if not t: continue
        t0 = time.perf_counter()
        cur.execute(COUNT, (budget + 1, t)); cs = sorted((c, w) for w, c in cur.fetchall())
        t1 = time.perf_counter()
        rare = []; s = 0
        for c, w in cs:
            if s + c > budget: break
            rare.append(w); s += c
        any_ = ' | '.join(t)
        if len(rare) == len(t): k = 'exact'; r = exact(t)
        elif rare: k = 'rare'; r = run(any_, ' | '.join(rare))
        else: k = 'window'; r = run(any_, any_, 'AND seq > %s', (maxseq - window,))
        tt.append((time.perf_counter()-t0)*1000); ct.append((t1-t0)*1000)
        kinds[k] = kinds.get(k, 0) + 1
        e = exact(t)
        a, b = texts_of(r[:10]), texts_of(e[:10])
        if b: ov.append(len(set(a) & set(b)) / len(set(b)))
    print(budget, window, kinds, 'count p50 %.1f p95 %.1f' % (p(ct,.5), p(ct,.95)), 'total p50 %.1f p95 %.1f max %.1f' % (p(tt,.5), p(tt,.95), max(tt)), 'text overlap@10 %.3f' % statistics.mean(ov))
