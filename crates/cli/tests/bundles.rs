//! Evidence bundles as a reader receives them: signatures made and checked with OpenSSH's
//! ssh-keygen (a key generated here), what SHA256SUMS refuses (links out of the bundle,
//! unreadable files, a folder), and what `capshim report` refuses as input (the same file or
//! bundle twice, FIFOs and devices), and its end on a closed pipe. Bundles come from the fake
//! llama-bench, so every test is quick.
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{
    assert_report_refuses, bench, capshim, fake_llama_bench, fake_model, read, reseal, result,
    write_json,
};
use predicates::prelude::*;

/// A sealed A/A bundle (no shim needed) at `dir/name`, with `extra` bench options.
fn bundle(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let llama = dir.join("llama-bench");
    if !llama.exists() {
        fake_llama_bench(dir);
        fake_model(dir);
    }
    let out = dir.join(name);
    bench(&llama, &dir.join("fake.gguf"))
        .args([
            "--profile",
            "again=stock",
            "-r",
            "3",
            "-p",
            "64",
            "-n",
            "16",
        ])
        .args(["--rounds", "2", "-o"])
        .arg(&out)
        .args(extra)
        .assert()
        .success();
    out
}

/// An ed25519 key without passphrase, `dir/key` and `dir/key.pub`, and an allowed-signers file
/// `dir/allowed` naming it `tester@example.com`.
fn key(dir: &Path) -> (PathBuf, PathBuf) {
    let key = dir.join("key");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "tester", "-f"])
        .arg(&key)
        .status()
        .expect("ssh-keygen (OpenSSH's client) is needed for the signature tests");
    assert!(made.success());
    let allowed = dir.join("allowed");
    std::fs::write(
        &allowed,
        format!("tester@example.com {}", read(&key.with_extension("pub"))),
    )
    .unwrap();
    (key, allowed)
}

fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for sub in [dir.to_path_buf(), dir.join("raw")] {
        for e in std::fs::read_dir(&sub).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// `capshim sign BUNDLE --key KEY`.
fn sign(bundle: &Path, key: &Path) -> assert_cmd::Command {
    let mut cmd = capshim();
    cmd.arg("sign").arg(bundle).arg("--key").arg(key);
    cmd
}

fn report_signed(bundle: &Path, allowed: &Path, identity: &str) -> assert_cmd::assert::Assert {
    capshim()
        .arg("report")
        .arg("--allowed-signers")
        .arg(allowed)
        .args(["--identity", identity])
        .arg(bundle)
        .assert()
}

#[test]
fn a_signed_bundle_round_trips_and_a_changed_signed_file_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let (key, allowed) = key(tmp.path());
    let out = bundle(tmp.path(), "signed", &["--sign", key.to_str().unwrap()]);
    let sig = read(&out.join("SHA256SUMS.sig"));
    assert!(sig.starts_with("-----BEGIN SSH SIGNATURE-----"), "{sig}");
    // The signature is not in the sums it signs; every other file is.
    assert!(!read(&out.join("SHA256SUMS")).contains("SHA256SUMS.sig"));
    let report = read(&out.join("report.md"));
    report_signed(&out, &allowed, "tester@example.com")
        .success()
        .stdout(report.clone())
        .stderr(predicate::str::contains(
            "Good \"capshim-bundle\" signature for tester@example.com",
        ));
    // Without the signer options a signed bundle is reported, with a note that it is signed.
    capshim()
        .arg("report")
        .arg(&out)
        .assert()
        .success()
        .stderr(predicate::str::contains("is signed (SHA256SUMS.sig)"));
    // Another identity is not the signer.
    report_signed(&out, &allowed, "someone@example.com")
        .code(3)
        .stdout("")
        .stderr(predicate::str::contains(
            "is not a good signature of SHA256SUMS",
        ));
    // Another namespace (the same key signing the same file as a plain file) is not a bundle's.
    let other = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ssh-keygen -q -Y sign -f {} -n file < SHA256SUMS > SHA256SUMS.sig.other",
            key.display()
        ))
        .current_dir(&out)
        .status()
        .unwrap();
    assert!(other.success());
    std::fs::rename(out.join("SHA256SUMS.sig"), tmp.path().join("good.sig")).unwrap();
    std::fs::rename(out.join("SHA256SUMS.sig.other"), out.join("SHA256SUMS.sig")).unwrap();
    report_signed(&out, &allowed, "tester@example.com").code(3);
    std::fs::rename(tmp.path().join("good.sig"), out.join("SHA256SUMS.sig")).unwrap();

    // A signed file changed, SHA256SUMS regenerated to match: the checksums hold, the
    // signature does not.
    let raw = out.join("raw/stock-r1.json");
    let original = read(&raw);
    std::fs::write(&raw, original.replace("990", "500")).unwrap();
    reseal(&out);
    report_signed(&out, &allowed, "tester@example.com")
        .code(3)
        .stdout("")
        .stderr(predicate::str::contains(
            "SHA256SUMS.sig is not a good signature of SHA256SUMS by tester@example.com",
        ))
        .stderr(predicate::str::contains("do not trust it"));
    // And changed without resealing: the checksums fail first.
    std::fs::write(&raw, original).unwrap();
    report_signed(&out, &allowed, "tester@example.com")
        .code(3)
        .stderr(predicate::str::contains(
            "raw/stock-r1.json does not match its checksum",
        ));
}

#[test]
fn capshim_sign_adds_only_the_signature_and_never_replaces_one_unasked() {
    let tmp = tempfile::tempdir().unwrap();
    let (key, allowed) = key(tmp.path());
    let out = bundle(tmp.path(), "later", &[]);
    // Asked for, a missing signature is untrusted.
    report_signed(&out, &allowed, "tester@example.com")
        .code(3)
        .stderr(predicate::str::contains(
            "has no SHA256SUMS.sig: it was never signed",
        ));
    let before = files(&out);
    let sums = read(&out.join("SHA256SUMS"));
    sign(&out, &key)
        .assert()
        .success()
        .stdout(predicate::str::contains("SHA256SUMS.sig"));
    let mut expected = before.clone();
    expected.push("SHA256SUMS.sig".into());
    expected.sort();
    assert_eq!(files(&out), expected);
    assert_eq!(read(&out.join("SHA256SUMS")), sums, "nothing else changes");
    report_signed(&out, &allowed, "tester@example.com").success();

    let sig = read(&out.join("SHA256SUMS.sig"));
    sign(&out, &key)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("SHA256SUMS.sig already exists"))
        .stderr(predicate::str::contains("--replace"));
    assert_eq!(read(&out.join("SHA256SUMS.sig")), sig);
    sign(&out, &key).arg("--replace").assert().success();
    report_signed(&out, &allowed, "tester@example.com").success();

    // A key with a passphrase: ssh-keygen asks for it, here (no terminal) on stdin.
    let locked = tmp.path().join("locked");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "s3cret", "-f"])
        .arg(&locked)
        .status()
        .unwrap();
    assert!(made.success());
    sign(&out, &locked)
        .arg("--replace")
        .write_stdin("wrong\n")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("ssh-keygen could not sign"));
    sign(&out, &locked)
        .arg("--replace")
        .write_stdin("s3cret\n")
        .assert()
        .success();
    std::fs::write(
        tmp.path().join("allowed-locked"),
        format!("locked@example.com {}", read(&locked.with_extension("pub"))),
    )
    .unwrap();
    report_signed(
        &out,
        &tmp.path().join("allowed-locked"),
        "locked@example.com",
    )
    .success();
    report_signed(&out, &allowed, "tester@example.com").code(3);
    sign(&out, &key).arg("--replace").assert().success();

    // A changed bundle is never signed.
    let changed = bundle(tmp.path(), "changed", &[]);
    std::fs::write(changed.join("report.md"), "edited\n").unwrap();
    reseal(&changed);
    sign(&changed, &key)
        .assert()
        .code(3)
        .stderr(predicate::str::contains(
            "report.md does not match the raw data",
        ))
        .stderr(predicate::str::contains("it was not signed"));
    assert!(!changed.join("SHA256SUMS.sig").exists());

    // Not a key; no ssh-keygen: clear errors, before anything is written.
    sign(&out, &out.join("report.md"))
        .arg("--replace")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "is not an OpenSSH key ssh-keygen can read",
        ));
    let empty = tmp.path().join("empty-path");
    std::fs::create_dir(&empty).unwrap();
    capshim()
        .env("PATH", &empty)
        .arg("sign")
        .arg(&out)
        .arg("--key")
        .arg(&key)
        .arg("--replace")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("cannot run ssh-keygen"))
        .stderr(predicate::str::contains("install the OpenSSH client"));
    report_signed(&out, &allowed, "tester@example.com").success();
    // bench --sign with a file that is no key stops before the first run.
    let never = tmp.path().join("never");
    bench(
        &tmp.path().join("llama-bench"),
        &tmp.path().join("fake.gguf"),
    )
    .args(["--profile", "again=stock", "--sign"])
    .arg(out.join("report.md"))
    .arg("-o")
    .arg(&never)
    .assert()
    .code(1)
    .stderr(predicate::str::contains("is not an OpenSSH key"));
    assert!(!never.exists());
}

/// ssh-agent holds the key; `--sign` gets only its public half, as with git's
/// user.signingKey.
#[test]
fn a_key_held_by_ssh_agent_signs_from_its_public_key() {
    let tmp = tempfile::tempdir().unwrap();
    let (key, allowed) = key(tmp.path());
    let socket = tmp.path().join("agent.sock");
    let mut agent = Command::new("ssh-agent")
        .arg("-D")
        .arg("-a")
        .arg(&socket)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("ssh-agent (OpenSSH's client)");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !socket.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "ssh-agent did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let added = Command::new("ssh-add")
        .arg("-q")
        .arg(&key)
        .env("SSH_AUTH_SOCK", &socket)
        .status()
        .unwrap();
    // Only the agent has the private key now.
    std::fs::remove_file(&key).unwrap();
    let public = key.with_extension("pub");
    fake_llama_bench(tmp.path());
    fake_model(tmp.path());
    let signing = |out: &Path| {
        let mut cmd = bench(
            &tmp.path().join("llama-bench"),
            &tmp.path().join("fake.gguf"),
        );
        cmd.args([
            "--profile",
            "again=stock",
            "-r",
            "1",
            "--rounds",
            "1",
            "--sign",
        ])
        .arg(&public)
        .arg("-o")
        .arg(out);
        cmd
    };
    let out = tmp.path().join("agent-signed");
    let signed = signing(&out)
        .env("SSH_AUTH_SOCK", &socket)
        .assert()
        .try_success();
    // Without the agent the public key alone cannot sign: refused before the first run.
    let unsigned = tmp.path().join("no-agent");
    let no_agent = signing(&unsigned)
        .env_remove("SSH_AUTH_SOCK")
        .assert()
        .try_code(1);
    agent.kill().unwrap();
    agent.wait().unwrap();
    assert!(added.success(), "ssh-add failed");
    signed.unwrap();
    report_signed(&out, &allowed, "tester@example.com").success();
    no_agent
        .unwrap()
        .stderr(predicate::str::contains("cannot sign unattended"))
        .stderr(predicate::str::contains("nothing was run"))
        .stderr(predicate::str::contains("capshim sign"));
    assert!(!unsigned.exists());
}

/// `bench --sign` and `verify --sign` with a key that has a passphrase, and no terminal to ask
/// for it, stop before the first run instead of running everything and failing to sign.
#[test]
fn a_key_that_cannot_sign_unattended_is_refused_before_the_first_run() {
    let tmp = tempfile::tempdir().unwrap();
    let locked = tmp.path().join("locked");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "s3cret", "-f"])
        .arg(&locked)
        .status()
        .unwrap();
    assert!(made.success());
    let llama = fake_llama_bench(tmp.path());
    let model = fake_model(tmp.path());
    let out = tmp.path().join("never");
    bench(&llama, &model)
        .args([
            "--profile",
            "again=stock",
            "-r",
            "1",
            "--rounds",
            "1",
            "--sign",
        ])
        .arg(&locked)
        .arg("-o")
        .arg(&out)
        .env("SSH_AUTH_SOCK", tmp.path().join("no-agent"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("cannot sign unattended"))
        .stderr(predicate::str::contains("nothing was run"));
    assert!(!out.exists());
    capshim()
        .args(["verify", "-m"])
        .arg(&model)
        .arg("--llama-dir")
        .arg(tmp.path())
        .arg("--sign")
        .arg(&locked)
        .arg("-o")
        .arg(&out)
        .env("SSH_AUTH_SOCK", tmp.path().join("no-agent"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("cannot sign unattended"));
    assert!(!out.exists());
}

#[test]
fn sums_refuse_links_out_accept_binary_lines_and_a_folder_is_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let out = bundle(tmp.path(), "b", &[]);
    let report = read(&out.join("report.md"));
    // `sha256sum -b` writes `HASH *name`: the same checksums.
    let sums = read(&out.join("SHA256SUMS"));
    std::fs::write(out.join("SHA256SUMS"), sums.replace("  ", " *")).unwrap();
    capshim()
        .arg("report")
        .arg(&out)
        .assert()
        .success()
        .stdout(report.clone());
    std::fs::write(out.join("SHA256SUMS"), &sums).unwrap();

    // A raw file replaced by a link to a copy outside the bundle: same bytes, refused.
    let raw = out.join("raw/stock-r1.json");
    let outside = tmp.path().join("outside.json");
    std::fs::copy(&raw, &outside).unwrap();
    std::fs::remove_file(&raw).unwrap();
    std::os::unix::fs::symlink(&outside, &raw).unwrap();
    assert_report_refuses(&out, "raw/stock-r1.json is a symbolic link");
    std::fs::remove_file(&raw).unwrap();
    std::fs::copy(&outside, &raw).unwrap();

    // SHA256SUMS a folder: changed (3), not unreadable (1).
    std::fs::rename(out.join("SHA256SUMS"), tmp.path().join("sums")).unwrap();
    std::fs::create_dir(out.join("SHA256SUMS")).unwrap();
    assert_report_refuses(&out, "SHA256SUMS is a folder, not the checksum file");
    std::fs::remove_dir(out.join("SHA256SUMS")).unwrap();
    std::fs::rename(tmp.path().join("sums"), out.join("SHA256SUMS")).unwrap();
    capshim().arg("report").arg(&out).assert().success();
}

/// Runs `capshim report BUNDLE` as a user without root (root reads any file): directly when
/// the tests run as one, else through setpriv as nobody.
fn report_as_user(bundle: &Path) -> assert_cmd::assert::Assert {
    let capshim = assert_cmd::cargo::cargo_bin("capshim");
    let root = Command::new("id").arg("-u").output().unwrap().stdout == b"0\n";
    let mut cmd = if root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(capshim);
        c
    } else {
        Command::new(capshim)
    };
    cmd.arg("report").arg(bundle);
    assert_cmd::Command::from_std(cmd).assert()
}

#[test]
fn an_unreadable_bundle_file_is_an_error_with_the_os_error_not_a_change() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let out = bundle(tmp.path(), "b", &[]);
    // Everyone may read the bundle but one file.
    for dir in [tmp.path(), out.as_path(), &out.join("raw")] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    report_as_user(&out).success();
    let raw = out.join("raw/stock-r2.json");
    std::fs::set_permissions(&raw, std::fs::Permissions::from_mode(0o000)).unwrap();
    report_as_user(&out)
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains(format!(
            "cannot read {}",
            raw.display()
        )))
        .stderr(predicate::str::contains("Permission denied"))
        .stderr(predicate::str::contains("changed after").not());
    std::fs::set_permissions(&raw, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(
        out.join("SHA256SUMS"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    report_as_user(&out)
        .code(1)
        .stderr(predicate::str::contains("SHA256SUMS"))
        .stderr(predicate::str::contains("Permission denied"));
}

#[test]
fn the_same_file_or_bundle_twice_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let a = write_json(tmp.path(), "a.json", &[result("m", 512, 0, &[10.0, 11.0])]);
    let b = write_json(tmp.path(), "b.json", &[result("m", 512, 0, &[10.5, 11.0])]);
    std::os::unix::fs::symlink(&a, tmp.path().join("link.json")).unwrap();
    // A copy is the same llama-bench process under another name: refused by its content, as a
    // regular file (cp) and as a shell's <(cat FILE).
    let copy = tmp.path().join("copy.json");
    std::fs::copy(&a, &copy).unwrap();
    capshim()
        .args([
            "report",
            &format!(
                "--arm=stock={},{},{}",
                a.display(),
                b.display(),
                copy.display()
            ),
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!(
            "{} holds the same results as {} (a copy of it)",
            copy.display(),
            a.display()
        )))
        .stderr(predicate::str::contains("count its samples twice"));
    let piped = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "{} report --arm=stock={},<(cat {})",
            assert_cmd::cargo::cargo_bin("capshim").display(),
            a.display(),
            a.display()
        ))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&piped.stderr);
    assert_eq!(piped.status.code(), Some(2), "{said}");
    assert!(said.contains("(a copy of it)"), "{said}");
    // Two --arm of one name: a usage error, as in bench (it was 1, from the analysis).
    capshim()
        .args([
            "report",
            &format!("--arm=stock={}", a.display()),
            &format!("--arm=stock={}", b.display()),
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "the arm name \"stock\" is given twice",
        ));
    for (files, twice) in [
        (format!("{},{}", a.display(), a.display()), "a.json"),
        (
            format!("{},{}", a.display(), tmp.path().join("link.json").display()),
            "link.json",
        ),
    ] {
        capshim()
            .args(["report", &format!("--arm=stock={files}")])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(format!("{twice} is given twice")))
            .stderr(predicate::str::contains("count its samples twice"));
    }
    capshim()
        .args([
            "report",
            &format!("--arm=stock={},{}", a.display(), b.display()),
        ])
        .assert()
        .success();
    // Signatures belong to bundles: asking for one of plain files is a mistake.
    capshim()
        .args(["report", "--allowed-signers", "x", "--identity", "me"])
        .arg(format!("--arm=stock={}", a.display()))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no bundle is given"));
    let out = bundle(tmp.path(), "bundle", &[]);
    capshim()
        .arg("report")
        .arg(&out)
        .arg(format!("{}/", out.display()))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is given twice"));
}

#[test]
fn fifos_and_devices_are_refused_as_inputs_and_shell_pipes_read() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    // Each would wait for a writer, or read without end, if opened.
    for args in [
        vec![
            "report".to_string(),
            format!("--arm=stock={}", fifo.display()),
        ],
        vec!["report".to_string(), "--arm=stock=/dev/zero".to_string()],
        vec![
            "explain".into(),
            "--stock".into(),
            fifo.display().to_string(),
        ],
        vec![
            "explain".into(),
            "--profile-file".into(),
            fifo.display().to_string(),
        ],
        vec![
            "explain".into(),
            "--profile-file".into(),
            "/dev/zero".into(),
        ],
    ] {
        capshim()
            .args(&args)
            .timeout(std::time::Duration::from_secs(20))
            .assert()
            .code(1)
            .stderr(predicate::str::contains("not a regular file"))
            .stderr(predicate::str::contains("save the data to a file"));
    }
    // A shell's <(...) is a pipe it opened: read, as before.
    let probe = tmp.path().join("guest.json");
    std::fs::write(
        &probe,
        r#"{"name":"Apple Paravirtual device","families":{"1005":true,"1007":false},"max_threadgroup_memory":32768,"has_unified_memory":true}"#,
    )
    .unwrap();
    let capshim_bin = assert_cmd::cargo::cargo_bin("capshim");
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "{} explain --profile apple9-64k --stock <(cat {})",
            capshim_bin.display(),
            probe.display()
        ))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("as probed in /dev/fd/"));
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let out = bundle(tmp.path(), "b", &[]);
    for args in [
        vec![
            "report".to_string(),
            "--json".into(),
            out.display().to_string(),
        ],
        vec!["report".to_string(), out.display().to_string()],
        vec!["profiles".to_string(), "--json".into()],
        vec!["completions".to_string(), "bash".into()],
        vec!["man".to_string()],
    ] {
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("capshim"))
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before capshim writes (as `| head` does after its lines).
        drop(child.stdout.take());
        let done = child.wait_with_output().unwrap();
        assert_eq!(done.status.code(), Some(0), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&done.stderr), "", "{args:?}");
    }
}

/// Writes `text` over `dir/file`.
fn overwrite(dir: &Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).unwrap();
}

/// A bundle relabelled (its `kind` or `schema_version` edited in environment.json or
/// summary.json), with a forged report and SHA256SUMS written again, is refused by `report`
/// (exit 3, naming the file and the field) and by `sign`; `--as-written` shows it with an
/// UNVERIFIED first line on stdout and on stderr, and exits 4.
#[test]
fn a_relabelled_bundle_is_refused_by_report_and_sign() {
    let tmp = tempfile::tempdir().unwrap();
    let (key, _) = key(tmp.path());
    let forged = "| pp64 | again | 7.20× [7.13 7.26] faster |\n";
    let base = bundle(tmp.path(), "base", &[]);
    let env = read(&base.join("environment.json"));
    let summary = read(&base.join("summary.json"));
    assert!(env.contains("\"schema_version\": 6,"), "{env}");
    let mut env_without: serde_json::Value = serde_json::from_str(&env).unwrap();
    for k in ["schema_version", "kind"] {
        env_without.as_object_mut().unwrap().remove(k);
    }
    let env_without = serde_json::to_string_pretty(&env_without).unwrap();
    // (name, environment.json, summary.json, the file and field the refusal names)
    let cases: Vec<(&str, String, String, &str)> = vec![
        (
            "env4",
            env.replace("\"schema_version\": 6,", "\"schema_version\": 4,"),
            summary.clone(),
            "environment.json: schema_version 4: bench layout 4",
        ),
        (
            "env7",
            env.replace("\"schema_version\": 6,", "\"schema_version\": 7,"),
            summary.clone(),
            "environment.json: schema_version 7: this capshim never wrote",
        ),
        (
            "env99",
            env.replace("\"schema_version\": 6,", "\"schema_version\": 99,"),
            summary.clone(),
            "environment.json: schema_version 99",
        ),
        (
            "kind",
            env.replace("\"kind\": \"bench\"", "\"kind\": \"benchmark\""),
            summary.clone(),
            "environment.json: kind benchmark: this capshim knows only bench and verify",
        ),
        (
            "summary4",
            env_without.clone(),
            summary.replace("\"schema_version\": 6,", "\"schema_version\": 4,"),
            "summary.json: schema_version 4",
        ),
        (
            "summary99",
            env_without,
            summary.replace("\"schema_version\": 6,", "\"schema_version\": 99,"),
            "summary.json: schema_version 99",
        ),
    ];
    for (name, env, summary, says) in cases {
        let out = tmp.path().join(name);
        let copied = Command::new("cp").arg("-a").arg(&base).arg(&out).status();
        assert!(copied.unwrap().success());
        overwrite(&out, "environment.json", &env);
        overwrite(&out, "summary.json", &summary);
        overwrite(&out, "report.md", forged);
        reseal(&out);
        let refused = capshim().arg("report").arg(&out).assert().code(3);
        let err = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
        assert!(refused.get_output().stdout.is_empty(), "{name}");
        assert!(err.contains(says), "{name}: {err}");
        assert!(err.contains("--as-written"), "{name}: {err}");
        assert!(!err.contains("7.20"), "{name}: {err}");
        sign(&out, &key)
            .assert()
            .code(3)
            .stderr(predicate::str::contains(says))
            .stderr(predicate::str::contains("it was not signed"));
        assert!(!out.join("SHA256SUMS.sig").exists(), "{name}");
        let shown = capshim()
            .arg("report")
            .arg("--as-written")
            .arg(&out)
            .assert()
            .code(4)
            .stderr(predicate::str::contains("UNVERIFIED"));
        let stdout = String::from_utf8_lossy(&shown.get_output().stdout).into_owned();
        let (first, rest) = stdout.split_once('\n').unwrap();
        assert!(first.starts_with("UNVERIFIED: "), "{name}: {first}");
        assert!(first.contains("NOT derived again"), "{name}: {first}");
        assert!(first.contains(says), "{name}: {first}");
        assert_eq!(rest, forged, "{name}");
        // --json shows its summary.json, marked the same way.
        let json = capshim()
            .args(["report", "--as-written", "--json"])
            .arg(&out)
            .assert()
            .code(4);
        let stdout = String::from_utf8_lossy(&json.get_output().stdout).into_owned();
        assert!(stdout.starts_with("UNVERIFIED: "), "{name}: {stdout}");
        assert!(stdout.ends_with(&summary), "{name}");
        // Its checksums still count with --as-written.
        overwrite(&out, "results.csv", "edited\n");
        capshim()
            .args(["report", "--as-written"])
            .arg(&out)
            .assert()
            .code(3)
            .stdout("")
            .stderr(predicate::str::contains(
                "results.csv does not match its checksum",
            ));
    }
    // The forgery without a relabel: derived again, refused; --as-written changes nothing.
    let out = tmp.path().join("forged");
    let copied = Command::new("cp").arg("-a").arg(&base).arg(&out).status();
    assert!(copied.unwrap().success());
    overwrite(&out, "report.md", forged);
    reseal(&out);
    for extra in [&[][..], &["--as-written"][..]] {
        capshim()
            .arg("report")
            .args(extra)
            .arg(&out)
            .assert()
            .code(3)
            .stdout("")
            .stderr(predicate::str::contains(
                "report.md does not match the raw data",
            ));
    }
    sign(&out, &key).assert().code(3);
    // A bundle this capshim derives: --as-written changes nothing either.
    capshim()
        .args(["report", "--as-written"])
        .arg(&base)
        .assert()
        .success()
        .stdout(read(&base.join("report.md")));
}

/// A `bench --command` bundle's environment.json holds its workload twice (top level, for
/// readers, and the manifest's `bundle.workload`, which is read): an edit of either copy,
/// resealed, is refused by report and sign (exit 3, naming the field); the untouched bundle
/// passes.
#[test]
fn an_edited_copy_of_the_command_workload_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let original = tmp.path().join("cmd");
    capshim()
        .current_dir(tmp.path())
        .args([
            "bench",
            "--command",
            "echo 'v: 5'",
            "--metric",
            "v: ([0-9]+)",
        ])
        .args(["--profile", "again=stock", "--rounds", "2", "-o"])
        .arg(&original)
        .assert()
        .success();
    capshim().arg("report").arg(&original).assert().success();
    let (private, _) = key(tmp.path());
    let edits: [(&str, serde_json::Value, &str); 5] = [
        ("lower_is_better", true.into(), "workload.lower_is_better"),
        ("command", "echo 'v: 9'".into(), "workload.command"),
        ("regex", "v: ([0-9])".into(), "workload.regex"),
        ("unit", "ms".into(), "workload.unit"),
        ("measure", "wall".into(), "workload.measure"),
    ];
    for (i, (field, value, named)) in edits.into_iter().enumerate() {
        let dir = tmp.path().join(format!("edited-{i}"));
        let copied = Command::new("cp")
            .arg("-r")
            .arg(&original)
            .arg(&dir)
            .status()
            .unwrap();
        assert!(copied.success());
        let env_path = dir.join("environment.json");
        let mut env: serde_json::Value = serde_json::from_str(&read(&env_path)).unwrap();
        env["workload"][field] = value;
        std::fs::write(&env_path, serde_json::to_string_pretty(&env).unwrap()).unwrap();
        reseal(&dir);
        capshim()
            .arg("report")
            .arg(&dir)
            .assert()
            .code(3)
            .stdout("")
            .stderr(predicate::str::contains(format!(
                "`{named}` is not the manifest's `bundle.{named}`"
            )));
        sign(&dir, &private).assert().code(3);
        assert!(!dir.join("SHA256SUMS.sig").exists());
    }
}
