#!/usr/bin/env bash
# Runs every test: native unit tests and the end-to-end tests, which start
# the runner over real PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379).
source "$(dirname "$0")/lib.sh"
"$ROOT/scripts/install.sh" --test
"$ROOT/scripts/build.sh"
export MNEME_MODELS_DIR="$MODELS_DIR"
say "running the tests"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
cargo test --release --no-fail-fast --lib --bins --tests "$@" 2>&1 | tee "$log" || status=$?
# One closing line for the whole run, summed over every test binary.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "all tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
