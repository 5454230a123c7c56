# Shared by the scripts: repository root, target directory, messages.
# shellcheck shell=bash
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$HOME/.cargo/bin:$PATH"
MODELS_DIR="${MNEME_MODELS_DIR:-$HOME/.cache/mneme/ai-models}"
TOOLS_VENV="${MNEME_TOOLS_VENV:-$HOME/.cache/mneme/venv}"
# The official MCP Python SDK, a real client for /mcp's tests, in a venv of
# its own (its HTTP stack is not schemathesis's).
MCP_VENV="${MNEME_MCP_VENV:-$HOME/.cache/mneme/mcp-venv}"
# The MCP Inspector's npm package, for its CLI mode.
INSPECTOR_DIR="${MNEME_INSPECTOR_DIR:-$HOME/.cache/mneme/mcp-inspector}"
LLM_DIR="${MNEME_LLM_DIR:-$HOME/.cache/mneme/llm}"
say() { printf '\033[1m==>\033[0m %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# spin.toml names components under ./target; when CARGO_TARGET_DIR points
# elsewhere (a CI cache), ./target becomes a link to it.
link_target_dir() {
  if [ -n "${CARGO_TARGET_DIR:-}" ] && [ "$(realpath -m "$CARGO_TARGET_DIR")" != "$ROOT/target" ]; then
    mkdir -p "$CARGO_TARGET_DIR"
    if [ -L target ] || [ ! -e target ]; then
      ln -sfn "$(realpath -m "$CARGO_TARGET_DIR")" target
    fi
  fi
}

# Writes to $1 the wrk script of the social exit: POST /chat "thanks!" with
# the bench API key, printing p50, p95, p99, req/s and errors.
social_lua() {
  cat > "$1" <<'LUA'
wrk.method = "POST"
wrk.body = '{"text":"thanks!","thread_id":"bench-social"}'
wrk.headers["Authorization"] = "Bearer bench"
wrk.headers["Content-Type"] = "application/json"
done = function(summary, latency, requests)
  io.write(string.format("p50=%.2fms p95=%.2fms p99=%.2fms req/s=%.0f errors=%d\n",
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency:percentile(99) / 1000,
    summary.requests / (summary.duration / 1e6), summary.errors.status + summary.errors.read + summary.errors.timeout))
end
LUA
}
