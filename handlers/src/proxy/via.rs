//! Loop detection through `Via`.
//!
//! A proxy whose upstream is itself (`--upstream` its own address), or
//! that reaches itself through other proxies, gets every sub-request back
//! as a new client request; each fans out again, until the deadline or
//! the descriptors run out. RFC 9110 §7.6.3 makes `Via` the record of the
//! hops a request took, and lets a proxy name itself there with a
//! pseudonym. This proxy's element is `1.1 NAME` with its own
//! [`Config::pseudonym`](super::Config::pseudonym), so a request whose
//! `Via` already lists NAME as a recipient has been here: it is answered
//! 508 Loop Detected at once (RFC 5842 §7.2 defines 508 as a server ending
//! an operation because it found an infinite loop, which is what this is,
//! and unlike a 502 or 503 it tells the operator which fault to look for),
//! and each core logs it at WARN at most once a second.
//!
//! Only a request with a `Via` field is looked at, so a client's request
//! usually costs one pass over its field names.

use std::time::Instant;

use crate::log_limit::{LeftOut, LogLimit};

/// This proxy's `Via` identity, one per core (clones of one name).
#[derive(Debug)]
pub(crate) struct Via {
    /// `1.1 NAME`, the element appended to every sub-request's `Via`.
    element: Box<[u8]>,
    /// The rate limit of the core's loop warnings.
    log: LogLimit,
}

impl Via {
    pub(crate) fn new(pseudonym: &str) -> Self {
        Self {
            element: format!("1.1 {pseudonym}").into_bytes().into(),
            log: LogLimit::default(),
        }
    }

    /// The element the proxy appends to `Via`: `1.1 NAME`.
    pub(crate) fn element(&self) -> &[u8] {
        &self.element
    }

    /// The pseudonym NAME.
    pub(crate) fn name(&self) -> &[u8] {
        self.element.get(4..).unwrap_or_default()
    }

    /// Whether a request with `headers` has passed through this proxy
    /// before: a `Via` field lists its pseudonym as a recipient.
    pub(crate) fn seen_in(&self, headers: &[httparse::Header<'_>]) -> bool {
        headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case("via"))
            .any(|h| lists_recipient(h.value, self.name()))
    }

    /// Logs a looping request at WARN, unless a line was written less than
    /// a second ago (then it is only counted, and the next line says how
    /// many were left out).
    pub(crate) fn warn_loop(&self, now: Instant, method: &str, target: &str) {
        if let Some(left_out) = self.log.admit(now) {
            let left_out = LeftOut {
                count: left_out,
                what: ("loop", "loops"),
            };
            tracing::warn!(
                method,
                target,
                "fanout: loop detected: the request already passed through this proxy \
                 (its Via lists {}); answered 508. Is an upstream this proxy itself, or a \
                 proxy that forwards back to it?{left_out}",
                String::from_utf8_lossy(self.name())
            );
        }
    }
}

/// Whether the `Via` field value `value` lists `name` as the recipient
/// (`received-by`) of one of its elements:
///
/// ```text
/// Via = #( received-protocol RWS received-by [ RWS comment ] )
/// ```
///
/// Elements are split at commas outside comments (a comment may hold
/// commas, nested parentheses and `\`-escaped bytes); the second word of
/// each is compared with `name`, exactly. Anything malformed is skipped:
/// a false negative only lets a loop run one more round, a false positive
/// would refuse a good request.
pub(crate) fn lists_recipient(value: &[u8], name: &[u8]) -> bool {
    let is_space = |b: u8| b == b' ' || b == b'\t';
    let ends_word = |b: u8| is_space(b) || b == b',' || b == b'(';
    let len = value.len();
    let mut i = 0;
    loop {
        while i < len && (is_space(value[i]) || value[i] == b',') {
            i += 1;
        }
        // An escape at the very end steps one past it.
        if i >= len {
            return false;
        }
        // The protocol (`1.1`, `HTTP/1.0`), then the recipient after
        // whitespace.
        while i < len && !ends_word(value[i]) {
            i += 1;
        }
        let gap = i;
        while i < len && is_space(value[i]) {
            i += 1;
        }
        if i > gap {
            let start = i;
            while i < len && !ends_word(value[i]) {
                i += 1;
            }
            if i > start && &value[start..i] == name {
                return true;
            }
        }
        // The rest of the element: up to a comma outside any comment.
        let mut depth = 0usize;
        while i < len {
            match value[i] {
                b'\\' if depth > 0 => i += 1,
                b'(' => depth += 1,
                b')' => depth = depth.saturating_sub(1),
                b',' if depth == 0 => break,
                _ => {}
            }
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAME: &[u8] = b"percore-00ff";

    fn lists(value: &str) -> bool {
        lists_recipient(value.as_bytes(), NAME)
    }

    #[test]
    fn finds_the_recipient_in_any_element() {
        assert!(lists("1.1 percore-00ff"));
        assert!(lists("1.0 edge, 1.1 percore-00ff"));
        assert!(lists("HTTP/1.1 percore-00ff (percore)"));
        assert!(lists("1.1 a (x, y), 1.1\tpercore-00ff, 1.1 b"));
        assert!(lists(" ,, 1.1 percore-00ff ,"));
        assert!(lists("1.1 a (nested (b, c) \\) d), 1.1 percore-00ff"));
    }

    #[test]
    fn anything_else_is_not_us() {
        assert!(!lists(""));
        assert!(!lists("1.1 percore"));
        assert!(!lists("1.1 percore-00ffee"));
        assert!(!lists("1.1 Percore-00FF"));
        assert!(!lists("1.1 xpercore-00ff"));
        // The protocol, a comment or a stray third word is not a recipient.
        assert!(!lists("percore-00ff edge"));
        assert!(!lists("1.1 edge (percore-00ff)"));
        assert!(!lists("1.1 edge (a, 1.1 percore-00ff)"));
        assert!(!lists("1.1 edge percore-00ff"));
        assert!(!lists("1.1"));
        assert!(!lists("((((,,,))"));
        // A comment cut after its escape byte ends the value, no more.
        assert!(!lists("1.1 a (b\\"));
        assert!(!lists("1.1 (percore-00ff)"));
    }

    /// Every split of a value and every byte value in it: no panic, and
    /// only a whole element with our name matches.
    #[test]
    fn shotgun() {
        let value = b"1.0 a (c\\), d), 1.1 percore-00ff";
        for cut in 0..=value.len() {
            let found = lists_recipient(&value[..cut], NAME);
            assert_eq!(found, cut == value.len(), "cut at {cut}");
        }
        let mut bytes = value.to_vec();
        for at in 0..bytes.len() {
            let kept = bytes[at];
            for b in 0..=255u8 {
                bytes[at] = b;
                let _ = lists_recipient(&bytes, NAME);
            }
            bytes[at] = kept;
        }
    }

    #[test]
    fn element_and_name() {
        let via = Via::new("percore-00ff");
        assert_eq!(via.element(), b"1.1 percore-00ff");
        assert_eq!(via.name(), NAME);
    }
}
