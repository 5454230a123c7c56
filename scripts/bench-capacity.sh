#!/usr/bin/env bash
# The measurements behind docs/SCALING.md that no other bench takes:
#   scripts/bench-capacity.sh idle [APPS] [MINUTES]   idle apps on embedded stores: CPU per app per
#                                                    idle minute (their ticks) and RSS/PSS per app
#   scripts/bench-capacity.sh idle-ab OLD [APPS] [MINUTES]
#                                                    the same, A/B in one run: APPS apps of the build
#                                                    in OLD (a spin.toml beside target/wasm32-wasip2/
#                                                    release/*.wasm) and APPS of this one, side by side
#   scripts/bench-capacity.sh load                   one app on PostgreSQL + Redis + the scripted
#                                                    model: runner and PostgreSQL CPU per request
#                                                    kind, RESPOND under concurrency, connections
# (An rx run's cost is in bench-rx, whose scripted model composes valid artifacts.)
# Every figure is CPU time read from /proc/<pid>/stat (utime + stime), so it holds on a busy box
# better than wall time does. Build first (./scripts/build.sh).
source "$(dirname "$0")/lib.sh"
command -v wrk >/dev/null || { say "installing wrk"; apt-get install -y -qq wrk >/dev/null; }
kind=${1:?idle or load}
STATE="$(mktemp -d)"; export MNEME_CACHE_DIR="${MNEME_CACHE_DIR:-$STATE/cache}" MNEME_MODELS_DIR="$MODELS_DIR"
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$STATE"' EXIT
HZ=$(getconf CLK_TCK)
cpu_ms() { awk -v hz="$HZ" '{print ($14 + $15) * 1000 / hz}' "/proc/$1/stat"; }
sum_cpu_ms() { local s=0 p; for p in "$@"; do s=$(echo "$s $(cpu_ms "$p" 2>/dev/null || echo 0)" | awk '{print $1 + $2}'); done; echo "$s"; }
wait_for() { for _ in $(seq 1 1200); do curl -sf -o /dev/null "$1" && return 0; sleep 0.05; done; die "nothing answered $1"; }
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"

if [ "$kind" = idle ]; then
  apps=${2:-10}; minutes=${3:-10}
  export SPIN_VARIABLE_API_KEY=bench SPIN_VARIABLE_CRON_TOKEN=bench
  pids=()
  for i in $(seq "$apps"); do
    "$ROOT/target/release/mneme" up -f "$ROOT/spin.toml" --runtime-config-file "$ROOT/tests/fixtures/runtime-config.toml" \
      --state-dir "$STATE/principal-$i" --listen "127.0.0.1:$((3400 + i))" 2>/dev/null >/dev/null &
    pids+=($!)
    wait_for "http://127.0.0.1:$((3400 + i))/health"
  done
  say "$apps apps up; two minutes to settle, then $minutes idle minutes"
  sleep 120
  a=$(sum_cpu_ms "${pids[@]}"); sleep $((minutes * 60)); b=$(sum_cpu_ms "${pids[@]}")
  echo "$a $b $apps $minutes" | awk '{printf "idle: %.1f CPU-ms per app per idle minute (%d apps, %d minutes)\n", ($2 - $1) / $3 / $4, $3, $4}'
  for p in "${pids[@]}"; do awk '/^(Rss|Pss):/ {printf "%s %d ", $1, $2 / 1024} END {print "MiB"}' "/proc/$p/smaps_rollup"; done |
    awk '{rss += $2; pss += $4; n++; print "memory: " $0} END {printf "memory: mean Rss %.0f MiB, mean Pss %.0f MiB\n", rss / n, pss / n}'
  exit 0
fi

if [ "$kind" = idle-ab ]; then
  old=${2:?the directory of the old build}; apps=${3:-5}; minutes=${4:-6}
  [ -f "$old/spin.toml" ] || die "$old has no spin.toml"
  export SPIN_VARIABLE_API_KEY=bench SPIN_VARIABLE_CRON_TOKEN=bench
  declare -A group=([old]="" [new]="")
  port=3500
  for i in $(seq "$apps"); do
    for build in old new; do
      dir=$ROOT; [ "$build" = old ] && dir=$old
      port=$((port + 1))
      "$ROOT/target/release/mneme" up -f "$dir/spin.toml" --runtime-config-file "$ROOT/tests/fixtures/runtime-config.toml" \
        --state-dir "$STATE/$build-$i" --listen "127.0.0.1:$port" 2>/dev/null >/dev/null &
      group[$build]+="$! "
      wait_for "http://127.0.0.1:$port/health"
    done
  done
  say "$apps apps of each build up; two minutes to settle, then $minutes idle minutes"
  sleep 120
  a_old=$(sum_cpu_ms ${group[old]}); a_new=$(sum_cpu_ms ${group[new]})
  sleep $((minutes * 60))
  b_old=$(sum_cpu_ms ${group[old]}); b_new=$(sum_cpu_ms ${group[new]})
  echo "$a_old $b_old $a_new $b_new $apps $minutes" | awk '{o = ($2 - $1) / $5 / $6; n = ($4 - $3) / $5 / $6;
    printf "idle A/B: old %.1f, new %.1f CPU-ms per app per idle minute (ratio %.2f; %d apps each, %d minutes)\n", o, n, n / o, $5, $6}'
  exit 0
fi

[ "$kind" = load ] || die "idle, idle-ab or load"
psql -q -h 127.0.0.1 -U postgres -c "SELECT 1" >/dev/null 2>&1 || die "PostgreSQL on 127.0.0.1:5432 is needed (service postgresql start)"
redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 || die "Redis on 127.0.0.1:6379 is needed (service redis-server start)"
cargo build --quiet --release -p mneme-e2e --bin fake-model
DB="mneme_cap_$$"; psql -q -h 127.0.0.1 -U postgres -c "CREATE DATABASE $DB" >/dev/null
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; psql -q -h 127.0.0.1 -U postgres -c "DROP DATABASE IF EXISTS $DB" >/dev/null; rm -rf "$STATE"' EXIT
"$ROOT/target/release/fake-model" > "$STATE/model" &
for _ in $(seq 100); do grep -q listening "$STATE/model" && break; sleep 0.1; done
MODEL=$(awk '/listening/ {print $2}' "$STATE/model")
SPIN_VARIABLE_API_KEY=bench SPIN_VARIABLE_CRON_TOKEN=bench SPIN_VARIABLE_STORE_NAMESPACE="cap$$" \
SPIN_VARIABLE_PG_URL="host=127.0.0.1 user=postgres dbname=$DB" SPIN_VARIABLE_REDIS_URL="redis://127.0.0.1:6379" \
SPIN_VARIABLE_LLM_URL="http://$MODEL/v1" SPIN_VARIABLE_LLM_HOST="$MODEL" SPIN_VARIABLE_LLM_MODEL=bench \
  "$ROOT/target/release/mneme" up -f "$ROOT/spin.toml" --listen 127.0.0.1:3391 --state-dir "$STATE/app" 2>"$STATE/log" >/dev/null &
P=$!
U=http://127.0.0.1:3391; H='Authorization: Bearer bench'
wait_for "$U/openapi.yaml"
for _ in $(seq 600); do curl -s "$U/health" | grep -q '"ok"' && break; sleep 0.1; done
postgres_pids() { pgrep -x postgres || pgrep -f 'postgres:' ; }
# Runs "$@" (which makes N requests), printing runner and PostgreSQL CPU per request.
per_req() {
  local label=$1 n=$2; shift 2
  local pg a pa b pb; pg=$(postgres_pids | tr '\n' ' ')
  a=$(cpu_ms $P); pa=$(sum_cpu_ms $pg); "$@"; b=$(cpu_ms $P); pb=$(sum_cpu_ms $pg)
  echo "$a $b $pa $pb $n" | awk -v l="$label" '{printf "%s: runner %.2f CPU-ms/request, PostgreSQL %.2f CPU-ms/request (%d requests)\n", l, ($2 - $1) / $5, ($4 - $3) / $5, $5}'
}
msg() { for i in $(seq "$1" "$2"); do curl -s -H "$H" -d "{\"text\":\"Explain point number $i of the plan in detail please\",\"thread_id\":\"bench-$((i % 7))\"}" "$U/chat" >/dev/null; done; }
retrieve() { for _ in $(seq "$1"); do curl -sf -H "$H" -d '{"query":"should we split the monolith"}' "$U/retrieve" >/dev/null || die "/retrieve failed"; done; }
search() { for _ in $(seq "$1"); do curl -sf -H "$H" "$U/search?q=point%20of%20the%20plan" >/dev/null || die "/search failed"; done; }
social() { for _ in $(seq "$1"); do curl -s -H "$H" -d '{"text":"thanks!","thread_id":"bench-social"}' "$U/chat" >/dev/null; done; }

msg 1 30
per_req "RESPOND, sequential (the model's time included)" 300 msg 31 330
per_req "social exit, sequential" 300 social 300
per_req "/retrieve" 300 retrieve 300
per_req "/search" 300 search 300
cat > "$STATE/respond.lua" <<'LUA'
n = 0
request = function()
  n = n + 1
  return wrk.format("POST", "/chat", {["Authorization"] = "Bearer bench", ["Content-Type"] = "application/json"},
    string.format('{"text":"Explain point number %d of the plan in detail please","thread_id":"bench-c%d"}', n, n % 7))
end
LUA
pg=$(postgres_pids | tr '\n' ' ')
a=$(cpu_ms $P); pa=$(sum_cpu_ms $pg)
out=$(wrk -t2 -c8 -d10s --latency -s "$STATE/respond.lua" "$U/chat")
b=$(cpu_ms $P); pb=$(sum_cpu_ms $pg)
reqs=$(echo "$out" | awk '/requests in/ {print $1}')
echo "RESPOND, wrk -t2 -c8 -d10s: $(echo "$out" | grep -E 'Requests/sec|^ +50%|^ +99%|Non-2xx' | tr -s ' ' | tr '\n' ' ')"
echo "$a $b $pa $pb $reqs" | awk '{printf "RESPOND, eight connections: runner %.2f CPU-ms/request, PostgreSQL %.2f CPU-ms/request (%d requests)\n", ($2 - $1) / $5, ($4 - $3) / $5, $5}'
echo "PostgreSQL connections of this app: $(psql -h 127.0.0.1 -U postgres -Atc "SELECT count(*) FROM pg_stat_activity WHERE datname = '$DB'")"
awk '/^(Rss|Pss):/ {printf "%s %d MiB ", $1, $2 / 1024} END {print ""}' "/proc/$P/smaps_rollup" | sed 's/^/runner memory after the loads: /'
