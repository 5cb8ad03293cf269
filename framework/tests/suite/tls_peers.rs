//! TLS peers that hold a core's handshake places or ask for records out of
//! turn, on both backends: a stalled handshake, silent connections (one
//! past the first-byte deadline, places full, and 2,000 renewed while a
//! real client is served), a TLS 1.2 renegotiation request and a key
//! update. The servers and clients are `tls`'s.

use std::io::Read;
use std::time::Duration;

use percore_test_kit::*;

use super::tls::*;

backend_tests! {
    /// A client that connects and sends nothing is closed at the
    /// handshake timeout, and counted.
    fn a_stalled_handshake_times_out(backend) {
        let Some(cert) = TestCert::new(&format!("stall-{backend}")) else { return };
        let server = tls_echo(backend, &cert, |b| b.tls_handshake_timeout(Duration::from_millis(300)));
        let mut sock = connect(server.local_addr());
        let mut rest = Vec::new();
        // Ends at the server's close (the read guard is the hang detector).
        sock.read_to_end(&mut rest).expect("closed by the server");
        assert!(rest.is_empty(), "{rest:?}");
        // The failure is counted before the connection leaves `active`:
        // wait for both, so that a loaded machine cannot split them.
        wait_until(Duration::from_secs(60), "the failure counted and the connection gone", || server.stats(), |s| {
            sum(s, |c| c.tls_failures) == 1 && sum(s, |c| c.active) == 0
        });
        server.shutdown();
        server.join().expect("join");
    }

    /// A connection that sends nothing is closed at the first-byte
    /// deadline, well before the handshake's (longer than the client's
    /// 60 s read guard).
    fn a_silent_connection_is_closed_at_the_first_byte_deadline(backend) {
        let Some(cert) = TestCert::new(&format!("first-{backend}")) else { return };
        let server = tls_echo(backend, &cert, |b| {
            b.tls_handshake_timeout(Duration::from_secs(120))
                .tls_first_byte_timeout(Duration::from_millis(300))
        });
        let mut sock = connect(server.local_addr());
        let mut rest = Vec::new();
        sock.read_to_end(&mut rest).expect("closed by the server");
        assert!(rest.is_empty(), "{rest:?}");
        let stats = wait_until(Duration::from_secs(60), "the failure counted", || server.stats(), |s| sum(s, |c| c.tls_failures) == 1);
        assert_eq!(sum(&stats, |c| c.tls_evicted), 0);
        server.shutdown();
        server.join().expect("join");
    }

    /// When a core's handshake places are all taken, a newcomer takes the
    /// place of the oldest connection that has sent nothing, else of the
    /// oldest handshake; it is never turned away.
    fn full_handshake_places_evict_the_oldest_silent_connection(backend) {
        let Some(cert) = TestCert::new(&format!("evict-{backend}")) else { return };
        let server = tls_echo(backend, &cert, |b| {
            b.tls_max_handshakes(2)
                .tls_handshake_timeout(Duration::from_secs(120))
                .tls_first_byte_timeout(Duration::from_secs(120))
        });
        let addr = server.local_addr();
        // 1. An older connection that has begun its handshake, and a
        //    younger silent one.
        let begun = Begun::new(addr, &cert.ca);
        let mut silent = connect(addr);
        wait_until(Duration::from_secs(60), "both accepted", || server.stats(), |s| sum(s, |c| c.accepted) == 2);
        // 2. A client arriving then is served; the silent one makes room.
        let (back, _) = echo_through_percore_client(backend, addr, &cert.ca, b"first");
        assert_eq!(back, b"first");
        let mut rest = Vec::new();
        silent.read_to_end(&mut rest).expect("the silent connection closed");
        assert!(rest.is_empty(), "{rest:?}");
        // 3. With two begun handshakes, a newcomer takes the older's place.
        let younger = Begun::new(addr, &cert.ca);
        let (back, _) = echo_through_percore_client(backend, addr, &cert.ca, b"second");
        assert_eq!(back, b"second");
        assert!(begun.finish(b"older").is_err(), "the oldest handshake was kept");
        assert_eq!(younger.finish(b"younger").expect("the younger handshake"), b"younger");
        let stats = wait_until(Duration::from_secs(60), "every connection closed", || server.stats(), |s| sum(s, |c| c.active) == 0);
        assert_eq!(sum(&stats, |c| c.tls_evicted), 2);
        assert_eq!(sum(&stats, |c| c.tls_failures), 0);
        assert_eq!(sum(&stats, |c| c.tls_handshakes), 3);
        server.shutdown();
        server.join().expect("join");
    }

    /// 2,000 connections that never send a byte, opened again as the
    /// server closes them, against the default limits (1,024 handshakes
    /// per core, 10 s to finish, 5 s for the first byte): a real client
    /// making a request every half second is served every time.
    fn silent_connections_do_not_lock_clients_out(backend) {
        let Some(cert) = TestCert::new(&format!("silent-{backend}")) else { return };
        let server = tls_echo(backend, &cert, |b| b);
        let addr = server.local_addr();
        let silent = Silent::hold(addr, 2_000);
        wait_until(Duration::from_secs(60), "2,000 silent connections", || server.stats(), |s| sum(s, |c| c.accepted) >= 2_000);
        for i in 0..20 {
            let msg = format!("request {i}");
            let done = echo_once(addr, &cert.ca, msg.as_bytes());
            assert!(done.is_ok(), "request {i} of 20 failed: {}", done.unwrap_err());
            std::thread::sleep(Duration::from_millis(500));
        }
        let reopened = silent.reopened();
        drop(silent);
        let stats = wait_until(Duration::from_secs(60), "every connection closed", || server.stats(), |s| sum(s, |c| c.active) == 0);
        // The server did close silent connections (else the flood was
        // not a flood), by eviction or at the first-byte deadline.
        assert!(reopened > 0 && sum(&stats, |c| c.tls_evicted) > 0, "reopened {reopened}, {stats:?}");
        assert_eq!(sum(&stats, |c| c.tls_handshakes), 20);
        server.shutdown();
        server.join().expect("join");
    }

    /// A TLS 1.2 client's renegotiation request, on a connection with
    /// nothing else going on, gets rustls's `no_renegotiation` alert at
    /// once: records queued while reading are not held for a write that
    /// does not come.
    fn a_renegotiation_request_is_answered_at_once(backend) {
        let Some(cert) = TestCert::new(&format!("reneg-{backend}")) else { return };
        let server = tls_echo(backend, &cert, |b| b);
        let seen = s_client_until(
            server.local_addr(),
            &["-tls1_2", "-msg", "-CAfile", cert.ca.to_str().expect("path")],
            // The alert: a warning of code 100 (no_renegotiation), as
            // `-msg` prints the record it received.
            &[(b"R\n", "<<< TLS 1.2, Alert [length 0002], warning no_renegotiation")],
            Duration::from_secs(20),
        );
        assert!(seen.is_ok(), "no no_renegotiation alert in 20 s: {}", seen.unwrap_err());
        server.shutdown();
        server.join().expect("join");
    }

    /// A TLS 1.3 client's KeyUpdate that asks for one back is answered
    /// ahead of the server's next record, which RFC 8446 (4.6.3) asks
    /// ("prior to sending its next Application Data record"; rustls
    /// waits for that record rather than sending it at once), and the
    /// echo that follows decrypts under the new keys.
    fn a_key_update_request_is_answered_before_the_next_record(backend) {
        let Some(cert) = TestCert::new(&format!("keyupdate-{backend}")) else { return };
        let server = tls_echo(backend, &cert, |b| b);
        let seen = s_client_until(
            server.local_addr(),
            &["-tls1_3", "-msg", "-CAfile", cert.ca.to_str().expect("path")],
            &[
                // `K`: a KeyUpdate with update_requested.
                (b"K\n", ">>> TLS 1.3, Handshake [length 0005], KeyUpdate"),
                (b"after the update\n", "<<< TLS 1.3, Handshake [length 0005], KeyUpdate"),
                (b"", "after the update"),
            ],
            Duration::from_secs(20),
        );
        assert!(seen.is_ok(), "no KeyUpdate back in 20 s: {}", seen.unwrap_err());
        server.shutdown();
        server.join().expect("join");
    }
}
