//! Spin's HTTP routing rules: exact routes, `/...` wildcards and `:name`
//! segments; the most specific route wins (exact over parameterised over
//! wildcard, then the longer wildcard prefix); private routes are never
//! matched from outside.

use anyhow::{Result, bail};

/// An `[[trigger.http]]` entry: a route (or `private`) served by a component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpTrigger {
    pub route: String,
    pub private: bool,
    pub component: String,
}

#[derive(Debug, Clone)]
struct Route {
    /// Route as written, without the application base.
    raw: String,
    segments: Vec<Segment>,
    wildcard: bool,
    component: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Segment {
    Literal(String),
    Param(String),
}

/// The outcome of matching a request path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteMatch {
    pub component: String,
    /// The route as declared (`spin-raw-component-route`).
    pub raw_route: String,
    /// The path matched before any wildcard tail (`spin-matched-route` base).
    pub matched: String,
    /// The part of the path after the matched prefix (`spin-path-info`).
    pub path_info: String,
}

#[derive(Debug, Clone)]
pub struct Router {
    base: String,
    routes: Vec<Route>,
}

fn split(path: &str) -> Vec<&str> {
    path.split('/').filter(|s| !s.is_empty()).collect()
}

impl Router {
    pub fn new(base: &str, triggers: &[HttpTrigger]) -> Result<Self> {
        let base = base.trim_end_matches('/').to_string();
        let mut routes: Vec<Route> = Vec::new();
        for t in triggers.iter().filter(|t| !t.private) {
            if !t.route.starts_with('/') {
                bail!("route `{}` must start with `/`", t.route);
            }
            let (body, wildcard) = match t.route.strip_suffix("/...") {
                Some(b) => (b, true),
                None if t.route.ends_with("...") => {
                    bail!("route `{}`: a wildcard must be a whole final `/...` segment", t.route)
                }
                None => (t.route.as_str(), false),
            };
            let mut segments = Vec::new();
            for s in split(body) {
                if s.contains("...") {
                    bail!("route `{}`: `...` may only end a route", t.route);
                }
                segments.push(match s.strip_prefix(':') {
                    Some(name) if !name.is_empty() => Segment::Param(name.to_string()),
                    Some(_) => bail!("route `{}`: a `:` segment needs a name", t.route),
                    None => Segment::Literal(s.to_string()),
                });
            }
            let route = Route { raw: t.route.clone(), segments, wildcard, component: t.component.clone() };
            if let Some(dup) = routes.iter().find(|r| r.segments == route.segments && r.wildcard == route.wildcard) {
                bail!("route `{}` for `{}` duplicates the route of `{}`", t.route, t.component, dup.component);
            }
            routes.push(route);
        }
        // Most specific first: exact before wildcard; more literal segments first.
        routes.sort_by_key(|r| {
            let literals = r.segments.iter().filter(|s| matches!(s, Segment::Literal(_))).count();
            (r.wildcard, std::cmp::Reverse(r.segments.len()), std::cmp::Reverse(literals))
        });
        Ok(Self { base, routes })
    }

    /// Routes `path` (without query) to a component.
    pub fn route(&self, path: &str) -> Option<RouteMatch> {
        let rest = if self.base.is_empty() {
            path
        } else {
            let r = path.strip_prefix(&self.base)?;
            if !(r.is_empty() || r.starts_with('/')) {
                return None;
            }
            r
        };
        let parts = split(rest);
        'routes: for r in &self.routes {
            if parts.len() < r.segments.len() || (!r.wildcard && parts.len() != r.segments.len()) {
                continue;
            }
            for (seg, part) in r.segments.iter().zip(&parts) {
                if let Segment::Literal(l) = seg
                    && l != part
                {
                    continue 'routes;
                }
            }
            let matched = format!("{}/{}", self.base, parts[..r.segments.len()].join("/"));
            let tail = &parts[r.segments.len()..];
            let path_info = if tail.is_empty() {
                if r.wildcard && rest.ends_with('/') && !r.segments.is_empty() { "/".into() } else { String::new() }
            } else {
                format!("/{}{}", tail.join("/"), if rest.ends_with('/') { "/" } else { "" })
            };
            return Some(RouteMatch { component: r.component.clone(), raw_route: r.raw.clone(), matched, path_info });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router(routes: &[(&str, &str)]) -> Router {
        let t: Vec<HttpTrigger> = routes
            .iter()
            .map(|(r, c)| HttpTrigger { route: r.to_string(), private: false, component: c.to_string() })
            .collect();
        Router::new("/", &t).unwrap()
    }

    #[test]
    fn routing_table() {
        let r = router(&[("/...", "root"), ("/tick/...", "tick"), ("/health", "health"), ("/users/:id", "user")]);
        let cases = [
            ("/", Some("root")),
            ("/anything/deep", Some("root")),
            ("/tick", Some("tick")),
            ("/tick/heartbeat", Some("tick")),
            ("/ticker", Some("root")),
            ("/health", Some("health")),
            ("/health/x", Some("root")),
            ("/users/7", Some("user")),
            ("/users/7/x", Some("root")),
        ];
        for (path, want) in cases {
            assert_eq!(r.route(path).map(|m| m.component), want.map(str::to_string), "path {path}");
        }
    }

    #[test]
    fn path_info_is_the_wildcard_tail() {
        let r = router(&[("/tick/...", "tick")]);
        let m = r.route("/tick/heartbeat").unwrap();
        assert_eq!((m.matched.as_str(), m.path_info.as_str()), ("/tick", "/heartbeat"));
    }

    #[test]
    fn no_route_is_none() {
        assert!(router(&[("/a", "a")]).route("/b").is_none());
    }

    #[test]
    fn private_routes_are_not_reachable() {
        let t = [HttpTrigger { route: String::new(), private: true, component: "p".into() }];
        assert!(Router::new("/", &t).unwrap().route("/").is_none());
    }

    #[test]
    fn duplicate_routes_are_refused() {
        let t: Vec<HttpTrigger> = ["a", "b"]
            .iter()
            .map(|c| HttpTrigger { route: "/x".into(), private: false, component: c.to_string() })
            .collect();
        assert!(Router::new("/", &t).is_err());
    }

    #[test]
    fn base_prefix_applies() {
        let t = [HttpTrigger { route: "/...".into(), private: false, component: "a".into() }];
        let r = Router::new("/api", &t).unwrap();
        assert!(r.route("/api/x").is_some());
        assert!(r.route("/apix").is_none());
        assert!(r.route("/x").is_none());
    }
}
