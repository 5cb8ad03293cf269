//! The `--stats` lines of a binary's own counters: per-core readers,
//! registered by the handler factory (which runs on the core) under the
//! core's index, read once a second by the stats thread.

use std::sync::{Arc, Mutex};

/// One reader per core, by the core's index in the server's core list.
#[derive(Debug)]
pub struct CoreReaders<R>(Arc<Mutex<Vec<Option<R>>>>);

impl<R> Clone for CoreReaders<R> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<R> Default for CoreReaders<R> {
    fn default() -> Self {
        Self(Arc::default())
    }
}

impl<R> CoreReaders<R> {
    /// Registers core `index`'s reader (from the factory, on the core).
    pub fn register(&self, index: usize, reader: R) {
        let mut readers = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if readers.len() <= index {
            readers.resize_with(index + 1, || None);
        }
        readers[index] = Some(reader);
    }

    /// `line(reader)` for core `index`, once its reader is registered.
    pub fn line(&self, index: usize, line: impl FnOnce(&R) -> String) -> Option<String> {
        let readers = self.0.lock().unwrap_or_else(|e| e.into_inner());
        readers.get(index)?.as_ref().map(line)
    }
}
