#!/usr/bin/env bash
# Builds every wasm component (release, wasm32-wasip2) and the `mneme` runner.
source "$(dirname "$0")/lib.sh"
link_target_dir
say "building the components (wasm32-wasip2)"
components=()
for d in components/* tests/fixtures/probe-*; do
  components+=(-p "$(sed -n 's/^name = "\(.*\)"/\1/p' "$d/Cargo.toml" | head -1)")
done
cargo build --quiet --release --target wasm32-wasip2 "${components[@]}"
say "building the mneme runner"
cargo build --quiet --release -p mneme-runner
