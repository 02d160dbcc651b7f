#pragma once
// Which GPU a process of a sharded run uses: its node-local rank modulo the devices it can see,
// made current before anything creates a CUDA context. Every choice is recorded in the result
// file's provenance (experiments/harness/shard_run.hpp), so two shards on one device show it.

#include <string>

namespace moefin {

struct DevicePick {
  bool selected = false; // cudaSetDevice ran
  int local_rank = 0;
  int ordinal = 0, visible = 0;
  std::string rule;             // e.g. "local rank 3 mod 2 visible devices = device 1"
  std::string pci_bus_id, uuid; // of the picked device ("GPU-xxxxxxxx-...")
  std::string reason;           // why none was selected (no CUDA, no device)
};

/// Sets device `local_rank % visible` current. Without CUDA or without a device nothing is
/// selected and `reason` says why (the experiment's own device check then reports it); a failing
/// cudaSetDevice is a DeviceError.
DevicePick pick_device(int local_rank);

} // namespace moefin
