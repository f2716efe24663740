//! `capshim selftest` on the experiment layer, as bench and verify run on it: a signal passed
//! on to the running probe leaves the bundle unsealed with an INCOMPLETE note; `--sign` is
//! checked before anything runs and signs the sealed bundle; bundles of layout 1 (the
//! selftest's own machine record, before the layer's; saved in `tests/fixtures/selftest`) are
//! still derived by `report`.
//!
//! Needs the shim built (`cargo build -p capshim`), as selftest_simguest.rs.
#![cfg(target_os = "linux")]

mod common;

use std::path::Path;

use capshim_simguest::guest;
use common::{INJECTION_VAR, read, real_shim, reseal};
use predicates::prelude::*;

fn capshim() -> assert_cmd::Command {
    real_shim();
    common::capshim()
}

fn probe() -> String {
    guest().unwrap().probe.display().to_string()
}

fn keygen(dir: &Path) -> std::path::PathBuf {
    let key = dir.join("key");
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .status()
        .expect("ssh-keygen (OpenSSH's client)");
    assert!(made.success());
    key
}

/// Runs `capshim selftest ARGS` with a probe that hangs, sends `signal` once the probe runs,
/// and returns the exit code and stderr, with the probe's pid (gone by then).
fn stopped_by(
    tmp: &Path,
    signal: nix::sys::signal::Signal,
    args: &[&std::ffi::OsStr],
) -> (Option<i32>, String, Vec<u8>) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    use std::os::unix::fs::PermissionsExt;
    use std::time::{Duration, Instant};

    real_shim();
    let pid_file = tmp.join("probe.pid");
    // A probe that says it started, then waits far longer than the test.
    let hang = tmp.join("hang-probe");
    std::fs::write(
        &hang,
        format!(
            "#!/bin/sh\necho $$ > {}.tmp && mv {0}.tmp {0}\nexec sleep 60\n",
            pid_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hang, std::fs::Permissions::from_mode(0o755)).unwrap();
    let scratch = tmp.join("tmpdir");
    std::fs::create_dir(&scratch).unwrap();
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("capshim"));
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if name.starts_with("CAPSHIM_") || name == INJECTION_VAR {
            cmd.env_remove(name);
        }
    }
    let mut child = cmd
        .env("TMPDIR", &scratch)
        .arg("selftest")
        .arg("--probe")
        .arg(&hang)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !pid_file.exists() {
        assert!(Instant::now() < deadline, "the probe never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let probe: i32 = read(&pid_file).trim().parse().unwrap();
    kill(Pid::from_raw(child.id() as i32), signal).unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = kill(Pid::from_raw(probe), Signal::SIGKILL);
            child.kill().unwrap();
            panic!("capshim selftest did not stop on {signal}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = child.wait_with_output().unwrap();
    // The probe was stopped, not orphaned.
    assert!(
        kill(Pid::from_raw(probe), None).is_err(),
        "the probe (pid {probe}) still runs"
    );
    // Nothing is left in the temporary directory (the scratch bundle without -o).
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
    (
        status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        output.stdout,
    )
}

#[test]
fn a_signal_stops_the_probe_and_leaves_an_unsealed_bundle_with_a_note() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bundle");
    let (code, stderr, stdout) = stopped_by(
        tmp.path(),
        nix::sys::signal::Signal::SIGTERM,
        &["-o".as_ref(), out.as_os_str()],
    );
    assert_eq!(code, Some(143), "{stderr}");
    assert!(
        stderr.contains("interrupted by SIGTERM") && stderr.contains("INCOMPLETE"),
        "{stderr}"
    );
    assert!(stdout.is_empty(), "no checks are printed");
    assert!(!out.join("SHA256SUMS").exists());
    assert!(!out.join("checks.json").exists());
    let note = read(&out.join("INCOMPLETE"));
    assert!(note.contains("capshim selftest"), "{note}");
    assert!(
        note.contains("Step cut short (its raw files are partial):\n  probe"),
        "{note}"
    );
    assert!(note.contains("interrupted by SIGTERM"), "{note}");
    // An unsealed bundle is refused by report.
    capshim().arg("report").arg(&out).assert().failure();
}

#[test]
fn without_a_bundle_a_signal_stops_the_probe_and_keeps_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, stderr, stdout) = stopped_by(tmp.path(), nix::sys::signal::Signal::SIGINT, &[]);
    assert_eq!(code, Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted by SIGINT") && stderr.contains("nothing was kept"),
        "{stderr}"
    );
    assert!(!stderr.contains("INCOMPLETE"), "{stderr}");
    assert!(stdout.is_empty());
}

#[test]
fn a_selftest_bundle_is_signed_when_sealed_and_a_bad_key_stops_it_first() {
    let tmp = tempfile::tempdir().unwrap();
    let key = keygen(tmp.path());
    let allowed = tmp.path().join("allowed");
    std::fs::write(
        &allowed,
        format!("me@example.com {}", read(&key.with_extension("pub"))),
    )
    .unwrap();
    let out = tmp.path().join("signed");
    capshim()
        .args(["selftest", "--probe", &probe(), "-o"])
        .arg(&out)
        .arg("--sign")
        .arg(&key)
        .assert()
        .code(0)
        .stderr(predicate::str::contains("capshim: signed: "));
    assert!(read(&out.join("SHA256SUMS.sig")).starts_with("-----BEGIN SSH SIGNATURE-----"));
    capshim()
        .arg("report")
        .arg("--allowed-signers")
        .arg(&allowed)
        .args(["--identity", "me@example.com"])
        .arg(&out)
        .assert()
        .success()
        .stdout(read(&out.join("report.md")))
        .stderr(predicate::str::contains(
            "Good \"capshim-bundle\" signature",
        ));

    // A key that cannot sign: refused before the probe runs, and no bundle is made.
    let not_a_key = tmp.path().join("not-a-key");
    std::fs::write(&not_a_key, "hello\n").unwrap();
    let never = tmp.path().join("never");
    capshim()
        .args(["selftest", "--probe", &probe(), "-o"])
        .arg(&never)
        .arg("--sign")
        .arg(&not_a_key)
        .assert()
        .code(1);
    assert!(!never.exists());
    // --sign without a bundle is a usage error.
    capshim()
        .args(["selftest", "--sign"])
        .arg(&key)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--output"));
}

#[test]
fn a_bundle_of_layout_1_is_still_derived() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("b");
    capshim()
        .args(["selftest", "--json", "--probe", &probe(), "-o"])
        .arg(&dir)
        .assert()
        .code(0);
    let env_file = dir.join("environment.json");
    let mut env: serde_json::Value = serde_json::from_str(&read(&env_file)).unwrap();
    assert_eq!(env["schema_version"], 2);
    assert!(env["machine"]["kernel"].is_string(), "{}", env["machine"]);
    // Layout 1's header: its own machine record; the manifest and raw files as now.
    env["schema_version"] = 1.into();
    env["machine"] = serde_json::json!({
        "os": "linux", "arch": "x86_64", "cpu_brand": null, "os_version": null
    });
    std::fs::write(
        &env_file,
        serde_json::to_string_pretty(&env).unwrap() + "\n",
    )
    .unwrap();
    reseal(&dir);
    capshim()
        .args(["report", "--json"])
        .arg(&dir)
        .assert()
        .success()
        .stdout(read(&dir.join("checks.json")));
}

/// Layout-1 bundles saved from the capshim before the layer (`tests/fixtures/selftest`, never
/// regenerated) pass `capshim report` byte for byte.
#[test]
fn saved_layout_1_bundles_are_derived_again_byte_for_byte() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/selftest");
    let mut dirs: Vec<std::path::PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    for dir in dirs {
        assert!(read(&dir.join("environment.json")).contains("\"schema_version\": 1"));
        capshim()
            .arg("report")
            .arg(&dir)
            .assert()
            .code(0)
            .stdout(read(&dir.join("report.md")));
        capshim()
            .args(["report", "--json"])
            .arg(&dir)
            .assert()
            .code(0)
            .stdout(read(&dir.join("checks.json")));
    }
}
