-- The statements one `POST /v1/virtual-accounts` runs (shared::db::accounts::create and
-- settle_creation, test-bank answering at once), in order, without the HTTP and the bank call
-- between the two transactions. Kept beside the code by hand: change both together.
\set b random(1, :businesses)
\set r random(1, 9000000000000000000)
BEGIN;
INSERT INTO idempotency_keys (business_id, mode, key, request_hash, state, response_status,
    account_id, created_at, updated_at)
  VALUES ('biz_pgbench_' || :b, 'test', 'pgb-' || :r, 'd1:00000000:' || md5(:r::text),
    'in_flight', NULL, 'va_pgb_' || :r, now(), now())
  ON CONFLICT (business_id, mode, key) DO NOTHING;
INSERT INTO virtual_accounts (id, business_id, mode, status, bank, account_number, account_name,
    customer_name, customer_email, customer_phone, customer_reference, identity_type,
    identity_enc, failure_reason, deactivation_reason, created_at, activated_at, deactivated_at,
    updated_at)
  SELECT 'va_pgb_' || :r, 'biz_pgbench_' || :b, 'test', 'pending', 'test-bank', NULL,
    'Bench Ltd/Bench Customer ' || :r, 'Bench Customer ' || :r, 'bench-' || :r || '@example.com',
    '+2348031234567', 'bench-' || :r, 'bvn', 'v1:00000000:' || md5(:r::text), NULL, NULL,
    stamp.t, NULL, NULL, stamp.t
  FROM (SELECT clock_timestamp() AS t) AS stamp WHERE 1 = 1
  ON CONFLICT (business_id, mode, customer_reference)
    WHERE customer_reference IS NOT NULL AND status IN ('pending', 'active') DO NOTHING
  RETURNING *;
INSERT INTO outbox (id, queue, payload, run_at, published_at, publishing_until, started_at,
    attempts, completed_at, dead_at, last_error, created_at, updated_at, request_id)
  VALUES ('job_pgb_' || :r, 'provisioning',
    '{"kind":"provision","account_id":"va_pgb_' || :r || '"}',
    now() + interval '8 seconds', NULL, NULL, NULL, 0, NULL, NULL, NULL, now(), now(), NULL);
UPDATE business_modes SET accounts_created = accounts_created + 1,
    accounts_expired = accounts_expired + (SELECT count(*) FROM virtual_accounts
      WHERE business_id = 'biz_pgbench_' || :b AND mode = 'test'
        AND created_at <= now() - interval '1 hour'
        AND virtual_accounts.created_at > coalesce(business_modes.accounts_expired_until,
          '1970-01-01 00:00:00+00')),
    accounts_expired_until = greatest(coalesce(accounts_expired_until,
      now() - interval '1 hour'), now() - interval '1 hour'),
    last_account_at = greatest(coalesce(last_account_at, now()), now())
  WHERE business_id = 'biz_pgbench_' || :b AND mode = 'test'
    AND (accounts_expired_until IS NULL OR accounts_expired_until < now())
  RETURNING accounts_created - accounts_expired,
    (SELECT min(created_at) FROM virtual_accounts
      WHERE business_id = 'biz_pgbench_' || :b AND mode = 'test'
        AND created_at > now() - interval '1 hour');
COMMIT;
BEGIN;
UPDATE virtual_accounts SET updated_at = now(), status = 'active',
    account_number = :r::text, activated_at = now()
  WHERE id = 'va_pgb_' || :r AND status = 'pending'
    AND NOT EXISTS (SELECT 1 FROM virtual_accounts AS held
      WHERE held.mode = virtual_accounts.mode AND held.bank = virtual_accounts.bank
        AND held.account_number = :r::text)
  RETURNING *;
INSERT INTO account_counts (business_id, mode, status, shard, n)
  VALUES ('biz_pgbench_' || :b, 'test', 'active', (:r::bigint % 16)::int, 1)
  ON CONFLICT (business_id, mode, status, shard) DO UPDATE SET n = account_counts.n + 1;
UPDATE outbox SET completed_at = now(), updated_at = now()
  WHERE id = 'job_pgb_' || :r AND completed_at IS NULL;
UPDATE idempotency_keys SET state = 'completed', response_status = 201,
    account_id = 'va_pgb_' || :r, updated_at = now()
  WHERE business_id = 'biz_pgbench_' || :b AND mode = 'test' AND key = 'pgb-' || :r
  RETURNING *;
COMMIT;
