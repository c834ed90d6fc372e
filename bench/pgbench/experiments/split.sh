#!/usr/bin/env bash
# Issue 24, eleventh round: the creation's statements as they are (../create-statements.sql)
# against the prototype where the account's number and status live in rows of their own
# (account-split-schema.sql, and the same statements rewritten below), alternating, each on a
# fresh database: pgbench -M prepared, 32 clients over 16 businesses, two runs of --duration per
# database, PostgreSQL's CPU per creation from /proc (every postgres process, with the exited
# backends through the postmaster's cutime and cstime, as bench/report.sh counts it) and the
# account updates that were HOT.
#
#   bench/pgbench/experiments/split.sh --bin /tmp/vas-target/release [--pairs 2] [--duration 15]
#       [--database-url postgres://postgres@127.0.0.1:5432/postgres]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
admin_url=postgres://postgres@127.0.0.1:5432/postgres
bin=""
pairs=2
duration=15
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --database-url) admin_url=$2; shift 2 ;;
    *) echo "unknown argument $1 (see the top of $0)" >&2; exit 2 ;;
  esac
done
[ -n "$bin" ] || { echo "--bin DIR (with the api binary, for its migrations) is required" >&2; exit 2; }
pgbench=$(command -v pgbench || echo /usr/lib/postgresql/15/bin/pgbench)
# pg_cpu_ms and pgbench_businesses, as bench/report.sh measures and makes them
. "$here/../common.sh"

# `measure NAME STATEMENTS [SCHEMA]`: a fresh database migrated (then SCHEMA applied), the
# pgbench businesses copied from one real business as bench/report.sh makes them, two runs.
measure() {
  local name=$1 statements=$2 schema=${3:-}
  local db=vas_split_$$_$RANDOM
  current_db=$db
  local url=${admin_url%/*}/$db
  psql -q "$admin_url" -c "CREATE DATABASE $db" >/dev/null
  VAS_DATABASE__URL=$url "$bin/api" migrate >/dev/null
  local template
  template=$(VAS_DATABASE__URL=$url VAS_CRYPTO__KEY=$(head -c 32 /dev/urandom | base64) \
    "$bin/api" admin business create --name "Template Ltd" --kyb approved | jq -r .id)
  pgbench_businesses "$url" "$template"
  [ -z "$schema" ] || psql -q "$url" -v ON_ERROR_STOP=1 -f "$schema" >/dev/null
  psql -q "$url" -c "VACUUM ANALYZE" >/dev/null
  local run before after out count failed tps
  for run in 1 2; do
    before=$(pg_cpu_ms)
    out=$("$pgbench" -n -M prepared -c 32 -j 2 -T "$duration" -D businesses=16 -f "$statements" "$url" 2>&1)
    after=$(pg_cpu_ms)
    count=$(grep -oP 'actually processed: \K[0-9]+' <<<"$out")
    failed=$(grep -oP 'number of failed transactions: \K[0-9]+' <<<"$out" || echo 0)
    tps=$(grep -oP 'tps = \K[0-9]+' <<<"$out" | head -1)
    printf '%s\trun %s\t%s creations/s\t%s ms of PostgreSQL CPU each\t%s failed\n' "$name" "$run" \
      "$tps" "$(echo "scale=2; ($after - $before) / $count" | bc -l | sed 's/^\./0./')" "$failed"
  done
  psql -tA "$url" -c "SELECT 'updates of virtual_accounts: ' || n_tup_upd || ', HOT: ' || n_tup_hot_upd
    FROM pg_stat_user_tables WHERE relname = 'virtual_accounts'" | sed "s/^/$name\t/"
  psql -q "$admin_url" -c "DROP DATABASE $db" >/dev/null
  current_db=""
}

# The split's statements are the service's (../create-statements.sql) with three parts rewritten,
# so the two cannot drift apart: if a part is no longer found there, this stops and says which.
split_sql=$(mktemp --suffix=.sql /tmp/account-split.XXXXXX)
current_db="" # the database a measurement is using, dropped if this stops half-way
trap 'rm -f "$split_sql"; [ -z "$current_db" ] || psql -q "$admin_url" -c "DROP DATABASE IF EXISTS $current_db" >/dev/null 2>&1' EXIT
python3 - "$here/../create-statements.sql" "$split_sql" <<'PY'
import sys
text = open(sys.argv[1]).read()
parts = [
    # the first statement: the live customerReference is looked up in the state rows,
    ("""    WHERE NOT EXISTS (SELECT 1 FROM virtual_accounts
      WHERE business_id""",
     """    WHERE NOT EXISTS (SELECT 1 FROM account_states
      WHERE business_id"""),
    # and the account's state row is written beside it, the one-live-reference index its arbiter;
    ("""    FROM (SELECT clock_timestamp() AS t) AS stamp, claim WHERE 1 = 1
    ON CONFLICT (business_id, mode, customer_reference)
      WHERE customer_reference IS NOT NULL AND status IN ('pending', 'active') DO NOTHING
    RETURNING *),""",
     """    FROM (SELECT clock_timestamp() AS t) AS stamp, claim WHERE 1 = 1
    RETURNING *),
st AS (
  INSERT INTO account_states (account_id, business_id, mode, status, customer_reference, created_at)
    SELECT id, business_id, mode, status, customer_reference, created_at FROM acct
    ON CONFLICT (business_id, mode, customer_reference)
      WHERE customer_reference IS NOT NULL AND status IN ('pending', 'active') DO NOTHING),"""),
    # the second: the number is held in account_numbers, the state row follows the account.
    ("""      AND NOT EXISTS (SELECT 1 FROM virtual_accounts AS held
        WHERE held.mode = virtual_accounts.mode AND held.bank = virtual_accounts.bank
          AND held.account_number = :r::text)
    RETURNING *),""",
     """      AND NOT EXISTS (SELECT 1 FROM account_numbers AS held
        WHERE held.mode = virtual_accounts.mode AND held.bank = virtual_accounts.bank
          AND held.account_number = :r::text)
    RETURNING *),
nums AS (
  INSERT INTO account_numbers (mode, bank, account_number, account_id)
    SELECT mode, bank, account_number, id FROM upd),
st AS (
  UPDATE account_states SET status = 'active'
    WHERE account_id = 'va_pgb_' || :r AND EXISTS (SELECT 1 FROM upd)),"""),
]
for old, new in parts:
    if text.count(old) != 1:
        sys.exit("create-statements.sql changed; not found once:\n" + old)
    text = text.replace(old, new)
open(sys.argv[2], "w").write(text)
PY

for _ in $(seq 1 "$pairs"); do
  measure "as they are" "$here/../create-statements.sql"
  measure "split" "$split_sql" "$here/account-split-schema.sql"
done
