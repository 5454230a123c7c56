//! `allowed_outbound_hosts`, enforced exactly as Spin does: each entry is
//! `scheme://host[:port]`, where the scheme, the host (or a `*.` suffix) and
//! the port (or a `a..b` range) may be `*`; an omitted port means the
//! scheme's default. Hosts are compared as written: `localhost` does not
//! match `127.0.0.1`.

use anyhow::{Result, bail};

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    Any,
    Exact(String),
    Suffix(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PortPattern {
    Any,
    Range(u16, u16),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    scheme: Option<String>,
    host: HostPattern,
    port: PortPattern,
}

/// The parsed `allowed_outbound_hosts` of one component.
#[derive(Debug, Clone, Default)]
pub struct AllowedHosts {
    rules: Vec<Rule>,
}

pub fn default_port(scheme: &str) -> Option<u16> {
    Some(match scheme {
        "http" => 80,
        "https" => 443,
        "postgres" => 5432,
        "redis" => 6379,
        "mysql" => 3306,
        "mqtt" => 1883,
        _ => return None,
    })
}

impl AllowedHosts {
    pub fn parse(entries: &[String]) -> Result<Self> {
        let mut rules = Vec::new();
        for e in entries {
            let Some((scheme, rest)) = e.split_once("://") else {
                bail!("allowed_outbound_hosts entry `{e}` must be `scheme://host[:port]`");
            };
            let rest = rest.trim_end_matches('/');
            if rest.contains('/') {
                bail!("allowed_outbound_hosts entry `{e}` must not contain a path");
            }
            let (host, port) = match rest.rsplit_once(':') {
                Some((h, p)) if !h.ends_with(']') || rest.starts_with('[') => (h, Some(p)),
                _ => (rest, None),
            };
            let scheme = (scheme != "*").then(|| scheme.to_ascii_lowercase());
            let host = match host {
                "*" => HostPattern::Any,
                h if h.starts_with("*.") => HostPattern::Suffix(h[1..].to_ascii_lowercase()),
                h if h.contains('*') => {
                    bail!("allowed_outbound_hosts entry `{e}`: `*` must be the whole host or a `*.` prefix")
                }
                "" => bail!("allowed_outbound_hosts entry `{e}` has no host"),
                h => HostPattern::Exact(h.to_ascii_lowercase()),
            };
            let port = match port {
                Some("*") => PortPattern::Any,
                Some(p) => match p.split_once("..") {
                    Some((a, b)) => PortPattern::Range(port_num(e, a)?, port_num(e, b)?),
                    None => {
                        let n = port_num(e, p)?;
                        PortPattern::Range(n, n)
                    }
                },
                None => match scheme.as_deref().and_then(default_port) {
                    Some(n) => PortPattern::Range(n, n),
                    None => bail!("allowed_outbound_hosts entry `{e}` needs a port (no default for its scheme)"),
                },
            };
            rules.push(Rule { scheme, host, port });
        }
        Ok(Self { rules })
    }

    /// Whether a connection to `scheme://host:port` is allowed.
    pub fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        self.rules.iter().any(|r| {
            r.scheme.as_deref().is_none_or(|s| s == scheme)
                && match &r.host {
                    HostPattern::Any => true,
                    HostPattern::Exact(h) => h.trim_start_matches('[').trim_end_matches(']') == host,
                    HostPattern::Suffix(s) => host.ends_with(s.as_str()),
                }
                && match r.port {
                    PortPattern::Any => true,
                    PortPattern::Range(a, b) => (a..=b).contains(&port),
                }
        })
    }

    /// Checks a URL such as `redis://127.0.0.1:6379/0`.
    pub fn allows_url(&self, url: &str) -> bool {
        let Ok(u) = url::Url::parse(url) else { return false };
        let Some(host) = u.host_str() else { return false };
        let Some(port) = u.port().or_else(|| default_port(u.scheme())) else { return false };
        self.allows(u.scheme(), host, port)
    }
}

/// Logs a refused connection in Spin's words (`crates/runtime-factors`),
/// so a missing `allowed_outbound_hosts` entry is easy to find; `pattern`
/// is `scheme://authority`.
pub fn log_denied(pattern: &str) {
    eprintln!(
        "Warning: A component tried to make an outbound network connection to disallowed destination '{pattern}'.\n\
         To allow this request, add 'allowed_outbound_hosts = [\"{pattern}\"]' to the manifest component section."
    );
}

/// The refusal text of Spin's deny adapter (`crates/capabilities/deny-adapter`)
/// for an interface a dependency does not inherit.
pub fn not_permitted(iface: &str) -> String {
    format!("{iface:?} is not permitted")
}

/// `scheme://authority` of a URL, as Spin names a refused destination; the
/// URL itself when it does not parse.
pub fn destination_pattern(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) if u.host_str().is_some() => {
            let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
            format!("{}://{}{port}", u.scheme(), u.host_str().unwrap_or_default())
        }
        _ => url.to_string(),
    }
}

fn port_num(entry: &str, p: &str) -> Result<u16> {
    p.parse().map_err(|_| anyhow::anyhow!("allowed_outbound_hosts entry `{entry}` has an invalid port `{p}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_destinations_and_interfaces_are_named_as_spin_names_them() {
        assert_eq!(destination_pattern("redis://localhost:6379/0"), "redis://localhost:6379");
        assert_eq!(destination_pattern("redis://cache"), "redis://cache");
        assert_eq!(destination_pattern("not a url"), "not a url");
        assert_eq!(not_permitted("spin:redis/redis"), "\"spin:redis/redis\" is not permitted");
    }

    fn hosts(e: &[&str]) -> AllowedHosts {
        AllowedHosts::parse(&e.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn allow_table() {
        let h = hosts(&[
            "postgres://127.0.0.1:5432",
            "redis://127.0.0.1",
            "https://*.example.com",
            "http://localhost:3000..3010",
        ]);
        let cases = [
            ("postgres", "127.0.0.1", 5432, true),
            ("postgres", "127.0.0.1", 5433, false),
            ("postgres", "localhost", 5432, false),
            ("redis", "127.0.0.1", 6379, true),
            ("https", "api.example.com", 443, true),
            ("https", "example.com", 443, false),
            ("http", "api.example.com", 80, false),
            ("http", "localhost", 3005, true),
            ("http", "localhost", 3011, false),
        ];
        for (s, host, port, want) in cases {
            assert_eq!(h.allows(s, host, port), want, "{s}://{host}:{port}");
        }
    }

    #[test]
    fn wildcards_allow_everything() {
        assert!(hosts(&["*://*:*"]).allows("redis", "10.0.0.1", 1));
    }

    #[test]
    fn empty_list_allows_nothing() {
        assert!(!hosts(&[]).allows_url("http://127.0.0.1:80/"));
    }

    #[test]
    fn url_form_uses_default_ports() {
        let h = hosts(&["redis://127.0.0.1:6379"]);
        assert!(h.allows_url("redis://127.0.0.1/0"));
        assert!(!h.allows_url("redis://localhost:6379"));
    }

    #[test]
    fn malformed_entries_are_refused() {
        for bad in ["127.0.0.1:5432", "foo://host", "http://a*b.com", "http://host/path", "http://host:x"] {
            assert!(AllowedHosts::parse(&[bad.to_string()]).is_err(), "{bad}");
        }
    }
}
