//! `Content-Type` by file extension: a small built-in table of the types
//! a static site serves, anything else `application/octet-stream`.

/// What a file of unknown type is sent as: browsers then download it
/// rather than guess (and `X-Content-Type-Options: nosniff` keeps them
/// from guessing).
pub(crate) const DEFAULT: &str = "application/octet-stream";

/// Extension (lowercase) to media type. Text types say UTF-8, which is
/// what a static site is written in today.
const TABLE: &[(&str, &str)] = &[
    ("html", "text/html; charset=utf-8"),
    ("htm", "text/html; charset=utf-8"),
    ("css", "text/css; charset=utf-8"),
    ("js", "text/javascript; charset=utf-8"),
    ("mjs", "text/javascript; charset=utf-8"),
    ("json", "application/json"),
    ("txt", "text/plain; charset=utf-8"),
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("svg", "image/svg+xml"),
    ("wasm", "application/wasm"),
    ("pdf", "application/pdf"),
];

/// The media type of a file named `name`, by its extension, compared
/// without regard to case.
pub(crate) fn content_type(name: &[u8]) -> &'static str {
    let Some(dot) = name.iter().rposition(|&b| b == b'.') else {
        return DEFAULT;
    };
    let ext = &name[dot + 1..];
    TABLE
        .iter()
        .find(|(e, _)| e.as_bytes().eq_ignore_ascii_case(ext))
        .map_or(DEFAULT, |(_, t)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_extension() {
        assert_eq!(content_type(b"a.HTML"), "text/html; charset=utf-8");
        assert_eq!(content_type(b"x.tar.wasm"), "application/wasm");
        assert_eq!(content_type(b"noext"), DEFAULT);
        assert_eq!(content_type(b"a.unknown"), DEFAULT);
    }
}
