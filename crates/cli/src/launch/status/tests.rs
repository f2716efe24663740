//! The status file's readers: the strict one (bench, verify) and the bounded summary (run,
//! probe).

use super::*;

const ACTIVE: &str = r#"{"pid":10,"process":"probe","event":"active","reason":null,"class":null,"profile":{"apple_family_max":1009,"max_threadgroup_memory":65536,"recommended_working_set_size":null}}"#;
const HOOKED: &str = r#"{"pid":10,"process":"probe","event":"hooked","reason":null,"class":"AppleParavirtDevice","profile":null}"#;
const SH_ACTIVE: &str = r#"{"pid":9,"process":"sh","event":"active","reason":null,"class":null,"profile":{"apple_family_max":1009,"max_threadgroup_memory":65536,"recommended_working_set_size":null}}"#;

#[test]
fn empty_file_means_the_shim_did_not_load() {
    let s = Summary::from_lines("");
    assert!(!s.activated());
    assert!(s.line().contains("the shim did not load"), "{}", s.line());
}

#[test]
fn hooked_class_means_activated() {
    let s = Summary::from_lines(&format!("{SH_ACTIVE}\n{ACTIVE}\n{HOOKED}\n"));
    assert!(s.activated());
    assert_eq!(
        s.line(),
        "capshim: activated: hooked AppleParavirtDevice in probe (pid 10); stayed stock: sh (pid 9): configuration accepted but no Metal device was created"
    );
}

#[test]
fn accepted_without_a_device_is_not_activated() {
    let s = Summary::from_lines(SH_ACTIVE);
    assert!(!s.activated());
    assert_eq!(
        s.line(),
        "capshim: not activated: sh (pid 9): configuration accepted but no Metal device was created"
    );
}

#[test]
fn reasons_from_inactive_and_failed_events() {
    let text = [
        r#"{"pid":5,"process":"a","event":"inactive","reason":"CAPSHIM_APPLE_FAMILY_MAX=\"x\" is malformed","class":null,"profile":null}"#,
        r#"{"pid":6,"process":"b","event":"active","reason":null,"class":null,"profile":null}"#,
        r#"{"pid":6,"process":"b","event":"failed","reason":"supportsFamily: not found","class":"AppleParavirtDevice","profile":null}"#,
        "{\"pid\":7,",
    ]
    .join("\n");
    let s = Summary::from_lines(&text);
    assert!(!s.activated());
    assert_eq!(
        s.line(),
        "capshim: not activated: a (pid 5): CAPSHIM_APPLE_FAMILY_MAX=\"x\" is malformed; b (pid 6): hook failed on AppleParavirtDevice: supportsFamily: not found (1 unreadable status line(s) ignored)"
    );
}

#[test]
fn many_processes_are_summarised() {
    let mut lines = vec![ACTIVE.to_string(), HOOKED.to_string()];
    for pid in 20..26 {
        lines.push(format!(
            r#"{{"pid":{pid},"process":"sh","event":"active","reason":null,"class":null,"profile":null}}"#
        ));
    }
    lines.push(
        r#"{"pid":10,"process":"probe","event":"failed","reason":"no IMP","class":"OtherDevice","profile":null}"#
            .to_string(),
    );
    let line = Summary::from_lines(&lines.join("\n")).line();
    assert!(line.starts_with("capshim: activated: hooked AppleParavirtDevice in probe (pid 10); hook failed on OtherDevice in probe (pid 10): no IMP; stayed stock: sh (pid 20)"), "{line}");
    assert!(line.ends_with("and 3 more"), "{line}");
}

#[test]
fn events_carry_the_profile() {
    let events = StatusEvent::parse_file("s.jsonl", &format!("{ACTIVE}\n\n{HOOKED}\n")).unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].profile.as_ref().unwrap().apple_family_max, 1009);
    assert_eq!(events[1].class.as_deref(), Some("AppleParavirtDevice"));
}

#[test]
fn a_broken_status_file_is_an_error() {
    let err = StatusEvent::parse_file("raw/x.status.jsonl", "{\"pid\":1}\nnot json\n").unwrap_err();
    assert!(
        err.to_string().contains("raw/x.status.jsonl: line 1"),
        "{err}"
    );
}

#[test]
fn a_flooded_status_file_is_read_within_bounds_and_activation_still_found() {
    let event = |pid: u32, kind: &str, reason: &str| {
        format!(
            "{{\"pid\":{pid},\"process\":\"{}\",\"event\":\"{kind}\",\"reason\":\"{reason}\",\"class\":\"C{pid}\",\"profile\":null}}\n",
            "p".repeat(2000)
        )
        .into_bytes()
    };
    let long_reason = "r".repeat(4000);
    let mut lines = vec![
        // A line longer than MAX_LINE, and one that is not an event.
        vec![b'x'; 3 * MAX_LINE],
        b"\0\0not json\n".to_vec(),
    ];
    // One process repeating itself, and more processes than are kept.
    lines.push(event(1, "inactive", &long_reason));
    lines.push(event(1, "hooked", ""));
    for pid in 100..100 + 2 * MAX_PROCESSES as u32 {
        lines.push(event(pid, "active", ""));
    }
    lines[0].push(b'\n');
    let mut last = event(7, "active", "");
    last.extend(event(7, "hooked", ""));
    last.extend(event(5000, "hooked", "")); // beyond the kept processes
    // 16 MiB of them, over and over, then the last events.
    let mut flood: Vec<u8> = lines
        .iter()
        .cycle()
        .take_while({
            let mut size = 0;
            move |l| {
                size += l.len();
                size < 16 << 20
            }
        })
        .flatten()
        .copied()
        .collect();
    flood.extend(last);
    let s = Summary::from_reader(&flood[..]);
    assert!(s.activated());
    assert_eq!(s.processes.len(), MAX_PROCESSES);
    // pid 7 and pid 5000 came after the first 1024 processes: counted, not listed.
    assert_eq!(s.hooked_unlisted, 2);
    let first = &s.processes[0];
    assert_eq!(first.pid, 1);
    // A class hooked again is the same class; reasons are kept up to the bound.
    assert!(first.inactive.len() == MAX_PER_KIND && first.hooked == ["C1"]);
    assert!(first.inactive[0].len() <= MAX_TEXT + '…'.len_utf8());
    assert!(first.process.len() <= MAX_TEXT + '…'.len_utf8());
    // Each pass over the lines: two unreadable ones, and events left out.
    assert!(
        s.unreadable_lines >= 4 && s.left_out > 1000,
        "{} {}",
        s.unreadable_lines,
        s.left_out
    );
    let line = s.line();
    assert!(
        line.starts_with(&format!("capshim: activated: hooked C1 in {}", first.who())),
        "{line}"
    );
    assert!(
        line.contains("hooked in 2 more process(es) after the first 1024"),
        "{line}"
    );
    assert!(line.contains("status event(s) left out: capshim keeps the first 1024 processes' events, 4 of each kind per process"), "{line}");
    assert!(s.processes.iter().all(|p| p.pid != 7));
}

#[test]
fn lines_are_read_whole_or_skipped_past_the_cap() {
    let mut input: &[u8] = b"abc\n0123456789\nlast";
    let mut line = Vec::new();
    let mut read = || read_line_capped(&mut input, &mut line, 5).unwrap();
    assert_eq!(read(), Some(true));
    assert_eq!(read(), Some(false));
    assert_eq!(read(), Some(true));
    assert_eq!(read(), None);
}

#[test]
fn the_strict_reader_refuses_a_file_past_its_bound_unread() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let line = format!("{ACTIVE}\n");
    let fits = (MAX_STRICT_FILE as usize) / line.len();
    std::fs::write(&path, line.repeat(fits)).unwrap();
    assert_eq!(StatusEvent::read_file(&path).unwrap().len(), fits);
    std::fs::write(&path, line.repeat(fits + 1)).unwrap();
    let err = StatusEvent::read_file(&path).unwrap_err().to_string();
    assert!(
        err.contains(&format!("s.jsonl: line {} ", fits + 1))
            && err.contains(&format!("goes on past {MAX_STRICT_FILE} bytes")),
        "{err}"
    );
    std::fs::write(&path, [line.as_bytes(), b"\xff\n"].concat()).unwrap();
    let err = StatusEvent::read_file(&path).unwrap_err().to_string();
    assert!(
        err.contains("line 2 is not a capshim status event (not UTF-8)"),
        "{err}"
    );
}

#[test]
fn a_missing_status_file_holds_no_events() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.jsonl");
    assert!(StatusEvent::read_file(&missing).unwrap().is_empty());
    assert_eq!(Summary::read_file(&missing), Summary::default());
}
