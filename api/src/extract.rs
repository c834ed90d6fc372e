//! Extractors: the authenticated caller, path parameters, the JSON body, the idempotency key,
//! query strings.

use domain::ids::BusinessId;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use axum::body::Bytes;
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Request};
use axum::http::header;
use axum::http::request::Parts;
use chrono::{DateTime, Utc};
use crypto::{Cipher, RequestDigest};
use domain::Mode;
use domain::keys::{hash_secret_key, secret_key_mode};
use serde_json::{Map, Value};
use store::keys::{KeyOwner, find_owner, kyb_allows, record_use};

use crate::error::ApiError;
use crate::state::{AppState, CachedKey};

pub const MAX_BODY_BYTES: usize = 64 * 1024;
const DRAIN_BYTES: usize = 1024 * 1024;

/// Path parameters, as `axum::extract::Path`, but a segment that cannot name anything (not UTF-8
/// once percent-decoded, or holding a control character such as NUL, which PostgreSQL text
/// cannot hold) is 404 `not_found` as problem+json: no resource has such an id. Every parameter
/// is a `String`, so no other rejection can happen.
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        if percent_encoding::percent_decode_str(parts.uri.path()).any(|b| b.is_ascii_control()) {
            return Err(ApiError::NotFound);
        }
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Path(value)),
            Err(rejection) => {
                tracing::debug!(error = %rejection, "unreadable path parameter");
                Err(ApiError::NotFound)
            }
        }
    }
}

/// The business and mode a request acts for, from its secret key.
#[derive(Debug, Clone)]
pub struct Caller(pub KeyOwner);

impl Caller {
    pub fn business_id(&self) -> &BusinessId {
        &self.0.business_id
    }

    pub fn mode(&self) -> Mode {
        self.0.mode
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let now = domain::time::now();
        let hash = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            // The scheme name is case-insensitive (RFC 9110 §11.1).
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, key)| key.trim())
            // A key that is not even shaped like ours costs no lookup.
            .filter(|key| secret_key_mode(key).is_some())
            .map(hash_secret_key);
        if let Some(hash) = &hash
            && let Some(cached) = state.auth_cache.get(hash)
        {
            if cached.owner.works_at(now) {
                return authenticated(state, &cached, now).await;
            }
            // A rolled key's grace ended while it was cached.
            state.auth_cache.forget(hash);
        }
        let client = client_ip(parts, state);
        // The limit bounds lookups of unknown keys; a key that worked lately is looked up anyway.
        let known = hash
            .as_deref()
            .is_some_and(|h| state.auth_cache.is_known(h));
        if !known
            && let Some(retry_after_secs) = client.and_then(|c| state.auth_failures.retry_after(c))
        {
            return Err(ApiError::TooManyFailedAuthentications { retry_after_secs });
        }
        let lookup = state.auth_cache.lookup();
        let owner = match &hash {
            Some(hash) => find_owner(&state.db, hash, now).await?,
            None => None,
        };
        match (hash, owner) {
            (Some(hash), Some(owner)) => {
                let cached = state.auth_cache.insert(hash, owner, lookup);
                authenticated(state, &cached, now).await
            }
            (hash, _) => {
                // A known key that stopped working is exempt no more.
                if let Some(hash) = &hash {
                    state.auth_cache.forget(hash);
                }
                if let Some(client) = client {
                    state.auth_failures.record(client);
                }
                Err(ApiError::Unauthorized)
            }
        }
    }
}

/// The client's address, for per-address limits and the audit log alike
/// (docs/operations/processes-and-configuration.md): the TCP peer, or when that is a trusted proxy,
/// what `X-Forwarded-For` says (`ops::proxies`). None only when the router is served without
/// connect info.
pub fn client_ip(parts: &Parts, state: &AppState) -> Option<IpAddr> {
    let ConnectInfo(peer) = parts.extensions.get::<ConnectInfo<SocketAddr>>()?;
    let forwarded = parts
        .headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok());
    Some(
        state
            .config
            .http
            .trusted_proxies
            .client(peer.ip(), forwarded),
    )
}

/// The client's address as the audit log records it (`client_ip`, as text), so limits and
/// records agree on who a client is.
pub fn client_addr(parts: &Parts, state: &AppState) -> Option<String> {
    client_ip(parts, state).map(|ip| ip.to_string())
}

/// The client's address, for the audit log of handlers with no session (an API key's change,
/// signing in).
pub struct ClientAddr(pub Option<String>);

impl FromRequestParts<AppState> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Ok(ClientAddr(client_addr(parts, state)))
    }
}

/// A working key was presented: stamp its use (once a minute) and apply the KYB rule.
async fn authenticated(
    state: &AppState,
    key: &CachedKey,
    now: DateTime<Utc>,
) -> Result<Caller, ApiError> {
    if key.claim_use_stamp(now) {
        // Off the request's path: a stamp is a write, and a read must not wait on one (a
        // primary whose synchronous standby is down holds every commit until it is back).
        let (db, key_id) = (state.db.clone(), key.owner.key_id.clone());
        tokio::spawn(async move {
            if let Err(e) = record_use(&db, &key_id, now).await {
                // Only the dashboard's "last used" is late; the request itself was fine.
                tracing::warn!(error = %e, "recording a key's last use failed");
            }
        });
    }
    let owner = &key.owner;
    if !kyb_allows(owner.mode, owner.kyb_status) {
        return Err(ApiError::KybNotApproved);
    }
    Ok(Caller(owner.clone()))
}

/// A JSON object body: 415 unless `application/json`, 413 over 64 KiB, 400 unless an object.
#[derive(Debug)]
pub struct JsonObject(pub Map<String, Value>);

impl<S: Send + Sync> FromRequest<S> for JsonObject {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = body_bytes(req, state).await?;
        parse_object(&bytes).map(JsonObject)
    }
}

/// Like `JsonObject`, but an empty body (with or without a Content-Type) is an empty object, for
/// endpoints whose body is optional.
#[derive(Debug)]
pub struct OptionalJsonObject(pub Map<String, Value>);

impl<S: Send + Sync> FromRequest<S> for OptionalJsonObject {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let has_length = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v != "0");
        let has_type = req.headers().contains_key(header::CONTENT_TYPE);
        if !has_length && !has_type {
            let bytes = read_limited(req, state).await?;
            if bytes.is_empty() {
                return Ok(OptionalJsonObject(Map::new()));
            }
            return Err(ApiError::UnsupportedMediaType);
        }
        let bytes = body_bytes(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJsonObject(Map::new()));
        }
        parse_object(&bytes).map(OptionalJsonObject)
    }
}

fn is_json(req: &Request) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .is_some_and(|mime| mime == "application/json" || mime.ends_with("+json"))
}

async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    if !is_json(&req) {
        return Err(ApiError::UnsupportedMediaType);
    }
    read_limited(req, state).await
}

/// The raw body, whatever its content type, at most 64 KiB (413 `payload_too_large` as
/// problem+json beyond): for provider notifications, whose signature covers the exact bytes.
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        read_limited(req, state).await.map(RawBody)
    }
}

async fn read_limited<S: Send + Sync>(req: Request, _state: &S) -> Result<Bytes, ApiError> {
    // Bodies up to DRAIN_BYTES are read in full even when too large, so the client is still
    // reading when the 413 arrives instead of meeting a reset connection.
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > DRAIN_BYTES) {
        return Err(ApiError::PayloadTooLarge);
    }
    // The answer is what the client gets, so the access log and metrics record the truth: a
    // body cut off by the read deadline is the listener's 408, not a size problem.
    let bytes = axum::body::to_bytes(req.into_body(), DRAIN_BYTES)
        .await
        .map_err(|e| match ops::http::is_body_timeout(&e) {
            true => ApiError::RequestTimeout,
            false => ApiError::PayloadTooLarge,
        })?;
    if bytes.len() > MAX_BODY_BYTES {
        return Err(ApiError::PayloadTooLarge);
    }
    Ok(bytes)
}

fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::InvalidJson(
            "the body must be a JSON object".into(),
        )),
        Err(e) => Err(ApiError::InvalidJson(format!(
            "the body is not valid JSON (line {}, column {})",
            e.line(),
            e.column()
        ))),
    }
}

/// The `Idempotency-Key` header: required, 1–200 characters.
#[derive(Debug)]
pub struct IdempotencyKey(pub String);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let value = parts
            .headers
            .get("idempotency-key")
            .ok_or(ApiError::IdempotencyKeyMissing)?;
        let key = value
            .to_str()
            .map_err(|_| ApiError::IdempotencyKeyInvalid)?;
        if key.is_empty() || key.chars().count() > 200 {
            return Err(ApiError::IdempotencyKeyInvalid);
        }
        Ok(IdempotencyKey(key.to_owned()))
    }
}

/// A create that may be retried under an `Idempotency-Key` (accounts, payouts): the caller, the
/// key and the JSON object body, read in that order (so refused in that order), as the three
/// extractors would be one after another.
pub struct IdempotentCreate {
    pub caller: Caller,
    pub key: String,
    pub body: Map<String, Value>,
}

impl FromRequest<AppState> for IdempotentCreate {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let (mut parts, body) = req.into_parts();
        let caller = Caller::from_request_parts(&mut parts, state).await?;
        let IdempotencyKey(key) = IdempotencyKey::from_request_parts(&mut parts, state).await?;
        let JsonObject(body) =
            JsonObject::from_request(Request::from_parts(parts, body), state).await?;
        Ok(Self { caller, key, body })
    }
}

impl IdempotentCreate {
    /// What tells a retry from another request under the same key: the digest of the body's
    /// [`canonical_body`].
    pub fn digest(&self, cipher: &Cipher) -> RequestDigest {
        RequestDigest::new(cipher, &canonical_body(&self.body))
    }
}

/// The request as one text: `serde_json` maps keep their keys sorted (no `preserve_order`), so
/// the same fields in any order, with any spacing, give the same text (and the same digest).
fn canonical_body(body: &Map<String, Value>) -> String {
    Value::Object(body.clone()).to_string()
}

/// The raw query pairs (the last value of a repeated name wins); handlers validate each one so a
/// bad value is a 422 naming the field.
#[derive(Debug, Default)]
pub struct QueryPairs(pub HashMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for QueryPairs {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let pairs = url::form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
        Ok(QueryPairs(pairs))
    }
}

impl QueryPairs {
    /// An integer in `min..=max`, or the default when absent.
    pub fn int(
        &self,
        name: &str,
        default: u64,
        min: u64,
        max: u64,
        errors: &mut Vec<domain::FieldError>,
    ) -> u64 {
        let Some(raw) = self.0.get(name) else {
            return default;
        };
        match raw.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => n,
            _ => {
                errors.push(domain::FieldError::new(
                    name,
                    "out_of_range",
                    format!("{name} must be an integer from {min} to {max}"),
                ));
                default
            }
        }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// A filter of a list (`status`, `type`): one of `T`'s values, or None when absent. Any
    /// other value is a field error naming every allowed one.
    pub fn one_of<T: domain::TextEnum>(
        &self,
        name: &str,
        errors: &mut Vec<domain::FieldError>,
    ) -> Option<T> {
        let raw = self.get(name)?;
        let parsed = T::from_text(raw);
        if parsed.is_none() {
            errors.push(domain::FieldError::new(
                name,
                "invalid_value",
                format!("{name} must be one of {}", T::texts()),
            ));
        }
        parsed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_canonical_body_ignores_key_order_and_spacing_only() {
        let parse = |s: &str| match serde_json::from_str(s).unwrap() {
            Value::Object(map) => map,
            _ => unreachable!(),
        };
        let a = canonical_body(&parse(r#"{"b":1,"a":{"d":2,"c":[{"f":1,"e":2}]}}"#));
        let b = canonical_body(&parse(r#"{ "a": {"c": [{"e":2, "f":1}], "d":2}, "b": 1 }"#));
        assert_eq!(a, b);
        let c = canonical_body(&parse(r#"{"a":{"c":[{"e":2,"f":1}],"d":3},"b":1}"#));
        assert_ne!(a, c);
    }
}
