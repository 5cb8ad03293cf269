//! Size limits applied while parsing, so memory per connection stays bounded.

/// Size limits for one request. `Default` gives the defaults each field
/// names.
///
/// RFC 9112 §2.3: "A server that receives a request-target longer than any
/// URI it wishes to parse MUST respond with a 414 (URI Too Long) status
/// code", and §3 recommends "at a minimum, request-line lengths of 8000
/// octets". Field limits follow RFC 6585 §5 (431).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest request line, excluding its line ending and counting any
    /// empty lines before it; longer gives 414. Default 8 KiB.
    pub max_request_line: usize,
    /// Longest field section (every byte after the request line, up to and
    /// including the blank line); longer gives 431. Default 32 KiB.
    pub max_header_bytes: usize,
    /// Longest single field line, excluding its line ending; longer gives
    /// 431. Default 8 KiB.
    pub max_field_line: usize,
    /// Most header fields; more gives 431. Default 100. The header storage
    /// passed to [`super::parse_head`] caps this further.
    pub max_headers: usize,
    /// Largest request body in bytes; larger gives 413. Default 1 MiB.
    /// In `percore-handlers` it bounds a body streamed with
    /// `Request::chunk` as well as one collected with `Request::body`, and
    /// a service can set its own per request (say, larger for an upload
    /// route only) with `Service::body_limit`.
    pub max_body: u64,
    /// Largest total of chunk extensions on one chunk-size line; larger
    /// gives 400. Default 16 KiB.
    pub max_chunk_ext: usize,
    /// Largest trailer section of a chunked body; larger gives 431.
    /// Default 16 KiB.
    pub max_trailer_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_request_line: 8 * 1024,
            max_header_bytes: 32 * 1024,
            max_field_line: 8 * 1024,
            max_headers: 100,
            max_body: 1024 * 1024,
            max_chunk_ext: 16 * 1024,
            max_trailer_bytes: 16 * 1024,
        }
    }
}
