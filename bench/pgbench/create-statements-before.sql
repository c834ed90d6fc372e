-- The statements one `POST /v1/virtual-accounts` ran before the tallies (main at f05d9e9), in
-- order, for the before/after comparison of issue 12; see create-statements.sql.
\set b random(1, :businesses)
\set r random(1, 9000000000000000000)
SELECT * FROM idempotency_keys
  WHERE business_id = 'biz_pgbench_' || :b AND mode = 'test' AND key = 'pgb-' || :r;
BEGIN;
SELECT pg_try_advisory_xact_lock(:r) AS claimed;
SELECT * FROM business_modes WHERE business_id = 'biz_pgbench_' || :b AND mode = 'test' FOR UPDATE;
SELECT clock_timestamp() AS now;
INSERT INTO idempotency_keys (business_id, mode, key, request_hash, state, response_status,
    account_id, created_at, updated_at)
  VALUES ('biz_pgbench_' || :b, 'test', 'pgb-' || :r, 'd1:00000000:' || md5(:r::text),
    'in_flight', NULL, NULL, now(), now())
  ON CONFLICT (business_id, mode, key) DO NOTHING;
SELECT * FROM virtual_accounts
  WHERE business_id = 'biz_pgbench_' || :b AND mode = 'test' AND customer_reference = 'bench-' || :r
    AND status IN ('pending', 'active') LIMIT 1;
SELECT COUNT(*) AS num_items FROM (SELECT * FROM virtual_accounts
  WHERE business_id = 'biz_pgbench_' || :b AND mode = 'test'
    AND created_at > now() - interval '1 hour') AS sub_query;
SELECT * FROM virtual_accounts
  WHERE business_id = 'biz_pgbench_' || :b AND mode = 'test'
    AND created_at > now() - interval '1 hour' ORDER BY created_at ASC LIMIT 1;
INSERT INTO virtual_accounts (id, business_id, mode, status, bank, account_number, account_name,
    customer_name, customer_email, customer_phone, customer_reference, identity_type,
    identity_enc, failure_reason, deactivation_reason, created_at, activated_at, deactivated_at,
    updated_at)
  VALUES ('va_pgb_' || :r, 'biz_pgbench_' || :b, 'test', 'pending', 'test-bank', NULL,
    'Bench Ltd/Bench Customer ' || :r, 'Bench Customer ' || :r, 'bench-' || :r || '@example.com',
    '+2348031234567', 'bench-' || :r, 'bvn', 'v1:00000000:' || md5(:r::text), NULL, NULL,
    now(), NULL, NULL, now())
  RETURNING *;
INSERT INTO outbox (id, queue, payload, run_at, published_at, publishing_until, started_at,
    attempts, completed_at, dead_at, last_error, created_at, updated_at, request_id)
  VALUES ('job_pgb_' || :r, 'provisioning',
    '{"kind":"provision","account_id":"va_pgb_' || :r || '"}',
    now() + interval '8 seconds', NULL, NULL, NULL, 0, NULL, NULL, NULL, now(), now(), NULL);
UPDATE idempotency_keys SET account_id = 'va_pgb_' || :r, updated_at = now()
  WHERE business_id = 'biz_pgbench_' || :b AND mode = 'test' AND key = 'pgb-' || :r
  RETURNING *;
COMMIT;
BEGIN;
SAVEPOINT settle;
UPDATE virtual_accounts SET updated_at = now(), status = 'active',
    account_number = :r::text, activated_at = now()
  WHERE id = 'va_pgb_' || :r AND status = 'pending';
RELEASE SAVEPOINT settle;
SELECT * FROM virtual_accounts WHERE id = 'va_pgb_' || :r;
UPDATE outbox SET completed_at = now(), updated_at = now()
  WHERE id = 'job_pgb_' || :r AND completed_at IS NULL;
SELECT * FROM virtual_accounts WHERE id = 'va_pgb_' || :r;
UPDATE idempotency_keys SET state = 'completed', response_status = 201,
    account_id = 'va_pgb_' || :r, updated_at = now()
  WHERE business_id = 'biz_pgbench_' || :b AND mode = 'test' AND key = 'pgb-' || :r
  RETURNING *;
COMMIT;
