//! `wirevault record`.

/// Arguments of `wirevault record`.
#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<u8> {
    Err(crate::fail(crate::exit::ERROR, "not implemented yet"))
}
