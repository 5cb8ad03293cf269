//! `percore::on_give_back`, on both backends: a core that falls quiet
//! after I/O calls the hooks of the caches still alive, once per quiet
//! spell, and forgets those whose owner is gone.

use std::cell::OnceCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use percore::{Connection, Handler};
use percore_test_kit::*;

/// A cache as the core sees it: what its give-back did.
struct Cache {
    calls: Arc<AtomicUsize>,
}

fn count(cache: &Cache) {
    cache.calls.fetch_add(1, Ordering::SeqCst);
}

/// Echo that registers its cache's give-back with the first connection
/// (on the core), and one for a cache dropped at once.
struct Hooked {
    cache: OnceCell<Rc<Cache>>,
    kept: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
}

impl Handler for Hooked {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        self.cache.get_or_init(|| {
            let cache = Rc::new(Cache {
                calls: self.kept.clone(),
            });
            assert!(percore::on_give_back(&cache, count));
            let gone = Rc::new(Cache {
                calls: self.dropped.clone(),
            });
            assert!(percore::on_give_back(&gone, count));
            cache
        });
        while let Some(buf) = conn.read().await? {
            let (res, _) = conn.write_all(buf).await;
            res?;
        }
        Ok(())
    }
}

#[test]
fn no_hook_is_registered_off_a_core() {
    let cache = Rc::new(Cache {
        calls: Arc::default(),
    });
    assert!(!percore::on_give_back(&cache, count));
}

backend_tests! {
    parallel;
    /// Each round trip is I/O that a quiet spell (two seconds on the
    /// core's clock) follows: the live cache's hook runs once per spell,
    /// while the client stays connected; the dropped cache's never.
    fn a_quiet_core_gives_back_through_the_hooks(backend) {
        let (kept, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let server = {
            let (kept, dropped) = (kept.clone(), dropped.clone());
            builder(backend)
                .start(move |_core| Hooked { cache: OnceCell::new(), kept: kept.clone(), dropped: dropped.clone() })
                .expect("start")
        };
        check_backend(&server, backend);
        let mut client = connect(server.local_addr());
        for spell in 1..=2 {
            roundtrip(&mut client, pattern(spell, 3000));
            wait_until(Duration::from_secs(60), "the hook called", || kept.load(Ordering::SeqCst), |n| *n >= spell);
            // Nothing owed until the next I/O: once per spell.
            assert_eq!(kept.load(Ordering::SeqCst), spell);
        }
        assert_eq!(dropped.load(Ordering::SeqCst), 0, "a dropped cache's hook ran");
        drop(client);
        server.shutdown();
        server.join().expect("join");
    }
}
