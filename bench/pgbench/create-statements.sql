-- The statements one `POST /v1/virtual-accounts` runs on PostgreSQL (store::accounts::create
-- and settle_creation through accounts/one_statement.rs, test-bank answering at once), in order,
-- without the HTTP and the bank call between them: two statements, each its own transaction
-- (autocommit). Kept beside the code by hand: change both together. The transaction path the
-- service ran before (12 round trips) is `git show 9b791ef:bench/pgbench/create-statements.sql`.
-- The second is an activation alone; activations that come together share one statement
-- (ACTIVATE_ROUND in store/src/accounts/one_statement.rs), which this script does not model.
\set b random(1, :businesses)
\set r random(1, 9000000000000000000)
WITH claim AS (
  INSERT INTO idempotency_keys (business_id, mode, key, request_hash, state, response_status,
      account_id, created_at, updated_at)
    SELECT 'biz_pgbench_' || :b, 'test', 'pgb-' || :r, 'd1:00000000:' || md5(:r::text),
      'in_flight', NULL, 'va_pgb_' || :r, now(), now()
    -- the service's check for a live account with this customerReference (a get-or-create's
    -- 200 claims nothing): the generated live_reference column, which the unique index keys.
    -- The reference is a sub-select so that it is a parameter to the planner, as the service's
    -- bound value is: compared with the concatenation itself, the generic plan
    -- walked all of the business's accounts (2,202 rows, 4 ms, at 35,000 accounts) instead of
    -- the partial index. The business and mode are sub-selects as the service's are
    -- (eq_opaque in shared/src/db/mod.rs): no plan may look them up in the statistics.
    WHERE NOT EXISTS (SELECT 1 FROM virtual_accounts
      WHERE business_id = (SELECT 'biz_pgbench_' || :b)
      AND mode = (SELECT 'test') AND live_reference = (SELECT 'bench-' || :r))
    ON CONFLICT (business_id, mode, key) DO NOTHING RETURNING key),
acct AS (
  INSERT INTO virtual_accounts (id, business_id, mode, status, bank, account_number,
      account_name, customer_name, customer_email, customer_phone, customer_reference,
      identity_type, identity_enc, failure_reason, deactivation_reason, created_at, activated_at,
      deactivated_at, updated_at, created_by_key_id)
    SELECT 'va_pgb_' || :r, 'biz_pgbench_' || :b, 'test', 'pending', 'test-bank', NULL,
      'Bench Ltd/Bench Customer ' || :r, 'Bench Customer ' || :r, 'bench-' || :r || '@example.com',
      '+2348031234567', 'bench-' || :r, 'bvn', 'v1:00000000:' || md5(:r::text), NULL, NULL,
      stamp.t, NULL, NULL, stamp.t, 'key_' || lpad(:b::text, 26, '0')
    FROM (SELECT clock_timestamp() AS t) AS stamp, claim WHERE 1 = 1
    ON CONFLICT (business_id, mode, live_reference) WHERE live_reference IS NOT NULL DO NOTHING
    RETURNING *),
job AS (
  INSERT INTO outbox (id, queue, payload, run_at, published_at, publishing_until, started_at,
      attempts, completed_at, dead_at, last_error, created_at, updated_at, request_id)
    SELECT 'job_pgb_' || :r, 'provisioning',
      '{"kind":"provision","account_id":"va_pgb_' || :r || '"}',
      acct.created_at + interval '8000 milliseconds', NULL, NULL, NULL, 0, NULL, NULL, NULL,
      acct.created_at, acct.created_at, NULL
    FROM acct),
counted (in_window, oldest) AS (
  UPDATE business_modes SET accounts_created = accounts_created + 1,
      accounts_expired = accounts_expired + (SELECT count(*) FROM virtual_accounts
        WHERE virtual_accounts.business_id = (SELECT 'biz_pgbench_' || :b)
          AND virtual_accounts.mode = (SELECT 'test')
          AND virtual_accounts.created_at <= acct.created_at - interval '3600 seconds'
          AND virtual_accounts.created_at > coalesce(business_modes.accounts_expired_until,
            '1970-01-01 00:00:00+00')),
      accounts_expired_until = greatest(coalesce(accounts_expired_until,
        acct.created_at - interval '3600 seconds'), acct.created_at - interval '3600 seconds'),
      last_account_at = greatest(coalesce(last_account_at, acct.created_at), acct.created_at)
    FROM acct
    WHERE business_modes.business_id = 'biz_pgbench_' || :b AND business_modes.mode = 'test'
      AND (business_modes.accounts_expired_until IS NULL
        OR business_modes.accounts_expired_until < acct.created_at)
    RETURNING accounts_created - accounts_expired,
      coalesce((SELECT min(created_at) FROM virtual_accounts
        WHERE virtual_accounts.business_id = (SELECT 'biz_pgbench_' || :b)
          AND virtual_accounts.mode = (SELECT 'test')
          AND virtual_accounts.created_at > acct.created_at - interval '3600 seconds'),
        acct.created_at))
SELECT acct.*, counted.in_window, counted.oldest,
    CASE WHEN acct.id IS NULL OR counted.in_window IS NULL OR counted.in_window > 1000000000
      THEN vas_refuse('not an ordinary creation: the transaction answers it') END AS refused
  FROM claim LEFT JOIN acct ON true LEFT JOIN counted ON true;
WITH upd AS (
  UPDATE virtual_accounts SET updated_at = now(), status = 'active',
      account_number = :r::text, activated_at = now()
    WHERE id = 'va_pgb_' || :r AND status = 'pending'
      AND NOT EXISTS (SELECT 1 FROM account_numbers
        WHERE account_numbers.mode = virtual_accounts.mode
          AND account_numbers.bank = virtual_accounts.bank
          AND account_numbers.account_number = :r::text)
    RETURNING *),
counted AS (
  INSERT INTO account_counts (business_id, mode, status, shard, n)
    SELECT 'biz_pgbench_' || :b, 'test', 'active', (:r::bigint % 16)::int, 1 FROM upd WHERE 1 = 1
    ON CONFLICT (business_id, mode, status, shard) DO UPDATE SET n = account_counts.n + 1),
job AS (
  UPDATE outbox SET updated_at = now(), completed_at = now()
    WHERE id = 'job_pgb_' || :r AND completed_at IS NULL AND EXISTS (SELECT 1 FROM upd)),
key AS (
  UPDATE idempotency_keys SET state = 'completed', response_status = 201,
      account_id = 'va_pgb_' || :r, updated_at = now()
    WHERE business_id = 'biz_pgbench_' || :b AND mode = 'test' AND key = 'pgb-' || :r
      AND EXISTS (SELECT 1 FROM upd))
SELECT * FROM upd;
