//! The calendar: the principal's time zone, dates and timestamps as Mneme
//! writes and reads them, and recurring reminders.
//!
//! The principal's zone is an IANA name (the Spin variable `time_zone`,
//! default `UTC`); `utc_offset_minutes`, the fixed offset earlier releases
//! used, still works when `time_zone` is left at its default. Local rules
//! (a reminder "every day at 09:00", quiet hours 23:00–08:00) follow the
//! zone's wall clock across daylight-saving changes; instants are always
//! Unix milliseconds.

use jiff::civil::{Date, DateTime, Weekday};
use jiff::tz::{Offset, TimeZone};
use jiff::{Timestamp, ToSpan, ZonedDateTime};

const MINUTE_MS: i64 = 60_000;

/// The principal's time zone.
#[derive(Debug, Clone, PartialEq)]
pub struct Zone {
    tz: TimeZone,
    spec: String,
}

impl Zone {
    /// Coordinated Universal Time, the default.
    pub fn utc() -> Self {
        Self { tz: TimeZone::UTC, spec: "UTC".into() }
    }

    /// A zone from its spec: an IANA name (`Europe/London`), `UTC`, or a
    /// fixed offset `±HH:MM`. What [`Zone::spec`] returns parses back.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let spec = spec.trim();
        if spec.is_empty() || spec.eq_ignore_ascii_case("utc") {
            return Ok(Self::utc());
        }
        if let Some(minutes) = parse_offset(spec) {
            return Self::fixed(minutes);
        }
        let tz = TimeZone::get(spec).map_err(|_| {
            format!("`{spec}` is not a time zone of the IANA database (for example Europe/London or America/New_York)")
        })?;
        Ok(Self { tz, spec: spec.to_string() })
    }

    /// A zone a fixed number of minutes east of UTC (−840 to 840).
    pub fn fixed(minutes: i64) -> Result<Self, String> {
        if !(-14 * 60..=14 * 60).contains(&minutes) {
            return Err(format!("an offset from UTC is −840 to 840 minutes, not {minutes}"));
        }
        if minutes == 0 {
            return Ok(Self::utc());
        }
        let offset = Offset::from_seconds((minutes * 60) as i32).map_err(|e| e.to_string())?;
        let sign = if minutes < 0 { '-' } else { '+' };
        let spec = format!("{sign}{:02}:{:02}", minutes.abs() / 60, minutes.abs() % 60);
        Ok(Self { tz: TimeZone::fixed(offset), spec })
    }

    /// The principal's zone from the two Spin variables: `time_zone` (an
    /// IANA name) wins; while it is empty or `UTC`, a non-empty
    /// `utc_offset_minutes` gives a fixed offset (the earlier setting).
    pub fn from_settings(time_zone: &str, utc_offset_minutes: &str) -> Result<Self, String> {
        let name = time_zone.trim();
        if !name.is_empty() && !name.eq_ignore_ascii_case("utc") {
            return Self::parse(name).map_err(|e| format!("the variable time_zone: {e}"));
        }
        let raw = utc_offset_minutes.trim();
        if raw.is_empty() {
            return Ok(Self::utc());
        }
        raw.parse::<i64>().ok().and_then(|m| Self::fixed(m).ok()).ok_or_else(|| {
            format!("the variable utc_offset_minutes must be whole minutes from -840 to 840, not `{raw}`")
        })
    }

    /// The zone's spec, for passing it on: an IANA name, `UTC` or `±HH:MM`.
    pub fn spec(&self) -> &str {
        &self.spec
    }

    fn at(&self, ms: i64) -> ZonedDateTime {
        let ts = Timestamp::from_millisecond(ms).unwrap_or(if ms < 0 { Timestamp::MIN } else { Timestamp::MAX });
        ts.to_zoned_datetime(self.tz.clone())
    }

    /// The local calendar date at `ms`.
    pub(crate) fn local_date(&self, ms: i64) -> Date {
        self.at(ms).date()
    }

    /// The instant the local clock reads `hour:minute` on `date` (just
    /// after a spring-forward gap; the first of a fall-back's two).
    pub(crate) fn local_instant(&self, date: Date, hour: i8, minute: i8) -> Option<i64> {
        let t = date.at(hour, minute, 0, 0).to_zoned_datetime(self.tz.clone()).ok()?;
        Some(t.timestamp().as_millisecond())
    }

    /// The local hour (0–23) at `ms`.
    pub fn local_hour(&self, ms: i64) -> u32 {
        self.at(ms).hour() as u32
    }

    /// The first instant at or after `at_ms` when the local clock reads
    /// `hour`:00. On a day the hour does not exist (a spring-forward gap)
    /// it is the instant just after the gap.
    pub fn next_local_hour(&self, at_ms: i64, hour: u8) -> i64 {
        let here = self.at(at_ms);
        let mut day = here.date();
        for _ in 0..3 {
            if let Ok(t) = day.at(hour as i8, 0, 0, 0).to_zoned_datetime(self.tz.clone()) {
                let ms = t.timestamp().as_millisecond();
                if ms >= at_ms {
                    return ms;
                }
            }
            day = match day.tomorrow() {
                Ok(d) => d,
                Err(_) => break,
            };
        }
        at_ms
    }

    /// `ms` as RFC 3339 in this zone, to the second: `2027-03-28T09:00:00+01:00`,
    /// with `Z` where the local offset is zero.
    pub fn format(&self, ms: i64) -> String {
        let z = self.at(ms);
        let secs = z.offset().seconds();
        let offset = if secs == 0 {
            "Z".to_string()
        } else {
            let m = secs.abs() / 60;
            format!("{}{:02}:{:02}", if secs < 0 { '-' } else { '+' }, m / 60, m % 60)
        };
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{offset}",
            z.year(),
            z.month(),
            z.day(),
            z.hour(),
            z.minute(),
            z.second()
        )
    }

    /// `ms` as a person reads it in this zone: `Fri 27 Nov 2026 at 09:00`.
    pub fn describe(&self, ms: i64) -> String {
        const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
        const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
        let z = self.at(ms);
        format!(
            "{} {} {} {} at {:02}:{:02}",
            DAYS[z.weekday().to_monday_zero_offset() as usize],
            z.day(),
            MONTHS[(z.month() - 1) as usize],
            z.year(),
            z.hour(),
            z.minute()
        )
    }

    /// Parses `YYYY-MM-DD[(T| )HH:MM[:SS[.fff]]][Z|±HH:MM]` to Unix ms. A
    /// time without an offset is local time in this zone (a wall-clock time
    /// that a spring-forward skips counts as just after the gap; one that
    /// a fall-back repeats, as its first occurrence); a date alone is local
    /// midnight. `None` for anything else, including 2027-02-30.
    pub fn parse_datetime(&self, s: &str) -> Option<i64> {
        let s = s.trim();
        let (date, rest) = s.split_at(s.find(['T', 't', ' ']).unwrap_or(s.len()));
        let date = parse_civil_date(date)?;
        let rest = rest.get(1..).unwrap_or("");
        let (time, offset) = if let Some(t) = rest.strip_suffix(['Z', 'z']) {
            (t, Some(0))
        } else if let Some(i) = rest.rfind(['+', '-']).filter(|i| *i >= 4) {
            (&rest[..i], Some(parse_offset(&rest[i..])?))
        } else {
            (rest, None)
        };
        let (h, mi, sec, nanos) = parse_time(time)?;
        let local = DateTime::from_parts(date, jiff::civil::Time::new(h, mi, sec, nanos).ok()?);
        let tz = match offset {
            Some(m) => TimeZone::fixed(Offset::from_seconds((m * 60) as i32).ok()?),
            None => self.tz.clone(),
        };
        Some(local.to_zoned_datetime(tz).ok()?.timestamp().as_millisecond())
    }
}

/// `±HH:MM` (or `±HHMM`, `±HH`) as minutes east of UTC.
fn parse_offset(s: &str) -> Option<i64> {
    let sign = match s.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits: String = s[1..].chars().filter(|c| *c != ':').collect();
    if !matches!(digits.len(), 2 | 4) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let h: i64 = digits[..2].parse().ok()?;
    let m: i64 = digits.get(2..).filter(|x| !x.is_empty()).map_or(Some(0), |x| x.parse().ok())?;
    (h <= 14 && m <= 59).then_some(sign * (h * 60 + m))
}

/// `HH[:MM[:SS[.fff]]]`, or empty for midnight.
fn parse_time(s: &str) -> Option<(i8, i8, i8, i32)> {
    if s.is_empty() {
        return Some((0, 0, 0, 0));
    }
    let mut parts = s.split(':');
    let num = |p: Option<&str>, max: i8| -> Option<i8> {
        let p = p?;
        (p.len() == 2 && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse::<i8>().ok())
            .flatten()
            .filter(|v| *v <= max)
    };
    let h = num(parts.next(), 23)?;
    let mi = match parts.next() {
        Some(m) => num(Some(m), 59)?,
        None => 0,
    };
    let (sec, nanos) = match parts.next() {
        Some(x) => {
            let (whole, frac) = x.split_once('.').unwrap_or((x, ""));
            // A leap second (:60) reads as :59, as jiff does.
            let sec = num(Some(whole), 60)?.min(59);
            if !frac.bytes().all(|b| b.is_ascii_digit()) || frac.len() > 9 {
                return None;
            }
            let nanos = if frac.is_empty() { 0 } else { format!("{frac:0<9}").parse::<i32>().ok()? };
            (sec, nanos)
        }
        None => (0, 0),
    };
    if parts.next().is_some() {
        return None;
    }
    Some((h, mi, sec, nanos))
}

fn parse_civil_date(s: &str) -> Option<Date> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let p = s.get(r)?;
        p.bytes().all(|c| c.is_ascii_digit()).then(|| p.parse().ok()).flatten()
    };
    Date::new(num(0..4)? as i16, num(5..7)? as i8, num(8..10)? as i8).ok()
}

const EPOCH: Date = jiff::civil::date(1970, 1, 1);

/// Parses `YYYY-MM-DD`, optionally followed by a time (`T…` or ` …`, not
/// read), to days since 1970-01-01; `None` when it is not a real date.
pub fn parse_date(s: &str) -> Option<i64> {
    let s = s.trim();
    let date = s.get(..10)?;
    if s.len() > 10 && !matches!(s.as_bytes()[10], b'T' | b't' | b' ') {
        return None;
    }
    Some(days_since_epoch(parse_civil_date(date)?))
}

fn days_since_epoch(d: Date) -> i64 {
    // Whole days between two civil dates: no zone, so no DST.
    d.duration_since(EPOCH).as_secs() / 86_400
}

/// Days since 1970-01-01 of a calendar date; `None` when it is not one.
pub fn days_from_date(year: i32, month: u32, day: u32) -> Option<i64> {
    let d = Date::new(i16::try_from(year).ok()?, i8::try_from(month).ok()?, i8::try_from(day).ok()?).ok()?;
    Some(days_since_epoch(d))
}

/// `YYYY-MM-DD` of days since 1970-01-01 (clamped to jiff's range,
/// −9999 to 9999).
pub fn format_date(days: i64) -> String {
    let d = Timestamp::from_second(days.saturating_mul(86_400).clamp(-377_705_116_800, 253_402_214_400))
        .map(|t| t.to_zoned_datetime(TimeZone::UTC).date())
        .unwrap_or(EPOCH);
    format!("{:04}-{:02}-{:02}", d.year(), d.month(), d.day())
}

/// The UTC calendar date (`YYYY-MM-DD`) `days` whole days before Unix ms
/// `ms` (0: its own date): the day a ledger row is kept under, and the
/// first day a window of days reads.
pub fn utc_date_before(ms: u64, days: u32) -> String {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    format_date(ms.div_euclid(86_400_000) - i64::from(days))
}

/// Unix ms as an RFC 3339 UTC timestamp to the second, the form Mneme's
/// records and API use: `2026-11-22T10:30:00Z`.
pub fn utc_timestamp(ms: u64) -> String {
    Zone::utc().format(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// How a reminder repeats. Calendar recurrences keep the local wall-clock
/// time across daylight-saving changes; `hourly` and `interval:N` are
/// fixed lengths of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recurrence {
    Hourly,
    Daily,
    Weekly,
    /// Monday to Friday.
    Weekdays,
    /// The same day of the month where the month has it, else its last day.
    Monthly,
    /// Every N minutes, 1 to 1440.
    Interval(u32),
}

impl Recurrence {
    /// `hourly`, `daily`, `weekly`, `weekdays`, `monthly` or `interval:N`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "hourly" => Self::Hourly,
            "daily" => Self::Daily,
            "weekly" => Self::Weekly,
            "weekdays" => Self::Weekdays,
            "monthly" => Self::Monthly,
            other => {
                let n = other.strip_prefix("interval:")?.parse::<u32>().ok()?;
                if !(1..=1440).contains(&n) {
                    return None;
                }
                Self::Interval(n)
            }
        })
    }

    /// The name [`Recurrence::parse`] reads back.
    pub fn name(self) -> String {
        match self {
            Self::Hourly => "hourly".into(),
            Self::Daily => "daily".into(),
            Self::Weekly => "weekly".into(),
            Self::Weekdays => "weekdays".into(),
            Self::Monthly => "monthly".into(),
            Self::Interval(n) => format!("interval:{n}"),
        }
    }

    /// The occurrence after the one at `due_ms`, in `zone`.
    pub fn next(self, due_ms: i64, zone: &Zone) -> i64 {
        let z = zone.at(due_ms);
        let next = match self {
            Self::Hourly => return due_ms + 60 * MINUTE_MS,
            Self::Interval(n) => return due_ms + i64::from(n) * MINUTE_MS,
            Self::Daily => z.checked_add(1.day()),
            Self::Weekly => z.checked_add(1.week()),
            Self::Monthly => z.checked_add(1.month()),
            Self::Weekdays => {
                let days = match z.weekday() {
                    Weekday::Friday => 3,
                    Weekday::Saturday => 2,
                    _ => 1,
                };
                z.checked_add(days.days())
            }
        };
        next.map_or(i64::MAX, |t| t.timestamp().as_millisecond())
    }
}

#[cfg(test)]
mod utc_date_tests {
    #[test]
    fn dates_before_cross_months_and_years() {
        // 2026-03-01T00:30:00Z
        let ms = 1_772_325_000_000;
        assert_eq!(super::utc_date_before(ms, 0), "2026-03-01");
        assert_eq!(super::utc_date_before(ms, 1), "2026-02-28");
        assert_eq!(super::utc_date_before(ms, 60), "2025-12-31");
        assert_eq!(super::utc_date_before(0, 1), "1969-12-31");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn london() -> Zone {
        Zone::parse("Europe/London").unwrap()
    }

    #[test]
    fn zones_from_settings() {
        assert_eq!(Zone::from_settings("", "").unwrap().spec(), "UTC");
        assert_eq!(Zone::from_settings("UTC", "60").unwrap().spec(), "+01:00", "the offset is the fallback");
        assert_eq!(Zone::from_settings("UTC", "-90").unwrap().spec(), "-01:30");
        assert_eq!(Zone::from_settings("Europe/London", "60").unwrap().spec(), "Europe/London", "the name wins");
        assert!(Zone::from_settings("Mars/Olympus", "").unwrap_err().contains("time_zone"));
        assert!(Zone::from_settings("", "900").unwrap_err().contains("utc_offset_minutes"));
        assert!(Zone::from_settings("", "1.5").is_err());
        for spec in ["UTC", "+05:30", "-03:00", "America/New_York"] {
            assert_eq!(Zone::parse(spec).unwrap().spec(), spec, "{spec} round-trips");
        }
    }

    #[test]
    fn local_hours_follow_daylight_saving() {
        let z = london();
        let before = Zone::utc().parse_datetime("2027-03-27T22:30:00Z").unwrap();
        let after = Zone::utc().parse_datetime("2027-03-28T22:30:00Z").unwrap();
        assert_eq!(z.local_hour(before), 22, "GMT");
        assert_eq!(z.local_hour(after), 23, "BST: the same UTC time is an hour later");
        assert_eq!(Zone::fixed(-60).unwrap().local_hour(30 * MINUTE_MS), 23);
    }

    #[test]
    fn the_next_local_hour() {
        let z = london();
        let utc = |s: &str| Zone::utc().parse_datetime(s).unwrap();
        // 23:30 GMT on the eve of the change: 08:00 the next morning is BST.
        assert_eq!(z.next_local_hour(utc("2027-03-27T23:30:00Z"), 8), utc("2027-03-28T07:00:00Z"));
        assert_eq!(z.next_local_hour(utc("2027-03-28T03:00:00Z"), 8), utc("2027-03-28T07:00:00Z"));
        // 01:00 does not exist on 2027-03-28 in London: just after the gap.
        assert_eq!(z.next_local_hour(utc("2027-03-28T00:30:00Z"), 1), utc("2027-03-28T01:00:00Z"));
        let at = utc("2027-03-28T07:00:00Z");
        assert_eq!(z.next_local_hour(at, 8), at, "at the hour itself");
    }

    #[test]
    fn datetimes_parse_in_the_zone() {
        let utc = Zone::utc();
        assert_eq!(utc.parse_datetime("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(utc.parse_datetime("2026-11-22T10:30:00Z"), Some(1_795_343_400_000));
        assert_eq!(utc.parse_datetime("2026-11-22T12:30:00+02:00"), Some(1_795_343_400_000));
        assert_eq!(utc.parse_datetime("2026-11-22T10:30"), Some(1_795_343_400_000));
        assert_eq!(utc.parse_datetime("2026-11-22 10:30:00.250Z"), Some(1_795_343_400_250));
        assert_eq!(utc.parse_datetime("2026-11-22"), Some(1_795_305_600_000));
        for bad in ["2026-13-01T00:00Z", "2027-02-29", "tomorrow", "2026-11-22T25:00", "2026-11-22T10:30+99:00", ""] {
            assert_eq!(utc.parse_datetime(bad), None, "{bad}");
        }
        let z = london();
        // A naive time is the principal's: 09:00 BST is 08:00 UTC.
        assert_eq!(z.parse_datetime("2027-03-29T09:00"), utc.parse_datetime("2027-03-29T08:00Z"));
        assert_eq!(z.parse_datetime("2027-03-29T09:00Z"), utc.parse_datetime("2027-03-29T09:00Z"), "explicit wins");
        assert_eq!(z.format(z.parse_datetime("2027-03-29T09:00").unwrap()), "2027-03-29T09:00:00+01:00");
        assert_eq!(z.format(z.parse_datetime("2027-01-04T09:00").unwrap()), "2027-01-04T09:00:00Z");
    }

    #[test]
    fn dates_and_timestamps() {
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("2026-11-22"), days_from_date(2026, 11, 22));
        assert_eq!(parse_date("2026-11-22T10:00:00Z"), days_from_date(2026, 11, 22));
        assert_eq!(parse_date("1969-12-31"), Some(-1));
        for bad in ["2026-02-30", "2026-11-22x", "22-11-2026", "2026-1-22", "", "+026-11-22"] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
        assert_eq!(format_date(days_from_date(2024, 2, 29).unwrap()), "2024-02-29");
        assert_eq!(format_date(-1), "1969-12-31");
        assert_eq!(utc_timestamp(86_400_000 + 3_661_000), "1970-01-02T01:01:01Z");
        assert_eq!(utc_timestamp(0), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn recurrences_keep_the_wall_clock() {
        let z = london();
        let at = |s: &str| z.parse_datetime(s).unwrap();
        let show = |ms: i64| z.format(ms);
        // Daily at 09:00 across the 2027-03-28 change: 09:00 GMT, then 09:00 BST.
        let sat = at("2027-03-27T09:00");
        assert_eq!(show(Recurrence::Daily.next(sat, &z)), "2027-03-28T09:00:00+01:00");
        assert_eq!(Recurrence::Daily.next(sat, &z) - sat, 23 * 60 * MINUTE_MS, "that day is 23 hours long");
        assert_eq!(show(Recurrence::Weekly.next(at("2027-03-21T09:00"), &z)), "2027-03-28T09:00:00+01:00");
        // Hourly and intervals are lengths of time.
        assert_eq!(Recurrence::Hourly.next(sat, &z) - sat, 60 * MINUTE_MS);
        assert_eq!(Recurrence::Interval(90).next(sat, &z) - sat, 90 * MINUTE_MS);
        // Weekdays skip the weekend; monthly clamps to the month's last day.
        let utc = Zone::utc();
        let fri = utc.parse_datetime("2026-01-30T09:00Z").unwrap();
        assert_eq!(utc.format(Recurrence::Weekdays.next(fri, &utc)), "2026-02-02T09:00:00Z");
        assert_eq!(utc.format(Recurrence::Monthly.next(fri, &utc)), "2026-02-28T09:00:00Z");
        assert_eq!(utc.format(Recurrence::Daily.next(fri, &utc)), "2026-01-31T09:00:00Z");
    }

    #[test]
    fn recurrences_parse() {
        assert_eq!(Recurrence::parse("daily"), Some(Recurrence::Daily));
        assert_eq!(Recurrence::parse("interval:1440"), Some(Recurrence::Interval(1440)));
        for bad in ["interval:0", "interval:1441", "interval:x", "yearly", "", "Daily"] {
            assert_eq!(Recurrence::parse(bad), None, "{bad}");
        }
        for r in ["hourly", "daily", "weekly", "weekdays", "monthly", "interval:15"] {
            assert_eq!(Recurrence::parse(r).map(Recurrence::name).as_deref(), Some(r), "names read back");
        }
    }

    #[test]
    fn instants_are_described_as_people_read_them() {
        let london = london();
        let ms = london.parse_datetime("2027-03-28T09:05").unwrap();
        assert_eq!(london.describe(ms), "Sun 28 Mar 2027 at 09:05");
    }
}
