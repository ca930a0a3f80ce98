#pragma once
#include <string>
#include <vector>

namespace kvtier {

// The figures of one GPU + host pair that the cost model prices operations with. Rates are
// in GB/s (1 GB/s == 1 byte per ns), times in microseconds or nanoseconds as named. Every
// value in a profile file carries its source (a measurement, a datasheet, or "estimate").
// The form is kept calibration-friendly: a fixed cost plus a rate per unit of work.
struct HardwareProfile {
  std::string name;
  std::string description;
  double device_memory_gib = 0;  // usable HBM for KV pool sizing

  // PCIe, one figure per direction (full duplex: the directions do not share bandwidth).
  double pcie_h2d_gbps = 0;         // bulk cudaMemcpyAsync host -> device, pinned
  double pcie_d2h_gbps = 0;         // bulk cudaMemcpyAsync device -> host, pinned
  double pcie_latency_us = 0;       // fixed cost of one transfer (one cudaMemcpyAsync)
  double zero_copy_read_gbps = 0;   // kernel reading mapped pinned host memory
  double zero_copy_write_gbps = 0;  // kernel storing to mapped pinned host memory
  double hbm_gbps = 0;              // random page reads in device memory

  double launch_us = 0;        // one kernel launch on a stream
  double graph_launch_us = 0;  // one kernel as a node of a CUDA graph

  // QSA layer compute, linear in the work.
  double indexer_ns_per_row_block = 0;  // scoring one visible block for one row
  double topk_ns_per_row_block = 0;     // top-k over one row's scores, per block
  double ensure_fixed_us = 0;           // compaction + ensure kernel, fixed part
  double ensure_ns_per_lookup = 0;      // per queried page entry
  double ensure_ns_per_slot = 0;        // victim scan, per pool slot
  double ensure_ns_per_miss = 0;        // per installed page
  double attention_fixed_us = 0;        // attend + fold fixed part (bytes priced by hbm_gbps)

  // The layers without KV pages (36 of the reference model's 48, and its MoE): they take
  // most of a decode step's time and nothing here runs them. Per forward and per token.
  double non_qsa_forward_us = 0;
  double non_qsa_token_us = 0;

  // Every value's source, by field name, in file order.
  std::vector<std::pair<std::string, std::string>> sources;

  // Throws ConfigError naming the first value that is missing or not positive.
  void validate() const;
};

// Parses a profile file: {"name": ..., "description": ..., "params": {"<field>": {"value": x,
// "source": "..."}, ...}}. Unknown fields and values without a source are errors (ConfigError).
HardwareProfile hardware_profile_from_json(const std::string& json_text);

}  // namespace kvtier
