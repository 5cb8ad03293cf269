//! RFC 7541 Appendix C, Huffman round trips and the encoder's choices.

use super::huffman;
use super::{Decoder, Encoder, HpackError};

pub(super) fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

type Fields = Vec<(Vec<u8>, Vec<u8>, bool)>;

pub(super) fn decode(decoder: &mut Decoder, block: &[u8]) -> Result<Fields, HpackError> {
    let mut fields = Vec::new();
    decoder.decode(block, |n, v, s| fields.push((n.to_vec(), v.to_vec(), s)))?;
    Ok(fields)
}

fn pairs(fields: &Fields) -> Vec<(&str, &str)> {
    fields
        .iter()
        .map(|(n, v, _)| {
            (
                std::str::from_utf8(n).unwrap(),
                std::str::from_utf8(v).unwrap(),
            )
        })
        .collect()
}

/// The dynamic table, newest first, with each entry's size.
fn table(decoder: &Decoder) -> Vec<(String, String, usize)> {
    let t = decoder.table();
    (1..=t.len())
        .map(|i| {
            let (n, v) = t.get(i).unwrap();
            let (n, v) = (
                String::from_utf8(n.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            );
            let size = n.len() + v.len() + 32;
            (n, v, size)
        })
        .collect()
}

fn entries(list: &[(&str, &str)]) -> Vec<(String, String, usize)> {
    list.iter()
        .map(|(n, v)| (n.to_string(), v.to_string(), n.len() + v.len() + 32))
        .collect()
}

#[test]
fn c2_the_four_representations() {
    // C.2.1: literal with indexing.
    let mut d = Decoder::new();
    let f = decode(
        &mut d,
        &hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"),
    )
    .unwrap();
    assert_eq!(pairs(&f), [("custom-key", "custom-header")]);
    assert_eq!(table(&d), entries(&[("custom-key", "custom-header")]));
    assert_eq!(d.table().size(), 55);
    // C.2.2: literal without indexing.
    let mut d = Decoder::new();
    let f = decode(&mut d, &hex("040c 2f73 616d 706c 652f 7061 7468")).unwrap();
    assert_eq!(pairs(&f), [(":path", "/sample/path")]);
    assert!(d.table().is_empty());
    assert!(!f[0].2);
    // C.2.3: literal never indexed, reported as sensitive.
    let mut d = Decoder::new();
    let f = decode(&mut d, &hex("1008 7061 7373 776f 7264 0673 6563 7265 74")).unwrap();
    assert_eq!(pairs(&f), [("password", "secret")]);
    assert!(f[0].2);
    assert!(d.table().is_empty());
    // C.2.4: indexed.
    let mut d = Decoder::new();
    let f = decode(&mut d, &hex("82")).unwrap();
    assert_eq!(pairs(&f), [(":method", "GET")]);
    assert!(d.table().is_empty());
}

const REQ1: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
];
const REQ2: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
    ("cache-control", "no-cache"),
];
const REQ3: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    (":authority", "www.example.com"),
    ("custom-key", "custom-value"),
];

fn requests(blocks: [&str; 3]) {
    let mut d = Decoder::new();
    let expected = [REQ1, REQ2, REQ3];
    let tables: [&[(&str, &str)]; 3] = [
        &[(":authority", "www.example.com")],
        &[
            ("cache-control", "no-cache"),
            (":authority", "www.example.com"),
        ],
        &[
            ("custom-key", "custom-value"),
            ("cache-control", "no-cache"),
            (":authority", "www.example.com"),
        ],
    ];
    let sizes = [57, 110, 164];
    for i in 0..3 {
        let f = decode(&mut d, &hex(blocks[i])).unwrap();
        assert_eq!(pairs(&f), expected[i], "request {}", i + 1);
        assert_eq!(
            table(&d),
            entries(tables[i]),
            "table after request {}",
            i + 1
        );
        assert_eq!(d.table().size(), sizes[i]);
    }
}

#[test]
fn c3_requests_without_huffman() {
    requests([
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ]);
}

#[test]
fn c4_requests_with_huffman() {
    requests([
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ]);
}

const DATE1: &str = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE2: &str = "Mon, 21 Oct 2013 20:13:22 GMT";
const LOCATION: &str = "https://www.example.com";
const COOKIE: &str = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";

fn responses(blocks: [&str; 3]) {
    let mut d = Decoder::new();
    // The examples run with a 256-octet table, announced and acknowledged.
    d.set_max_table_size(256);
    let mut first = hex("3fe1 01"); // size update to 256
    first.extend(hex(blocks[0]));
    let expected: [&[(&str, &str)]; 3] = [
        &[
            (":status", "302"),
            ("cache-control", "private"),
            ("date", DATE1),
            ("location", LOCATION),
        ],
        &[
            (":status", "307"),
            ("cache-control", "private"),
            ("date", DATE1),
            ("location", LOCATION),
        ],
        &[
            (":status", "200"),
            ("cache-control", "private"),
            ("date", DATE2),
            ("location", LOCATION),
            ("content-encoding", "gzip"),
            ("set-cookie", COOKIE),
        ],
    ];
    let tables: [&[(&str, &str)]; 3] = [
        &[
            ("location", LOCATION),
            ("date", DATE1),
            ("cache-control", "private"),
            (":status", "302"),
        ],
        &[
            (":status", "307"),
            ("location", LOCATION),
            ("date", DATE1),
            ("cache-control", "private"),
        ],
        &[
            ("set-cookie", COOKIE),
            ("content-encoding", "gzip"),
            ("date", DATE2),
        ],
    ];
    let sizes = [222, 222, 215];
    for i in 0..3 {
        let block = if i == 0 {
            first.clone()
        } else {
            hex(blocks[i])
        };
        let f = decode(&mut d, &block).unwrap();
        assert_eq!(pairs(&f), expected[i], "response {}", i + 1);
        assert_eq!(
            table(&d),
            entries(tables[i]),
            "table after response {}",
            i + 1
        );
        assert_eq!(d.table().size(), sizes[i]);
        assert!(
            d.table().allocated() <= 256 + 8 * 12,
            "the byte buffer stays within the table size"
        );
    }
}

#[test]
fn c5_responses_without_huffman() {
    responses([
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32
         3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970
         7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61
         6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
    ]);
}

#[test]
fn c6_responses_with_huffman() {
    responses([
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad
         1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2
         e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ]);
}

#[test]
fn huffman_examples_of_the_rfc() {
    let mut out = Vec::new();
    huffman::decode(&hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff"), &mut out).unwrap();
    assert_eq!(out, b"www.example.com");
    let mut enc = Vec::new();
    huffman::encode(b"www.example.com", &mut enc);
    assert_eq!(enc, hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff"));
    assert_eq!(huffman::encoded_len(b"www.example.com"), 12);
}

/// A fixed-seed xorshift, so that "random" input is the same every run.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn huffman_round_trips_every_byte_and_random_strings() {
    for b in 0..=255u8 {
        for s in [vec![b], vec![b; 2], vec![b; 7], vec![b'a', b, b'z']] {
            let mut enc = Vec::new();
            huffman::encode(&s, &mut enc);
            assert_eq!(enc.len(), huffman::encoded_len(&s));
            let mut dec = Vec::new();
            huffman::decode(&enc, &mut dec).unwrap();
            assert_eq!(dec, s, "byte {b}");
        }
    }
    let all: Vec<u8> = (0..=255).collect();
    let mut enc = Vec::new();
    huffman::encode(&all, &mut enc);
    let mut dec = Vec::new();
    huffman::decode(&enc, &mut dec).unwrap();
    assert_eq!(dec, all);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..2000 {
        let len = rng.below(100);
        let s: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let mut enc = Vec::new();
        huffman::encode(&s, &mut enc);
        let mut dec = vec![b'x'];
        huffman::decode(&enc, &mut dec).unwrap();
        assert_eq!(&dec[1..], &s[..]);
    }
}

#[test]
fn encoder_answers_a_typical_response_in_few_bytes() {
    let mut block = Vec::new();
    let mut fields = Encoder::new().block(&mut block);
    fields.status(200);
    fields.field(b"content-length", b"20", false);
    fields.field(b"date", DATE1.as_bytes(), false);
    fields.field(b"content-type", b"application/json", false);
    // `:status 200` is static index 8; content-length (28) is a literal
    // without indexing with its static name; "20" is not shorter coded.
    assert_eq!(&block[..5], &[0x88, 0x0f, 0x0d, 0x02, b'2']);
    let f = decode(&mut Decoder::new(), &block).unwrap();
    assert_eq!(
        pairs(&f),
        [
            (":status", "200"),
            ("content-length", "20"),
            ("date", DATE1),
            ("content-type", "application/json")
        ]
    );
    // date and content-type values are Huffman coded, being shorter.
    assert!(block.len() < 5 + 2 + DATE1.len() + 2 + "application/json".len());
}

#[test]
fn pre_encoded_fields_equal_block_fields() {
    let long = [b'q'; 300];
    let cases: [(&[u8], &[u8], bool); 5] = [
        (b"date", DATE1.as_bytes(), false),
        (b"x-long", &long, false),
        (b"x-raw", b"\x01\x02", false),
        (b":status", b"200", false),
        (b"cookie", b"a=b", true),
    ];
    for (name, value, sensitive) in cases {
        let mut alone = Vec::new();
        super::encode_field(&mut alone, name, value, sensitive);
        let mut block = Vec::new();
        Encoder::new()
            .block(&mut block)
            .field(name, value, sensitive);
        assert_eq!(alone, block);
        let mut copied = Vec::new();
        Encoder::new().block(&mut copied).encoded(&alone);
        let f = decode(&mut Decoder::new(), &copied).unwrap();
        assert_eq!(f, [(name.to_vec(), value.to_vec(), sensitive)]);
    }
}

#[test]
fn encoder_indexes_whole_static_fields_and_never_inserts() {
    for (status, byte) in [
        (200, 0x88),
        (204, 0x89),
        (206, 0x8a),
        (304, 0x8b),
        (400, 0x8c),
        (404, 0x8d),
        (500, 0x8e),
    ] {
        let mut block = Vec::new();
        Encoder::new().block(&mut block).status(status);
        assert_eq!(block, [byte]);
    }
    let mut block = Vec::new();
    let mut fields = Encoder::new().block(&mut block);
    fields.status(302);
    fields.status(7);
    fields.field(b"accept-encoding", b"gzip, deflate", false);
    fields.field(b"x-custom", b"value", false);
    fields.field(b"authorization", b"secret", true);
    fields.field(b":method", b"GET", true);
    let mut d = Decoder::new();
    let f = decode(&mut d, &block).unwrap();
    assert_eq!(
        pairs(&f),
        [
            (":status", "302"),
            (":status", "7"),
            ("accept-encoding", "gzip, deflate"),
            ("x-custom", "value"),
            ("authorization", "secret"),
            (":method", "GET")
        ]
    );
    assert_eq!(
        f.iter().map(|f| f.2).collect::<Vec<_>>(),
        [false, false, false, false, true, true]
    );
    assert!(d.table().is_empty(), "the encoder never indexes");
    assert_eq!(d.allocated(), 0);
}

#[test]
fn encoder_owes_a_size_update_when_the_peer_lowers_its_table() {
    let mut enc = Encoder::new();
    enc.set_peer_table_size(8192);
    let mut block = Vec::new();
    enc.block(&mut block).status(200);
    assert_eq!(block, [0x88], "a larger table needs no update");
    enc.set_peer_table_size(1024);
    enc.set_peer_table_size(100);
    let mut block = Vec::new();
    enc.block(&mut block).status(200);
    assert_eq!(block, [0x20, 0x88], "one update, to 0, then the field");
    let mut block = Vec::new();
    enc.set_peer_table_size(0);
    enc.block(&mut block).status(200);
    assert_eq!(
        block,
        [0x88],
        "after an update to 0 nothing lower can be owed"
    );
    // A decoder that lowered its limit refuses a block without the update.
    let mut d = Decoder::new();
    d.set_max_table_size(100);
    assert_eq!(decode(&mut d, &[0x88]), Err(HpackError::MissingSizeUpdate));
    let mut d = Decoder::new();
    d.set_max_table_size(100);
    assert_eq!(decode(&mut d, &[0x20, 0x88]).unwrap().len(), 1);
    assert_eq!(d.table().max_size(), 0);
}

#[test]
fn dynamic_table_evicts_and_compacts() {
    let mut d = Decoder::new();
    d.set_max_table_size(100);
    decode(&mut d, &hex("3f45")).unwrap(); // size update to 100
                                           // Each entry "aN: vvvv" is 2 + 4 + 32 = 38 octets: two fit in 100.
    for i in 0..50u8 {
        let block = [
            0x40,
            0x02,
            b'a',
            b'0' + i % 10,
            0x04,
            b'v',
            b'v',
            b'v',
            b'0' + i % 10,
        ];
        decode(&mut d, &block).unwrap();
        assert_eq!(d.table().get(1).unwrap().0, [b'a', b'0' + i % 10]);
        assert!(d.table().size() <= 100);
        assert!(d.table().allocated() <= 100 + 4 * 12);
    }
    assert_eq!(d.table().len(), 2);
    assert_eq!(d.table().get(2).unwrap(), (&b"a8"[..], &b"vvv8"[..]));
    // An entry larger than the table empties it (§4.4).
    let mut block = vec![0x40, 0x01, b'n', 0x7f, 0x00];
    block.extend([b'x'; 127]);
    decode(&mut d, &block).unwrap();
    assert!(d.table().is_empty());
    // A literal whose name is a dynamic entry that the insert evicts.
    decode(&mut d, &[0x40, 0x02, b'a', b'b', 0x02, b'c', b'd']).unwrap();
    decode(&mut d, &[0x40, 0x02, b'e', b'f', 0x02, b'g', b'h']).unwrap();
    let mut block = vec![0x40 | 63, 0x00, 0x1a]; // name of index 63 (the older), 26-byte value
    block.extend([b'z'; 26]);
    let f = decode(&mut d, &block).unwrap();
    assert_eq!(pairs(&f), [("ab", "zzzzzzzzzzzzzzzzzzzzzzzzzz")]);
    assert_eq!(d.table().len(), 2);
    assert_eq!(d.table().get(1).unwrap().0, b"ab");
    assert_eq!(d.table().get(2).unwrap().0, b"ef");
}
