//! What of a webhook receiver's reply is kept and shown (docs/api/events-and-webhooks.md): nothing
//! for a 2xx, else the first [`EXCERPT_BYTES`] bytes as text. The same rule is applied when an
//! attempt is recorded and when one is shown, so rows recorded under an older rule show no more
//! than this one allows.

/// The most of a reply that is kept.
pub const EXCERPT_BYTES: usize = 256;

/// The excerpt of a reply with `status_code` (0: no answer) and `body`: None for a 2xx or an
/// empty body; otherwise up to [`EXCERPT_BYTES`] as text, cut at a character boundary, invalid
/// UTF-8 replaced and NULs dropped (PostgreSQL text cannot hold them).
pub fn excerpt(status_code: i32, body: &[u8]) -> Option<String> {
    if (200..300).contains(&status_code) {
        return None;
    }
    let bytes = &body[..body.len().min(EXCERPT_BYTES)];
    let text = match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        // Cut inside a character: keep what precedes it.
        Err(e) if e.error_len().is_none() => {
            String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned()
        }
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    };
    let text = text.replace('\0', "");
    // A replacement character takes 3 bytes where the invalid byte took 1: cut again.
    let text = cut_at(text, EXCERPT_BYTES);
    (!text.is_empty()).then_some(text)
}

/// What is shown of an attempt's stored excerpt (the API's `responseBody`, the dashboard).
pub fn shown(status_code: i32, stored: Option<&str>) -> Option<String> {
    stored.and_then(|s| excerpt(status_code, s.as_bytes()))
}

fn cut_at(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_256_bytes_of_a_non_2xx_reply_are_kept() {
        assert_eq!(excerpt(500, b""), None);
        assert_eq!(excerpt(500, b"boom").as_deref(), Some("boom"));
        assert_eq!(excerpt(200, b"thanks"), None);
        assert_eq!(excerpt(204, b"x"), None);
        assert_eq!(excerpt(302, b"moved").as_deref(), Some("moved"));
        let long = "é".repeat(200); // 400 bytes
        let cut = excerpt(503, long.as_bytes()).unwrap();
        assert_eq!(cut.len(), 256);
        assert!(cut.chars().all(|c| c == 'é'));
        let odd = "a".repeat(255) + "é";
        assert_eq!(excerpt(400, odd.as_bytes()).unwrap(), "a".repeat(255));
        assert_eq!(excerpt(400, b"a\0b\xff").as_deref(), Some("ab\u{fffd}"));
        let invalid = [0xffu8; 300];
        assert!(excerpt(400, &invalid).unwrap().len() <= 256);
    }

    #[test]
    fn what_is_shown_follows_the_same_rule() {
        let old = "x".repeat(1024);
        assert_eq!(shown(200, Some(&old)), None);
        assert_eq!(shown(500, Some(&old)).unwrap().len(), 256);
        assert_eq!(shown(500, None), None);
    }
}
