//! The `wirevault` binary's integration tests, in one test binary (as
//! ripgrep's `tests/tests.rs`): one module per area, one set of helpers in
//! [`util`].

#![allow(unused_doc_comments)] // a test's doc comment sits on its `wvtest!`, for the reader

mod util;

mod analyze;
mod analyze_impaired;
mod analyze_select;
mod analyze_tcp;
mod analyze_tunnels;
mod cli_conventions;
mod console;
mod disk_bench;
mod docs;
mod fanout_order;
mod filters;
mod fleet;
mod fleet_faults;
mod fleet_lab;
mod fleet_lab_query;
mod flows;
mod flows_api;
mod flows_budget;
mod flows_clickhouse;
mod flows_ipfix;
mod flows_packets;
mod index_integrity;
mod install;
mod live_faults;
mod plan;
mod privileges;
mod query_cli;
mod query_hardening;
mod query_live;
mod record_arena;
mod record_hwstamps;
mod record_live;
mod record_read;
mod record_reduce;
mod record_start;
mod record_synthetic;
mod record_xdp;
mod record_zerocopy;
mod record_zerocopy_inflight;
mod replay;
mod replay_fleet;
mod reports;
mod serve_api;
mod serve_config;
mod serve_export;
mod serve_hosts;
mod serve_security;
mod serve_store;
mod serve_transfer;
mod serve_volumes;
mod service;
mod signals;
mod store_faults;
mod store_repair;
mod store_safety;
mod timestamps;
mod timestamps_fleet;
mod tune;
mod units_grammar;
mod volumes;
