//! Table activations ([`QTable`]) on the accelerator: with the ALU's activation lookup table
//! (configs with `ALU_LUT`) the layer runs there, bit-exact, through [`super::lut`]; the stock
//! ALU has no lookup operation, so then the back end refuses the layer and it runs on the
//! CPU, by lookup, exactly.

use super::lut::TableActivation;
use super::net::{NetBuilder, Tensor};
use super::BackendError;
use crate::qlayer::QTable;

impl NetBuilder {
    /// Adds a table activation reading `x`: on the activation lookup table when the config
    /// has one, else refused.
    pub fn table(&mut self, layer: &QTable, x: Tensor) -> Result<Tensor, BackendError> {
        super::check_acc8_reads(self.config(), &layer.name)?;
        if !self.config().alu_lut {
            return Err(BackendError::Unsupported {
                layer: layer.name.clone(),
                config: self.config().config_string(),
                reason: format!(
                    "the ALU has no activation lookup table for {} (the table runs on the CPU; \
                     a config with ALU_LUT, such as the preset 'lut', runs it on the accelerator)",
                    layer.function
                ),
            });
        }
        let t =
            TableActivation::from_qtable(layer).map_err(|reason| BackendError::InvalidLayer {
                layer: layer.name.clone(),
                reason,
            })?;
        self.table_activation(&t, x)
    }
}
