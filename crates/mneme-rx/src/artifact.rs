//! Step 7: the recommendation artifact. The model (or the labelled
//! template) writes the narrative; code writes the frontmatter, the signal
//! table and the sources, and enforces the two content rules before
//! anything is stored:
//! - D-008: a Counter-thesis section with explicit reject and accept
//!   conditions;
//! - D-011: every number in the narrative is a signal value.

use crate::door::Door;
use crate::signals::{AuxRow, CompositeScore, Signals};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The body's sections, in order.
pub const SECTIONS: [&str; 6] = ["TL;DR", "What I'm seeing", "Recommendation", "Why", "Counter-thesis", "Sources"];
/// The label of a template-composed artifact.
pub const TEMPLATE: &str = "template";
/// At most this many vault results become citations.
pub const MAX_SOURCES: usize = 5;

/// The system prompt of the composing model call.
pub const PROMPT: &str = include_str!("../../../prompts/rx-compose.md");

/// The JSON Schema of a composed narrative (D-L2): the prompt's fields, the
/// counter-thesis with both of its conditions.
pub fn schema() -> String {
    let text = |max: usize| serde_json::json!({"type": "string", "maxLength": max});
    serde_json::json!({
        "type": "object",
        "properties": {
            "tldr": text(300),
            "seeing": text(1200),
            "recommendation": text(800),
            "why": text(1200),
            "counter_thesis": {
                "type": "object",
                "properties": {"argument": text(1000), "reject_if": text(400), "accept_if": text(400)},
                "required": ["argument", "reject_if", "accept_if"],
                "additionalProperties": false,
            },
        },
        "required": ["tldr", "seeing", "recommendation", "why", "counter_thesis"],
        "additionalProperties": false,
    })
    .to_string()
}

/// The narrative the model (or the template) writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Draft {
    pub tldr: String,
    pub seeing: String,
    pub recommendation: String,
    pub why: String,
    pub counter_thesis: CounterThesis,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterThesis {
    pub argument: String,
    pub reject_if: String,
    pub accept_if: String,
}

/// A vault search result cited in Sources.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Source {
    pub corpus: String,
    pub id: String,
    pub title: String,
    #[serde(default)]
    pub snippet: String,
    pub score: f64,
}

/// Everything the artifact is made from.
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    pub door: &'a Door,
    pub signals: &'a Signals,
    pub aux: &'a [AuxRow],
    pub composite: &'a CompositeScore,
    pub driving: &'a str,
    pub fired: &'a [String],
    pub sources: &'a [Source],
    pub confidence: i64,
    pub confidence_breakdown: &'a Value,
    pub prior_open_recs: &'a [String],
    pub created_at: &'a str,
}

/// Every number the narrative may contain: the signal values as read, the
/// composite and its layers, the confidence and its breakdown.
pub fn allowed_numbers(i: &Inputs) -> Vec<f64> {
    let mut v = vec![i.composite.drift_score, i.composite.view_drift, i.confidence as f64];
    if let Some((_, score, weight)) = &i.composite.layer {
        v.extend([*score, *weight, 1.0 - *weight]);
    }
    for c in &i.signals.components {
        v.extend([c.normalised, c.weight, c.contribution]);
        v.extend(c.raw);
    }
    for a in i.aux {
        v.push(a.normalised);
        v.extend(a.raw);
    }
    if let Some(o) = i.confidence_breakdown.as_object() {
        v.extend(o.values().filter_map(Value::as_f64));
    }
    collect_numbers(&i.signals.facts, &mut v);
    v
}

fn collect_numbers(v: &Value, out: &mut Vec<f64>) {
    match v {
        Value::Number(n) => out.extend(n.as_f64()),
        Value::Array(a) => a.iter().for_each(|x| collect_numbers(x, out)),
        Value::Object(o) => o.values().for_each(|x| collect_numbers(x, out)),
        _ => {}
    }
}

/// The numbers written in a text: digit runs with an optional decimal part
/// and sign, not glued to letters (`L6`, `Q3` and `S1` are names), and
/// `N%` read as both N and N/100.
pub fn numbers_in(text: &str) -> Vec<(String, f64, bool)> {
    let b: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_digit() || (b[i] == '.' && i + 1 < b.len() && b[i + 1].is_ascii_digit())) {
            i += 1;
        }
        let glued = |c: Option<&char>| c.is_some_and(|c| c.is_alphabetic() || *c == '_');
        let before = if start > 0 { b.get(start - 1) } else { None };
        if glued(before) || glued(b.get(i)) {
            continue;
        }
        let mut token: String = b[start..i].iter().collect();
        if matches!(before, Some('-' | '−')) && (start < 2 || !b[start - 2].is_alphanumeric()) {
            token.insert(0, '-');
        }
        let percent = b.get(i) == Some(&'%');
        if let Ok(x) = token.replace('−', "-").parse::<f64>() {
            out.push((token, x, percent));
        }
    }
    out
}

/// D-011: the numbers of the narrative that are not signal values. A
/// number matches when it equals an allowed value as written to its own
/// precision (0.42 matches 0.4213 only if written 0.4213; 42% matches 0.42).
pub fn invented_numbers(text: &str, allowed: &[f64]) -> Vec<String> {
    let same = |x: f64, a: f64| (x - a).abs() < 1e-9 || (x - a.abs()).abs() < 1e-9;
    numbers_in(text)
        .into_iter()
        .filter(|(_, x, percent)| {
            let ok = allowed.iter().any(|a| same(*x, *a) || (*percent && same(*x / 100.0, *a)));
            !ok
        })
        .map(|(t, _, p)| if p { format!("{t}%") } else { t })
        .collect()
}

/// Whether a reject or accept condition says something: two words at
/// least. The draft and the finished markdown are held to the same rule.
pub fn condition_stated(text: &str) -> bool {
    text.split_whitespace().count() >= 2
}

/// Checks a draft against both rules; the error says what the model must fix.
pub fn check_draft(d: &Draft, allowed: &[f64]) -> Result<(), String> {
    let ct = &d.counter_thesis;
    if ct.argument.trim().is_empty() || !condition_stated(&ct.reject_if) || !condition_stated(&ct.accept_if) {
        return Err("D-008: the counter-thesis needs an argument, a reject condition and an accept condition".into());
    }
    if d.tldr.trim().is_empty() || d.recommendation.trim().is_empty() || d.why.trim().is_empty() {
        return Err("the draft needs a TL;DR, a recommendation and a why".into());
    }
    let text = [&d.tldr, &d.seeing, &d.recommendation, &d.why, &ct.argument, &ct.reject_if, &ct.accept_if]
        .map(|s| s.as_str())
        .join("\n");
    let invented = invented_numbers(&text, allowed);
    if !invented.is_empty() {
        return Err(format!("D-011: numbers not in the signals: {}", invented.join(", ")));
    }
    Ok(())
}

/// Parses the model's answer into a draft.
pub fn parse_draft(text: &str) -> Result<Draft, String> {
    let v = mneme_llm::extract_json(text).map_err(|e| format!("the answer is not a JSON object: {e}"))?;
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(|s| s.trim().to_string()).unwrap_or_default();
    let ct = v.get("counter_thesis").cloned().unwrap_or(Value::Null);
    let counter_thesis = match &ct {
        Value::Object(_) => CounterThesis {
            argument: s(&ct, "argument"),
            reject_if: s(&ct, "reject_if"),
            accept_if: s(&ct, "accept_if"),
        },
        _ => CounterThesis { argument: String::new(), reject_if: String::new(), accept_if: String::new() },
    };
    Ok(Draft {
        tldr: s(&v, "tldr"),
        seeing: s(&v, "seeing"),
        recommendation: s(&v, "recommendation"),
        why: s(&v, "why"),
        counter_thesis,
    })
}

/// A number as the artifact writes it: as read, without float noise.
pub fn num(x: f64) -> String {
    let r = (x * 10_000.0).round() / 10_000.0;
    let s = format!("{r}");
    if s == "-0" { "0".into() } else { s }
}

fn raw(x: Option<f64>) -> String {
    x.map_or_else(|| "no data".into(), num)
}

/// The user message of the composing call: the signals, the driving
/// signal, the evidence, and the numbers the model may use.
pub fn user_message(i: &Inputs) -> String {
    let spec = i.door.component(i.driving);
    let comps: Vec<Value> = i
        .signals
        .components
        .iter()
        .map(|c| {
            json!({"component": c.component, "label": i.door.component(&c.component).map(|s| s.label()),
                        "raw": c.raw, "normalised": c.normalised, "weight": c.weight, "contribution": c.contribution})
        })
        .collect();
    let sources: Vec<Value> = i
        .sources
        .iter()
        .enumerate()
        .map(|(n, s)| json!({"cite_as": format!("[S{}]", n + 1), "title": s.title, "snippet": s.snippet}))
        .collect();
    json!({
        "door": i.door.name,
        "drift_score": i.composite.drift_score,
        "view_drift": i.composite.view_drift,
        "second_layer": i.composite.layer.as_ref().map(|(n, s, w)| json!({"name": n, "score": s, "weight": w})),
        "driving_signal": {"name": i.driving, "label": spec.map(|s| s.label()), "advice": spec.and_then(|s| s.advice.clone())},
        "components": comps,
        "auxiliary": i.aux,
        "signals_fired": i.fired,
        "facts": i.signals.facts,
        "confidence": i.confidence,
        "sources": sources,
    })
    .to_string()
}

/// The labelled rule-based draft: the driving signal's advice, the numbers
/// verbatim, and a counter-thesis from the strongest opposing evidence
/// (the component that most says things are on track).
pub fn template(i: &Inputs) -> Draft {
    let d = i.door;
    let label = |name: &str| d.component(name).map_or_else(|| name.replace('_', " "), |s| s.label());
    let c = i.signals.components.iter().find(|c| c.component == i.driving);
    let (n, r, contrib) = c.map_or((0.0, None, 0.0), |c| (c.normalised, c.raw, c.contribution));
    let advice = d
        .component(i.driving)
        .and_then(|s| s.advice.clone())
        .unwrap_or_else(|| format!("Work on {} before anything else this week.", label(i.driving)));
    // The opposing evidence: the lowest normalised component with data
    // (other than the driver), else the lowest one at all.
    let others = || i.signals.components.iter().filter(|o| o.component != i.driving);
    let opposing = others()
        .filter(|o| o.raw.is_some())
        .min_by(|a, b| a.normalised.total_cmp(&b.normalised))
        .or_else(|| others().min_by(|a, b| a.normalised.total_cmp(&b.normalised)));
    let (argument, reject_if, accept_if) = match opposing {
        Some(o) => (
            format!(
                "{} sits at {} normalised (raw {}), which says the rest of the {} picture is on track; {} may be a short blip that corrects itself without a change of plan.",
                cap(&label(&o.component)),
                num(o.normalised),
                raw(o.raw),
                d.name,
                label(i.driving)
            ),
            format!(
                "the next run shows {} back at or below {} normalised without this action, or {} turns out to be missing data rather than a real slip.",
                label(i.driving),
                num(o.normalised),
                label(i.driving)
            ),
            format!("{} is still at or above {} normalised on the next run.", label(i.driving), num(n)),
        ),
        None => (
            format!("{} is the only signal this door has, so nothing corroborates it.", cap(&label(i.driving))),
            format!("{} turns out to be missing or mis-logged data.", label(i.driving)),
            format!("{} is still at or above {} normalised on the next run.", label(i.driving), num(n)),
        ),
    };
    let fired = if i.fired.is_empty() {
        "none".to_string()
    } else {
        i.fired.iter().map(|f| label(f)).collect::<Vec<_>>().join(", ")
    };
    Draft {
        tldr: format!(
            "{} drift is {}; the driving signal is {} at {} normalised (raw {}).",
            d.title,
            num(i.composite.drift_score),
            label(i.driving),
            num(n),
            raw(r)
        ),
        seeing: format!(
            "The composite drift is {}. Signals at or above the fire threshold: {}.",
            num(i.composite.drift_score),
            fired
        ),
        recommendation: advice,
        why: format!(
            "{} contributes {} to the weighted composite, the largest weighted contribution of any component, so it is the signal to address first.",
            cap(&label(i.driving)),
            num(contrib)
        ),
        counter_thesis: CounterThesis { argument, reject_if, accept_if },
    }
}

fn cap(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

/// Step 8's file name: `<Door>/rx/rx-YYYY-MM-DD-NN.md`.
pub fn path(title: &str, date: &str, nn: i64) -> String {
    format!("{title}/rx/rx-{date}-{nn:02}.md")
}

/// A no-change confirmation's file name.
pub fn confirmation_path(title: &str, date: &str, nn: i64) -> String {
    format!("{title}/rx/no-change/nc-{date}-{nn:02}.md")
}

fn yaml(v: &Value) -> String {
    // JSON is YAML's flow style: one line per field, readable by Obsidian.
    v.to_string()
}

/// The frontmatter's `drift_breakdown`: every component as read, the view's
/// drift and the second layer.
pub fn drift_breakdown(i: &Inputs) -> Value {
    let components: Vec<Value> = i
        .signals
        .components
        .iter()
        .map(|c| json!({"component": c.component, "raw": c.raw, "normalised": c.normalised, "weight": c.weight, "contribution": c.contribution}))
        .collect();
    let mut v = json!({"components": components, "view_drift": i.composite.view_drift});
    if let Some((name, score, weight)) = &i.composite.layer {
        v["second_layer"] = json!({"name": name, "score": score, "weight": weight});
    }
    v
}

/// The frontmatter's `source_refs`.
pub fn source_refs(sources: &[Source]) -> Value {
    sources.iter().map(|s| json!({"corpus": s.corpus, "id": s.id, "title": s.title, "score": s.score})).collect()
}

/// The artifact's frontmatter values.
pub fn frontmatter(i: &Inputs, composer: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("id", Value::Null),
        ("door", json!(i.door.name)),
        ("created_at", json!(i.created_at)),
        ("drift_score", json!(i.composite.drift_score)),
        ("drift_breakdown", drift_breakdown(i)),
        ("driving_signal", json!(i.driving)),
        ("confidence", json!(i.confidence)),
        ("confidence_breakdown", i.confidence_breakdown.clone()),
        ("status", json!("open")),
        ("signals_fired", json!(i.fired)),
        ("source_refs", source_refs(i.sources)),
        ("prior_open_recs", json!(i.prior_open_recs)),
        ("composer", json!(composer)),
    ]
}

/// The whole artifact: frontmatter, then the six sections in order.
pub fn render(i: &Inputs, d: &Draft, composer: &str) -> String {
    let mut md = String::from("---\n");
    for (k, v) in frontmatter(i, composer) {
        md.push_str(&format!("{k}: {}\n", yaml(&v)));
    }
    md.push_str("---\n\n");
    md.push_str(&format!("# {} recommendation, {}\n\n", i.door.title, &i.created_at[..10.min(i.created_at.len())]));
    if composer == TEMPLATE {
        md.push_str(
            "_Composed from the rule-based template: no model is configured. The numbers are the signals' own._\n\n",
        );
    }
    md.push_str(&format!("## TL;DR\n\n{}\n\n", d.tldr));
    md.push_str(&format!("## What I'm seeing\n\n{}\n\n", d.seeing));
    md.push_str("| component | raw | normalised | weight | contribution |\n|---|---|---|---|---|\n");
    for c in &i.signals.components {
        let mark = if c.component == i.driving { " (driving)" } else { "" };
        md.push_str(&format!(
            "| {}{mark} | {} | {} | {} | {} |\n",
            c.component,
            raw(c.raw),
            num(c.normalised),
            num(c.weight),
            num(c.contribution)
        ));
    }
    md.push_str(&format!("\nComposite drift: {}", num(i.composite.drift_score)));
    if let Some((name, score, weight)) = &i.composite.layer {
        md.push_str(&format!(
            " = {} × view drift {} + {} × {name} {}",
            num(1.0 - weight),
            num(i.composite.view_drift),
            num(*weight),
            num(*score)
        ));
    }
    md.push_str(".\n\n");
    md.push_str(&format!("## Recommendation\n\n{}\n\n", d.recommendation));
    md.push_str(&format!("## Why\n\n{}\n\n", d.why));
    md.push_str(&format!(
        "## Counter-thesis\n\n{}\n\n- **Reject if:** {}\n- **Accept if:** {}\n\n",
        d.counter_thesis.argument, d.counter_thesis.reject_if, d.counter_thesis.accept_if
    ));
    md.push_str("## Sources\n\n");
    if i.sources.is_empty() {
        md.push_str("The vault had nothing on this signal.\n");
    }
    for (n, s) in i.sources.iter().enumerate() {
        md.push_str(&format!("{}. [S{}] {} ({} `{}`)\n", n + 1, n + 1, s.title.trim(), s.corpus, s.id));
    }
    md
}

/// D-008 on a finished artifact (the pipeline's or one pushed to the
/// store): a `## Counter-thesis` section whose text states a reject and an
/// accept condition, each with content.
pub fn check_counter_thesis(markdown: &str) -> Result<(), String> {
    let Some(start) = markdown.find("## Counter-thesis") else {
        return Err("D-008: the artifact has no Counter-thesis section".into());
    };
    let section = &markdown[start + "## Counter-thesis".len()..];
    let section = section.find("\n## ").map_or(section, |end| &section[..end]);
    let condition = |name: &str| {
        section.lines().any(|l| {
            let l = l.replace('*', "");
            let l = l.trim().trim_start_matches('-').trim();
            l.to_lowercase().strip_prefix(name).is_some_and(|rest| condition_stated(rest.trim_start_matches(':')))
        })
    };
    if !condition("reject if") || !condition("accept if") {
        return Err("D-008: the counter-thesis must state `Reject if:` and `Accept if:` conditions".into());
    }
    Ok(())
}

/// Sets one frontmatter field (`key: value` on its own line), adding it
/// when missing. Idempotent; the body is untouched.
pub fn patch_frontmatter(markdown: &str, key: &str, value: &Value) -> String {
    let line = format!("{key}: {}", yaml(value));
    let Some(rest) = markdown.strip_prefix("---\n") else { return markdown.to_string() };
    let Some(end) = rest.find("\n---\n") else { return markdown.to_string() };
    let (head, body) = (&rest[..end], &rest[end..]);
    let mut found = false;
    // Split on `\n` alone: `lines()` would also drop the `\r` of a `\r\n`,
    // and a `---\r` line rejoined as `---` would end the frontmatter early.
    let mut lines: Vec<String> = head
        .split('\n')
        .filter(|_| !head.is_empty())
        .map(|l| {
            if l.split_once(':').is_some_and(|(k, _)| k.trim() == key) {
                found = true;
                line.clone()
            } else {
                l.to_string()
            }
        })
        .collect();
    if !found {
        lines.push(line);
    }
    format!("---\n{}{}", lines.join("\n"), body)
}

/// A frontmatter field's value, if present and valid JSON/YAML flow.
pub fn frontmatter_field(markdown: &str, key: &str) -> Option<Value> {
    let rest = markdown.strip_prefix("---\n")?;
    let head = &rest[..rest.find("\n---\n")?];
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| serde_json::from_str(v.trim()).unwrap_or_else(|_| Value::String(v.trim().into())))
    })
}

/// The short no-change confirmation of a deduplicated run.
pub fn confirmation(
    door: &Door,
    prior: &crate::signals::Prior,
    drift: f64,
    driving: &str,
    created_at: &str,
) -> (String, String) {
    let tldr = format!(
        "No change: {} is still driven by {} at drift {} (open rec {} has {}).",
        door.title,
        driving,
        num(drift),
        prior.id,
        num(prior.drift_score)
    );
    let md = format!(
        "---\nkind: \"no-change\"\ndoor: {}\ncreated_at: {}\ndrift_score: {}\ndriving_signal: {}\nprior_rec: {}\n---\n\n# No change\n\n{tldr}\n\nThe open recommendation still stands (D-012: same driving signal, drift within 0.05, under 48 h, no acute signal).\n",
        json!(door.name),
        json!(created_at),
        json!(drift),
        json!(driving),
        json!(prior.id),
    );
    (tldr, md)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signals::tests_support::{door, signals};
    use crate::signals::{composite, driving, fired};

    fn with<T>(f: impl FnOnce(&Inputs) -> T) -> T {
        let d = door();
        let s = signals([0.8, 0.5, 0.1]);
        let c = composite(&d, &s, &[]).unwrap();
        let drv = driving(&d, &s);
        let fi = fired(&d, &s);
        let bd = json!({"data_coverage": 1.0, "evidence": 0.4, "driver_dominance": 0.714});
        let sources = vec![Source {
            corpus: "knowledge".into(),
            id: "KE-0001".into(),
            title: "Consistency".into(),
            snippet: "x".into(),
            score: 0.05,
        }];
        let i = Inputs {
            door: &d,
            signals: &s,
            aux: &[],
            composite: &c,
            driving: &drv,
            fired: &fi,
            sources: &sources,
            confidence: 75,
            confidence_breakdown: &bd,
            prior_open_recs: &[],
            created_at: "2026-11-22T10:00:00Z",
        };
        f(&i)
    }

    #[test]
    fn numbers_are_found_as_written() {
        let n: Vec<String> = numbers_in("drift 0.55, 42% of L6 and S1; -0.2 then 7 days [S2] 2026-11-22")
            .into_iter()
            .map(|t| t.0)
            .collect();
        assert_eq!(n, vec!["0.55", "42", "-0.2", "7", "2026", "11", "22"]);
        assert_eq!(invented_numbers("drift 0.55 and 80%", &[0.55, 0.8]), Vec::<String>::new());
        assert_eq!(invented_numbers("drift 0.6", &[0.55]), vec!["0.6"]);
        assert_eq!(invented_numbers("over 7 days", &[0.55]), vec!["7"]);
    }

    #[test]
    fn the_template_passes_both_rules_and_cites_only_signal_numbers() {
        with(|i| {
            let d = template(i);
            check_draft(&d, &allowed_numbers(i)).unwrap();
            let md = render(i, &d, TEMPLATE);
            check_counter_thesis(&md).unwrap();
            let mut at = 0;
            for s in SECTIONS {
                let p = md[at..].find(&format!("## {s}\n")).unwrap_or_else(|| panic!("{s} in order"));
                at += p;
            }
            assert!(md.contains("rule-based template"));
            assert_eq!(frontmatter_field(&md, "status"), Some(json!("open")));
            assert_eq!(frontmatter_field(&md, "drift_score"), Some(json!(0.57)));
        });
    }

    #[test]
    fn a_draft_breaking_a_rule_is_rejected() {
        with(|i| {
            let allowed = allowed_numbers(i);
            let mut d = template(i);
            d.why = "Pace fell 12 points".into();
            assert!(check_draft(&d, &allowed).unwrap_err().contains("D-011: numbers not in the signals: 12"));
            let mut d = template(i);
            d.counter_thesis.accept_if = " ".into();
            assert!(check_draft(&d, &allowed).unwrap_err().contains("D-008"));
            // One word states nothing, in the draft as in the finished file.
            let mut d = template(i);
            d.counter_thesis.reject_if = "never".into();
            assert!(check_draft(&d, &allowed).unwrap_err().contains("D-008"));
            d.counter_thesis.reject_if = "pace recovers".into();
            assert!(check_draft(&d, &allowed).is_ok());
            let parsed =
                parse_draft("```json\n{\"tldr\": \"t\", \"recommendation\": \"r\", \"why\": \"w\"}\n```").unwrap();
            assert!(check_draft(&parsed, &allowed).unwrap_err().contains("D-008"));
        });
    }

    #[test]
    fn the_counter_thesis_check_reads_the_markdown() {
        let ok = "## Why\nx\n## Counter-thesis\nIt may pass.\n- **Reject if:** pace recovers alone.\n- **Accept if:** pace stays low.\n## Sources\n";
        check_counter_thesis(ok).unwrap();
        assert!(check_counter_thesis("## Why\nx\n").is_err());
        assert!(
            check_counter_thesis(
                "## Counter-thesis\nIt may pass.\nReject if: it recovers\n## Sources\nAccept if: it stays low\n"
            )
            .is_err()
        );
        assert!(check_counter_thesis("## Counter-thesis\nReject if:\nAccept if: stays low\n").is_err());
    }

    #[test]
    fn frontmatter_patches_are_idempotent() {
        let md = "---\nid: null\nstatus: \"open\"\n---\n\nbody status: open\n";
        let once = patch_frontmatter(md, "status", &json!("acted"));
        assert_eq!(once, "---\nid: null\nstatus: \"acted\"\n---\n\nbody status: open\n");
        assert_eq!(patch_frontmatter(&once, "status", &json!("acted")), once);
        let with_id = patch_frontmatter(&once, "id", &json!("abc"));
        assert_eq!(frontmatter_field(&with_id, "id"), Some(json!("abc")));
        let added = patch_frontmatter(&with_id, "store_id", &json!("x"));
        assert_eq!(frontmatter_field(&added, "store_id"), Some(json!("x")));
        assert!(added.ends_with("body status: open\n"));
    }

    /// Found by `crates/mneme-rx/tests/prop.rs`: a `\r\n` in the head was
    /// rejoined as `\n`, turning a `---\r` line into the closing `---`, so
    /// the patch was not idempotent and the field could be lost.
    #[test]
    fn a_patch_keeps_carriage_returns_in_the_head() {
        let md = "---\n\r\n---\r\n---\n";
        let once = patch_frontmatter(md, "id", &Value::Null);
        assert_eq!(once, "---\n\r\n---\r\nid: null\n---\n");
        assert_eq!(patch_frontmatter(&once, "id", &Value::Null), once);
        assert_eq!(frontmatter_field(&once, "id"), Some(Value::Null));
        let crlf = "---\nstatus: \"open\"\r\n---\r\nx: 1\n---\nbody\n";
        let patched = patch_frontmatter(crlf, "status", &json!("acted"));
        assert_eq!(patched, "---\nstatus: \"acted\"\n---\r\nx: 1\n---\nbody\n");
        assert_eq!(frontmatter_field(&patched, "status"), Some(json!("acted")));
    }

    #[test]
    fn paths_are_per_door_and_date() {
        assert_eq!(path("Fitness", "2026-11-22", 3), "Fitness/rx/rx-2026-11-22-03.md");
        assert_eq!(path("Finance", "2026-11-22", 112), "Finance/rx/rx-2026-11-22-112.md");
        assert_eq!(confirmation_path("Fitness", "2026-11-22", 1), "Fitness/rx/no-change/nc-2026-11-22-01.md");
    }
}
