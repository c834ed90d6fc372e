ops::config_main! {
    /// Gets numbers for pending accounts from the provider banks, and closes deactivated ones.
    "worker-provisioning" => worker_provisioning::run
}
