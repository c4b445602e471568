//! Kernel interfaces for wirevault: AF_PACKET capture rings, cBPF programs, network interface
//! facts, aligned memory, O_DIRECT/io_uring files, CPU affinity. All of wirevault's `unsafe`
//! code lives in this crate, and every `unsafe` block says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod aeshash;
pub mod afpacket;
pub mod bpf;
pub mod byte_ring;
pub mod cpu;
pub mod error;
pub mod ethtool;
pub mod fs;
pub mod mem;
pub mod netif;
pub mod pipe;
pub mod rtnl;
pub mod signal;
pub mod sock;
pub mod tsinfo;
pub mod uring;
pub mod xdp;
