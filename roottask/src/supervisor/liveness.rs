//! Stuck components: CPU time without progress (module docs, "Liveness").

use super::Supervisor;
use component_runtime::liveness::{Verdict, Watch};
use component_runtime::{error, log};

impl Supervisor<'_, '_> {
    /// Samples every watched component; restarts (or reports) the stuck.
    pub(super) fn check_liveness(&mut self) {
        let per_ms = component_runtime::time::tsc_per_ms().max(1);
        for position in 0..self.watches.len() {
            let limit_ms = self.system.component(position).hang_cpu_ms;
            if limit_ms == 0 || self.policy.kept_stopped(position) {
                continue;
            }
            let (Some(tcb), Some(progress)) = (self.system.instances[position].tcb, self.system.progress(position))
            else {
                continue;
            };
            let cpu = sel4::benchmark_thread_utilisation(tcb);
            let watch = self.watches[position].get_or_insert(Watch::new(limit_ms as u64 * per_ms));
            let Verdict::Stuck { cpu } = watch.observe(progress, cpu) else { continue };
            let name = self.system.instances[position].name.clone();
            if self.system.is_log_server(position) {
                // It prints nothing more: say it directly.
                component_runtime::console::set_log_ring_enabled(false);
            }
            let given = cpu / per_ms;
            if self.system.instances[position].restartable {
                log!("component {name} is stuck: {given} ms of CPU without progress (limit {limit_ms} ms): restarting it");
                let _ = sel4::tcb_suspend(tcb);
                self.died(position);
                self.schedule_restart(position);
            } else {
                error!("component {name} is stuck: {given} ms of CPU without progress (limit {limit_ms} ms); not restartable");
            }
        }
    }
}
