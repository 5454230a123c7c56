#!/bin/sh
# mneme-migrate: the migration Job's script (migrate-job.yaml), in the
# scheduler's image. It asks the app to bring its schema up to date
# (POST /tick/migrate with the cron token), retrying while the app or its
# database is still starting, then reads GET /health and fails unless the
# schema is current and the app runs on PostgreSQL and Redis, which several
# replicas must share.
#
#   MNEME_URL                 the app; default http://mneme (the SpinApp's Service)
#   SPIN_VARIABLE_CRON_TOKEN  the app's cron_token
#   MNEME_MIGRATE_TRIES       how many times to ask; default 30
#   MNEME_MIGRATE_WAIT        seconds between two tries; default 10
set -eu

url="${MNEME_URL:-http://mneme}"
tries="${MNEME_MIGRATE_TRIES:-30}"
wait="${MNEME_MIGRATE_WAIT:-10}"

say() { echo "mneme-migrate: $*" >&2; }

if [ -z "${SPIN_VARIABLE_CRON_TOKEN:-}" ]; then
  say "SPIN_VARIABLE_CRON_TOKEN is empty: put the app's cron_token in the Secret mneme-variables"
  exit 2
fi

# The token reaches curl on its standard input, never on a command line.
auth() { printf 'header = "Authorization: Bearer %s"\n' "$SPIN_VARIABLE_CRON_TOKEN"; }

n=1
while :; do
  out=$(auth | curl --config - --silent --show-error --max-time 120 \
    --write-out ' %{http_code}' -X POST "$url/tick/migrate" 2>&1) || true
  code=${out##* }
  body=${out% *}
  case "$code" in
    200)
      say "migrated: $body"
      break
      ;;
    401)
      say "the app refused the cron token (401): the Secret's cron_token is not the app's. $body"
      exit 1
      ;;
  esac
  if [ "$n" -ge "$tries" ]; then
    say "POST $url/tick/migrate failed $n times; the last answer: $code $body"
    exit 1
  fi
  say "try $n of $tries: $code $body; again in $wait s"
  n=$((n + 1))
  sleep "$wait"
done

health=$(curl --silent --show-error --max-time 30 "$url/health" 2>&1) || true
say "health: $health"
case "$health" in
  *'"status":"ok"'*) ;;
  *) say "the app is not healthy after the migration"; exit 1 ;;
esac
case "$health" in
  *'"sql":"postgres"'*) ;;
  *) say "the app is not on PostgreSQL: set pg_url and pg_host, or each replica keeps its own SQLite"; exit 1 ;;
esac
case "$health" in
  *'"kv":"redis"'*) ;;
  *) say "the app is not on Redis: set redis_url and redis_host, or each replica keeps its own key-value store"; exit 1 ;;
esac
say "the schema is current, on PostgreSQL and Redis"
