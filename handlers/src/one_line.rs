//! [`OneLine`]: a value written so that it stays on one log line.
//!
//! Error messages and URLs may carry what a client sent, decoded: a
//! `%0D%0A` in a path parameter becomes a CR LF in the message of an
//! error that names it. Written as is, it would end the log line and
//! start one the client wrote (log injection).

use std::fmt::{self, Write};

/// Displays `T` with its control characters and Unicode line breaks
/// escaped as `char::escape_default` writes them (`\r`, `\n`,
/// `\u{0}`, `\u{2028}`); the rest as is.
pub(crate) struct OneLine<T>(pub(crate) T);

impl<T: fmt::Display> fmt::Display for OneLine<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(Escaping(f), "{}", self.0)
    }
}

/// Passes text on to the formatter, escaping what would break the line.
struct Escaping<'a, 'b>(&'a mut fmt::Formatter<'b>);

impl Write for Escaping<'_, '_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let mut rest = text;
        while let Some(at) = rest.find(breaks_line) {
            self.0.write_str(&rest[..at])?;
            let c = rest[at..].chars().next().unwrap_or_default();
            write!(self.0, "{}", c.escape_default())?;
            rest = &rest[at + c.len_utf8()..];
        }
        self.0.write_str(rest)
    }
}

fn breaks_line(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')
}

#[cfg(test)]
mod tests {
    use super::OneLine;

    #[test]
    fn escapes_what_breaks_a_line_and_keeps_the_rest() {
        let cases = [
            ("plain text: café", "plain text: café"),
            ("a\r\nX: y", "a\\r\\nX: y"),
            ("nul\0", "nul\\u{0}"),
            ("\u{85}\u{2028}\t", "\\u{85}\\u{2028}\\t"),
            ("", ""),
        ];
        for (text, shown) in cases {
            assert_eq!(OneLine(text).to_string(), shown, "{text:?}");
        }
    }
}
