//! HPACK, the header compression of HTTP/2 (RFC 7541).
//!
//! - [`Decoder`] reads a field block and hands each field to a callback,
//!   keeping the connection's [`DynamicTable`]. It enforces the header
//!   list size limit as it goes, and decodes Huffman strings into a stack
//!   buffer when short, so a typical request allocates nothing.
//! - [`Encoder`] writes a server's answers. It never inserts into the
//!   dynamic table, so it keeps no table: whole fields the static table
//!   holds (`:status 200`) take one byte, other fields a literal with a
//!   static name index where one exists, Huffman-coded when shorter.
//! - [`huffman`] is the code of Appendix B, decoded by a table-driven
//!   machine built at compile time.
//!
//! Every error of a field block is a connection error of type
//! COMPRESSION_ERROR ([`HpackError::error_code`]), except
//! [`HpackError::HeaderListTooLarge`]: the decoder reads the rest of the
//! block to keep its table in step with the peer's encoder, so the
//! connection can go on and the request be answered with 431.

mod decoder;
mod encoder;
pub mod huffman;
mod integer;
mod table;
mod tables;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_bad;

use std::fmt;

pub use decoder::{Decoder, DEFAULT_MAX_HEADER_LIST_SIZE, DEFAULT_TABLE_SIZE};
pub use encoder::{encode_field, Block, Encoder};
pub use table::{DynamicTable, ENTRY_OVERHEAD, STATIC_LEN};

use crate::frame::ErrorCode;

/// Why a field block could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HpackError {
    /// The block ends inside an integer or a string.
    Truncated,
    /// An integer exceeds `u32`, or its encoding never ends (§5.1).
    IntegerOverflow,
    /// A Huffman string holds EOS or invalid padding (§5.2).
    Huffman,
    /// Index 0, or an index past the end of both tables (§2.3.3, §6.1).
    InvalidIndex,
    /// A dynamic table size update above the limit this end announced
    /// with SETTINGS_HEADER_TABLE_SIZE (§6.3).
    SizeUpdateTooLarge,
    /// A dynamic table size update after the first field (§4.2).
    SizeUpdateNotAtStart,
    /// More than two size updates at the start of a block (§4.2).
    TooManySizeUpdates,
    /// The block does not start with the size update that a lower
    /// SETTINGS_HEADER_TABLE_SIZE requires (§4.2).
    MissingSizeUpdate,
    /// The decoded fields exceed the header list size limit
    /// (SETTINGS_MAX_HEADER_LIST_SIZE): not a compression error, the
    /// table is intact; a server answers 431.
    HeaderListTooLarge,
}

impl HpackError {
    /// The connection error code this error calls for, or `None` for
    /// [`HpackError::HeaderListTooLarge`], which only ends the request.
    pub fn error_code(self) -> Option<ErrorCode> {
        match self {
            HpackError::HeaderListTooLarge => None,
            _ => Some(ErrorCode::CompressionError),
        }
    }
}

impl fmt::Display for HpackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HpackError::Truncated => "field block truncated",
            HpackError::IntegerOverflow => "HPACK integer overflow",
            HpackError::Huffman => "invalid Huffman string",
            HpackError::InvalidIndex => "invalid HPACK index",
            HpackError::SizeUpdateTooLarge => "table size update above the announced limit",
            HpackError::SizeUpdateNotAtStart => "table size update after a field",
            HpackError::TooManySizeUpdates => "more than two table size updates",
            HpackError::MissingSizeUpdate => "required table size update missing",
            HpackError::HeaderListTooLarge => "header list too large",
        })
    }
}

impl std::error::Error for HpackError {}
