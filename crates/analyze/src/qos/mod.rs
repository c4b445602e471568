//! Quality of service: throughput over time ([`io`]), TCP sequence
//! analysis and handshake RTT ([`tcp`]), RTP streams' jitter and loss ([`rtp`]),
//! the inter-arrival jitter of other UDP streams ([`udp`]).
pub mod io;
pub mod rtp;
pub mod tcp;
pub mod udp;
