//! When a reminder is due, read off plain English without a model: "in 20
//! minutes", "tomorrow at 9", "on Friday at 18:30", "every Sunday evening",
//! "next Monday", "on 3 December at noon". The schedule skill needs an
//! instant; with no model configured this is the only reader of the
//! principal's words, and with a model the model's parse wins (D-C31).
//!
//! The reading is deliberately small and predictable. Words for parts of
//! the day stand for fixed clock times (morning 09:00, afternoon 15:00,
//! evening 18:00, tonight and night 20:00, noon 12:00, midnight 00:00); a
//! day with no time is 09:00; a bare hour without am/pm is read as the
//! nearer future of the two clock readings when no day is named ("at 6" at
//! 10:00 is 18:00), and as an afternoon hour for 1–6 when a day is named
//! ("tomorrow at 5" is 17:00). "Next Friday" is the Friday of next week
//! (weeks start on Monday); "Friday" or "this Friday" is the coming one,
//! today if the time is still ahead. Everything is local to the
//! principal's zone and becomes Unix milliseconds at the end.

use std::ops::Range;
use std::sync::LazyLock;

use jiff::civil::{Date, Weekday};
use regex_lite::Regex;

use crate::calendar::{Recurrence, Zone};

/// A due time read from a message.
#[derive(Debug, Clone, PartialEq)]
pub struct When {
    /// The first occurrence, Unix ms, always after `now`.
    pub due_ms: i64,
    pub recurrence: Option<Recurrence>,
    /// Where the time phrase sits in the message (byte ranges, in order),
    /// so a caller can cut it out of the reminder's text.
    pub spans: Vec<Range<usize>>,
}

const DAY_DEFAULT: (i8, i8) = (9, 0);

const NUMBER: &str = r"\d{1,4}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|forty-five|fifty|sixty|ninety|half an?|a couple of|couple of";
const WEEKDAYS: &str = "monday|tuesday|wednesday|thursday|friday|saturday|sunday";
const MONTHS: &str = "january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec";

static RELATIVE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"\bin\s+(?:the\s+next\s+)?({NUMBER})\s*(minutes?|mins?|hours?|hrs?|days?|weeks?)\b(\s+and\s+a\s+half)?(?:\s+(?:and\s+)?(\d{{1,2}})\s*(?:minutes?|mins?)\b)?"
    ))
    .unwrap()
});
static EVERY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"\b(?:every|each)\s+(?:(\d{{1,4}})\s+)?(minutes?|mins?|hours?|hrs?|days?|mornings?|afternoons?|evenings?|nights?|weekdays?|weeks?|months?|{WEEKDAYS}|(?:{WEEKDAYS})s)\b|\b(daily|hourly|weekly|monthly)\b|\bon\s+weekdays\b"
    ))
    .unwrap()
});
static DAY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"\b(?:(on|this|next|coming|this\s+coming)\s+)?({WEEKDAYS})\b|\b(?:the\s+)?(day\s+after\s+tomorrow)\b|\b(today|tonight|tomorrow|tmrw|tmr)\b"
    ))
    .unwrap()
});
static DATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"\b(?:on\s+)?(?:the\s+)?(\d{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?\s+({MONTHS})\b|\b(?:on\s+)?({MONTHS})\s+(?:the\s+)?(\d{{1,2}})(?:st|nd|rd|th)?\b|\b(?:on\s+)?(\d{{4}})-(\d{{2}})-(\d{{2}})\b"
    ))
    .unwrap()
});
static TIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\b(?:at\s+|by\s+|@\s*)?(\d{1,2}):(\d{2})\s*(am\b|pm\b|a\.m\.|p\.m\.)?|\b(?:at\s+|by\s+|@\s*)?(\d{1,2})(?:\.(\d{2}))?\s*(am\b|pm\b|a\.m\.|p\.m\.)|\bat\s+(\d{1,2})\.(\d{2})\b|\b(?:at\s+)?(\d{1,2})\s*o'?clock\b|\bat\s+(\d{1,2})\b|\b(?:at\s+)?(noon|midday|midnight)\b",
    )
    .unwrap()
});
/// Time words left in the text once the phrase is read: a time this
/// reader does not understand ("half past 5", "the 15th"), so guessing
/// would be wrong and the caller should ask.
static LEFTOVER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(?:half\s+past|quarter\s+(?:past|to)|\d{1,2}(?:st|nd|rd|th)|\d{1,2}[:.]\d{2}|\d{1,2}\s*(?:am|pm)|noon|midnight|o'?clock)\b").unwrap()
});
/// Words that may follow a bare "at 9" when it is a time ("at 9 to call
/// Sam", "at 9 tomorrow"), unlike "look at 2 flats".
const AFTER_BARE_HOUR: &[&str] = &[
    "to", "and", "tomorrow", "today", "tonight", "on", "every", "each", "in", "for", "then", "please", "sharp",
    "remind", "this", "next", "that", "about",
];
/// "weekly" and its kin are a recurrence when they stand where one does
/// ("remind me weekly to…", "…daily at 8", "…stretch daily"), not as an
/// adjective ("the weekly report").
fn recurrence_word_stands(lower: &str, r: &Range<usize>) -> bool {
    let before = lower[..r.start].trim_end();
    let after = lower[r.end..].trim_start();
    let next = after.split(|c: char| !c.is_ascii_alphanumeric()).next().unwrap_or("");
    before.is_empty()
        || before.ends_with("remind me")
        || after.trim_start_matches(['.', '!', '?', ',', ';']).trim().is_empty()
        || matches!(next, "at" | "on" | "from" | "starting" | "in" | "until" | "to" | "remind")
        || after.starts_with(',')
}

static PART: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(?:in\s+the\s+|this\s+|at\s+)?(morning|afternoon|evening|night)\b").unwrap());

/// The clock time a part of the day stands for.
fn part_time(part: &str) -> (i8, i8) {
    match part {
        "morning" => (9, 0),
        "afternoon" => (15, 0),
        "evening" => (18, 0),
        _ => (20, 0),
    }
}

fn number(word: &str) -> Option<f64> {
    Some(match word {
        "a" | "an" | "one" => 1.0,
        "half a" | "half an" => 0.5,
        "a couple of" | "couple of" | "two" => 2.0,
        "three" => 3.0,
        "four" => 4.0,
        "five" => 5.0,
        "six" => 6.0,
        "seven" => 7.0,
        "eight" => 8.0,
        "nine" => 9.0,
        "ten" => 10.0,
        "eleven" => 11.0,
        "twelve" => 12.0,
        "fifteen" => 15.0,
        "twenty" => 20.0,
        "thirty" => 30.0,
        "forty" => 40.0,
        "forty-five" => 45.0,
        "fifty" => 50.0,
        "sixty" => 60.0,
        "ninety" => 90.0,
        digits => digits.parse().ok()?,
    })
}

fn weekday(name: &str) -> Option<Weekday> {
    Some(match name.trim_end_matches('s') {
        "monday" => Weekday::Monday,
        "tuesday" => Weekday::Tuesday,
        "wednesday" => Weekday::Wednesday,
        "thursday" => Weekday::Thursday,
        "friday" => Weekday::Friday,
        "saturday" => Weekday::Saturday,
        "sunday" => Weekday::Sunday,
        _ => return None,
    })
}

fn month(name: &str) -> Option<i8> {
    let i = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
        .iter()
        .position(|m| name.starts_with(m))?;
    Some(i as i8 + 1)
}

/// A clock time as read: the hour, the minute, and whether am/pm (or a
/// 24-hour reading) settled which half of the day it is.
#[derive(Debug, Clone, Copy)]
struct Clock {
    hour: i8,
    minute: i8,
    settled: bool,
}

fn clock(c: &regex_lite::Captures) -> Option<Clock> {
    let num = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<i8>().ok());
    let meridiem = |i: usize| c.get(i).map(|m| m.as_str().starts_with('p'));
    let with = |hour: i8, minute: i8, pm: Option<bool>| -> Option<Clock> {
        if minute > 59 {
            return None;
        }
        match pm {
            Some(pm) => {
                if !(1..=12).contains(&hour) {
                    return None;
                }
                let h = if hour == 12 { 0 } else { hour };
                Some(Clock { hour: if pm { h + 12 } else { h }, minute, settled: true })
            }
            None if hour > 23 => None,
            // 13:00 or 08:30 is a 24-hour reading; 0 is midnight.
            None => Some(Clock { hour, minute, settled: hour == 0 || hour > 12 }),
        }
    };
    if let Some(h) = num(1) {
        let settled_24h = c.get(1).is_some_and(|m| m.as_str().len() == 2 && m.as_str().starts_with('0'));
        let mut k = with(h, num(2)?, meridiem(3))?;
        k.settled |= settled_24h;
        return Some(k);
    }
    if let Some(h) = num(4) {
        return with(h, num(5).unwrap_or(0), meridiem(6));
    }
    if let Some(h) = num(7) {
        return with(h, num(8)?, None);
    }
    if let Some(h) = num(9).or_else(|| num(10)) {
        return with(h, 0, None);
    }
    match c.get(11)?.as_str() {
        "midnight" => Some(Clock { hour: 0, minute: 0, settled: true }),
        _ => Some(Clock { hour: 12, minute: 0, settled: true }),
    }
}

/// What named the day.
#[derive(Debug, Clone, Copy)]
enum Day {
    Offset(i64),
    /// A weekday; `true` for "next X" (the one in the following week).
    Weekday(Weekday, bool),
    Date(Date),
    /// A month and day with no year: the next one.
    Anniversary(i8, i8),
}

/// Reads the due time of a reminder in `text`, said at `now_ms` in `zone`.
/// `None` when the text names no time, or names one already past.
pub fn parse(text: &str, now_ms: i64, zone: &Zone) -> Option<When> {
    let lower = text.to_ascii_lowercase();
    let mut spans: Vec<Range<usize>> = Vec::new();
    let free = |spans: &[Range<usize>], r: &Range<usize>| spans.iter().all(|s| s.end <= r.start || r.end <= s.start);

    // "in 20 minutes" is an instant of its own unless it counts days and a
    // clock time follows ("in 2 days at 10").
    let mut relative_days = None;
    // A day or a clock time named elsewhere wins over "in 3 weeks", which is
    // then part of what to be reminded of ("that my passport expires in 3 weeks").
    // ("in 2 days at 10" keeps its days: a clock time alone does not name a day.)
    let anchored = |r: &Range<usize>, with_clock: bool| {
        let outside = |m: regex_lite::Match| m.end() <= r.start || r.end <= m.start();
        DAY.find_iter(&lower).any(outside)
            || DATE.find_iter(&lower).any(outside)
            || (with_clock && TIME.find_iter(&lower).any(outside))
    };
    if let Some(c) = RELATIVE.captures(&lower).filter(|c| {
        let unit = c.get(2).map_or("", |m| m.as_str());
        let days = unit.starts_with('d') || unit.starts_with('w');
        !anchored(&c.get(0).unwrap().range(), !days)
    }) {
        let n = number(c.get(1)?.as_str())? + if c.get(3).is_some() { 0.5 } else { 0.0 };
        let extra: f64 = c.get(4).and_then(|m| m.as_str().parse().ok()).unwrap_or(0.0);
        let unit = c.get(2)?.as_str();
        let minutes = match unit.as_bytes()[0] {
            b'm' => 1.0,
            b'h' => 60.0,
            b'd' => 1440.0,
            _ => 10_080.0,
        } * n
            + extra;
        spans.push(c.get(0)?.range());
        if unit.starts_with('d') || unit.starts_with('w') {
            relative_days = Some((minutes / 1440.0).round() as i64);
        } else {
            if !(1.0..=527_040.0).contains(&minutes) {
                return None;
            }
            if LEFTOVER.is_match(&without(&lower, &spans)) {
                return None;
            }
            let due_ms = now_ms + (minutes * 60_000.0).round() as i64;
            return Some(When { due_ms, recurrence: None, spans });
        }
    }

    let mut recurrence = None;
    let mut every_day: Option<Weekday> = None;
    let mut every_part: Option<(i8, i8)> = None;
    if let Some(c) = EVERY
        .captures_iter(&lower)
        .find(|c| c.get(3).is_none() || recurrence_word_stands(&lower, &c.get(0).unwrap().range()))
    {
        spans.push(c.get(0)?.range());
        let n: Option<u32> = c.get(1).and_then(|m| m.as_str().parse().ok());
        let word = c.get(2).or(c.get(3)).map_or("weekdays", |m| m.as_str());
        let word = if word == "weekdays" || word == "weekday" { word } else { word.trim_end_matches('s') };
        recurrence = Some(match (word, n) {
            ("minute" | "min", Some(n)) => Recurrence::Interval(n),
            ("minute" | "min", None) => Recurrence::Interval(1),
            ("hour" | "hr", Some(n)) => Recurrence::Interval(n.checked_mul(60)?),
            ("hour" | "hr" | "hourly", None) => Recurrence::Hourly,
            (_, Some(_)) => return None,
            ("weekday" | "weekdays", None) => Recurrence::Weekdays,
            ("week" | "weekly", None) => Recurrence::Weekly,
            ("month" | "monthly", None) => Recurrence::Monthly,
            (w, None) => match weekday(w) {
                Some(d) => {
                    every_day = Some(d);
                    Recurrence::Weekly
                }
                None => {
                    if matches!(w, "morning" | "afternoon" | "evening" | "night") {
                        every_part = Some(part_time(w));
                    }
                    Recurrence::Daily
                }
            },
        });
        if let Some(Recurrence::Interval(n)) = recurrence
            && !(1..=1440).contains(&n)
        {
            return None;
        }
        if let Some(r @ (Recurrence::Interval(_) | Recurrence::Hourly)) = recurrence {
            let minutes = match r {
                Recurrence::Interval(n) => i64::from(n),
                _ => 60,
            };
            return Some(When { due_ms: now_ms + minutes * 60_000, recurrence, spans });
        }
    }

    let mut day = every_day.map(|d| Day::Weekday(d, false)).or(relative_days.map(Day::Offset));
    let mut tonight = false;
    if day.is_none() {
        for c in DATE.captures_iter(&lower) {
            let r = c.get(0)?.range();
            if !free(&spans, &r) {
                continue;
            }
            let found = if let (Some(d), Some(m)) = (c.get(1), c.get(2)) {
                Some(Day::Anniversary(month(m.as_str())?, d.as_str().parse().ok()?))
            } else if let (Some(m), Some(d)) = (c.get(3), c.get(4)) {
                Some(Day::Anniversary(month(m.as_str())?, d.as_str().parse().ok()?))
            } else {
                let p = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<i16>().ok());
                Date::new(p(5)?, p(6)? as i8, p(7)? as i8).ok().map(Day::Date)
            };
            if found.is_some() {
                spans.push(r);
                day = found;
                break;
            }
        }
    }
    if day.is_none() {
        for c in DAY.captures_iter(&lower) {
            let r = c.get(0)?.range();
            // "tomorrow's meeting" names a thing, not the due day.
            if !free(&spans, &r) || lower[r.end..].starts_with("'s") || lower[r.end..].starts_with("\u{2019}s") {
                continue;
            }
            day = if let Some(w) = c.get(2) {
                let next = c.get(1).is_some_and(|m| m.as_str() == "next");
                Some(Day::Weekday(weekday(w.as_str())?, next))
            } else if c.get(3).is_some() {
                Some(Day::Offset(2))
            } else {
                match c.get(4)?.as_str() {
                    "today" => Some(Day::Offset(0)),
                    "tonight" => {
                        tonight = true;
                        Some(Day::Offset(0))
                    }
                    _ => Some(Day::Offset(1)),
                }
            };
            spans.push(r);
            break;
        }
    }

    let mut time: Option<Clock> = None;
    for c in TIME.captures_iter(&lower) {
        let r = c.get(0)?.range();
        // A bare "at 2" is a time only where one reads on ("at 2 to call
        // Sam"), not in "look at 2 flats".
        let bare = c.get(10).is_some();
        let next = lower[r.end..].split(|ch: char| !ch.is_ascii_alphanumeric() && ch != '\'').find(|w| !w.is_empty());
        let before = lower[..r.start].trim_end();
        let prev = before.rsplit(|ch: char| !ch.is_ascii_alphanumeric()).find(|w| !w.is_empty()).unwrap_or("");
        let leads = before.is_empty()
            || before.ends_with("remind me")
            || weekday(prev).is_some()
            || matches!(
                prev,
                "tomorrow"
                    | "today"
                    | "tonight"
                    | "tmrw"
                    | "tmr"
                    | "morning"
                    | "afternoon"
                    | "evening"
                    | "night"
                    | "day"
                    | "days"
                    | "weekday"
                    | "weekdays"
                    | "week"
                    | "daily"
                    | "weekly"
                    | "monthly"
            );
        if bare
            && !leads
            && next.is_some_and(|w| !AFTER_BARE_HOUR.contains(&w))
            && !lower[r.end..].trim_start().starts_with(',')
        {
            continue;
        }
        if free(&spans, &r)
            && let Some(k) = clock(&c)
        {
            spans.push(r);
            time = Some(k);
            break;
        }
    }
    let mut part: Option<&str> = None;
    for c in PART.captures_iter(&lower) {
        let r = c.get(0)?.range();
        if free(&spans, &r) {
            spans.push(r);
            part = Some(c.get(1)?.as_str());
            break;
        }
    }
    if tonight && part.is_none() {
        part = Some("night");
    }
    if day.is_none() && time.is_none() && part.is_none() && recurrence.is_none() {
        return None;
    }

    // The clock: an explicit time (an evening part makes 7 into 19:00), a
    // part of the day, or the day's default.
    let evening = matches!(part, Some("afternoon" | "evening" | "night")) || every_part.is_some_and(|(h, _)| h >= 12);
    // A named day or a recurrence reads 1–6 as afternoon hours; with
    // neither, a bare hour stays open and the nearer future reading wins.
    let named = day.is_some() || recurrence.is_some();
    let morning = part == Some("morning") || every_part == Some(part_time("morning"));
    let clock = match time {
        Some(k) if !k.settled && morning => Clock { settled: true, ..k },
        Some(k) if !k.settled && evening && k.hour < 12 => Clock { hour: k.hour + 12, settled: true, ..k },
        Some(k) if !k.settled && named && (1..=6).contains(&k.hour) => Clock { hour: k.hour + 12, settled: true, ..k },
        Some(k) if !k.settled && (named || evening) => Clock { settled: true, ..k },
        Some(k) => k,
        None => {
            let (hour, minute) = part.map(part_time).or(every_part).unwrap_or(DAY_DEFAULT);
            Clock { hour, minute, settled: true }
        }
    };

    let today = zone.local_date(now_ms);
    let at = |d: Date, h: i8, m: i8| zone.local_instant(d, h, m);
    // The first day on or after `from` that `accept` takes, at the clock.
    let first = |from: Date, accept: &dyn Fn(Date) -> bool, k: Clock| -> Option<i64> {
        let mut d = from;
        for _ in 0..400 {
            if accept(d) {
                let mut candidates = vec![at(d, k.hour, k.minute)?];
                if !k.settled && (1..12).contains(&k.hour) {
                    candidates.push(at(d, k.hour + 12, k.minute)?);
                }
                if let Some(t) = candidates.into_iter().filter(|t| *t > now_ms).min() {
                    return Some(t);
                }
            }
            d = d.tomorrow().ok()?;
        }
        None
    };
    let due_ms = match day {
        None => match recurrence {
            Some(Recurrence::Weekdays) => {
                first(today, &|d| !matches!(d.weekday(), Weekday::Saturday | Weekday::Sunday), clock)?
            }
            _ => first(today, &|_| true, clock)?,
        },
        Some(Day::Offset(n)) => {
            let d = today.checked_add(jiff::Span::new().days(n)).ok()?;
            let k = Clock { settled: true, ..clock };
            first(d, &|x| x == d, k)?
        }
        Some(Day::Weekday(w, next)) => {
            let from = if next {
                let to_monday = 7 - i64::from(today.weekday().to_monday_zero_offset());
                today.checked_add(jiff::Span::new().days(to_monday)).ok()?
            } else {
                today
            };
            first(from, &|d| d.weekday() == w, Clock { settled: true, ..clock })?
        }
        Some(Day::Date(d)) => first(d, &|x| x == d, Clock { settled: true, ..clock })?,
        Some(Day::Anniversary(m, dd)) => {
            let this_year = Date::new(today.year(), m, dd).ok();
            let next_year = Date::new(today.year() + 1, m, dd).ok()?;
            let k = Clock { settled: true, ..clock };
            this_year.and_then(|d| first(d, &|x| x == d, k)).or_else(|| first(next_year, &|x| x == next_year, k))?
        }
    };
    spans.sort_by_key(|r| r.start);
    if LEFTOVER.is_match(&without(&lower, &spans)) {
        return None;
    }
    Some(When { due_ms, recurrence, spans })
}

/// `text` without the time phrase's spans, spaces collapsed.
pub fn without(text: &str, spans: &[Range<usize>]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for r in spans {
        if r.start >= at && r.end <= text.len() {
            out.push_str(&text[at..r.start]);
            out.push(' ');
            at = r.end;
        }
    }
    out.push_str(&text[at..]);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Thursday 26 November 2026, 10:00 local.
    fn now(zone: &Zone) -> i64 {
        zone.parse_datetime("2026-11-26T10:00").unwrap()
    }

    fn read(text: &str, zone: &Zone) -> Option<(String, Option<Recurrence>, String)> {
        let w = parse(text, now(zone), zone)?;
        Some((zone.format(w.due_ms), w.recurrence, without(text, &w.spans)))
    }

    #[test]
    fn the_common_forms_read_in_the_principals_zone() {
        let london = Zone::parse("Europe/London").unwrap();
        let ny = Zone::parse("America/New_York").unwrap();
        use Recurrence::*;
        let cases: &[(&Zone, &str, &str, Option<Recurrence>, &str)] = &[
            (&london, "remind me in 20 minutes to stretch", "2026-11-26T10:20:00Z", None, "remind me to stretch"),
            (&london, "remind me to stretch in half an hour", "2026-11-26T10:30:00Z", None, "remind me to stretch"),
            (&london, "in an hour and a half check the oven", "2026-11-26T11:30:00Z", None, "check the oven"),
            (&london, "in 2 hours call Sam", "2026-11-26T12:00:00Z", None, "call Sam"),
            (
                &london,
                "Remind me tomorrow at 9 to call the dentist",
                "2026-11-27T09:00:00Z",
                None,
                "Remind me to call the dentist",
            ),
            (
                &ny,
                "Remind me tomorrow at 9 to call the dentist",
                "2026-11-27T09:00:00-05:00",
                None,
                "Remind me to call the dentist",
            ),
            (
                &london,
                "remind me to submit the report on Friday at 18:30",
                "2026-11-27T18:30:00Z",
                None,
                "remind me to submit the report",
            ),
            (&london, "on friday at 6.30pm pay rent", "2026-11-27T18:30:00Z", None, "pay rent"),
            (
                &london,
                "every Sunday evening water the plants",
                "2026-11-29T18:00:00Z",
                Some(Weekly),
                "water the plants",
            ),
            (
                &london,
                "remind me next Monday to renew the passport",
                "2026-11-30T09:00:00Z",
                None,
                "remind me to renew the passport",
            ),
            (&london, "next Thursday: dentist", "2026-12-03T09:00:00Z", None, ": dentist"),
            (&london, "remind me at 6 to leave", "2026-11-26T18:00:00Z", None, "remind me to leave"),
            (&london, "remind me at 11 to stand up", "2026-11-26T11:00:00Z", None, "remind me to stand up"),
            (&london, "at 9 take the pills", "2026-11-26T21:00:00Z", None, "take the pills"),
            (&london, "tomorrow at 5 ring Jo", "2026-11-27T17:00:00Z", None, "ring Jo"),
            (&london, "tomorrow at 5am ring Jo", "2026-11-27T05:00:00Z", None, "ring Jo"),
            (&london, "tomorrow morning buy bread", "2026-11-27T09:00:00Z", None, "buy bread"),
            (&london, "tonight take out the bins", "2026-11-26T20:00:00Z", None, "take out the bins"),
            (&london, "this evening at 7 call mum", "2026-11-26T19:00:00Z", None, "call mum"),
            (&london, "every day at 8 take vitamins", "2026-11-27T08:00:00Z", Some(Daily), "take vitamins"),
            (&london, "every morning meditate", "2026-11-27T09:00:00Z", Some(Daily), "meditate"),
            (&london, "every weekday at 08:15 standup", "2026-11-27T08:15:00Z", Some(Weekdays), "standup"),
            (&london, "every 15 minutes drink water", "2026-11-26T10:15:00Z", Some(Interval(15)), "drink water"),
            (&london, "every hour stretch", "2026-11-26T11:00:00Z", Some(Hourly), "stretch"),
            (&london, "on 3 December at noon lunch with Ana", "2026-12-03T12:00:00Z", None, "lunch with Ana"),
            (&london, "remind me on March 1st to file taxes", "2027-03-01T09:00:00Z", None, "remind me to file taxes"),
            (&london, "in 2 days at 10 follow up", "2026-11-28T10:00:00Z", None, "follow up"),
            (&london, "the day after tomorrow book the flights", "2026-11-28T09:00:00Z", None, "book the flights"),
            (&london, "at 14:00 call the bank", "2026-11-26T14:00:00Z", None, "call the bank"),
            (&london, "on Thursday at 9 review", "2026-12-03T09:00:00Z", None, "review"),
            (&london, "on Thursday at 4pm review", "2026-11-26T16:00:00Z", None, "review"),
            (&london, "tomorrow morning at 6 go running", "2026-11-27T06:00:00Z", None, "go running"),
            (&london, "every morning at 6 take meds", "2026-11-27T06:00:00Z", Some(Daily), "take meds"),
            (
                &london,
                "remind me to send the weekly report on Friday",
                "2026-11-27T09:00:00Z",
                None,
                "remind me to send the weekly report",
            ),
            (
                &london,
                "remind me weekly on Monday to water the ferns",
                "2026-11-30T09:00:00Z",
                Some(Weekly),
                "remind me to water the ferns",
            ),
            (&london, "stretch daily at 8", "2026-11-27T08:00:00Z", Some(Daily), "stretch"),
            (
                &london,
                "remind me tomorrow at 9 that my passport expires in 3 weeks",
                "2026-11-27T09:00:00Z",
                None,
                "remind me that my passport expires in 3 weeks",
            ),
            (
                &london,
                "remind me in 1 hour 30 minutes to take the cake out",
                "2026-11-26T11:30:00Z",
                None,
                "remind me to take the cake out",
            ),
            (
                &london,
                "remind me to return 2 Amazon parcels tomorrow",
                "2026-11-27T09:00:00Z",
                None,
                "remind me to return 2 Amazon parcels",
            ),
            (
                &london,
                "remind me to look at 2 flats on Saturday",
                "2026-11-28T09:00:00Z",
                None,
                "remind me to look at 2 flats",
            ),
            (
                &london,
                "remind me at 5 to prepare for tomorrow's meeting",
                "2026-11-26T17:00:00Z",
                None,
                "remind me to prepare for tomorrow's meeting",
            ),
            (&london, "every 30 mins drink water", "2026-11-26T10:30:00Z", Some(Interval(30)), "drink water"),
        ];
        for (zone, text, due, rec, rest) in cases {
            let got = read(text, zone).unwrap_or_else(|| panic!("no time read in {text:?}"));
            assert_eq!((got.0.as_str(), got.1, got.2.as_str()), (*due, *rec, *rest), "{text:?}");
        }
    }

    #[test]
    fn texts_without_a_time_or_with_a_past_one_read_nothing() {
        let z = Zone::utc();
        for text in [
            "remind me to call the dentist",
            "what reminders do I have",
            "remind me tomorrow at half past 5 to leave",
            "remind me on the 15th at 10 to pay rent",
            "remind me to ask about the hourly rate",
            "I ran 5 km in 30 min", // no "in N minutes" ahead: "in 30 min" reads, see below
            "every 3000 minutes ping",
            "today",
        ] {
            let w = parse(text, now(&z), &z);
            match text {
                "I ran 5 km in 30 min" => assert!(w.is_some(), "a duration phrase reads as one"),
                "today" => assert!(w.is_none(), "09:00 today has passed at 10:00"),
                _ => assert!(w.is_none(), "{text:?} read as {w:?}"),
            }
        }
    }

    #[test]
    fn a_daylight_saving_change_keeps_the_wall_clock() {
        let london = Zone::parse("Europe/London").unwrap();
        // Saturday 27 March 2027; clocks go forward on Sunday the 28th.
        let now = london.parse_datetime("2027-03-27T12:00").unwrap();
        let w = parse("tomorrow at 9 run", now, &london).unwrap();
        assert_eq!(london.format(w.due_ms), "2027-03-28T09:00:00+01:00");
    }
}
