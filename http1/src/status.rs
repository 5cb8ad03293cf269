//! Status codes' reason phrases, and the whole status lines of the named
//! ones, written from one list so that the two cannot disagree.

/// Defines [`reason_phrase`] and the whole status lines of the named
/// statuses from one list, so the two cannot disagree.
macro_rules! statuses {
    ($($code:literal $reason:literal,)*) => {
        /// The reason phrase for `status`; empty for codes we do not name
        /// (the phrase is optional, RFC 9112 §4).
        pub fn reason_phrase(status: u16) -> &'static str {
            match status {
                $($code => $reason,)*
                _ => "",
            }
        }

        /// `HTTP/1.1 NNN Reason\r\n` for a named status.
        pub(crate) fn named_status_line(status: u16) -> Option<&'static [u8]> {
            match status {
                $($code => Some(concat!("HTTP/1.1 ", $code, " ", $reason, "\r\n").as_bytes()),)*
                _ => None,
            }
        }
    };
}

statuses! {
    // RFC 9110 §15, and the other codes of IANA's HTTP Status Code
    // Registry (the RFC that registers each is named beside it).
    100 "Continue",
    101 "Switching Protocols",
    102 "Processing", // RFC 2518
    103 "Early Hints", // RFC 8297
    200 "OK",
    201 "Created",
    202 "Accepted",
    203 "Non-Authoritative Information",
    204 "No Content",
    205 "Reset Content",
    206 "Partial Content",
    207 "Multi-Status", // RFC 4918
    208 "Already Reported", // RFC 5842
    226 "IM Used", // RFC 3229
    300 "Multiple Choices",
    301 "Moved Permanently",
    302 "Found",
    303 "See Other",
    304 "Not Modified",
    305 "Use Proxy",
    307 "Temporary Redirect",
    308 "Permanent Redirect",
    400 "Bad Request",
    401 "Unauthorized",
    402 "Payment Required",
    403 "Forbidden",
    404 "Not Found",
    405 "Method Not Allowed",
    406 "Not Acceptable",
    407 "Proxy Authentication Required",
    408 "Request Timeout",
    409 "Conflict",
    410 "Gone",
    411 "Length Required",
    412 "Precondition Failed",
    413 "Content Too Large",
    414 "URI Too Long",
    415 "Unsupported Media Type",
    416 "Range Not Satisfiable",
    417 "Expectation Failed",
    421 "Misdirected Request",
    422 "Unprocessable Content",
    423 "Locked", // RFC 4918
    424 "Failed Dependency", // RFC 4918
    425 "Too Early", // RFC 8470
    426 "Upgrade Required",
    428 "Precondition Required", // RFC 6585
    429 "Too Many Requests", // RFC 6585
    431 "Request Header Fields Too Large", // RFC 6585
    451 "Unavailable For Legal Reasons", // RFC 7725
    500 "Internal Server Error",
    501 "Not Implemented",
    502 "Bad Gateway",
    503 "Service Unavailable",
    504 "Gateway Timeout",
    505 "HTTP Version Not Supported",
    506 "Variant Also Negotiates", // RFC 2295
    507 "Insufficient Storage", // RFC 4918
    // RFC 5842 §7.2; the fan-out proxy's answer to a request that loops.
    508 "Loop Detected",
    510 "Not Extended", // RFC 2774
    511 "Network Authentication Required", // RFC 6585
}
