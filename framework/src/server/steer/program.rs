//! The classic BPF program that steers a group's new connections: a
//! weighted random draw over the group's sockets.
//!
//! ```text
//!     ld  rand                  ; A = a random u32 (SKF_AD_RANDOM)
//!     jgt A, L0 ? skip : next   ; A <= L0: socket 0
//!     ret 0
//!     jgt A, L1 ? skip : next   ; L0 < A <= L1: socket 1
//!     ret 1
//!     ...
//!     ret n-1                   ; the rest: the last socket
//! ```
//!
//! `Lk + 1` is the cumulative share of sockets 0 to k, scaled to 2^32,
//! so socket k is drawn with its share's probability (the comparisons
//! are unsigned). The program returns
//! an index in the group, which is the order in which the sockets joined
//! it (`steer`'s module docs say why that is the cores' order). Its
//! length is `2n` instructions, well under the kernel's 4,096 for any
//! machine's core count.

use crate::sys::reuseport::Insn;

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JGT_K: u16 = (libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
/// Where a load finds the kernel's random number.
const RANDOM: u32 = (libc::SKF_AD_OFF + libc::SKF_AD_RANDOM) as u32;

/// The draw over `shares` (one per socket, in group order, summing to 1).
pub(crate) fn draw(shares: &[f64]) -> Vec<Insn> {
    let mut program = Vec::with_capacity(2 * shares.len().max(1));
    program.push(insn(LD_W_ABS, 0, 0, RANDOM));
    let mut cumulative = 0.0;
    for (index, share) in shares
        .iter()
        .enumerate()
        .take(shares.len().saturating_sub(1))
    {
        cumulative += share;
        // The last draw of this socket's range: A <= it has probability
        // `cumulative`, and a share reaching 1 takes every draw.
        let last = (cumulative * 4_294_967_296.0).ceil() - 1.0;
        let last = last.clamp(0.0, f64::from(u32::MAX)) as u32;
        // A > last: jump over this socket's return.
        program.push(insn(JGT_K, 1, 0, last));
        program.push(insn(RET_K, 0, 0, index as u32));
    }
    program.push(insn(RET_K, 0, 0, shares.len().saturating_sub(1) as u32));
    program
}

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> Insn {
    Insn { code, jt, jf, k }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `program` as the kernel would, with `random` as the draw.
    fn run(program: &[Insn], random: u32) -> u32 {
        let mut a = 0u32;
        let mut pc = 0usize;
        loop {
            let i = program[pc];
            match i.code {
                LD_W_ABS => {
                    assert_eq!(i.k, RANDOM, "loads only the random number");
                    a = random;
                }
                JGT_K => {
                    pc += usize::from(if a > i.k { i.jt } else { i.jf });
                }
                RET_K => return i.k,
                other => panic!("unexpected instruction {other:#x}"),
            }
            pc += 1;
        }
    }

    #[test]
    fn each_socket_gets_its_share_of_the_draws() {
        let program = draw(&[0.25, 0.5, 0.25]);
        assert_eq!(program.len(), 6);
        assert_eq!(run(&program, 0), 0);
        assert_eq!(run(&program, (1 << 30) - 1), 0);
        assert_eq!(run(&program, 1 << 30), 1);
        assert_eq!(run(&program, (3 << 30) - 1), 1);
        assert_eq!(run(&program, 3 << 30), 2);
        assert_eq!(run(&program, u32::MAX), 2);
    }

    #[test]
    fn one_socket_takes_everything() {
        let program = draw(&[1.0]);
        assert_eq!(program.len(), 2);
        assert_eq!(run(&program, 0), 0);
        assert_eq!(run(&program, u32::MAX), 0);
    }

    #[test]
    fn a_full_first_share_never_reaches_the_others() {
        // Rounding must not leave the last socket a sliver.
        let program = draw(&[1.0, 0.0]);
        assert_eq!(run(&program, u32::MAX), 0);
    }
}
