//! Launching a workload with the shim: where the library is, the child's environment and in it
//! the injection variable, pre-flight checks of the program, reading the status file, and the
//! exit status.

pub mod child;
pub mod dylib;
pub mod environment;
pub mod exit;
pub mod group;
pub mod injection;
pub mod preflight;
pub mod signals;
pub mod status;

/// The operating system a launch is for: decides the library's file name and the
/// injection variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Os {
    /// macOS: `libcapshim.dylib`, `DYLD_INSERT_LIBRARIES`.
    MacOs,
    /// Linux (the simulated guest used for testing): `libcapshim.so`, `LD_PRELOAD`.
    Linux,
}

impl Os {
    /// The OS this capshim binary was built for (anything not macOS is treated as Linux).
    pub const fn current() -> Os {
        if cfg!(target_os = "macos") {
            Os::MacOs
        } else {
            Os::Linux
        }
    }

    /// The shim library's file name.
    pub const fn library_name(self) -> &'static str {
        match self {
            Os::MacOs => "libcapshim.dylib",
            Os::Linux => "libcapshim.so",
        }
    }

    /// The variable the dynamic loader reads libraries to inject from.
    pub const fn injection_var(self) -> &'static str {
        match self {
            Os::MacOs => "DYLD_INSERT_LIBRARIES",
            Os::Linux => "LD_PRELOAD",
        }
    }
}
