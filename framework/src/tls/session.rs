//! A stream's TLS session: the rustls connection, and the steps the
//! stream's reads and writes take through it (feeding received records
//! in, taking plaintext out, encrypting what is written).

use std::cell::{Cell, RefCell};
use std::io::{self, Read, Write};

use rustls::Connection;

use crate::buf::RecvBuf;

/// The rustls connection of one stream. Shared by the stream's read and
/// its write (one of each may run at once), never across an await.
pub(crate) struct Session {
    conn: RefCell<Connection>,
    /// Records received but not fed in yet: rustls takes more only once
    /// the plaintext of the last ones was read out (back-pressure).
    pending: RefCell<Option<RecvBuf>>,
    /// Set while a write's records are on their way, from the moment they
    /// were encrypted: records rustls queues meanwhile (an alert, a
    /// KeyUpdate answer, made while reading) must follow them, since the
    /// peer checks each record's sequence number. The write sends them
    /// when its own are out; with no write on its way, the read that
    /// queued them sends them.
    writing: Cell<bool>,
    /// Records taken out of rustls that the socket did not take: they go
    /// ahead of the next ones sent.
    held: RefCell<Vec<u8>>,
}

/// A session between two cores: what it held, in a form that crosses
/// threads (rustls's connection is `Send`; a receive lease is not).
pub(crate) struct Moving {
    conn: Connection,
    /// Records received and not fed in yet, then what the socket had
    /// received after them.
    pending: Vec<u8>,
    /// Records the socket did not take.
    held: Vec<u8>,
}

impl Session {
    /// The session leaving its core, with `received` after the records it
    /// had not fed in yet. No write may be on its way (`is_writing`).
    pub(crate) fn detach(self, mut received: Vec<u8>) -> Moving {
        let Session {
            conn,
            pending,
            held,
            ..
        } = self;
        let mut records = pending
            .into_inner()
            .map_or_else(Vec::new, |lease| lease.to_vec());
        records.append(&mut received);
        Moving {
            conn: conn.into_inner(),
            pending: records,
            held: held.into_inner(),
        }
    }

    /// The session arriving on a core, its records not fed in yet in a
    /// lease of `pool` (freed, not kept, once fed).
    pub(crate) fn attach(
        moving: Moving,
        pool: std::rc::Rc<crate::driver::pool::HeapPool>,
    ) -> Session {
        let session = Session::new(moving.conn);
        session.hold(moving.held);
        if !moving.pending.is_empty() {
            let len = moving.pending.len();
            let lease = RecvBuf::from_pool(pool, moving.pending.into_boxed_slice(), len);
            *session.pending.borrow_mut() = Some(lease);
        }
        session
    }

    pub(crate) fn new(conn: Connection) -> Session {
        Session {
            conn: RefCell::new(conn),
            pending: RefCell::new(None),
            writing: Cell::new(false),
            held: RefCell::new(Vec::new()),
        }
    }

    /// Plaintext already decrypted, into `dst`: `Ok(Some(n))` with `n > 0`
    /// bytes, `Ok(Some(0))` at the peer's `close_notify` (a clean end),
    /// `Ok(None)` when more records must be received first.
    ///
    /// # Errors
    ///
    /// `UnexpectedEof` when the transport ended without `close_notify`:
    /// what came may be cut short, so it is not a clean end.
    pub(crate) fn read_plain(&self, dst: &mut [u8]) -> io::Result<Option<usize>> {
        match self.conn.borrow_mut().reader().read(dst) {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the TLS peer closed the connection without close_notify (the data may be cut short)",
            )),
            Err(e) => Err(e),
        }
    }

    /// Feeds received records in and decrypts them, as far as rustls
    /// takes them now; the rest waits for [`feed_pending`](Self::feed_pending).
    ///
    /// # Errors
    ///
    /// `InvalidData` for a record rustls refuses (garbage, a bad MAC, a
    /// protocol violation); the alert it prepared is left for
    /// [`flush`](Self::flush).
    pub(crate) fn receive(&self, mut records: RecvBuf) -> io::Result<()> {
        let mut conn = self.conn.borrow_mut();
        while !records.is_empty() && (conn.is_handshaking() || conn.wants_read()) {
            let n = conn.read_tls(&mut &records[..])?;
            records.advance(n);
            conn.process_new_packets().map_err(invalid)?;
        }
        if !records.is_empty() {
            *self.pending.borrow_mut() = Some(records);
        }
        Ok(())
    }

    /// Feeds in what [`receive`](Self::receive) left; `Ok(false)` when
    /// nothing was left.
    pub(crate) fn feed_pending(&self) -> io::Result<bool> {
        let pending = self.pending.borrow_mut().take();
        match pending {
            Some(records) => self.receive(records).map(|()| true),
            None => Ok(false),
        }
    }

    /// Tells rustls the transport has ended.
    pub(crate) fn end(&self) -> io::Result<()> {
        let mut conn = self.conn.borrow_mut();
        conn.read_tls(&mut &[][..])?;
        conn.process_new_packets().map_err(invalid)?;
        Ok(())
    }

    /// Encrypts `plain` and appends the records to `out`.
    pub(crate) fn encrypt(&self, mut plain: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        let mut conn = self.conn.borrow_mut();
        while !plain.is_empty() {
            let n = conn.writer().write(plain)?;
            plain = &plain[n..];
            while conn.wants_write() {
                conn.write_tls(out)?;
            }
            if n == 0 && !plain.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "the TLS session takes no more plaintext",
                ));
            }
        }
        Ok(())
    }

    /// Appends the records waiting to be sent (handshake messages, alerts,
    /// tickets) to `out`.
    pub(crate) fn flush(&self, out: &mut Vec<u8>) -> io::Result<()> {
        let mut conn = self.conn.borrow_mut();
        while conn.wants_write() {
            conn.write_tls(out)?;
        }
        Ok(())
    }

    /// Queues `close_notify` and returns the records to send (after
    /// those held).
    pub(crate) fn close_notify(&self) -> io::Result<Vec<u8>> {
        self.conn.borrow_mut().send_close_notify();
        let mut out = self.take_held();
        self.flush(&mut out)?;
        Ok(out)
    }

    /// Whether rustls has records to send.
    pub(crate) fn wants_write(&self) -> bool {
        self.conn.borrow().wants_write()
    }

    /// A write is about to encrypt its records into `out`: the held
    /// records go first, and later ones wait for the write's end.
    pub(crate) fn begin_write(&self, out: &mut Vec<u8>) {
        self.writing.set(true);
        let mut held = self.held.borrow_mut();
        if !held.is_empty() {
            out.append(&mut held);
        }
    }

    /// The write's records are all sent, or it was dropped.
    pub(crate) fn end_write(&self) {
        self.writing.set(false);
    }

    /// Whether a write's records are on their way (see `writing`).
    pub(crate) fn is_writing(&self) -> bool {
        self.writing.get()
    }

    /// The records held back, to be sent ahead of any others.
    pub(crate) fn take_held(&self) -> Vec<u8> {
        std::mem::take(&mut *self.held.borrow_mut())
    }

    /// Holds records the socket did not take, for the next send.
    pub(crate) fn hold(&self, records: Vec<u8>) {
        *self.held.borrow_mut() = records;
    }

    pub(crate) fn is_handshaking(&self) -> bool {
        self.conn.borrow().is_handshaking()
    }

    /// The protocol ALPN agreed on, if any.
    pub(crate) fn alpn(&self) -> Option<Vec<u8>> {
        self.conn.borrow().alpn_protocol().map(<[u8]>::to_vec)
    }

    /// The server name the client asked for (server side).
    pub(crate) fn server_name(&self) -> Option<String> {
        match &*self.conn.borrow() {
            Connection::Server(server) => server.server_name().map(str::to_owned),
            Connection::Client(_) => None,
        }
    }
}

/// A rustls error as an I/O error that keeps it: a caller can tell a
/// certificate that did not verify from garbage by downcasting
/// ([`io::Error::get_ref`]) to `rustls::Error`.
fn invalid(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}
