#!/usr/bin/env bash
# Runs every test: native unit tests and the end-to-end tests, which start
# the runner over real PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379).
source "$(dirname "$0")/lib.sh"
"$ROOT/scripts/install.sh"
"$ROOT/scripts/build.sh"
export MNEME_MODELS_DIR="$MODELS_DIR"
say "running the tests"
cargo test --release "$@"
