use super::*;

const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

fn problems(dir: &Path) -> Vec<String> {
    match verify(dir).unwrap_err() {
        BundleError::Tampered { problems, .. } => problems,
        other => panic!("{other}"),
    }
}

#[test]
fn sums_catch_changed_missing_and_added_files() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::create_dir(d.join("raw")).unwrap();
    std::fs::write(d.join("a.txt"), "abc").unwrap();
    std::fs::write(d.join("raw/b.json"), "[]").unwrap();
    write_sums(d).unwrap();
    let sums = std::fs::read_to_string(d.join(SUMS_FILE)).unwrap();
    assert_eq!(sums.lines().next().unwrap(), format!("{ABC}  a.txt"));
    assert!(sums.contains("  raw/b.json\n"));
    verify(d).unwrap();
    // The signature is not covered by the sums it signs.
    std::fs::write(d.join(SIG_FILE), "sig").unwrap();
    verify(d).unwrap();
    write_sums(d).unwrap();
    assert_eq!(std::fs::read_to_string(d.join(SUMS_FILE)).unwrap(), sums);

    std::fs::write(d.join("a.txt"), "abd").unwrap();
    std::fs::write(d.join("raw/new"), "x").unwrap();
    std::fs::remove_file(d.join("raw/b.json")).unwrap();
    assert_eq!(
        problems(d),
        vec![
            "a.txt does not match its checksum".to_string(),
            "raw/b.json is missing".to_string(),
            "raw/new is not listed in SHA256SUMS".to_string(),
        ]
    );
    // No SHA256SUMS: the bench run never sealed it, which is not a change after sealing.
    std::fs::remove_file(d.join(SUMS_FILE)).unwrap();
    let err = verify(d).unwrap_err();
    assert!(
        matches!(
            err,
            BundleError::Unfinished {
                has_note: false,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("did not finish"), "{err}");
    assert!(!err.to_string().contains("changed after"), "{err}");
    std::fs::write(d.join(crate::bundle::INCOMPLETE_FILE), "x").unwrap();
    assert!(
        verify(d)
            .unwrap_err()
            .to_string()
            .contains("INCOMPLETE note")
    );
}

#[test]
fn sums_naming_paths_outside_the_bundle_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("b");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(tmp.path().join("x"), "abc").unwrap();
    std::fs::write(d.join("a.txt"), "abc").unwrap();
    let outside = tmp.path().join("x");
    for rel in ["../x", outside.to_str().unwrap(), "./a.txt", ""] {
        std::fs::write(d.join(SUMS_FILE), format!("{ABC}  a.txt\n{ABC}  {rel}\n")).unwrap();
        let err = verify(&d).unwrap_err();
        assert!(matches!(err, BundleError::Tampered { .. }), "{rel}: {err}");
        assert!(
            err.to_string().contains("a path outside the bundle"),
            "{rel}: {err}"
        );
    }
}

#[test]
fn binary_mode_lines_are_read_and_malformed_ones_named() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("a.txt"), "abc").unwrap();
    std::fs::write(d.join("b c.txt"), "abc").unwrap();
    // As `sha256sum -b` writes them, upper-case hex as some tools do.
    let upper = ABC.to_uppercase();
    std::fs::write(
        d.join(SUMS_FILE),
        format!("{ABC} *a.txt\n{upper}  b c.txt\n"),
    )
    .unwrap();
    verify(d).unwrap();
    for bad in [
        format!("{ABC} a.txt"),
        format!("{ABC}\ta.txt"),
        format!("{}  a.txt", &ABC[1..]),
        format!("{}g  a.txt", &ABC[1..]),
    ] {
        std::fs::write(d.join(SUMS_FILE), format!("{bad}\n{ABC}  b c.txt\n")).unwrap();
        let p = problems(d);
        assert!(
            p[0].contains("line 1 is not `HASH  PATH`"),
            "{bad:?}: {p:?}"
        );
        assert!(p[1].contains("a.txt is not listed"), "{bad:?}: {p:?}");
    }
}

#[test]
fn links_special_files_and_a_folder_as_sums_are_refused() {
    use std::os::unix::fs::symlink;
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("b");
    std::fs::create_dir_all(d.join("raw")).unwrap();
    std::fs::write(tmp.path().join("outside.json"), "[]").unwrap();
    std::fs::write(d.join("raw/a.json"), "[]").unwrap();
    write_sums(&d).unwrap();
    verify(&d).unwrap();

    // A raw file replaced by a link out of the bundle, to a file of the same contents.
    std::fs::remove_file(d.join("raw/a.json")).unwrap();
    symlink(tmp.path().join("outside.json"), d.join("raw/a.json")).unwrap();
    let p = problems(&d);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].starts_with("raw/a.json is a symbolic link"), "{p:?}");
    // Sealing never follows one either: it is not a file of the bundle.
    std::fs::remove_file(d.join("raw/a.json")).unwrap();
    std::fs::write(d.join("raw/a.json"), "[]").unwrap();

    // A linked folder.
    symlink(tmp.path(), d.join("raw/up")).unwrap();
    let p = problems(&d);
    assert!(p[0].starts_with("raw/up is a symbolic link"), "{p:?}");
    std::fs::remove_file(d.join("raw/up")).unwrap();

    // A FIFO is never opened.
    let fifo = d.join("raw/pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let p = problems(&d);
    assert!(p[0].starts_with("raw/pipe is not a regular file"), "{p:?}");
    std::fs::remove_file(&fifo).unwrap();

    // A listed path that is a folder.
    std::fs::write(
        d.join(SUMS_FILE),
        format!(
            "{ABC}  raw\n{}",
            std::fs::read_to_string(d.join(SUMS_FILE)).unwrap()
        ),
    )
    .unwrap();
    assert_eq!(
        problems(&d),
        vec!["raw is a folder, not a file".to_string()]
    );

    // SHA256SUMS itself a folder: changed, not unreadable.
    std::fs::remove_file(d.join(SUMS_FILE)).unwrap();
    std::fs::create_dir(d.join(SUMS_FILE)).unwrap();
    let p = problems(&d);
    assert_eq!(
        p,
        vec!["SHA256SUMS is a folder, not the checksum file".to_string()]
    );
}

#[test]
fn hashing_can_be_stopped_between_blocks() {
    let data = vec![7u8; 3 << 20];
    let mut seen = Vec::new();
    let whole = sha256_reader(&data[..], &mut |n| {
        seen.push(n);
        true
    })
    .unwrap()
    .unwrap();
    assert_eq!(whole, hex(&Sha256::digest(&data)));
    assert_eq!(seen.last(), Some(&(3 << 20)));
    let stopped = sha256_reader(&data[..], &mut |n| n < 1 << 20).unwrap();
    assert_eq!(stopped, None);
}
