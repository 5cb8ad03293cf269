//! The client tests' core: the client belongs to a core, so each test
//! runs its requests inside [`on_core`].

use std::future::Future;
use std::time::Duration;

use percore::Backend;

/// A failure guard only: no verdict waits on it.
const HANG: Duration = Duration::from_secs(60);

/// Runs `f` on a core of `backend`, failing the test if it hangs.
#[allow(dead_code, reason = "only the client tests run requests on a core")]
pub(crate) fn on_core<F>(backend: Backend, f: F) -> F::Output
where
    F: Future + 'static,
    F::Output: 'static,
{
    percore::block_on(backend, async move {
        percore::time::timeout(HANG, f)
            .await
            .expect("the client hung")
    })
    .expect("run a core")
}
