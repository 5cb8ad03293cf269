//! `permessage-deflate` against Python's `websockets` client, which
//! offers it by default, on both backends and with both of the server's
//! modes (shared coders, context takeover): the 101 carries the
//! extension, text, binary, large and fragmented messages round-trip,
//! and a zip bomb is closed with 1009. Skips, saying why, when python3
//! or its `websockets` package is missing (test.sh installs both as root).

use crate::support;

use percore_handlers::ws::{Deflate, WsConfig};
use percore_test_kit::*;
use support::ws::*;

const SCRIPT: &str = r#"
import asyncio, sys
import websockets
from websockets.asyncio.client import connect

async def main(port, want):
    url = f"ws://127.0.0.1:{port}/echo"
    async with connect(url, max_size=None) as ws:
        answer = ws.response.headers["Sec-WebSocket-Extensions"]
        assert answer == want, answer
        assert [type(e).__name__ for e in ws.protocol.extensions] == ["PerMessageDeflate"]
        for _ in range(3):
            await ws.send("héllo, " * 50)
            assert await ws.recv() == "héllo, " * 50
        await ws.send("short")
        assert await ws.recv() == "short"
        await ws.send(b"\x00\x01\xff" * 100)
        assert await ws.recv() == b"\x00\x01\xff" * 100
        big = bytes(range(256)) * (12 * 1024)
        await ws.send(big)
        assert await ws.recv() == big
        # Fragments of one compressed message.
        await ws.send(["frag", "ment", "ed" * 100])
        assert await ws.recv() == "fragment" + "ed" * 100
        await ws.close(code=4000, reason="done")
        assert ws.close_code == 4000, ws.close_code
    # A zip bomb: 5 MiB of zeros deflate to a few KiB; inflated they are
    # over the server's 4 MiB limit.
    async with connect(url, max_size=None) as ws:
        try:
            await ws.send(b"\x00" * (5 << 20))
            await ws.recv()
            raise AssertionError("no close")
        except websockets.ConnectionClosed as e:
            assert e.rcvd.code == 1009, e
    print("OK")

asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
"#;

backend_tests! {
    parallel;
    /// Round trips and a zip bomb with a real client, in both modes.
    fn python_websockets_deflate(backend) {
        if !python_module("websockets") {
            return;
        }
        for takeover in [false, true] {
            let mut deflate = Deflate::default();
            deflate.context_takeover = takeover;
            let mut config = WsConfig::default();
            config.max_message = 4 << 20;
            config.max_frame = 4 << 20;
            config.max_send_queue = 8 << 20;
            config.deflate = Some(deflate);
            let server = ws_server(backend, config);
            let port = server.local_addr().port().to_string();
            // websockets offers `client_max_window_bits`, which needs no answer.
            let want = match takeover {
                true => "permessage-deflate",
                false => "permessage-deflate; server_no_context_takeover; client_no_context_takeover",
            };
            let Some(out) = python3(SCRIPT, &[&port, want]) else { return };
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success() && stdout.contains("OK"), "takeover {takeover}: {stdout}\n{stderr}");
            server.shutdown();
            server.join().expect("join");
        }
    }
}
