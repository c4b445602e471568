//! wv-query's integration tests, one binary (ripgrep's layout): the query
//! against real captures of tcpdump's test corpus, indexed. Helpers are in
//! `util`; the corpus and scratch directories come from `wv_testkit`.

mod util;

mod narrowing;
mod oracle;
