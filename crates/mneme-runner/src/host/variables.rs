//! `spin:variables/variables@3.0.0`: a component reads only the variables
//! it declares under `[component.<id>.variables]`, and is refused in
//! Spin's words (`crates/factor-variables`, `crates/expressions`).

use wasmtime::component::Accessor;

use super::spin::variables::variables::{Error, HostWithStore};
use super::{Spin, SpinView, with_view};

impl<T> HostWithStore<T> for Spin {
    async fn get(accessor: &Accessor<T, Self>, name: String) -> wasmtime::Result<Result<String, Error>> {
        if let Some(reason) = crate::manifest::variable_name_problem(&name) {
            return Ok(Err(Error::InvalidName(format!("{name:?}: {reason}"))));
        }
        let span = super::span(accessor, "spin_variables.get");
        Ok(super::finish(
            span,
            with_view!(accessor, |v| match v.ctx.caps.variables.get(&name) {
                Some(Some(value)) => Ok(value.clone()),
                Some(None) => Err(Error::Provider(format!("no provider resolved required variable {name:?}"))),
                None => Err(Error::Undefined(format!("no variable for {:?}.{name:?}", v.ctx.caps.component))),
            }),
        ))
    }
}

impl super::spin::variables::variables::Host for SpinView<'_> {}
