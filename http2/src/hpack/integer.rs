//! Integers with an N-bit prefix (RFC 7541 §5.1).

use super::HpackError;

/// Reads an integer whose first byte is `input[0]`, of which the low
/// `prefix` bits (1 to 8) belong to the integer. Returns the value and
/// the number of bytes used.
///
/// # Errors
///
/// [`HpackError::Truncated`] if the input ends inside the integer,
/// [`HpackError::IntegerOverflow`] if the value exceeds `u32` or the
/// encoding runs past the five continuation bytes a `u32` can need
/// (an over-long encoding of zeros that never ends is refused too).
pub(super) fn decode(input: &[u8], prefix: u8) -> Result<(u32, usize), HpackError> {
    let mask = (1u32 << prefix) - 1;
    let Some(&first) = input.first() else {
        return Err(HpackError::Truncated);
    };
    let value = first as u32 & mask;
    if value < mask {
        return Ok((value, 1));
    }
    let mut value = value as u64;
    let mut shift = 0;
    for (i, &byte) in input[1..].iter().enumerate() {
        value += ((byte & 0x7f) as u64) << shift;
        if value > u32::MAX as u64 {
            return Err(HpackError::IntegerOverflow);
        }
        if byte & 0x80 == 0 {
            return Ok((value as u32, i + 2));
        }
        shift += 7;
        if shift > 28 {
            return Err(HpackError::IntegerOverflow);
        }
    }
    Err(HpackError::Truncated)
}

/// Appends `value` with a `prefix`-bit prefix; `high` holds the bits of
/// the first byte above the prefix (the representation's pattern).
pub(super) fn encode(dst: &mut Vec<u8>, value: u32, prefix: u8, high: u8) {
    let mask = (1u32 << prefix) - 1;
    if value < mask {
        dst.push(high | value as u8);
        return;
    }
    dst.push(high | mask as u8);
    let mut rest = value - mask;
    while rest >= 0x80 {
        dst.push(rest as u8 | 0x80);
        rest >>= 7;
    }
    dst.push(rest as u8);
}
