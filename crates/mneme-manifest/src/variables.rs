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
    pub fn resolve(defs: &BTreeMap<String, VariableDef>, env: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        let mut values = HashMap::new();
        for (name, def) in defs {
            let from_env = env(&format!("SPIN_VARIABLE_{}", name.to_ascii_uppercase()));
            let value = from_env.or_else(|| def.default.clone());
            if def.required && value.is_none() {
                bail!("variable `{name}` is required; set SPIN_VARIABLE_{}", name.to_ascii_uppercase());
            }
            values.insert(name.clone(), value);
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
    fn required_without_value_fails_with_the_env_name() {
        let err = AppVariables::resolve(&defs(&[("api_key", None, true)]), &|_| None).unwrap_err();
        assert!(err.to_string().contains("SPIN_VARIABLE_API_KEY"));
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
