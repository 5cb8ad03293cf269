//! Unit tests of the client's pure parts: the response parser's in
//! `parse`.

mod parse;
