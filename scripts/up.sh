#!/usr/bin/env bash
# Installs what is missing, builds, and starts Mneme on embedded defaults
# (Spin SQLite and key-value files under .spin/) at http://127.0.0.1:3000.
# Extra arguments go to `mneme up` (for example --listen 0.0.0.0:3000).
source "$(dirname "$0")/lib.sh"
"$ROOT/scripts/install.sh"
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

cat <<MSG

Mneme is starting at http://127.0.0.1:3000
  API key:  $SPIN_VARIABLE_API_KEY   (kept in .spin/secrets.env)
  Try:      curl -s http://127.0.0.1:3000/health

MSG
exec "$ROOT/target/release/mneme" up --runtime-config-file runtime-config.toml "$@"
