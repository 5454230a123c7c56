#!/usr/bin/env bash
# Foundation benchmarks (docs/BENCHMARKS.md): runner overhead for a trivial
# component under wrk, instantiation time, and startup to first 200 with a
# warm compile cache. Loopback only; every loop is bounded.
source "$(dirname "$0")/lib.sh"
command -v wrk >/dev/null || { say "installing wrk"; apt-get install -y -qq wrk >/dev/null; }
"$ROOT/scripts/build.sh"
BIN="$ROOT/target/release/mneme"
STATE="$(mktemp -d)"; CACHE="$STATE/cache"; PORT=${BENCH_PORT:-3390}
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$STATE"' EXIT

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"

start() { # start the probe app; prints nothing, waits for the first 200
  MNEME_CACHE_DIR="$CACHE" "$BIN" up -f tests/fixtures/probe.toml --listen "127.0.0.1:$PORT" \
    --runtime-config-file tests/fixtures/runtime-config.toml --state-dir "$STATE/s$1" 2> "$STATE/log$1" > /dev/null &
  for _ in $(seq 1 3000); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/hello" && return 0; sleep 0.001; done
  echo "the runner did not start" >&2; cat "$STATE/log$1" >&2; exit 1
}

say "startup to first 200 (warm cache), 10 runs"
start cold; kill %1; wait 2>/dev/null || true
times=()
for i in $(seq 1 10); do
  t0=$(date +%s%N); start "$i"; t1=$(date +%s%N)
  times+=($(( (t1 - t0) / 1000000 ))); kill %1; wait 2>/dev/null || true
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "startup_ms median=%d min=%d max=%d\n", a[int((NR+1)/2)], a[1], a[NR]}'

say "trivial component under wrk (GET /hello)"
start bench
for conf in "-t1 -c1" "-t1 -c8" "-t2 -c16"; do
  wrk $conf -d10s --latency "http://127.0.0.1:$PORT/hello" | grep -E "^ +(50|90|99)%|Requests/sec" | sed "s/^ */wrk $conf: /"
done
say "instantiation (from the runner's log): requests that reused a live instance, and the time of a new one"
reused=$(grep -c 'GET /hello probe 200 [0-9.]*ms inst=reused' "$STATE/logbench" || true)
grep -o 'GET /hello probe 200 [0-9.]*ms inst=[0-9]*us' "$STATE/logbench" | sed 's/.*inst=\([0-9]*\)us/\1/' | sort -n \
  | awk -v reused="$reused" '{a[NR]=$1} END {printf "instances reused by %d requests; %d new, instantiate_us p50=%d p95=%d max=%d\n", reused, NR, a[int(NR*0.5)+(NR<2)], a[int(NR*0.95)+(NR<2)], a[NR]}'
