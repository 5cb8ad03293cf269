//! The Huffman code of RFC 7541 §5.2 and Appendix B.
//!
//! Decoding walks the code four bits at a time through a state table,
//! as nghttp2 does: each state is an inner node of the code tree (256 of
//! them), and each of its 16 transitions says which node four more bits
//! lead to and which symbol, if any, they complete. Every code is at
//! least five bits long, so four bits complete at most one symbol. The
//! table (16 KiB of read-only data) is built by a `const fn` at compile
//! time: nothing is computed or allocated at run time.
//!
//! Decoding is strict (§5.2): EOS inside the string is an error, and so
//! is padding longer than 7 bits or padding that is not all ones.

use super::tables::HUFFMAN_CODES;
use super::HpackError;

/// The codes by symbol, for the encoder: a `static` so that it is one
/// table in the binary, not a copy per use.
static CODES: [(u32, u8); 257] = HUFFMAN_CODES;

/// One transition, four bits read in a state, packed in a `u32` so that
/// one load gives everything: the symbol completed in bits 0-7, the state
/// reached in bits 8-15, `EMIT` and `FAIL` above.
type Step = u32;

const EMIT: u32 = 1 << 16;
const FAIL: u32 = 1 << 17;
const LEAF: u16 = 0x8000;
const EOS: u16 = 256;

struct Machine {
    steps: [[Step; 16]; 256],
    /// Whether the input may end in this state: the bits read since the
    /// last symbol are all ones and at most seven (§5.2's padding).
    accept: [bool; 256],
}

const fn build() -> Machine {
    // The code tree: children of each inner node, a leaf marked by LEAF.
    let mut children = [[0u16; 2]; 256];
    let mut depth = [0u8; 256];
    let mut ones = [false; 256];
    ones[0] = true;
    let mut nodes = 1;
    let mut symbol = 0;
    while symbol < 257 {
        let (code, len) = HUFFMAN_CODES[symbol];
        let mut node = 0;
        let mut bit_index = len as u32;
        while bit_index > 1 {
            bit_index -= 1;
            let bit = ((code >> bit_index) & 1) as usize;
            if children[node][bit] == 0 {
                children[node][bit] = nodes as u16;
                depth[nodes] = depth[node] + 1;
                ones[nodes] = ones[node] && bit == 1;
                nodes += 1;
            }
            node = children[node][bit] as usize;
        }
        children[node][(code & 1) as usize] = LEAF | symbol as u16;
        symbol += 1;
    }
    assert!(
        nodes == 256,
        "a complete code of 257 symbols has 256 inner nodes"
    );

    let mut steps = [[0; 16]; 256];
    let mut accept = [false; 256];
    let mut state = 0;
    while state < 256 {
        accept[state] = ones[state] && depth[state] <= 7;
        let mut nibble = 0;
        while nibble < 16 {
            let mut node = state;
            let mut step = 0;
            let mut k = 4;
            while k > 0 {
                k -= 1;
                let child = children[node][(nibble >> k) & 1];
                if child & LEAF == 0 {
                    node = child as usize;
                } else if child & !LEAF == EOS {
                    // The rest of the input is void: restart at the root.
                    step = FAIL;
                    node = 0;
                    break;
                } else {
                    step = EMIT | (child & 0xff) as u32;
                    node = 0;
                }
            }
            steps[state][nibble] = step | (node as u32) << 8;
            nibble += 1;
        }
        state += 1;
    }
    Machine { steps, accept }
}

static MACHINE: Machine = build();

/// The scratch [`decode_into`] needs for `encoded_len` Huffman bytes:
/// every symbol takes at least five bits, and one more byte lets the
/// decoder store each step's symbol before it knows whether it counts.
pub(super) fn max_decoded_len(encoded_len: usize) -> usize {
    encoded_len * 8 / 5 + 1
}

/// Decodes `src` into the start of `out`, returning the decoded length.
/// `out` must hold [`max_decoded_len`] bytes; a shorter one gives an
/// error, never a panic.
///
/// # Errors
///
/// [`HpackError::Huffman`] for EOS in the string or invalid padding.
pub(super) fn decode_into(src: &[u8], out: &mut [u8]) -> Result<usize, HpackError> {
    if out.len() < max_decoded_len(src.len()) {
        return Err(HpackError::Huffman);
    }
    let steps = &MACHINE.steps;
    let mut state = 0usize;
    let mut len = 0;
    let mut seen = 0;
    // Branch-free but for the loop: each nibble's symbol is stored, and
    // counted only when the step completes one. `len` stays below
    // `out.len()` since each counted symbol took five bits or more.
    for &byte in src {
        let high = steps[state][(byte >> 4) as usize];
        if let Some(slot) = out.get_mut(len) {
            *slot = high as u8;
        }
        len += (high >> 16 & 1) as usize;
        let low = steps[(high >> 8 & 0xff) as usize][(byte & 0xf) as usize];
        if let Some(slot) = out.get_mut(len) {
            *slot = low as u8;
        }
        len += (low >> 16 & 1) as usize;
        state = (low >> 8 & 0xff) as usize;
        seen |= high | low;
    }
    if seen & FAIL != 0 || !MACHINE.accept[state] {
        return Err(HpackError::Huffman);
    }
    Ok(len)
}

/// Decodes `src`, appending the result to `dst`.
///
/// # Errors
///
/// [`HpackError::Huffman`] for EOS in the string or invalid padding.
pub fn decode(src: &[u8], dst: &mut Vec<u8>) -> Result<(), HpackError> {
    let start = dst.len();
    dst.resize(start + max_decoded_len(src.len()), 0);
    let result = decode_into(src, &mut dst[start..]);
    let len = *result.as_ref().unwrap_or(&0);
    // `decode_into` wrote one byte past the result.
    dst.truncate(start + len);
    result.map(drop)
}

/// The length of `src` once Huffman-encoded.
pub fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src.iter().map(|&b| CODES[b as usize].1 as usize).sum();
    bits.div_ceil(8)
}

/// Appends the Huffman encoding of `src` to `dst`, padded with ones.
pub fn encode(src: &[u8], dst: &mut Vec<u8>) {
    dst.reserve(src.len() * 30 / 8 + 1);
    // Whole 32-bit words leave the accumulator at once: a code is at most
    // 30 bits, so fewer than 32 pending bits plus one code fit in 64.
    let mut acc: u64 = 0;
    let mut bits = 0u32;
    for &b in src {
        let (code, len) = CODES[b as usize];
        acc = (acc << len) | code as u64;
        bits += len as u32;
        if bits >= 32 {
            bits -= 32;
            dst.extend_from_slice(&((acc >> bits) as u32).to_be_bytes());
        }
    }
    while bits >= 8 {
        bits -= 8;
        dst.push((acc >> bits) as u8);
    }
    if bits > 0 {
        dst.push(((acc << (8 - bits)) as u8) | (0xff >> bits));
    }
}
