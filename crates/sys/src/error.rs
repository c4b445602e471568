//! The error type of the kernel interfaces that capture uses (AF_PACKET
//! sockets, interface ioctls). It lives in its own module so that
//! `afpacket` and `netif` both use it without importing each other.

use std::io;

/// Why a capture socket could not be opened or read. Each message is one sentence a user can act on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The interface does not exist (in this network namespace).
    #[error("no network interface named {0}; `ip link` lists them")]
    NoSuchInterface(String),
    /// `socket(AF_PACKET)` was refused.
    #[error("capturing needs root or CAP_NET_RAW")]
    PermissionDenied,
    /// The interface is administratively down (at open), or went down or away (while reading).
    #[error("network interface {0} is down; bring it up with `ip link set {0} up`")]
    InterfaceDown(String),
    /// A `RingConfig` the kernel cannot map.
    #[error("invalid capture ring configuration: {0}")]
    InvalidConfig(String),
    /// Any other system call failure.
    #[error("{what}: {source}")]
    Os {
        /// What was being done, e.g. "mapping the capture ring".
        what: &'static str,
        /// The OS error.
        source: io::Error,
    },
}

impl Error {
    /// An `Os` error from `errno`.
    pub(crate) fn os(what: &'static str) -> Error {
        Error::Os { what, source: io::Error::last_os_error() }
    }
}
