//! The api's tests, one binary (`cargo test -p api --test it MODULE::`): one module per concern,
//! as the files were. `listeners`, `metrics_labels` and `sign_in_flood` stay binaries of their
//! own: they read what is one per process (the metrics recorder's exact series, the resident
//! memory).

mod accounts;
mod alerts;
mod audit_trail;
mod auth_changes;
mod cli;
mod cli_audit;
mod cli_keys;
mod dashboard_browser;
mod dashboard_deploy_browser;
mod dashboard_deploy_http;
mod dashboard_home_http;
mod dashboard_http;
mod dashboard_layout_browser;
mod dashboard_lists_http;
mod dashboard_pages_browser;
mod dashboard_pages_http;
mod dashboard_team_browser;
mod dashboard_team_http;
mod deposits;
mod docs;
mod e2e;
mod e2e_payouts;
mod ha_clusters;
mod hardening_money;
mod keys;
mod list_totals;
mod openapi;
mod payouts;
mod provider_answers;
mod provisioning;
mod resends;
mod restore;
mod sources;
mod stored_values;
mod tenancy;
mod unusable_deposits;
mod vendored;
mod walkthrough;
mod webhook_hardening;
mod webhooks;
