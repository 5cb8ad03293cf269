//! [`Message`]: one whole WebSocket data message, text or binary.

use bytes::Bytes;

/// A whole data message: text (always valid UTF-8) or binary. Its
/// payload is a [`Bytes`], so a message received can be sent on, or to
/// many connections, without a copy.
#[derive(Clone, PartialEq, Eq)]
pub struct Message {
    data: Bytes,
    text: bool,
}

impl Message {
    /// A text message.
    pub fn text(text: impl Into<String>) -> Message {
        Message {
            data: Bytes::from(text.into()),
            text: true,
        }
    }

    /// A binary message.
    pub fn binary(data: impl Into<Bytes>) -> Message {
        Message {
            data: data.into(),
            text: false,
        }
    }

    /// A message the decoder checked (text is valid UTF-8).
    pub(crate) fn decoded(text: bool, data: Bytes) -> Message {
        Message { data, text }
    }

    /// Whether it is a text message.
    pub fn is_text(&self) -> bool {
        self.text
    }

    /// The text of a text message; `None` for a binary one.
    pub fn as_text(&self) -> Option<&str> {
        if !self.text {
            return None;
        }
        // Checked when received or made from a `String`.
        std::str::from_utf8(&self.data).ok()
    }

    /// The payload.
    pub fn as_bytes(&self) -> &[u8] {
        &self.data
    }

    /// The payload, as the shared buffer it is.
    pub fn into_bytes(self) -> Bytes {
        self.data
    }

    /// The payload's length in bytes.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Message")
            .field("text", &self.text)
            .field("len", &self.data.len())
            .finish()
    }
}
