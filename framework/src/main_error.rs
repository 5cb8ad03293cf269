//! [`MainError`]: what `main` returns so that a failure reads as a
//! sentence, not as the `Debug` form of an `io::Error`.

use std::error::Error;
use std::fmt;

/// An error returned from `main`, printed as its message and its causes.
///
/// Rust prints the error `main` returns with `Debug`, which for an
/// `io::Error` is `Error: Custom { kind: AddrInUse, error: "…" }`. Return
/// this instead, and `?` converts any error (and a `&str` or `String`):
///
/// ```no_run
/// fn main() -> Result<(), percore::MainError> {
///     let port: u16 = std::env::var("PORT").unwrap_or("8080".into()).parse()?;
///     percore::Server::builder()
///         .address(([127, 0, 0, 1], port).into())
///         .serve(|_core| percore_echo())?;
///     Ok(())
/// }
/// # fn percore_echo() -> impl percore::Handler { struct E; impl percore::Handler for E {
/// #     async fn serve(&self, _: percore::Connection) -> std::io::Result<()> { Ok(()) } } E }
/// ```
///
/// prints, with the port taken, `Error: cannot listen on 127.0.0.1:8080:
/// address already in use (…)` and exits with status 1.
pub struct MainError(Box<dyn Error + Send + Sync>);

impl MainError {
    /// The error it carries.
    pub fn get_ref(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl<E: Into<Box<dyn Error + Send + Sync>>> From<E> for MainError {
    fn from(error: E) -> Self {
        MainError(error.into())
    }
}

/// The message, then each cause on a line of its own.
impl fmt::Debug for MainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, "\n  caused by: {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

impl fmt::Display for MainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn prints_the_message_and_its_causes_not_the_debug_form() {
        let e: MainError =
            io::Error::new(io::ErrorKind::AddrInUse, "cannot listen on 127.0.0.1:1").into();
        assert_eq!(format!("{e:?}"), "cannot listen on 127.0.0.1:1");

        #[derive(Debug)]
        struct Outer(io::Error);
        impl fmt::Display for Outer {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("cannot load the certificate")
            }
        }
        impl Error for Outer {
            fn source(&self) -> Option<&(dyn Error + 'static)> {
                Some(&self.0)
            }
        }
        let e: MainError = Outer(io::Error::new(
            io::ErrorKind::NotFound,
            "cert.pem: no such file",
        ))
        .into();
        assert_eq!(
            format!("{e:?}"),
            "cannot load the certificate\n  caused by: cert.pem: no such file"
        );

        let e: MainError = "no port given".into();
        assert_eq!(format!("{e:?}"), "no port given");
    }
}
