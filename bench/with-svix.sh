#!/usr/bin/env bash
# bench/report.sh beside svix-server (docs/benchmarks.md#svix-server-beside-it): a fresh `svix`
# database and an emptied Redis, an api-only svix-server on 127.0.0.1:8071, a token, and the
# command that starts its worker (the bench starts it when a scenario says); then the report with
# SVIX_URL, SVIX_TOKEN, SVIX_WORKER and SVIX_API_PID set, so its webhook scenarios run against
# svix-server first and its figures stand in the ceiling column.
#
#   SVIX_SERVER=/path/to/svix-server bench/with-svix.sh --bin /tmp/vas-target/release \
#       [any other bench/report.sh argument; default --sections section_webhooks]
#
# Needs redis-server and redis-cli on PATH, and PostgreSQL at 127.0.0.1:5432 as `postgres` (the
# report's own default). svix-server is built outside this repository.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
svix=${SVIX_SERVER:?SVIX_SERVER must name the svix-server binary}
work=$(mktemp -d /tmp/vas-svix.XXXXXX)
# svix-server reads config.toml from its working folder: webhooks may go to this machine.
printf 'whitelist_subnets = ["127.0.0.1/32"]\n' >"$work/config.toml"
cd "$work"

# The report's processes hold up to 32 connections each and svix-server's two 20 each: past the
# server's limit, svix-server's pools time out and its figures measure that.
have=$(psql -h 127.0.0.1 -U postgres -Atc "SHOW max_connections")
if [ "$have" -lt 200 ]; then
  echo "PostgreSQL's max_connections is $have; this needs 200 or more" \
    "(ALTER SYSTEM SET max_connections = 300, then restart it)" >&2
  exit 1
fi

redis-cli ping >/dev/null 2>&1 || redis-server --daemonize yes --save '' --appendonly no >/dev/null
redis-cli flushall >/dev/null
psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS svix" -c "CREATE DATABASE svix" >/dev/null

export SVIX_JWT_SECRET=${SVIX_JWT_SECRET:-$(head -c 24 /dev/urandom | base64 | tr -d '/+=')}
export SVIX_DB_DSN=postgres://postgres@127.0.0.1:5432/svix
export SVIX_REDIS_DSN=redis://127.0.0.1:6379
export SVIX_QUEUE_TYPE=redis SVIX_CACHE_TYPE=redis
RUST_LOG=warn SVIX_API_ENABLED=true SVIX_WORKER_ENABLED=false SVIX_LISTEN_ADDRESS=127.0.0.1:8071 \
  "$svix" --run-migrations >"$work/svix-api.log" 2>&1 &
api_pid=$!
trap 'kill "$api_pid" 2>/dev/null || true' EXIT
up=false
for _ in $(seq 1 150); do
  curl -sf http://127.0.0.1:8071/api/v1/health/ >/dev/null && { up=true; break; }
  sleep 0.2
done
$up || { echo "svix-server never answered on 127.0.0.1:8071 (see $work/svix-api.log)" >&2; exit 1; }
token=$("$svix" jwt generate 2>/dev/null | awk '{print $NF}' | tail -1)
[ -n "$token" ] || { echo "svix-server gave no token (see $work/svix-api.log)" >&2; exit 1; }

[ $# -gt 0 ] && [[ " $* " == *" --sections "* ]] || set -- "$@" --sections section_webhooks
SVIX_URL=http://127.0.0.1:8071 SVIX_TOKEN=$token SVIX_API_PID=$api_pid \
  SVIX_WORKER="env RUST_LOG=warn SVIX_API_ENABLED=false SVIX_WORKER_ENABLED=true SVIX_LISTEN_ADDRESS=127.0.0.1:8072 $svix" \
  "$here/report.sh" "$@"
