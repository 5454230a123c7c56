# Shared by the scripts: repository root, target directory, messages.
# shellcheck shell=bash
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$HOME/.cargo/bin:$PATH"
MODELS_DIR="${MNEME_MODELS_DIR:-$HOME/.cache/mneme/ai-models}"
TOOLS_VENV="${MNEME_TOOLS_VENV:-$HOME/.cache/mneme/venv}"
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
