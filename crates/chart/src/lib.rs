//! What the tools' charts share (disk-bench's series, analyze's plots):
//! the font. plotters is built without its system-font stack (font-kit,
//! fontconfig) and lays out text with `ab_glyph` from a TrueType file read
//! at run time: DejaVu Sans (Debian's `fonts-dejavu-core`) or Liberation
//! Sans where they are usually installed, or the file named by
//! `WIREVAULT_FONT`. Even SVG needs it (text is measured to lay it out).

use plotters::style::FontStyle;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where a sans-serif TrueType font is looked for (first found wins).
pub const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
];

/// Loads and registers the font once; the path it came from, or why not.
pub fn font() -> Result<&'static Path, String> {
    static FONT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let candidates: Vec<PathBuf> = match std::env::var_os("WIREVAULT_FONT") {
            Some(p) => vec![PathBuf::from(p)],
            None => FONT_PATHS.iter().map(PathBuf::from).collect(),
        };
        for p in candidates {
            if let Ok(bytes) = std::fs::read(&p) {
                // Registered fonts live for the whole process (plotters wants 'static).
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return Ok(p);
                }
            }
        }
        Err(match std::env::var_os("WIREVAULT_FONT") {
            Some(p) => format!("WIREVAULT_FONT={} is not a readable TrueType font", PathBuf::from(p).display()),
            None => "the plot needs a TrueType font and none was found (install fonts-dejavu-core, or set WIREVAULT_FONT=FILE.ttf)".into(),
        })
    })
    .as_ref()
    .map(|p| p.as_path())
    .map_err(Clone::clone)
}
