//! Host names to addresses, off the core: a core never blocks, and the
//! system's resolver (`getaddrinfo`, behind [`ToSocketAddrs`]) may wait
//! seconds on a slow DNS server. A name is resolved on a thread of its
//! own ([`percore::spawn_blocking`]) and the answer cached on the core for
//! [`Config::dns_ttl`](super::Config::dns_ttl). Requests for a name being
//! resolved wait for that lookup rather than start another: a burst of
//! requests to a new host starts one thread, not one each.
//!
//! IP literals never get here, and names under `.invalid` fail at once:
//! RFC 6761 §6.4 asks resolver libraries to answer them negatively
//! without a query.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::poll_fn;
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::{Rc, Weak};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use percore::time::now;

/// Most names cached per core: past it, expired entries go, and an answer
/// that finds no room is used but not kept.
const MAX_NAMES: usize = 1024;

/// Addresses a name resolved to, or the resolver's words for why not.
pub(crate) type Resolved = Result<Rc<[SocketAddr]>, Rc<str>>;

/// A core's cache of resolved names.
#[derive(Debug)]
pub(crate) struct Resolver {
    ttl: Duration,
    names: RefCell<HashMap<(String, u16), Entry>>,
}

#[derive(Debug)]
enum Entry {
    Ready {
        addrs: Rc<[SocketAddr]>,
        expires: Option<Instant>,
    },
    /// Being resolved: requests for it wait on the lookup.
    Pending(Rc<Lookup>),
}

/// What the cache has for a name.
enum Found {
    Cached(Rc<[SocketAddr]>),
    Wait(Rc<Lookup>),
}

/// One name being resolved on its thread, and who waits for it.
#[derive(Debug, Default)]
struct Lookup {
    result: RefCell<Option<Resolved>>,
    waiters: RefCell<Vec<Waker>>,
}

impl Resolver {
    pub(crate) fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            names: RefCell::new(HashMap::new()),
        }
    }

    /// The addresses of `host` (a name, lowercased), with `port`.
    pub(crate) async fn resolve(self: &Rc<Self>, host: &str, port: u16) -> Resolved {
        if host == "invalid" || host.ends_with(".invalid") || host.ends_with(".invalid.") {
            return Err("names under .invalid never resolve (RFC 6761)".into());
        }
        let lookup = match self.lookup(host, port) {
            Found::Cached(addrs) => return Ok(addrs),
            Found::Wait(lookup) => lookup,
        };
        poll_fn(|cx| {
            if let Some(result) = &*lookup.result.borrow() {
                return Poll::Ready(result.clone());
            }
            let mut waiters = lookup.waiters.borrow_mut();
            if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                waiters.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }

    /// A fresh cached answer, or the lookup to wait on: the one under
    /// way, or a new one.
    fn lookup(self: &Rc<Self>, host: &str, port: u16) -> Found {
        let key = (host.to_owned(), port);
        let mut names = self.names.borrow_mut();
        match names.get(&key) {
            Some(Entry::Ready { addrs, expires }) if expires.is_none_or(|end| now() < end) => {
                return Found::Cached(addrs.clone());
            }
            Some(Entry::Pending(lookup)) => return Found::Wait(lookup.clone()),
            _ => {}
        }
        if names.len() >= MAX_NAMES {
            let at = now();
            names.retain(|_, entry| match entry {
                Entry::Ready { expires, .. } => expires.is_none_or(|end| at < end),
                Entry::Pending(_) => true,
            });
        }
        let lookup = Rc::new(Lookup::default());
        // A pending entry goes in even past the bound: it is what makes
        // the requests that follow wait instead of starting threads.
        names.insert(key.clone(), Entry::Pending(lookup.clone()));
        drop(names);
        // A task of its own, not the first request's: that request may be
        // dropped (its timeout, its caller gone) while others wait.
        drop(percore::spawn_local(run(
            Rc::downgrade(self),
            key,
            lookup.clone(),
        )));
        Found::Wait(lookup)
    }

    /// Puts a finished lookup's answer in the cache (a failure is not
    /// kept: the next request asks again).
    fn finish(&self, key: (String, u16), result: &Resolved) {
        let mut names = self.names.borrow_mut();
        match result {
            Ok(addrs) if names.len() <= MAX_NAMES => {
                let expires = now().checked_add(self.ttl);
                let addrs = addrs.clone();
                names.insert(key, Entry::Ready { addrs, expires });
            }
            _ => {
                names.remove(&key);
            }
        }
    }
}

/// Resolves `key` on a thread, then hands the answer to its waiters and
/// the cache (if the client is still there).
async fn run(resolver: Weak<Resolver>, key: (String, u16), lookup: Rc<Lookup>) {
    let (host, port) = (key.0.clone(), key.1);
    let result: Resolved =
        match percore::spawn_blocking(move || (host.as_str(), port).to_socket_addrs()).await {
            Ok(Ok(addrs)) => {
                let addrs: Rc<[SocketAddr]> = addrs.collect();
                if addrs.is_empty() {
                    Err("the name has no addresses".into())
                } else {
                    Ok(addrs)
                }
            }
            Ok(Err(e)) | Err(e) => Err(e.to_string().into()),
        };
    if let Some(resolver) = resolver.upgrade() {
        resolver.finish(key, &result);
    }
    *lookup.result.borrow_mut() = Some(result);
    let waiters = std::mem::take(&mut *lookup.waiters.borrow_mut());
    for waker in waiters {
        waker.wake();
    }
}
