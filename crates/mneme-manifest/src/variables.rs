//! Application variables and their per-component templates, resolved as
//! Spin resolves them: the env provider (`SPIN_VARIABLE_<NAME>`) wins over
//! the manifest default; a required variable with no value stops the app at
//! load; a component sees only the variables it declares, each a template
//! over application variables (`"{{ pg_url }}"`, `"prefix-{{ x }}"`).
//! Secret values are never printed.

use std::collections::{BTreeMap, HashMap};

use anyhow::{Result, bail};

use crate::manifest::VariableDef;

/// Resolved application variables.
#[derive(Debug, Clone, Default)]
pub struct AppVariables {
    values: HashMap<String, Option<String>>,
}

impl AppVariables {
    /// Resolves every application variable from the environment provider
    /// (`SPIN_VARIABLE_<NAME>`, looked up through `env`) and the defaults.
    pub fn resolve(defs: &BTreeMap<String, VariableDef>, env: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        Self::resolve_with(defs, &HashMap::new(), env)
    }

    /// As [`Self::resolve`], with `spin up --variable` values first: Spin
    /// consults them before every other provider (`crates/runtime-factors`).
    /// A required variable no provider resolves stops the app, in Spin's
    /// words (`crates/expressions`), with the names to set.
    pub fn resolve_with(
        defs: &BTreeMap<String, VariableDef>,
        cli: &HashMap<String, String>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let mut values = HashMap::new();
        let mut unresolved = Vec::new();
        for (name, def) in defs {
            let value = cli.get(name).cloned().or_else(|| env(&env_name(name))).or_else(|| def.default.clone());
            if def.required && value.is_none() {
                unresolved.push(name.as_str());
            }
            values.insert(name.clone(), value);
        }
        if !unresolved.is_empty() {
            let hint: Vec<String> = unresolved.iter().map(|n| env_name(n)).collect();
            bail!(
                "provider error: no provider resolved required variable(s): {unresolved:?}\n\
                 (set {} in the environment, or pass --variable {}=VALUE)",
                hint.join(", "),
                unresolved[0]
            );
        }
        Ok(Self { values })
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).and_then(|v| v.as_deref())
    }

    /// Expands `{{ name }}` references in `template`.
    pub fn expand(&self, template: &str) -> Result<String> {
        let mut out = String::new();
        let mut rest = template;
        while let Some(start) = rest.find("{{") {
            out.push_str(&rest[..start]);
            let Some(end) = rest[start..].find("}}") else { bail!("unclosed `{{{{` in `{template}`") };
            let name = rest[start + 2..start + end].trim();
            if !self.values.contains_key(name) {
                bail!("`{template}` refers to `{name}`, which is not an application variable");
            }
            match self.get(name) {
                Some(v) => out.push_str(v),
                None => bail!("variable `{name}` has no value"),
            }
            rest = &rest[start + end + 2..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// Checks, at load, that every template only names known variables.
    pub fn check_template(&self, template: &str) -> Result<()> {
        let mut rest = template;
        while let Some(start) = rest.find("{{") {
            let Some(end) = rest[start..].find("}}") else { bail!("unclosed `{{{{` in `{template}`") };
            let name = rest[start + 2..start + end].trim();
            if !self.values.contains_key(name) {
                bail!("`{template}` refers to `{name}`, which is not an application variable");
            }
            rest = &rest[start + end + 2..];
        }
        Ok(())
    }
}

/// The environment variable Spin's env provider reads for `name`.
pub fn env_name(name: &str) -> String {
    format!("SPIN_VARIABLE_{}", name.to_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defs(list: &[(&str, Option<&str>, bool)]) -> BTreeMap<String, VariableDef> {
        list.iter()
            .map(|(n, d, req)| {
                (n.to_string(), VariableDef { default: d.map(str::to_string), required: *req, ..Default::default() })
            })
            .collect()
    }

    #[test]
    fn env_overrides_default() {
        let env = |k: &str| (k == "SPIN_VARIABLE_PG_URL").then(|| "from-env".to_string());
        let v = AppVariables::resolve(&defs(&[("pg_url", Some("dflt"), false)]), &env).unwrap();
        assert_eq!(v.get("pg_url"), Some("from-env"));
    }

    #[test]
    fn required_without_value_fails_in_spins_words_with_the_env_name() {
        let err = AppVariables::resolve(&defs(&[("api_key", None, true), ("b", None, true)]), &|_| None)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(r#"provider error: no provider resolved required variable(s): ["api_key", "b"]"#),
            "{err}"
        );
        assert!(err.contains("SPIN_VARIABLE_API_KEY"), "{err}");
    }

    #[test]
    fn command_line_values_come_before_the_environment() {
        let env = |k: &str| (k == "SPIN_VARIABLE_PG_URL").then(|| "from-env".to_string());
        let cli = HashMap::from([("pg_url".to_string(), "from-cli".to_string())]);
        let d = defs(&[("pg_url", Some("dflt"), false), ("api_key", None, true)]);
        let cli_key =
            HashMap::from([("api_key".to_string(), "k".to_string()), ("pg_url".to_string(), "c".to_string())]);
        assert!(AppVariables::resolve_with(&d, &cli, &env).is_err(), "api_key is still missing");
        let v = AppVariables::resolve_with(&d, &cli_key, &env).unwrap();
        assert_eq!((v.get("pg_url"), v.get("api_key")), (Some("c"), Some("k")));
        let v = AppVariables::resolve_with(&defs(&[("pg_url", Some("dflt"), false)]), &cli, &env).unwrap();
        assert_eq!(v.get("pg_url"), Some("from-cli"));
    }

    #[test]
    fn templates_expand_and_reject_unknown_names() {
        let v = AppVariables::resolve(&defs(&[("a", Some("x"), false), ("b", None, false)]), &|_| None).unwrap();
        assert_eq!(v.expand("pre-{{ a }}-{{a}}").unwrap(), "pre-x-x");
        assert!(v.expand("{{ nope }}").is_err());
        assert!(v.expand("{{ b }}").is_err(), "a variable with no value cannot be read");
        assert!(v.check_template("{{ b }}").is_ok(), "but it may be declared");
        assert!(v.check_template("{{ a").is_err());
    }
}
