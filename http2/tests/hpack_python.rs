//! HPACK against a second implementation, Python's `hpack`: random
//! header lists encoded by it (incremental indexing, Huffman or not,
//! table size changes that evict, never-indexed fields) are decoded here
//! on one connection's table, and this crate's blocks are decoded there.
//!
//! Skips, printing why, when python3's `hpack` is missing, unless the test
//! script promised `python3-h2` (which brings it) in `PERCORE_TEST_TOOLS`.

use std::io::Write;
use std::process::{Command, Stdio};

use percore_http2::hpack::{Decoder, Encoder};

/// Encodes each input line's header list with one encoder; prints each
/// block in hex. A line is `size;huffman;name:value:sensitive,...`, in hex.
const ENCODE: &str = r#"
import sys, hpack
from hpack import HeaderTuple, NeverIndexedHeaderTuple
enc = hpack.Encoder()
for line in sys.stdin.read().split("\n"):
    if not line:
        continue
    size, huff, fields = line.split(";")
    if size != "-":
        enc.header_table_size = int(size)
    headers = []
    for f in fields.split(",") if fields else []:
        n, v, s = f.split(":")
        kind = NeverIndexedHeaderTuple if s == "1" else HeaderTuple
        headers.append(kind(bytes.fromhex(n), bytes.fromhex(v)))
    print(enc.encode(headers, huffman=huff == "1").hex())
"#;

/// Decodes each input line's block with one decoder; prints the fields
/// in the input format.
const DECODE: &str = r#"
import sys, hpack
from hpack import NeverIndexedHeaderTuple
dec = hpack.Decoder()
for line in sys.stdin.read().split("\n"):
    if not line:
        continue
    fields = dec.decode(bytes.fromhex(line), raw=True)
    print(",".join("%s:%s:%d" % (n.hex(), v.hex(), isinstance(h, NeverIndexedHeaderTuple))
                   for h in fields for (n, v) in [h]))
"#;

type Field = (Vec<u8>, Vec<u8>, bool);

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const NAMES: &[&str] = &[
    ":method",
    ":path",
    ":authority",
    ":scheme",
    ":status",
    "accept",
    "accept-encoding",
    "cookie",
    "content-type",
    "content-length",
    "date",
    "user-agent",
    "authorization",
    "x-request-id",
];

fn random_list(rng: &mut Rng) -> Vec<Field> {
    (0..1 + rng.below(12))
        .map(|_| {
            let name = if rng.below(4) == 0 {
                let len = 1 + rng.below(20);
                (0..len)
                    .map(|_| b"abcdefghijklmnopqrstuvwxyz-"[rng.below(27)])
                    .collect()
            } else {
                NAMES[rng.below(NAMES.len())].as_bytes().to_vec()
            };
            // A never-indexed field that the static table holds whole
            // (`accept: ""`) goes out indexed, losing the flag: sensitive
            // values here are at least two random bytes, which no static
            // entry holds.
            let sensitive = rng.below(8) == 0;
            let len = rng.below(60).max(if sensitive { 2 } else { 0 });
            let value = match rng.below(3) {
                0 => (0..len).map(|_| rng.next() as u8).collect(),
                _ => (0..len).map(|_| b' ' + rng.below(95) as u8).collect(),
            };
            (name, value, sensitive)
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

fn line(fields: &[Field]) -> String {
    let parts: Vec<String> = fields
        .iter()
        .map(|(n, v, s)| format!("{}:{}:{}", hex(n), hex(v), *s as u8))
        .collect();
    parts.join(",")
}

/// Runs a Python script over `input`; `None` if Python's hpack is missing.
fn python(script: &str, input: &str) -> Option<Vec<String>> {
    let probe = Command::new("python3")
        .args(["-c", "import hpack"])
        .output();
    if !probe.is_ok_and(|out| out.status.success()) {
        let promised = std::env::var("PERCORE_TEST_TOOLS").unwrap_or_default();
        assert!(
            !promised.split(',').any(|t| t == "python3-h2"),
            "python3-h2 promised but hpack is missing"
        );
        println!("skipped: python3 hpack not installed");
        return None;
    }
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().expect("python3 output");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect(),
    )
}

#[test]
fn blocks_from_python_hpack_decode_here() {
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let mut lists = Vec::new();
    let mut input = String::new();
    for _ in 0..400 {
        let list = random_list(&mut rng);
        // Now and then the encoder picks another table size: updates,
        // and evictions when it shrinks.
        let size = match rng.below(10) {
            0 => [0, 64, 256, 1024, 4096][rng.below(5)].to_string(),
            _ => "-".into(),
        };
        input.push_str(&format!("{size};{};{}\n", rng.below(2), line(&list)));
        lists.push(list);
    }
    let Some(blocks) = python(ENCODE, &input) else {
        return;
    };
    assert_eq!(blocks.len(), lists.len());
    let mut decoder = Decoder::new();
    let mut largest = 0;
    for (block, list) in blocks.iter().zip(&lists) {
        let mut seen = Vec::new();
        decoder
            .decode(&unhex(block), |n, v, s| {
                seen.push((n.to_vec(), v.to_vec(), s))
            })
            .unwrap();
        assert_eq!(&seen, list, "block {block}");
        assert!(decoder.table().size() <= decoder.table().max_size());
        largest = largest.max(decoder.table().len());
    }
    assert!(
        largest > 10,
        "the dynamic table was used: {largest} entries at most"
    );
}

#[test]
fn blocks_from_here_decode_in_python_hpack() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let mut encoder = Encoder::new();
    let mut lists = Vec::new();
    let mut input = String::new();
    for i in 0..400 {
        if i == 200 {
            // The peer lowers its table: the next block starts with an update.
            encoder.set_peer_table_size(100);
        }
        let list = random_list(&mut rng);
        let mut block = Vec::new();
        let mut fields = encoder.block(&mut block);
        for (n, v, s) in &list {
            fields.field(n, v, *s);
        }
        input.push_str(&hex(&block));
        input.push('\n');
        lists.push(line(&list));
    }
    let Some(decoded) = python(DECODE, &input) else {
        return;
    };
    assert_eq!(decoded, lists);
}
