//! Test output without the panics a test provokes on purpose.

/// Keeps the panics a test provokes (their message says "told to panic")
/// out of the output; any other panic is reported as usual.
pub fn quiet_expected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let expected = info
                .payload()
                .downcast_ref::<&str>()
                .is_some_and(|m| m.contains("told to panic"));
            if !expected {
                default(info);
            }
        }));
    });
}
