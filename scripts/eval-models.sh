#!/usr/bin/env bash
# Runs Mneme's labelled evaluation sets (evals/) against any OpenAI-compatible
# endpoint and prints each set's score: triage and mode accuracy, plain
# general questions, action honesty, knowledge extraction, task plans and
# recommendation drafts (docs/BENCHMARKS.md, "A real model").
#
#   scripts/eval-models.sh URL MODEL [--sets triage,general] [--backend hosted] [--limit N]
#   scripts/eval-models.sh http://127.0.0.1:11434/v1 qwen2.5:7b        # Ollama
#   scripts/eval-models.sh --local qwen2.5-1.5b                         # the local model
#
# Every item's outcome goes to target/evals/<model>-<time>.jsonl for the
# error analysis. With --local NAME the local model (scripts/install-model.sh
# NAME) is started for the run and stopped after it.
source "$(dirname "$0")/lib.sh"
[ $# -ge 2 ] || die "usage: scripts/eval-models.sh URL MODEL [eval-models flags] | --local NAME [flags]"
"$ROOT/scripts/install.sh"
"$ROOT/scripts/build.sh"
cargo build --quiet --release -p mneme-e2e --bin eval-models
export MNEME_MODELS_DIR="$MODELS_DIR"
if [ "$1" = "--local" ]; then
  name="$2"; shift 2
  file="$("$ROOT/scripts/install-model.sh" "$name" | tail -1)"
  log="$(mktemp)"
  node "$ROOT/local-model/server.mjs" --model "$file" --name "$name" --listen 127.0.0.1:0 > "$log" 2>&1 &
  server=$!
  trap 'kill "$server" 2>/dev/null; rm -f "$log"' EXIT
  for _ in $(seq 1 180); do
    url="$(sed -n 's|^local-model: serving .* at \(http://[^ ]*\) .*|\1|p' "$log")"
    [ -n "$url" ] && break
    kill -0 "$server" 2>/dev/null || { cat "$log"; die "the local model server stopped"; }
    sleep 1
  done
  [ -n "$url" ] || die "the local model server did not start within 180 s"
  model="$name"
else
  url="$1"; model="$2"; shift 2
fi
mkdir -p target/evals
out="target/evals/$(echo "$model" | tr -c 'A-Za-z0-9._-' '_')-$(date -u +%Y%m%dT%H%M%S).jsonl"
say "evaluating $model at $url (each item's outcome in $out)"
target/release/eval-models --url "$url" --model "$model" --out "$out" "$@"
