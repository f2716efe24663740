//! `capshim profiles`: the named profiles, their values, where they come from, which one is the
//! default here, and what each fixed profile claims beyond each chip.

use std::collections::BTreeMap;
use std::process::ExitCode;

use capshim_profile::named::{self, CHIPS, CHIPS_SOURCE, Chip, NamedProfile};
use capshim_profile::{GpuFamily, Profile};
use clap::Args;
use serde::Serialize;

use super::out;
use crate::platform::facts;
use crate::profile::{ChipMatch, chip};

/// List the named profiles with their values and provenance, the default here, and what
/// apple9-64k claims beyond each chip.
#[derive(Debug, Args)]
#[command(after_help = "\
Profiles: native (the host chip's own bare-metal answers: the default where the chip is known,
from `sysctl machdep.cpu.brand_string` in a macOS guest or --cpu-brand), apple9-64k (the first
published experiment's profile: the default where the chip is not known), stock (no shim).
`--profile host` is read as native.

Examples:
  capshim profiles
  capshim profiles --cpu-brand \"Apple M2 Pro (Virtual)\"
  capshim profiles --json

Exit codes:
  0  listed
  1  error (message on stderr)
  2  usage error")]
pub struct ProfilesArgs {
    /// Print JSON instead of a table
    #[arg(long)]
    json: bool,
    /// The host chip's CPU brand, instead of `sysctl machdep.cpu.brand_string`
    #[arg(long, value_name = "STRING")]
    cpu_brand: Option<String>,
}

/// How a fixed profile differs from one chip's bare-metal answers.
#[derive(Debug, Serialize)]
struct OnChip {
    chip: &'static str,
    /// Whether it claims anything the chip does not have.
    over_claims: bool,
    /// Each difference, in words (empty: the chip's own answers).
    differences: Vec<String>,
}

/// One row of the listing.
#[derive(Debug, Serialize)]
struct Row {
    name: String,
    summary: String,
    provenance: String,
    /// `false` when the values depend on the machine and could not be found here (`native`).
    available: bool,
    /// Whether a command without `--profile` uses it here.
    default: bool,
    apple_family_max: Option<i64>,
    max_threadgroup_memory: Option<u64>,
    recommended_working_set_size: Option<u64>,
    /// For profiles with fixed values: how they differ from each chip.
    on_chips: Vec<OnChip>,
}

#[derive(Debug, Serialize)]
struct Listing {
    profiles: Vec<Row>,
    /// The profile a command uses without `--profile`, here.
    default: &'static str,
    /// Why that one.
    default_reason: String,
    /// Names read as another profile: `host` is read as `native`.
    aliases: BTreeMap<&'static str, &'static str>,
    /// The chip table `native` is taken from.
    chips: &'static [Chip],
    /// Where the chip table comes from.
    chips_source: &'static str,
}

fn row(name: &str, summary: &str, provenance: String, profile: Option<Profile>) -> Row {
    Row {
        name: name.to_string(),
        summary: summary.to_string(),
        provenance,
        available: true,
        default: false,
        apple_family_max: profile.map(|p| p.apple_family_max),
        max_threadgroup_memory: profile.map(|p| p.max_threadgroup_memory),
        recommended_working_set_size: profile.and_then(|p| p.recommended_working_set_size),
        on_chips: Vec::new(),
    }
}

fn fixed_row(p: NamedProfile) -> Row {
    let mut r = row(p.name, p.summary, p.provenance.to_string(), p.profile);
    if let Some(profile) = p.profile {
        r.on_chips = CHIPS
            .iter()
            .map(|chip| {
                let mismatches = named::mismatches(&profile, chip);
                OnChip {
                    chip: chip.name,
                    over_claims: mismatches.iter().any(|m| m.is_over_claim()),
                    differences: mismatches.iter().map(ToString::to_string).collect(),
                }
            })
            .collect();
    }
    r
}

fn listing(chip: Result<ChipMatch, String>) -> Listing {
    let native = match &chip {
        Ok(m) => row(
            named::NATIVE,
            named::NATIVE_SUMMARY,
            m.describe(),
            Some(named::native(m.chip)),
        ),
        Err(why) => Row {
            available: false,
            ..row(
                named::NATIVE,
                named::NATIVE_SUMMARY,
                format!("not available here: {why}"),
                None,
            )
        },
    };
    let (default, default_reason) = match &chip {
        Ok(m) => (
            named::NATIVE,
            format!("the host chip is known: {}", m.describe()),
        ),
        Err(why) => (
            named::APPLE9_64K,
            format!("the host chip is not known: {why}"),
        ),
    };
    let mut native = Some(native);
    let mut profiles = Vec::new();
    for name in named::NAMES {
        let mut r = match named::find(name) {
            Some(p) => fixed_row(p),
            None => native.take().expect("native is listed once"),
        };
        r.default = name == default;
        profiles.push(r);
    }
    Listing {
        profiles,
        default,
        default_reason,
        aliases: BTreeMap::from([(named::HOST_ALIAS, named::NATIVE)]),
        chips: CHIPS,
        chips_source: CHIPS_SOURCE,
    }
}

fn family(f: i64) -> String {
    format!("{f} ({})", GpuFamily(f).name().unwrap_or("?"))
}

fn render(l: &Listing) -> String {
    let mut out = format!(
        "{:<11} {:<16} {:<19} {:<12} {}\n",
        "NAME", "APPLE FAMILY MAX", "THREADGROUP MEMORY", "WORKING SET", "SUMMARY"
    );
    for r in &l.profiles {
        let fam = r.apple_family_max.map_or("-".to_string(), family);
        let tg = r
            .max_threadgroup_memory
            .map_or("-".to_string(), |b| format!("{b} bytes"));
        let ws = match (r.apple_family_max, r.recommended_working_set_size) {
            (None, _) => "-".to_string(),
            (Some(_), None) => "unchanged".to_string(),
            (Some(_), Some(b)) => format!("{b} bytes"),
        };
        let name = if r.default {
            format!("{}*", r.name)
        } else {
            r.name.clone()
        };
        let line = format!("{name:<11} {fam:<16} {tg:<19} {ws:<12} {}", r.summary);
        out.push_str(line.trim_end());
        out.push_str(&format!("\n{:<11} from: {}\n", "", r.provenance));
        for c in &r.on_chips {
            let said = if c.differences.is_empty() {
                "the chip's own answers".to_string()
            } else {
                c.differences.join("; ")
            };
            out.push_str(&format!("{:<11} on {}: {said}\n", "", c.chip));
        }
    }
    out.push_str(&format!(
        "\n* default here: {} ({})\n",
        l.default, l.default_reason
    ));
    for (alias, name) in &l.aliases {
        out.push_str(&format!(
            "  --profile {alias} is read as {name} (host means only the bare-metal baseline of a measurement)\n"
        ));
    }
    out.push_str("\nnative by chip (the Apple family each chip's GPU reports on bare metal):\n");
    for c in l.chips {
        out.push_str(&format!(
            "  {:<3} {}, {} bytes of threadgroup memory\n",
            c.name,
            family(c.apple_family),
            c.threadgroup_memory
        ));
    }
    out.push_str(&format!("  source: {}\n", l.chips_source));
    out.push_str(
        "\ncustom: --family-max N, --threadgroup-memory BYTES, --working-set BYTES (on top of a named\n\
         profile, or of the default), or --profile-file FILE.toml with apple_family_max,\n\
         max_threadgroup_memory and recommended_working_set_size; values beyond any known Apple GPU\n\
         need --allow-beyond-hardware\n",
    );
    out
}

/// The host chip for the listing, or why it is not known and what to do: an unknown
/// `--cpu-brand` is not an error here, the listing says so instead.
fn host_chip(given: Option<&str>) -> Result<ChipMatch, String> {
    match chip::find(given, &facts::Real::default()) {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(why)) => Err(format!("{why}; see the chip table, or pass --cpu-brand")),
        Err(unknown) => {
            let known: Vec<&str> = CHIPS.iter().map(|c| c.name).collect();
            Err(format!(
                "the CPU brand {:?} ({}) is unknown: it names none of the chips Apple {}; give the brand the guest reports, e.g. --cpu-brand \"Apple M1 Ultra (Virtual)\"",
                unknown.0.trim(),
                chip::GIVEN,
                known.join(", Apple ")
            ))
        }
    }
}

/// Runs `capshim profiles`.
pub fn execute(args: ProfilesArgs) -> anyhow::Result<ExitCode> {
    let l = listing(host_chip(args.cpu_brand.as_deref()));
    if args.json {
        out(&(serde_json::to_string_pretty(&l)? + "\n"))?;
    } else {
        out(&render(&l))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(brand: &str) -> Result<ChipMatch, String> {
        host_chip(Some(brand))
    }

    #[test]
    fn listing_with_a_known_brand() {
        let l = listing(given("Apple M2 Pro (Virtual)"));
        assert_eq!(l.default, "native");
        insta::assert_snapshot!("profiles_m2", render(&l));
        insta::assert_json_snapshot!("profiles_m2_json", l);
    }

    #[test]
    fn listing_where_the_host_is_unknown() {
        let l = listing(Err(
            "this is linux, not macOS; see the chip table, or pass --cpu-brand".into(),
        ));
        let native = &l.profiles[1];
        assert!(!native.available && !native.default);
        assert!(l.profiles[2].default);
        assert_eq!(l.default, "apple9-64k");
        insta::assert_snapshot!("profiles_unknown_host", render(&l));
    }

    #[test]
    fn an_unknown_brand_given_is_named_not_asked_for() {
        let l = listing(given("Intel"));
        let native = &l.profiles[1];
        assert!(!native.available);
        let why = &native.provenance;
        assert!(why.contains("\"Intel\" (--cpu-brand) is unknown"), "{why}");
        assert!(why.contains("Apple M1, Apple M2"), "{why}");
        assert!(!why.contains("or pass --cpu-brand"), "{why}");
    }

    #[test]
    fn apple9_64k_lists_what_it_over_claims_on_each_chip() {
        let l = listing(Err("unknown".into()));
        let a = &l.profiles[2];
        assert_eq!(a.name, "apple9-64k");
        let over: Vec<(&str, bool)> = a.on_chips.iter().map(|c| (c.chip, c.over_claims)).collect();
        assert_eq!(
            over,
            [
                ("M1", true),
                ("M2", true),
                ("M3", true),
                ("M4", true),
                ("M5", true)
            ]
        );
        assert_eq!(a.on_chips[0].differences.len(), 2);
        assert_eq!(a.on_chips[2].differences.len(), 1);
    }
}
