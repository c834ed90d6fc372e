//! TLS to PostgreSQL as libpq sets it (docs/operations/postgres-tls-and-failover.md): `sslmode` and
//! `sslrootcert` in the URL, and a CA file setting (`VAS_DATABASE__CA_FILE`) for every URL that
//! names no CA of its own. sqlx reads both from the URL, for the one host of a URL, every host of a
//! multi-host URL ([`super::failover`] keeps the query for each) and the replica alike, so the
//! setting is written into the URL here. `require`, `verify-ca` and `verify-full` never fall back
//! to plain text (sqlx refuses a server that declines TLS).

use std::path::Path;

/// sqlx's names for libpq's `sslrootcert` and `sslmode`.
const ROOT_CERT_KEYS: [&str; 3] = ["sslrootcert", "ssl-root-cert", "ssl-ca"];
const MODE_KEYS: [&str; 2] = ["sslmode", "ssl-mode"];

/// `url` with `ca_file` as its `sslrootcert` when it names none, and with a CA (its own or this
/// one) `sslmode=require` checking the CA as `verify-ca` does: libpq's rule for `require` when a
/// root certificate is given. Any other database URL (SQLite) is returned as it is.
pub fn libpq_url(url: &str, ca_file: Option<&Path>) -> String {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return url.to_owned();
    }
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut pairs: Vec<String> = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(str::to_owned)
        .collect();
    let key = |pair: &str| pair.split_once('=').map_or(pair, |(key, _)| key).to_owned();
    let own_ca = pairs
        .iter()
        .any(|pair| ROOT_CERT_KEYS.contains(&key(pair).as_str()));
    if !own_ca && let Some(path) = ca_file {
        let encoded: String =
            url::form_urlencoded::byte_serialize(path.to_string_lossy().as_bytes()).collect();
        pairs.push(format!("sslrootcert={encoded}"));
    }
    if own_ca || ca_file.is_some() {
        for pair in &mut pairs {
            if MODE_KEYS.contains(&key(pair).as_str()) && pair.ends_with("=require") {
                *pair = "sslmode=verify-ca".to_owned();
            }
        }
    }
    if pairs.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", pairs.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_file_is_the_root_certificate_of_a_url_that_names_none() {
        let ca = Some(Path::new("/etc/vas/pg ca.pem"));
        assert_eq!(
            libpq_url("postgres://vas@db/vas?sslmode=verify-full", ca),
            "postgres://vas@db/vas?sslmode=verify-full&sslrootcert=%2Fetc%2Fvas%2Fpg+ca.pem"
        );
        assert_eq!(
            libpq_url("postgres://vas@db1:5432,db2:5432/vas", ca),
            "postgres://vas@db1:5432,db2:5432/vas?sslrootcert=%2Fetc%2Fvas%2Fpg+ca.pem"
        );
        // The URL's own wins.
        let own = "postgres://vas@db/vas?sslrootcert=/root/ca.pem&sslmode=verify-ca";
        assert_eq!(libpq_url(own, ca), own);
        // Nothing to add: as written.
        let plain = "postgres://vas@db/vas?sslmode=require";
        assert_eq!(libpq_url(plain, None), plain);
        assert_eq!(
            libpq_url("sqlite://x.db?mode=rwc", ca),
            "sqlite://x.db?mode=rwc"
        );
    }

    #[test]
    fn require_with_a_ca_checks_the_ca_as_libpq_does() {
        assert_eq!(
            libpq_url(
                "postgres://vas@db1,db2/vas?sslmode=require&target_session_attrs=read-write",
                Some(Path::new("/ca.pem"))
            ),
            "postgres://vas@db1,db2/vas?sslmode=verify-ca&target_session_attrs=read-write&sslrootcert=%2Fca.pem"
        );
        assert_eq!(
            libpq_url(
                "postgres://vas@db/vas?sslrootcert=/ca.pem&sslmode=require",
                None
            ),
            "postgres://vas@db/vas?sslrootcert=/ca.pem&sslmode=verify-ca"
        );
        // verify-full stays verify-full.
        assert_eq!(
            libpq_url(
                "postgres://vas@db/vas?sslmode=verify-full",
                Some(Path::new("/ca.pem"))
            ),
            "postgres://vas@db/vas?sslmode=verify-full&sslrootcert=%2Fca.pem"
        );
    }
}
