//! wv-wire's integration tests, in one test binary: the reader against
//! libpcap and the dissector against tshark, both on tcpdump's corpus.

mod corpus;
mod dissect_tshark;
