//! The configuration's tests: defaults, files, the environment, and what is refused.

use std::collections::BTreeMap;

use super::*;

#[test]
fn environment_overrides_defaults_with_nested_keys() {
    figment::Jail::expect_with(|jail| {
        jail.set_env("VAS_LIMITS__ACCOUNTS_PER_HOUR", "7");
        jail.set_env("VAS_WEBHOOKS__RETRY_SCHEDULE", "[1,2,3]");
        jail.set_env("VAS_DATABASE__URL", "postgres://x/y");
        let config = Config::load(None).expect("loads");
        assert_eq!(config.limits.accounts_per_hour, 7);
        assert_eq!(config.webhooks.retry_schedule, vec![1, 2, 3]);
        assert_eq!(config.database.url.as_deref(), Some("postgres://x/y"));
        Ok(())
    });
}

#[test]
fn text_values_are_taken_verbatim_from_the_environment() {
    figment::Jail::expect_with(|jail| {
        jail.set_env("VAS_SANDBOX__SECRET", "0012345");
        jail.set_env("VAS_SANDBOX__KEY", "true");
        jail.set_env("VAS_PROVIDERS__WEMA_BANK__SECRET", "\"quoted\"");
        jail.set_env("VAS_PROVIDERS__ACCESS_BANK__KEY", "1.50");
        jail.set_env("VAS_SANDBOX__LATENCY_MS", "15");
        let config = Config::load(None).expect("loads");
        assert_eq!(config.sandbox.secret, "0012345");
        assert_eq!(config.sandbox.key, "true");
        assert_eq!(
            config.providers.wema_bank.secret.as_deref(),
            Some("\"quoted\"")
        );
        assert_eq!(config.providers.access_bank.key.as_deref(), Some("1.50"));
        assert_eq!(config.sandbox.latency_ms, 15, "numbers are still numbers");
        Ok(())
    });
}

/// Every key of `Config`, all sections and nested ones (`providers.wema_bank.url`), with
/// whether its default is unset.
fn config_keys() -> BTreeMap<String, bool> {
    fn walk(prefix: &str, value: &serde_json::Value, keys: &mut BTreeMap<String, bool>) {
        match value {
            serde_json::Value::Object(fields) => {
                for (name, inner) in fields {
                    walk(&format!("{prefix}{name}."), inner, keys);
                }
            }
            leaf => {
                keys.insert(prefix.trim_end_matches('.').to_owned(), leaf.is_null());
            }
        }
    }
    let mut keys = BTreeMap::new();
    walk(
        "",
        &serde_json::to_value(Config::default()).unwrap(),
        &mut keys,
    );
    keys
}

/// A key as config.default.toml writes it.
struct FileKey {
    /// Written `# key = example`: no default.
    commented_out: bool,
    /// The line above is a comment that is not itself a key.
    explained: bool,
}

/// The keys of config.default.toml, line by line (so that the commented-out ones count).
fn file_keys() -> BTreeMap<String, FileKey> {
    let mut keys = BTreeMap::new();
    let mut table = String::new();
    let mut previous = "";
    for line in DEFAULTS_TOML.lines() {
        let trimmed = line.trim();
        let written = match commented_key(trimmed) {
            Some(text) => Some((text, true)),
            None if !trimmed.starts_with('#') && trimmed.contains('=') => Some((trimmed, false)),
            None => None,
        };
        if let Some(name) = trimmed.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            table = format!("{name}.");
        } else if let Some((text, commented_out)) = written {
            let name = text.split_once('=').map_or(text, |(name, _)| name).trim();
            let above = previous.trim();
            let key = FileKey {
                commented_out,
                explained: above.starts_with('#') && commented_key(above).is_none(),
            };
            assert!(
                keys.insert(format!("{table}{name}"), key).is_none(),
                "{table}{name} is written twice in config.default.toml"
            );
        }
        previous = line;
    }
    keys
}

#[test]
fn every_key_is_in_the_defaults_file_with_a_comment() {
    let config = config_keys();
    let file = file_keys();
    let missing: Vec<_> = config.keys().filter(|k| !file.contains_key(*k)).collect();
    let unknown: Vec<_> = file.keys().filter(|k| !config.contains_key(*k)).collect();
    let unexplained: Vec<_> = file
        .iter()
        .filter(|(_, k)| !k.explained)
        .map(|(n, _)| n)
        .collect();
    // A key with no default is written commented out (`# url = "…"`), and only such a key.
    let misstated: Vec<_> = file
        .iter()
        .filter(|(name, k)| {
            config
                .get(*name)
                .is_some_and(|unset| *unset != k.commented_out)
        })
        .map(|(name, _)| name)
        .collect();
    assert!(
        missing.is_empty() && unknown.is_empty() && unexplained.is_empty() && misstated.is_empty(),
        "config.default.toml is out of step with ops::config::Config.\n\
         Keys missing from it (add each, under its [section], with its default and a comment \
         above saying what it does and who reads it; `# key = example` if it has no default): \
         {missing:?}\n\
         Keys in it that Config does not have: {unknown:?}\n\
         Keys with no comment line directly above: {unexplained:?}\n\
         Keys commented out that have a default, or written in that have none: {misstated:?}"
    );
}

#[test]
fn the_defaults_file_is_what_loads_when_nothing_is_set() {
    figment::Jail::expect_with(|_| {
        let alone: Config = Figment::from(Toml::string(DEFAULTS_TOML)).extract()?;
        let loaded = Config::load(None).expect("loads with no file and no variables");
        assert_eq!(
            serde_json::to_value(&loaded).unwrap(),
            serde_json::to_value(&alone).unwrap()
        );
        // The example of each key with no default is a valid value of it.
        let examples: Config = Figment::from(Toml::string(&defaults_with_examples())).extract()?;
        let unset: Vec<_> = config_keys()
            .into_keys()
            .filter(|key| {
                let pointer = format!("/{}", key.replace('.', "/"));
                serde_json::to_value(&examples).unwrap().pointer(&pointer)
                    == Some(&serde_json::Value::Null)
            })
            .collect();
        assert!(
            unset.is_empty(),
            "keys with neither a default nor an example: {unset:?}"
        );
        Ok(())
    });
}

#[test]
fn todays_defaults_are_kept() {
    let config = Config::default();
    assert_eq!(
        config.webhooks.retry_schedule,
        vec![5, 300, 1800, 7200, 18000, 36000, 36000]
    );
    assert_eq!(
        config.http.server_timeouts(),
        Timeouts {
            header_read: Duration::from_secs(10),
            body_read: Duration::from_secs(30),
            idle: Duration::from_secs(60),
        }
    );
    assert_eq!(Timeouts::default(), config.http.server_timeouts());
    assert_eq!(config.provisioning.give_up_after_secs, 24 * 3600);
    assert_eq!(config.dashboard.absolute_timeout_secs, 12 * 3600);
    assert_eq!(config.payouts.max_amount, 500_000_000);
    assert_eq!(config.limits.list_exact_total, 10_000);
    assert_eq!(config.sandbox.transfer_delay_secs, 2);
    assert_eq!(config.sandbox.failure_rate, 0.0);
    assert_eq!(config.http.bind, SocketAddr::from(([127, 0, 0, 1], 8080)));
    assert_eq!(config.ops.bind, SocketAddr::from(([127, 0, 0, 1], 0)));
    assert_eq!(config.dev.data_dir, PathBuf::from(".vas-dev"));
    assert_eq!(config.amqp.prefix, "vas");
    assert!(config.http.trusted_proxies.is_empty());
    assert!(config.crypto.previous_keys.is_empty());
    assert!(!config.webhooks.allow_private_addresses);
    for unset in [
        &config.database.url,
        &config.amqp.url,
        &config.crypto.key,
        &config.sandbox.url,
        &config.sandbox.notify_url,
        &config.providers.wema_bank.url,
        &config.providers.titan_trust_bank.secret,
        &config.dashboard.public_url,
    ] {
        assert_eq!(unset, &None);
    }
    assert_eq!(config.amqp.ca_file, None);
    assert_eq!(config.database.ca_file, None);
    assert_eq!(config.sandbox.state_file, None);
    assert_eq!(config.payouts.test_kill_at, None);
    // A section's own default is the same file.
    assert_eq!(
        SandboxConfig::default().secret,
        "sandbox-notification-secret"
    );
    assert_eq!(DashboardConfig::default().sign_ins_per_minute, 20);
}

#[test]
fn text_keys_are_the_keys_with_text_or_no_default() {
    // Derived from the file's quotes, checked against the types' own defaults: a number, a
    // flag or a list is never taken verbatim, and every text key is.
    let text: Vec<_> = config_keys()
        .into_keys()
        .filter(|key| {
            let pointer = format!("/{}", key.replace('.', "/"));
            matches!(
                serde_json::to_value(Config::default())
                    .unwrap()
                    .pointer(&pointer),
                Some(serde_json::Value::String(_) | serde_json::Value::Null)
            )
        })
        .collect();
    let mut verbatim = VERBATIM_KEYS.clone();
    verbatim.sort();
    assert_eq!(verbatim, text);
    assert_eq!(verbatim_key("VAS_SANDBOX__SECRET"), Some("sandbox.secret"));
    assert_eq!(
        verbatim_key("VAS_PROVIDERS__TITAN_TRUST_BANK__KEY"),
        Some("providers.titan_trust_bank.key")
    );
    assert_eq!(verbatim_key("VAS_LIMITS__ACCOUNTS_PER_HOUR"), None);
    assert_eq!(verbatim_key("VAS_WEBHOOKS__RETRY_SCHEDULE"), None);
    assert_eq!(verbatim_key("VAS_HTTP__TRUSTED_PROXIES"), None);
    assert_eq!(verbatim_key("SANDBOX__SECRET"), None);
}

#[test]
fn toml_file_sits_between_defaults_and_environment() {
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "vas.toml",
            "[limits]\naccounts_per_hour = 9\n[http]\nbind = \"0.0.0.0:9000\"\n",
        )?;
        jail.set_env("VAS_HTTP__BIND", "127.0.0.1:9001");
        let config = Config::load(Some(Path::new("vas.toml"))).expect("loads");
        assert_eq!(config.limits.accounts_per_hour, 9);
        assert_eq!(config.http.bind.port(), 9001);
        Ok(())
    });
}

#[test]
fn production_requirements_name_what_is_missing() {
    let mut config = Config::default();
    let err = config.require_production().unwrap_err().to_string();
    assert!(err.contains("VAS_DATABASE__URL"), "{err}");
    config.database.url = Some("postgres://x".into());
    let err = config.require_production().unwrap_err().to_string();
    assert!(err.contains("VAS_AMQP__URL"), "{err}");
    config.amqp.url = Some("amqp://x".into());
    let err = config.require_production().unwrap_err().to_string();
    assert!(err.contains("VAS_CRYPTO__KEY"), "{err}");
    config.crypto.key = Some("k".into());
    assert!(config.require_production().is_ok());
}

#[test]
fn server_timeouts_are_read_from_the_environment_and_never_zero() {
    figment::Jail::expect_with(|jail| {
        assert_eq!(
            Config::load(None).expect("loads").http.server_timeouts(),
            crate::http::Timeouts {
                header_read: Duration::from_secs(10),
                body_read: Duration::from_secs(30),
                idle: Duration::from_secs(60),
            }
        );
        jail.set_env("VAS_HTTP__HEADER_READ_TIMEOUT_SECS", "2");
        jail.set_env("VAS_HTTP__BODY_READ_TIMEOUT_SECS", "3");
        jail.set_env("VAS_HTTP__IDLE_TIMEOUT_SECS", "4");
        let timeouts = Config::load(None).expect("loads").http.server_timeouts();
        assert_eq!(timeouts.header_read, Duration::from_secs(2));
        assert_eq!(timeouts.body_read, Duration::from_secs(3));
        assert_eq!(timeouts.idle, Duration::from_secs(4));
        // Zero would close every connection at once: refused, naming the setting.
        jail.set_env("VAS_HTTP__IDLE_TIMEOUT_SECS", "0");
        let err = Config::load(None).unwrap_err().to_string();
        assert!(err.contains("HTTP.IDLE_TIMEOUT_SECS"), "{err}");
        Ok(())
    });
}

#[test]
fn the_test_kill_point_is_off_unless_named_exactly() {
    figment::Jail::expect_with(|jail| {
        assert_eq!(
            Config::load(None).expect("loads").payouts.test_kill_at,
            None
        );
        jail.set_env("VAS_PAYOUTS__TEST_KILL_AT", "while_polling");
        assert_eq!(
            Config::load(None).expect("loads").payouts.test_kill_at,
            Some(KillPoint::WhilePolling)
        );
        for wrong in ["true", "1", "polling", "WHILE_POLLING"] {
            jail.set_env("VAS_PAYOUTS__TEST_KILL_AT", wrong);
            assert!(Config::load(None).is_err(), "{wrong}");
        }
        Ok(())
    });
}

#[test]
fn trusted_proxies_are_read_as_a_list_or_comma_separated() {
    figment::Jail::expect_with(|jail| {
        assert!(
            Config::load(None)
                .expect("loads")
                .http
                .trusted_proxies
                .is_empty()
        );
        jail.set_env("VAS_HTTP__TRUSTED_PROXIES", "10.0.0.0/8, ::1");
        let proxies = Config::load(None).expect("loads").http.trusted_proxies;
        assert!(proxies.contains("10.2.3.4".parse().unwrap()));
        assert!(proxies.contains("::1".parse().unwrap()));
        assert!(!proxies.contains("192.0.2.1".parse().unwrap()));
        jail.set_env("VAS_HTTP__TRUSTED_PROXIES", "[\"127.0.0.1\", \"fd00::/8\"]");
        let proxies = Config::load(None).expect("loads").http.trusted_proxies;
        assert!(proxies.contains("fd12::1".parse().unwrap()));
        jail.set_env("VAS_HTTP__TRUSTED_PROXIES", "10.0.0.0/8,nginx");
        let err = Config::load(None).unwrap_err().to_string();
        assert!(err.contains("nginx"), "{err}");
        Ok(())
    });
}

#[test]
fn unknown_keys_are_refused_inside_sections_only() {
    figment::Jail::expect_with(|jail| {
        jail.set_env("VAS_PORT", "tcp://10.0.0.1:8080");
        assert!(
            Config::load(None).is_ok(),
            "a platform's own variable is ignored"
        );
        jail.set_env("VAS_LIMITS__ACCOUNTS_PER_DAY", "1");
        assert!(Config::load(None).is_err());
        Ok(())
    });
}
