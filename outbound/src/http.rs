//! Reading the bodies of HTTP responses from servers the service does not control (provider
//! banks, name enquiries, businesses' webhook receivers): every such read goes through
//! [`read_capped`], so none of them can be made to buffer an unbounded body.

/// The most of a provider's response body the service reads; a provider's answers are a few
/// hundred bytes, a transaction list at most some hundreds of kilobytes.
pub const PROVIDER_BODY_LIMIT: usize = 1024 * 1024;

/// A body read up to a limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CappedBody {
    /// At most the limit's worth of bytes, from the start of the body.
    pub bytes: Vec<u8>,
    /// The body went on past the limit; the rest was never downloaded.
    pub truncated: bool,
}

/// Reads `response`'s body chunk by chunk and stops once it has `limit` bytes: whatever follows
/// is never downloaded (dropping the response drops the connection), so a huge or endless body
/// costs at most `limit` bytes here plus the one chunk in hand. Callers choose what a cut body
/// means: a provider's answer is then unusable, a webhook receiver's excerpt simply ends there.
pub async fn read_capped(
    response: &mut reqwest::Response,
    limit: usize,
) -> Result<CappedBody, reqwest::Error> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit - bytes.len();
        if chunk.len() > room {
            bytes.extend_from_slice(&chunk[..room]);
            return Ok(CappedBody {
                bytes,
                truncated: true,
            });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(CappedBody {
        bytes,
        truncated: false,
    })
}
