//! Running the `echo` binary as a child process, as an operator would:
//! shared by the tests that start it.

use std::process::Command;
use std::time::Duration;

use percore_test_kit::ChildServer;

pub(crate) const ECHO: &str = env!("CARGO_BIN_EXE_echo");
pub(crate) const HTTP_ECHO: &str = env!("CARGO_BIN_EXE_http_echo");

/// `echo --port 0 --host 127.0.0.1 <args>`, logging at info, with no
/// backend or fault inherited from the environment, and SIGHUP at its
/// default: a test runner started under `nohup` passes SIGHUP on ignored,
/// and the server leaves an ignored SIGHUP ignored (as it should).
pub(crate) fn echo_cmd(args: &[&str]) -> Command {
    example_cmd(ECHO, args)
}

/// [`echo_cmd`] for another example binary, at `path`.
pub(crate) fn example_cmd(path: &str, args: &[&str]) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(path);
    cmd.args(["--port", "0", "--host", "127.0.0.1"])
        .args(args)
        .env("RUST_LOG", "info")
        .env_remove("PERCORE_BACKEND")
        .env_remove("PERCORE_FAULT");
    // SAFETY: signal(2) is async-signal-safe, the only kind of call
    // allowed between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_DFL);
            Ok(())
        });
    }
    cmd
}

/// Starts `cmd` and waits for its `listening on` line.
pub(crate) fn serve(cmd: Command) -> ChildServer {
    ChildServer::spawn(cmd, Duration::from_secs(60))
        .unwrap_or_else(|f| panic!("echo did not start: {f:?}"))
}

/// Stops the child with SIGTERM; it must exit 0 within `limit`.
pub(crate) fn stop(child: ChildServer, limit: Duration) -> String {
    child.signal(libc::SIGTERM);
    let (status, log) = child.wait(limit);
    assert!(
        status.success(),
        "echo exited with {status} after SIGTERM:\n{log}"
    );
    log
}
