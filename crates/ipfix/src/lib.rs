//! IPFIX export of flow records (issue 47, docs/ipfix.md): [`encode`] makes RFC 7011 messages
//! with RFC 5103 biflow elements by hand (no crate writes IPFIX well), [`export`] sends them to
//! a collector on a thread of its own, never slowing the recorder's writer.
#![deny(unsafe_code)]

pub mod encode;
pub mod export;

pub use encode::Encoder;
pub use export::{Destination, ExportConfig, Exporter, Transport};
