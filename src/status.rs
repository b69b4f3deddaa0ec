//! `pgrun status PIDFILE`.
use crate::cli::StatusArgs;
pub struct StatusExit(u8);
impl StatusExit {
    pub fn code(&self) -> u8 {
        self.0
    }
}
pub fn status(_args: &StatusArgs) -> StatusExit {
    StatusExit(4)
}
