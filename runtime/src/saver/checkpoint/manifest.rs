//! The manifest: each file's length and CRC-32C, and the manifest's own checksum.

use serde::{Deserialize, Serialize};

/// A checkpoint's `manifest.json`, written last.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Manifest {
    pub(super) format: u64,
    pub(super) epoch_num: u64,
    pub(super) global_step: u64,
    /// Seconds since the Unix epoch when it was written.
    pub(super) time: f64,
    pub(super) files: std::collections::BTreeMap<String, FileSum>,
    /// The run that wrote it (absent before runs were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) run: Option<String>,
    /// CRC-32C of the manifest itself: from format 2 on, of the file's bytes before the line
    /// holding this member, the last one (see [`Manifest::seal`]); in format 1, of its compact
    /// JSON without this field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) checksum: Option<u32>,
}

/// The last line of a manifest of format 2 or later, `checksum` its CRC-32C.
fn checksum_tail(checksum: u32) -> String {
    format!("  \"checksum\": {checksum}\n}}\n")
}

impl Manifest {
    /// The manifest's bytes: its JSON with `checksum` as the last member, on a line of its own,
    /// holding the CRC-32C of every byte before that line. A reader verifies the bytes it reads,
    /// whatever the order of the other members (which serde_json's `preserve_order` feature,
    /// enabled by any crate of a build, changes).
    pub(super) fn seal(&self) -> std::io::Result<Vec<u8>> {
        debug_assert!(self.checksum.is_none());
        let body = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        let Some(open) = body.strip_suffix(b"\n}") else {
            return Err(std::io::Error::other("the manifest's JSON does not end with `}`"));
        };
        let mut sealed = open.to_vec();
        sealed.extend_from_slice(b",\n");
        let checksum = crc32c::crc32c(&sealed);
        sealed.extend_from_slice(checksum_tail(checksum).as_bytes());
        Ok(sealed)
    }

    /// Whether `bytes`, read as this manifest, pass its own checksum.
    pub(super) fn verifies(&self, bytes: &[u8]) -> bool {
        let Some(checksum) = self.checksum else { return false };
        if self.format == 1 {
            return checksum == self.format_1_checksum();
        }
        let tail = checksum_tail(checksum);
        bytes.strip_suffix(tail.as_bytes()).is_some_and(|body| crc32c::crc32c(body) == checksum)
    }

    /// Format 1's checksum: of the compact JSON re-serialized without the checksum.
    pub(super) fn format_1_checksum(&self) -> u32 {
        let mut unsigned = serde_json::to_value(self).unwrap_or_default();
        if let Some(object) = unsigned.as_object_mut() {
            object.remove("checksum");
        }
        crc32c::crc32c(unsigned.to_string().as_bytes())
    }
}

/// A file's length and CRC-32C, as the manifest lists it.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub(super) struct FileSum {
    pub(super) len: u64,
    pub(super) crc32c: u32,
}
