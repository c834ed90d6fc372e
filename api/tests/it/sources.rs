//! The crates whose code runs in the service's processes (not the tests, the load generator or
//! the migrations): what the source-reading tests (tenancy, the metrics' docs) read.

pub const SERVICE_CRATES: &[&str] = &[
    "domain",
    "ops",
    "jobs",
    "crypto",
    "entities",
    "views",
    "store",
    "outbound",
    "queue",
    "bootstrap",
    "provider-sandbox",
    "api",
    "api-bin",
    "worker-provisioning",
    "worker-webhooks",
    "worker-recheck",
    "worker-payouts",
];
