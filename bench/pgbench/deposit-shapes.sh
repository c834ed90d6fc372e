#!/usr/bin/env bash
# What a deposit's inserts cost PostgreSQL in three statement shapes (docs/benchmarks.md,
# "A round's deposits in fewer statements"), on a database a `bench/report.sh --keep` run left
# (its deposits, events and deliveries are the rows copied):
#
#   bench/pgbench/deposit-shapes.sh DATABASE_URL [RUNS] [SECONDS]
#
# Each deposit is six inserts (notification, deposit, event, delivery, job, ledger entry: each a
# stored row copied with fresh keys) and its balance's upsert; 16 deposits per transaction. The
# shapes, alternating, one pgbench client each: one statement per deposit (its parts in one
# `WITH`, as the service sends it), 16 deposits' parts in one statement, and one statement per
# table of 16 rows. Prints PostgreSQL's CPU per deposit (all its processes, `pg_cpu_ms`). It adds
# rows to that database: run it on a copy you can drop.
set -euo pipefail
url=$1 runs=${2:-3} seconds=${3:-20}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
pgbench=$(command -v pgbench || echo /usr/lib/postgresql/15/bin/pgbench)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
per=16

# `copy TABLE COLUMNS_WITH_FRESH_KEYS [ROWS]`: an INSERT … SELECT of the table's newest row, the
# named columns given fresh random text (each unique key must get one), ROWS copies of it.
copy() {
  local table=$1 fresh=$2 rows=${3:-1}
  psql -At "$url" -v ON_ERROR_STOP=1 <<SQL
SELECT format('INSERT INTO %I (%s) SELECT %s FROM %I%s WHERE id = %L',
  '$table',
  string_agg(quote_ident(column_name), ', ' ORDER BY ordinal_position),
  string_agg(CASE WHEN column_name = ANY (string_to_array('$fresh', ','))
      THEN quote_literal(left('$table', 3) || '_') || ' || gen_random_uuid()::text'
      ELSE quote_ident(column_name) END, ', ' ORDER BY ordinal_position),
  '$table',
  CASE WHEN $rows > 1 THEN ', generate_series(1, $rows)' ELSE '' END,
  (SELECT id FROM $table ORDER BY id DESC LIMIT 1))
FROM information_schema.columns WHERE table_schema = 'public' AND table_name = '$table';
SQL
}

# Each table, and the columns of its unique keys that a copy must change.
tables=(provider_notifications:id,body_digest deposits:id,provider_reference events:id
  deliveries:id,event_id outbox:id ledger_entries:id,source_id)
balance=$(psql -At "$url" -c "SELECT business_id || ' ' || mode FROM balances LIMIT 1")
read -r business mode <<<"$balance"
upsert() { # the balance credited by N deposits at once
  echo "INSERT INTO balances (business_id, mode, available, updated_at) \
VALUES ('$business', '$mode', $1, now()) ON CONFLICT (business_id, mode) \
DO UPDATE SET available = balances.available + excluded.available, updated_at = now() \
RETURNING available"
}

# `parts K`: one deposit's inserts as parts of a WITH, named after K.
parts() {
  local n=0 spec
  for spec in "${tables[@]}"; do
    printf 'i%s_%s AS (%s), ' "$1" "$n" "$(copy "${spec%%:*}" "${spec#*:}")"
    n=$((n + 1))
  done
}
one=$(parts 0)
{
  echo "BEGIN;"
  for _ in $(seq $per); do echo "WITH ${one}b AS ($(upsert 1)) SELECT 1;"; done
  echo "COMMIT;"
} >"$work/each.sql"
{
  echo "BEGIN;"
  printf 'WITH '
  for k in $(seq $per); do parts "$k"; done
  echo "b AS ($(upsert $per)) SELECT 1;"
  echo "COMMIT;"
} >"$work/together.sql"
{
  echo "BEGIN;"
  for spec in "${tables[@]}"; do echo "$(copy "${spec%%:*}" "${spec#*:}" $per);"; done
  echo "$(upsert $per);"
  echo "COMMIT;"
} >"$work/by-table.sql"

for run in $(seq "$runs"); do
  for shape in each together by-table; do
    before=$(pg_cpu_ms)
    done_tx=$("$pgbench" -n -M prepared -c 1 -T "$seconds" -f "$work/$shape.sql" "$url" 2>&1 |
      awk '/number of transactions actually processed/ { split($NF, n, "/"); print n[1] }')
    after=$(pg_cpu_ms)
    awk -v r="$run" -v s="$shape" -v t="$done_tx" -v c=$((after - before)) -v p=$per \
      'BEGIN { printf "run %s\t%-9s\tdeposits %d\tPostgreSQL CPU per deposit %.3f ms\n", r, s, t * p, c / (t * p) }'
  done
done
