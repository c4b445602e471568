//! `wirevault query`.

/// Arguments of `wirevault query`.
#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<u8> {
    Err(crate::fail(crate::exit::ERROR, "not implemented yet"))
}
