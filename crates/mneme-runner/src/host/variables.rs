//! `spin:variables/variables@3.0.0`: a component reads only the variables
//! it declares under `[component.<id>.variables]`.

use wasmtime::component::Accessor;

use super::spin::variables::variables::{Error, HostWithStore};
use super::{Spin, SpinView, with_view};

impl<T> HostWithStore<T> for Spin {
    async fn get(accessor: &Accessor<T, Self>, name: String) -> wasmtime::Result<Result<String, Error>> {
        if !crate::manifest::is_snake_name(&name) {
            return Ok(Err(Error::InvalidName(name)));
        }
        Ok(with_view!(accessor, |v| match v.ctx.caps.variables.get(&name) {
            Some(Some(value)) => Ok(value.clone()),
            Some(None) | None => Err(Error::Undefined(format!("no variable for \"{name}\""))),
        }))
    }
}

impl super::spin::variables::variables::Host for SpinView<'_> {}
