//! Third-party command-line clients the tests run (curl, wrk, python3): each skips
//! (printing why) when the tool is missing, unless the test script
//! promised it in `PERCORE_TEST_TOOLS`, where missing is a failure.

use std::process::{Command, Output};

/// Runs curl (silent, errors shown, a 10 s limit) with `args`; `None`
/// (after printing why) if curl is missing.
pub fn curl(args: &[&str]) -> Option<Output> {
    run(
        "curl",
        Command::new("curl")
            .args(["--silent", "--show-error", "--max-time", "10"])
            .args(args),
    )
}

/// Runs wrk with `args`; `None` (after printing why) if wrk is missing.
pub fn wrk(args: &[&str]) -> Option<Output> {
    run("wrk", Command::new("wrk").args(args))
}

/// Runs `python3 -c script args...`; `None` (after printing why) if
/// python3 is missing.
pub fn python3(script: &str, args: &[&str]) -> Option<Output> {
    run(
        "python3",
        Command::new("python3").arg("-c").arg(script).args(args),
    )
}

/// Whether python3 can import `module` (a PyPI package the test script
/// installs with pip when root, named in `PERCORE_TEST_TOOLS` as
/// `python3-<module>`); prints why the test skips when it cannot, and
/// fails when the test script promised it.
pub fn python_module(module: &str) -> bool {
    let found = Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        missing(&format!("python3-{module}"));
    }
    found
}

/// Whether `tool` is on `PATH`; prints why the test skips when it is
/// not, and fails when the test script promised it.
pub fn installed(tool: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()) {
        return true;
    }
    missing(tool);
    false
}

fn missing(tool: &str) {
    let promised = std::env::var("PERCORE_TEST_TOOLS").unwrap_or_default();
    assert!(
        !promised.split(',').any(|t| t == tool),
        "{tool} not installed, though the test script installs it"
    );
    println!("skipped: {tool} not installed");
}

fn run(tool: &str, cmd: &mut Command) -> Option<Output> {
    match cmd.output() {
        Ok(out) => Some(out),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            missing(tool);
            None
        }
        Err(e) => panic!("run {tool}: {e}"),
    }
}
