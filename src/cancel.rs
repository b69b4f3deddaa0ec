//! `pgrun cancel PIDFILE`.
use crate::cli::CancelArgs;
pub struct CancelExit(u8);
impl CancelExit {
    pub fn code(&self) -> u8 {
        self.0
    }
}
pub fn cancel(_args: &CancelArgs) -> CancelExit {
    CancelExit(125)
}
