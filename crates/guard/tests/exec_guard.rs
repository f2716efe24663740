//! The guard library end to end on Linux: a Python parent that snapshots its environment
//! (`os.environ`, read once at start) loads `libcapshim_guard.so` with `LD_PRELOAD` and starts
//! programs through `execve` (after `fork`, in `_posixsubprocess` and `os.fork`),
//! `posix_spawn` and `posix_spawnp`. A program that "cannot load" the library (the test-only
//! marker of `capshim::guard::slice`) gets the environment without capshim's entry and
//! variables; any other program gets it unchanged. Also: the plain `libcapshim.so` exports
//! no exec interposer, the guard library exactly three.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::Command;

use object::{Object, ObjectSymbol};

/// `target/<profile>/`, beside this test's `deps/` folder.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

fn library(name: &str, package: &str) -> PathBuf {
    let path = profile_dir().join(name);
    assert!(
        path.is_file(),
        "{} is missing: build it with `cargo build -p {package}`",
        path.display()
    );
    path
}

/// The functions a shared object defines for the dynamic linker.
fn defined_dynamic_functions(path: &Path) -> Vec<String> {
    let data = std::fs::read(path).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let mut names: Vec<String> = file
        .dynamic_symbols()
        .filter(|s| s.is_definition() && s.kind() == object::SymbolKind::Text)
        .map(|s| s.name().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn only_the_guard_library_interposes_exec() {
    // The plain library exports only the GNU build's stand-in for the runtime's class loader
    // (`__objc_exec_class`, how the Linux shim sees classes without linking libobjc); the
    // guard exports exactly that plus the three exec functions it interposes.
    let plain = library("libcapshim.so", "capshim");
    let plain_exports = defined_dynamic_functions(&plain);
    assert_eq!(plain_exports, ["__objc_exec_class"]);
    let guard = library("libcapshim_guard.so", "capshim-guard");
    assert_eq!(
        defined_dynamic_functions(&guard),
        ["__objc_exec_class", "execve", "posix_spawn", "posix_spawnp"]
    );
}

const PARENT: &str = r#"
import os, subprocess, sys
snapshot = dict(os.environ)
# The C environment loses capshim, as the shim's scope=process does; the snapshot keeps it.
for name in list(os.environ):
    if name.startswith(("CAPSHIM_", "LUME_METAL_")):
        os.unsetenv(name)
folder = sys.argv[1]

def seen(text):
    return sorted(l for l in text.splitlines()
                  if l.startswith(("CAPSHIM_", "LUME_METAL_", "LD_PRELOAD=", "KEPT=")))

def via_spawn(spawn, program):
    r, w = os.pipe()
    pid = spawn(program, [program], snapshot, file_actions=[(os.POSIX_SPAWN_DUP2, w, 1)])
    os.close(w)
    out = b""
    while chunk := os.read(r, 65536):
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return out.decode()

def via_fork_execve(program):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(w, 1)
        os.execve(program, [program], snapshot)
    os.close(w)
    out = b""
    while chunk := os.read(r, 65536):
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return out.decode()

os.environ["PATH"] = folder + ":" + os.environ.get("PATH", "")
for name in ["marked", "plain", "through-marked-interpreter"]:
    program = os.path.join(folder, name)
    results = {
        "subprocess": subprocess.run([program], env=snapshot, capture_output=True, text=True).stdout,
        "posix_spawn": via_spawn(os.posix_spawn, program),
        "posix_spawnp": via_spawn(os.posix_spawnp, name),
        "fork+execve": via_fork_execve(program),
    }
    for how, out in results.items():
        print(name, how, "|".join(seen(out)))
"#;

#[test]
fn a_snapshot_environment_reaches_only_programs_that_can_load_the_library() {
    let guard = library("libcapshim_guard.so", "capshim-guard");
    let folder = std::env::temp_dir().join(format!("capshim-exec-guard-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let write = |name: &str, text: String| {
        use std::os::unix::fs::PermissionsExt;
        let path = folder.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    write(
        "marked",
        "#!/bin/sh\n# capshim-guard-test: cannot load\nexec env\n".into(),
    );
    write("plain", "#!/bin/sh\nexec env\n".into());
    write(
        "through-marked-interpreter",
        format!("#!{}\n", folder.join("marked").display()),
    );

    let preload = format!("{}:/a/liba.so", guard.display());
    let mut python = Command::new("python3");
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if name.starts_with("CAPSHIM_") || name.starts_with("LUME_METAL_") {
            python.env_remove(name);
        }
    }
    let output = python
        .arg("-c")
        .arg(PARENT)
        .arg(&folder)
        .env("LD_PRELOAD", &preload)
        .env("CAPSHIM_LOG", "off")
        .env("LUME_METAL_APPLE_FAMILY_MAX", "1009")
        .env("KEPT", "yes")
        .output()
        .expect("python3 runs");
    let _ = std::fs::remove_dir_all(&folder);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let stripped = "KEPT=yes|LD_PRELOAD=/a/liba.so";
    let unchanged =
        format!("CAPSHIM_LOG=off|KEPT=yes|LD_PRELOAD={preload}|LUME_METAL_APPLE_FAMILY_MAX=1009");
    let mut expected = Vec::new();
    for (name, env) in [
        ("marked", stripped),
        ("plain", unchanged.as_str()),
        ("through-marked-interpreter", stripped),
    ] {
        for how in ["subprocess", "posix_spawn", "posix_spawnp", "fork+execve"] {
            expected.push(format!("{name} {how} {env}"));
        }
    }
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines, expected);
}

/// The version record both libraries carry (`.capshim_version`), the same bytes.
#[test]
fn both_libraries_carry_the_same_version_record() {
    let record = |path: PathBuf| {
        let data = std::fs::read(path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        use object::ObjectSection;
        file.section_by_name(".capshim_version")
            .expect("a version record")
            .data()
            .unwrap()
            .to_vec()
    };
    let guard = record(library("libcapshim_guard.so", "capshim-guard"));
    let plain = record(library("libcapshim.so", "capshim"));
    assert_eq!(guard, plain);
    let text = String::from_utf8(guard).unwrap();
    let (version, toolchain) = text.split_once('\0').unwrap();
    assert_eq!(
        version,
        concat!("capshim-version ", env!("CARGO_PKG_VERSION"))
    );
    assert!(toolchain.starts_with("rustc "), "{toolchain}");
}
