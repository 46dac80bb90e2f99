//! Table activations ([`QTable`]) on the accelerator: the stock ALU has no lookup operation,
//! so the back end refuses the layer and it runs on the CPU, by lookup, exactly. An ALU with
//! an activation lookup table maps this layer here.

use super::net::{NetBuilder, Tensor};
use super::BackendError;
use crate::qlayer::QTable;

impl NetBuilder {
    /// Adds a table activation reading `x`: refused, since this ALU has no lookup table.
    pub fn table(&mut self, layer: &QTable, _x: Tensor) -> Result<Tensor, BackendError> {
        Err(BackendError::Unsupported {
            layer: layer.name.clone(),
            config: self.config().config_string(),
            reason: format!(
                "the ALU has no activation lookup table for {} (the table runs on the CPU)",
                layer.function
            ),
        })
    }
}
