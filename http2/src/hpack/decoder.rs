//! The field block decoder (RFC 7541 §3, §6).

use super::huffman::{decode_into, max_decoded_len};
use super::table::{static_entry, DynamicTable, ENTRY_OVERHEAD, STATIC_LEN};
use super::{integer, HpackError};

/// The dynamic table size both ends assume until SETTINGS say otherwise
/// (RFC 9113 §6.5.2).
pub const DEFAULT_TABLE_SIZE: usize = 4096;

/// The header list size limit of a new [`Decoder`]: 64 KiB, as
/// name + value + 32 per field. A server announces the same value in
/// SETTINGS_MAX_HEADER_LIST_SIZE.
pub const DEFAULT_MAX_HEADER_LIST_SIZE: usize = 64 * 1024;

/// Huffman strings up to this decoded size are decoded on the stack.
const STACK_SCRATCH: usize = 256;

/// A heap scratch buffer larger than this is freed after its block.
const SCRATCH_KEEP: usize = 4096;

/// A string literal as it sits in the block.
#[derive(Clone, Copy)]
struct Raw<'b> {
    huffman: bool,
    bytes: &'b [u8],
}

impl Raw<'_> {
    /// Scratch bytes its decoded form needs.
    fn scratch(&self) -> usize {
        if self.huffman {
            max_decoded_len(self.bytes.len())
        } else {
            0
        }
    }
}

/// Where a literal's name comes from.
#[derive(Clone, Copy)]
enum Name<'b> {
    Static(&'static [u8]),
    /// A dynamic entry's name, copied to scratch since an insert may
    /// evict it (§4.4).
    Dynamic(usize),
    Literal(Raw<'b>),
}

/// The decoding side of one connection's HPACK context.
#[derive(Debug)]
pub struct Decoder {
    table: DynamicTable,
    /// The SETTINGS_HEADER_TABLE_SIZE this end announced and the peer
    /// acknowledged: no size update may exceed it.
    max_table_size: usize,
    /// A lower limit took effect: the next block must start with an update.
    update_required: bool,
    max_list_size: usize,
    /// For Huffman strings too long for the stack buffer.
    scratch: Vec<u8>,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

impl Decoder {
    /// A decoder with the protocol's initial table size (4096) and
    /// [`DEFAULT_MAX_HEADER_LIST_SIZE`]. It allocates nothing.
    pub fn new() -> Decoder {
        Decoder {
            table: DynamicTable::new(DEFAULT_TABLE_SIZE),
            max_table_size: DEFAULT_TABLE_SIZE,
            update_required: false,
            max_list_size: DEFAULT_MAX_HEADER_LIST_SIZE,
            scratch: Vec::new(),
        }
    }

    /// Sets the header list size limit (name + value + 32 per field).
    pub fn set_max_header_list_size(&mut self, size: usize) {
        self.max_list_size = size;
    }

    /// Applies the SETTINGS_HEADER_TABLE_SIZE this end announced, once
    /// the peer has acknowledged it. A value lower than the table's
    /// current maximum obliges the peer to start its next block with a
    /// size update (RFC 7541 §4.2); a block without one is refused.
    pub fn set_max_table_size(&mut self, size: usize) {
        if size < self.table.max_size() {
            self.update_required = true;
        }
        self.max_table_size = size;
    }

    /// The dynamic table, for inspection.
    pub fn table(&self) -> &DynamicTable {
        &self.table
    }

    /// Bytes this decoder keeps allocated: table and scratch capacity.
    pub fn allocated(&self) -> usize {
        self.table.allocated() + self.scratch.capacity()
    }

    /// Frees the scratch buffer, for a connection that goes idle.
    pub fn release_scratch(&mut self) {
        self.scratch = Vec::new();
    }

    /// Decodes one whole field block (the fragments of HEADERS and its
    /// CONTINUATIONs, joined), calling `field(name, value, sensitive)`
    /// for each field in order. `sensitive` marks a field sent as
    /// "never indexed" (§6.2.3), which a proxy must forward as such.
    ///
    /// # Errors
    ///
    /// Any [`HpackError`]. On [`HpackError::HeaderListTooLarge`] the
    /// callback saw only the fields within the limit, and the whole block
    /// was still read so that the dynamic table stays usable. After any
    /// other error the HPACK context is lost and the connection must end.
    pub fn decode<F>(&mut self, block: &[u8], mut field: F) -> Result<(), HpackError>
    where
        F: FnMut(&[u8], &[u8], bool),
    {
        let mut pos = self.size_updates(block)?;
        let mut list_size = 0usize;
        let mut over = false;
        let mut stack = [0u8; STACK_SCRATCH];
        while let Some(&first) = block.get(pos) {
            if first & 0x80 != 0 {
                // §6.1: indexed field.
                let (index, n) = integer::decode(&block[pos..], 7)?;
                pos += n;
                let (name, value) = self.lookup(index as usize)?;
                list_size += name.len() + value.len() + ENTRY_OVERHEAD;
                over |= list_size > self.max_list_size;
                if !over {
                    field(name, value, false);
                }
                continue;
            }
            if first & 0xe0 == 0x20 {
                return Err(HpackError::SizeUpdateNotAtStart);
            }
            // §6.2: literal, with incremental indexing (01), without (0000)
            // or never indexed (0001).
            let (prefix, indexing, sensitive) = match first {
                f if f & 0x40 != 0 => (6, true, false),
                f => (4, false, f & 0x10 != 0),
            };
            let (index, n) = integer::decode(&block[pos..], prefix)?;
            pos += n;
            let name = match index as usize {
                0 => Name::Literal(string(block, &mut pos)?),
                i if i <= STATIC_LEN => {
                    Name::Static(static_entry(i).ok_or(HpackError::InvalidIndex)?.0)
                }
                i => {
                    self.lookup(i)?;
                    Name::Dynamic(i - STATIC_LEN)
                }
            };
            let value = string(block, &mut pos)?;
            if over && !indexing {
                continue;
            }
            let name_need = match name {
                Name::Static(_) => 0,
                Name::Dynamic(i) => self.table.get(i).map_or(0, |(n, _)| n.len()),
                Name::Literal(raw) => raw.scratch(),
            };
            let need = name_need + value.scratch();
            let buf: &mut [u8] = if need <= STACK_SCRATCH {
                &mut stack[..need]
            } else {
                self.scratch.clear();
                self.scratch.resize(need, 0);
                &mut self.scratch[..]
            };
            let (name_buf, value_buf) = buf.split_at_mut(name_need);
            let name: &[u8] = match name {
                Name::Static(s) => s,
                Name::Dynamic(i) => {
                    if let Some((n, _)) = self.table.get(i) {
                        name_buf.copy_from_slice(n);
                    }
                    name_buf
                }
                Name::Literal(raw) if raw.huffman => {
                    let len = decode_into(raw.bytes, name_buf)?;
                    &name_buf[..len]
                }
                Name::Literal(raw) => raw.bytes,
            };
            let value: &[u8] = match value.huffman {
                true => {
                    let len = decode_into(value.bytes, value_buf)?;
                    &value_buf[..len]
                }
                false => value.bytes,
            };
            if indexing {
                self.table.insert(name, value);
            }
            if !over {
                list_size += name.len() + value.len() + ENTRY_OVERHEAD;
                over = list_size > self.max_list_size;
                if !over {
                    field(name, value, sensitive);
                }
            }
        }
        if self.scratch.capacity() > SCRATCH_KEEP {
            self.release_scratch();
        }
        match over {
            true => Err(HpackError::HeaderListTooLarge),
            false => Ok(()),
        }
    }

    /// Applies the size updates at the start of a block (§4.2, §6.3),
    /// returning where the fields start.
    fn size_updates(&mut self, block: &[u8]) -> Result<usize, HpackError> {
        let mut pos = 0;
        let mut count = 0;
        while let Some(&first) = block.get(pos) {
            if first & 0xe0 != 0x20 {
                break;
            }
            count += 1;
            if count > 2 {
                return Err(HpackError::TooManySizeUpdates);
            }
            let (size, n) = integer::decode(&block[pos..], 5)?;
            pos += n;
            if size as usize > self.max_table_size {
                return Err(HpackError::SizeUpdateTooLarge);
            }
            self.table.set_max_size(size as usize);
            self.update_required = false;
        }
        if self.update_required {
            return Err(HpackError::MissingSizeUpdate);
        }
        Ok(pos)
    }

    /// The field at `index` of the joined static and dynamic tables.
    fn lookup(&self, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
        if index <= STATIC_LEN {
            return static_entry(index).ok_or(HpackError::InvalidIndex);
        }
        self.table
            .get(index - STATIC_LEN)
            .ok_or(HpackError::InvalidIndex)
    }
}

/// Reads a string literal (§5.2) at `*pos`, advancing past it.
fn string<'b>(block: &'b [u8], pos: &mut usize) -> Result<Raw<'b>, HpackError> {
    let rest = block.get(*pos..).ok_or(HpackError::Truncated)?;
    let huffman = rest.first().ok_or(HpackError::Truncated)? & 0x80 != 0;
    let (len, n) = integer::decode(rest, 7)?;
    let bytes = rest.get(n..n + len as usize).ok_or(HpackError::Truncated)?;
    *pos += n + len as usize;
    Ok(Raw { huffman, bytes })
}
