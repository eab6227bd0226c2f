//! Tables for the EtcdDefragPolicy decisions: the schedule, the due tick, concurrency, the
//! starting deadline, suspension, history.

use super::*;

#[test]
fn schedules_are_five_fields_in_utc_unless_cron_tz_says() {
    let every_minute = parse_schedule("* * * * *").unwrap();
    assert_eq!(
        every_minute.next_after(ts("2026-01-01T00:00:30Z")),
        Some(ts("2026-01-01T00:01:00Z"))
    );
    let three_am = parse_schedule("0 3 * * *").unwrap();
    assert_eq!(
        three_am.next_after(ts("2026-01-01T04:00:00Z")),
        Some(ts("2026-01-02T03:00:00Z"))
    );
    // 03:00 in Berlin is 02:00 UTC in winter, 01:00 UTC in summer.
    let berlin = parse_schedule("CRON_TZ=Europe/Berlin 0 3 * * *").unwrap();
    assert_eq!(
        berlin.next_after(ts("2026-01-01T04:00:00Z")),
        Some(ts("2026-01-02T02:00:00Z"))
    );
    assert_eq!(
        berlin.next_after(ts("2026-07-01T04:00:00Z")),
        Some(ts("2026-07-02T01:00:00Z"))
    );
    let tz = parse_schedule("TZ=America/New_York 30 1 * * *").unwrap();
    assert_eq!(
        tz.next_after(ts("2026-01-01T12:00:00Z")),
        Some(ts("2026-01-02T06:30:00Z"))
    );
    assert!(parse_schedule("@daily").is_ok());
    for bad in [
        "",
        "* * * *",
        "0 0 3 * * *",
        "61 * * * *",
        "CRON_TZ=Mars/Olympus 0 3 * * *",
        "CRON_TZ=UTC",
    ] {
        assert!(parse_schedule(bad).is_err(), "{bad:?} must not parse");
    }
}

#[test]
fn the_due_tick_is_the_latest_after_the_anchor_and_missed_ones_are_not_caught_up() {
    let s = parse_schedule("*/5 * * * *").unwrap();
    let (due, next) = s.due(ts("2026-01-01T00:00:00Z"), ts("2026-01-01T00:03:00Z"));
    assert_eq!((due, next), (None, Some(ts("2026-01-01T00:05:00Z"))));
    let (due, _) = s.due(ts("2026-01-01T00:00:00Z"), ts("2026-01-01T00:05:00Z"));
    assert_eq!(
        due,
        Some(ts("2026-01-01T00:05:00Z")),
        "a tick at now is due"
    );
    // Down for an hour: only the latest tick is due.
    let (due, next) = s.due(ts("2026-01-01T00:00:00Z"), ts("2026-01-01T01:02:00Z"));
    assert_eq!(due, Some(ts("2026-01-01T01:00:00Z")));
    assert_eq!(next, Some(ts("2026-01-01T01:05:00Z")));
    // A tick acted on is never due again.
    let (due, _) = s.due(ts("2026-01-01T01:00:00Z"), ts("2026-01-01T01:02:00Z"));
    assert_eq!(due, None);
}

fn spec(schedule: &str) -> EtcdDefragPolicySpec {
    EtcdDefragPolicySpec {
        schedule: schedule.into(),
        ..Default::default()
    }
}

fn facts<'a>(
    spec: &'a EtcdDefragPolicySpec,
    status: Option<&'a etcd_operator_api::EtcdDefragPolicyStatus>,
) -> PolicyFacts<'a> {
    PolicyFacts {
        spec,
        status,
        name: "nightly",
        created: ts("2026-01-01T00:00:00Z"),
        generation: Some(1),
    }
}

fn run(name: &str, phase: Option<DefragPhase>, completed: Option<&str>) -> RunFacts {
    RunFacts {
        name: name.into(),
        phase,
        created: Some(ts("2026-01-01T00:00:00Z")),
        completed: completed.map(ts),
    }
}

#[test]
fn a_policy_stamps_one_run_per_tick() {
    let s = spec("* * * * *");
    // Before the first tick: nothing, and a requeue until it.
    let d = decide(facts(&s, None), &[], ts("2026-01-01T00:00:20Z"));
    assert_eq!(d.stamp, None);
    assert_eq!(d.requeue, Some(Duration::from_secs(40)));
    assert_eq!(d.status.conditions.as_ref().unwrap()[0].reason, "Scheduled");
    // At the tick: stamp it, record it, list it active.
    let now = ts("2026-01-01T00:01:02Z");
    let d = decide(facts(&s, None), &[], now);
    let tick = ts("2026-01-01T00:01:00Z");
    assert_eq!(d.stamp, Some(tick));
    assert_eq!(run_name("nightly", tick), "nightly-1767225660");
    assert_eq!(d.status.last_schedule_time, Some(Time(tick)));
    assert_eq!(
        d.status.active.as_ref().unwrap()[0].name,
        "nightly-1767225660"
    );
    assert_eq!(d.event.as_ref().unwrap().reason, "RunCreated");
    // The next pass in the same minute does not stamp again.
    let again = decide(
        facts(&s, Some(&d.status)),
        &[run("nightly-1767225660", None, None)],
        now,
    );
    assert_eq!(again.stamp, None);
    assert_eq!(again.event, None);
}

#[test]
fn forbid_skips_a_tick_while_a_run_is_active_and_allow_does_not() {
    let mut s = spec("* * * * *");
    let active = [run("nightly-1", Some(DefragPhase::Running), None)];
    let now = ts("2026-01-01T00:01:00Z");
    let d = decide(facts(&s, None), &active, now);
    assert_eq!(d.stamp, None, "Forbid is the default");
    assert_eq!(d.event.as_ref().unwrap().reason, "ConcurrencyForbidden");
    assert_eq!(
        d.status.last_schedule_time,
        Some(Time(now)),
        "the skipped tick counts as acted on"
    );
    s.concurrency_policy = Some(ConcurrencyPolicy::Allow);
    let d = decide(facts(&s, None), &active, now);
    assert_eq!(d.stamp, Some(now));
    assert_eq!(d.status.active.unwrap().len(), 2);
    // Finished runs are not active.
    s.concurrency_policy = Some(ConcurrencyPolicy::Forbid);
    let d = decide(
        facts(&s, None),
        &[run("nightly-1", Some(DefragPhase::Failed), None)],
        now,
    );
    assert_eq!(d.stamp, Some(now));
}

#[test]
fn a_tick_past_the_starting_deadline_is_skipped() {
    let mut s = spec("0 * * * *");
    s.starting_deadline_seconds = Some(60);
    let d = decide(facts(&s, None), &[], ts("2026-01-01T01:00:59Z"));
    assert_eq!(d.stamp, Some(ts("2026-01-01T01:00:00Z")));
    let d = decide(facts(&s, None), &[], ts("2026-01-01T01:01:01Z"));
    assert_eq!(d.stamp, None);
    let event = d.event.unwrap();
    assert!(
        event.warning && event.reason == "MissedSchedule",
        "{event:?}"
    );
    assert_eq!(
        d.status.last_schedule_time,
        Some(Time(ts("2026-01-01T01:00:00Z")))
    );
}

#[test]
fn suspend_stamps_nothing_and_resuming_does_not_backfill() {
    let mut s = spec("* * * * *");
    s.suspend = Some(true);
    let d = decide(facts(&s, None), &[], ts("2026-01-01T00:05:30Z"));
    assert_eq!(d.stamp, None);
    assert_eq!(d.status.conditions.as_ref().unwrap()[0].reason, "Suspended");
    s.suspend = Some(false);
    let resumed = decide(facts(&s, Some(&d.status)), &[], ts("2026-01-01T00:05:40Z"));
    assert_eq!(
        resumed.stamp, None,
        "the tick passed while suspended is not stamped late"
    );
    let next = decide(
        facts(&s, Some(&resumed.status)),
        &[],
        ts("2026-01-01T00:06:00Z"),
    );
    assert_eq!(next.stamp, Some(ts("2026-01-01T00:06:00Z")));
}

#[test]
fn an_invalid_schedule_is_reported_once() {
    let s = spec("every night");
    let d = decide(facts(&s, None), &[], ts("2026-01-01T00:05:30Z"));
    assert_eq!(d.stamp, None);
    let c = &d.status.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "InvalidSchedule")
    );
    assert!(d.event.as_ref().unwrap().warning);
    let again = decide(facts(&s, Some(&d.status)), &[], ts("2026-01-01T00:06:30Z"));
    assert_eq!(again.event, None, "no second Warning for the same problem");
}

#[test]
fn history_beyond_the_limit_goes_oldest_first_and_success_is_recorded() {
    let mut s = spec("0 0 1 1 *");
    s.history_limit = Some(1);
    let runs = [
        run(
            "r1",
            Some(DefragPhase::Complete),
            Some("2026-01-01T01:00:00Z"),
        ),
        run(
            "r2",
            Some(DefragPhase::Failed),
            Some("2026-01-01T03:00:00Z"),
        ),
        run(
            "r3",
            Some(DefragPhase::Complete),
            Some("2026-01-01T02:00:00Z"),
        ),
        run("r4", Some(DefragPhase::Running), None),
    ];
    let d = decide(facts(&s, None), &runs, ts("2026-01-01T04:00:00Z"));
    assert_eq!(d.delete, ["r1", "r3"]);
    assert_eq!(
        d.status.last_successful_time,
        Some(Time(ts("2026-01-01T02:00:00Z")))
    );
    assert_eq!(d.status.active.unwrap()[0].name, "r4");
    s.history_limit = None;
    assert!(
        decide(facts(&s, None), &runs, ts("2026-01-01T04:00:00Z"))
            .delete
            .is_empty()
    );
    s.history_limit = Some(0);
    assert_eq!(
        decide(facts(&s, None), &runs, ts("2026-01-01T04:00:00Z"))
            .delete
            .len(),
        3
    );
}

#[test]
fn requeues_are_bounded() {
    let s = spec("0 0 1 1 *");
    let d = decide(facts(&s, None), &[], ts("2026-02-01T00:00:00Z"));
    assert_eq!(d.requeue, Some(Duration::from_secs(600)));
}
