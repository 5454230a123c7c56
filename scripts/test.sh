#!/usr/bin/env bash
# Runs every test: native unit tests and the end-to-end tests, which start
# the runner over real PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379).
source "$(dirname "$0")/lib.sh"
"$ROOT/scripts/install.sh" --test
"$ROOT/scripts/build.sh"
export MNEME_MODELS_DIR="$MODELS_DIR"
# clippy over every native crate and test, and every component for its wasm
# target: a warning fails the run (#52).
status=0
say "clippy"
cargo clippy --quiet --release --workspace --all-targets -- -D warnings || status=$?
components=()
for d in components/* tests/fixtures/probe-*; do
  components+=(-p "$(sed -n 's/^name = "\(.*\)"/\1/p' "$ROOT/$d/Cargo.toml" | head -1)")
done
(cd "$ROOT" && cargo clippy --quiet --release --target wasm32-wasip2 "${components[@]}" -- -D warnings) || status=$?
say "running the tests"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
report="$ROOT/target/e2e-runner-only.txt"
rm -f "$report"
# MNEME_E2E_RUNNER=<a Spin-compatible binary, e.g. spin> runs the end-to-end
# tests on it instead of `mneme up` (README, "Running under Spin").
cargo test --release --no-fail-fast --lib --bins --tests "$@" 2>&1 | tee "$log" || status=$?
if [ -z "${MNEME_E2E_RUNNER:-}" ]; then
  # The switch itself, exercised on every run by pointing it at `mneme up`:
  # the app as plain Spin sees it (no tool table), `mneme cron` beside it.
  say "the end-to-end switch, pointed at mneme up itself"
  MNEME_E2E_RUNNER="$ROOT/target/release/mneme" cargo test --release --no-fail-fast -p mneme-e2e \
    --test foundation --test host_interfaces --test errors "$@" 2>&1 | tee -a "$log" || status=$?
fi
if [ -s "$report" ]; then
  say "tests that need mneme up, reported and not run under the other runner:"
  sort -u "$report"
fi
# One closing line for the whole run, summed over every test binary.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "all tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
