//! The privacy export as a restore reads it (#51). An export is one JSON
//! document:
//!
//! ```text
//! {"format": "mneme-export", "version": 2, "export_id": "…", "exported_at_ms": …,
//!  "tables": {"<table>": [row, …], …},   // stored rows, blobs in base64
//!  "search": [item, …],                   // the search index, embeddings in base64
//!  "kv": {"<key>": value, …},             // memory keys as stored
//!  "memory": {…}}                         // a readable view, not read back
//! ```
//!
//! [`reader`] takes it a chunk at a time; [`Header`] judges its version;
//! [`Parts`] cuts it into the parts `mneme restore` sends; [`cell`] turns a
//! JSON value back into what its column stores; [`v1`] migrates the first
//! format, which had no version and wrote blobs as `<N bytes>`.

pub mod reader;
pub mod v1;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value as J, json};

pub use reader::{FormatError, Item, Reader};

/// What an export says it is.
pub const FORMAT: &str = "mneme-export";
/// The version this Mneme writes, and the newest it reads.
pub const VERSION: u64 = 2;

/// What an export's (or a part's) top-level fields say.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub version: u64,
    /// Names the export, so a repeated or resumed restore of it is known
    /// (version 1 has none: its time stands in).
    pub export_id: String,
    pub exported_at_ms: i64,
    /// A part's place in `mneme restore`'s sequence; 0 for a whole export.
    pub part: u64,
    /// Whether no part follows (a whole export is its own last part).
    pub last: bool,
}

/// The header fields read so far, judged once the first section begins.
#[derive(Debug, Default, Clone)]
pub struct HeaderFields(Map<String, J>);

impl HeaderFields {
    /// Takes a top-level field; one this version does not know is an error
    /// in a document that says it is of this version.
    pub fn add(&mut self, key: String, value: J) {
        self.0.insert(key, value);
    }

    /// The fields read so far.
    pub fn fields(&self) -> impl Iterator<Item = (&String, &J)> {
        self.0.iter()
    }

    /// The header, or why the export cannot be restored by this Mneme.
    pub fn judge(&self) -> Result<Header, String> {
        let f = &self.0;
        let format = f.get("format");
        let version = match (format, f.get("version")) {
            (None, None) => 1,
            (Some(J::String(s)), _) if s != FORMAT => {
                return Err(format!("this is not a Mneme export (its format is `{s}`, not `{FORMAT}`)"));
            }
            (Some(J::String(_)), Some(v)) => match v.as_u64() {
                Some(v) if v >= 1 => v,
                _ => return Err(format!("`version` must be a whole number from 1, not {v}")),
            },
            (Some(J::String(_)), None) => return Err("an export naming its format must give its `version`".into()),
            (Some(other), _) => return Err(format!("`format` must be a string, not {other}")),
            (None, Some(_)) => return Err(format!("an export giving a `version` must give `format`: \"{FORMAT}\"")),
        };
        if version > VERSION {
            return Err(format!(
                "this export is format version {version}, written by a newer Mneme; this one reads versions 1 to \
                 {VERSION}: upgrade Mneme before restoring it"
            ));
        }
        let exported_at_ms = match f.get("exported_at_ms") {
            Some(v) => v.as_i64().ok_or_else(|| format!("`exported_at_ms` must be a whole number, not {v}"))?,
            None => return Err("the export has no `exported_at_ms`: is it a Mneme export?".into()),
        };
        let export_id = match (version, f.get("export_id")) {
            (_, Some(J::String(s))) if !s.is_empty() && s.len() <= 128 => s.clone(),
            (1, None) => format!("v1-{exported_at_ms}"),
            (_, _) => return Err("`export_id` must be a string of 1 to 128 characters".into()),
        };
        let part = match f.get("part") {
            None => 0,
            Some(v) => v.as_u64().ok_or_else(|| format!("`part` must be a whole number, not {v}"))?,
        };
        let last = match f.get("last") {
            None => true,
            Some(J::Bool(b)) => *b,
            Some(v) => return Err(format!("`last` must be true or false, not {v}")),
        };
        for k in f.keys() {
            let known = ["format", "version", "export_id", "exported_at_ms", "part", "last"];
            if !known.contains(&k.as_str()) {
                return Err(format!("`{k}` is not a field of an export of version {version}"));
            }
        }
        Ok(Header { version, export_id, exported_at_ms, part, last })
    }
}

/// The opening of a document of this version, up to its first section.
pub fn opening(export_id: &str, exported_at_ms: i64) -> String {
    format!(
        "{{\"format\":\"{FORMAT}\",\"version\":{VERSION},\"export_id\":{},\"exported_at_ms\":{exported_at_ms}",
        J::from(export_id)
    )
}

/// The principal's data, in the order an export writes and a restore reads
/// it: counted when a restore asks whether the store is empty, and what
/// `DELETE /privacy/delete-all` deletes (with the search index).
pub const DATA_TABLES: [&str; 31] = [
    "user_traits",
    "threads",
    "exchanges",
    "working_memory",
    "topics",
    "interaction_log",
    "triage_calibration",
    "routing_decisions",
    "cortex_iterations",
    "spark_state",
    "scheduled_items",
    "lists",
    "list_items",
    "persistent_tasks",
    "events",
    "jobs",
    "knowledge_entries",
    "knowledge_jobs",
    "reasoning_patterns",
    "rx_observations",
    "rx_recs",
    "rx_artifacts",
    "episodes",
    "semantic_concepts",
    "semantic_relationships",
    "drift_log",
    "drift_cooldowns",
    "curiosity_threads",
    "router_weights",
    "routing_adjustments",
    "routing_metrics",
];

/// The principal's configuration, which a new store starts with defaults of
/// (the rx doors and their weights, the entry counter) or without (tools):
/// exported and restored after the data, over the defaults, but not counted
/// as data and not deleted with it.
pub const CONFIG_TABLES: [&str; 4] = ["rx_doors", "rx_weights", "tools", "knowledge_counter"];

/// Every table an export writes, in order: the data, then the configuration.
pub fn exported_tables() -> impl Iterator<Item = &'static str> {
    DATA_TABLES.iter().chain(CONFIG_TABLES.iter()).copied()
}

/// Tables computed from others, rebuilt by a restore rather than read: the
/// search index (written item by item, section `search`, with its full-text
/// and vector indexes), the vector lists' centroids and training claims
/// (trained again by `/tick/index`), and the timeline's day counts.
pub const DERIVED_TABLES: [&str; 9] = [
    "search_index",
    "search_vectors",
    "search_fts",
    "search_terms",
    "search_corpora",
    "vector_blocks",
    "vector_centroids",
    "vector_training",
    "knowledge_days",
];

/// The running system's own bookkeeping, which belongs to an instance and
/// not to the principal: job leases and runs, engine schedules, rx locks and
/// clock, failed sign-ins, model use, and the restores themselves.
pub const OPERATIONAL_TABLES: [&str; 9] = [
    "job_heartbeats",
    "job_runs",
    "engine_schedule",
    "rx_locks",
    "rx_clock",
    "auth_failures",
    "model_use",
    "model_fallbacks",
    "restores",
];

/// Memory keys an export writes, by prefix, and how each is stored. The
/// stream replay buffer (`sse_pending:`) and the critic's rate counter
/// (`critic_rate:`) belong to a connection and a minute, not to the
/// principal, and are not exported.
pub const KV_PREFIXES: [(&str, KvKind); 7] = [
    ("gist:", KvKind::Text),
    ("gist_index:", KvKind::Sorted),
    ("fact:", KvKind::Text),
    ("fact_index:", KvKind::Sorted),
    ("fok:", KvKind::Text),
    ("topic_streak:", KvKind::Text),
    ("focus:", KvKind::Text),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvKind {
    /// A value: text, and for a record its expiry inside (`expires_ms`).
    Text,
    /// A sorted set of members and scores.
    Sorted,
}

/// A memory key's value as an export writes it: `{"text": …}` or
/// `{"sorted": [[member, score], …]}`.
#[derive(Debug, Clone, PartialEq)]
pub enum KvValue {
    Text(String),
    Sorted(Vec<(String, f64)>),
}

impl KvValue {
    pub fn to_json(&self) -> J {
        match self {
            Self::Text(t) => json!({"text": t}),
            Self::Sorted(m) => json!({"sorted": m.iter().map(|(k, s)| json!([k, s])).collect::<Vec<_>>()}),
        }
    }

    /// The value of `key`, checked against the kind its prefix stores.
    pub fn from_json(key: &str, v: &J) -> Result<Self, String> {
        let Some((_, kind)) = KV_PREFIXES.iter().find(|(p, _)| key.starts_with(p)) else {
            return Err(format!("`{key}` is not a memory key an export holds"));
        };
        match (kind, v.get("text"), v.get("sorted")) {
            (KvKind::Text, Some(J::String(t)), None) => Ok(Self::Text(t.clone())),
            (KvKind::Sorted, None, Some(J::Array(members))) => members
                .iter()
                .map(|m| match m.as_array().map(Vec::as_slice) {
                    Some([J::String(k), s]) if s.is_number() => Ok((k.clone(), s.as_f64().unwrap_or(0.0))),
                    _ => Err(format!("`{key}`: a member must be [name, score], not {}", short(m))),
                })
                .collect::<Result<_, _>>()
                .map(Self::Sorted),
            (KvKind::Text, ..) => Err(format!("`{key}` must be {{\"text\": string}}")),
            (KvKind::Sorted, ..) => Err(format!("`{key}` must be {{\"sorted\": [[name, score], …]}}")),
        }
    }
}

/// The expiry a record's text carries (`{"value": …, "expires_ms": N}`),
/// none for a plain value.
pub fn expiry_of(text: &str) -> Option<u64> {
    let v: J = serde_json::from_str(text).ok()?;
    v.get("expires_ms")?.as_u64()
}

/// What a column stores, from its declared type (SQLite's declaration or
/// PostgreSQL's `data_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    Int,
    Real,
    Text,
    Blob,
}

impl ColumnType {
    pub fn of(declared: &str) -> Self {
        let d = declared.to_ascii_lowercase();
        if d.contains("int") {
            Self::Int
        } else if ["real", "double", "float", "numeric"].iter().any(|t| d.contains(t)) {
            Self::Real
        } else if d.contains("blob") || d.contains("bytea") {
            Self::Blob
        } else {
            Self::Text
        }
    }
}

/// A value as a column stores it.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

/// Why a JSON value is not what its column stores.
#[derive(Debug, Clone, PartialEq)]
pub enum CellError {
    /// A version-1 export's `<N bytes>`: the bytes were not written.
    NotExported,
    Wrong(String),
}

/// The stored value of `v` in a column of type `ty`.
pub fn cell(ty: ColumnType, v: &J) -> Result<Cell, CellError> {
    let wrong = |what: &str| CellError::Wrong(format!("{what}, not {}", short(v)));
    Ok(match (ty, v) {
        (_, J::Null) => Cell::Null,
        (ColumnType::Int, J::Number(n)) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Cell::Int(i),
            (None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => Cell::Int(f as i64),
            _ => return Err(wrong("a whole number")),
        },
        (ColumnType::Int, J::Bool(b)) => Cell::Int(i64::from(*b)),
        (ColumnType::Real, J::Number(n)) => Cell::Real(n.as_f64().ok_or_else(|| wrong("a number"))?),
        (ColumnType::Text, J::String(s)) => Cell::Text(s.clone()),
        (ColumnType::Blob, J::String(s)) if is_placeholder(s) => return Err(CellError::NotExported),
        (ColumnType::Blob, J::String(s)) => {
            Cell::Blob(STANDARD.decode(s).map_err(|e| CellError::Wrong(format!("base64 ({e})")))?)
        }
        (ColumnType::Int, _) => return Err(wrong("a whole number")),
        (ColumnType::Real, _) => return Err(wrong("a number")),
        (ColumnType::Text, _) => return Err(wrong("a string")),
        (ColumnType::Blob, _) => return Err(wrong("bytes in base64")),
    })
}

/// The JSON an export writes for a stored value.
pub fn json_of(c: &Cell) -> J {
    match c {
        Cell::Null => J::Null,
        Cell::Int(i) => json!(i),
        Cell::Real(f) => json!(f),
        Cell::Text(s) => json!(s),
        Cell::Blob(b) => json!(STANDARD.encode(b)),
    }
}

/// Bytes in base64, as an export writes them.
pub fn base64(b: &[u8]) -> String {
    STANDARD.encode(b)
}

/// Bytes from an export's base64.
pub fn unbase64(s: &str) -> Result<Vec<u8>, String> {
    STANDARD.decode(s).map_err(|e| format!("not base64 ({e})"))
}

/// Whether a string is version 1's stand-in for bytes it did not write.
pub fn is_placeholder(s: &str) -> bool {
    s.strip_prefix('<').and_then(|r| r.strip_suffix(" bytes>")).is_some_and(|n| n.parse::<u64>().is_ok())
}

fn short(v: &J) -> String {
    let s = v.to_string();
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// Cuts an export into parts of about `budget` bytes, each a document of
/// its own that `POST /privacy/import` takes: the header fields in every
/// part, with its `part` number and, on the final one, `last: true`. Rows
/// stay in the export's order, so tables restore in the order they were
/// written (a part never needs a later one).
#[derive(Debug)]
pub struct Parts {
    header: Map<String, J>,
    budget: usize,
    next: u64,
    tables: Vec<(String, Vec<String>)>,
    search: Vec<String>,
    kv: Vec<(String, String)>,
    memory: Option<String>,
    bytes: usize,
}

impl Parts {
    pub fn new(budget: usize) -> Self {
        Self {
            header: Map::new(),
            budget,
            next: 0,
            tables: Vec::new(),
            search: Vec::new(),
            kv: Vec::new(),
            memory: None,
            bytes: 0,
        }
    }

    /// Takes the next item; returns a finished part once the budget is met.
    pub fn push(&mut self, item: Item) -> Option<String> {
        let size = match item {
            Item::Field(k, v) => {
                self.header.insert(k, v);
                return None;
            }
            Item::Row { table, row } => {
                let text = J::Object(row).to_string();
                let n = text.len() + 1;
                match self.tables.last_mut() {
                    Some((t, rows)) if *t == table => rows.push(text),
                    _ => self.tables.push((table, vec![text])),
                }
                n
            }
            Item::Search(item) => {
                let text = J::Object(item).to_string();
                let n = text.len() + 1;
                self.search.push(text);
                n
            }
            Item::Kv { key, value } => {
                let (k, v) = (J::from(key).to_string(), value.to_string());
                let n = k.len() + v.len() + 2;
                self.kv.push((k, v));
                n
            }
            Item::Memory(m) => {
                let text = m.to_string();
                let n = text.len();
                self.memory = Some(text);
                n
            }
        };
        self.bytes += size;
        (self.bytes >= self.budget).then(|| self.part(false))
    }

    /// The final part (possibly with no rows: it tells the store the
    /// restore is complete).
    pub fn finish(&mut self) -> String {
        self.part(true)
    }

    fn part(&mut self, last: bool) -> String {
        let mut head = self.header.clone();
        head.insert("part".into(), json!(self.next));
        head.insert("last".into(), json!(last));
        self.next += 1;
        let mut out = J::Object(head).to_string();
        out.pop();
        if !self.tables.is_empty() {
            out.push_str(",\"tables\":{");
            for (i, (t, rows)) in self.tables.drain(..).enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&J::from(t).to_string());
                out.push_str(":[");
                out.push_str(&rows.join(","));
                out.push(']');
            }
            out.push('}');
        }
        if !self.search.is_empty() {
            out.push_str(",\"search\":[");
            out.push_str(&self.search.join(","));
            out.push(']');
            self.search.clear();
        }
        if !self.kv.is_empty() {
            out.push_str(",\"kv\":{");
            let pairs: Vec<String> = self.kv.drain(..).map(|(k, v)| format!("{k}:{v}")).collect();
            out.push_str(&pairs.join(","));
            out.push('}');
        }
        if let Some(m) = self.memory.take() {
            out.push_str(",\"memory\":");
            out.push_str(&m);
        }
        out.push('}');
        self.bytes = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(doc: J) -> Result<Header, String> {
        let mut h = HeaderFields::default();
        for (k, v) in doc.as_object().unwrap() {
            h.add(k.clone(), v.clone());
        }
        h.judge()
    }

    #[test]
    fn versions_older_are_read_newer_refused_and_a_stranger_named() {
        let h = header(json!({"exported_at_ms": 5})).unwrap();
        assert_eq!((h.version, h.export_id.as_str(), h.part, h.last), (1, "v1-5", 0, true));
        assert!(header(json!({"exported_at_ms": 5, "export_id": ""})).unwrap_err().contains("export_id"));
        assert!(header(json!({"exported_at_ms": 5, "colour": 1})).unwrap_err().contains("`colour` is not a field"));
        let h = header(json!({"format": FORMAT, "version": 2, "export_id": "e", "exported_at_ms": 5, "part": 3,
            "last": false}))
        .unwrap();
        assert_eq!((h.version, h.export_id.as_str(), h.part, h.last), (2, "e", 3, false));
        let e = header(json!({"format": FORMAT, "version": 3, "exported_at_ms": 5})).unwrap_err();
        assert!(e.contains("format version 3, written by a newer Mneme") && e.contains("upgrade"), "{e}");
        assert!(header(json!({"format": "zip", "version": 1})).unwrap_err().contains("not a Mneme export"));
        assert!(header(json!({"format": FORMAT, "exported_at_ms": 5})).unwrap_err().contains("`version`"));
        assert!(header(json!({"format": FORMAT, "version": 0, "exported_at_ms": 5})).is_err());
        assert!(
            header(json!({"format": FORMAT, "version": 2, "exported_at_ms": 5})).unwrap_err().contains("export_id")
        );
        let e = header(json!({"format": FORMAT, "version": 2, "export_id": "e", "exported_at_ms": 5, "x": 1}));
        assert!(e.unwrap_err().contains("`x` is not a field"));
        assert!(header(json!({"tables": {}})).unwrap_err().contains("exported_at_ms"));
    }

    #[test]
    fn cells_come_back_as_their_column_stores_them() {
        let t = ColumnType::of;
        assert_eq!(
            [t("BIGINT"), t("INTEGER"), t("double precision"), t("REAL"), t("BYTEA"), t("BLOB"), t("TEXT")],
            [
                ColumnType::Int,
                ColumnType::Int,
                ColumnType::Real,
                ColumnType::Real,
                ColumnType::Blob,
                ColumnType::Blob,
                ColumnType::Text
            ]
        );
        assert_eq!(cell(ColumnType::Int, &json!(7)), Ok(Cell::Int(7)));
        assert_eq!(cell(ColumnType::Int, &json!(7.0)), Ok(Cell::Int(7)));
        assert_eq!(cell(ColumnType::Real, &json!(7)), Ok(Cell::Real(7.0)));
        assert_eq!(cell(ColumnType::Text, &json!(null)), Ok(Cell::Null));
        let bytes = vec![0u8, 1, 254, 255];
        assert_eq!(cell(ColumnType::Blob, &json_of(&Cell::Blob(bytes.clone()))), Ok(Cell::Blob(bytes)));
        assert_eq!(cell(ColumnType::Blob, &json!("<1536 bytes>")), Err(CellError::NotExported));
        assert!(matches!(cell(ColumnType::Int, &json!("7")), Err(CellError::Wrong(m)) if m.contains("whole number")));
        assert!(matches!(cell(ColumnType::Text, &json!(1)), Err(CellError::Wrong(m)) if m.contains("a string")));
        assert!(matches!(cell(ColumnType::Blob, &json!("@@")), Err(CellError::Wrong(m)) if m.contains("base64")));
        assert!(!is_placeholder("<many bytes>") && is_placeholder("<0 bytes>"));
    }

    #[test]
    fn every_table_of_the_schema_is_exported_derived_or_operational() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
        let mut classified: Vec<&str> = exported_tables().collect();
        classified.extend(DERIVED_TABLES);
        classified.extend(OPERATIONAL_TABLES);
        let mut sorted = classified.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), classified.len(), "a table in two lists");
        for backend in ["sqlite", "postgres"] {
            for f in std::fs::read_dir(root.join(backend)).unwrap() {
                let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
                for line in text.lines() {
                    let Some(rest) = line.trim().strip_prefix("CREATE ") else { continue };
                    let Some(rest) = rest.trim_start_matches("VIRTUAL ").strip_prefix("TABLE ") else { continue };
                    let name = rest.trim_start_matches("IF NOT EXISTS ").split([' ', '(']).next().unwrap();
                    assert!(classified.contains(&name), "{backend}: `{name}` is in no list of mneme-backup");
                }
            }
        }
    }

    #[test]
    fn memory_values_round_trip_and_a_wrong_kind_is_named() {
        for (key, v) in
            [("gist:t:1", KvValue::Text("{}".into())), ("gist_index:t", KvValue::Sorted(vec![("a".into(), 2.0)]))]
        {
            assert_eq!(KvValue::from_json(key, &v.to_json()), Ok(v));
        }
        assert!(KvValue::from_json("gist_index:t", &json!({"text": "x"})).unwrap_err().contains("sorted"));
        assert!(KvValue::from_json("sse_pending:x", &json!({"text": "x"})).unwrap_err().contains("not a memory key"));
        assert_eq!(expiry_of(r#"{"value": 1, "expires_ms": 9}"#), Some(9));
        assert_eq!(expiry_of("0.5"), None);
    }

    #[test]
    fn parts_carry_the_header_keep_the_order_and_read_back_whole() {
        let doc = format!(
            "{},\"tables\":{{\"a\":[{{\"id\":1}},{{\"id\":2}},{{\"id\":3}}],\"b\":[{{\"id\":\"x\"}}]}},\
             \"search\":[{{\"ref_id\":\"d\"}}],\"kv\":{{\"gist:t:1\":\"v\"}},\"memory\":{{}}}}",
            opening("e1", 9)
        );
        let mut r = Reader::new();
        r.feed(doc.as_bytes());
        let mut items = Vec::new();
        while let Some(i) = r.next_item().unwrap() {
            items.push(i);
        }
        r.finish().unwrap();
        let mut parts = Parts::new(20);
        let mut docs: Vec<String> = items.iter().cloned().filter_map(|i| parts.push(i)).collect();
        docs.push(parts.finish());
        assert!(docs.len() >= 3, "{docs:?}");
        let mut again = Vec::new();
        for (n, d) in docs.iter().enumerate() {
            let mut r = Reader::new();
            r.feed(d.as_bytes());
            let mut h = HeaderFields::default();
            while let Some(i) = r.next_item().unwrap() {
                match i {
                    Item::Field(k, v) => h.add(k, v),
                    other => again.push(other),
                }
            }
            r.finish().unwrap();
            let h = h.judge().unwrap();
            assert_eq!((h.export_id.as_str(), h.part, h.last), ("e1", n as u64, n == docs.len() - 1));
        }
        let fields = items.iter().filter(|i| matches!(i, Item::Field(..))).count();
        assert_eq!(again, items[fields..].to_vec());
    }
}
