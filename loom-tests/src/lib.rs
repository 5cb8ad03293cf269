//! loom models of percore's cross-thread code live in `tests/`; run them
//! with `RUSTFLAGS="--cfg loom" cargo test -p loom-tests --release`.
