//! `capshim run` as a user runs it: exit statuses, errors before anything runs, the child's
//! environment, and the activation summary. Tests against the real shim and the simulated
//! guest are in `run_simguest.rs`.

mod common;

use std::path::{Path, PathBuf};

use common::capshim;
use predicates::prelude::*;

/// A real shared library that is not the shim: it loads, but writes no status.
fn some_library() -> Option<PathBuf> {
    [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib/aarch64-linux-gnu/libm.so.6",
        "/usr/lib/aarch64-linux-gnu/libm.so.6",
        "/lib64/libm.so.6",
        "/usr/lib64/libm.so.6",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
}

#[test]
fn exit_status_passes_through() {
    capshim()
        .args(["run", "--profile", "stock", "--", "sh", "-c", "exit 7"])
        .assert()
        .code(7)
        .stderr(predicate::str::contains(
            "capshim: not activated: --profile stock runs the command without the shim",
        ));
}

#[test]
fn a_signal_maps_to_128_plus_n() {
    capshim()
        .args([
            "run",
            "--profile",
            "stock",
            "--",
            "sh",
            "-c",
            "kill -TERM $$",
        ])
        .assert()
        .code(143);
}

#[test]
fn stdin_and_stdout_are_attached() {
    capshim()
        .args(["run", "--profile", "stock", "--", "cat"])
        .write_stdin("through the child\n")
        .assert()
        .success()
        .stdout("through the child\n");
}

#[test]
fn the_program_and_its_arguments_pass_through_byte_for_byte() {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = tempfile::tempdir().unwrap();
    // A program whose path is not UTF-8 either.
    let program = dir.path().join(std::ffi::OsStr::from_bytes(b"pr\xefntf"));
    std::os::unix::fs::symlink(which("printf"), &program).unwrap();
    let bytes: &[u8] = b"caf\xe9 \xff\xfe na\xc3\xafve";
    capshim()
        .args(["run", "--profile", "stock", "--"])
        .arg(&program)
        .arg("%s")
        .arg(std::ffi::OsStr::from_bytes(bytes))
        .assert()
        .success()
        .stdout(bytes.to_vec());
}

/// The absolute path of `name` on PATH.
fn which(name: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} is not on PATH"))
}

#[test]
fn missing_dylib_is_an_error_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    capshim()
        .args([
            "run",
            "--dylib",
            "/nonexistent/libcapshim.so",
            "--",
            "touch",
        ])
        .arg(&marker)
        .assert()
        .code(125)
        .stderr(
            predicate::str::contains("/nonexistent/libcapshim.so")
                .and(predicate::str::contains("--dylib")),
        );
    assert!(
        !marker.exists(),
        "the command ran although the dylib is missing"
    );
}

#[test]
fn a_library_of_the_wrong_kind_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("libcapshim.so");
    std::fs::write(&text, "not a library").unwrap();
    capshim()
        .args(["run", "--dylib"])
        .arg(&text)
        .args(["--", "true"])
        .assert()
        .code(125)
        .stderr(predicate::str::contains(
            "not an ELF shared library (not a native binary)",
        ));
}

/// libc.so.6 is ET_DYN and names an interpreter; it is a shared library all the same.
#[cfg(target_os = "linux")]
#[test]
fn a_shared_library_with_an_interpreter_is_accepted() {
    let Some(libm) = some_library() else {
        return;
    };
    let libc = libm.with_file_name("libc.so.6");
    capshim()
        .args(["run", "--dylib"])
        .arg(&libc)
        .args(["--", "true"])
        .assert()
        .code(0)
        .stderr(predicate::str::contains("executable, not a library").not());
}

/// The loader splits LD_PRELOAD on spaces and colons (DYLD_INSERT_LIBRARIES on colons): such a
/// path would silently not load, so it is refused before the command runs.
#[test]
fn a_dylib_path_the_loader_would_split_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let paths: &[&str] = if cfg!(target_os = "macos") {
        &["a:b"]
    } else {
        &["sp ace", "a:b"]
    };
    for sub in paths {
        let folder = dir.path().join(sub);
        std::fs::create_dir(&folder).unwrap();
        let library = folder.join(common::SHIM_NAME);
        std::fs::copy(common::inert_shim(dir.path()), &library).unwrap();
        capshim()
            .args(["run", "--dylib"])
            .arg(&library)
            .arg("--")
            .arg("touch")
            .arg(&marker)
            .assert()
            .code(125)
            .stderr(
                predicate::str::contains(library.display().to_string())
                    .and(predicate::str::contains(common::INJECTION_VAR))
                    .and(predicate::str::contains("move or copy libcapshim")),
            );
        assert!(
            !marker.exists(),
            "the command ran with {}",
            library.display()
        );
    }
}

/// A device or FIFO given as the library is refused from its metadata: never read (/dev/zero
/// would be read until memory runs out) nor opened (a FIFO would block).
#[test]
fn a_special_file_as_dylib_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for (path, kind) in [
        (PathBuf::from("/dev/zero"), "a character device"),
        (fifo, "a FIFO"),
    ] {
        capshim()
            .args(["run", "--dylib"])
            .arg(&path)
            .args(["--", "true"])
            .timeout(std::time::Duration::from_secs(20))
            .assert()
            .code(125)
            .stderr(
                predicate::str::contains(path.display().to_string())
                    .and(predicate::str::contains(kind))
                    .and(predicate::str::contains("not a regular file")),
            );
    }
}

#[test]
fn unknown_and_unexecutable_commands_exit_like_a_shell() {
    capshim()
        .args(["run", "--profile", "stock", "--", "capshim-no-such-command"])
        .assert()
        .code(127)
        .stderr(predicate::str::contains(
            "capshim-no-such-command: command not found",
        ));
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.txt");
    std::fs::write(&data, "not a program").unwrap();
    capshim()
        .args(["run", "--profile", "stock", "--"])
        .arg(&data)
        .assert()
        .code(126)
        .stderr(predicate::str::contains("not an executable file"));
    // A model file given as the command: named as what it is, with what to run instead.
    let model = dir.path().join("model.gguf");
    std::fs::write(&model, b"GGUF\x03\x00\x00\x00").unwrap();
    capshim()
        .args(["run", "--profile", "stock", "--"])
        .arg(&model)
        .assert()
        .code(126)
        .stderr(
            predicate::str::contains("model.gguf: not a program: it is a GGUF model file")
                .and(predicate::str::contains("llama-server -m")),
        );
}

#[test]
fn bad_profile_options_exit_125_naming_the_option() {
    capshim()
        .args(["run", "--family-max", "5001", "--", "true"])
        .assert()
        .code(125)
        .stderr(predicate::str::contains("--family-max").and(predicate::str::contains("1001")));
    capshim()
        .args(["run", "--family-max", "64k", "--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--family-max"));
}

#[test]
fn values_beyond_any_known_apple_gpu_exit_125_unless_allowed() {
    capshim()
        .args(["run", "--family-max", "1999", "--", "true"])
        .assert()
        .code(125)
        .stderr(
            predicate::str::contains("--family-max 1999: 1999 is above MTLGPUFamilyApple10 (1010)")
                .and(predicate::str::contains("pass --allow-beyond-hardware")),
        );
}

#[test]
fn the_command_must_follow_a_double_dash() {
    capshim().args(["run", "true"]).assert().code(2);
}

/// [`some_library`], and a copy of it named as the shim in a new folder (kept with it).
fn library_and_stand_in_shim() -> Option<(PathBuf, tempfile::TempDir, PathBuf)> {
    let Some(lib) = some_library() else {
        eprintln!("no libm found; skipping");
        return None;
    };
    let dir = tempfile::tempdir().unwrap();
    let shim = dir.path().join("libcapshim.so");
    std::fs::copy(&lib, &shim).unwrap();
    Some((lib, dir, shim))
}

#[test]
fn child_environment_has_the_profile_and_the_injection() {
    let Some((lib, _dir, shim)) = library_and_stand_in_shim() else {
        return;
    };
    let out = capshim()
        .env("LD_PRELOAD", &lib)
        .env("LUME_METAL_APPLE_FAMILY_MAX", "1005")
        .args([
            "run",
            "--cpu-brand",
            "Apple M1 Ultra (Virtual)",
            "--scope",
            "process",
            "--only-process",
            "--log",
            "queries",
            "--dylib",
        ])
        .arg(&shim)
        .args(["--", "env"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let env = String::from_utf8(out).unwrap();
    let get = |name: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .map(str::to_string)
    };
    assert_eq!(get("CAPSHIM_APPLE_FAMILY_MAX").as_deref(), Some("1007"));
    assert_eq!(
        get("CAPSHIM_MAX_THREADGROUP_MEMORY").as_deref(),
        Some("32768")
    );
    assert_eq!(get("CAPSHIM_RECOMMENDED_WORKING_SET_SIZE"), None);
    assert_eq!(get("CAPSHIM_SCOPE").as_deref(), Some("process"));
    assert_eq!(get("CAPSHIM_ONLY_PROCESS").as_deref(), Some("env"));
    assert_eq!(get("CAPSHIM_LOG").as_deref(), Some("queries"));
    assert_eq!(
        get("LUME_METAL_APPLE_FAMILY_MAX"),
        None,
        "inherited alias must be dropped"
    );
    assert_eq!(
        get("LD_PRELOAD"),
        Some(format!("{}:{}", lib.display(), shim.display()))
    );
    let status = get("CAPSHIM_STATUS_FILE").unwrap();
    assert!(Path::new(&status).is_absolute());
    assert!(
        !Path::new(&status).exists(),
        "the private status file is removed afterwards"
    );
}

/// A capshim library already in the inherited injection variable (a `capshim run` inside
/// another, a shell that exported it) is dropped: one shim hooks, the chosen one; other
/// libraries stay.
#[test]
fn inherited_capshim_libraries_are_stripped_from_the_injection() {
    let Some((lib, dir, shim)) = library_and_stand_in_shim() else {
        return;
    };
    let old = dir.path().join("old");
    std::fs::create_dir(&old).unwrap();
    let inherited = format!("{}:{}/libcapshim.so", lib.display(), old.display());
    let preload = |profile: &str| {
        let out = capshim()
            .env("LD_PRELOAD", &inherited)
            .args(["run", "--profile", profile, "--dylib"])
            .arg(&shim)
            .args(["--", "sh", "-c", "echo \"$LD_PRELOAD\""])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        String::from_utf8(out).unwrap().trim().to_string()
    };
    assert_eq!(
        preload("apple9-64k"),
        format!("{}:{}", lib.display(), shim.display())
    );
    assert_eq!(preload("stock"), lib.display().to_string());
}

#[test]
fn a_library_that_writes_no_status_did_not_load_the_shim() {
    let Some(lib) = some_library() else {
        eprintln!("no libm found; skipping");
        return;
    };
    capshim()
        .args(["run", "--dylib"])
        .arg(&lib)
        .args(["--", "sh", "-c", "exit 3"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains(
            "capshim: not activated: the shim did not load",
        ));
    capshim()
        .args(["run", "--require-active", "--dylib"])
        .arg(&lib)
        .args(["--", "true"])
        .assert()
        .code(4)
        .stderr(predicate::str::contains("did not load"));
}

#[test]
fn sigterm_to_capshim_is_passed_on_and_the_summary_still_printed() {
    // The command sends SIGTERM to its parent (capshim), which passes it back to the
    // command: its trap exits 42.
    capshim()
        .args([
            "run",
            "--profile",
            "stock",
            "--",
            "sh",
            "-c",
            // Short sleeps in a loop: the trap runs as soon as the current one ends, however
            // late under load the signal comes back.
            "trap 'exit 42' TERM; kill -TERM $PPID; i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; exit 1",
        ])
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .code(42)
        .stderr(predicate::str::contains("capshim: not activated"));
}

/// A profile file's `[env]` reaches the command (after the shim's variables); its `[args]`
/// are printed as a suggested command line, not added.
#[test]
fn a_profile_files_env_is_set_and_its_args_suggested() {
    let Some((_lib, dir, shim)) = library_and_stand_in_shim() else {
        return;
    };
    let file = dir.path().join("tuned.toml");
    std::fs::write(
        &file,
        "apple_family_max = 1009\n[env]\nGGML_METAL_NO_RESIDENCY = \"1\"\n\
         [args]\ncommon = \"-fa on -ub 256\"\n",
    )
    .unwrap();
    let assert = capshim()
        .env("GGML_METAL_NO_RESIDENCY", "0")
        .args(["run", "--profile-file"])
        .arg(&file)
        .arg("--dylib")
        .arg(&shim)
        .args([
            "--",
            "sh",
            "-c",
            "echo \"[$GGML_METAL_NO_RESIDENCY] $#\"",
            "x",
        ])
        .assert()
        .success()
        .stdout("[1] 0\n");
    let stderr = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
    assert!(
        stderr.contains(
            "capshim: note: the profile suggests `sh -c echo \"[$GGML_METAL_NO_RESIDENCY] $#\" x \
             -fa on -ub 256` (for llama.cpp's common tools)"
        ),
        "{stderr}"
    );
}
