-- Issue 24, eleventh round: a PROTOTYPE, not the service's schema. What the creation's
-- statements would cost if the account's number and status lived in rows of their own, so that
-- the second write (pending → active with its number) touches no indexed column of
-- virtual_accounts and PostgreSQL can make it a HOT update (no new entry in its indexes).
-- Applied after `api migrate` by split.sh, which runs the creation statements rewritten for it.
--
-- account_states: what lists filter on (status) and what keeps one live account per
-- customerReference; account_numbers: what deposits are matched on, unique per mode and bank.
-- The trigram search index loses the number (a search by number would read account_numbers).
CREATE TABLE account_states (account_id text PRIMARY KEY, business_id text NOT NULL,
  mode text NOT NULL, status text NOT NULL, customer_reference text,
  created_at timestamptz NOT NULL);
CREATE INDEX account_states_list ON account_states (business_id, mode, status, created_at, account_id);
CREATE UNIQUE INDEX account_states_live_reference ON account_states
  (business_id, mode, customer_reference)
  WHERE customer_reference IS NOT NULL AND status IN ('pending', 'active');
CREATE TABLE account_numbers (mode text, bank text, account_number text,
  account_id text NOT NULL, PRIMARY KEY (mode, bank, account_number));
DROP INDEX virtual_accounts_business_mode_status_created_id, virtual_accounts_live_reference,
  virtual_accounts_mode_bank_number, virtual_accounts_search;
CREATE INDEX virtual_accounts_search ON virtual_accounts USING gin ((lower(customer_name ||
  chr(31) || customer_email || chr(31) || coalesce(customer_reference, '') || chr(31) ||
  customer_phone)) gin_trgm_ops);
