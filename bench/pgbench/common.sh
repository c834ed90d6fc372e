# Sourced by bench/report.sh: how it counts CPU and makes the businesses pgbench's statements
# write to (kept apart so that an experiment beside it measures the same way).

# CPU time (ms) of processes so far: `cpu_ms PID…` (utime + stime); `pg_cpu_ms`: every
# PostgreSQL process, with the time of the backends that have exited (the postmaster's cutime +
# cstime: pgbench's connections end with it); a process gone meanwhile counts 0.
hz=$(getconf CLK_TCK)
cpu_ms() {
  local total=0 t fields=${CPU_FIELDS:-'$12 + $13'}
  for pid in "$@"; do
    # Fields 14–17 (utime, stime, cutime, cstime) after the name, which is in parentheses and
    # may hold spaces.
    t=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk "{print $fields}") || t=0
    total=$((total + ${t:-0}))
  done
  echo $((total * 1000 / hz))
}
pg_cpu_ms() { CPU_FIELDS='$12 + $13 + $14 + $15' cpu_ms $(pgrep -x postgres); }

# `pgbench_businesses DATABASE_URL TEMPLATE_ID`: pgbench's businesses (biz_pgbench_1…16), copies
# of the business TEMPLATE_ID (its modes and webhook secrets), in the service's own tables.
pgbench_businesses() {
  psql -q "$1" -v ON_ERROR_STOP=1 <<SQL >/dev/null
INSERT INTO businesses (id, name, kyb_status, created_at, updated_at)
  SELECT 'biz_pgbench_' || g, 'Bench Ltd', 'approved', now(), now() FROM generate_series(1, 16) g
  ON CONFLICT DO NOTHING;
INSERT INTO business_modes (business_id, mode, webhook_url, webhook_secret_enc, created_at, updated_at)
  SELECT 'biz_pgbench_' || g, mode, NULL, webhook_secret_enc, now(), now()
  FROM business_modes, generate_series(1, 16) g WHERE business_id = '$2'
  ON CONFLICT DO NOTHING;
SQL
}
