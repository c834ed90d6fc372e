//! Connection strings without their passwords, in every form the configuration takes
//! (docs/operations/keys-and-secret-rotation.md: every URL shown anywhere has each of its passwords
//! masked): one URL, libpq's multi-host URL (`postgres://u:p@h1,h2/vas`), a comma-separated list of
//! RabbitMQ nodes, a `password=` in a query, and libpq's key/value form (`host=h password=p`).
//!
//! Read by hand rather than with a URL parser: what cannot be parsed (a multi-host URL, a password
//! with an unescaped `/`) is exactly what must still be masked.

const MASK: &str = "***";

/// `text` with every password in it replaced by `***`; the rest as written.
pub fn redact_url(text: &str) -> String {
    if !text.contains("://") {
        return redact_key_values(text);
    }
    // A comma starts another URL only where a scheme follows it; other commas separate the hosts
    // of one libpq URL.
    let mut starts = vec![0];
    for (at, _) in text.match_indices(',') {
        if starts_with_scheme(text[at + 1..].trim_start()) {
            starts.push(at + 1);
        }
    }
    starts.push(text.len());
    starts
        .windows(2)
        .map(|span| redact_one(&text[span[0]..span[1]]))
        .collect()
}

/// `scheme://…`, the scheme as RFC 3986 spells it.
fn starts_with_scheme(text: &str) -> bool {
    let Some((scheme, _)) = text.split_once("://") else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// One URL: its userinfo's password and every password in its query.
fn redact_one(url: &str) -> String {
    let Some(at) = url.find("://") else {
        return redact_query(url);
    };
    let (scheme, rest) = url.split_at(at + 3);
    // The userinfo ends at the last `@`: a password with an unescaped `/`, `?`, `#` or `@` is
    // masked whole (a stray `@` in the query masks too much, never too little).
    let (userinfo, after) = match rest.rfind('@') {
        Some(at) => rest.split_at(at),
        None => ("", rest),
    };
    let userinfo = match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:{MASK}"),
        None => userinfo.to_owned(),
    };
    let (hosts, query) = after.split_at(after.find('?').unwrap_or(after.len()));
    format!("{scheme}{userinfo}{hosts}{}", redact_query(query))
}

/// `?a=1&password=p`: the value of every password key masked.
fn redact_query(query: &str) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if is_password_key(key.trim_start_matches('?')) => {
                format!("{key}={MASK}")
            }
            _ => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// libpq's `password` and `sslpassword` (the client key's passphrase), in any case.
fn is_password_key(key: &str) -> bool {
    key.to_ascii_lowercase().contains("password")
}

/// libpq's key/value form, `host=h port=5432 password='p w'`: the value of every password key
/// masked (spaces around `=`, quoted values with `\'` and `\\`, as libpq reads them).
fn redact_key_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(eq) = rest.find('=') {
        let key = rest[..eq]
            .trim_end()
            .rsplit(char::is_whitespace)
            .next()
            .unwrap_or("");
        out.push_str(&rest[..=eq]);
        rest = &rest[eq + 1..];
        let (spaces, len) = value_span(rest);
        if is_password_key(key) {
            out.push_str(&rest[..spaces]);
            out.push_str(MASK);
        } else {
            out.push_str(&rest[..len]);
        }
        rest = &rest[len..];
    }
    out.push_str(rest);
    out
}

/// Where the value at the start of `rest` begins (after spaces) and ends: a quoted value up to
/// its closing quote, a bare one up to the next space; an unclosed quote runs to the end.
fn value_span(rest: &str) -> (usize, usize) {
    let spaces = rest.len() - rest.trim_start().len();
    let value = &rest[spaces..];
    let Some(quoted) = value.strip_prefix('\'') else {
        let len = value.find(char::is_whitespace).unwrap_or(value.len());
        return (spaces, spaces + len);
    };
    let mut escaped = false;
    for (i, c) in quoted.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '\'' => return (spaces, spaces + 1 + i + 1),
            _ => {}
        }
    }
    (spaces, rest.len())
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn one_url_or_every_host_of_a_multi_host_url_keeps_all_but_its_password() {
        assert_eq!(
            redact_url("postgres://vas:s3cret@db:5432/vas?sslmode=require"),
            "postgres://vas:***@db:5432/vas?sslmode=require"
        );
        assert_eq!(
            redact_url("amqp://guest:guest@127.0.0.1:5672/%2f"),
            "amqp://guest:***@127.0.0.1:5672/%2f"
        );
        for plain in [
            "postgres://vas@db/vas",
            "sqlite://.vas-dev/vas.sqlite?mode=rwc",
            "sqlite::memory:",
        ] {
            assert_eq!(redact_url(plain), plain);
        }
        let url = "postgres://vas:s3cret@10.0.0.1:5432,10.0.0.2:5432,[::1]:5433/vas?target_session_attrs=read-write";
        let shown = redact_url(url);
        assert_eq!(
            shown,
            "postgres://vas:***@10.0.0.1:5432,10.0.0.2:5432,[::1]:5433/vas?target_session_attrs=read-write"
        );
    }

    #[test]
    fn every_node_of_a_list_is_redacted() {
        let shown = redact_url(
            "amqp://u:first@rabbit-1:5672/%2f, amqps://u:second@rabbit-2/%2f,amqp://u:third@rabbit-3/vhost?heartbeat=10",
        );
        assert_eq!(
            shown,
            "amqp://u:***@rabbit-1:5672/%2f, amqps://u:***@rabbit-2/%2f,amqp://u:***@rabbit-3/vhost?heartbeat=10"
        );
    }

    #[test]
    fn a_password_in_the_query_is_redacted() {
        assert_eq!(
            redact_url(
                "postgres://db1,db2/vas?user=vas&password=s3cret&sslmode=verify-full&sslpassword=k3y"
            ),
            "postgres://db1,db2/vas?user=vas&password=***&sslmode=verify-full&sslpassword=***"
        );
        assert_eq!(
            redact_url("postgresql:///vas?PASSWORD=s3cret"),
            "postgresql:///vas?PASSWORD=***"
        );
    }

    #[test]
    fn a_key_value_connection_string_is_redacted() {
        assert_eq!(
            redact_url("host=db1,db2 port=5432 user=vas password=s3cret dbname=vas"),
            "host=db1,db2 port=5432 user=vas password=*** dbname=vas"
        );
        assert_eq!(
            redact_url(r"host=db password = 'it\'s a \\ secret' sslmode=require"),
            r"host=db password = *** sslmode=require"
        );
        assert_eq!(redact_url("password='unclosed secret"), "password=***");
    }

    #[test]
    fn a_password_with_unescaped_separators_is_masked_whole() {
        for (url, secret) in [
            ("postgres://vas:pa/ss@db/vas", "pa/ss"),
            ("postgres://vas:p?a#ss@db1,db2/vas", "p?a#ss"),
            ("amqp://u:p@ss@rabbit/%2f,amqp://u:p,w@rabbit-2/%2f", "p@ss"),
        ] {
            let shown = redact_url(url);
            assert!(!shown.contains(secret), "{shown}");
            assert!(shown.contains(":***@"), "{shown}");
        }
    }
}
