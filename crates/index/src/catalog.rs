//! A store's `catalog.jsonl`: one JSON object per closed capture file
//! (layout in DESIGN.md). Unknown keys are ignored when reading; writing
//! replaces the whole file atomically (`catalog.jsonl.part`, fsync, rename).

use crate::IndexError;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

/// Name of the catalog file in a store.
pub const CATALOG_FILE: &str = "catalog.jsonl";

/// One closed capture file of a store. Field order is the line's key order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub stream: u32,
    /// Capture file, relative to the store.
    pub file: String,
    /// Index file, relative to the store; `None` when not indexed.
    pub index: Option<String>,
    /// "pcap" or "pcapng".
    pub format: String,
    pub linktype: u32,
    pub snaplen: u32,
    pub first_ns: u64,
    pub last_ns: u64,
    pub packets: u64,
    pub bytes: u64,
}

/// Reads the catalog of the store at `store`.
pub fn read(store: &Path) -> Result<Vec<Entry>, IndexError> {
    let path = store.join(CATALOG_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| IndexError::Io { path: path.clone(), source: e })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let e: Entry = serde_json::from_str(line).map_err(|e| IndexError::Catalog {
            path: path.clone(),
            line: i + 1,
            problem: e.to_string(),
        })?;
        out.push(e);
    }
    Ok(out)
}

/// Replaces the catalog of `store` with `entries`, atomically.
pub fn write(store: &Path, entries: &[Entry]) -> Result<(), IndexError> {
    let path = store.join(CATALOG_FILE);
    let part = store.join(format!("{CATALOG_FILE}.part"));
    let mut text = String::new();
    for e in entries {
        // Serialising plain strings and integers cannot fail.
        text.push_str(&serde_json::to_string(e).unwrap_or_default());
        text.push('\n');
    }
    let io = |e| IndexError::Io { path: path.clone(), source: e };
    let mut f = std::fs::File::create(&part).map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&part, &path).map_err(io)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_round_trip_and_unknown_keys() {
        let line = r#"{"stream":0,"file":"stream-000/a.pcap","index":null,"format":"pcap","linktype":1,"snaplen":262144,"first_ns":1,"last_ns":2,"packets":3,"bytes":4,"future":true}"#;
        let e: Entry = serde_json::from_str(line).unwrap();
        assert_eq!(e.index, None);
        let back = serde_json::to_string(&e).unwrap();
        assert!(back.starts_with(r#"{"stream":0,"file":"stream-000/a.pcap","index":null,"format":"pcap","#));
    }
}
