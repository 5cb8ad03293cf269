//! The WebSocket echo against Python's `websockets` client on both
//! backends: text and binary round trips, a 4 MiB message the client
//! fragments, and close codes each way. Skips, saying why, when python3
//! or its `websockets` package is missing (test.sh installs both as root).

use crate::support;

use percore_handlers::ws::WsConfig;
use percore_test_kit::*;
use support::ws::*;

const SCRIPT: &str = r#"
import asyncio, sys
import websockets
from websockets.asyncio.client import connect

async def main(port):
    url = f"ws://127.0.0.1:{port}/echo"
    async with connect(url, subprotocols=["chat"], max_size=None) as ws:
        assert ws.subprotocol == "chat", ws.subprotocol
        await ws.send("héllo")
        assert await ws.recv() == "héllo"
        await ws.send(b"\x00\x01\xff")
        assert await ws.recv() == b"\x00\x01\xff"
        big = bytes(range(256)) * (16 * 1024)
        await ws.send(big)
        assert await ws.recv() == big
        # A message the client sends in fragments.
        await ws.send(["frag", "ment", "ed"])
        assert await ws.recv() == "fragmented"
        await ws.ping(b"p")
        await ws.close(code=4000, reason="done")
        assert ws.close_code == 4000, ws.close_code
    # Over the server's limit: closed with 1009.
    async with connect(url, max_size=None) as ws:
        try:
            await ws.send(b"x" * (5 << 20))
            await ws.recv()
            raise AssertionError("no close")
        except websockets.ConnectionClosed as e:
            assert e.rcvd.code == 1009, e
    print("OK")

asyncio.run(main(int(sys.argv[1])))
"#;

backend_tests! {
    parallel;
    /// Round trips, fragments, and close codes with a real client.
    fn python_websockets_client(backend) {
        let mut config = WsConfig::default();
        config.max_message = 4 << 20;
        config.max_frame = 4 << 20;
        config.max_send_queue = 8 << 20;
        let server = ws_server(backend, config);
        let port = server.local_addr().port().to_string();
        if !python_module("websockets") {
            return;
        }
        let Some(out) = python3(SCRIPT, &[&port]) else { return };
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && stdout.contains("OK"), "{stdout}\n{stderr}");
        server.shutdown();
        server.join().expect("join");
    }
}
