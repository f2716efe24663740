//! Running the simulated guest's programs with and without the shim, for both builds.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use capshim_simguest::{Guest, guest, parse};

/// The two builds of the shim every case runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Build {
    /// The GNU-runtime build (`cargo build -p capshim`), on GCC's libobjc.
    Gnu,
    /// The Apple path (`--features apple-model`), with the Apple-runtime model preloaded first.
    AppleModel,
}

impl Build {
    pub const ALL: [Build; 2] = [Build::Gnu, Build::AppleModel];

    /// The shim library of this build.
    pub fn shim(self) -> PathBuf {
        match self {
            Build::Gnu => gnu_shim(),
            Build::AppleModel => apple_model_shim(),
        }
    }

    /// `LD_PRELOAD` for a process with this build injected (the model first, as the model's
    /// contract requires).
    pub fn preload(self) -> OsString {
        match self {
            Build::Gnu => self.shim().into_os_string(),
            Build::AppleModel => {
                let mut value = g().apple_model.clone().into_os_string();
                value.push(" ");
                value.push(self.shim());
                value
            }
        }
    }

    /// `LD_PRELOAD` for the same process without the shim: nothing, or the model alone.
    pub fn stock_preload(self) -> Option<OsString> {
        match self {
            Build::Gnu => None,
            Build::AppleModel => Some(g().apple_model.clone().into_os_string()),
        }
    }
}

pub fn g() -> &'static Guest {
    static GUEST: OnceLock<Guest> = OnceLock::new();
    GUEST.get_or_init(|| guest().expect("the simulated guest is built on Linux"))
}

/// `target/<profile>/`, the directory of this test's `deps/` folder.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// `target/<profile>/libcapshim.so`, built by `cargo build` (cargo test builds the crate as an
/// rlib only), and not older than any source file it was built from (as listed in the
/// dep-info file cargo writes beside it).
fn gnu_shim() -> PathBuf {
    static SHIM: OnceLock<PathBuf> = OnceLock::new();
    SHIM.get_or_init(|| {
        let so = profile_dir().join("libcapshim.so");
        let fix = "rebuild it with cargo build -p capshim";
        assert!(so.exists(), "{} is missing: {fix}", so.display());
        let built = std::fs::metadata(&so).unwrap().modified().unwrap();
        let deps = std::fs::read_to_string(so.with_extension("d"))
            .unwrap_or_else(|e| panic!("{}: {e}: {fix}", so.with_extension("d").display()));
        let first = deps.lines().next().unwrap_or_default();
        let (_, sources) = first.split_once(": ").expect("a make-style dep-info line");
        for source in sources.split_whitespace().map(Path::new) {
            let changed = std::fs::metadata(source).and_then(|m| m.modified());
            assert!(
                changed.is_ok_and(|t| t <= built),
                "{} is older than {} (or it is gone): {fix}",
                so.display(),
                source.display()
            );
        }
        so
    })
    .clone()
}

/// The `apple-model` build, made here (once per test run) in its own target directory,
/// `target/apple-model`, so that it never replaces the GNU build.
fn apple_model_shim() -> PathBuf {
    static SHIM: OnceLock<PathBuf> = OnceLock::new();
    SHIM.get_or_init(|| {
        let profile = profile_dir();
        let target = profile.parent().unwrap().join("apple-model");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut build = Command::new(cargo);
        build.args([
            "build",
            "--quiet",
            "-p",
            "capshim",
            "--features",
            "apple-model",
        ]);
        if profile.file_name().unwrap() == "release" {
            build.arg("--release");
        }
        let status = build
            .arg("--target-dir")
            .arg(&target)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("running cargo to build the apple-model shim");
        assert!(
            status.success(),
            "cargo build -p capshim --features apple-model failed"
        );
        target
            .join(profile.file_name().unwrap())
            .join("libcapshim.so")
    })
    .clone()
}

/// What a probe printed.
pub struct Run {
    pub build: Build,
    pub answers: BTreeMap<String, String>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn get(&self, key: &str) -> &str {
        self.answers
            .get(key)
            .map(String::as_str)
            .unwrap_or_else(|| {
                panic!(
                    "{:?}: no {key} in:\n{}\n{}",
                    self.build, self.stdout, self.stderr
                )
            })
    }

    pub fn family(&self, class: &str, family: i64) -> bool {
        self.get(&format!("{class}.family.{family}")) == "true"
    }

    pub fn capshim_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.starts_with("capshim: "))
            .collect()
    }

    /// The `key=value` blocks of each process, in order (a probe and the probes it ran), each
    /// with its `pid`.
    pub fn processes(&self) -> Vec<BTreeMap<String, String>> {
        self.stdout
            .split("pid=")
            .skip(1)
            .map(|block| {
                let mut answers = parse(block);
                let pid = block.lines().next().unwrap_or_default();
                answers.insert("pid".into(), pid.to_string());
                answers
            })
            .collect()
    }
}

/// Whether the process is injected with this build of the shim, runs with the build's stock
/// environment (the model alone, for the Apple path), or takes `LD_PRELOAD` from `env`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inject {
    Shim,
    Stock,
    AsGiven,
}

/// Runs `program` with a clean environment (PATH only), plus `env`; panics if it fails.
pub fn run(
    build: Build,
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    inject: Inject,
) -> Run {
    let out = output(build, program, args, env, inject);
    let run = Run {
        build,
        answers: parse(&String::from_utf8_lossy(&out.stdout)),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    };
    assert!(
        out.status.success(),
        "{build:?}: {} failed: {}\n{}\n{}",
        program.display(),
        out.status,
        run.stdout,
        run.stderr
    );
    run
}

/// As [`run`], returning the raw output whatever the exit status.
pub fn output(
    build: Build,
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    inject: Inject,
) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    match inject {
        Inject::Shim => {
            cmd.env("LD_PRELOAD", build.preload());
        }
        Inject::Stock => {
            if let Some(preload) = build.stock_preload() {
                cmd.env("LD_PRELOAD", preload);
            }
        }
        Inject::AsGiven => {}
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// The linked probe (Metal loaded at start) with the shim.
pub fn probe(build: Build, args: &[&str], env: &[(&str, &str)]) -> Run {
    run(build, &g().probe, args, env, Inject::Shim)
}

/// The linked probe without the shim.
pub fn stock(build: Build, args: &[&str]) -> Run {
    run(build, &g().probe, args, &[], Inject::Stock)
}

pub const UNLOCKED: &[(&str, &str)] = &[("CAPSHIM_APPLE_FAMILY_MAX", "1009")];
pub const ALL_FAMILIES: [i64; 19] = [
    1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 1010, 2001, 2002, 3001, 3002, 3003, 4001,
    4002, 5001, 5002,
];

pub fn assert_same_families(a: &Run, b: &Run, class: &str) {
    for family in ALL_FAMILIES {
        assert_eq!(
            a.family(class, family),
            b.family(class, family),
            "{:?}: {class} family {family}",
            a.build
        );
    }
}

pub fn assert_same_answers(a: &Run, b: &Run, class: &str) {
    assert_same_families(a, b, class);
    for key in [
        "max_threadgroup_memory",
        "recommended_working_set_size",
        "metal.bf16_emulation",
    ] {
        let key = format!("{class}.{key}");
        assert_eq!(a.get(&key), b.get(&key), "{:?}: {key}", a.build);
    }
}

/// The status file's events, one JSON object per line.
pub fn events(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// A fresh, empty directory for one test.
pub fn tempdir() -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "capshim-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
