//! What the shim tells the outside: stderr lines and status-file events.
//!
//! stderr lines start with `capshim: `. At the default level (`CAPSHIM_LOG=activation`) a
//! process says nothing until a device class is hooked (then one line per class, the first with
//! the profile and any note on its values) or a hook fails; a malformed or conflicting
//! configuration is said at load. `verbose` adds the load-time lines ([`LOAD_TIME`]). Reports
//! made while the runtime holds a class's `+initialize` lock are held back ([`holding_back`]).
//!
//! The status file (`CAPSHIM_STATUS_FILE`) gets every event at every level, one JSON object per
//! line, appended with a single `write`, so a launcher can prove activation even when several
//! processes share the file:
//! `{"pid":…,"process":"…","event":"active"|"inactive"|"hooked"|"failed","reason":…,"class":…,"profile":{…}}`.
//! Nothing here may fail the host process: write errors are dropped (and said once on stderr).

use std::cell::Cell;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once, OnceLock};

use capshim_profile::env::Sources;
use capshim_profile::limits::{self, Finding};
use capshim_profile::{Config, LogMode, Outputs, Profile, Scope};

use crate::query::Query;
use crate::runtime::{Class, Native, Runtime};

struct Reporter {
    log: LogMode,
    status_file: Option<PathBuf>,
    /// The executable's name, found when first needed: a process that never reports anything
    /// never resolves its executable's path.
    process: OnceLock<String>,
    /// Fixed in tests; `None` reads the live pid, which changes in a `fork()`ed child.
    pid: Option<u32>,
}

impl Reporter {
    fn pid(&self) -> u32 {
        self.pid.unwrap_or_else(std::process::id)
    }

    fn process(&self) -> &str {
        self.process.get_or_init(crate::scope::process_name)
    }
}

static REPORTER: OnceLock<Reporter> = OnceLock::new();
static STATUS_WRITE_FAILED: AtomicBool = AtomicBool::new(false);
/// The accepted configuration, for the first `hooked` line.
static ACTIVE: OnceLock<Config> = OnceLock::new();

/// Sets where and how much to report, once, from the initializer.
pub fn init(outputs: Outputs) {
    let status_file = outputs
        .status_file
        .map(|bytes| PathBuf::from(std::ffi::OsStr::from_bytes(&bytes)));
    let _ = REPORTER.set(Reporter {
        log: outputs.log,
        status_file,
        process: OnceLock::new(),
        pid: None,
    });
}

/// The executable's name, when the initializer already had to find it
/// (`CAPSHIM_ONLY_PROCESS`), so that reports do not look it up again.
pub fn set_process(name: String) {
    if let Some(reporter) = REPORTER.get() {
        let _ = reporter.process.set(name);
    }
}

/// The stderr level of a report that needs no fixing: said only with `CAPSHIM_LOG=verbose`.
pub const LOAD_TIME: LogMode = LogMode::Verbose;

/// Configuration accepted: the shim will hook devices in this process. A status event now; on
/// stderr, with `CAPSHIM_LOG=verbose` only, a line with the profile and one warning line for
/// each value beyond known hardware or that changes nothing
/// ([`capshim_profile::limits::check`]). At the default level the first `hooked` line says
/// both (a process that never creates a device says nothing).
pub fn active(config: &Config) {
    let _ = ACTIVE.set(config.clone());
    let profile = &config.profile;
    let scope = scope_name(config.scope);
    emit(LOAD_TIME, "active", None, None, Some(profile), |r| {
        format!(
            "active in {} (pid {}): {profile} scope={scope}",
            r.process(),
            r.pid()
        )
    });
    let Some(reporter) = REPORTER.get().filter(|r| r.log >= LOAD_TIME) else {
        return;
    };
    for finding in limits::check(profile, None) {
        stderr(&warning_line(reporter, &config.sources, &finding));
    }
}

fn scope_name(scope: Scope) -> &'static str {
    match scope {
        Scope::Children => "children",
        Scope::Process => "process",
    }
}

/// `VAR: REASON; answering as configured…`: a note on one configured value.
fn note(sources: &Sources, finding: &Finding) -> String {
    let name = sources
        .name_of(finding.field())
        .unwrap_or("a default value");
    let outcome = if finding.beyond_hardware() {
        "answering as configured, beyond what any Apple GPU has"
    } else {
        "answering as configured"
    };
    format!("{name}: {finding}; {outcome}")
}

/// `warning in PROCESS (pid N): VAR: REASON; answering as configured`.
fn warning_line(r: &Reporter, sources: &Sources, finding: &Finding) -> String {
    format!(
        "warning in {} (pid {}): {}",
        r.process(),
        r.pid(),
        note(sources, finding)
    )
}

/// The process stays stock. `level` is the least `CAPSHIM_LOG` that says it on stderr:
/// [`LogMode::Activation`] for a configuration the user must fix, [`LOAD_TIME`] for a process
/// the shim does not belong to, [`LogMode::Off`] for the status file only (not configured).
pub fn inactive(reason: &str, level: LogMode) {
    if deferred(|| {
        let reason = reason.to_owned();
        move || inactive(&reason, level)
    }) {
        return;
    }
    emit(level, "inactive", Some(reason), None, None, |r| {
        format!(
            "staying stock in {} (pid {}): {reason}",
            r.process(),
            r.pid()
        )
    });
}

/// A device class now answers through the profile. The process's first such line also gives
/// the profile, the scope and a note on each value beyond known hardware or that changes
/// nothing: `hooked CLASS in PROCESS (pid N): PROFILE scope=SCOPE[; note: VAR: REASON]…`.
pub fn hooked(class: &str, profile: &Profile) {
    static FIRST: AtomicBool = AtomicBool::new(true);
    let first = FIRST.swap(false, Ordering::Relaxed);
    emit(
        LogMode::Activation,
        "hooked",
        None,
        Some(class),
        Some(profile),
        |r| {
            let head = format!("hooked {class} in {} (pid {})", r.process(), r.pid());
            match ACTIVE.get().filter(|_| first) {
                Some(config) => first_hook_line(&head, config),
                None => head,
            }
        },
    );
}

fn first_hook_line(head: &str, config: &Config) -> String {
    let mut line = format!(
        "{head}: {} scope={}",
        config.profile,
        scope_name(config.scope)
    );
    for finding in limits::check(&config.profile, None) {
        line.push_str("; note: ");
        line.push_str(&note(&config.sources, &finding));
    }
    line
}

/// A class (or the base class) could not be hooked and stays stock.
pub fn failed(class: &str, reason: &str) {
    failed_at(LogMode::Activation, class, reason);
}

/// As [`failed`], said on stderr from `level` on (see [`inactive`]).
pub fn failed_at(level: LogMode, class: &str, reason: &str) {
    if deferred(|| {
        let (class, reason) = (class.to_owned(), reason.to_owned());
        move || failed_at(level, &class, &reason)
    }) {
        return;
    }
    emit(level, "failed", Some(reason), Some(class), None, |r| {
        format!(
            "hook failed on {class} in {} (pid {}): {reason}; staying stock",
            r.process(),
            r.pid()
        )
    });
}

thread_local! {
    /// Set while this thread runs code the runtime calls under a class's `+initialize` lock.
    static HOLDING_BACK: Cell<bool> = const { Cell::new(false) };
}

type Held = Box<dyn FnOnce() + Send>;
static HELD: Mutex<Vec<Held>> = Mutex::new(Vec::new());
static ANY_HELD: AtomicBool = AtomicBool::new(false);

/// Runs `f` with this thread's reports held back, for code the runtime calls with a class's
/// `+initialize` lock held (objc4 906 and later, docs/apple-runtime.md rule 5): every other
/// thread that messages the class waits for that lock, so nothing there may wait for a file.
/// The reports are written by [`flush`] (the next device set up) or when the process exits.
pub fn holding_back<T>(f: impl FnOnce() -> T) -> T {
    let before = HOLDING_BACK.with(|h| h.replace(true));
    let result = f();
    HOLDING_BACK.with(|h| h.set(before));
    result
}

/// When reports are held back on this thread, keeps the report `make` builds for later and
/// returns true. Keeping it allocates and takes a lock that no file operation is done under.
fn deferred<F: FnOnce() + Send + 'static>(make: impl FnOnce() -> F) -> bool {
    if !HOLDING_BACK.with(Cell::get) {
        return false;
    }
    HELD.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(Box::new(make()));
    ANY_HELD.store(true, Ordering::Release);
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| at_exit(flush_at_exit));
    true
}

/// Registers `f` to run when the process exits (`atexit`). Only a process with a held report
/// needs it, so on macOS Libc's `atexit` (`stdlib/FreeBSD/atexit.c`) is looked up then rather
/// than imported by every process.
fn at_exit(f: extern "C" fn()) {
    #[cfg(target_vendor = "apple")]
    {
        // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only searches loaded
        // images.
        let symbol = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"atexit".as_ptr()) };
        if symbol.is_null() {
            return;
        }
        // SAFETY: `symbol` is Libc's `int atexit(void (*)(void))`; a function's address may be
        // transmuted to its own function-pointer type.
        let atexit: unsafe extern "C" fn(extern "C" fn()) -> libc::c_int =
            unsafe { std::mem::transmute(symbol) };
        // SAFETY: atexit only records the function; `f` is a function of this library, which
        // is never unloaded (docs/apple-runtime.md rule 7), and never unwinds.
        unsafe { atexit(f) };
    }
    #[cfg(not(target_vendor = "apple"))]
    {
        // SAFETY: as above: atexit only records `f`, a function of this never-unloaded library
        // that never unwinds.
        unsafe { libc::atexit(f) };
    }
}

/// Writes the reports held back by [`holding_back`], if any; cheap when there are none. Does
/// nothing on a thread that is holding back, or while another thread writes them.
pub fn flush() {
    if !ANY_HELD.load(Ordering::Acquire) || HOLDING_BACK.with(Cell::get) {
        return;
    }
    // try_lock: in a child fork()ed while another thread held the list, it stays unusable;
    // the reports are then lost rather than the child blocked.
    let held = match HELD.try_lock() {
        Ok(mut list) => std::mem::take(&mut *list),
        Err(std::sync::TryLockError::Poisoned(poisoned)) => {
            std::mem::take(&mut *poisoned.into_inner())
        }
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    ANY_HELD.store(false, Ordering::Release);
    for report in held {
        report();
    }
}

extern "C" fn flush_at_exit() {
    let _ = std::panic::catch_unwind(flush);
}

/// A replacement could not find the original to call (should not happen); said once per query.
pub fn unanswerable(query: Query) {
    static SAID: [AtomicBool; 3] = [const { AtomicBool::new(false) }; 3];
    if SAID[query as usize].swap(true, Ordering::Relaxed) {
        return;
    }
    let selector = query.selector().to_string_lossy();
    emit(
        LogMode::Activation,
        "failed",
        Some("no original implementation"),
        None,
        None,
        |r| {
            format!(
                "no original -{selector} in {} (pid {}); answered 0",
                r.process(),
                r.pid()
            )
        },
    );
}

/// How many distinct queries `CAPSHIM_LOG=queries` logs before it stops.
pub const MAX_LOGGED_QUERIES: usize = 64;

struct Seen {
    entries: [(usize, u8, i64); MAX_LOGGED_QUERIES],
    len: usize,
}

static SEEN: Mutex<Seen> = Mutex::new(Seen {
    entries: [(0, 0, 0); MAX_LOGGED_QUERIES],
    len: 0,
});

/// With `CAPSHIM_LOG=queries`, logs each distinct (class, selector, argument) once with the
/// original and returned answers. Cheap when query logging is off.
pub fn query(class: Class, query: Query, argument: i64, original: u64, returned: u64) {
    let Some(reporter) = REPORTER.get() else {
        return;
    };
    if reporter.log < LogMode::Queries {
        return;
    }
    let key = (class.addr(), query as u8, argument);
    let first_over_limit = {
        let mut seen = SEEN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let len = seen.len;
        if seen.entries[..len.min(MAX_LOGGED_QUERIES)].contains(&key) {
            return;
        }
        if len >= MAX_LOGGED_QUERIES {
            seen.len = len.saturating_add(1);
            if len > MAX_LOGGED_QUERIES {
                return;
            }
            true
        } else {
            seen.entries[len] = key;
            seen.len = len + 1;
            false
        }
    };
    if first_over_limit {
        stderr(&format!(
            "more than {MAX_LOGGED_QUERIES} distinct queries; no longer logging them"
        ));
        return;
    }
    let name = Native.class_name(class);
    let selector = query.selector().to_string_lossy();
    let line = match query {
        Query::SupportsFamily => format!(
            "query {name} {selector}{argument} original={} returned={}",
            original != 0,
            returned != 0
        ),
        _ => format!("query {name} {selector} original={original} returned={returned}"),
    };
    stderr(&line);
}

fn emit(
    level: LogMode,
    event: &str,
    reason: Option<&str>,
    class: Option<&str>,
    profile: Option<&Profile>,
    line: impl FnOnce(&Reporter) -> String,
) {
    let Some(reporter) = REPORTER.get() else {
        return;
    };
    if level != LogMode::Off && reporter.log >= level {
        stderr(&line(reporter));
    }
    if let Some(path) = &reporter.status_file {
        let json = event_json(reporter, event, reason, class, profile);
        // Non-blocking, so that a FIFO nobody reads (or any other file that would block)
        // fails at once instead of stalling the process before its main.
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .and_then(|mut file| file.write_all(json.as_bytes()));
        if let Err(error) = written
            && !STATUS_WRITE_FAILED.swap(true, Ordering::Relaxed)
            && reporter.log != LogMode::Off
        {
            stderr(&format!(
                "cannot append to CAPSHIM_STATUS_FILE {}: {error}",
                path.display()
            ));
        }
    }
}

fn stderr(line: &str) {
    // One write per line so that lines from several threads do not interleave.
    let _ = std::io::stderr().write_all(format!("capshim: {line}\n").as_bytes());
}

fn event_json(
    r: &Reporter,
    event: &str,
    reason: Option<&str>,
    class: Option<&str>,
    profile: Option<&Profile>,
) -> String {
    let text = |value: Option<&str>| value.map_or_else(|| "null".to_string(), json_string);
    let profile = profile.map_or_else(
        || "null".to_string(),
        |p| {
            format!(
                "{{\"apple_family_max\":{},\"max_threadgroup_memory\":{},\"recommended_working_set_size\":{}}}",
                p.apple_family_max,
                p.max_threadgroup_memory,
                p.recommended_working_set_size.map_or_else(|| "null".to_string(), |b| b.to_string())
            )
        },
    );
    format!(
        "{{\"pid\":{},\"process\":{},\"event\":{},\"reason\":{},\"class\":{},\"profile\":{}}}\n",
        r.pid(),
        json_string(r.process()),
        json_string(event),
        text(reason),
        text(class),
        profile
    )
}

/// A JSON string literal for `value`, escaping quotes, backslashes and control characters.
pub fn json_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_escape_what_json_requires() {
        assert_eq!(json_string("plain"), "\"plain\"");
        assert_eq!(
            json_string("a\"b\\c\nd\u{1}é"),
            "\"a\\\"b\\\\c\\nd\\u0001é\""
        );
    }

    #[test]
    fn a_value_beyond_hardware_is_one_warning_line_naming_its_variable() {
        let r = Reporter {
            log: LogMode::Activation,
            status_file: None,
            process: OnceLock::from(String::from("probe")),
            pid: Some(7),
        };
        let config = capshim_profile::env::parse([
            ("TART_METAL_APPLE_FAMILY_MAX", "1999"),
            ("TART_METAL_MAX_THREADGROUP_MEMORY", "0"),
        ])
        .config
        .unwrap();
        let lines: Vec<String> = limits::check(&config.profile, None)
            .iter()
            .map(|f| warning_line(&r, &config.sources, f))
            .collect();
        assert_eq!(
            lines,
            [
                "warning in probe (pid 7): TART_METAL_APPLE_FAMILY_MAX: 1999 is above MTLGPUFamilyApple10 (1010), the newest Apple family of any known GPU (M5): no hardware has it; answering as configured, beyond what any Apple GPU has",
                "warning in probe (pid 7): TART_METAL_MAX_THREADGROUP_MEMORY: 0 bytes is below the 32768 bytes every Apple GPU and the stock paravirtual device report, so it changes nothing (the shim only raises answers); values are bytes, e.g. 32768; answering as configured",
            ]
        );
    }

    #[test]
    fn events_are_one_json_object_per_line() {
        let r = Reporter {
            log: LogMode::Off,
            status_file: None,
            process: OnceLock::from(String::from("llama \"bench\"")),
            pid: Some(42),
        };
        let p = Profile::new(1009, 65536, None).unwrap();
        assert_eq!(
            event_json(&r, "hooked", None, Some("AppleParavirtDevice"), Some(&p)),
            "{\"pid\":42,\"process\":\"llama \\\"bench\\\"\",\"event\":\"hooked\",\"reason\":null,\
             \"class\":\"AppleParavirtDevice\",\"profile\":{\"apple_family_max\":1009,\
             \"max_threadgroup_memory\":65536,\"recommended_working_set_size\":null}}\n"
        );
        assert_eq!(
            event_json(&r, "inactive", Some("bad"), None, None),
            "{\"pid\":42,\"process\":\"llama \\\"bench\\\"\",\"event\":\"inactive\",\"reason\":\"bad\",\"class\":null,\"profile\":null}\n"
        );
    }
}
