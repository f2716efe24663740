//! The variables the shim reads: capshim's own names, and the names the published shims use
//! for the same settings, with each published shim's documented meaning and its source.

/// A shim whose variable names capshim reads, and how that shim documents them.
///
/// All three published shims descend from one Objective-C original (Cua's), read their numbers
/// with C's `strtoull(value, NULL, 0)` and agree on the meanings below except where a field
/// says otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shim {
    /// Its name in messages.
    pub name: &'static str,
    /// The prefix of its variables.
    pub prefix: &'static str,
    /// Whether it documents an Apple family maximum of 0 as "stay stock" (capshim then stays
    /// stock quietly, as for an unset variable), rather than as an invalid value (capshim stays
    /// stock and says why).
    pub zero_family_is_stock: bool,
    /// The threadgroup memory it raises to when only its family maximum is set, in bytes.
    pub default_threadgroup_memory: u64,
    /// Whether it reads numbers with `strtoull(…, 0)`, where a leading 0 means octal: capshim
    /// refuses such a number under its names rather than read it differently.
    pub reads_octal: bool,
    /// Where its variables and their meanings are documented.
    pub source: &'static str,
}

/// capshim itself (`CAPSHIM_*`).
pub const CAPSHIM: Shim = Shim {
    name: "capshim",
    prefix: "CAPSHIM_",
    zero_family_is_stock: false,
    default_threadgroup_memory: 65536,
    reads_octal: false,
    source: "docs/shim.md",
};

/// Cua's Lume shim (`LUME_METAL_*`), the first published one.
pub const LUME: Shim = Shim {
    name: "Lume",
    prefix: "LUME_METAL_",
    zero_family_is_stock: true,
    default_threadgroup_memory: 65536,
    reads_octal: true,
    source: "trycua/cua libs/lume/metal-capability-shim/README.md (\"If it is absent, zero, outside the Apple-family range, or malformed, the library leaves the process unchanged\"; threadgroup memory default 65536; working set unchanged unless set) and Sources/LumeMetalCapabilities.m",
};

/// The shim in Tart's macOS base images (`TART_METAL_*`), Cua's renamed.
pub const TART: Shim = Shim {
    name: "Tart",
    prefix: "TART_METAL_",
    zero_family_is_stock: true,
    default_threadgroup_memory: 65536,
    reads_octal: true,
    source: "cirruslabs/macos-image-templates PR 372: README.md \"Metal capabilities\" (\"Set TART_METAL_APPLE_FAMILY_MAX=0 for stock capabilities\"; the guest agent sets 1009 and 65536) and data/tart-metal-capabilities/README.md (threadgroup memory default 65536; working set unchanged when unset)",
};

/// Veertu's shim for Anka (`VEERTU_ANKA_GPU_*`).
pub const ANKA: Shim = Shim {
    name: "Anka",
    prefix: "VEERTU_ANKA_GPU_",
    zero_family_is_stock: false,
    default_threadgroup_memory: 65536,
    reads_octal: true,
    source: "veertuinc/anka-metal-unlock README.md \"Environment variables\" (family 1001-1999 required, \"missing or invalid values leave the process stock\"; threadgroup memory default 65536; working set unchanged unless set) and guest/config.m",
};

/// Every shim whose names capshim reads, capshim first.
pub const SHIMS: [Shim; 4] = [CAPSHIM, LUME, TART, ANKA];

/// A published shim's name for a setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Alias {
    /// The variable's name.
    pub name: &'static str,
    /// The shim that documents it.
    pub shim: Shim,
}

/// A setting's capshim name and the published shims' names for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Var {
    /// The `CAPSHIM_*` name.
    pub primary: &'static str,
    /// The published shims' names for the same setting, in [`SHIMS`] order.
    pub aliases: &'static [Alias],
}

impl Var {
    /// Every name of the setting with its shim, the `CAPSHIM_*` one first.
    pub fn names(&self) -> impl Iterator<Item = Alias> + '_ {
        std::iter::once(Alias {
            name: self.primary,
            shim: CAPSHIM,
        })
        .chain(self.aliases.iter().copied())
    }
}

/// Highest Apple family to answer true, 1001–1999. Required to activate.
pub const FAMILY_MAX: Var = Var {
    primary: "CAPSHIM_APPLE_FAMILY_MAX",
    aliases: &[
        Alias {
            name: "LUME_METAL_APPLE_FAMILY_MAX",
            shim: LUME,
        },
        Alias {
            name: "TART_METAL_APPLE_FAMILY_MAX",
            shim: TART,
        },
        Alias {
            name: "VEERTU_ANKA_GPU_APPLE_FAMILY_MAX",
            shim: ANKA,
        },
    ],
};
/// Threadgroup memory floor in bytes; default 65536 (every shim's).
pub const THREADGROUP_MEMORY: Var = Var {
    primary: "CAPSHIM_MAX_THREADGROUP_MEMORY",
    aliases: &[
        Alias {
            name: "LUME_METAL_MAX_THREADGROUP_MEMORY",
            shim: LUME,
        },
        Alias {
            name: "TART_METAL_MAX_THREADGROUP_MEMORY",
            shim: TART,
        },
        Alias {
            name: "VEERTU_ANKA_GPU_THREADGROUP_MEMORY_MIN",
            shim: ANKA,
        },
    ],
};
/// Working set floor in bytes; the working set is untouched when absent.
pub const WORKING_SET: Var = Var {
    primary: "CAPSHIM_RECOMMENDED_WORKING_SET_SIZE",
    aliases: &[
        Alias {
            name: "LUME_METAL_RECOMMENDED_WORKING_SET_SIZE",
            shim: LUME,
        },
        Alias {
            name: "TART_METAL_RECOMMENDED_WORKING_SET_SIZE",
            shim: TART,
        },
        Alias {
            name: "VEERTU_ANKA_GPU_WORKING_SET_MIN",
            shim: ANKA,
        },
    ],
};
/// `children` (default) or `process`.
pub const SCOPE: Var = Var {
    primary: "CAPSHIM_SCOPE",
    aliases: &[],
};
/// Activate only in a process whose executable name equals this.
pub const ONLY_PROCESS: Var = Var {
    primary: "CAPSHIM_ONLY_PROCESS",
    aliases: &[],
};
/// `activation` (default), `off` or `queries`.
pub const LOG: Var = Var {
    primary: "CAPSHIM_LOG",
    aliases: &[],
};
/// A file to which the shim appends one JSON object per event.
pub const STATUS_FILE: Var = Var {
    primary: "CAPSHIM_STATUS_FILE",
    aliases: &[],
};

/// Set by the shim itself, not by users: `PID:START`, the process it first activated in when
/// it is limited to one process (`CAPSHIM_SCOPE=process` or `CAPSHIM_ONLY_PROCESS`), with
/// that process's start time, so that an image the process replaces itself with (a framework
/// Python's launcher re-executing the interpreter) counts as the same process, and a child,
/// or a later process that got the same pid, as another one. Launchers must not pass it on.
pub const OWNER_PID: &str = "CAPSHIM_OWNER_PID";

/// Every variable the shim reads, in the order docs/shim.md lists them.
pub const ALL: [Var; 7] = [
    FAMILY_MAX,
    THREADGROUP_MEMORY,
    WORKING_SET,
    SCOPE,
    ONLY_PROCESS,
    LOG,
    STATUS_FILE,
];

/// Prefixes of the variables that belong to capshim or a shim it stands in for;
/// `CAPSHIM_SCOPE=process` removes every variable with one of them so that children start
/// stock, and `capshim run` drops inherited ones so that exactly the chosen profile applies.
pub const PREFIXES: [&str; 4] = [CAPSHIM.prefix, LUME.prefix, TART.prefix, ANKA.prefix];

/// The name `shim` uses for `var`, if it has one.
pub fn name_in(var: Var, shim: Shim) -> Option<&'static str> {
    var.names().find(|a| a.shim == shim).map(|a| a.name)
}
