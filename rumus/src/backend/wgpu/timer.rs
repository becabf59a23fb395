//! GPU timing for benchmarks: timestamp queries around recorded work.

use super::WgpuBackend;
use crate::{Error, Result};

impl WgpuBackend {
    /// Runs `work` (which records kernels on this backend) and returns the GPU time it took, in
    /// seconds, from timestamp queries written before and after it. Without TIMESTAMP_QUERY it
    /// returns the wall time between two full synchronisations instead. For benchmarks.
    pub fn time_gpu(&self, work: impl FnOnce() -> Result<()>) -> Result<f64> {
        if !self.ctx.timestamps {
            self.synchronize()?;
            let start = std::time::Instant::now();
            work()?;
            self.synchronize()?;
            return Ok(start.elapsed().as_secs_f64());
        }
        let queries = self.ctx.device.create_query_set(&::wgpu::QuerySetDescriptor {
            label: Some("rumus timer"),
            ty: ::wgpu::QueryType::Timestamp,
            count: 2,
        });
        let resolved = self.ctx.device.create_buffer(&::wgpu::BufferDescriptor {
            label: Some("rumus timer"),
            size: 16,
            usage: ::wgpu::BufferUsages::QUERY_RESOLVE | ::wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        // Empty passes that only write a timestamp bracket the recorded work in queue order.
        let mark = |begin: Option<u32>, end: Option<u32>| {
            self.recorder.record(&self.ctx, |enc| {
                let _pass = enc.begin_compute_pass(&::wgpu::ComputePassDescriptor {
                    label: Some("rumus timer"),
                    timestamp_writes: Some(::wgpu::ComputePassTimestampWrites {
                        query_set: &queries,
                        beginning_of_pass_write_index: begin,
                        end_of_pass_write_index: end,
                    }),
                });
            })
        };
        mark(Some(0), None);
        work()?;
        mark(None, Some(1));
        self.recorder.record(&self.ctx, |enc| enc.resolve_query_set(&queries, 0..2, &resolved, 0));
        let bytes = self.recorder.read(&self.ctx, &resolved, 0, 16)?;
        let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&bytes);
        let &[start, end] = ticks.as_slice() else {
            return Err(Error::Gpu(format!("timer read {} timestamps, expected 2", ticks.len())));
        };
        let period_ns = self.ctx.queue.get_timestamp_period() as f64;
        Ok(end.saturating_sub(start) as f64 * period_ns * 1e-9)
    }
}
