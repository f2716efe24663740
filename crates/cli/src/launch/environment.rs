//! The child's environment: the parent's, less any inherited capshim settings, plus the
//! profile, the shim's options and the injection variable ([`child_env`] for `run` and
//! `probe`; [`arm_env`], as a change to the parent's, for each `bench` arm).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use capshim_profile::{Profile, env};
use serde::Serialize;

use super::Os;

/// `CAPSHIM_SCOPE`: whether children of the workload inherit the shim.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ScopeArg {
    /// Children inherit the injection and the settings (the default)
    #[default]
    Children,
    /// Only the launched process (a same-pid re-exec, as a framework Python's launcher does,
    /// included): children started after it hooked a device are not injected, earlier ones
    /// stay stock
    Process,
}

/// `CAPSHIM_LOG`: what the shim writes to stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogArg {
    /// One line on activation, one per hooked class, one per reason to stay stock (the default)
    Activation,
    /// Nothing
    Off,
    /// As activation, plus one line per distinct query with the original and returned answer
    Queries,
}

impl ScopeArg {
    fn value(self) -> &'static str {
        match self {
            ScopeArg::Children => "children",
            ScopeArg::Process => "process",
        }
    }
}

impl LogArg {
    fn value(self) -> &'static str {
        match self {
            LogArg::Activation => "activation",
            LogArg::Off => "off",
            LogArg::Queries => "queries",
        }
    }
}

/// The shim's options on the command line, flattened into `capshim run` and `capshim agent`.
/// The help speaks of "the command", as `run` does; `agent` rewords it for its program.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct ShimArgs {
    /// The shim library to inject (default: searched, see below)
    #[arg(long, value_name = "PATH")]
    pub dylib: Option<PathBuf>,

    /// Whether the command's children inherit the shim
    #[arg(long, value_enum, default_value_t = ScopeArg::Children)]
    pub scope: ScopeArg,

    /// Activate only in processes with this executable name, a file name, never a path
    /// (default: the command's own name)
    #[arg(long, value_name = "NAME", num_args = 0..=1, default_missing_value = "", value_parser = process_name)]
    pub only_process: Option<String>,

    /// What the shim logs on stderr (default: activation)
    #[arg(long, value_enum)]
    pub log: Option<LogArg>,
}

/// `--only-process`'s value: an executable's file name. The shim compares it with the name
/// of the running executable, never a path, so a path could never match and is refused.
///
/// # Errors
/// The message for clap (exit code 2), naming the file name to give instead.
pub fn process_name(value: &str) -> Result<String, String> {
    if !value.contains('/') {
        return Ok(value.to_string());
    }
    let name = Path::new(value)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Err(format!(
        "{value:?} is a path, and a path never matches: the shim compares the executable's file \
         name; give --only-process {name}"
    ))
}

impl ShimArgs {
    /// The settings for launching `command` (as given on the command line) with `profile` and
    /// `library`: `--only-process` without a name means the command's own file name.
    pub fn settings(
        &self,
        profile: Option<Profile>,
        library: PathBuf,
        command: &OsStr,
        status_file: Option<PathBuf>,
    ) -> ShimSettings {
        ShimSettings {
            profile,
            library,
            scope: self.scope,
            only_process: self.only_process.as_ref().map(|name| {
                if name.is_empty() {
                    Path::new(command)
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default()
                } else {
                    name.clone()
                }
            }),
            log: self.log,
            status_file,
        }
    }
}

/// Everything the shim is told about one launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShimSettings {
    /// The profile; `None` (stock) injects nothing.
    pub profile: Option<Profile>,
    /// The absolute path of the library to inject (ignored for stock).
    pub library: PathBuf,
    /// `CAPSHIM_SCOPE`.
    pub scope: ScopeArg,
    /// `CAPSHIM_ONLY_PROCESS`.
    pub only_process: Option<String>,
    /// `CAPSHIM_LOG`, when given.
    pub log: Option<LogArg>,
    /// `CAPSHIM_STATUS_FILE`, when wanted.
    pub status_file: Option<PathBuf>,
}

impl ShimSettings {
    /// The shim's variables alone (what a LaunchAgent's `EnvironmentVariables` holds),
    /// without the injection variable.
    pub fn shim_vars(&self) -> Vec<(&'static str, OsString)> {
        let Some(profile) = self.profile else {
            return Vec::new();
        };
        let mut vars: Vec<(&'static str, OsString)> = env::vars_for(&profile)
            .into_iter()
            .map(|(k, v)| (k, OsString::from(v)))
            .collect();
        if self.scope != ScopeArg::Children {
            vars.push((env::SCOPE.primary, self.scope.value().into()));
        }
        if let Some(name) = &self.only_process {
            vars.push((env::ONLY_PROCESS.primary, name.into()));
        }
        if let Some(log) = self.log {
            vars.push((env::LOG.primary, log.value().into()));
        }
        if let Some(path) = &self.status_file {
            vars.push((env::STATUS_FILE.primary, path.clone().into_os_string()));
        }
        vars
    }
}

/// `existing` with `library` appended after a `:`, unless it is already listed.
pub fn append_library(existing: Option<&OsStr>, library: &OsStr) -> OsString {
    match existing {
        Some(value) if !value.is_empty() => {
            let bytes = value.as_encoded_bytes();
            if bytes
                .split(|&b| b == b':')
                .any(|entry| entry == library.as_encoded_bytes())
            {
                return value.to_os_string();
            }
            let mut out = value.to_os_string();
            out.push(":");
            out.push(library);
            out
        }
        _ => library.to_os_string(),
    }
}

/// Whether an entry of the injection variable names a capshim library: its file name is
/// `libcapshim.dylib`, `libcapshim.so` or the guard library's (`libcapshim_guard.dylib`,
/// `libcapshim_guard.so`), or it is `library` itself.
fn is_capshim_library(entry: &[u8], library: &OsStr) -> bool {
    use super::dylib::Flavor;
    let name = entry.rsplit(|&b| b == b'/').next().unwrap_or(entry);
    entry == library.as_encoded_bytes()
        || [Os::MacOs, Os::Linux].iter().any(|&os| {
            [Flavor::Plain, Flavor::Guard]
                .iter()
                .any(|flavor| name == flavor.file_name(os).as_bytes())
        })
}

/// The injection variable's `value` without its capshim libraries (see
/// [`is_capshim_library`]), entries split at `:` (and, for `LD_PRELOAD`, which glibc also
/// splits at spaces, at spaces); `None` when nothing else is left.
pub fn strip_capshim_libraries(value: &OsStr, library: &OsStr, os: Os) -> Option<OsString> {
    let bytes = value.as_encoded_bytes();
    let split = |b: &u8| *b == b':' || (os == Os::Linux && *b == b' ');
    let kept: Vec<&[u8]> = bytes
        .split(split)
        .filter(|e| !e.is_empty() && !is_capshim_library(e, library))
        .collect();
    if kept.is_empty() {
        return None;
    }
    Some(std::os::unix::ffi::OsStringExt::from_vec(kept.join(&b':')))
}

/// The child's whole environment, from the parent's.
///
/// Inherited shim variables (`CAPSHIM_*` and the published shims' `LUME_METAL_*`,
/// `TART_METAL_*`, `VEERTU_ANKA_GPU_*`) are dropped, so exactly the chosen
/// profile applies (an inherited alias with another value would make the shim refuse), and
/// so are capshim libraries already in the injection variable (a `capshim run` inside another,
/// or a shell that exported it), so that one shim hooks, not two: as `bench` clears it for its
/// arms. For a profile, the shim's variables are set and the library is appended to the
/// injection variable; for stock nothing is injected.
pub fn child_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    settings: &ShimSettings,
    os: Os,
) -> Vec<(OsString, OsString)> {
    let injection = os.injection_var();
    let mut out: Vec<(OsString, OsString)> = parent
        .into_iter()
        .filter(|(k, _)| !env::is_capshim_var(k.as_encoded_bytes()))
        .collect();
    let existing = out
        .iter()
        .position(|(k, _)| k == injection)
        .map(|i| out.remove(i).1)
        .and_then(|v| strip_capshim_libraries(&v, settings.library.as_os_str(), os));
    if settings.profile.is_none() {
        out.extend(existing.map(|v| (OsString::from(injection), v)));
        return out;
    }
    out.extend(
        settings
            .shim_vars()
            .into_iter()
            .map(|(k, v)| (OsString::from(k), v)),
    );
    out.push((
        injection.into(),
        append_library(existing.as_deref(), settings.library.as_os_str()),
    ));
    out
}

/// The environment change of one arm.
#[derive(Clone, Debug, Default, Serialize)]
pub struct EnvChange {
    /// Variables set, in order (a JSON object, name to value).
    #[serde(serialize_with = "pairs_as_object")]
    pub set: Vec<(String, String)>,
    /// Variables removed from capshim's own environment.
    pub removed: Vec<String>,
}

/// Serializes name-value pairs as a JSON object, in their order.
pub fn pairs_as_object<S: serde::Serializer>(
    pairs: &[(String, String)],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = serializer.serialize_map(Some(pairs.len()))?;
    for (k, v) in pairs {
        map.serialize_entry(k, v)?;
    }
    map.end()
}

/// The environment of an arm: capshim's and the injection variable are always removed first (so
/// a stock arm is stock even when capshim itself runs under the shim); an arm with a profile then
/// gets the profile's variables, its status file and the injection variable.
pub fn arm_env(
    profile: Option<&Profile>,
    dylib: Option<&Path>,
    status_file: &Path,
    inherited: impl Iterator<Item = String>,
) -> EnvChange {
    let inject = Os::current().injection_var();
    let mut change = EnvChange::default();
    for name in inherited {
        if name == inject || env::is_capshim_var(name.as_bytes()) {
            change.removed.push(name);
        }
    }
    change.removed.sort();
    if let (Some(profile), Some(dylib)) = (profile, dylib) {
        for (k, v) in env::vars_for(profile) {
            change.set.push((k.to_string(), v));
        }
        change.set.push((
            env::STATUS_FILE.primary.to_string(),
            status_file.display().to_string(),
        ));
        change
            .set
            .push((env::LOG.primary.to_string(), "activation".to_string()));
        change
            .set
            .push((inject.to_string(), dylib.display().to_string()));
    }
    change
}

#[cfg(test)]
mod tests {
    use super::*;
    use capshim_profile::named::apple9_64k;

    fn settings() -> ShimSettings {
        ShimSettings {
            profile: Some(apple9_64k()),
            library: "/opt/capshim/libcapshim.so".into(),
            scope: ScopeArg::Children,
            only_process: None,
            log: None,
            status_file: Some("/tmp/status.jsonl".into()),
        }
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        v.iter()
            .map(|(k, val)| ((*k).into(), (*val).into()))
            .collect()
    }

    #[test]
    fn sets_the_profile_and_injects_for_that_child_only() {
        let parent = pairs(&[
            ("PATH", "/usr/bin"),
            ("LUME_METAL_APPLE_FAMILY_MAX", "1007"),
            ("CAPSHIM_LOG", "queries"),
        ]);
        let out = child_env(parent, &settings(), Os::Linux);
        assert_eq!(
            out,
            pairs(&[
                ("PATH", "/usr/bin"),
                ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
                ("CAPSHIM_MAX_THREADGROUP_MEMORY", "65536"),
                ("CAPSHIM_STATUS_FILE", "/tmp/status.jsonl"),
                ("LD_PRELOAD", "/opt/capshim/libcapshim.so"),
            ])
        );
        // The shim itself accepts exactly what we set.
        let parsed = env::parse(
            out.iter()
                .map(|(k, v)| (k.as_encoded_bytes(), v.as_encoded_bytes())),
        );
        assert_eq!(parsed.config.unwrap().profile, apple9_64k());
    }

    #[test]
    fn appends_to_an_existing_injection_without_duplicates() {
        let parent = pairs(&[("DYLD_INSERT_LIBRARIES", "/usr/lib/other.dylib")]);
        let mut s = settings();
        s.library = "/x/libcapshim.dylib".into();
        s.scope = ScopeArg::Process;
        s.only_process = Some("llama-bench".into());
        s.log = Some(LogArg::Queries);
        let out = child_env(parent, &s, Os::MacOs);
        let get = |name: &str| {
            out.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.to_str().unwrap().to_string())
        };
        assert_eq!(
            get("DYLD_INSERT_LIBRARIES").as_deref(),
            Some("/usr/lib/other.dylib:/x/libcapshim.dylib")
        );
        assert_eq!(get("CAPSHIM_SCOPE").as_deref(), Some("process"));
        assert_eq!(get("CAPSHIM_ONLY_PROCESS").as_deref(), Some("llama-bench"));
        assert_eq!(get("CAPSHIM_LOG").as_deref(), Some("queries"));
        assert_eq!(
            append_library(Some(OsStr::new("/a:/x/l.so")), OsStr::new("/x/l.so")),
            "/a:/x/l.so"
        );
        assert_eq!(
            append_library(Some(OsStr::new("")), OsStr::new("/l.so")),
            "/l.so"
        );
    }

    #[test]
    fn only_process_takes_a_file_name_never_a_path() {
        assert_eq!(process_name("llama-server").unwrap(), "llama-server");
        assert_eq!(process_name("").unwrap(), "");
        let err = process_name("/opt/llama/bin/llama-server").unwrap_err();
        assert!(err.contains("give --only-process llama-server"), "{err}");
        assert!(process_name("bin/llama-server").is_err());
    }

    #[test]
    fn only_process_without_a_name_means_the_commands_own() {
        let args = ShimArgs {
            only_process: Some(String::new()),
            ..ShimArgs::default()
        };
        let s = args.settings(
            None,
            PathBuf::new(),
            OsStr::new("/opt/bin/llama-bench"),
            None,
        );
        assert_eq!(s.only_process.as_deref(), Some("llama-bench"));
        let args = ShimArgs {
            only_process: Some("probe".into()),
            scope: ScopeArg::Process,
            log: Some(LogArg::Off),
            ..ShimArgs::default()
        };
        let s = args.settings(None, "/l.so".into(), OsStr::new("sh"), Some("/s".into()));
        assert_eq!(s.only_process.as_deref(), Some("probe"));
        assert_eq!((s.scope, s.log), (ScopeArg::Process, Some(LogArg::Off)));
        assert_eq!(s.status_file, Some(PathBuf::from("/s")));
        assert_eq!(
            ShimArgs::default()
                .settings(None, PathBuf::new(), OsStr::new("x"), None)
                .only_process,
            None
        );
    }

    #[test]
    fn inherited_capshim_libraries_are_stripped_so_one_shim_hooks() {
        let lib = OsStr::new("/opt/capshim/libcapshim.so");
        let strip = |v: &str, os| {
            strip_capshim_libraries(OsStr::new(v), lib, os).map(|s| s.into_string().unwrap())
        };
        assert_eq!(
            strip("/a/libx.so:/old/libcapshim.so:/b/liby.so", Os::Linux).as_deref(),
            Some("/a/libx.so:/b/liby.so")
        );
        assert_eq!(
            strip("/old/libcapshim.so /a/libx.so", Os::Linux).as_deref(),
            Some("/a/libx.so")
        );
        assert_eq!(
            strip("libcapshim.dylib:/opt/capshim/libcapshim.so", Os::MacOs),
            None
        );
        assert_eq!(
            strip("/a/libcapshim.so.bak", Os::Linux).as_deref(),
            Some("/a/libcapshim.so.bak")
        );
        // The guard library is capshim's too: one shim hooks, whichever was inherited.
        assert_eq!(
            strip("/old/libcapshim_guard.dylib:/a/libx.dylib", Os::MacOs).as_deref(),
            Some("/a/libx.dylib")
        );

        let parent = pairs(&[("LD_PRELOAD", "/a/libx.so:/home/u/build/libcapshim.so")]);
        let out = child_env(parent.clone(), &settings(), Os::Linux);
        let get = |out: &[(OsString, OsString)]| {
            out.iter()
                .find(|(k, _)| k == "LD_PRELOAD")
                .map(|(_, v)| v.to_str().unwrap().to_string())
        };
        assert_eq!(
            get(&out).as_deref(),
            Some("/a/libx.so:/opt/capshim/libcapshim.so")
        );
        let mut stock = settings();
        stock.profile = None;
        assert_eq!(
            get(&child_env(parent, &stock, Os::Linux)).as_deref(),
            Some("/a/libx.so")
        );
        let only_shim = pairs(&[
            ("LD_PRELOAD", "/home/u/build/libcapshim.so"),
            ("HOME", "/h"),
        ]);
        assert_eq!(
            child_env(only_shim, &stock, Os::Linux),
            pairs(&[("HOME", "/h")])
        );
    }

    #[test]
    fn stock_injects_nothing_and_clears_inherited_settings() {
        let mut s = settings();
        s.profile = None;
        let out = child_env(
            pairs(&[("CAPSHIM_APPLE_FAMILY_MAX", "1009"), ("HOME", "/h")]),
            &s,
            Os::Linux,
        );
        assert_eq!(out, pairs(&[("HOME", "/h")]));
    }

    #[test]
    fn only_unlocked_arms_get_the_shim() {
        let inherited = [
            "PATH",
            "LD_PRELOAD",
            "CAPSHIM_LOG",
            "LUME_METAL_APPLE_FAMILY_MAX",
            "HOME",
            "DYLD_INSERT_LIBRARIES",
        ]
        .map(String::from);
        let stock = arm_env(
            None,
            Some(Path::new("/x/libcapshim.so")),
            Path::new("/b/s.jsonl"),
            inherited.clone().into_iter(),
        );
        assert!(stock.set.is_empty());
        let inject = Os::current().injection_var();
        assert!(stock.removed.contains(&inject.to_string()));
        assert!(stock.removed.contains(&"CAPSHIM_LOG".to_string()));
        assert!(
            stock
                .removed
                .contains(&"LUME_METAL_APPLE_FAMILY_MAX".to_string())
        );
        assert!(!stock.removed.contains(&"PATH".to_string()));

        let profile = capshim_profile::named::apple9_64k();
        let unlocked = arm_env(
            Some(&profile),
            Some(Path::new("/x/libcapshim.so")),
            Path::new("/b/s.jsonl"),
            inherited.into_iter(),
        );
        let set: Vec<(&str, &str)> = unlocked
            .set
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            set,
            vec![
                ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
                ("CAPSHIM_MAX_THREADGROUP_MEMORY", "65536"),
                ("CAPSHIM_STATUS_FILE", "/b/s.jsonl"),
                ("CAPSHIM_LOG", "activation"),
                (inject, "/x/libcapshim.so"),
            ]
        );
    }
}
