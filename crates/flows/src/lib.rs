//! Flow records: one per connection (or per active-timeout slice of a long one), made where
//! the recorder's index keys are made (the writer's walk of each file, never the capture
//! thread), and written beside the packets or exported (DESIGN.md, "Flow records").
#![deny(unsafe_code)]

pub mod clickhouse;
pub mod filter;
pub mod find;
pub mod parquet;
pub mod record;
pub mod table;
pub mod tap;

pub use record::{Direction, EndReason, FlowRecord, IpAddr16};
pub use table::{FlowConfig, FlowTable};
