ops::config_main! {
    /// Sends payouts to the payout provider exactly once and learns their outcome; pays out daily
    /// settlement accounts.
    "worker-payouts" => worker_payouts::run
}
