//! One module per subcommand: clap arguments, validation, wiring.
pub mod docs;
pub mod index;
pub mod query;
pub mod record;
pub mod repair;
