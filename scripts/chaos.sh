#!/usr/bin/env bash
# The reliability suite's large runs (docs/RELIABILITY.md): hostile input,
# kill -9 during writes, dependency faults, races, floods and a soak, on
# both backends. Prints the table rows; exits non-zero if any check failed.
#   scripts/chaos.sh                  every scenario (about 75 minutes)
#   scripts/chaos.sh input flood      only these
#   SOAK_MINUTES=30 scripts/chaos.sh soak
source "$(dirname "$0")/lib.sh"
"$ROOT/scripts/install.sh" --test
"$ROOT/scripts/build.sh"
cargo build --quiet --release -p mneme-e2e --bin chaos
export MNEME_MODELS_DIR="$MODELS_DIR"
# Room for a thousand connections each way, and more.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
scenarios=("$@")
[ ${#scenarios[@]} -eq 0 ] && scenarios=(input kill faults race flood soak)
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r), commit $(git rev-parse --short HEAD)"
echo "| scenario | backend | what | figure | verdict |"
echo "|---|---|---|---|---|"
status=0
for s in "${scenarios[@]}"; do
  if [ "$s" = faults ]; then
    "$ROOT/target/release/chaos" faults || status=1
    continue
  fi
  for b in embedded hosted; do
    extra=()
    [ "$s" = soak ] && extra=(--minutes "${SOAK_MINUTES:-30}")
    [ "$s" = kill ] && extra=(--rounds "${KILL_ROUNDS:-10}")
    "$ROOT/target/release/chaos" "$s" --backend "$b" "${extra[@]}" || status=1
  done
done
exit "$status"
