//! `capshim profiles`: the named profiles, their values and where they come from.

use std::process::ExitCode;

use capshim_profile::named::{self, BARE_METAL_THREADGROUP_MEMORY, CHIPS};
use capshim_profile::{GpuFamily, Profile};
use clap::Args;
use serde::Serialize;

use crate::platform;

/// List the named profiles with their values and provenance.
#[derive(Debug, Args)]
#[command(after_help = "\
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
    /// Match the host profile to this CPU brand instead of `sysctl machdep.cpu.brand_string`
    #[arg(long, value_name = "STRING")]
    cpu_brand: Option<String>,
}

/// One row of the listing.
#[derive(Debug, Serialize)]
struct Row {
    name: String,
    summary: String,
    provenance: String,
    /// `false` when the values depend on the machine and could not be found here (`host`).
    available: bool,
    apple_family_max: Option<i64>,
    max_threadgroup_memory: Option<u64>,
    recommended_working_set_size: Option<u64>,
}

/// The bare-metal profile of one chip generation.
#[derive(Debug, Serialize)]
struct Chip {
    chip: &'static str,
    apple_family_max: i64,
    max_threadgroup_memory: u64,
}

#[derive(Debug, Serialize)]
struct Listing {
    profiles: Vec<Row>,
    host_chips: Vec<Chip>,
}

fn row(name: &str, summary: &str, provenance: String, profile: Option<Profile>) -> Row {
    Row {
        name: name.to_string(),
        summary: summary.to_string(),
        provenance,
        available: true,
        apple_family_max: profile.map(|p| p.apple_family_max),
        max_threadgroup_memory: profile.map(|p| p.max_threadgroup_memory),
        recommended_working_set_size: profile.and_then(|p| p.recommended_working_set_size),
    }
}

fn listing(brand: Result<(String, &'static str), String>) -> Listing {
    let mut profiles: Vec<Row> = named::fixed()
        .into_iter()
        .map(|p| row(p.name, p.summary, p.provenance.to_string(), p.profile))
        .collect();
    let summary = "the host chip's own bare-metal profile: its Apple family, 32768 bytes of threadgroup memory";
    let unavailable = |why: String| Row {
        available: false,
        ..row("host", summary, why, None)
    };
    profiles.push(match brand {
        Err(why) => unavailable(format!(
            "not available here: {why}; see the chip table, or pass --cpu-brand"
        )),
        Ok((brand, how)) => match named::host(&brand) {
            Ok((profile, chip)) => row(
                "host",
                summary,
                format!("{chip}, matched from CPU brand {:?} ({how})", brand.trim()),
                Some(profile),
            ),
            Err(_) => {
                let chips: Vec<&str> = CHIPS.iter().map(|&(chip, _)| chip).collect();
                let fix = if how == "--cpu-brand" {
                    "give the brand the guest reports, e.g. --cpu-brand \"Apple M1 Ultra (Virtual)\""
                } else {
                    "pass the brand with --cpu-brand"
                };
                unavailable(format!(
                    "not available: the CPU brand {:?} ({how}) is unknown: it names none of the chips Apple {}; {fix}",
                    brand.trim(),
                    chips.join(", Apple ")
                ))
            }
        },
    });
    Listing {
        profiles,
        host_chips: CHIPS
            .iter()
            .map(|&(chip, family)| Chip {
                chip,
                apple_family_max: family,
                max_threadgroup_memory: BARE_METAL_THREADGROUP_MEMORY,
            })
            .collect(),
    }
}

fn render(l: &Listing) -> String {
    let mut out = format!(
        "{:<11} {:<16} {:<19} {:<12} {}\n",
        "NAME", "APPLE FAMILY MAX", "THREADGROUP MEMORY", "WORKING SET", "SUMMARY"
    );
    for r in &l.profiles {
        let family = r.apple_family_max.map_or("-".to_string(), |f| {
            format!("{f} ({})", GpuFamily(f).name().unwrap_or("?"))
        });
        let tg = r
            .max_threadgroup_memory
            .map_or("-".to_string(), |b| format!("{b} bytes"));
        let ws = match (r.apple_family_max, r.recommended_working_set_size) {
            (None, _) => "-".to_string(),
            (Some(_), None) => "unchanged".to_string(),
            (Some(_), Some(b)) => format!("{b} bytes"),
        };
        let line = format!(
            "{:<11} {family:<16} {tg:<19} {ws:<12} {}",
            r.name, r.summary
        );
        out.push_str(line.trim_end());
        out.push_str(&format!("\n{:<11} from: {}\n", "", r.provenance));
    }
    out.push_str(
        "\nhost profile by chip (the Apple family each chip's GPU reports on bare metal):\n",
    );
    for c in &l.host_chips {
        out.push_str(&format!(
            "  {:<3} {} ({}), {} bytes of threadgroup memory\n",
            c.chip,
            c.apple_family_max,
            GpuFamily(c.apple_family_max).name().unwrap_or("?"),
            c.max_threadgroup_memory
        ));
    }
    out.push_str(
        "\ncustom: --family-max N, --threadgroup-memory BYTES, --working-set BYTES (on top of a named\n\
         profile, default apple9-64k), or --profile-file FILE.toml with apple_family_max,\n\
         max_threadgroup_memory and recommended_working_set_size\n",
    );
    out
}

/// Runs `capshim profiles`.
pub fn execute(args: ProfilesArgs) -> anyhow::Result<ExitCode> {
    let brand = match args.cpu_brand {
        Some(brand) => Ok((brand, "--cpu-brand")),
        None => platform::cpu_brand().map(|b| (b, "sysctl machdep.cpu.brand_string")),
    };
    let l = listing(brand);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&l)?);
    } else {
        print!("{}", render(&l));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_with_a_known_brand() {
        let l = listing(Ok(("Apple M2 Pro (Virtual)".into(), "--cpu-brand")));
        insta::assert_snapshot!("profiles_m2", render(&l));
        insta::assert_json_snapshot!("profiles_m2_json", l);
    }

    #[test]
    fn listing_where_the_host_is_unknown() {
        let l = listing(Err("this is linux, not macOS".into()));
        assert!(!l.profiles[2].available);
        insta::assert_snapshot!("profiles_unknown_host", render(&l));
    }

    #[test]
    fn an_unknown_brand_given_is_named_not_asked_for() {
        let l = listing(Ok(("Intel".into(), "--cpu-brand")));
        let host = &l.profiles[2];
        assert!(!host.available);
        let why = &host.provenance;
        assert!(why.contains("\"Intel\" (--cpu-brand) is unknown"), "{why}");
        assert!(why.contains("Apple M1, Apple M2"), "{why}");
        assert!(!why.contains("or pass --cpu-brand"), "{why}");
    }
}
