//! Kernel interfaces for wirevault: AF_PACKET capture rings, cBPF programs, network interface
//! facts, aligned memory, O_DIRECT/io_uring files, CPU affinity. All of wirevault's `unsafe`
//! code lives in this crate.

pub mod afpacket;
pub mod bpf;
pub mod byte_ring;
pub mod cpu;
pub mod fs;
pub mod mem;
pub mod netif;
pub mod pipe;
pub mod uring;
