//! Close codes (RFC 6455 §7.4) and which of them a peer may send.

/// A close frame's status code (RFC 6455 §7.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CloseCode(pub u16);

impl CloseCode {
    /// 1000: the purpose of the connection was fulfilled.
    pub const NORMAL: CloseCode = CloseCode(1000);
    /// 1001: going away (the server is stopping, or the peer timed out).
    pub const GOING_AWAY: CloseCode = CloseCode(1001);
    /// 1002: a protocol error.
    pub const PROTOCOL: CloseCode = CloseCode(1002);
    /// 1003: a data type the endpoint cannot accept.
    pub const UNSUPPORTED: CloseCode = CloseCode(1003);
    /// 1005: no code was given (never sent on the wire).
    pub const NO_STATUS: CloseCode = CloseCode(1005);
    /// 1006: the connection ended without a close frame (never sent).
    pub const ABNORMAL: CloseCode = CloseCode(1006);
    /// 1007: data inconsistent with its type (text that is not UTF-8).
    pub const INVALID_DATA: CloseCode = CloseCode(1007);
    /// 1008: a policy violation (a reader too slow for its send queue).
    pub const POLICY: CloseCode = CloseCode(1008);
    /// 1009: a message or frame too big to process.
    pub const TOO_BIG: CloseCode = CloseCode(1009);
    /// 1011: an unexpected condition on the server (its handler failed).
    pub const INTERNAL: CloseCode = CloseCode(1011);
}

/// Whether a peer may send `code` in a close frame: the codes RFC 6455
/// defines for use on the wire and IANA's registered 1012–1014, and the
/// ranges for libraries (3000–3999) and applications (4000–4999). 1004,
/// 1005, 1006 and 1015 are reserved or must never be sent; anything below
/// 1000, 1016–2999 and from 5000 up is not defined.
pub fn valid_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}
