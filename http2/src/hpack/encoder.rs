//! The field block encoder, made for a server's answers.
//!
//! It never inserts into the dynamic table, so it keeps no table and a
//! connection pays no memory for it; a typical answer (`:status`,
//! `content-length`, `date`, `content-type`) costs one byte for the status
//! and a static name index plus the value for each other field. The peer's
//! decoder still tracks a maximum table size for this encoder (§4.2):
//! when the peer lowers SETTINGS_HEADER_TABLE_SIZE below it, the next
//! block starts with a size update to 0, after which no lower setting
//! can ever require another.

use super::table::{static_field, static_name};
use super::{huffman, integer, DEFAULT_TABLE_SIZE};

/// The encoding side of one connection's HPACK context: 8 bytes, no heap.
#[derive(Clone, Copy, Debug)]
pub struct Encoder {
    /// The maximum size the peer's decoder assumes for our table.
    assumed: u32,
    /// A size update owed at the start of the next block.
    pending_update: bool,
}

impl Default for Encoder {
    fn default() -> Self {
        Encoder::new()
    }
}

impl Encoder {
    /// An encoder for a new connection (both ends assume 4096).
    pub fn new() -> Encoder {
        Encoder {
            assumed: DEFAULT_TABLE_SIZE as u32,
            pending_update: false,
        }
    }

    /// Takes note of the peer's SETTINGS_HEADER_TABLE_SIZE, as received.
    pub fn set_peer_table_size(&mut self, size: u32) {
        if size < self.assumed {
            self.assumed = 0;
            self.pending_update = true;
        }
    }

    /// Starts a field block appended to `dst`, writing the size update
    /// owed, if any. Write its fields with the [`Block`] returned.
    pub fn block<'a>(&mut self, dst: &'a mut Vec<u8>) -> Block<'a> {
        if self.pending_update {
            self.pending_update = false;
            integer::encode(dst, self.assumed, 5, 0x20);
        }
        Block { dst }
    }
}

/// The fields of one block being written; see [`Encoder::block`].
#[derive(Debug)]
pub struct Block<'a> {
    dst: &'a mut Vec<u8>,
}

impl Block<'_> {
    /// Writes `:status`: one byte for the codes the static table holds
    /// (200, 204, 206, 304, 400, 404, 500), a literal with the static name
    /// otherwise.
    pub fn status(&mut self, status: u16) {
        let index = match status {
            200 => 8,
            204 => 9,
            206 => 10,
            304 => 11,
            400 => 12,
            404 => 13,
            500 => 14,
            _ => {
                let mut digits = [0u8; 5];
                let mut at = digits.len();
                let mut rest = status;
                loop {
                    at -= 1;
                    digits[at] = b'0' + (rest % 10) as u8;
                    rest /= 10;
                    if rest == 0 {
                        break;
                    }
                }
                integer::encode(self.dst, 8, 4, 0x00);
                self.string(&digits[at..]);
                return;
            }
        };
        self.dst.push(0x80 | index);
    }

    /// Writes one field. `name` must be lowercase (RFC 9113 §8.2.1).
    /// A `sensitive` field is sent "never indexed" (§6.2.3), so that no
    /// intermediary compresses it; otherwise a field the static table
    /// holds whole is indexed, and the rest are literals without indexing
    /// with the static name index when there is one.
    pub fn field(&mut self, name: &[u8], value: &[u8], sensitive: bool) {
        let high = if sensitive { 0x10 } else { 0x00 };
        match static_name(name) {
            Some(name_index) => {
                if !sensitive {
                    if let Some(index) = static_field(name_index, value) {
                        self.dst.push(0x80 | index as u8);
                        return;
                    }
                }
                integer::encode(self.dst, name_index as u32, 4, high);
            }
            None => {
                self.dst.push(high);
                self.string(name);
            }
        }
        self.string(value);
    }

    /// Appends a field written earlier by [`encode_field`]. Since this
    /// encoder never indexes, a field's bytes do not depend on the
    /// blocks before it: a server can encode its fixed fields once
    /// (`server`, `content-type`, `date` once a second) and copy them.
    pub fn encoded(&mut self, field: &[u8]) {
        self.dst.extend_from_slice(field);
    }

    /// Writes a string literal, Huffman-coded only when that is shorter.
    fn string(&mut self, s: &[u8]) {
        string(self.dst, s);
    }
}

/// Appends one field's representation to `dst`, outside any block, for
/// [`Block::encoded`]. The bytes are those [`Block::field`] writes.
pub fn encode_field(dst: &mut Vec<u8>, name: &[u8], value: &[u8], sensitive: bool) {
    Block { dst }.field(name, value, sensitive);
}

/// Appends a string literal (§5.2), Huffman-coded only when shorter.
fn string(dst: &mut Vec<u8>, s: &[u8]) {
    if s.len() < 0x7f {
        // One length byte either way: code first, and fall back to the
        // plain bytes when the code is not shorter (one pass, not two).
        let at = dst.len();
        dst.push(0);
        huffman::encode(s, dst);
        let coded = dst.len() - at - 1;
        if coded < s.len() {
            dst[at] = 0x80 | coded as u8;
        } else {
            dst.truncate(at);
            dst.push(s.len() as u8);
            dst.extend_from_slice(s);
        }
        return;
    }
    let coded = huffman::encoded_len(s);
    if coded < s.len() {
        integer::encode(dst, coded as u32, 7, 0x80);
        huffman::encode(s, dst);
    } else {
        integer::encode(dst, s.len() as u32, 7, 0x00);
        dst.extend_from_slice(s);
    }
}
