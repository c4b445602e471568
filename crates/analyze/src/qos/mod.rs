//! Quality of service: throughput over time ([`io`]), TCP sequence
//! analysis and handshake RTT ([`tcp`]), RTP streams' jitter and loss ([`rtp`]).
pub mod io;
pub mod rtp;
pub mod tcp;
