//! Bundles written by earlier capshims (`tests/fixtures/bundles`, never regenerated) pass
//! `capshim report` now: their checksums hold, their layout is one this capshim derives, and
//! every derived file comes out byte for byte as the capshim that sealed them wrote it.
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};

use common::{capshim, read};

fn saved() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bundles");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn every_saved_bundle_is_derived_again_byte_for_byte() {
    let dirs = saved();
    assert!(dirs.len() >= 4, "{dirs:?}");
    for dir in dirs {
        // The Markdown report, and with --json the summary: each derived again and compared
        // with every derived file before it is printed.
        capshim()
            .arg("report")
            .arg(&dir)
            .assert()
            .code(0)
            .stdout(read(&dir.join("report.md")));
        let bench = read(&dir.join("environment.json")).contains("\"kind\": \"bench\"");
        if !bench {
            capshim()
                .args(["report", "--json"])
                .arg(&dir)
                .assert()
                .code(0)
                .stdout(read(&dir.join("summary.json")));
        } else {
            // Shown as its own layout derives it: its summary's number, not this capshim's.
            let json = capshim()
                .args(["report", "--json"])
                .arg(&dir)
                .assert()
                .code(0);
            let shown: serde_json::Value =
                serde_json::from_slice(&json.get_output().stdout).unwrap();
            let own: serde_json::Value =
                serde_json::from_str(&read(&dir.join("summary.json"))).unwrap();
            assert_eq!(
                shown["schema_version"],
                own["schema_version"],
                "{}",
                dir.display()
            );
            for (flag, file) in [("--csv", "results.csv"), ("--svg", "chart.svg")] {
                capshim()
                    .args(["report", flag])
                    .arg(&dir)
                    .assert()
                    .code(0)
                    .stdout(read(&dir.join(file)));
            }
        }
    }
}
