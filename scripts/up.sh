#!/usr/bin/env bash
# Installs what is missing, builds, and starts Mneme on embedded defaults
# (Spin SQLite and key-value files under .spin/) at http://127.0.0.1:3000.
# `--local-model [NAME]` also installs a small language model that runs on
# the CPU (default qwen2.5-1.5b; scripts/install-model.sh lists the others)
# and starts it with the app as its model, unless llm_url is set.
# Other arguments go to `mneme up` (for example --listen 0.0.0.0:3000).
source "$(dirname "$0")/lib.sh"
local_model=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --local-model)
      local_model="qwen2.5-1.5b"
      if [ $# -gt 1 ] && [ "${2#-}" = "$2" ]; then local_model="$2"; shift; fi ;;
    --local-model=*) local_model="${1#--local-model=}" ;;
    *) args+=("$1") ;;
  esac
  shift
done
"$ROOT/scripts/install.sh"
if [ -n "$local_model" ]; then
  "$ROOT/scripts/install-model.sh" "$local_model" >/dev/null
  args+=(--mneme-local-model "$local_model")
fi
"$ROOT/scripts/build.sh"

# Secrets are generated once and kept in .spin/secrets.env (git-ignored).
mkdir -p .spin
if [ ! -s .spin/secrets.env ]; then
  umask 077
  {
    echo "SPIN_VARIABLE_API_KEY=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    echo "SPIN_VARIABLE_CRON_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  } > .spin/secrets.env
fi
# Added by later versions: appended to an older secrets file.
for name in INGEST_TOKEN RX_INGEST_TOKEN; do
  if ! grep -q "^SPIN_VARIABLE_${name}=" .spin/secrets.env; then
    (umask 077; echo "SPIN_VARIABLE_${name}=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" >> .spin/secrets.env)
  fi
done
set -a; source .spin/secrets.env; set +a

if [ -n "$local_model" ]; then
  model_line="  Model:    $local_model on this machine's CPU (started with the app; llm_url, if set, wins)"
elif [ -n "${SPIN_VARIABLE_LLM_URL:-}" ]; then
  model_line="  Model:    $SPIN_VARIABLE_LLM_URL"
else
  model_line="  Model:    none; replies come from labelled rules. ./scripts/up.sh --local-model runs one on
            this machine, or set SPIN_VARIABLE_LLM_URL to an OpenAI-compatible endpoint."
fi
cat <<MSG

Mneme is starting at http://127.0.0.1:3000
  API key:  $SPIN_VARIABLE_API_KEY   (kept in .spin/secrets.env)
$model_line
  Try:      curl -s http://127.0.0.1:3000/health

MSG
exec "$ROOT/target/release/mneme" up --runtime-config-file runtime-config.toml "${args[@]}"
