//! `wirevault generate-docs DIR` (hidden): man pages and shell completions
//! generated from the clap definitions, so they never disagree with
//! `--help`. `scripts/install.sh` runs it and installs the results.

use crate::{exit, fail};
use clap::CommandFactory;
use std::path::{Path, PathBuf};

/// Arguments of `wirevault generate-docs`.
#[derive(clap::Args)]
pub struct Args {
    /// Output directory: writes DIR/man/*.1 and DIR/completions/{wirevault.bash,_wirevault,wirevault.fish}.
    pub dir: PathBuf,
}

fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::write(path, bytes).map_err(|e| fail(exit::ERROR, format!("cannot write {}: {e}", path.display())))
}

pub fn run(a: Args) -> anyhow::Result<u8> {
    let man = a.dir.join("man");
    let comp = a.dir.join("completions");
    for d in [&man, &comp] {
        std::fs::create_dir_all(d).map_err(|e| fail(exit::ERROR, format!("cannot create {}: {e}", d.display())))?;
    }
    let mut cmd = crate::Cli::command();
    cmd.build();
    // wirevault.1, then wirevault-record.1 etc. for every visible subcommand.
    let mut pages = vec![(String::from("wirevault"), cmd.clone())];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        // clap names are &'static str; this runs once per page of a short-lived process.
        let name: &'static str = Box::leak(format!("wirevault-{}", sub.get_name()).into_boxed_str());
        pages.push((name.to_string(), sub.clone().name(name)));
    }
    for (name, c) in pages {
        let mut buf = Vec::new();
        clap_mangen::Man::new(c).render(&mut buf).map_err(|e| fail(exit::ERROR, e.to_string()))?;
        write(&man.join(format!("{name}.1")), &buf)?;
    }
    use clap_complete::Shell;
    for (shell, file) in [(Shell::Bash, "wirevault.bash"), (Shell::Zsh, "_wirevault"), (Shell::Fish, "wirevault.fish")]
    {
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut cmd, "wirevault", &mut buf);
        write(&comp.join(file), &buf)?;
    }
    Ok(exit::OK)
}
