//! `capshim agent`: a per-user LaunchAgent that runs one workload with the shim.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;

use super::out;
use crate::deploy::agent::{Agent, AgentError, check_absolute, check_label};
use crate::launch::environment::ShimArgs;
use crate::launch::injection::insert_library;
use crate::launch::{Os, dylib, preflight};
use crate::platform::facts;
use crate::profile::ProfileArgs;

/// Write a per-user LaunchAgent that runs a program with the shim (macOS launchd)
#[derive(Debug, Args)]
#[command(after_help = "\
Prints the property list (launchd.plist) on stdout, or with --install writes it to
~/Library/LaunchAgents/LABEL.plist (never replacing an existing file unless --force) and
prints the launchctl commands to load, restart and unload it. ProgramArguments holds one
entry per argument; EnvironmentVariables holds only the shim's CAPSHIM_* variables and
DYLD_INSERT_LIBRARIES. The program and the log paths must be absolute; a relative --dylib
is made absolute from the current folder (a note says so). On a system that is not macOS,
--install still writes the file but warns that nothing there will start it.

Examples:
  capshim agent --label com.example.llama-server --profile native \\
      --stderr /tmp/llama-server.err.log -- /opt/llama/bin/llama-server -m /models/m.gguf
  capshim agent --label com.example.llama-server --install -- /opt/llama/bin/llama-server
  launchctl bootstrap gui/$(id -u) ~/Library/LaunchAgents/com.example.llama-server.plist

Exit codes:
  0  written (or printed)
  1  error: bad label, relative path, the agent file exists without --force, bad profile,
     the program refused by the pre-flight checks (as capshim run refuses it)
  2  usage error")]
// The shared shim options (ShimArgs), worded for agent's program.
#[command(
    mut_arg("dylib", |a| a.help(
        "Path of libcapshim.dylib, made absolute if relative (default: searched like `capshim run` does)"
    )),
    mut_arg("scope", |a| a.help("Whether the program's children inherit the shim")),
    mut_arg("only_process", |a| a.help(
        "Activate only in processes with this executable name, a file name, never a path (default: the program's own name)"
    )),
)]
pub struct AgentArgs {
    /// launchd label, also the file name, e.g. com.example.llama-server
    #[arg(long, value_name = "LABEL")]
    label: String,

    #[command(flatten)]
    profile: ProfileArgs,

    #[command(flatten)]
    shim: ShimArgs,

    /// Absolute path the shim appends JSON status lines to (CAPSHIM_STATUS_FILE)
    #[arg(long, value_name = "PATH")]
    status_file: Option<PathBuf>,

    /// StandardOutPath: absolute path for the program's stdout
    #[arg(long, value_name = "PATH")]
    stdout: Option<PathBuf>,

    /// StandardErrorPath: absolute path for the program's stderr (and the shim's log line)
    #[arg(long, value_name = "PATH")]
    stderr: Option<PathBuf>,

    /// Restart the program whenever it exits (KeepAlive)
    #[arg(long)]
    keep_alive: bool,

    /// Write ~/Library/LaunchAgents/LABEL.plist instead of printing the plist
    #[arg(long)]
    install: bool,

    /// With --install, replace an existing LABEL.plist
    #[arg(long, requires = "install")]
    force: bool,

    /// Skip the architecture and code-signature checks of the program
    #[arg(long)]
    skip_preflight: bool,

    /// The program (absolute path) and its arguments, after `--`
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    program: Vec<OsString>,
}

fn utf8(what: &'static str, text: &OsString) -> Result<String, AgentError> {
    text.to_str()
        .map(str::to_string)
        .ok_or(AgentError::NotUtf8 { what })
}

fn absolute(what: &'static str, path: &Option<PathBuf>) -> Result<(), AgentError> {
    path.as_deref().map_or(Ok(()), |p| check_absolute(what, p))
}

/// `--dylib` as the agent must name it: a relative path is taken from the current folder
/// and made absolute (launchd starts agents from /), with a note saying so.
fn absolute_dylib(dylib: Option<PathBuf>) -> anyhow::Result<Option<PathBuf>> {
    let given = match dylib {
        Some(given) if given.is_relative() => given,
        other => return Ok(other),
    };
    let made = std::path::absolute(&given).with_context(|| {
        format!(
            "--dylib {}: cannot make it absolute (the current folder is unreadable); give the full path",
            given.display()
        )
    })?;
    crate::term::note(format!(
        "--dylib {} is relative; the agent uses {} (launchd starts agents from /)",
        given.display(),
        made.display()
    ));
    Ok(Some(made))
}

/// Runs `capshim agent`.
pub fn execute(mut args: AgentArgs) -> anyhow::Result<ExitCode> {
    check_label(&args.label)?;
    let program = Path::new(&args.program[0]);
    check_absolute("the program", program)?;
    absolute("--stdout", &args.stdout)?;
    absolute("--stderr", &args.stderr)?;
    absolute("--status-file", &args.status_file)?;
    args.shim.dylib = absolute_dylib(args.shim.dylib.take())?;

    let resolved = args.profile.resolve()?;
    let Some(profile) = resolved.profile else {
        bail!(
            "--profile stock runs without the shim, so it needs no capshim agent; pick another profile (default: native, or apple9-64k where the host chip is not known)"
        );
    };
    let library = dylib::locate_here(args.shim.dylib.as_deref(), Os::MacOs)?;
    if library.exists() {
        let arches = dylib::check(&library, Os::MacOs)?;
        if program.exists() {
            // The agent runs on this Mac: the same checks as `capshim run`.
            let launch = preflight::Launch {
                program,
                library: &library,
                library_arches: &arches,
                scope: args.shim.scope,
                os: Os::MacOs,
                skip_program: args.skip_preflight,
            };
            for warning in preflight::check(&facts::Real::default(), &launch)? {
                crate::term::warning(warning);
            }
        } else {
            eprintln!(
                "capshim: warning: {} does not exist on this machine, so it was not checked; make sure it does where the agent runs",
                program.display()
            );
        }
    } else {
        eprintln!(
            "capshim: warning: {} does not exist on this machine; make sure it does where the agent runs",
            library.display()
        );
    }

    let settings = args.shim.settings(
        Some(profile),
        library.clone(),
        program.as_os_str(),
        args.status_file,
    );
    let mut environment = Vec::new();
    for (name, value) in settings.shim_vars() {
        environment.push((name.to_string(), utf8("a shim variable", &value)?));
    }
    // A profile file's [env], for the program as for `run`.
    environment.extend(resolved.env.iter().cloned());
    environment.push((
        Os::MacOs.injection_var().to_string(),
        utf8(
            "--dylib",
            &insert_library(None, library.as_os_str(), Os::MacOs),
        )?,
    ));
    let agent = Agent {
        label: args.label,
        program_arguments: args
            .program
            .iter()
            .map(|a| utf8("a program argument", a))
            .collect::<Result<_, _>>()?,
        environment,
        stdout: args.stdout,
        stderr: args.stderr,
        keep_alive: args.keep_alive,
    };
    agent.check_xml()?;

    if !args.install {
        out(&agent.to_xml())?;
        eprintln!(
            "capshim: profile {resolved}; save this as ~/Library/LaunchAgents/{}.plist, or rerun with --install",
            agent.label
        );
        return Ok(ExitCode::SUCCESS);
    }
    if Os::current() != Os::MacOs {
        // Written anyway (the file is right for a Mac, and the rules for writing it are the
        // same), but nothing here will ever read it.
        crate::term::warning(format!(
            "this is {}, not macOS: launchd, which reads ~/Library/LaunchAgents, does not exist here, so nothing will start this agent on this machine. Install it in the macOS guest (rerun this command there, or copy the plist capshim agent prints without --install)",
            std::env::consts::OS
        ));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or(AgentError::NoHome)?;
    let path = agent
        .install(&home, args.force)
        .with_context(|| format!("installing LaunchAgent {}", agent.label))?;
    let mut text = format!("wrote {} (profile {resolved})\n", path.display());
    for (what, command) in agent.launchctl_commands(&path) {
        text.push_str(&format!("  {what:<16} {command}\n"));
    }
    out(&text)?;
    Ok(ExitCode::SUCCESS)
}
