//! The routing table: path patterns in a `matchit` radix tree, and for each
//! pattern the methods it answers, so one lookup tells a route from a 405
//! and a 404.

use std::fmt;

use super::super::RequestHead;

/// What a request's method and path lead to.
pub(super) enum Lookup<'t, 'p> {
    /// The route at this index, with the path's parameters.
    Found(usize, matchit::Params<'t, 'p>),
    /// The path exists with other methods: these, as an `Allow` value.
    NotAllowed(&'t [u8]),
    /// `OPTIONS` on a path with no `OPTIONS` route: its methods.
    Options(&'t [u8]),
    /// No pattern matches the path.
    NotFound,
}

/// One route's settings.
#[derive(Debug)]
pub(super) struct RouteInfo {
    /// The pattern as given, prefixes included.
    pub(super) pattern: Box<str>,
    /// The route's own body limit, if it declared one.
    pub(super) body_limit: Option<u64>,
    /// `METHOD pattern`, the name a stall report gives its handler.
    pub(super) label: percore::runtime::StallLabel,
}

/// The methods of one path pattern.
#[derive(Debug, Default)]
struct Endpoint {
    /// Method and route index, in the order added.
    methods: Vec<(Box<str>, usize)>,
    /// `GET, HEAD, POST`: for 405 and `OPTIONS` answers.
    allow: Vec<u8>,
}

impl Endpoint {
    fn route(&self, method: &str) -> Option<usize> {
        let find = |m: &str| self.methods.iter().find(|(name, _)| &**name == m);
        match find(method) {
            Some(&(_, index)) => Some(index),
            // A `GET` route answers `HEAD` too; the server drops the body.
            None if method == "HEAD" => find("GET").map(|&(_, index)| index),
            None => None,
        }
    }

    fn update_allow(&mut self) {
        let mut names: Vec<&str> = self.methods.iter().map(|(m, _)| &**m).collect();
        if names.contains(&"GET") && !names.contains(&"HEAD") {
            names.push("HEAD");
        }
        self.allow = names.join(", ").into_bytes();
    }
}

/// Why a route could not be added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteError {
    /// `GET /users/{id}`.
    route: String,
    why: String,
}

impl RouteError {
    pub(super) fn new(route: &str, why: &str) -> Self {
        Self {
            route: route.to_string(),
            why: why.to_string(),
        }
    }
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "route {}: {}", self.route, self.why)
    }
}

impl std::error::Error for RouteError {}

/// Every route: the tree of patterns and each route's settings.
#[derive(Debug, Default)]
pub(super) struct Table {
    tree: matchit::Router<usize>,
    endpoints: Vec<Endpoint>,
    /// Pattern to endpoint, to add a method to a known pattern.
    patterns: Vec<Box<str>>,
    pub(super) routes: Vec<RouteInfo>,
}

impl Table {
    /// Adds `method pattern` as route number `routes.len()`.
    pub(super) fn add(&mut self, method: &str, pattern: String) -> Result<(), RouteError> {
        let error = |why: String| RouteError {
            route: format!("{method} {pattern}"),
            why,
        };
        if !pattern.starts_with('/') {
            return Err(error("a pattern starts with `/`".into()));
        }
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase() || b == b'-') {
            return Err(error("a method is an upper-case token, e.g. `GET`".into()));
        }
        let index = self.routes.len();
        let endpoint = match self.patterns.iter().position(|p| **p == *pattern) {
            Some(endpoint) => endpoint,
            None => {
                let endpoint = self.endpoints.len();
                self.tree
                    .insert(pattern.clone(), endpoint)
                    .map_err(|e| error(e.to_string()))?;
                self.endpoints.push(Endpoint::default());
                self.patterns.push(pattern.clone().into());
                endpoint
            }
        };
        let methods = &mut self.endpoints[endpoint];
        if methods.methods.iter().any(|(m, _)| &**m == method) {
            return Err(error("defined twice".into()));
        }
        methods.methods.push((method.into(), index));
        methods.update_allow();
        self.routes.push(RouteInfo {
            label: percore::runtime::StallLabel::new(&format!("{method} {pattern}")),
            pattern: pattern.into(),
            body_limit: None,
        });
        Ok(())
    }

    /// Where `method path` leads.
    pub(super) fn find<'t, 'p>(&'t self, method: &str, path: &'p str) -> Lookup<'t, 'p> {
        let Ok(found) = self.tree.at(path) else {
            return Lookup::NotFound;
        };
        let endpoint = &self.endpoints[*found.value];
        match endpoint.route(method) {
            Some(index) => Lookup::Found(index, found.params),
            None if method == "OPTIONS" => Lookup::Options(&endpoint.allow),
            None => Lookup::NotAllowed(&endpoint.allow),
        }
    }

    /// The body limit of the route `head` leads to, if it declared one.
    pub(super) fn body_limit(&self, head: &RequestHead<'_, '_>) -> Option<u64> {
        match self.find(head.method, head.path()) {
            Lookup::Found(index, _) => self.routes[index].body_limit,
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(routes: &[(&str, &str)]) -> Table {
        let mut table = Table::default();
        for (method, pattern) in routes {
            table.add(method, (*pattern).to_string()).expect("a route");
        }
        table
    }

    fn found(table: &Table, method: &str, path: &str) -> Option<(usize, Vec<(String, String)>)> {
        match table.find(method, path) {
            Lookup::Found(i, params) => Some((
                i,
                params
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )),
            _ => None,
        }
    }

    #[test]
    fn methods_share_a_pattern_and_head_falls_back_to_get() {
        let t = table(&[("GET", "/users/{id}"), ("DELETE", "/users/{id}")]);
        assert_eq!(
            found(&t, "GET", "/users/7"),
            Some((0, vec![("id".into(), "7".into())]))
        );
        assert_eq!(found(&t, "HEAD", "/users/7").map(|f| f.0), Some(0));
        assert_eq!(found(&t, "DELETE", "/users/7").map(|f| f.0), Some(1));
        match t.find("POST", "/users/7") {
            Lookup::NotAllowed(allow) => assert_eq!(allow, b"GET, DELETE, HEAD"),
            _ => panic!("expected 405"),
        }
        match t.find("OPTIONS", "/users/7") {
            Lookup::Options(allow) => assert_eq!(allow, b"GET, DELETE, HEAD"),
            _ => panic!("expected the OPTIONS answer"),
        }
        assert!(matches!(t.find("GET", "/users"), Lookup::NotFound));
    }

    #[test]
    fn a_head_route_wins_over_get() {
        let t = table(&[("GET", "/"), ("HEAD", "/")]);
        assert_eq!(found(&t, "HEAD", "/").map(|f| f.0), Some(1));
    }

    #[test]
    fn trailing_slashes_and_catch_alls() {
        let t = table(&[("GET", "/files/{*rest}"), ("GET", "/users")]);
        assert_eq!(
            found(&t, "GET", "/files/a/b.txt"),
            Some((0, vec![("rest".into(), "a/b.txt".into())]))
        );
        assert!(found(&t, "GET", "/users/").is_none());
        assert!(found(&t, "GET", "/users").is_some());
    }

    #[test]
    fn conflicts_and_bad_patterns_are_refused() {
        let mut t = table(&[("GET", "/users/{id}")]);
        let twice = t.add("GET", "/users/{id}".into()).unwrap_err();
        assert_eq!(twice.to_string(), "route GET /users/{id}: defined twice");
        let conflict = t.add("GET", "/users/{name}".into()).unwrap_err();
        assert!(
            conflict
                .to_string()
                .starts_with("route GET /users/{name}: "),
            "{conflict}"
        );
        assert!(t.add("GET", "users".into()).is_err());
        assert!(t.add("get", "/x".into()).is_err());
        // A failed add leaves the table as it was.
        assert_eq!(t.routes.len(), 1);
    }
}
