-- The least a creation must write, as one transaction: bump the business-and-mode row under its
-- lock (what an exact hourly limit needs), insert the idempotency key, the account and its
-- provisioning job (the outbox row), commit. Run by bench/report.sh with pgbench -M prepared:
-- :businesses is how many `biz_pgbench_<n>` businesses the load spreads over.
\set b random(1, :businesses)
\set r random(1, 9000000000000000000)
BEGIN;
UPDATE business_modes SET updated_at = now()
  WHERE business_id = 'biz_pgbench_' || :b AND mode = 'test';
INSERT INTO idempotency_keys (business_id, mode, key, request_hash, state, response_status,
    account_id, created_at, updated_at)
  VALUES ('biz_pgbench_' || :b, 'test', 'pgb-' || :r, 'd1:00000000:' || md5(:r::text),
    'in_flight', NULL, 'va_pgb_' || :r, now(), now());
INSERT INTO virtual_accounts (id, business_id, mode, status, bank, account_number, account_name,
    customer_name, customer_email, customer_phone, customer_reference, identity_type,
    identity_enc, created_at, updated_at)
  VALUES ('va_pgb_' || :r, 'biz_pgbench_' || :b, 'test', 'pending', 'test-bank', NULL,
    'Bench Ltd/Bench Customer ' || :r, 'Bench Customer ' || :r, 'bench-' || :r || '@example.com',
    '+2348031234567', 'bench-' || :r, 'bvn', 'v1:00000000:' || md5(:r::text), now(), now());
INSERT INTO outbox (id, queue, payload, run_at, attempts, created_at, updated_at)
  VALUES ('job_pgb_' || :r, 'provisioning',
    '{"kind":"provision","account_id":"va_pgb_' || :r || '"}',
    now() + interval '8 seconds', 0, now(), now());
COMMIT;
