//! The knob catalogue: settings `capshim tune` tries, from `crates/cli/data/knobs.toml`
//! (its header describes the fields; docs/tune.md lists the knobs and why each may matter).
//!
//! [`select`] keeps the knobs that exist on this platform and llama.cpp build and belong to
//! the workload, and says why each other one is left out; [`singles`] makes one candidate per
//! value that differs from the reference, one knob at a time; [`combine`] makes combinations
//! of the best few singles only, never blind ones.

use serde::Deserialize;

use super::compose::Base;

/// The catalogue as built in: `crates/cli/data/knobs.toml`.
pub const CATALOGUE: &str = include_str!("../../data/knobs.toml");

/// How many of the best singles [`combine`] combines: their pairs and all of them together.
pub const COMBINE_TOP: usize = 3;

/// The parsed catalogue.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalogue {
    /// Builds that report no build number of their own.
    pub pinned: Pinned,
    /// The knobs, in the file's order.
    #[serde(rename = "knob")]
    pub knobs: Vec<Knob>,
}

/// Builds without git history (a vendored copy), known by their commit.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pinned {
    /// llama.cpp commits (as llama-bench's `build_commit` prints them) and their upstream
    /// build numbers.
    pub llama_cpp: Vec<PinnedBuild>,
}

/// One pinned build.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinnedBuild {
    /// The commit, abbreviated as llama-bench prints it (7 hex digits or more).
    pub commit: String,
    /// Its upstream build number (`git rev-list --count`).
    pub build: u64,
}

/// Where a knob applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// llama-bench (and verify's llama.cpp tools for the winner).
    Llama,
    /// `capshim tune --command`: any Metal workload.
    Command,
}

/// A platform a knob exists on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// macOS (the guest).
    Macos,
    /// Linux (llama.cpp's CPU build; the tests and CI).
    Linux,
}

impl Platform {
    /// The platform this program runs on, `None` on any other.
    pub fn current() -> Option<Platform> {
        match std::env::consts::OS {
            "macos" => Some(Platform::Macos),
            "linux" => Some(Platform::Linux),
            _ => None,
        }
    }

    /// Its name in the catalogue and in notes.
    pub fn name(self) -> &'static str {
        match self {
            Platform::Macos => "macos",
            Platform::Linux => "linux",
        }
    }
}

/// One knob of the catalogue (the file's header describes each field).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Knob {
    /// Its name (`GGML_METAL_NO_RESIDENCY`, `flash-attn`).
    pub name: String,
    /// The stem of its candidates' arm labels (`no-residency`, `fa`).
    pub label: String,
    /// The workloads it applies to.
    pub workload: Vec<Workload>,
    /// The platforms it exists on.
    pub platforms: Vec<Platform>,
    /// Only where the CPU does part of the work.
    #[serde(default)]
    pub cpu_work: bool,
    /// The first llama.cpp build it is known at (the build its sources were read at).
    pub min_build: Option<u64>,
    /// The reference's setting, in words.
    pub default: String,
    /// The values tried.
    pub values: Vec<KnobValue>,
    /// Why it may matter in a guest.
    pub why: String,
    /// Where it is read: "repository commit path:line".
    pub sources: Vec<String>,
}

/// One value of a knob.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnobValue {
    /// The value in words (`1`, `on`, `256`).
    pub value: String,
    /// The arm items that apply it.
    pub items: Vec<String>,
}

/// Parses a catalogue.
///
/// # Errors
/// The TOML parser's message, or a knob without values or sources.
pub fn parse(text: &str) -> Result<Catalogue, String> {
    let catalogue: Catalogue = toml::from_str(text).map_err(|e| e.to_string())?;
    for knob in &catalogue.knobs {
        if knob.values.is_empty() || knob.sources.is_empty() {
            return Err(format!("knob {:?} needs values and sources", knob.name));
        }
    }
    Ok(catalogue)
}

/// The built-in catalogue ([`CATALOGUE`]); a unit test parses it, so this cannot fail in a
/// released build.
pub fn catalogue() -> Catalogue {
    parse(CATALOGUE).expect("crates/cli/data/knobs.toml parses (tune::knobs tests)")
}

/// The upstream build number of the llama.cpp that llama-bench's JSON describes: its
/// `build_number`, or for a build without git history (which reports 1 or less) the pinned
/// build of its `build_commit`; `None` when not known.
pub fn llama_build(catalogue: &Catalogue, build_number: i64, build_commit: &str) -> Option<u64> {
    if build_number > 1 {
        return u64::try_from(build_number).ok();
    }
    let commit = build_commit.trim().to_ascii_lowercase();
    catalogue
        .pinned
        .llama_cpp
        .iter()
        .find(|p| {
            commit.len() >= 7 && (p.commit.starts_with(&commit) || commit.starts_with(&p.commit))
        })
        .map(|p| p.build)
}

/// What was found on this machine, which decides the knobs that apply.
#[derive(Clone, Copy, Debug)]
pub struct Found {
    /// This platform.
    pub platform: Platform,
    /// The workload tuned.
    pub workload: Workload,
    /// The llama.cpp build ([`llama_build`]); `None` when not known (the knobs are kept, with a
    /// note) or for a `--command` workload.
    pub llama_build: Option<u64>,
    /// Whether the CPU does part of the work (a CPU build, or layers kept on the CPU).
    pub cpu_work: bool,
    /// Whether the host chip is known, so that the `native` profile has values.
    pub native_known: bool,
    /// Logical CPUs of this machine (values of `threads` above it are left out).
    pub cpus: usize,
}

/// A knob, or one of its values, left out, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftOut {
    /// The knob's name.
    pub knob: String,
    /// Why, in words (naming the value when only a value is left out).
    pub reason: String,
}

/// The knobs that apply here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// The knobs kept, each with only the values kept.
    pub knobs: Vec<Knob>,
    /// Knobs and values left out, with the reason.
    pub left_out: Vec<LeftOut>,
    /// Other things to say (a llama.cpp build that is not known).
    pub notes: Vec<String>,
}

/// The knobs of `catalogue` that apply to `found`: of its workload, on its platform, at its
/// llama.cpp build, where the CPU works if they need that; values the machine cannot take
/// (more threads than CPUs, `native` without a known chip) are left out too.
pub fn select(catalogue: &Catalogue, found: &Found) -> Selection {
    let mut selection = Selection {
        knobs: Vec::new(),
        left_out: Vec::new(),
        notes: Vec::new(),
    };
    let mut unversioned = false;
    for knob in catalogue
        .knobs
        .iter()
        .filter(|k| k.workload.contains(&found.workload))
    {
        let out = |reason: String| LeftOut {
            knob: knob.name.clone(),
            reason,
        };
        if !knob.platforms.contains(&found.platform) {
            let on: Vec<&str> = knob.platforms.iter().map(|p| p.name()).collect();
            selection.left_out.push(out(format!(
                "it exists on {} only, not on {}",
                on.join(" and "),
                found.platform.name()
            )));
            continue;
        }
        if knob.cpu_work && !found.cpu_work {
            selection.left_out.push(out(
                "the GPU does all the work here (it matters only where the CPU does part)".into(),
            ));
            continue;
        }
        if let (Some(min), Workload::Llama) = (knob.min_build, found.workload) {
            match found.llama_build {
                Some(build) if build < min => {
                    selection.left_out.push(out(format!(
                        "llama.cpp build {build} is older than build {min}, the first it is known at"
                    )));
                    continue;
                }
                Some(_) => {}
                None => unversioned = true,
            }
        }
        let mut kept = knob.clone();
        kept.values.clear();
        for v in &knob.values {
            match value_left_out(knob, v, found) {
                Some(reason) => selection.left_out.push(out(reason)),
                None => kept.values.push(v.clone()),
            }
        }
        if !kept.values.is_empty() {
            selection.knobs.push(kept);
        }
    }
    if unversioned {
        selection.notes.push(
            "the llama.cpp build is not known (no build number, and its commit is not pinned in \
             the catalogue): its knobs are tried without checking that they exist there"
                .into(),
        );
    }
    selection
}

/// Why this machine cannot take `value` of `knob`, if it cannot: more threads than CPUs, or
/// `native` without a known chip.
fn value_left_out(knob: &Knob, value: &KnobValue, found: &Found) -> Option<String> {
    if knob.name == "threads" {
        let threads = value.value.parse::<usize>().ok()?;
        (threads > found.cpus).then(|| {
            format!(
                "{threads} threads: more than this machine's {} CPUs",
                found.cpus
            )
        })
    } else if knob.name == "profile" && value.value == capshim_profile::named::NATIVE {
        (!found.native_known).then(|| {
            "native: the host chip is not known, so native has no values (pass --cpu-brand)"
                .to_string()
        })
    } else {
        None
    }
}

/// One value of one knob, as an arm carries it (the arms grammar: a profile, an environment
/// variable, a tool argument).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    /// The knob's name in the catalogue (`GGML_METAL_NO_RESIDENCY`, `flash-attn`, `ubatch`).
    pub knob: String,
    /// The value in words, for labels (`1`, `on`, `256`).
    pub value: String,
    /// The arm items that apply it, in the arms grammar (`GGML_METAL_NO_RESIDENCY=1`,
    /// `bench-args=-fa 1,common-args=-fa on`, or a profile name for the profile knob).
    pub arm_items: Vec<String>,
}

/// A candidate: a label and the settings it changes from the reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Its arm label (valid as an arm label: `fa-1`, `no-residency`, `combo-1`).
    pub label: String,
    /// What it changes from the reference; the reference's own profile first if it changes it.
    pub settings: Vec<Setting>,
}

impl Candidate {
    /// Its `--arm` text: the reference `base` with this candidate's settings changed
    /// ([`Base::arm_spec`]: an option or variable replaces the reference's value of it, a
    /// profile replaces only the profile).
    ///
    /// # Errors
    /// Why it cannot be written as an arm (an option the reference's profile file gives).
    pub fn arm_spec(&self, base: &Base) -> Result<String, String> {
        base.arm_spec(&self.label, self.settings.iter().flat_map(|s| &s.arm_items))
    }
}

/// One candidate per value of each knob in `knobs` that differs from the reference (the
/// profile knob's value equal to `reference_profile` is the reference itself), in the
/// catalogue's order. Labels: the profile's name, the knob's label alone for a knob with one
/// value, else `<label>-<value>`.
pub fn singles(knobs: &[Knob], reference_profile: &str) -> Vec<Candidate> {
    let mut out = Vec::new();
    for knob in knobs {
        for v in &knob.values {
            let is_profile = knob.name == "profile";
            if is_profile && v.value == reference_profile {
                continue;
            }
            let label = if is_profile {
                v.value.clone()
            } else if knob.values.len() == 1 {
                knob.label.clone()
            } else {
                format!("{}-{}", knob.label, v.value)
            };
            out.push(Candidate {
                label,
                settings: vec![Setting {
                    knob: knob.name.clone(),
                    value: v.value.clone(),
                    arm_items: v.items.clone(),
                }],
            });
        }
    }
    out
}

/// Combinations of the best singles: `best` holds the candidates estimated faster than the
/// reference, best first (the driver's choice after the first stage); of the first
/// [`COMBINE_TOP`], every pair and, with three, all three together, skipping any that would
/// set one knob twice (two values of `ubatch`). Labels join the parts' labels with `_`
/// (`combo-N` when that would pass 64 characters); the profile setting comes first.
pub fn combine(best: &[Candidate]) -> Vec<Candidate> {
    let top = &best[..best.len().min(COMBINE_TOP)];
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for i in 0..top.len() {
        for j in i + 1..top.len() {
            groups.push(vec![i, j]);
        }
    }
    if top.len() == 3 {
        groups.push(vec![0, 1, 2]);
    }
    let mut out = Vec::new();
    for group in groups {
        let mut settings: Vec<Setting> = group
            .iter()
            .flat_map(|&i| top[i].settings.clone())
            .collect();
        let mut knobs: Vec<&str> = settings.iter().map(|s| s.knob.as_str()).collect();
        knobs.sort_unstable();
        if knobs.windows(2).any(|w| w[0] == w[1]) {
            continue;
        }
        settings.sort_by_key(|s| s.knob != "profile");
        let joined: Vec<&str> = group.iter().map(|&i| top[i].label.as_str()).collect();
        let mut label = joined.join("_");
        if label.len() > 64 {
            label = format!("combo-{}", out.len() + 1);
        }
        out.push(Candidate { label, settings });
    }
    out
}

/// The knobs of `catalogue` as docs/tune.md's table (a test checks that the page holds it).
pub fn markdown_table(catalogue: &Catalogue) -> String {
    let mut out = String::from(
        "| Knob | Values tried | Default | Where | Workload | Why it may matter in a guest | Source |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for k in &catalogue.knobs {
        let values: Vec<String> = k.values.iter().map(|v| format!("`{}`", v.value)).collect();
        let mut whereabouts: Vec<&str> = k.platforms.iter().map(|p| p.name()).collect();
        if k.cpu_work {
            whereabouts.push("where the CPU works");
        }
        let workloads: Vec<&str> = k
            .workload
            .iter()
            .map(|w| match w {
                Workload::Llama => "llama",
                Workload::Command => "command",
            })
            .collect();
        let sources: Vec<String> = k.sources.iter().map(|s| format!("`{s}`")).collect();
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} | {} |\n",
            k.name,
            values.join(", "),
            k.default,
            whereabouts.join(", "),
            workloads.join(", "),
            k.why.replace('|', "\\|"),
            sources.join("; "),
        ));
    }
    out
}
