ops::config_main! {
    /// Asks the provider banks again for deposits that were not recorded.
    "worker-recheck" => worker_recheck::run
}
