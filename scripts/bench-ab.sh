#!/usr/bin/env bash
# A/B of runner builds on one machine, in one run (docs/BENCHMARKS.md, "Spin-native, step 2"):
#   scripts/bench-ab.sh social LABEL=BINARY[,ENV=VALUE...] ...   POST /chat "thanks!" on PostgreSQL + Redis
#   scripts/bench-ab.sh static LABEL=BINARY[,ENV=VALUE...] ...   GET /hello (probe app) and /openapi.yaml
#   scripts/bench-ab.sh writes LABEL=BINARY[,ENV=VALUE...] ...   POST /documents 300 times, then DELETE
#                                                                  150 of them, then 150 turns of one
#                                                                  day one a request and DELETE 30 of
#                                                                  them, on PostgreSQL + Redis
# Builds run in turn, three rounds; each run gets a fresh database and namespace. ENV pairs after a
# comma go to that build's process, e.g. traced=target/release/mneme,OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4399
# The pair AB_APP=DIR runs the app whose spin.toml (and components, by its relative paths) are in DIR,
# for an A/B of component builds: old=target/release/mneme,AB_APP=/tmp/old-checkout
source "$(dirname "$0")/lib.sh"
command -v wrk >/dev/null || { say "installing wrk"; apt-get install -y -qq wrk >/dev/null; }
kind=${1:?social, static or writes}; shift
[ $# -gt 0 ] || die "name at least one LABEL=BINARY"
STATE="$(mktemp -d)"; export MNEME_CACHE_DIR="$STATE/cache" MNEME_MODELS_DIR="${MNEME_MODELS_DIR:-$HOME/.cache/mneme/ai-models}"
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$STATE"' EXIT
social_lua "$STATE/social.lua"
# A collector that accepts and drops OTLP/HTTP, for builds that export.
python3 - 4399 <<'PY' &
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
wait_for() { for _ in $(seq 1 1200); do curl -sf -o /dev/null "$1" && return 0; sleep 0.05; done; die "the runner did not answer $1"; }
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
n=0
for round in 1 2 3; do
  for spec in "$@"; do
    label=${spec%%=*}; rest=${spec#*=}; bin=${rest%%,*}; envs=(); [[ $rest == *,* ]] && IFS=, read -ra envs <<< "${rest#*,}"
    app=$ROOT
    for e in "${!envs[@]}"; do [[ ${envs[$e]} == AB_APP=* ]] && { app=${envs[$e]#AB_APP=}; unset "envs[$e]"; }; done
    envs=("${envs[@]}")
    n=$((n + 1))
    if [ "$kind" = writes ]; then
      db="mneme_ab_$$_$n"; psql -q -h 127.0.0.1 -U postgres -c "CREATE DATABASE $db" >/dev/null || die "PostgreSQL on 127.0.0.1:5432 is needed"
      env "${envs[@]}" SPIN_VARIABLE_API_KEY=bench SPIN_VARIABLE_CRON_TOKEN=bench SPIN_VARIABLE_STORE_NAMESPACE="ab$$n$n" \
        SPIN_VARIABLE_PG_URL="host=127.0.0.1 user=postgres dbname=$db" SPIN_VARIABLE_REDIS_URL="redis://127.0.0.1:6379" \
        "$bin" up -f "$app/spin.toml" --listen 127.0.0.1:3395 --state-dir "$STATE/s$n" 2>"$STATE/log$n" >/dev/null &
      pid=$!; wait_for http://127.0.0.1:3395/health
      python3 - "$round" "$label" <<'PY'
import http.client, json, statistics, sys, time
c = http.client.HTTPConnection("127.0.0.1", 3395)
def call(method, path, body=None):
    t = time.perf_counter()
    c.request(method, path, body=body, headers={"authorization": "Bearer bench", "content-type": "application/json"})
    r = c.getresponse(); r.read()
    assert r.status in (200, 201), (method, path, r.status)
    return (time.perf_counter() - t) * 1000
def doc(i):
    return json.dumps({"id": f"ab-{i}", "title": f"Note {i}", "text": f"Training note {i}: sessions per week and missed workouts decide progress."})
for i in range(20):
    call("POST", "/documents", doc(10_000 + i))
posts = [call("POST", "/documents", doc(i)) for i in range(300)]
deletes = [call("DELETE", f"/documents/ab-{i}") for i in range(0, 300, 2)]
def turn(i):
    return json.dumps({"id": f"turn-{i}", "title": "chat", "source_date": "2024-01-01",
                       "text": f"Turn {i}: we talked about the training plan, sessions per week and the missed workouts."})
turns = [call("POST", "/documents", turn(i)) for i in range(150)]
turn_deletes = [call("DELETE", f"/documents/turn-{i}") for i in range(0, 150, 5)]
q = lambda xs: (statistics.median(xs), statistics.quantiles(xs, n=20)[18])
print("round %s %s POST /documents p50=%.2fms p95=%.2fms; DELETE p50=%.2fms p95=%.2fms" % (sys.argv[1], sys.argv[2], *q(posts), *q(deletes)))
print("round %s %s POST a dated turn p50=%.2fms p95=%.2fms; DELETE p50=%.2fms p95=%.2fms" % (sys.argv[1], sys.argv[2], *q(turns), *q(turn_deletes)))
PY
      kill $pid; wait $pid 2>/dev/null
      psql -q -h 127.0.0.1 -U postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null
    elif [ "$kind" = social ]; then
      db="mneme_ab_$$_$n"; psql -q -h 127.0.0.1 -U postgres -c "CREATE DATABASE $db" >/dev/null || die "PostgreSQL on 127.0.0.1:5432 is needed"
      env "${envs[@]}" SPIN_VARIABLE_API_KEY=bench SPIN_VARIABLE_CRON_TOKEN=bench SPIN_VARIABLE_STORE_NAMESPACE="ab$$n$n" \
        SPIN_VARIABLE_PG_URL="host=127.0.0.1 user=postgres dbname=$db" SPIN_VARIABLE_REDIS_URL="redis://127.0.0.1:6379" \
        "$bin" up -f "$app/spin.toml" --listen 127.0.0.1:3395 --state-dir "$STATE/s$n" 2>"$STATE/log$n" >/dev/null &
      pid=$!; wait_for http://127.0.0.1:3395/health
      wrk -t1 -c1 -d3s -s "$STATE/social.lua" http://127.0.0.1:3395/chat >/dev/null
      [ -n "${AB_SKIP_C1:-}" ] || echo "round $round $label social -c1: $(wrk -t1 -c1 -d10s -s "$STATE/social.lua" http://127.0.0.1:3395/chat | tail -1)"
      echo "round $round $label social -c8: $(wrk -t2 -c8 -d10s -s "$STATE/social.lua" http://127.0.0.1:3395/chat | tail -1)"
      kill $pid; wait $pid 2>/dev/null
      psql -q -h 127.0.0.1 -U postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null
    else
      env "${envs[@]}" "$bin" up -f "$ROOT/tests/fixtures/probe.toml" --listen 127.0.0.1:3396 \
        --runtime-config-file "$ROOT/tests/fixtures/runtime-config.toml" --state-dir "$STATE/p$n" 2>/dev/null >/dev/null &
      pid=$!; wait_for http://127.0.0.1:3396/hello
      wrk -t1 -c8 -d2s http://127.0.0.1:3396/hello >/dev/null
      echo "round $round $label /hello: $(wrk -t1 -c8 -d10s --latency http://127.0.0.1:3396/hello | grep -E 'Requests/sec|^ +50%' | tr -s ' ' | tr '\n' ' ')"
      kill $pid; wait $pid 2>/dev/null
      env "${envs[@]}" SPIN_VARIABLE_API_KEY=bench SPIN_VARIABLE_CRON_TOKEN=bench "$bin" up -f "$app/spin.toml" \
        --listen 127.0.0.1:3397 --state-dir "$STATE/a$n" 2>/dev/null >/dev/null &
      pid=$!; wait_for http://127.0.0.1:3397/openapi.yaml
      wrk -t1 -c8 -d2s http://127.0.0.1:3397/openapi.yaml >/dev/null
      echo "round $round $label /openapi.yaml: $(wrk -t1 -c8 -d10s --latency http://127.0.0.1:3397/openapi.yaml | grep -E 'Requests/sec|^ +50%' | tr -s ' ' | tr '\n' ' ')"
      kill $pid; wait $pid 2>/dev/null
    fi
  done
done
