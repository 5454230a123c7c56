#!/usr/bin/env bash
# Conversation benchmarks (docs/BENCHMARKS.md): POST /chat through the
# runner on Postgres and Redis, with the scripted model answering instantly.
#  - social exit ("thanks!"): latency p50/p95 with one connection, and req/s;
#  - RESPOND overhead: client-side total minus the model time the app
#    reports in its `done` event, over sequential requests. Every measured
#    request must be routed RESPOND (its `message` event's mode), or the
#    script fails: a figure over other modes is not RESPOND's.
source "$(dirname "$0")/lib.sh"
command -v wrk >/dev/null || { say "installing wrk"; apt-get install -y -qq wrk >/dev/null; }
"$ROOT/scripts/build.sh"
cargo build --quiet --release -p mneme-e2e --bin fake-model
# MNEME_BIN runs another build of the runner, and MNEME_APP_DIR another
# checkout's app (its spin.toml and components), for an A/B comparison.
# BENCH_LLM_MODEL= (empty) leaves llm_model unset: the app asks the
# scripted endpoint for its models (D-C33).
BIN="${MNEME_BIN:-$ROOT/target/release/mneme}"
APP_DIR="${MNEME_APP_DIR:-$ROOT}"
STATE="$(mktemp -d)"; PORT=${BENCH_PORT:-3391}; DB="mneme_bench_$$"
# The runner reads the embedding model from here (scripts/install.sh puts it
# there); without it every chat fails `embedding-failed`.
export MNEME_MODELS_DIR="$MODELS_DIR"
[ -f "$MODELS_DIR/all-minilm-l6-v2/config.json" ] || die "the embedding model is missing from $MODELS_DIR: run scripts/install.sh"
trap 'kill $(jobs -p) 2>/dev/null; psql -q -h 127.0.0.1 -U postgres -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1; rm -rf "$STATE"' EXIT
psql -q -h 127.0.0.1 -U postgres -c "CREATE DATABASE $DB" >/dev/null || die "PostgreSQL on 127.0.0.1:5432 is needed"
redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 || die "Redis on 127.0.0.1:6379 is needed"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$ROOT/target/release/fake-model" > "$STATE/model" &
for _ in $(seq 1 100); do grep -q listening "$STATE/model" && break; sleep 0.05; done
MODEL=$(awk '/listening/ {print $2}' "$STATE/model")

SPIN_VARIABLE_API_KEY=bench SPIN_VARIABLE_CRON_TOKEN=bench SPIN_VARIABLE_STORE_NAMESPACE="bench$$" \
SPIN_VARIABLE_PG_URL="host=127.0.0.1 user=postgres dbname=$DB" SPIN_VARIABLE_REDIS_URL="redis://127.0.0.1:6379" \
SPIN_VARIABLE_LLM_URL="http://$MODEL/v1" SPIN_VARIABLE_LLM_HOST="$MODEL" SPIN_VARIABLE_LLM_MODEL="${BENCH_LLM_MODEL-bench}" \
  "$BIN" up -f "$APP_DIR/spin.toml" --listen "127.0.0.1:$PORT" --state-dir "$STATE/s" 2> "$STATE/log" > /dev/null &
for _ in $(seq 1 600); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/health" && break; sleep 0.05; done
URL="http://127.0.0.1:$PORT/chat"

social_lua "$STATE/social.lua"
say "social exit (POST /chat \"thanks!\"), end to end"
for conf in "-t1 -c1" "-t2 -c8"; do
  echo "wrk $conf: $(wrk $conf -d10s -s "$STATE/social.lua" "$URL" | tail -1)"
done

say "RESPOND overhead (total minus model time), 300 sequential requests"
python3 - "$URL" <<'PY'
import json, sys, time, urllib.request
url = sys.argv[1]
totals, models, overheads, misrouted = [], [], [], []
for i in range(330):
    body = json.dumps({"text": f"Explain point number {i} of the plan in detail please", "thread_id": f"bench-{i % 7}"}).encode()
    req = urllib.request.Request(url, data=body, headers={"Authorization": "Bearer bench", "Content-Type": "application/json"})
    t0 = time.perf_counter()
    raw = urllib.request.urlopen(req).read().decode()
    total = (time.perf_counter() - t0) * 1000
    done = [l for l in raw.split("\n\n") if l.startswith("event: done")][-1]
    model = json.loads(done.split("data: ", 1)[1])["model_ms"]
    mode = json.loads([l for l in raw.split("\n\n") if l.startswith("event: message")][0].split("data: ", 1)[1])["mode"]
    # Warm-up excluded (a thread's first messages are cold, and the router
    # may send them to CLARIFY); every measured one must be RESPOND.
    if i >= 30:
        if mode != "RESPOND":
            misrouted.append((i, mode))
        totals.append(total); models.append(model); overheads.append(total - model)
if misrouted:
    sys.exit(f"error: {len(misrouted)} of {len(totals)} measured requests were not routed RESPOND "
             f"(request, mode): {misrouted[:10]}; the RESPOND figures would be wrong")
def pct(a, p):
    a = sorted(a); return a[min(len(a) - 1, int(round(p / 100 * (len(a) - 1))))]
print(f"n={len(totals)} total p50={pct(totals,50):.1f}ms p95={pct(totals,95):.1f}ms; "
      f"model p50={pct(models,50):.1f}ms; overhead p50={pct(overheads,50):.1f}ms p95={pct(overheads,95):.1f}ms (every one RESPOND)")
PY

say "instantiation per request (the runner's inst= on POST /chat)"
python3 - "$STATE/log" <<'PY'
import re, sys
fresh, reused = [], 0
for line in open(sys.argv[1], errors="replace"):
    if not line.startswith("POST /chat "):
        continue
    m = re.search(r" inst=(\d+)us", line)
    if m:
        fresh.append(int(m.group(1)))
    elif " inst=reused" in line:
        reused += 1
fresh.sort()
med = fresh[len(fresh) // 2] if fresh else 0
print(f"inst: {len(fresh)} instantiated (median {med} us), {reused} reused")
PY
