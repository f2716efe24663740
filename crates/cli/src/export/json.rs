//! `summary.json` / `--json`: the whole [`Summary`], pretty-printed.

use super::{ExportError, Exporter};
use crate::analysis::Summary;

/// JSON output.
pub struct Json;

impl Exporter for Json {
    fn file_name(&self) -> &'static str {
        "summary.json"
    }

    fn render(&self, summary: &Summary) -> Result<String, ExportError> {
        let mut text = serde_json::to_string_pretty(summary)?;
        text.push('\n');
        Ok(text)
    }
}
